"""Issue 22, DRAM bandwidth source: the per-model table, the encodings from sysfs `format/`, channel-to-socket
mapping, bytes = counts × 64 (sysfs .scale never applied on top), AMD saturation, rates over the measured
interval, the SMBIOS peak, and `pmutop info`'s memory_bandwidth; on sysfs trees shaped like each platform
and a fake kernel for perf_event_open (tests/helpers/uncore_trees.py)."""

from __future__ import annotations

import errno
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot
from helpers.uncore_trees import (
    FakeClock,
    FakeKernel,
    add_packages,
    add_pmu,
    add_smbios,
    adl_free_running,
    gnr_scheduler0_names,
    icx_fixed_kernel,
    icx_old_kernel,
    skl_client_imc,
    skx_two_sockets,
    smbios_memory_device,
    spr_two_sockets,
    write,
    zen4_two_sockets,
)

from pmutop.app.main import main
from pmutop.core.dram_reading import BYTES_PER_LINE, estimate_from_llc_misses
from pmutop.core.errors import PmutopError
from pmutop.core.sysroot import Sysroot
from pmutop.hw.perf_event import (
    ATTR_EXCLUDE_HV,
    ATTR_EXCLUDE_KERNEL,
    ATTR_EXCLUDE_USER,
    PERF_FORMAT_TOTAL_TIME_ENABLED,
    PERF_FORMAT_TOTAL_TIME_RUNNING,
)
from pmutop.pmu import dram_events
from pmutop.probes.dram import DramCounters, DramPlan, plan_dram, probe_dram
from pmutop.probes.memory_speed import MemorySpeed, configured_mts, read_memory_speed

INTEL, AMD = "GenuineIntel", "AuthenticAMD"
SHARED_PERFMON = Path(__file__).resolve().parents[2] / "shared" / "perfmon"


def plan_for(tmp_path: Path, build: Callable[[Path], None], vendor: str, family: int, model: int) -> DramPlan:
    build(tmp_path)
    return plan_dram(Sysroot(tmp_path), vendor, family, model)


def counters(plan: DramPlan, kernel: FakeKernel, clock: FakeClock, **kw: object) -> DramCounters:
    c = DramCounters(
        plan,
        opener=kernel.open,
        read_fd=kernel.read,
        close_fd=kernel.close,
        clock=clock,
        memory_speed=kw.pop("memory_speed", MemorySpeed(None, 0, "unknown")),  # type: ignore[arg-type]
        **kw,  # type: ignore[arg-type]
    )
    c.open()
    return c


# --- the table: each platform's encodings, as the cited sources give them ----------------------------------

# (vendor, family, model) -> (read configs, write configs): written out from the kernel's event_descs and
# perf's JSON, independently of pmu/dram_events.py, so a wrong table entry fails here.
EXPECTED_CONFIGS = {
    (INTEL, 6, 0x55): ([0x0304], [0x0C04]),  # SKX/CLX: hswep_uncore_imc_events
    (INTEL, 6, 0x3F): ([0x0304], [0x0C04]),  # Haswell-EP
    (INTEL, 6, 0x6A): ([0x0F04], [0x3004]),  # ICX: snr_uncore_imc_events
    (INTEL, 6, 0x8F): ([0xCF05], [0xF005]),  # SPR: spr_uncore_imc_events
    (INTEL, 6, 0xCF): ([0xCF05], [0xF005]),  # EMR
    (INTEL, 6, 0xAD): ([0xCF05, 0xCF06], [0xF005, 0xF006]),  # GNR: gnr_uncore_imc_events sch0 + sch1
    (INTEL, 6, 0xAF): ([0xCF05, 0xCF06], [0xF005, 0xF006]),  # SRF
    (INTEL, 6, 0x97): ([0x20FF], [0x30FF]),  # ADL: tgl_uncore_imc_events data_read / data_write
    (INTEL, 6, 0x8C): ([0x20FF], [0x30FF]),  # TGL
    (INTEL, 6, 0x9E): ([0x01], [0x02]),  # KBL/CFL client: snb_uncore_imc_events data_reads / data_writes
    (AMD, 0x19, 0x11): ([0x10A], [0x20A]),  # Genoa: umc_cas_cmd.rd / .wr (event 0x0a, rdwrmask 1 / 2)
    (AMD, 0x1A, 0x02): ([0x10A], [0x20A]),  # Turin
}
FORMATS = {
    "uncore_imc_": {"event": "config:0-7", "umask": "config:8-15,32-55"},
    "uncore_imc": {"event": "config:0-7"},
    "uncore_imc_free_running_": {"event": "config:0-7", "umask": "config:8-15"},
    "amd_umc_": {"event": "config:0-7", "rdwrmask": "config:8-9"},
}


