"""Late samples and wraps at awkward moments: rates use the time really covered, and every delta stays exact."""

from __future__ import annotations

import pytest

from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.clock import ManualClock
from pmutop.derive.metrics import combined, for_sample
from pmutop.derive.records import record
from pmutop.engine.engine import Engine
from pmutop.pmu.events import parse_events
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform
from pmutop.tui.model import ViewModel, summed

NS = 1_000_000_000
FIELDS = ("instructions", "cycles", "ref_cycles", "llc_references", "llc_misses", "branches", "branch_misses")


def make(clock: ManualClock, config: SimConfig, interval: float = 1.0, **kw) -> tuple[SimPlatform, MsrBackend, Engine]:
    platform = SimPlatform(config, clock)
    backend = MsrBackend(platform, clock, kw.pop("events", None), **kw)
    engine = Engine(backend, platform, clock, platform.online_cpus(), interval, threaded=False)
    return platform, backend, engine


def truth(platform: SimPlatform, cpu: int, a_ns: int, b_ns: int) -> dict[str, int]:
    wl = platform.machine.workload(cpu)
    a, b = wl.cumulative(a_ns).total, wl.cumulative(b_ns).total
    return {f: getattr(b, f) - getattr(a, f) for f in FIELDS}


def first_wrap_ns(platform: SimPlatform, cpu: int, field: str, width: int, limit_s: float = 60.0) -> int:
    """The machine time at which a counter of `field`, programmed at time 0, first wraps."""
    wl = platform.machine.workload(cpu)
    lo, hi = 0, round(limit_s * NS)
    assert getattr(wl.cumulative(hi).total, field) >> width, f"{field} does not wrap within {limit_s} s"
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if getattr(wl.cumulative(mid).total, field) >> width:
            hi = mid
        else:
            lo = mid
    return hi


# -- (1) a late sample ---------------------------------------------------------------------------------------


def test_a_late_sample_reports_the_time_it_really_covers(clock: ManualClock) -> None:
    """cpu 1's sampler runs 0.3 s late on a 1 s interval: its interval, its rates and the total row's rates
    use 1.3 s (and 0.7 s for the next one), not the nominal 1 s."""
    _, _, engine = make(clock, SimConfig(cpus=2, seed=3))
    engine.start()
    clock.advance(1.0)
    engine.tick()
    clock.advance(1.0)
    s0 = engine.samplers[0].take()  # on time
    clock.advance(0.3)
    s1 = engine.samplers[1].take()  # late
    assert s0.interval == pytest.approx(1.0)
    assert s1.interval == pytest.approx(1.3)
    for s in (s0, s1):
        assert s.suspect is None
        rec = record(s, "SIMULATED")
        assert rec["interval"] == pytest.approx(s.interval)
        for k, v in s.counts.items():
            assert rec[f"{k}_per_s"] == pytest.approx(v / s.interval, rel=5e-6)  # 6 significant digits
        assert rec["llc_misses_per_s"] == pytest.approx(s.counts["llc_misses"] / s.interval, rel=5e-6)
        assert for_sample(s).llc_misses_per_s == pytest.approx(s.counts["llc_misses"] / s.interval)

    # All cores together: the sum of each core's rate over its own interval.
    rate = {k: s0.counts[k] / 1.0 + s1.counts[k] / 1.3 for k in s0.counts}
    assert combined([s0, s1]).llc_misses_per_s == pytest.approx(rate["llc_misses"])
    total = summed([s0, s1])
    assert total is not None
    for k, v in rate.items():
        assert total.counts[k] / total.interval == pytest.approx(v, abs=1.0)  # counts are whole numbers
    model = ViewModel([0, 1])
    model.ingest(engine.rings)
    assert model.total.metrics is not None
    assert model.total.metrics.llc_misses_per_s == pytest.approx(rate["llc_misses"])
    assert model.total.history["llc_misses_per_s"][-1] == pytest.approx(rate["llc_misses"])
    assert model.cores[1].metrics is not None
    assert model.cores[1].metrics.llc_misses_per_s == pytest.approx(s1.counts["llc_misses"] / 1.3)

    # The schedule does not move: the next deadline is still t = 3 s, so cpu 1's next sample covers 0.7 s.
    clock.advance(0.7)
    n0, n1 = engine.tick()
    assert n0.interval == pytest.approx(1.0)
    assert n1.interval == pytest.approx(0.7)
    assert record(n1, "SIMULATED")["cycles_per_s"] == pytest.approx(n1.counts["cycles"] / 0.7)
    engine.stop()


def test_equal_intervals_keep_the_total_rows_counts_exact(clock: ManualClock) -> None:
    _, _, engine = make(clock, SimConfig(cpus=3, seed=3))
    engine.start()
    clock.advance(1.0)
    samples = engine.tick()
    total = summed(samples)
    assert total is not None and total.interval == pytest.approx(1.0)
    assert total.counts == {k: sum(s.counts[k] for s in samples) for k in samples[0].counts}
    engine.stop()


# -- (2) a wrap between the counter read and the GLOBAL_STATUS read ------------------------------------------


def _race(platform: SimPlatform, clock: ManualClock, jump_ns: int) -> None:
    """The next counter read is followed by `jump_ns` of time before anything else is read (once)."""

    def hook(cpu: int) -> None:
        platform.machine.after_counter_read = None
        clock.set_ns(clock.now_ns() + jump_ns)

    platform.machine.after_counter_read = hook


