from __future__ import annotations

from collections import namedtuple

import pytest

from pmutop.sources.cputimes import CpuBusy

T = namedtuple("T", "user nice system idle iowait irq softirq steal guest guest_nice")


def test_busy_fraction_from_per_cpu_time_deltas() -> None:
    table = [[T(10, 0, 5, 100, 0, 0, 0, 0, 3, 0), T(1, 0, 1, 200, 0, 0, 0, 0, 0, 0)]]
    busy = CpuBusy([0, 2], lambda percpu: table[0])
    assert busy.busy(0) is None  # first call: no interval yet
    assert busy.busy(2) is None
    # cpu 0: +3 user, +1 softirq busy, +4 idle -> 4/8; guest time is already inside user
    table[0] = [T(13, 0, 5, 104, 0, 0, 1, 0, 6, 0), T(1, 0, 1, 210, 0, 0, 0, 0, 0, 0)]
    assert busy.busy(0) == pytest.approx(0.5)
    assert busy.busy(2) == pytest.approx(0.0)


def test_cpu_set_change_gives_no_value() -> None:
    table = [[T(1, 0, 0, 1, 0, 0, 0, 0, 0, 0)] * 2]
    busy = CpuBusy([0, 1], lambda percpu: table[0])
    busy.busy(0)
    table[0] = [T(2, 0, 0, 2, 0, 0, 0, 0, 0, 0)]  # cpu 1 went offline
    assert busy.busy(0) is None


def test_a_spinning_pinned_thread_shows_as_busy_on_its_cpu() -> None:
    import os
    import time

    import psutil

    cpu = max(os.sched_getaffinity(0))
    busy = CpuBusy(list(range(len(psutil.cpu_times(percpu=True)))))
    old = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        busy.busy(cpu)
        end = time.monotonic() + 0.4
        while time.monotonic() < end:  # spin: this CPU is busy the whole time
            pass
        value = busy.busy(cpu)
    finally:
        os.sched_setaffinity(0, old)
    assert value is not None and value > 0.6


def test_the_kernel_cpu_times_are_read_once_per_interval_for_all_cpus() -> None:
    n = 64
    calls = []

    def cpu_times(percpu: bool) -> list[T]:
        calls.append(percpu)
        k = len(calls)  # each read: every CPU 1 s busier and 3 s idler
        return [T(k, 0, 0, 3 * k, 0, 0, 0, 0, 0, 0)] * n

    busy = CpuBusy(list(range(n)), cpu_times)
    assert all(busy.busy(c) is None for c in range(n))
    assert len(calls) == 1
    for interval in range(2, 5):
        values = [busy.busy(c) for c in range(n)]
        assert len(calls) == interval  # one /proc/stat read per interval, whatever the number of CPUs
        assert values == [pytest.approx(0.25)] * n
