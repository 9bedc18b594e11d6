"""Intel event names from Intel's perfmon tables (pmutop.pmu.perfmon) and `pmutop events`
(pmutop.app.commands.events)."""

from __future__ import annotations

import json
import os
import shutil
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers.flags import SHARED_PERFMON
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot
from test_hardening_download import Serve, certificate, serve_https, valid_site  # noqa: F401  (fixtures: serve)

from pmutop.app.commands.events import events_main, run_events
from pmutop.app.options import events_parser
from pmutop.core.errors import PmutopError, UsageError
from pmutop.core.sysroot import Sysroot
from pmutop.hw.platform import HostPlatform
from pmutop.pmu.cpuid_decode import CpuIdentity
from pmutop.pmu.events import ARCH_EVENTS, EventSpec
from pmutop.pmu.perfmon import (
    NO_TABLES_HINT,
    PERFMON_URL,
    AnyThreadSpec,
    IntelEvent,
    PerfmonTables,
    Resolver,
    cache_dir,
    cpuid_string,
    download,
    load_events,
    parse_mapfile,
    to_spec,
)
from pmutop.pmu.registers import RawEvent

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "perfmon"
A_CORE = FIXTURES / "A" / "events" / "a_core.json"  # bare JSON array
B_CORE = FIXTURES / "B" / "events" / "b_core.json"  # {"Header", "Events"}
C_CORE = FIXTURES / "C" / "events" / "c_core.json"  # Nehalem-style 1-based fixed counter labels


def ident(family: int, model: int, stepping: int, vendor: str = "GenuineIntel") -> CpuIdentity:
    return CpuIdentity(
        vendor=vendor,
        family=family,
        model=model,
        stepping=stepping,
        brand=None,
        max_leaf=0x20,
        hypervisor=False,
        hypervisor_vendor=None,
        pdcm=True,
        hybrid=False,
        uarch=None,
    )


SKX = ident(6, 0x55, 4)
CLX = ident(6, 0x55, 7)
ADL = ident(6, 0x97, 2)
SPR = ident(6, 0x8F, 8)


def table_spec(name: str) -> EventSpec:
    return EventSpec(name, None, from_tables=True)