@pytest.mark.parametrize(
    ("signature", "expected"), EXPECTED_CONFIGS.items(), ids=[f"{v}-{f:#x}-{m:#x}" for v, f, m in EXPECTED_CONFIGS]
)
def test_every_table_entry_encodes_to_the_cited_configs(
    tmp_path: Path, signature: tuple[str, int, int], expected: tuple[list[int], list[int]]
) -> None:
    spec = dram_events.dram_spec(*signature)
    assert spec is not None
    name = {
        r"uncore_imc_(\d+)$": "uncore_imc_0",
        r"uncore_imc$": "uncore_imc",
        r"uncore_imc_free_running(?:_(\d+))?$": "uncore_imc_free_running_0",
        r"amd_umc_(\d+)$": "amd_umc_0",
    }[spec.pmu_pattern]
    fmt = FORMATS[name.rstrip("0")]
    add_packages(tmp_path, {0: [0]})
    add_pmu(tmp_path, name, 9, [0], fmt)
    plan = plan_dram(Sysroot(tmp_path), *signature)
    assert plan.source == "uncore", plan.why
    (channel,) = plan.to_dict()["channels"]
    assert (channel["read"], channel["write"], channel["bytes_per_count"]) == (*expected, 64)


def test_models_without_a_table_say_so(tmp_path: Path) -> None:
    skx_two_sockets(tmp_path)  # uncore PMUs exist, but pmutop has no table for a Zen 3
    plan = plan_dram(Sysroot(tmp_path), AMD, 0x19, 0x01)
    assert plan.source == "none" and "no memory-controller events for AuthenticAMD family 0x19 model 0x1" in plan.why
    assert dram_events.dram_spec(INTEL, 6, 0xA7) is None  # Rocket Lake: not claimed without a source


def _perfmon_check(spec: dram_events.DramSpec, base: Path) -> tuple[int, list[str]]:
    """(events checked, mismatches) of a spec against base/<MODEL>/events/*uncore*.json."""
    assert spec.perfmon_dir is not None
    events: dict[str, dict[str, str]] = {}
    for path in sorted((base / spec.perfmon_dir / "events").glob("*uncore*.json")):
        doc = json.loads(path.read_text())
        for ev in doc.get("Events", []) if isinstance(doc, dict) else doc:
            if isinstance(ev, dict) and "EventName" in ev:
                events[ev["EventName"]] = ev
    checked, wrong = 0, []
    for ev in (*spec.read, *spec.write):
        doc = events.get(ev.name)
        if doc is None:
            continue
        checked += 1
        if (int(doc["EventCode"], 16), int(doc["UMask"], 16)) != (ev.terms["event"], ev.terms["umask"]):
            wrong.append(f"{ev.name}: perfmon {doc['EventCode']}/{doc['UMask']}")
    return checked, wrong


@pytest.mark.parametrize("spec", [s for s in dram_events.ALL_SPECS if s.perfmon_dir], ids=lambda s: s.key)
def test_table_matches_intels_perfmon_uncore_json(spec: dram_events.DramSpec) -> None:
    """Cross-check against ../shared/perfmon/<MODEL>/events/*uncore*.json where the event is there."""
    checked, wrong = _perfmon_check(spec, SHARED_PERFMON)
    if not checked:
        pytest.skip(f"no perfmon uncore JSON naming {spec.read[0].name} under {SHARED_PERFMON}/{spec.perfmon_dir}")
    assert wrong == []


def test_the_perfmon_cross_check_catches_a_wrong_umask(tmp_path: Path) -> None:
    events = [
        {"EventName": "UNC_M_CAS_COUNT.RD", "EventCode": "0x04", "UMask": "0x0f"},
        {"EventName": "UNC_M_CAS_COUNT.WR", "EventCode": "0x04", "UMask": "0x0c"},  # the pre-5.16 kernel's
    ]
    write(tmp_path, "ICX/events/icelakex_uncore.json", json.dumps({"Header": {}, "Events": events}))
    assert _perfmon_check(dram_events.ICELAKE_SP, tmp_path) == (2, ["UNC_M_CAS_COUNT.WR: perfmon 0x04/0x0c"])


