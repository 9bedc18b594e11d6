"""Top-down from the planner to the numbers, on the simulated PMU and with no perfmon tables (the encodings
ship with pmutop): PERF_METRICS (Sapphire Rapids and Ice Lake shapes), the four-event formula (Skylake shape)
and E-core events (Alder Lake shape): fractions near the simulator's truth, level 1 summing to 1, the PMU
restored. Intel's table rows in tests/fixtures/topdown only cross-check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.clock import ManualClock
from pmutop.derive import topdown
from pmutop.engine.engine import Engine
from pmutop.pmu import registers
from pmutop.pmu.perfmon import PerfmonTables
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform

TABLES = Path(__file__).parent / "fixtures" / "topdown"
FIELD = {"retiring": "tma_retiring", "bad_spec": "tma_bad_speculation", "fe_bound": "tma_frontend_bound",
         "be_bound": "tma_backend_bound"}  # fmt: skip


def run(clock: ManualClock, model: str, cpus: int, intervals: int, **kw):  # type: ignore[no-untyped-def]
    """`intervals` 1-s intervals; returns the platform, the samples and each interval's [t0, t1]."""
    platform = SimPlatform(SimConfig(model=model, cpus=cpus, seed=5, mix="tma"), clock)
    backend = MsrBackend(platform, clock, None, **kw)
    engine = Engine(backend, platform, clock, platform.online_cpus(), 1.0, threaded=False)
    before = {cpu: platform.machine.msr(cpu).snapshot() for cpu in platform.online_cpus()}
    engine.start()
    spans = [platform.machine.elapsed_ns()]
    samples = []
    for _ in range(intervals):
        clock.advance(1.0)
        samples.append(engine.tick())
        spans.append(platform.machine.elapsed_ns())
    assert engine.stop().failures == []
    after = {cpu: platform.machine.msr(cpu).snapshot() for cpu in platform.online_cpus()}
    assert after == before or all(  # the PMU is back (GLOBAL_STATUS may hold overflow bits of its own)
        {a: v for a, v in after[c].items() if a != registers.IA32_PERF_GLOBAL_STATUS}
        == {a: v for a, v in before[c].items() if a != registers.IA32_PERF_GLOBAL_STATUS}
        for c in after
    )
    return platform, samples, spans


def steady_intervals_match(platform: SimPlatform, samples: list, spans: list[int], cpu: int) -> int:  # type: ignore[type-arg]
    """Over steady phases (the truth of an interval equals the previous one's: rotated events are estimated
    from when they were last counted), every interval's fractions are within 0.02 of the truth. Returns how
    many intervals were checked."""
    workload = platform.machine.workload(cpu)
    checked = 0
    for i in range(2, len(samples)):
        want = workload.topdown(spans[i], spans[i + 1]).fractions()
        before = workload.topdown(spans[i - 1], spans[i]).fractions()
        if max(abs(want[n] - before[n]) for n in FIELD) > 0.005:
            continue  # a phase changed: an estimate from the last interval may not hold
        (s,) = [x for x in samples[i] if x.cpu == cpu]
        got = topdown.compute(s.topdown, s.counts)
        for name, field in FIELD.items():
            assert got[field] == pytest.approx(want[name], abs=0.02), (i, field)
        assert sum(got[f] for f in topdown.LEVEL1) == pytest.approx(1.0, abs=1e-9)  # type: ignore[misc]
        checked += 1
    return checked


def over_the_run(samples: list, cpu: int) -> tuple[str | None, dict[str, float | None]]:  # type: ignore[type-arg]
    """The fractions of the whole run: the counts summed over intervals (rotated events are estimates)."""
    mine = [s for batch in samples for s in batch if s.cpu == cpu]
    counts: dict[str, int] = {}
    for s in mine:
        for k, v in s.counts.items():
            counts[k] = counts.get(k, 0) + v
    return mine[-1].topdown, topdown.compute(mine[-1].topdown, counts)


def close_to_truth(platform: SimPlatform, cpu: int, t0: int, t1: int, got: dict, tol: float = 0.02) -> None:  # type: ignore[type-arg]
    want = platform.machine.workload(cpu).topdown(t0, t1).fractions()
    for name, field in FIELD.items():
        assert got[field] == pytest.approx(want[name], abs=tol), field
    assert sum(got[f] for f in topdown.LEVEL1) == pytest.approx(1.0, abs=1e-9)


def test_sapphire_rapids_shape_measures_level_1_and_2_by_default(clock: ManualClock) -> None:
    platform, samples, spans = run(clock, "spr", 2, 30)
    for cpu in (0, 1):
        method, got = over_the_run(samples, cpu)
        assert method == "perf_metrics"
        close_to_truth(platform, cpu, spans[0], spans[-1], got)
        assert steady_intervals_match(platform, samples, spans, cpu) >= 5
        assert got["tma_heavy_operations"] is not None and got["tma_memory_bound"] is not None