@pytest.fixture(autouse=True)
def _no_user_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # The user's own cache or environment must not leak into lookups.
    monkeypatch.delenv("PMUTOP_PERFMON_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


@pytest.fixture
def fixture_tables() -> PerfmonTables:
    return PerfmonTables(FIXTURES)


@pytest.fixture
def real_tables() -> PerfmonTables:
    if not (SHARED_PERFMON / "mapfile.csv").is_file():
        pytest.skip("shared/perfmon (Intel's perfmon tables) is not present")
    return PerfmonTables(SHARED_PERFMON)


# --- the fixture tables (always run) ----------------------------------------------------------------


def test_bare_array_and_header_formats_both_load() -> None:
    a = load_events(A_CORE)
    b = load_events(B_CORE)
    assert len(a) == 12
    assert a["INST_RETIRED.ANY"].description == "Fixture A: instructions retired."
    assert b["INST_RETIRED.ANY"].description == "Fixture B: instructions retired."
    # The entry whose EventCode is "zz" is skipped; the other ten load.
    assert "FIXTURE.MALFORMED" not in b
    assert len(b) == 10


def test_event_fields_decode(fixture_tables: PerfmonTables) -> None:
    a = load_events(A_CORE)
    stall = a["UOPS_ISSUED.STALL_CYCLES"]
    assert (stall.event_code, stall.umask, stall.cmask, stall.inv, stall.edge) == (0x0E, 0x01, 1, True, False)
    clears = a["MACHINE_CLEARS.COUNT"]
    assert (clears.event_code, clears.umask, clears.cmask, clears.inv, clears.edge) == (0xC3, 0x01, 1, False, True)
    assert to_spec(stall).raw == RawEvent(0x0E, 0x01, 1, inv=True)
    assert to_spec(stall).raw.config == 0x0180010E  # type: ignore[union-attr]
    assert a["BR_MISP_EXEC.ALL_BRANCHES"].deprecated is True
    assert a["LONGEST_LAT_CACHE.MISS"].deprecated is False
    b = load_events(B_CORE)
    assert b["BR_INST_RETIRED.COND"].event_code == 0xC4  # spelled "0XC4"


def test_counters_bitmask() -> None:
    a = load_events(A_CORE)
    # Counter 0-3 but CounterHTOff 0-7, the whole core: any counter.
    assert a["LONGEST_LAT_CACHE.MISS"].counters is None
    assert a["MEM_LOAD_RETIRED.L3_MISS"].counters == 0b1111
    assert a["L1D_PEND_MISS.PENDING_CYCLES"].counters == 0b100
    b = load_events(B_CORE)
    assert b["MEM_LOAD_RETIRED.L3_MISS"].counters is None
    assert b["L1D_PEND_MISS.L2_STALLS"].counters == 0b1111
    assert b["MEM_TRANS_RETIRED.LOAD_LATENCY_GT_4"].counters == 0b1111_1110
    spec = to_spec(b["L1D_PEND_MISS.L2_STALLS"])
    assert (spec.counters, spec.raw, spec.from_tables) == (0b1111, RawEvent(0x48, 0x04), True)


def test_fixed_counters() -> None:
    a, b, c = load_events(A_CORE), load_events(B_CORE), load_events(C_CORE)
    assert a["INST_RETIRED.ANY"].fixed_counter == 0
    assert a["CPU_CLK_UNHALTED.THREAD"].fixed_counter == 1
    assert b["TOPDOWN.SLOTS"].fixed_counter == 3
    assert a["LONGEST_LAT_CACHE.MISS"].fixed_counter is None
    # Nehalem-era tables say "Fixed counter 1" for IA32_FIXED_CTR0.
    assert [c[n].fixed_counter for n in ("INST_RETIRED.ANY", "CPU_CLK_UNHALTED.THREAD", "CPU_CLK_UNHALTED.REF")] == [
        0,
        1,
        2,
    ]
    spec = to_spec(b["TOPDOWN.SLOTS"])
    assert (spec.name, spec.raw, spec.fixed_index, spec.counters) == ("TOPDOWN.SLOTS", None, 3, None)
    assert a["INST_RETIRED.ANY"].encoding == "fixed 0"


def test_offcore_pairs_keep_the_first_code_and_umask() -> None:
    b = load_events(B_CORE)
    ocr = b["OCR.DEMAND_DATA_RD.L3_HIT"]
    assert (ocr.event_code, ocr.paired_code, ocr.msr_index, ocr.msr_value) == (0x2A, 0x2B, (0x1A6, 0x1A7), 0x1F803C0001)
    multi = b["OCR.DEMAND_DATA_RD.ANY_RESPONSE"]
    assert (multi.event_code, multi.umask, multi.paired_code, multi.needs_msr) == (0xB7, 0x01, None, True)
    a = load_events(A_CORE)
    old = a["OFFCORE_RESPONSE"]  # MSRIndex "0" and Offcore "0": only the code pair says it needs the MSR
    assert (old.event_code, old.paired_code, old.msr_index, old.needs_msr) == (0xB7, 0xBB, (), True)
    assert a["LONGEST_LAT_CACHE.MISS"].needs_msr is False


@pytest.mark.parametrize(
    ("path", "name", "detail"),
    [
        (A_CORE, "OFFCORE_RESPONSE", "(offcore response MSR_OFFCORE_RSP_0/1, 0x1a6/0x1a7)"),
        (
            A_CORE,
            "OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE",
            "(MSR_OFFCORE_RSP_0/MSR_OFFCORE_RSP_1 0x1a6/0x1a7 = 0x10001)",
        ),
        (B_CORE, "MEM_TRANS_RETIRED.LOAD_LATENCY_GT_4", "(MSR_PEBS_LD_LAT_THRESHOLD 0x3f6 = 0x4)"),
    ],
)
def test_needs_msr_is_refused_in_one_line(path: Path, name: str, detail: str) -> None:
    with pytest.raises(UsageError) as exc:
        to_spec(load_events(path)[name])
    assert str(exc.value) == (
        f"{name} needs an extra MSR {detail} that pmutop cannot program; "
        "pick another event (see `pmutop events --search WORD`)"
    )
    assert exc.value.exit_code == 2


@pytest.mark.parametrize(
    ("path", "name", "why"),
    [
        (A_CORE, "CPU_CLK_UNHALTED.THREAD_ANY", "needs the AnyThread bit, which pmutop never sets"),
        (A_CORE, "TOPDOWN_RETIRING.ALL", "counts only on fixed counter 6, and pmutop drives fixed counters 0-3"),
        (B_CORE, "ITLB_MISSES.STLB_HIT", "needs extended umask bits (UMaskExt 0x01) that pmutop cannot program"),
        (B_CORE, "FIXTURE.WIDE_CMASK", "has counter mask 0x12c, which does not fit the 8-bit PERFEVTSEL field"),
    ],
)
def test_other_unprogrammable_events(path: Path, name: str, why: str) -> None:
    ev = load_events(path)[name]
    assert ev.problem == why
    with pytest.raises(UsageError) as exc:
        to_spec(ev)
    assert str(exc.value).startswith(f"{name} {why}; pick another event")


def test_anythread_only_for_the_topdown_planner() -> None:
    """AnyThread events stay refused for --events; to_spec(any_thread=True) (the top-down planner) lets them
    through as AnyThreadSpec, and the fixed-counter limit is raised only when asked."""
    events = load_events(A_CORE)
    thread_any = events["CPU_CLK_UNHALTED.THREAD_ANY"]
    with pytest.raises(UsageError, match="needs the AnyThread bit, which pmutop never sets"):
        to_spec(thread_any)
    spec = to_spec(thread_any, any_thread=True)
    assert isinstance(spec, AnyThreadSpec) and spec.any_thread
    assert (spec.fixed_index, spec.raw, spec.key) == (1, None, "cpu_clk_unhalted_thread_any")
    plain = to_spec(events["LONGEST_LAT_CACHE.MISS"], any_thread=True)
    assert not isinstance(plain, AnyThreadSpec) and not getattr(plain, "any_thread", False)
    retiring = events["TOPDOWN_RETIRING.ALL"]  # fixed counter 6
    assert retiring.problem_for(max_fixed=16) is None
    assert to_spec(retiring, max_fixed=16).fixed_index == 6
    resolver = Resolver(PerfmonTables(FIXTURES))
    with pytest.raises(UsageError, match="AnyThread"):
        resolver.resolve(table_spec("CPU_CLK_UNHALTED.THREAD_ANY"), ident(6, 0x55, 4), None)


def test_to_spec_checks_field_widths_itself() -> None:
    ev = IntelEvent(name="MADE.UP", event_code=0x1FF, umask=0x01)
    with pytest.raises(UsageError, match=r"^MADE\.UP has event code 0x1ff, which does not fit the 8-bit"):
        to_spec(ev)


def test_mapfile_stepping_classes(fixture_tables: PerfmonTables) -> None:
    assert fixture_tables.files_for(ident(6, 0x55, 4), None) == [A_CORE]  # the uncore row is ignored
    assert fixture_tables.files_for(ident(6, 0x55, 0), None) == [A_CORE]
    assert fixture_tables.files_for(ident(6, 0x55, 7), None) == [B_CORE]
    assert fixture_tables.files_for(ident(6, 0x55, 0xB), None) == [B_CORE]
    assert fixture_tables.files_for(ident(6, 0x56, 4), None) == []
    assert fixture_tables.files_for(ident(6, 0x55, 4, vendor="AuthenticAMD"), None) == []


def test_key_without_stepping_matches_every_stepping(fixture_tables: PerfmonTables) -> None:
    for stepping in (0, 2, 0xF):
        assert fixture_tables.files_for(ident(6, 0x97, stepping), 0x40) == [B_CORE]
    assert fixture_tables.files_for(ident(6, 0x1A, 5), None) == [C_CORE]


def test_model_is_unpadded_hex_like_perf(fixture_tables: PerfmonTables) -> None:
    # Intel's mapfile has "GenuineIntel-18-1" rows (family 18 decimal, model 1 without padding).
    assert cpuid_string(ident(18, 1, 0)) == "GenuineIntel-18-1-0"
    assert cpuid_string(SKX) == "GenuineIntel-6-55-4"
    assert fixture_tables.files_for(ident(18, 1, 0), None) == [B_CORE]
    assert fixture_tables.files_for(ident(6, 1, 0), None) == []


def test_hybrid_row_choice(fixture_tables: PerfmonTables) -> None:
    assert fixture_tables.files_for(ADL, 0x20) == [A_CORE]
    assert fixture_tables.files_for(ADL, 0x40) == [B_CORE]
    assert fixture_tables.notes == []
    assert fixture_tables.files_for(ADL, None) == [B_CORE]
    assert fixture_tables.notes == [
        "hybrid CPU model but no core type from CPUID 0x1A: using the Core (0x40) event table"
    ]


def test_two_atom_tables_told_apart_by_native_model_id(fixture_tables: PerfmonTables) -> None:
    arl = ident(6, 0xC5, 2)
    assert fixture_tables.files_for(arl, 0x20, native_model_id=0x000002) == [C_CORE]
    assert fixture_tables.files_for(arl, 0x20, native_model_id=0x000003) == [A_CORE]
    assert fixture_tables.notes == []
    assert fixture_tables.files_for(arl, 0x20) == [A_CORE]
    assert fixture_tables.notes == ["several Atom (0x20) event tables for this model: using a_core.json (Atom)"]


def test_mapfile_paths_cannot_leave_the_root() -> None:
    text = (
        "Family-model,Version,Filename,EventType,Core Type,Native Model ID,Core Role Name\n"
        "GenuineIntel-6-55,V1,/../../etc/evil.json,core,,,\n"
        "GenuineIntel-6-55,V1,/SKX/events/skylakex_core.json,core,,,\n"
    )
    rows = parse_mapfile(text)
    assert [r.filename for r in rows] == ["/SKX/events/skylakex_core.json"]


def test_events_for_is_per_core_type(fixture_tables: PerfmonTables) -> None:
    e_core = fixture_tables.events_for(ADL, 0x20)
    p_core = fixture_tables.events_for(ADL, 0x40)
    assert e_core["MEM_LOAD_RETIRED.L3_MISS"].counters == 0b1111
    assert p_core["MEM_LOAD_RETIRED.L3_MISS"].counters is None
    assert "TOPDOWN.SLOTS" in p_core and "TOPDOWN.SLOTS" not in e_core


def test_load_events_is_cached_per_file_version(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    shutil.copy(A_CORE, path)
    first = load_events(path)
    assert load_events(path) is first
    path.write_text(json.dumps([{"EventCode": "0x3C", "UMask": "0x00", "EventName": "X.Y", "Counter": "0"}]))
    second = load_events(path)
    assert list(second) == ["X.Y"]


def test_load_events_errors_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(PmutopError, match=r"cannot read Intel event table .*missing\.json: No such file"):
        load_events(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("<html>not json</html>")
    with pytest.raises(PmutopError, match=r"bad\.json is not a valid perfmon table: Expecting value") as exc:
        load_events(bad)
    assert "\n" not in str(exc.value)
    obj = tmp_path / "obj.json"
    obj.write_text('{"Header": {}}')
    with pytest.raises(PmutopError, match=r"obj\.json is not a valid perfmon table: no event list"):
        load_events(obj)


# --- Resolver ----------------------------------------------------------------------------------------


def test_resolver_passes_other_events_through(fixture_tables: PerfmonTables) -> None:
    cycles = ARCH_EVENTS["cycles"]
    assert Resolver(fixture_tables).resolve(cycles, SKX, None) is cycles
    assert Resolver(None).resolve(cycles, ident(25, 0x61, 2, vendor="AuthenticAMD"), None) is cycles


def test_resolver_is_case_insensitive(fixture_tables: PerfmonTables) -> None:
    spec = Resolver(fixture_tables).resolve(table_spec("mem_load_retired.L3_Miss"), SKX, None)
    assert spec == EventSpec(
        "MEM_LOAD_RETIRED.L3_MISS",
        RawEvent(0xD1, 0x20),
        counters=0b1111,
        from_tables=True,
        description="Retired load instructions missed L3 cache as data sources",
    )
    assert spec.key == "mem_load_retired_l3_miss"


def test_resolver_unknown_name(fixture_tables: PerfmonTables) -> None:
    with pytest.raises(UsageError) as exc:
        Resolver(fixture_tables).resolve(table_spec("NOT.AN_EVENT"), CLX, None)
    assert str(exc.value) == (
        "unknown event 'NOT.AN_EVENT': not an architectural or software event, "
        "and not in Intel's tables for this CPU (b_core.json)"
    )


def test_resolver_model_not_in_mapfile(fixture_tables: PerfmonTables) -> None:
    with pytest.raises(UsageError) as exc:
        Resolver(fixture_tables).resolve(table_spec("LONGEST_LAT_CACHE.MISS"), ident(6, 0x56, 1), None)
    assert str(exc.value) == (
        f"unknown event 'LONGEST_LAT_CACHE.MISS': {FIXTURES / 'mapfile.csv'} has no core event table for "
        "GenuineIntel-6-56-1 (update the tables with `pmutop events --download`)"
    )


def test_resolver_without_tables() -> None:
    with pytest.raises(UsageError) as exc:
        Resolver(None).resolve(table_spec("LONGEST_LAT_CACHE.MISS"), SKX, None)
    assert str(exc.value) == (
        "unknown event 'LONGEST_LAT_CACHE.MISS': not an architectural or software event, and Intel event names "
        "need Intel's perfmon tables: run `pmutop events --download`, or give --perfmon-dir DIR "
        "(or set PMUTOP_PERFMON_DIR)"
    )


def test_resolver_non_intel(fixture_tables: PerfmonTables) -> None:
    amd = ident(25, 0x61, 2, vendor="AuthenticAMD")
    for tables in (fixture_tables, None):
        with pytest.raises(UsageError) as exc:
            Resolver(tables).resolve(table_spec("LONGEST_LAT_CACHE.MISS"), amd, None)
        assert str(exc.value) == (
            "unknown event 'LONGEST_LAT_CACHE.MISS': not an architectural or software event, and Intel's perfmon "
            "tables do not describe AuthenticAMD's CPUs"
        )


def test_resolver_refuses_msr_events(fixture_tables: PerfmonTables) -> None:
    with pytest.raises(UsageError, match=r"^OCR\.DEMAND_DATA_RD\.L3_HIT needs an extra MSR \(MSR_OFFCORE_RSP_0"):
        Resolver(fixture_tables).resolve(table_spec("ocr.demand_data_rd.l3_hit"), CLX, None)


# --- locating the tables ------------------------------------------------------------------------------


def test_locate_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert PerfmonTables.locate(None) is None
    cached = tmp_path / "xdg-cache" / "pmutop" / "perfmon"
    assert cache_dir() == cached
    shutil.copytree(FIXTURES, cached)
    located = PerfmonTables.locate(None)
    assert located is not None and located.root == cached
    env_dir = tmp_path / "env"
    shutil.copytree(FIXTURES, env_dir)
    monkeypatch.setenv("PMUTOP_PERFMON_DIR", str(env_dir))
    located = PerfmonTables.locate(None)
    assert located is not None and located.root == env_dir
    located = PerfmonTables.locate(str(FIXTURES))
    assert located is not None and located.root == FIXTURES


def test_cache_dir_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert cache_dir() == tmp_path / ".cache" / "pmutop" / "perfmon"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # invalid per the XDG spec: ignored
    assert cache_dir() == tmp_path / ".cache" / "pmutop" / "perfmon"


def test_locate_named_dir_without_mapfile(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    with pytest.raises(UsageError) as exc:
        PerfmonTables.locate(str(tmp_path))
    assert str(exc.value) == f"--perfmon-dir {tmp_path}: no mapfile.csv there (not a copy of Intel's perfmon tables)"
    monkeypatch.setenv("PMUTOP_PERFMON_DIR", str(tmp_path))
    with pytest.raises(UsageError, match=r"^PMUTOP_PERFMON_DIR .*: no mapfile\.csv there"):
        PerfmonTables.locate(None)


# --- Intel's real tables (shared/perfmon) -------------------------------------------------------------


def test_real_lookup_per_model(real_tables: PerfmonTables) -> None:
    assert real_tables.files_for(SKX, None) == [SHARED_PERFMON / "SKX/events/skylakex_core.json"]
    assert real_tables.files_for(CLX, None) == [SHARED_PERFMON / "CLX/events/cascadelakex_core.json"]
    assert real_tables.files_for(ADL, 0x40) == [SHARED_PERFMON / "ADL/events/alderlake_goldencove_core.json"]
    assert real_tables.files_for(ADL, 0x20) == [SHARED_PERFMON / "ADL/events/alderlake_gracemont_core.json"]
    assert real_tables.files_for(SPR, None) == [SHARED_PERFMON / "SPR/events/sapphirerapids_core.json"]
    assert real_tables.files_for(ident(18, 1, 0), 0x40) == [SHARED_PERFMON / "NVL/events/novalake_coyotecove_core.json"]


def test_real_skx_events(real_tables: PerfmonTables) -> None:
    resolver = Resolver(real_tables)
    llc = resolver.resolve(table_spec("longest_lat_cache.miss"), SKX, None)
    assert (llc.name, llc.raw, llc.counters, llc.fixed_index) == (
        "LONGEST_LAT_CACHE.MISS",
        RawEvent(0x2E, 0x41),
        None,
        None,
    )
    l3 = resolver.resolve(table_spec("MEM_LOAD_RETIRED.L3_MISS"), SKX, None)
    assert (l3.raw, l3.counters) == (RawEvent(0xD1, 0x20), 0b1111)
    stall = resolver.resolve(table_spec("UOPS_ISSUED.STALL_CYCLES"), SKX, None)
    assert stall.raw == RawEvent(0x0E, 0x01, cmask=1, inv=True)
    clears = resolver.resolve(table_spec("INT_MISC.CLEARS_COUNT"), SKX, None)
    assert clears.raw == RawEvent(0x0D, 0x01, cmask=1, edge=True)
    inst = resolver.resolve(table_spec("INST_RETIRED.ANY"), SKX, None)
    assert (inst.raw, inst.fixed_index) == (None, 0)
    with pytest.raises(UsageError) as exc:
        resolver.resolve(table_spec("OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE"), SKX, None)
    assert str(exc.value) == (
        "OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE needs an extra MSR (MSR_OFFCORE_RSP_0/MSR_OFFCORE_RSP_1 "
        "0x1a6/0x1a7 = 0x10001) that pmutop cannot program; pick another event (see `pmutop events --search WORD`)"
    )


def test_real_restricted_counters_on_spr_and_icx(real_tables: PerfmonTables) -> None:
    spr = Resolver(real_tables).resolve(table_spec("CYCLE_ACTIVITY.STALLS_L3_MISS"), SPR, None)
    assert (spr.raw, spr.counters) == (RawEvent(0xA3, 0x06, cmask=6), 0b1111)
    icx = Resolver(real_tables).resolve(table_spec("L2_RQSTS.DEMAND_DATA_RD_MISS"), ident(6, 0x6A, 6), None)
    assert (icx.raw, icx.counters) == (RawEvent(0x24, 0x21), 0b1111)
    unrestricted = Resolver(real_tables).resolve(table_spec("LONGEST_LAT_CACHE.MISS"), SPR, None)
    assert unrestricted.counters is None


def test_real_hybrid_tables_differ(real_tables: PerfmonTables) -> None:
    p = real_tables.events_for(ADL, 0x40)
    e = real_tables.events_for(ADL, 0x20)
    assert p["TOPDOWN.SLOTS"].fixed_counter == 3
    assert "TOPDOWN.SLOTS" not in e
    assert e["TOPDOWN_RETIRING.ALL"].encoding == "event=0xc2,umask=0x00"


def test_real_old_tables_number_fixed_counters_from_one(real_tables: PerfmonTables) -> None:
    nhm = real_tables.events_for(ident(6, 0x1A, 5), None)
    assert nhm["INST_RETIRED.ANY"].counter_text == "Fixed counter 1"
    assert nhm["INST_RETIRED.ANY"].fixed_counter == 0
    assert nhm["CPU_CLK_UNHALTED.REF"].fixed_counter == 2
    jkt = real_tables.events_for(ident(6, 0x2D, 7), None)  # says "Fixed counter 2" with umask 0x02
    assert jkt["CPU_CLK_UNHALTED.THREAD_ANY"].fixed_counter == 1


def test_every_real_core_table_parses(real_tables: PerfmonTables) -> None:
    files = {real_tables.path_of(r) for r in real_tables.rows() if r.event_type in ("core", "hybridcore")}
    assert len(files) >= 40
    usable = refused = 0
    for path in files:
        events = load_events(path)
        raw = json.loads(path.read_text())["Events"]
        assert len(events) == len({e["EventName"].upper() for e in raw}), path  # nothing skipped
        for ev in events.values():
            if ev.problem is None:
                spec = to_spec(ev)
                assert spec.raw is not None or spec.fixed_index is not None
                usable += 1
            else:
                refused += 1
    assert usable > 10_000 and refused > 5_000


# --- download -----------------------------------------------------------------------------------------


def test_download_fetches_mapfile_core_table_and_license(serve: Serve, tmp_path: Path) -> None:
    url = serve(FIXTURES)
    dest = tmp_path / "new" / "perfmon"
    written = download(url, dest, [(SKX, None)])
    assert written == [dest / "mapfile.csv", dest / "A/events/a_core.json", dest / "LICENSE"]
    for path in written:
        assert path.read_bytes() == (FIXTURES / path.relative_to(dest)).read_bytes()
    assert sorted(p.name for p in dest.rglob("*") if p.is_file()) == ["LICENSE", "a_core.json", "mapfile.csv"]
    assert {p.stat().st_mode & 0o777 for p in written} == {0o644}
    located = PerfmonTables.locate(str(dest))
    assert located is not None and located.files_for(SKX, None) == [dest / "A/events/a_core.json"]


def test_download_takes_both_halves_of_a_hybrid_model(serve: Serve, tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    written = download(serve(valid_site(tmp_path / "site")), dest, [(ADL, 0x20), (ADL, 0x40)])
    assert written == [
        dest / "mapfile.csv",
        dest / "A/events/a_core.json",
        dest / "B/events/b_core.json",
        dest / "LICENSE",
    ]


def test_download_without_license(serve: Serve, tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    (site / "LICENSE").unlink()
    written = download(serve(site), tmp_path / "out", [(CLX, None)])
    assert written == [tmp_path / "out/mapfile.csv", tmp_path / "out/B/events/b_core.json"]


def test_download_404_names_the_url_and_writes_nothing(serve: Serve, tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(FIXTURES, site)
    (site / "B/events/b_core.json").unlink()
    url = serve(site)
    dest = tmp_path / "out"
    with pytest.raises(PmutopError) as exc:
        download(url, dest, [(CLX, None)])
    assert str(exc.value) == f"cannot download {url}/B/events/b_core.json: HTTP 404 File not found"
    assert not (dest / "mapfile.csv").exists()


def test_download_connection_refused(tmp_path: Path) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"https://127.0.0.1:{port}"
    with pytest.raises(PmutopError) as exc:
        download(url, tmp_path, [(SKX, None)])
    assert str(exc.value) == f"cannot download {url}/mapfile.csv: Connection refused"


def test_download_bad_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # no directory called example.com here
    with pytest.raises(UsageError) as exc:
        download("example.com/perfmon", tmp_path, [(SKX, None)])
    assert str(exc.value) == (
        "--perfmon-url example.com/perfmon: no such directory (give an https:// URL or a local directory)"
    )


def test_download_refuses_a_non_mapfile(serve: Serve, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "mapfile.csv").write_text("<html>captive portal</html>")
    url = serve(site)
    with pytest.raises(PmutopError) as exc:
        download(url, tmp_path / "out", [(SKX, None)])
    assert str(exc.value) == f"cannot download {url}/mapfile.csv: the answer is not a perfmon mapfile.csv"


def test_download_real_tables(serve: Serve, real_tables: PerfmonTables, tmp_path: Path) -> None:
    written = download(serve(SHARED_PERFMON), tmp_path, [(SKX, None)])
    rel = [str(p.relative_to(tmp_path)) for p in written]
    assert rel == ["mapfile.csv", "SKX/events/skylakex_core.json", "LICENSE"]
    assert (tmp_path / rel[1]).read_bytes() == (SHARED_PERFMON / rel[1]).read_bytes()


def test_default_url() -> None:
    assert PERFMON_URL == "https://raw.githubusercontent.com/intel/perfmon/main"


# --- pmutop events ------------------------------------------------------------------------------------


@pytest.fixture
def skx_platform(tmp_path: Path) -> HostPlatform:
    root = build_sysroot(tmp_path / "sysroot", [0, 1, 2, 3], SKYLAKE_X_LEAVES)
    return HostPlatform(Sysroot(root))


def _events(platform: Any, **kw: Any) -> str:
    args: dict[str, Any] = {
        "search": None,
        "as_json": False,
        "perfmon_dir": str(FIXTURES),
        "download": False,
        "url": PERFMON_URL,
    }
    args.update(kw)
    return run_events(platform, **args)


def _line(text: str, name: str) -> str:
    found = [ln for ln in text.splitlines() if ln.split()[:1] == [name]]
    assert len(found) == 1, (name, found)
    return found[0]


def test_events_text(skx_platform: HostPlatform) -> None:
    text = _events(skx_platform)
    lines = text.splitlines()
    assert lines[0] == "CPUs 0-3: GenuineIntel family 0x6 model 0x55 stepping 4, Skylake-SP/X"
    assert lines[1] == f"Intel event tables: {FIXTURES}"
    assert lines[2] == "  CPUs 0-3: A/events/a_core.json"
    assert "Intel events for CPUs 0-3, from a_core.json" in lines
    assert _line(text, "LONGEST_LAT_CACHE.MISS").split(None, 2)[1:] == [
        "event=0x2e,umask=0x41",
        "Core-originated cacheable demand requests missed L3",
    ]
    assert "event=0xd1,umask=0x20 [counters 0-3]" in _line(text, "MEM_LOAD_RETIRED.L3_MISS")
    assert "event=0x0e,umask=0x01,cmask=1,inv" in _line(text, "UOPS_ISSUED.STALL_CYCLES")
    assert "[not usable: needs an extra MSR (MSR_OFFCORE_RSP_0" in _line(
        text, "OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE"
    )
    assert "[deprecated]" in _line(text, "BR_MISP_EXEC.ALL_BRANCHES")
    assert "fixed 0 or event=0xc0,umask=0x00" in _line(text, "instructions")
    assert "kernel" in _line(text, "context-switches")


def test_events_json(skx_platform: HostPlatform) -> None:
    doc = json.loads(_events(skx_platform, as_json=True))
    assert (doc["cpu"]["vendor"], doc["cpu"]["model"], doc["cpu"]["stepping"]) == ("GenuineIntel", 0x55, 4)
    assert doc["tables"] == str(FIXTURES)
    assert doc["cpu_groups"] == [
        {
            "cpus": "0-3",
            "core_type": None,
            "cpuid": "GenuineIntel-6-55-4",
            "files": ["A/events/a_core.json"],
            "note": None,
        }
    ]
    by_name = {e["name"]: e for e in doc["events"]}
    assert by_name["LONGEST_LAT_CACHE.MISS"] == {
        "name": "LONGEST_LAT_CACHE.MISS",
        "kind": "intel",
        "description": "Core-originated cacheable demand requests missed L3",
        "event": 0x2E,
        "umask": 0x41,
        "cmask": 0,
        "inv": False,
        "edge": False,
        "counters": None,
        "fixed_counter": None,
        "deprecated": False,
        "usable": True,
        "why": None,
        "core_type": None,
        "cpus": "0-3",
    }
    assert by_name["MEM_LOAD_RETIRED.L3_MISS"]["counters"] == [0, 1, 2, 3]
    assert by_name["INST_RETIRED.ANY"]["fixed_counter"] == 0 and by_name["INST_RETIRED.ANY"]["event"] is None
    offcore = by_name["OFFCORE_RESPONSE"]
    assert offcore["usable"] is False
    assert (
        offcore["why"]
        == "needs an extra MSR (offcore response MSR_OFFCORE_RSP_0/1, 0x1a6/0x1a7) that pmutop cannot program"
    )
    assert (by_name["instructions"]["kind"], by_name["instructions"]["usable"]) == ("architectural", True)
    assert by_name["instructions"]["fixed_counter"] == 0 and by_name["instructions"]["event"] == 0xC0
    assert by_name["page-faults"]["kind"] == "software"
    kinds = [e["kind"] for e in doc["events"]]
    assert kinds.count("architectural") == 7 and kinds.count("software") == 7 and kinds.count("intel") == 12


def test_events_search(skx_platform: HostPlatform) -> None:
    doc = json.loads(_events(skx_platform, as_json=True, search="L3"))
    assert [e["name"] for e in doc["events"]] == ["LONGEST_LAT_CACHE.MISS", "MEM_LOAD_RETIRED.L3_MISS"]
    doc = json.loads(_events(skx_platform, as_json=True, search="offcore"))
    assert [e["name"] for e in doc["events"]] == ["OFFCORE_RESPONSE", "OFFCORE_RESPONSE.DEMAND_DATA_RD.ANY_RESPONSE"]
    text = _events(skx_platform, search="cache")
    assert "Architectural events (CPUID 0xA)" in text  # llc-misses: "last-level cache misses"
    assert "Software events (kernel counters)" not in text
    assert text.splitlines()[-1] == "4 events match 'cache' (4 usable)"


def test_events_without_tables(skx_platform: HostPlatform) -> None:
    text = _events(skx_platform, perfmon_dir=None)
    assert "Intel event tables: none found" in text.splitlines()
    assert f"  CPUs 0-3: Intel event names need Intel's perfmon tables: {NO_TABLES_HINT}" in text.splitlines()
    doc = json.loads(_events(skx_platform, perfmon_dir=None, as_json=True))
    assert doc["tables"] is None
    assert [e["kind"] for e in doc["events"]].count("intel") == 0


def test_events_download_then_list(serve: Serve, skx_platform: HostPlatform, tmp_path: Path) -> None:
    dest = tmp_path / "tables"
    text = _events(skx_platform, perfmon_dir=str(dest), download=True, url=serve(FIXTURES))
    assert text.splitlines()[1] == f"downloaded 3 files into {dest}: mapfile.csv, A/events/a_core.json, LICENSE"
    assert "event=0x2e,umask=0x41" in _line(text, "LONGEST_LAT_CACHE.MISS")


def test_events_download_goes_to_the_cache_by_default(serve: Serve, skx_platform: HostPlatform, tmp_path: Path) -> None:
    doc = json.loads(_events(skx_platform, perfmon_dir=None, download=True, url=serve(FIXTURES), as_json=True))
    assert doc["tables"] == str(cache_dir())
    assert doc["downloaded"][0] == str(cache_dir() / "mapfile.csv")
    assert (cache_dir() / "A/events/a_core.json").is_file()


class FakePlatform:
    """online_cpus() and cpuid_fn(): all run_events needs."""

    def __init__(self, leaves: dict[int, dict[tuple[int, int], tuple[int, int, int, int]]]) -> None:
        self.leaves = leaves

    def online_cpus(self) -> list[int]:
        return sorted(self.leaves)

    def cpuid_fn(self, cpu: int) -> Callable[..., tuple[int, int, int, int]]:
        table = self.leaves[cpu]
        return lambda leaf, subleaf=0: table.get((leaf, subleaf), (0, 0, 0, 0))


_INTEL_VENDOR = (0x756E6547, 0x6C65746E, 0x49656E69)  # "Genu" "ntel" "ineI" in ebx, ecx, edx
_AMD_VENDOR = (0x68747541, 0x444D4163, 0x69746E65)  # "Auth" "cAMD" "enti"


def _hybrid_leaves(core_type: int) -> dict[tuple[int, int], tuple[int, int, int, int]]:
    return {
        (0x0, 0): (0x20, *_INTEL_VENDOR),
        (0x1, 0): (0x00090672, 0, 0, 0),  # family 6 model 0x97 stepping 2 (Alder Lake)
        (0x7, 0): (0, 0, 0, 1 << 15),  # hybrid
        (0xA, 0): (0x07300805, 0, 0, 0x603),
        (0x1A, 0): (core_type << 24 | 0x000001, 0, 0, 0),
    }


def test_events_hybrid_lists_each_core_type(tmp_path: Path) -> None:
    platform = FakePlatform({0: _hybrid_leaves(0x40), 1: _hybrid_leaves(0x40), 2: _hybrid_leaves(0x20)})
    doc = json.loads(_events(platform, as_json=True, search="MEM_LOAD_RETIRED.L3_MISS"))
    assert [(g["cpus"], g["core_type"], g["files"]) for g in doc["cpu_groups"]] == [
        ("0-1", "P", ["B/events/b_core.json"]),
        ("2", "E", ["A/events/a_core.json"]),
    ]
    assert [(e["cpus"], e["core_type"], e["counters"]) for e in doc["events"]] == [
        ("0-1", "P", None),
        ("2", "E", [0, 1, 2, 3]),
    ]
    text = _events(platform)
    assert "Intel events for CPUs 0-1 (P-cores), from b_core.json" in text
    assert "Intel events for CPUs 2 (E-cores), from a_core.json" in text


def test_events_non_intel() -> None:
    amd = {(0x0, 0): (0x10, *_AMD_VENDOR), (0x1, 0): (0x00A60F12, 0, 0, 0)}
    platform = FakePlatform({0: amd, 1: amd})
    text = _events(platform)
    assert "  CPUs 0-1: Intel's perfmon tables do not describe AuthenticAMD's CPUs" in text.splitlines()
    # Issue 20: on AMD the architectural names are perf's generic events (usable), and the Zen top-down events
    # pmutop counts are listed (tests/test_issue20_events_info_demo.py has the whole listing).
    assert "none usable" not in text and "not usable" not in _line(text, "cycles")
    assert "event=0x76" in _line(text, "cycles")
    doc = json.loads(_events(platform, as_json=True))
    assert {e["kind"] for e in doc["events"]} == {"generic", "software", "amd"}
    with pytest.raises(UsageError, match=r"^--download: Intel's perfmon tables do not describe AuthenticAMD's CPUs$"):
        _events(platform, download=True)


def test_events_main_and_parser(skx_platform: HostPlatform, tmp_path: Path) -> None:
    root = str(skx_platform.sysroot)
    text = events_main(["--sysroot", root, "--perfmon-dir", str(FIXTURES), "--search", "machine_clears"])
    assert "event=0xc3,umask=0x01,cmask=1,edge" in _line(text, "MACHINE_CLEARS.COUNT")
    with pytest.raises(UsageError, match=r"^--perfmon-url needs --download$"):
        events_main(["--sysroot", root, "--perfmon-url", "http://127.0.0.1:1"])
    with pytest.raises(UsageError, match=r"^--sysroot .*/nope: not a directory$"):
        events_main(["--sysroot", str(tmp_path / "nope")])
    with pytest.raises(UsageError, match=r"unrecognized arguments: --bogus \(see `pmutop events --help`\)"):
        events_main(["--bogus"])
    args = events_parser().parse_args(["--json", "--download", "--perfmon-dir", "D"])
    assert (args.json, args.download, args.perfmon_dir, args.perfmon_url, args.sysroot) == (True, True, "D", None, "/")


def test_events_main_refuses_a_named_dir_without_mapfile(skx_platform: HostPlatform, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--perfmon-dir .*: no mapfile\.csv there"):
        events_main(["--sysroot", str(skx_platform.sysroot), "--perfmon-dir", str(tmp_path)])
    assert os.path.isdir(tmp_path)