# --- platforms: discovery, socket mapping, kernel disagreements ---------------------------------------------


def test_skx_two_sockets_six_channels_each(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, skx_two_sockets, INTEL, 6, 0x55)
    assert plan.source == "uncore" and plan.table == "SKX/CLX"
    info = plan.to_dict()
    assert [(c["pmu"], c["package"], c["cpu"]) for c in info["channels"]] == [
        *((f"uncore_imc_{n}", 0, 0) for n in range(6)),
        *((f"uncore_imc_{n}", 1, 28) for n in range(6)),
    ]
    assert {c["type"] for c in info["channels"] if c["pmu"] == "uncore_imc_3"} == {23}
    assert [c.channel for c in plan.channels] == [0, 1, 2, 3, 4, 5] * 2
    assert info["notes"] == []  # sysfs agrees with the table: nothing to say
    assert "12 memory channels on 2 packages" in plan.why


def test_icx_old_kernel_wrong_umasks_are_overridden_and_said_once(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, icx_old_kernel, INTEL, 6, 0x6A)
    assert {(c.read, c.write) for c in plan.channels} == {(((0x0F04, 0, 0),), ((0x3004, 0, 0),))}
    (note,) = plan.notes
    assert "cas_count_write is event=0x4,umask=0xc in sysfs, event=0x4,umask=0x30 here" in note
    assert "pmutop uses its table" in note and "96fd2e89fba1" in note


def test_icx_fixed_kernel_has_no_note(tmp_path: Path) -> None:
    assert plan_for(tmp_path, icx_fixed_kernel, INTEL, 6, 0x6A).notes == []


def test_spr_encodes_umask_through_the_split_format(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, spr_two_sockets, INTEL, 6, 0x8F)
    assert len(plan.channels) == 16 and plan.packages == [0, 1]
    assert {c.cpu for c in plan.channels if c.package == 1} == {2}
    assert plan.to_dict()["channels"][0]["read"] == [0xCF05] and plan.notes == []


def test_gnr_counts_both_schedulers_although_the_kernel_names_one(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, gnr_scheduler0_names, INTEL, 6, 0xAD)
    assert len(plan.channels) == 12
    assert plan.to_dict()["channels"][0]["write"] == [0xF005, 0xF006]
    (note,) = plan.notes
    assert "sysfs lacks cas_count_read_sch0, cas_count_read_sch1" in note and "scheduler 0" in note


def test_adl_free_running_channels(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, adl_free_running, INTEL, 6, 0x97)
    info = plan.to_dict()
    # Only the free-running PMUs: the programmable uncore_imc_0/1 beside them are not the table's.
    assert [(c["pmu"], c["type"], c["read"], c["write"]) for c in info["channels"]] == [
        ("uncore_imc_free_running_0", 30, [0x20FF], [0x30FF]),
        ("uncore_imc_free_running_1", 31, [0x20FF], [0x30FF]),
    ]
    assert info["notes"] == []


def test_older_client_imc(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, skl_client_imc, INTEL, 6, 0x9E)
    assert [(c.pmu, c.read, c.write) for c in plan.channels] == [("uncore_imc", ((1, 0, 0),), ((2, 0, 0),))]


def test_zen4_per_socket_cpumask_maps_umcs_to_sockets(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, zen4_two_sockets, AMD, 0x19, 0x11)
    assert len(plan.channels) == 24
    by_package = {p: [c.pmu for c in plan.channels if c.package == p] for p in (0, 1)}
    assert by_package == {0: [f"amd_umc_{n}" for n in range(12)], 1: [f"amd_umc_{n}" for n in range(12, 24)]}
    assert {c.cpu for c in plan.channels if c.package == 1} == {96}
    assert plan.saturating_bits == 48 and "saturate" in plan.why


# --- reading: bytes, rates over the measured interval, scale, saturation ------------------------------------


def test_attrs_are_cpu_wide_counting_without_exclude_bits(tmp_path: Path) -> None:
    kernel = FakeKernel()
    c = counters(plan_for(tmp_path, skx_two_sockets, INTEL, 6, 0x55), kernel, FakeClock())
    assert len(kernel.opened) == 24  # 12 channels × read, write
    for o in kernel.opened.values():
        assert o.pid == -1 and o.cpu in (0, 28) and o.sample_period == 0
        assert o.flags & (ATTR_EXCLUDE_USER | ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV) == 0
        assert o.read_format == PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
    c.close()
    assert kernel.live == []


