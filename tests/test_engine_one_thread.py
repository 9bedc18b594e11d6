"""Simulated CPUs sampled by one Python thread (pmutop.engine.one_thread): the same samples as a thread per CPU
would take, a failing CPU dropped alone, and a thread per CPU where asked for."""

from __future__ import annotations

import errno
import time

import pytest

from pmutop.backends.sim import SimBackend
from pmutop.core.clock import Clock, ManualClock, MonotonicClock
from pmutop.engine.engine import Engine
from pmutop.hw.msr import MsrAccessError
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform


def make(cpus: int = 3, interval: float = 0.05, clock: Clock | None = None, **kw) -> tuple[SimPlatform, Engine]:  # type: ignore[no-untyped-def]
    clock = clock or MonotonicClock()
    platform = SimPlatform(SimConfig(cpus=cpus, seed=4), clock)
    return platform, Engine(SimBackend(platform, clock), platform, clock, platform.online_cpus(), interval, **kw)


def wait_until(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_sample_k_of_every_cpu_counts_what_its_workload_ran_in_interval_k() -> None:
    clock = ManualClock(1_000_000_000)  # the thread sleeps in real time, then reads the clock the test moves
    platform, engine = make(clock=clock)
    try:
        engine.start()
        assert engine._one_thread is not None
        for k in (1, 2, 3):
            clock.advance(0.05)
            assert engine.wait_for_samples(dict.fromkeys(engine.cpus, k - 1), timeout=10)
    finally:
        engine.stop()
    for cpu in engine.cpus:
        workload = platform.machine.workload(cpu)
        for k, s in enumerate(engine.rings[cpu], 1):
            assert s.seq == k and s.time == pytest.approx(0.05 * k) and s.error is None and s.suspect is None
            before, after = workload.cumulative((k - 1) * 50_000_000).total, workload.cumulative(k * 50_000_000).total
            assert s.counts["instructions"] == after.instructions - before.instructions
            assert s.counts["cycles"] == after.cycles - before.cycles


def test_a_cpu_whose_read_fails_is_dropped_and_the_others_go_on() -> None:
    _, engine = make()
    try:
        engine.start()
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 1), timeout=10)

        def broken():  # type: ignore[no-untyped-def]
            raise MsrAccessError(1, 0x38E, "read", errno.EIO)

        engine.samplers[1].counters.read = broken  # type: ignore[method-assign]
        wait_until(lambda: 1 in engine.failures())
        assert engine.failures() == {1: "cpu 1: read of IA32_PERF_GLOBAL_STATUS (0x38e) failed: Input/output error"}
        assert engine.rings[1].latest().error == engine.failures()[1]  # type: ignore[union-attr]
        counts = {cpu: engine.rings[cpu].count for cpu in (0, 2)}
        assert engine.wait_for_samples({cpu: n + 2 for cpu, n in counts.items()}, timeout=10)
    finally:
        assert engine.stop().failures == []


def test_simulated_cpus_have_one_thread_even_where_python_samplers_are_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PMUTOP_SAMPLERS", "python")
    _, engine = make(cpus=2)
    try:
        engine.start()
        assert engine.sampler_mode == "one Python thread for every CPU: simulated CPUs, nothing to pin a sampler to"
        assert engine._one_thread is not None and [t.name for t in engine._threads] == ["pmutop-samplers"]
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 1), timeout=10)
    finally:
        engine.stop()


def test_each_cpus_sample_is_taken_at_one_instant_of_its_simulated_time(monkeypatch: pytest.MonkeyPatch) -> None:
    platform, engine = make(cpus=2)
    entered: list[int] = []
    real = platform.one_instant

    def one_instant(cpu: int):  # type: ignore[no-untyped-def]
        entered.append(cpu)
        return real(cpu)

    monkeypatch.setattr(platform, "one_instant", one_instant)
    try:
        engine.start()
        assert engine.wait_for_samples({0: 2, 1: 2}, timeout=10)
    finally:
        engine.stop()
    taken = [s.cpu for cpu in engine.cpus for s in engine.rings[cpu]]
    assert sorted(entered) == sorted(taken)
