"""What the engine's threads cost while they wait: samplers sleep on their own deadlines, readers are woken
by the sample that completes their wait (not by polling), and stopping wakes everyone at once."""

from __future__ import annotations

import threading
import time

from pmutop.backends.sim import SimBackend
from pmutop.core.clock import ManualClock, MonotonicClock
from pmutop.engine.engine import Engine
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform


def make(clock, cpus: int = 4, interval: float = 1.0, threaded: bool = False, **kw) -> Engine:  # type: ignore[no-untyped-def]
    platform = SimPlatform(SimConfig(cpus=cpus, seed=2), clock)
    return Engine(
        SimBackend(platform, clock), platform, clock, platform.online_cpus(), interval, threaded=threaded, **kw
    )


def wait_in_thread(engine: Engine, counts: dict[int, int], **kw) -> tuple[threading.Thread, dict]:  # type: ignore[no-untyped-def,type-arg]
    out: dict = {"wakeups": 0}  # type: ignore[type-arg]

    def body() -> None:
        out["result"] = engine.wait_for_samples(
            counts, on_wait=lambda: out.__setitem__("wakeups", out["wakeups"] + 1), **kw
        )

    t = threading.Thread(target=body, daemon=True)
    t.start()
    return t, out


def test_a_reader_is_not_woken_until_the_interval_is_complete() -> None:
    clock = ManualClock(1)
    engine = make(clock)
    engine.start()
    t, out = wait_in_thread(engine, dict.fromkeys(engine.cpus, 0), timeout=60)
    time.sleep(0.3)  # a polling reader would have woken here several times
    assert t.is_alive() and out["wakeups"] == 0
    clock.advance(1.0)
    engine.tick()
    t.join(timeout=10)
    assert out == {"wakeups": 0, "result": True}
    engine.stop()


def test_a_reader_waiting_for_more_cpus_than_have_published_keeps_waiting() -> None:
    clock = ManualClock(1)
    engine = make(clock, cpus=2)
    engine.start()
    clock.advance(1.0)
    engine.samplers[0].take()  # only cpu 0 publishes: the wait is not over
    engine.published(0, 1)
    t, out = wait_in_thread(engine, {0: 0, 1: 0}, timeout=60)
    time.sleep(0.1)
    assert t.is_alive()
    engine.samplers[1].take()
    engine.published(1, 1)
    t.join(timeout=10)
    assert out["result"] is True
    engine.stop()


def test_setting_the_stop_event_and_waking_ends_a_long_wait_at_once() -> None:
    clock = ManualClock(1)
    engine = make(clock)
    engine.start()
    stop = threading.Event()
    t, out = wait_in_thread(engine, dict.fromkeys(engine.cpus, 0), timeout=600, stop=stop)
    time.sleep(0.1)
    stop.set()
    engine.wake_waiters()  # what the exit guard's on_stop callback does
    t.join(timeout=10)
    assert not t.is_alive() and out["result"] is False
    engine.stop()


def test_engine_stop_ends_a_wait_without_a_stop_event() -> None:
    engine = make(ManualClock(1))
    engine.start()
    t, out = wait_in_thread(engine, dict.fromkeys(engine.cpus, 0), timeout=600)
    time.sleep(0.1)
    engine.stop()
    t.join(timeout=10)
    assert out["result"] is False


def test_one_thread_samples_every_simulated_cpu_and_is_woken_only_by_schedule_changes_and_stop() -> None:
    engine = make(MonotonicClock(), cpus=4, interval=0.05, threaded=True)
    try:
        engine.start()
        assert engine.sampler_mode == "one Python thread for every CPU: simulated CPUs, nothing to pin a sampler to"
        drive = engine._one_thread
        assert drive is not None and [t.name for t in engine._threads] == ["pmutop-samplers"]
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 3), timeout=30)
        for cpu in engine.cpus:  # sample k of every CPU ends after deadline k, and each covers one interval
            samples = list(engine.rings[cpu])
            assert [s.seq for s in samples] == list(range(1, len(samples) + 1))
            assert all(s.time >= s.seq * 0.05 and s.error is None for s in samples)
        assert drive.early_wakeups == 0  # many deadlines passed; none woke it early
        engine.set_interval(600)  # it now sleeps towards a deadline 10 minutes away
        time.sleep(0.3)
        before = drive.early_wakeups
        engine.set_interval(600)  # wakes it once
        deadline = time.monotonic() + 30
        while drive.early_wakeups != before + 1:
            assert time.monotonic() < deadline, "the sleeping thread was not woken by the schedule change"
            time.sleep(0.01)
    finally:
        engine.stop()
    assert all(not t.is_alive() for t in engine._threads)  # stop woke it from a 10-minute sleep


def test_an_unthreaded_engine_takes_sample_k_at_its_deadline_and_not_before() -> None:
    # Batch mode with perf reads every CPU from the main thread this way (no sampler threads to wake).
    clock = MonotonicClock()
    engine = make(clock, cpus=2, interval=0.05)
    engine.start()
    try:
        for k in (1, 2, 3):
            assert engine.tick_on_schedule() is True
            for cpu in engine.cpus:
                s = engine.rings[cpu].latest()
                assert s is not None and s.seq == k
                assert s.time >= k * 0.05  # epoch + k x interval: the schedule the samplers keep
    finally:
        engine.stop()


def test_stopping_ends_an_unthreaded_wait_for_the_next_deadline_at_once() -> None:
    clock = ManualClock(1)  # never reaches the deadline by itself
    engine = make(clock, cpus=2, interval=3600)
    engine.start()
    stop = threading.Event()
    out: dict[str, bool] = {}
    t = threading.Thread(target=lambda: out.__setitem__("ticked", engine.tick_on_schedule(stop)), daemon=True)
    t.start()
    time.sleep(0.1)
    assert t.is_alive()
    stop.set()
    engine.wake_waiters()  # what the exit guard does on a signal
    t.join(timeout=10)
    assert out == {"ticked": False}
    assert all(engine.rings[cpu].count == 0 for cpu in engine.cpus)
    engine.stop()


def test_a_new_interval_moves_an_unthreaded_wait_to_the_new_schedule() -> None:
    clock = ManualClock(1)
    engine = make(clock, cpus=2, interval=3600)
    engine.start()
    out: dict[str, bool] = {}
    t = threading.Thread(target=lambda: out.__setitem__("ticked", engine.tick_on_schedule()), daemon=True)
    t.start()
    time.sleep(0.1)
    engine.set_interval(0.5)  # the next deadline is now 0.5 s away, not an hour
    clock.advance(0.5)
    t.join(timeout=10)
    assert out == {"ticked": True}
    assert all(engine.rings[cpu].count == 1 for cpu in engine.cpus)
    engine.stop()