def test_skx_bytes_are_counts_times_64_per_socket_over_the_measured_interval(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, skx_two_sockets, INTEL, 6, 0x55)
    kernel, clock = FakeKernel(), FakeClock()
    c = counters(plan, kernel, clock)
    for n in range(6):
        kernel.add(20 + n, 0x0304, 0, 1000 * (n + 1))  # socket 0 reads
        kernel.add(20 + n, 0x0C04, 0, 500)
        kernel.add(20 + n, 0x0304, 28, 10)  # socket 1
    clock.advance(1.25)  # the nominal interval was 1 s; the sampler woke late
    pkg0, pkg1 = c.read()
    assert pkg0.interval == pytest.approx(1.25)
    assert [ch.read_bytes for ch in pkg0.channels] == [64_000.0 * (n + 1) for n in range(6)]
    assert pkg0.read_bytes == 64 * 21_000 and pkg0.write_bytes == 64 * 3000
    assert pkg0.read_bytes_per_s == pytest.approx(64 * 21_000 / 1.25)
    assert pkg0.channels[1].read_bytes_per_s == pytest.approx(64_000 * 2 / 1.25)
    assert pkg1.read_bytes == 64 * 60 and pkg1.write_bytes == 0
    assert pkg1.channels[0].pmu == "uncore_imc_0" and pkg1.channels[0].package == 1
    # The next interval counts only what came since.
    kernel.add(20, 0x0304, 0, 7)
    clock.advance(0.5)
    assert c.read()[0].read_bytes == 7 * 64
    c.close()


def test_sysfs_scale_is_never_applied_on_top(tmp_path: Path) -> None:
    skx_two_sockets(tmp_path)
    for n in range(6):  # a kernel whose scale says 1 MiB a count: pmutop still counts 64 bytes
        write(tmp_path, f"sys/bus/event_source/devices/uncore_imc_{n}/events/cas_count_read.scale", "1")
    plan = plan_dram(Sysroot(tmp_path), INTEL, 6, 0x55)
    assert any("cas_count_read.scale is 1 MiB, not 64 bytes" in n for n in plan.notes)
    kernel, clock = FakeKernel(), FakeClock()
    c = counters(plan, kernel, clock)
    kernel.add(20, 0x0304, 0, 3)
    clock.advance(1.0)
    assert c.read()[0].channels[0].read_bytes == 3 * BYTES_PER_LINE


def test_gnr_sums_both_schedulers(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, gnr_scheduler0_names, INTEL, 6, 0xAD)
    kernel, clock = FakeKernel(), FakeClock()
    c = counters(plan, kernel, clock)
    kernel.add(20, 0xCF05, 0, 100)
    kernel.add(20, 0xCF06, 0, 120)
    kernel.add(20, 0xF006, 0, 9)
    clock.advance(2.0)
    ch = c.read()[0].channels[0]
    assert (ch.read_bytes, ch.write_bytes) == (220 * 64, 9 * 64)


def test_adl_free_running_64bit_wrap_is_a_delta(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, adl_free_running, INTEL, 6, 0x97)
    kernel, clock = FakeKernel(), FakeClock()
    c = counters(plan, kernel, clock)
    kernel.add(30, 0x20FF, 0, (1 << 64) - 5)
    clock.advance(1.0)
    c.read()
    kernel.add(30, 0x20FF, 0, 25)  # past 2^64: the count wraps, the delta must not
    clock.advance(1.0)
    assert c.read()[0].channels[0].read_bytes == 25 * 64


def test_multiplexed_counts_are_scaled_and_uncounted_ones_are_none(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, spr_two_sockets, INTEL, 6, 0x8F)
    kernel, clock = FakeKernel(running_share=0.5), FakeClock()
    c = counters(plan, kernel, clock)
    kernel.add(20, 0xCF05, 0, 100)
    clock.advance(1.0)
    assert c.read()[0].channels[0].read_bytes == 200 * 64  # ran half the time: × enabled/running
    kernel.running_share = 0.0
    clock.advance(1.0)
    pkg = c.read()[0]
    assert pkg.channels[0].read_bytes is None and pkg.read_bytes is None and pkg.read_bytes_per_s is None


