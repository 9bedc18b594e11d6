from __future__ import annotations

from collections import namedtuple

import pytest

from pmutop.probes.cputimes import BUSY_FIELDS, CLOCK_TICKS, IDLE_FIELDS, CpuBusy, ProcStat, stat_rows

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


PROC_STAT = (
    b"cpu  30 0 15 300 2 1 1 0 6 0\n"
    b"cpu0 13 0 5 104 1 1 1 0 6 0\n"
    b"cpu1 17 3 10 196 1 0 0 2 0 0\n"
    b"intr 123" + b" 0" * 5000 + b"\nctxt 99\nbtime 1\n"
)


def _psutil_rows(text: bytes) -> list[tuple[float, float]]:
    """What CpuBusy computed from psutil.cpu_times(percpu=True) before: psutil's parse, then its sums."""
    rows = []
    for line in text.splitlines()[1:]:
        if line.startswith(b"cpu"):
            t = T(*(float(x) / CLOCK_TICKS for x in line.split()[1:11]))
            busy = sum(getattr(t, f, 0.0) for f in BUSY_FIELDS)
            rows.append((busy, busy + sum(getattr(t, f, 0.0) for f in IDLE_FIELDS)))
    return rows


def test_proc_stat_gives_psutils_values_to_the_last_bit() -> None:
    # The utilisation shown is unchanged by reading /proc/stat directly instead of through psutil.
    assert stat_rows(PROC_STAT) == _psutil_rows(PROC_STAT)
    assert len(stat_rows(PROC_STAT)) == 2  # cpu0 and cpu1; not the all-CPU total


def test_an_old_kernels_shorter_cpu_lines_count_missing_fields_as_zero() -> None:
    text = b"cpu  2 0 1 8\ncpu0 2 0 1 8 1\nintr 1\n"
    assert stat_rows(text) == [(3 / CLOCK_TICKS, 3 / CLOCK_TICKS + (8 / CLOCK_TICKS + 1 / CLOCK_TICKS))]


def test_a_proc_stat_larger_than_the_first_read_yields_every_cpu(tmp_path) -> None:  # type: ignore[no-untyped-def]
    lines = [b"cpu  1 0 0 1 0 0 0 0 0 0"] + [b"cpu%d %d 0 0 9 0 0 0 0 0 0" % (c, c) for c in range(300)]
    path = tmp_path / "stat"
    path.write_bytes(b"\n".join(lines) + b"\nintr 5" + b" 1" * 20000 + b"\n")
    reader = ProcStat(str(path))
    try:
        rows = stat_rows(reader.read())
    finally:
        reader.close()
    assert len(rows) == 300
    assert rows[299] == (299 / CLOCK_TICKS, 299 / CLOCK_TICKS + (9 / CLOCK_TICKS + 0 / CLOCK_TICKS))
