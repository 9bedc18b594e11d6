"""Issue 22, built-in knowledge: the top-down events ship with pmutop (pmutop.pmu.builtin_events).

Every built-in entry is checked against the Intel perfmon files it cites, and every CPU model that maps to a
core with built-in events against the file Intel's mapfile.csv gives that model (../shared/perfmon; those
tests skip without it). Top-down then works with no perfmon tables on every core type: the four-event
formula (Skylake-SP, Cascade Lake, Sandy Bridge .. Broadwell), Gracemont, Crestmont, Skymont and Tremont
E-cores, Goldmont and Goldmont Plus, through the planner, the perf backend (a fake kernel), `pmutop --demo`,
and the msr backend and `pmutop info` / `events` on a snapshot of a Snow Ridge and a Gemini Lake machine.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.flags import HAS_SHARED_PERFMON, SHARED_PERFMON
from helpers.sysroot_builder import build_sysroot
from test_topdown_perf import INTEL_FORMATS, FakeKernel, add_pmu, groups_of, platform_for, prepare
from test_topdown_plan import atom, ident, pmu

from pmutop.backends.perf import PerfBackend
from pmutop.core.clock import ManualClock
from pmutop.derive import topdown
from pmutop.hw import perf_event
from pmutop.pmu import builtin_events, topdown_plan
from pmutop.pmu.cpuid_decode import CORE_TYPE_ATOM, CORE_TYPE_CORE, CoreType, CpuIdentity, PerfmonInfo
from pmutop.pmu.perfmon import IntelEvent, PerfmonTables, load_events
from pmutop.pmu.registers import RawEvent
from pmutop.pmu.uarch import core_uarch

needs_shared_perfmon = pytest.mark.skipif(not HAS_SHARED_PERFMON, reason="shared/perfmon is not present")


def _fields(ev: IntelEvent) -> tuple[object, ...]:
    """Everything about an event that decides how it is counted."""
    return (
        ev.event_code,
        ev.umask,
        ev.cmask,
        ev.inv,
        ev.edge,
        ev.any_thread,
        ev.fixed_counter,
        ev.counters,
        ev.umask_ext,
        ev.equal,
        ev.needs_msr,
    )


def mismatches(table: dict[str, builtin_events.BuiltinEvent], root: Path) -> list[str]:
    """Each entry of a built-in table that a file it cites does not list, or lists with another encoding."""
    out = []
    for name, entry in table.items():
        assert entry.sources, f"{name} cites no perfmon file"
        for source in entry.sources:
            listed = load_events(root / source).get(name)
            if listed is None:
                out.append(f"{source} has no {name}")
            elif _fields(listed) != _fields(entry.event):
                out.append(f"{source} {name}: table {_fields(listed)}, built in {_fields(entry.event)}")
    return out


# --- the built-in tables against Intel's files ------------------------------------------------------------


@needs_shared_perfmon
@pytest.mark.parametrize("core", sorted(builtin_events.TOPDOWN_EVENTS))
def test_every_built_in_entry_matches_every_perfmon_file_it_cites(core: str) -> None:
    assert mismatches(builtin_events.TOPDOWN_EVENTS[core], SHARED_PERFMON) == []


@needs_shared_perfmon
@pytest.mark.parametrize(
    ("core", "name", "wrong", "files"),
    [
        # Sandy Bridge's encoding on Skylake: SKL, SKX and CLX disagree.
        ("Skylake", "INT_MISC.RECOVERY_CYCLES", {"umask": 0x03, "cmask": 1}, 3),
        # Gracemont's umask on Tremont: SNR and EHL disagree.
        ("Tremont", "TOPDOWN_BAD_SPECULATION.ALL", {"umask": 0x00}, 2),
        # The big cores' UOPS_RETIRED.RETIRE_SLOTS umask on Goldmont Plus.
        ("Goldmont Plus", "UOPS_RETIRED.ANY", {"umask": 0x02}, 1),
    ],
    ids=["skylake", "tremont", "goldmont-plus"],
)
def test_a_wrong_entry_fails_the_check(core: str, name: str, wrong: dict[str, int], files: int) -> None:
    table = dict(builtin_events.TOPDOWN_EVENTS[core])
    right = table[name]
    table[name] = dataclasses.replace(right, event=dataclasses.replace(right.event, **wrong))  # type: ignore[arg-type]
    problems = mismatches(table, SHARED_PERFMON)
    assert len(problems) == files and all(f"{name}:" in p for p in problems), problems


def _models() -> list[tuple[CpuIdentity, CoreType | None]]:
    """Every Intel family 6 signature (and hybrid core type / native model) pmutop maps to a core with built-in
    events; steppings only where they pick another table (0x55: Skylake-SP 0-4, Cascade Lake 5 on)."""
    out: list[tuple[CpuIdentity, CoreType | None]] = []
    for model in range(0x100):
        for stepping in (4, 7) if model == 0x55 else (1,):
            kinds: list[CoreType | None] = [None] + [
                CoreType(code, native, "E" if code == CORE_TYPE_ATOM else "P", "")
                for code in (CORE_TYPE_ATOM, CORE_TYPE_CORE)
                for native in (1, 2, 3)
            ]
            for kind in kinds:
                code, native = (kind.code, kind.native_model_id) if kind else (None, None)
                core = core_uarch("GenuineIntel", 6, model, code, native)
                if core is not None and core.name in builtin_events.TOPDOWN_EVENTS:
                    out.append((ident(6, model, stepping, hybrid=kind is not None), kind))
    return out


@needs_shared_perfmon
def test_every_model_reads_a_file_its_cores_table_cites_and_the_file_agrees() -> None:
    real = PerfmonTables(SHARED_PERFMON)
    reached: set[str] = set()
    without_a_table: set[int] = set()
    models = _models()
    assert len(models) > 40
    for identity, kind in models:
        code, native = (kind.code, kind.native_model_id) if kind else (None, None)
        core = core_uarch("GenuineIntel", 6, identity.model, code, native)
        assert core is not None
        what = f"model {identity.model:#x} stepping {identity.stepping} core type {kind}"
        perfmon = pmu(5 if core.name != "Skymont" else 6, 8, 0x77 if core.name == "Skymont" else 0x7)
        args = {"perf_capabilities": None, "smt": False, "backend": "perf"}
        alone = topdown_plan.plan_topdown(identity, kind, perfmon, tables=None, **args)  # type: ignore[arg-type]
        assert alone.available, what
        table = builtin_events.TOPDOWN_EVENTS[core.name]
        cited = {source for entry in table.values() for source in entry.sources}
        files = {str(p.relative_to(SHARED_PERFMON)) for p in real.files_for(identity, code, native)}
        if not files:
            without_a_table.add(identity.model)
            continue
        assert files <= cited, what
        reached |= files
        events = builtin_events.events_for_core(core.name)
        assert events is not None
        assert builtin_events.differences(events, real.events_for(identity, code, native)) == [], what
        # Planned with the tables: the same events as without, and the tables agree.
        checked = topdown_plan.plan_topdown(identity, kind, perfmon, tables=real, **args)  # type: ignore[arg-type]
        assert alone.events == checked.events, what
        assert checked.encodings == "encodings built into pmutop, the perfmon table agrees", what
    # Lakefield (0x8A): Intel's mapfile.csv has no row for it; its Tremont E-cores use Tremont's entries, which
    # the SNR and EHL tables check.
    assert without_a_table == {0x8A}
    # Every file a table cites is one some model reads: no claim without a model behind it.
    every_cited = {s for table in builtin_events.TOPDOWN_EVENTS.values() for e in table.values() for s in e.sources}
    assert every_cited == reached


# --- top-down with no tables on every core type -----------------------------------------------------------


SLOTS4 = {
    "uops_issued_any": (RawEvent(0x0E, 0x01), None),
    "uops_retired_retire_slots": (RawEvent(0xC2, 0x02), None),
    "idq_uops_not_delivered_core": (RawEvent(0x9C, 0x01), None),
    "cycles": (RawEvent(0x3C, 0x00), 1),
}
GRACEMONT = {
    "topdown_fe_bound_all": (RawEvent(0x71, 0x00), None),
    "topdown_bad_speculation_all": (RawEvent(0x73, 0x00), None),
    "topdown_be_bound_all": (RawEvent(0x74, 0x00), None),
    "topdown_retiring_all": (RawEvent(0xC2, 0x00), None),
    "cycles": (RawEvent(0x3C, 0x00), 1),
}
CRESTMONT = {**GRACEMONT, "topdown_retiring_all": (RawEvent(0x72, 0x00), None)}
TREMONT = {**GRACEMONT, "topdown_bad_speculation_all": (RawEvent(0x73, 0x06), None)}
GOLDMONT = {
    "uops_issued_any": (RawEvent(0x0E, 0x00), None),
    "uops_retired_any": (RawEvent(0xC2, 0x00), None),
    "uops_not_delivered_any": (RawEvent(0x9C, 0x00), None),
    "issue_slots_not_consumed_recovery": (RawEvent(0xCA, 0x02), None),
    "cycles": (RawEvent(0x3C, 0x00), 1),
}
SKYMONT = {
    "topdown_fe_bound_all": (RawEvent(0x9C, 0x01), 5),
    "topdown_bad_speculation_all": (RawEvent(0x73, 0x00), 4),
    "topdown_be_bound_all": (RawEvent(0xA4, 0x02), None),
    "topdown_retiring_all": (RawEvent(0xC2, 0x02), 6),
    "cycles": (RawEvent(0x3C, 0x00), 1),
}
CASES = [
    # (identity, core type, PMU, method, core, encodings)
    (ident(6, 0x55, 4), None, pmu(4, 4), "slots4", "Skylake",
     {**SLOTS4, "int_misc_recovery_cycles": (RawEvent(0x0D, 0x01), None)}),
    (ident(6, 0x55, 7), None, pmu(4, 4), "slots4", "Skylake",
     {**SLOTS4, "int_misc_recovery_cycles": (RawEvent(0x0D, 0x01), None)}),
    (ident(6, 0x2D, 7), None, pmu(3, 4), "slots4", "Sandy Bridge",
     {**SLOTS4, "int_misc_recovery_cycles": (RawEvent(0x0D, 0x03, cmask=1), None)}),
    (ident(6, 0x4F, 1), None, pmu(3, 4), "slots4", "Broadwell",
     {**SLOTS4, "int_misc_recovery_cycles": (RawEvent(0x0D, 0x03, cmask=1), None)}),
    (ident(6, 0x97, 2, hybrid=True), atom(1), pmu(5, 6), "gracemont", "Gracemont", GRACEMONT),
    (ident(6, 0xBE, 0), None, pmu(5, 6), "gracemont", "Gracemont", GRACEMONT),
    (ident(6, 0xBA, 2, hybrid=True), atom(1), pmu(5, 6), "gracemont", "Gracemont", GRACEMONT),
    (ident(6, 0xAA, 4, hybrid=True), atom(2), pmu(5, 8), "crestmont", "Crestmont", CRESTMONT),
    (ident(6, 0xAF, 3), None, pmu(5, 8), "crestmont", "Crestmont", CRESTMONT),
    (ident(6, 0xB6, 1), None, pmu(5, 8), "crestmont", "Crestmont", CRESTMONT),
    (ident(6, 0xC5, 2, hybrid=True), atom(2), pmu(5, 8), "crestmont", "Crestmont", CRESTMONT),
    (ident(6, 0xBD, 1, hybrid=True), atom(3), pmu(6, 8, 0x77, leaf23=True), "skymont", "Skymont", SKYMONT),
    (ident(6, 0xC6, 2, hybrid=True), atom(3), pmu(6, 8, 0x77, leaf23=True), "skymont", "Skymont", SKYMONT),
    (ident(6, 0x86, 5), None, pmu(5, 4), "tremont", "Tremont", TREMONT),
    (ident(6, 0x96, 1), None, pmu(5, 4), "tremont", "Tremont", TREMONT),
    (ident(6, 0x9C, 0), None, pmu(5, 4), "tremont", "Tremont", TREMONT),
    (ident(6, 0x8A, 1, hybrid=True), atom(1), pmu(4, 4), "tremont", "Tremont", TREMONT),
    (ident(6, 0x7A, 1), None, pmu(4, 4), "goldmont_plus", "Goldmont Plus", GOLDMONT),
    (ident(6, 0x5C, 9), None, pmu(4, 4), "goldmont", "Goldmont", GOLDMONT),
    (ident(6, 0x5F, 1), None, pmu(4, 4), "goldmont", "Goldmont", GOLDMONT),
]  # fmt: skip
IDS = ["skylake-sp", "cascade-lake", "sandy-bridge-ep", "broadwell-ep", "alder-lake-e", "alder-lake-n",
       "raptor-lake-e", "meteor-lake-e", "sierra-forest", "grand-ridge", "arrow-lake-h-lp-e", "lunar-lake-e",
       "arrow-lake-e", "snow-ridge", "elkhart-lake", "jasper-lake", "lakefield-e", "gemini-lake", "apollo-lake",
       "denverton"]  # fmt: skip
WIDTHS = {"slots4": 4, "gracemont": 5, "crestmont": 6, "skymont": 8, "tremont": 4, "goldmont": 3, "goldmont_plus": 4}


@pytest.mark.parametrize(("identity", "kind", "perfmon", "method", "core", "encodings"), CASES, ids=IDS)
def test_no_tables_every_core_type_plans_from_built_in_events_and_the_formula_reads_them(
    identity: CpuIdentity,
    kind: CoreType | None,
    perfmon: PerfmonInfo,
    method: str,
    core: str,
    encodings: dict[str, tuple[RawEvent, int | None]],
) -> None:
    for backend in ("msr", "perf"):
        plan = topdown_plan.plan_topdown(
            identity, kind, perfmon, perf_capabilities=None, smt=False, tables=None, backend=backend
        )
        assert (plan.method, plan.core, plan.encodings) == (method, core, "encodings built into pmutop")
        assert {e.key: (e.raw, e.fixed_index) for e in plan.events} == encodings
    assert plan.width == WIDTHS[method]
    # The counts the plan's keys name are all the formula needs: level 1 comes out, summing to 1. Each method
    # gets 40% retiring, 10% bad speculation, 20% frontend, 30% backend of its width × 1000 cycles.
    slots = WIDTHS[method] * 1000
    counts = {key: 0 for key in plan.keys}
    counts["cycles"] = 1000
    if method == "slots4":  # backend = 1 − frontend − (issued + 4 × recovery) / slots
        counts.update(uops_issued_any=1800, uops_retired_retire_slots=1600, idq_uops_not_delivered_core=800)
        counts["int_misc_recovery_cycles"] = 50
    elif method in ("goldmont", "goldmont_plus"):  # bad = issued − retired + recovery; backend the remainder
        counts.update(uops_issued_any=slots * 9 // 20, uops_retired_any=slots * 2 // 5)
        counts.update(uops_not_delivered_any=slots // 5, issue_slots_not_consumed_recovery=slots // 20)
    else:
        counts.update(topdown_fe_bound_all=slots // 5, topdown_bad_speculation_all=slots // 10)
        counts.update(topdown_be_bound_all=slots * 3 // 10, topdown_retiring_all=slots * 2 // 5)
    got = topdown.compute(plan.method, counts)
    assert sum(got[f] or 0 for f in topdown.LEVEL1) == pytest.approx(1.0)
    shares = [got[f] for f in ("tma_retiring", "tma_bad_speculation", "tma_frontend_bound", "tma_backend_bound")]
    assert shares == pytest.approx([0.4, 0.1, 0.2, 0.3])


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[FakeKernel]:
    """test_topdown_perf's fake perf_event_open, with no perfmon tables anywhere."""
    monkeypatch.delenv("PMUTOP_PERFMON_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    fake = FakeKernel()
    monkeypatch.setattr(perf_event.groups, "perf_event_open", fake.perf_event_open)
    monkeypatch.setattr(fcntl, "ioctl", fake.ioctl)
    yield fake
    fake.close()


# CPUID 0xA EAX / EDX: PMU v5 with 8 GP counters (AnyThread deprecated), or v4 with 4 (Goldmont Plus).
PMU_V5_8 = (0x07300805, 0x8603)
PMU_V5_4 = (0x07300405, 0x8603)
PMU_V4_4 = (0x07300404, 0x0603)


def _leaves(
    signature: int, *, hybrid: bool, core_type: int = 0, native: int = 0, pmu_leaf: tuple[int, int] = PMU_V5_8
) -> dict[tuple[int, int], tuple[int, int, int, int]]:
    """CPUID of an Intel CPU with fixed counters 0-2 and the PMU of `pmu_leaf` (what the decoders read)."""
    leaves = {
        (0x0, 0): (0x20, 0x756E6547, 0x6C65746E, 0x49656E69),
        (0x1, 0): (signature, 0x800, 0x7FFAFBFF, 0xBFEBFBFF),
        (0x7, 0): (0x1, 0, 0, 1 << 15 if hybrid else 0),  # EDX bit 15: hybrid
        (0xA, 0): (pmu_leaf[0], 0x0, 0x7, pmu_leaf[1]),
        (0x80000000, 0): (0x80000008, 0, 0, 0),
    }
    if hybrid:
        leaves[(0x1A, 0)] = (core_type << 24 | native, 0, 0, 0)
    return leaves


@pytest.mark.parametrize(
    ("signature", "hybrid", "native", "method", "configs"),
    [
        (0xA06F3, False, 0, "crestmont", [0x71, 0x73, 0x74, 0x72]),  # Sierra Forest (0xAF)
        (0xB06E0, False, 0, "gracemont", [0x71, 0x73, 0x74, 0xC2]),  # Alder Lake-N (0xBE)
        (0xA06A4, True, 2, "crestmont", [0x71, 0x73, 0x74, 0x72]),  # Meteor Lake E-core (0xAA)
        # Lunar Lake E-core (0xBD) reporting PMU v5 and fixed counters 0-2 (no leaf 0x23): the *.ALL_P twins on
        # general counters (with fixed counters 4-6, Linux puts those same encodings there itself).
        (0xB06D1, True, 3, "skymont", [0x019C, 0x73, 0x02A4, 0x02C2]),
        # Tremont: TOPDOWN_BAD_SPECULATION.ALL is umask 0x06 (Linux tnt_events_attrs "event=0x73,umask=0x6").
        (0x80665, False, 0, "tremont", [0x71, 0x0673, 0x74, 0xC2]),  # Snow Ridge (0x86)
        (0x90661, False, 0, "tremont", [0x71, 0x0673, 0x74, 0xC2]),  # Elkhart Lake (0x96)
        (0x906C0, False, 0, "tremont", [0x71, 0x0673, 0x74, 0xC2]),  # Jasper Lake (0x9C)
        (0x806A1, True, 1, "tremont", [0x71, 0x0673, 0x74, 0xC2]),  # Lakefield E-core (0x8A)
        # Gemini Lake (0x7A): UOPS_ISSUED.ANY, UOPS_RETIRED.ANY, UOPS_NOT_DELIVERED.ANY and
        # ISSUE_SLOTS_NOT_CONSUMED.RECOVERY on the 4 general counters a v4 Goldmont Plus has.
        (0x706A1, False, 0, "goldmont_plus", [0x0E, 0xC2, 0x9C, 0x02CA]),
    ],
    ids=["sierra-forest", "alder-lake-n", "meteor-lake-e", "lunar-lake-e", "snow-ridge", "elkhart-lake",
         "jasper-lake", "lakefield-e", "gemini-lake"],
)  # fmt: skip
def test_perf_backend_opens_the_e_core_events_with_no_tables(
    tmp_path: Path,
    kernel: FakeKernel,
    signature: int,
    hybrid: bool,
    native: int,
    method: str,
    configs: list[int],
) -> None:
    pmu_leaf = PMU_V4_4 if method == "goldmont_plus" else PMU_V5_8
    leaves = _leaves(signature, hybrid=hybrid, core_type=CORE_TYPE_ATOM, native=native, pmu_leaf=pmu_leaf)
    build_sysroot(tmp_path, [0], leaves)
    add_pmu(tmp_path, "cpu_atom" if hybrid else "cpu", 10 if hybrid else 4, INTEL_FORMATS, {}, cpus="0")
    backend = PerfBackend(platform_for(tmp_path), ManualClock(), topdown=True)
    prepare(backend, [0])
    assert backend.topdown_method(0) == method, backend.notices
    _, group = groups_of(kernel, 0)
    assert [o.config for o in group] == configs
    assert not any("not measured" in n for n in backend.notices)


@pytest.mark.integration
@pytest.mark.parametrize("model", ["skx", "adl"])
def test_demo_shows_top_down_on_every_cpu_with_no_tables(tmp_path: Path, model: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PMUTOP_PERFMON_DIR"}
    env["XDG_CACHE_HOME"] = str(tmp_path)  # an empty cache: no downloaded tables
    out = subprocess.run(
        [sys.executable, "-m", "pmutop", "--demo", "--sim-model", model, "--topdown", "--batch", "--count", "3",
         "--interval", "0.2", "--format", "json"],
        capture_output=True, text=True, timeout=60, check=True, env=env,
    )  # fmt: skip
    records = [
        r for line in out.stdout.splitlines() if (r := json.loads(line))["kind"] == "cpu"
    ]  # not package (issue 22)
    last = [r for r in records if r["interval_index"] == max(r["interval_index"] for r in records)]
    assert len(last) == 8
    for rec in last:
        assert sum(rec[f] for f in topdown.LEVEL1) == pytest.approx(1.0, abs=1e-5), rec["cpu"]
    assert "not measured" not in out.stderr


# --- where the encodings come from, as `events` and `info` say ---------------------------------------------


@pytest.fixture
def no_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PMUTOP_PERFMON_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    from pmutop.app.main import main

    assert main(list(args)) == 0
    return capsys.readouterr().out


@pytest.mark.usefixtures("no_tables")
def test_events_lists_the_built_in_top_down_events_per_core_type(capsys: pytest.CaptureFixture[str]) -> None:
    doc = json.loads(_run(capsys, "events", "--demo", "--sim-model", "adl", "--json"))
    assert doc["tables"] is None
    shipped = {(e["name"], e["cpus"]): e for e in doc["events"] if e["kind"] == "builtin"}
    assert set(shipped) == {
        ("TOPDOWN_FE_BOUND.ALL", "4-7"),
        ("TOPDOWN_BAD_SPECULATION.ALL", "4-7"),
        ("TOPDOWN_BE_BOUND.ALL", "4-7"),
        ("TOPDOWN_RETIRING.ALL", "4-7"),
    }  # the P-cores (PERF_METRICS) need no event encodings
    retiring = shipped[("TOPDOWN_RETIRING.ALL", "4-7")]
    assert (retiring["event"], retiring["umask"], retiring["core_type"]) == (0xC2, 0x00, "E")
    assert "Intel's ADL tables" in retiring["description"]
    text = _run(capsys, "events", "--demo", "--sim-model", "skx")
    assert "Intel events pmutop ships for top-down on CPUs 0-7 (no tables needed; not --events names)" in text
    assert "INT_MISC.RECOVERY_CYCLES_ANY   event=0x0d,umask=0x01,any" in text


@pytest.mark.usefixtures("no_tables")
def test_info_says_the_encodings_are_built_in(capsys: pytest.CaptureFixture[str]) -> None:
    text = _run(capsys, "info", "--demo", "--sim-model", "adl")
    assert "Gracemont, E-core events (Gracemont, 5 wide); encodings built into pmutop; takes 4" in text
    doc = json.loads(_run(capsys, "info", "--demo", "--sim-model", "skx", "--json"))
    (group,) = doc["cpu_groups"]
    assert (group["topdown"]["method"], group["topdown"]["encodings"]) == ("slots4", "encodings built into pmutop")


@pytest.fixture
def atom_roots(tmp_path: Path) -> dict[str, Path]:
    """Snapshots of a Snow Ridge (Tremont) and a Gemini Lake (Goldmont Plus) machine, two CPUs each."""
    from helpers.sysroot_builder import idle_pmu_registers

    return {
        name: build_sysroot(
            tmp_path / name, [0, 1], _leaves(signature, hybrid=False, pmu_leaf=leaf), msrs=idle_pmu_registers(4, 3)
        )
        for name, signature, leaf in (("snr", 0x80665, PMU_V5_4), ("glp", 0x706A1, PMU_V4_4))
    }


@pytest.mark.usefixtures("no_tables")
@pytest.mark.parametrize(
    ("name", "method", "selects"),
    [
        # USR|OS|EN (0x43 << 16) with TOPDOWN_FE_BOUND.ALL, _BAD_SPECULATION.ALL (0x06), _BE_BOUND.ALL, _RETIRING.ALL
        ("snr", "tremont", (0x430071, 0x430673, 0x430074, 0x4300C2)),
        # UOPS_ISSUED.ANY, UOPS_RETIRED.ANY, UOPS_NOT_DELIVERED.ANY, ISSUE_SLOTS_NOT_CONSUMED.RECOVERY
        ("glp", "goldmont_plus", (0x43000E, 0x4300C2, 0x43009C, 0x4302CA)),
    ],
)
def test_msr_backend_programs_the_built_in_events_with_no_tables(
    atom_roots: dict[str, Path], name: str, method: str, selects: tuple[int, ...]
) -> None:
    from helpers.sysroot_builder import read_msr

    from pmutop.backends.msr.backend import MsrBackend
    from pmutop.core.sysroot import Sysroot
    from pmutop.engine.engine import Engine
    from pmutop.hw.platform import HostPlatform

    root = atom_roots[name]
    clock = ManualClock(1)
    platform = HostPlatform(Sysroot(root))
    backend = MsrBackend(platform, clock, None, topdown=True)
    engine = Engine(backend, platform, clock, [0, 1], 1.0, threaded=False)
    engine.start()
    programmed = set()
    try:
        for _ in range(3):  # the top-down group takes turns with the default events on the 4 counters
            clock.advance(1.0)
            (sample, _) = engine.tick()
            programmed.add(tuple(read_msr(root, 0, 0x186 + i) for i in range(4)))
    finally:
        engine.stop()
    assert backend.topdown_method(0) == method and sample.topdown == method
    assert selects in programmed
    assert [read_msr(root, 0, 0x186 + i) for i in range(4)] == [0, 0, 0, 0]  # restored


@pytest.mark.usefixtures("no_tables")
def test_info_and_events_on_tremont_and_goldmont_plus_say_the_encodings_are_built_in(
    capsys: pytest.CaptureFixture[str], atom_roots: dict[str, Path]
) -> None:
    text = _run(capsys, "info", "--sysroot", str(atom_roots["snr"]))
    assert "top-down (msr backend): Tremont, E-core events (Tremont, 4 wide); encodings built into pmutop; " in text
    text = _run(capsys, "info", "--sysroot", str(atom_roots["glp"]))
    assert (
        "top-down (msr backend): Goldmont Plus, issued / retired / not-delivered / recovery slots (Goldmont Plus, "
        "4 wide); encodings built into pmutop; takes 4 general-purpose counters"
    ) in text
    doc = json.loads(_run(capsys, "events", "--sysroot", str(atom_roots["snr"]), "--json"))
    shipped = {e["name"]: (e["event"], e["umask"], e["cpus"]) for e in doc["events"] if e["kind"] == "builtin"}
    assert shipped == {
        "TOPDOWN_FE_BOUND.ALL": (0x71, 0x00, "0-1"),
        "TOPDOWN_BAD_SPECULATION.ALL": (0x73, 0x06, "0-1"),
        "TOPDOWN_BE_BOUND.ALL": (0x74, 0x00, "0-1"),
        "TOPDOWN_RETIRING.ALL": (0xC2, 0x00, "0-1"),
    }
    text = _run(capsys, "events", "--sysroot", str(atom_roots["glp"]))
    assert "Intel events pmutop ships for top-down on CPUs 0-1 (no tables needed; not --events names)" in text
    assert "ISSUE_SLOTS_NOT_CONSUMED.RECOVERY" in text and "event=0xca,umask=0x02" in text