def test_amd_umc_saturation_is_flagged_and_the_counter_reopened(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, zen4_two_sockets, AMD, 0x19, 0x11)
    kernel, clock = FakeKernel(), FakeClock()
    c = counters(plan, kernel, clock)
    kernel.add(50, 0x10A, 0, 1000)
    clock.advance(1.0)
    pkg0 = c.read()[0]
    assert not pkg0.saturated and pkg0.channels[0].read_bytes == 64_000
    ceiling = (1 << 48) - 1
    kernel.counts[(50, 0x10A, 0)] = ceiling  # an old kernel hands the stuck counter on at its ceiling
    opened_before = len(kernel.opened)
    clock.advance(1.0)
    pkg0 = c.read()[0]
    assert pkg0.channels[0].saturated and pkg0.saturated
    assert not pkg0.channels[1].saturated
    assert len(kernel.opened) == opened_before + 1  # reopened: the new event starts at zero
    kernel.add(50, 0x10A, 0, 5)
    clock.advance(1.0)
    pkg0 = c.read()[0]
    assert not pkg0.saturated and pkg0.channels[0].read_bytes == 5 * 64
    c.close()
    assert kernel.live == []


def test_amd_umc_is_reopened_before_it_can_saturate(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, zen4_two_sockets, AMD, 0x19, 0x11)
    kernel, clock = FakeKernel(), FakeClock()
    c = counters(plan, kernel, clock)
    kernel.add(50, 0x20A, 0, 1 << 47)
    clock.advance(1.0)
    ch = c.read()[0].channels[0]
    assert ch.write_bytes == (1 << 47) * 64 and not ch.saturated
    assert kernel.counts[(50, 0x20A, 0)] == 0  # a fresh event


def test_peak_from_smbios_and_mem_peak(tmp_path: Path) -> None:
    plan = plan_for(tmp_path, skx_two_sockets, INTEL, 6, 0x55)
    speed = MemorySpeed(2933, 12, "smbios")
    c = counters(plan, FakeKernel(), FakeClock(), memory_speed=speed)
    assert c.peaks == {0: 6 * 2933e6 * 8, 1: 6 * 2933e6 * 8}
    # 4 DIMMs on 2 sockets: 2 channels each carry traffic, not 6.
    c = counters(plan, FakeKernel(), FakeClock(), memory_speed=MemorySpeed(2933, 4, "smbios"))
    assert c.peaks[0] == 2 * 2933e6 * 8
    c = counters(plan, FakeKernel(), FakeClock(), mem_peak_gbs=140.0)
    assert c.peaks == {0: 140e9, 1: 140e9}
    c = counters(plan, FakeKernel(), FakeClock())
    clock_pkg = c.read()[0]
    assert c.peaks == {0: None, 1: None} and clock_pkg.peak_bytes_per_s is None and clock_pkg.peak_share is None


def test_smbios_type17_configured_speed(tmp_path: Path) -> None:
    assert configured_mts(smbios_memory_device(4800)) == (True, 4800)
    assert configured_mts(smbios_memory_device(0xFFFF, extended_mts=8800)) == (True, 8800)
    assert configured_mts(smbios_memory_device(4800, size_mb=0)) == (False, None)  # empty slot
    assert configured_mts(smbios_memory_device(0)) == (True, None)  # speed unknown
    add_smbios(tmp_path, [smbios_memory_device(5600), smbios_memory_device(4800), smbios_memory_device(0, size_mb=0)])
    speed = read_memory_speed(Sysroot(tmp_path))
    assert (speed.mts, speed.populated) == (4800, 2)
    assert read_memory_speed(Sysroot(tmp_path / "none")).mts is None


def test_llc_estimate_is_labelled() -> None:
    est = estimate_from_llc_misses(1000, 2.0)
    assert (est.bytes, est.bytes_per_s, est.estimate, est.label) == (64_000, 32_000, True, "est.")


# --- permissions and the real machine --------------------------------------------------------------------


