"""Counters narrower than an interval needs (32-bit parts): read as often as a wrap can happen, added up in
64-bit totals, and reported exactly at any user interval."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pmutop.backends.msr.backend import MsrBackend
from pmutop.backends.msr.counters import shortest_wrap_s
from pmutop.core.clock import ManualClock
from pmutop.core.sample import Sample
from pmutop.derive.metrics import for_sample
from pmutop.derive.records import record
from pmutop.engine.engine import Engine
from pmutop.pmu.events import parse_events
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform

NS = 1_000_000_000
FIELDS = ("instructions", "cycles", "ref_cycles", "llc_references", "llc_misses", "branches", "branch_misses")


def make(
    clock: ManualClock, interval: float, config: SimConfig | None = None, **kw
) -> tuple[SimPlatform, MsrBackend, Engine]:
    platform = SimPlatform(config or SimConfig(cpus=2, seed=3, gp_width=32, fixed_width=32), clock)
    backend = MsrBackend(platform, clock, kw.pop("events", None), **kw)
    engine = Engine(backend, platform, clock, platform.online_cpus(), interval, threaded=False)
    return platform, backend, engine


def truth(platform: SimPlatform, cpu: int, a_ns: int, b_ns: int) -> dict[str, int]:
    """What the simulated workload really did between two machine times (user + kernel)."""
    wl = platform.machine.workload(cpu)
    a, b = wl.cumulative(a_ns).total, wl.cumulative(b_ns).total
    return {f: getattr(b, f) - getattr(a, f) for f in FIELDS}


def run_interval(clock: ManualClock, engine: Engine) -> list[Sample]:
    """What a sampler thread does in one interval: accumulate every period, then read at the deadline."""
    period = engine.accumulate_period_ns
    assert period is not None
    end = clock.now_ns() + round(engine.interval * NS)
    while clock.now_ns() + period < end:
        clock.set_ns(clock.now_ns() + period)
        engine.accumulate()
    clock.set_ns(end)
    return engine.tick()


def test_wide_counters_need_no_accumulation(clock: ManualClock) -> None:
    _, backend, engine = make(clock, 1.0, SimConfig(cpus=1, seed=5))
    engine.start()
    assert backend.counters(0).accumulate_period_ns is None
    assert engine.accumulate_period_ns is None
    engine.stop()


def test_accumulate_period_is_half_the_shortest_wrap(clock: ManualClock) -> None:
    _, backend, engine = make(clock, 1.0, SimConfig(cpus=1, seed=5, gp_width=48, fixed_width=32))
    engine.start()
    period = backend.counters(0).accumulate_period_ns
    assert period is not None and period == pytest.approx(shortest_wrap_s(32) / 2 * NS, abs=1)
    assert engine.accumulate_period_ns == period
    engine.stop()


@pytest.mark.parametrize("interval", [0.5, 2.0])
def test_32_bit_counters_give_exact_counts_at_long_intervals(clock: ManualClock, interval: float) -> None:
    platform, _, engine = make(clock, interval)
    engine.start()
    prev = platform.machine.elapsed_ns()
    start = prev
    overflows = {cpu: dict.fromkeys(FIELDS, 0) for cpu in (0, 1)}
    for _ in range(max(3, round(4 / interval))):
        samples = run_interval(clock, engine)
        now = platform.machine.elapsed_ns()
        assert len(samples) == 2
        for s in samples:
            assert s.suspect is None, s.suspect
            assert s.interval == pytest.approx(interval)
            assert s.counts == truth(platform, s.cpu, prev, now)
            assert s.tsc == platform.machine.workload(s.cpu).ticks(now) - platform.machine.workload(s.cpu).ticks(prev)
            m = for_sample(s)
            assert m.ipc is not None and m.util is not None and m.ghz is not None
            assert record(s, "SIMULATED")["ipc"] == pytest.approx(m.ipc, rel=5e-6)  # 6 significant digits
            for k, v in s.overflows.items():
                overflows[s.cpu][k] += v
        prev = now
    # Counters start at 0 when programmed: every wrap is reported once, in the interval it happened.
    for cpu in (0, 1):
        total = truth(platform, cpu, start, prev)
        assert any(v >> 32 for v in total.values())  # the test really crosses wraps
        assert overflows[cpu] == {k: v >> 32 for k, v in total.items()}
    assert engine.stop().failures == []


def test_a_read_gap_longer_than_the_wrap_time_is_still_suspect(clock: ManualClock) -> None:
    """Accumulation keeps reads close together; a sampler that really fell behind is still caught."""
    _, _, engine = make(clock, 0.5)
    engine.start()
    assert all(s.suspect is None for s in run_interval(clock, engine))
    clock.advance(0.2)  # 200 ms without an accumulate: a second wrap could hide in here
    engine.accumulate()
    clock.advance(0.01)
    for s in engine.tick():
        assert s.suspect is not None and "shortest wrap time" in s.suspect and "0.2 s" in s.suspect
    assert all(s.suspect is None for s in run_interval(clock, engine))  # and the next interval is fine
    engine.stop()


def test_rotation_with_accumulation_counts_the_active_group_exactly(clock: ManualClock) -> None:
    """Two GP counters, three events, 32-bit counters: the counted group is exact, fixed counters too,
    resting events are estimates, and nothing is suspect."""
    events = parse_events(["llc-misses,branches,branch-misses"])
    platform, _, engine = make(
        clock, 0.5, SimConfig(cpus=1, seed=3, gp_counters=2, gp_width=32, fixed_width=32), events=events
    )
    engine.start()
    prev = platform.machine.elapsed_ns()
    for k in range(6):
        (s,) = run_interval(clock, engine)
        now = platform.machine.elapsed_ns()
        want = truth(platform, 0, prev, now)
        counted = ["llc_misses", "branches"] if k % 2 == 0 else ["branch_misses"]
        for key in ["instructions", "cycles", "ref_cycles", *counted]:
            assert s.counts[key] == want[key], (k, key)
        assert s.suspect is None, s.suspect
        if k >= 2:
            assert s.estimated == {"llc_misses": 0.5, "branches": 0.5, "branch_misses": 0.5}
        prev = now
    assert engine.stop().failures == []


@pytest.mark.parametrize("native", [True, False], ids=["one thread for every CPU", "a thread per CPU"])
def test_threaded_sampler_accumulates_between_deadlines_without_drift(native: bool) -> None:
    """The real sampler threads on a real clock: 32-bit counters at 0.3 s are never suspect, stay on the
    shared deadline schedule, and stop promptly."""
    platform = SimPlatform(SimConfig(cpus=2, seed=5, gp_width=32, fixed_width=32))
    backend = MsrBackend(platform, platform.clock)
    engine = Engine(backend, platform, platform.clock, [0, 1], 0.3, native=native)
    try:
        engine.start()
        assert engine.wait_for_samples({0: 2, 1: 2}, timeout=10)
    finally:
        t = time.monotonic()
        result = engine.stop()
        stopped_in = time.monotonic() - t
    assert result.failures == []
    assert stopped_in < 0.5
    for cpu in (0, 1):
        samples = list(engine.rings[cpu])[:3]
        assert len(samples) == 3
        for k, s in enumerate(samples, 1):
            assert s.error is None and s.suspect is None, s.suspect
            assert s.time == pytest.approx(0.3 * k, abs=0.1)  # deadline k, not k intervals after the last read
            assert for_sample(s).ipc is not None


@pytest.mark.integration
def test_demo_batch_with_32_bit_counters_is_not_suspect(project_root: Path) -> None:
    args = ["--demo", "--batch", "--sim-gp-width", "32", "--sim-fixed-width", "32", "--interval", "0.5"]
    run = subprocess.run(
        [sys.executable, "-m", "pmutop", *args, "--count", "3", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=project_root,
    )
    assert run.returncode == 0, run.stderr
    records = [
        r for line in run.stdout.splitlines() if (r := json.loads(line))["kind"] == "cpu"
    ]  # not package (issue 22)
    assert len(records) == 3 * 8  # 8 simulated CPUs by default
    # A machine loaded enough to delay the sampler past half the wrap time (a CI run of the whole suite on two
    # CPUs, now and then) rightly marks that interval suspect, saying so: that is the load, not a misread wrap.
    late = "(the sampler fell behind)"
    assert all(r["suspect"] is None or r["suspect"].endswith(late) for r in records), records
    clean = [r for r in records if r["suspect"] is None]
    assert len(clean) >= len(records) // 2, [r["suspect"] for r in records]
    for r in clean:
        assert isinstance(r["ipc"], float)
        assert isinstance(r["instructions_per_s"], float)
    assert any(r["overflows"] for r in records)  # the counters did wrap meanwhile
