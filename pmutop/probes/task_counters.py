"""Per-process counters for `--pid LIST` (perf backend, exact, like `perf stat -p`).

Per thread that exists when counting starts, one counter group opened with perf_event_open(tid, cpu=-1) and
`inherit`, so threads and children started later count too; a process's reading is the sum over its groups.
Kernels before 4.x refused `inherit` with PERF_FORMAT_GROUP reads (EINVAL): there each event is opened as its
own counter, read with its own enabled/running times. Software events (task-clock, context switches) are
always counted; hardware events only where the PMU has them (said once otherwise).
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import psutil

from pmutop.core.errors import PmutopError, UsageError
from pmutop.core.sysroot import Sysroot
from pmutop.core.task_reading import EXACT, TaskReading, TaskSnapshot
from pmutop.hw.perf_event import (
    PERF_COUNT_HW_BRANCH_MISSES,
    PERF_COUNT_HW_CACHE_MISSES,
    PERF_COUNT_HW_CPU_CYCLES,
    PERF_COUNT_HW_INSTRUCTIONS,
    PERF_COUNT_SW_CONTEXT_SWITCHES,
    PERF_COUNT_SW_TASK_CLOCK,
    PERF_FORMAT_GROUP,
    PERF_FORMAT_TOTAL_TIME_ENABLED,
    PERF_FORMAT_TOTAL_TIME_RUNNING,
    PERF_TYPE_HARDWARE,
    PERF_TYPE_SOFTWARE,
    EventSpec,
    PerfOpenError,
    make_attr,
    parse_group_read,
    perf_event_open,
    read_paranoid,
)

SOFTWARE_EVENTS = (
    EventSpec("task_clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK),
    EventSpec("context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES),
)
# The hardware events a process row shows, by the name --events uses for them.
HARDWARE_EVENTS = {
    "cycles": EventSpec("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
    "instructions": EventSpec("instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
    "llc-misses": EventSpec("llc_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES),
    "branch-misses": EventSpec("branch_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES),
}
_TIMES = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
Opener = Callable[..., int]  # perf_event_open's signature (tests inject failures)


def parse_pid_list(text: str) -> list[int]:
    """`1234,5678` -> [1234, 5678]; anything else is a usage error."""
    pids: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or int(part) == 0:
            raise UsageError(f"--pid {text}: expected process ids separated by commas, e.g. --pid 1234,5678")
        if int(part) not in pids:
            pids.append(int(part))
    return pids


def task_events(requested: Sequence[str] | None) -> list[EventSpec]:
    """Software events always; the hardware events among `requested` (--events names), all four without it."""
    if requested is None:
        hardware = list(HARDWARE_EVENTS.values())
    else:
        names = {n.strip() for item in requested for n in item.split(",")}
        hardware = [spec for name, spec in HARDWARE_EVENTS.items() if name in names]
    return [*SOFTWARE_EVENTS, *hardware]


class _Counter:
    """One fd group (or, on old kernels, one fd per event) on one thread; `read()` -> (enabled, running) per
    event and the raw counts."""

    def __init__(self, tid: int, events: list[EventSpec], opener: Opener, grouped: bool) -> None:
        self.fds: list[int] = []
        self.grouped = grouped
        self.n = len(events)
        try:
            for i, ev in enumerate(events):
                attr = make_attr(ev.type, ev.config, read_format=_TIMES | (PERF_FORMAT_GROUP if grouped else 0))
                attr.set_flag("inherit")
                leader = self.fds[0] if grouped and i else -1
                self.fds.append(opener(attr, tid, -1, leader))
        except BaseException:
            self.close()
            raise

    def read(self) -> list[tuple[int, int, int]]:
        """(count, enabled, running) per event."""
        if self.grouped:
            g = parse_group_read(os.read(self.fds[0], 8 * (3 + self.n)), self.n)
            return [(v, g.time_enabled, g.time_running) for v in g.values]
        out = []
        for fd in self.fds:
            v, enabled, running = (int.from_bytes(os.read(fd, 24)[i : i + 8], "little") for i in (0, 8, 16))
            out.append((v, enabled, running))
        return out

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in reversed(fds):
            os.close(fd)


@dataclass
class _Process:
    pid: int
    comm: str
    user: str
    threads: int
    counters: list[_Counter]
    prev: list[tuple[int, int, int]]  # summed (count, enabled, running) per event at the last read
    at: float  # monotonic time of the last read


def _summed(counters: list[_Counter], n: int) -> list[tuple[int, int, int]]:
    total = [(0, 0, 0)] * n
    for c in counters:
        total = [(a + x, b + y, r + z) for (a, b, r), (x, y, z) in zip(total, c.read(), strict=True)]
    return total


def _alive(pid: int) -> bool:
    """Still running (a zombie has exited: its counters are final)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