def test_refused_open_is_one_line_saying_root_or_paranoid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_for(tmp_path, skx_two_sockets, INTEL, 6, 0x55)
    write(tmp_path, "proc/sys/kernel/perf_event_paranoid", "2")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    kernel = FakeKernel(refuse=errno.EACCES)
    c = DramCounters(plan, sysroot=Sysroot(tmp_path), opener=kernel.open, memory_speed=MemorySpeed(None, 0, ""))
    with pytest.raises(PmutopError) as err:
        c.open()
    line = str(err.value)
    assert "\n" not in line and line.startswith("DRAM bandwidth: uncore_imc_0 config 0x304 on cpu 0:")
    assert "perf_event_paranoid=2" in line and "run as root" in line and "perf_event_paranoid=0" in line


def test_the_reader_against_the_real_kernel(tmp_path: Path) -> None:
    """The real perf_event_open, read and close path, with a CPU-wide software event standing in for a memory
    channel (this VM has no uncore PMU): cpu-clock counts the nanoseconds of the measured interval."""
    import time

    from pmutop.hw.perf_event import PERF_COUNT_SW_CPU_CLOCK, PERF_TYPE_SOFTWARE
    from pmutop.probes.dram import ChannelPlan

    channel = ChannelPlan("software", PERF_TYPE_SOFTWARE, 0, 0, 0, ((PERF_COUNT_SW_CPU_CLOCK, 0, 0),), ())
    plan = DramPlan("uncore", "cpu-clock as a stand-in", None, [channel])
    c = DramCounters(plan, memory_speed=MemorySpeed(None, 0, ""))
    try:
        c.open()
    except PmutopError as e:
        pytest.skip(f"CPU-wide software events cannot be opened here: {e}")
    try:
        time.sleep(0.3)
        (pkg,) = c.read()
    finally:
        c.close()
    assert pkg.read_bytes is not None and pkg.read_bytes_per_s is not None
    assert pkg.read_bytes_per_s / BYTES_PER_LINE == pytest.approx(1e9, rel=0.2)  # ns of cpu-clock per second
    assert pkg.write_bytes == 0  # a direction without events adds nothing


def test_no_source_refuses_to_count() -> None:
    with pytest.raises(PmutopError, match="DRAM bandwidth: nothing here"):
        DramCounters(DramPlan("none", "nothing here"))


def test_this_machine_says_none_with_a_clear_why() -> None:
    devices = Path("/sys/bus/event_source/devices")
    if any(p.name.startswith(("uncore_imc", "amd_umc")) for p in devices.iterdir()):
        pytest.skip("this machine has memory-controller PMUs")
    with open("/proc/cpuinfo") as f:
        pairs = (line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines() if ":" in line)
        fields = {key.strip(): value.strip() for key, value in pairs}
    vendor = fields["vendor_id"]
    family, model = int(fields["cpu family"]), int(fields["model"])
    plan = probe_dram(Sysroot("/"), vendor, family, model)
    assert plan.source == "none" and plan.channels == []
    assert "no memory-controller PMU in sysfs" in plan.why or "no memory-controller events for" in plan.why


def test_info_json_and_text_on_this_machine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--json"]) == 0
    mb = json.loads(capsys.readouterr().out)["memory_bandwidth"]
    assert set(mb) >= {"source", "why", "channels", "notes"} and mb["why"]
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert f"DRAM traffic   {mb['source']}: {mb['why']}" in out


def test_info_json_on_a_two_socket_skylake_sysroot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [0, 28], SKYLAKE_X_LEAVES)
    skx_two_sockets(tmp_path)
    assert main(["info", "--sysroot", str(tmp_path), "--json"]) == 0
    mb = json.loads(capsys.readouterr().out)["memory_bandwidth"]
    assert mb["source"] == "uncore" and mb["table"] == "SKX/CLX" and mb["notes"] == []
    assert mb["channels"][0] == {
        "pmu": "uncore_imc_0",
        "package": 0,
        "cpu": 0,
        "type": 20,
        "read": [0x0304],
        "write": [0x0C04],
        "bytes_per_count": 64,
    }
    assert [c["package"] for c in mb["channels"]] == [0] * 6 + [1] * 6
    assert main(["info", "--sysroot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "DRAM traffic   uncore: 12 memory channels on 2 packages" in out
    assert "uncore_imc_5 package 1 cpu 28: type 25, read config 0x304, write config 0xc04, 64 bytes a count" in out


def test_info_demo_describes_the_simulated_memory(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--demo", "--json"]) == 0
    mb = json.loads(capsys.readouterr().out)["memory_bandwidth"]
    assert mb["source"] == "simulated" and mb["why"].startswith("SIMULATED")  # tests/test_issue22_sim_dram.py