def _approach(platform: SimPlatform, clock: ManualClock, engine: Engine, target: int) -> None:
    """Bring the machine to time `target`, reading as a sampler would so no wrap goes unseen."""
    step = engine.accumulate_period_ns or 40_000_000
    while platform.machine.elapsed_ns() + step < target:
        clock.set_ns(clock.now_ns() + step)
        if engine.accumulate_period_ns is not None:
            engine.accumulate()
        else:
            engine.tick()
    clock.set_ns(clock.now_ns() + target - platform.machine.elapsed_ns())


def test_a_wrap_between_rdpmc_and_the_status_read_is_carried_to_the_next_read(clock: ManualClock) -> None:
    """The overflow bit shows up one read before the counter value wraps: both deltas are still exact."""
    platform, _, engine = make(clock, SimConfig(cpus=1, seed=5, fixed_width=32), interval=0.05)
    engine.start()
    wrap = first_wrap_ns(platform, 0, "cycles", 32)
    _approach(platform, clock, engine, wrap - 1_000)
    engine.tick()
    prev = platform.machine.elapsed_ns()
    clock.set_ns(clock.now_ns() + 500)  # 500 ns before the wrap
    _race(platform, clock, 1_000)  # the status read happens 500 ns after it
    (a,) = engine.tick()
    at_a = wrap - 500
    assert platform.machine.elapsed_ns() == wrap + 500
    assert a.overflows == {"cycles": 1}  # the bit is here ...
    assert a.counts == truth(platform, 0, prev, at_a)  # ... but the value read had not wrapped yet
    assert a.suspect is None
    clock.set_ns(clock.now_ns() + 30_000_000)
    (b,) = engine.tick()
    assert b.counts == truth(platform, 0, at_a, platform.machine.elapsed_ns())  # the wrap shows now
    assert b.overflows == {}  # counted once
    assert b.suspect is None, b.suspect
    engine.stop()


def test_a_wrap_between_rdpmc_and_the_status_read_while_accumulating(clock: ManualClock) -> None:
    platform, _, engine = make(clock, SimConfig(cpus=1, seed=5, gp_width=32, fixed_width=32), interval=1.0)
    engine.start()
    start = platform.machine.elapsed_ns()
    wrap = first_wrap_ns(platform, 0, "cycles", 32)
    _approach(platform, clock, engine, wrap - 500)
    _race(platform, clock, 1_000)
    engine.accumulate()
    assert platform.machine.elapsed_ns() == wrap + 500
    clock.set_ns(clock.now_ns() + 30_000_000)
    engine.accumulate()
    clock.set_ns(clock.now_ns() + 30_000_000)
    (s,) = engine.tick()
    assert s.counts == truth(platform, 0, start, platform.machine.elapsed_ns())
    assert s.overflows.get("cycles") == 1
    assert s.suspect is None, s.suspect
    engine.stop()


def test_a_wrap_between_rdpmc_and_the_status_read_survives_a_rotation(clock: ManualClock) -> None:
    """With rotating event groups the fixed counters keep their baseline and their carried overflow across
    the reprogramming of the GP counters."""
    events = parse_events(["llc-misses,branches,branch-misses"])
    config = SimConfig(cpus=1, seed=5, gp_counters=2, fixed_width=32)
    platform, _, engine = make(clock, config, interval=0.05, events=events)
    engine.start()
    wrap = first_wrap_ns(platform, 0, "cycles", 32)
    _approach(platform, clock, engine, wrap - 1_000)
    engine.tick()
    prev = platform.machine.elapsed_ns()
    clock.set_ns(clock.now_ns() + 500)
    _race(platform, clock, 1_000)
    (a,) = engine.tick()
    at_a = wrap - 500
    assert a.overflows.get("cycles") == 1
    for key in ("instructions", "cycles", "ref_cycles"):
        assert a.counts[key] == truth(platform, 0, prev, at_a)[key], key
    clock.set_ns(clock.now_ns() + 30_000_000)
    (b,) = engine.tick()
    now = platform.machine.elapsed_ns()
    for key in ("instructions", "cycles", "ref_cycles"):
        assert b.counts[key] == truth(platform, 0, at_a, now)[key], key
    assert "cycles" not in b.overflows
    assert a.suspect is None and b.suspect is None, (a.suspect, b.suspect)
    engine.stop()


# -- (3) a wrap inside a normal interval ---------------------------------------------------------------------


@pytest.mark.parametrize("width", [32, 40])
def test_a_wrap_inside_an_interval_is_exact_and_counted_once(clock: ManualClock, width: int) -> None:
    platform, _, engine = make(clock, SimConfig(cpus=1, seed=5, gp_width=48, fixed_width=width), interval=0.05)
    engine.start()
    wrap = first_wrap_ns(platform, 0, "instructions", width, limit_s=600.0)
    _approach(platform, clock, engine, wrap - 20_000_000)  # 20 ms before the wrap
    engine.tick()
    prev = platform.machine.elapsed_ns()
    clock.set_ns(clock.now_ns() + 40_000_000)  # a normal interval with the wrap in its middle
    (s,) = engine.tick()
    assert s.counts == truth(platform, 0, prev, platform.machine.elapsed_ns())
    assert s.counts["instructions"] > 0
    assert s.overflows == {"instructions": 1}
    assert s.suspect is None
    engine.stop()