class TaskCounters:
    """Counts exactly the given processes; `read()` gives one TaskReading per process per interval. A process
    that exits is read one last time (exited=True), then dropped."""

    def __init__(
        self,
        pids: Sequence[int],
        requested_events: Sequence[str] | None = None,
        *,
        opener: Opener = perf_event_open,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self._opener = opener
        self._processes: dict[int, _Process] = {}
        events = task_events(requested_events)
        try:
            events = self._usable(events, pids, say)
            self.events = [e.name for e in events]
            self._specs = events
            for pid in pids:
                self._processes[pid] = self._attach(pid)
        except BaseException:
            self.close()
            raise

    def _usable(
        self, events: list[EventSpec], pids: Sequence[int], say: Callable[[str], None] | None
    ) -> list[EventSpec]:
        """The events this PMU has: each hardware event tried once on the first process; says once when none."""
        hardware = [e for e in events if e.type == PERF_TYPE_HARDWARE]
        kept: list[EventSpec] = []
        for ev in hardware:
            attr = make_attr(ev.type, ev.config, read_format=_TIMES)
            try:
                os.close(self._opener(attr, pids[0], -1, -1))
                kept.append(ev)
            except PerfOpenError as e:
                if e.errno not in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV, errno.EINVAL):
                    raise self._refused(pids[0], e) from None
        if hardware and not kept and say:
            say(
                "--pid: this PMU has no hardware events (a VM without a virtual PMU?): counting the kernel's "
                "software events task-clock and context-switches only"
            )
        return [e for e in events if e.type != PERF_TYPE_HARDWARE] + kept

    def _refused(self, pid: int, e: PerfOpenError) -> PmutopError:
        if e.errno == errno.ESRCH:
            return UsageError(f"--pid {pid}: no such process")
        if e.errno in (errno.EACCES, errno.EPERM):
            paranoid = read_paranoid(Sysroot("/"))
            return UsageError(f"--pid {pid}: not permitted (perf_event_paranoid {paranoid})")
        return PmutopError(f"--pid {pid}: cannot count it: {os.strerror(e.errno)}")

    def _attach(self, pid: int) -> _Process:
        try:
            proc = psutil.Process(pid)
            comm, user, tids = proc.name(), _user(proc), [t.id for t in proc.threads()]
        except psutil.NoSuchProcess:
            raise UsageError(f"--pid {pid}: no such process") from None
        except psutil.AccessDenied:
            comm, user, tids = str(pid), "?", [pid]
        counters: list[_Counter] = []
        for tid in tids:
            try:
                counters.append(self._counter(tid))
            except PerfOpenError as e:
                if e.errno == errno.ESRCH and tid != pid:
                    continue  # a thread ended while we attached: the others still count the process
                for c in counters:
                    c.close()
                raise self._refused(pid, e) from None
        now = time.monotonic()
        n = len(self._specs)
        return _Process(pid, comm, user, len(tids), counters, _summed(counters, n), now)

    def _counter(self, tid: int) -> _Counter:
        try:
            return _Counter(tid, self._specs, self._opener, grouped=True)
        except PerfOpenError as e:
            if e.errno != errno.EINVAL:
                raise
            return _Counter(tid, self._specs, self._opener, grouped=False)

    def begin(self) -> None:
        for p in self._processes.values():
            p.prev, p.at = _summed(p.counters, len(self._specs)), time.monotonic()

    def read(self, cpu_samples: Sequence[Any] = ()) -> TaskSnapshot:
        out = []
        for pid, p in list(self._processes.items()):
            exited = not _alive(pid)  # checked before the read, so an exited process's read is its last
            now = time.monotonic()
            cur = _summed(p.counters, len(self._specs))
            if not exited:
                with contextlib.suppress(psutil.Error):  # it may exit between the two looks
                    p.threads = psutil.Process(pid).num_threads()
            out.append(self._reading(p, cur, now - p.at, exited))
            p.prev, p.at = cur, now
            if exited:
                for c in p.counters:
                    c.close()
                del self._processes[pid]
        return TaskSnapshot(tasks=tuple(out), mode=EXACT)

    def _reading(self, p: _Process, cur: list[tuple[int, int, int]], interval: float, exited: bool) -> TaskReading:
        counts: dict[str, int] = {}
        estimated: dict[str, float] = {}
        enabled_all = running_all = 0
        for ev, (v0, e0, r0), (v1, e1, r1) in zip(self._specs, p.prev, cur, strict=True):
            d_enabled, d_running = e1 - e0, r1 - r0
            enabled_all, running_all = max(enabled_all, d_enabled), max(running_all, d_running)
            share = d_running / d_enabled if d_enabled > 0 else 1.0
            # Scaled like `perf stat`: the count over the time the counter ran, extended to the time enabled.
            counts[ev.name] = round((v1 - v0) / share) if share > 0 else 0
            if share < 1.0:
                estimated[ev.name] = round(share, 3)
        counted = running_all / enabled_all if enabled_all > 0 else 1.0
        return TaskReading(p.pid, p.comm, p.user, p.threads, interval, counts, round(counted, 3), estimated, exited)

    def close(self) -> None:
        for p in self._processes.values():
            for c in p.counters:
                c.close()
        self._processes.clear()


def _user(proc: psutil.Process) -> str:
    try:
        return proc.username()
    except (KeyError, psutil.Error):  # a uid with no name
        return str(proc.uids().real)