def test_ice_lake_shape_measures_level_1_by_default(clock: ManualClock) -> None:
    platform, samples, spans = run(clock, "icx", 1, 30)
    method, got = over_the_run(samples, 0)
    assert method == "perf_metrics"
    close_to_truth(platform, 0, spans[0], spans[-1], got)
    assert got["tma_heavy_operations"] is None  # Ice Lake's PERF_METRICS has level 1 only


def test_skylake_shape_uses_the_formula_with_built_in_events_only_when_asked(clock: ManualClock) -> None:
    _, samples, _ = run(clock, "skx", 1, 2)
    assert samples[-1][0].topdown is None  # it costs general counters: off unless --topdown
    platform, samples, spans = run(ManualClock(1), "skx", 1, 60, topdown=True)
    assert samples[-1][0].topdown == "slots4"
    assert steady_intervals_match(platform, samples, spans, 0) >= 5
    assert any(samples[-1][0].estimated)  # its events take turns with the others on 4 counters


def test_alder_lake_shape_measures_p_cores_by_perf_metrics_and_e_cores_by_their_events(clock: ManualClock) -> None:
    platform, samples, spans = run(clock, "adl", 4, 60, topdown=True)
    methods = {}
    for cpu in range(4):
        methods[cpu] = samples[-1][cpu].topdown
        assert steady_intervals_match(platform, samples, spans, cpu) >= 5
    assert methods == {0: "perf_metrics", 1: "perf_metrics", 2: "gracemont", 3: "gracemont"}


def test_tables_change_nothing_measured(clock: ManualClock) -> None:
    """The perfmon tables only cross-check the built-in encodings: with or without them, the same counts."""
    _, without, _ = run(clock, "adl", 4, 5, topdown=True)
    _, with_tables, _ = run(ManualClock(1), "adl", 4, 5, topdown=True, tables=PerfmonTables.locate(str(TABLES)))
    assert [s.topdown for s in without[-1]] == ["perf_metrics", "perf_metrics", "gracemont", "gracemont"]
    for a, b in zip(without, with_tables, strict=True):
        assert [(s.topdown, s.counts) for s in a] == [(s.topdown, s.counts) for s in b]


@pytest.mark.integration
def test_demo_batch_json_carries_top_down_fields() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pmutop", "--demo", "--batch", "--count", "2", "--interval", "0.1", "--cores", "0",
         "--format", "json", "--records", "cpu"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    for line in out.splitlines():
        rec = json.loads(line)
        assert sum(rec[f] for f in topdown.LEVEL1) == pytest.approx(1.0, abs=1e-5)
        assert rec["tma_light_operations"] is not None
    off = subprocess.run(
        [sys.executable, "-m", "pmutop", "--demo", "--batch", "--count", "1", "--interval", "0.1", "--cores", "0",
         "--format", "json", "--records", "cpu", "--no-topdown"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert json.loads(off)["tma_retiring"] is None


def test_with_smt_the_skylake_formula_is_per_core_with_anythread_events(clock: ManualClock) -> None:
    siblings = {f"sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list": "0-1" for c in (0, 1)}
    platform = SimPlatform(SimConfig(model="skx", cpus=2, seed=5), clock, siblings)
    backend = MsrBackend(platform, clock, None, topdown=True)
    engine = Engine(backend, platform, clock, [0, 1], 1.0, threaded=False)
    engine.start()
    any_selects = set()
    for _ in range(3):  # the groups take turns: look at every one
        clock.advance(1.0)
        (s, _) = engine.tick()
        for i in range(4):
            value = platform.machine.msr(0).read(registers.evtsel(i))
            if value & registers.EVTSEL_ANY:
                any_selects.add(value & 0xFFFF)
    engine.stop()
    assert s.topdown == "slots4_smt"
    # CPU_CLK_UNHALTED.THREAD_ANY (0x3C) and INT_MISC.RECOVERY_CYCLES_ANY (0x0D/0x01) with AnyThread (bit 21);
    # nothing else ever gets that bit.
    assert any_selects == {0x003C, 0x010D}


def test_the_top_down_view_with_256_cores() -> None:
    import asyncio

    from pmutop.app.screenshots import demo_app
    from pmutop.tui.screens.topdown import TopdownScreen

    async def check() -> None:
        app, engine, _, _ = demo_app(cpus=256, e_cores=0, model="spr", intervals=3)
        try:
            async with app.run_test(size=(80, 24)) as pilot:
                await pilot.press("t")
                await pilot.pause()
                assert isinstance(app.screen, TopdownScreen)
                table = app.screen.query_one("#tma")
                assert table.row_count == 257  # every core and the all row
                await pilot.press("escape")
                assert not isinstance(app.screen, TopdownScreen)
        finally:
            engine.stop()

    asyncio.run(check())
