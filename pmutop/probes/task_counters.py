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
import resource
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
    PERF_COUNT_SW_CPU_MIGRATIONS,
    PERF_COUNT_SW_PAGE_FAULTS,
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
from pmutop.probes.process_scan import ProcessSource, WhereRan, cgroup_of

SOFTWARE_EVENTS = (
    EventSpec("task_clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK),
    EventSpec("context_switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES),
)
# A measured command's (-- COMMAND): what `perf stat -- COMMAND` lists of the kernel's software events.
COMMAND_SOFTWARE_EVENTS = (
    *SOFTWARE_EVENTS,
    EventSpec("cpu_migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS),
    EventSpec("page_faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS),
)
# The hardware events a process row shows, by the name --events uses for them.
HARDWARE_EVENTS = {
    "cycles": EventSpec("cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES),
    "instructions": EventSpec("instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS),
    "llc-misses": EventSpec("llc_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES),
    "branch-misses": EventSpec("branch_misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES),
}
# Counted while the kernel runs (a context switch, a migration, a fault taken in a system call are the
# kernel's work): zero or short when counting user space only, so not counted then rather than shown wrong.
KERNEL_SIDE_EVENTS = frozenset({"context_switches", "cpu_migrations", "page_faults"})
GROUP_READ_TRIES = 100
_TIMES = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
Opener = Callable[..., int]  # perf_event_open's signature (tests inject failures)
Reader = Callable[[int, int], bytes]  # os.read's signature (tests give counts without a kernel)


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


def task_events(requested: Sequence[str] | None, software: Sequence[EventSpec] = SOFTWARE_EVENTS) -> list[EventSpec]:
    """Software events always; the hardware events among `requested` (--events names), all four without it."""
    if requested is None:
        hardware = list(HARDWARE_EVENTS.values())
    else:
        names = {n.strip() for item in requested for n in item.split(",")}
        hardware = [spec for name, spec in HARDWARE_EVENTS.items() if name in names]
    return [*software, *hardware]


def raise_open_files_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard limit (a counter group per thread needs many fds); returns
    the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def user_space_only(pid: int, opener: Opener) -> bool:
    """True where `pid` may be counted in user space only: the kernel refuses its kernel side (a user at
    perf_event_paranoid 2 on their own processes) but not its user side."""
    for exclude_kernel in (False, True):
        attr = make_attr(
            PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, read_format=_TIMES, exclude_kernel=exclude_kernel
        )
        try:
            os.close(opener(attr, pid, -1, -1))
            return exclude_kernel
        except PerfOpenError as e:
            if e.errno not in (errno.EACCES, errno.EPERM):
                return False  # no such process, say: the callers' own opens say it
    return False


def user_space_note(option: str) -> str:
    paranoid = read_paranoid(Sysroot("/"))
    return (
        f"{option}: perf_event_paranoid {paranoid} lets this user count their own processes in user space only: "
        "task-clock whole, hardware events in user space, context switches (migrations, faults) not counted "
        "(root, CAP_PERFMON or `sudo sysctl kernel.perf_event_paranoid=1`: all of it)"
    )


def usable_events(
    events: list[EventSpec],
    pid: int,
    opener: Opener,
    say: Callable[[str], None] | None,
    option: str,
    user_only: bool = False,
) -> list[EventSpec]:
    """The events this PMU has: each hardware event tried once on `pid`; says once when none. Raises
    PerfOpenError when the probe fails for another reason than a missing event (no permission, no process).
    `user_only`: counting user space only (user_space_only): the kernel-side events are left out."""
    if user_only:
        events = [e for e in events if e.name not in KERNEL_SIDE_EVENTS]
    hardware = [e for e in events if e.type == PERF_TYPE_HARDWARE]
    kept: list[EventSpec] = []
    for ev in hardware:
        attr = make_attr(ev.type, ev.config, read_format=_TIMES, exclude_kernel=user_only)
        try:
            os.close(opener(attr, pid, -1, -1))
            kept.append(ev)
        except PerfOpenError as e:
            if e.errno not in (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV, errno.EINVAL):
                raise
    software = [e for e in events if e.type != PERF_TYPE_HARDWARE]
    if hardware and not kept and say:
        names = " and ".join(e.name.replace("_", "-") for e in software)
        say(
            f"{option}: this PMU has no hardware events (a VM without a virtual PMU?): counting the kernel's "
            f"software events {names} only"
        )
    return software + kept


class _Counter:
    """One fd group (or, on old kernels, one fd per event) on one thread; `read()` -> (enabled, running) per
    event and the raw counts."""

    def __init__(
        self,
        tid: int,
        events: list[EventSpec],
        opener: Opener,
        grouped: bool,
        read_fd: Reader,
        user_only: bool = False,
    ) -> None:
        self.fds: list[int] = []
        self.grouped = grouped
        self.n = len(events)
        self._read_fd = read_fd
        try:
            for i, ev in enumerate(events):
                read_format = _TIMES | (PERF_FORMAT_GROUP if grouped else 0)
                attr = make_attr(ev.type, ev.config, read_format=read_format, exclude_kernel=user_only)
                attr.set_flag("inherit")
                leader = self.fds[0] if grouped and i else -1
                self.fds.append(opener(attr, tid, -1, leader))
        except BaseException:
            self.close()
            raise

    def read(self) -> list[tuple[int, int, int]]:
        """(count, enabled, running) per event."""
        if self.grouped:
            g = parse_group_read(self._read_group(), self.n)
            return [(v, g.time_enabled, g.time_running) for v in g.values]
        out = []
        for fd in self.fds:
            data = self._read_fd(fd, 24)
            v, enabled, running = (int.from_bytes(data[i : i + 8], "little") for i in (0, 8, 16))
            out.append((v, enabled, running))
        return out

    def _read_group(self) -> bytes:
        # Since Linux 6.6 a group read fails with ECHILD while an inherited copy of the group (in a child
        # that is exiting) is torn down one sibling at a time (kernel/events/core.c __perf_read_group_add,
        # "perf: Disallow mis-matched inherited group reads"): the window is short, so read again.
        for _ in range(GROUP_READ_TRIES - 1):
            try:
                return self._read_fd(self.fds[0], 8 * (3 + self.n))
            except ChildProcessError:
                continue
        return self._read_fd(self.fds[0], 8 * (3 + self.n))

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in reversed(fds):
            os.close(fd)


Totals = list[tuple[int, int, int]]  # (count, enabled, running) per event


@dataclass(frozen=True)
class Scaled:
    """One interval's deltas, scaled like `perf stat` (TaskReading's counts, estimated and counted)."""

    counts: dict[str, int]
    estimated: dict[str, float]
    counted: float


def scale(specs: list[EventSpec], prev: Totals, cur: Totals) -> Scaled:
    counts: dict[str, int] = {}
    estimated: dict[str, float] = {}
    enabled_all = running_all = 0
    for ev, (v0, e0, r0), (v1, e1, r1) in zip(specs, prev, cur, strict=True):
        d_enabled, d_running = e1 - e0, r1 - r0
        enabled_all, running_all = max(enabled_all, d_enabled), max(running_all, d_running)
        share = d_running / d_enabled if d_enabled > 0 else 1.0
        # Scaled like `perf stat`: the count over the time the counter ran, extended to the time enabled.
        counts[ev.name] = round((v1 - v0) / share) if share > 0 else 0
        if share < 1.0:
            estimated[ev.name] = round(share, 3)
    counted = running_all / enabled_all if enabled_all > 0 else 1.0
    return Scaled(counts, estimated, round(counted, 3))


@dataclass
class _Thread:
    tid: int
    name: str
    counter: _Counter
    prev: Totals


class CountedProcess:
    """The counters of one process: a group per thread that existed at attach, `inherit` so later threads
    and children count in their creator's group. Shared by TaskCounters (--pid) and the top-N tracker."""

    def __init__(
        self,
        pid: int,
        threads: Sequence[tuple[int, str]],
        specs: list[EventSpec],
        opener: Opener,
        read_fd: Reader,
        user_only: bool = False,
    ) -> None:
        """Raises PerfOpenError (nothing left open) when the process cannot be counted; a thread that ended
        while attaching is skipped. `user_only`: its user-space side only (see user_space_only)."""
        self.pid = pid
        self._specs = specs
        self._threads: list[_Thread] = []
        try:
            for tid, name in threads or [(pid, "")]:
                try:
                    counter = _open_counter(tid, specs, opener, read_fd, user_only)
                except PerfOpenError as e:
                    if e.errno == errno.ESRCH and tid != pid:
                        continue  # a thread ended while we attached: the others still count the process
                    raise
                try:
                    baseline = counter.read()
                except ChildProcessError:  # (see _read_group) just opened: it has counted next to nothing yet
                    baseline = [(0, 0, 0)] * len(specs)
                self._threads.append(_Thread(tid, name, counter, baseline))
        except BaseException:
            self.close()
            raise
        self.at = time.monotonic()

    @property
    def fds(self) -> int:
        return sum(len(t.counter.fds) for t in self._threads)

    def begin(self) -> None:
        for t in self._threads:
            with contextlib.suppress(ChildProcessError):  # (see read): the attach-time baseline stays
                t.prev = t.counter.read()
        self.at = time.monotonic()

    def read(self) -> tuple[Scaled, list[tuple[int, str, Scaled]], float]:
        """The process's reading since the last one, each thread's, and the interval (seconds)."""
        now = time.monotonic()
        n = len(self._specs)
        prev_total: Totals = [(0, 0, 0)] * n
        cur_total: Totals = [(0, 0, 0)] * n
        per_thread = []
        for t in self._threads:
            try:
                cur = t.counter.read()
            except ChildProcessError:
                continue  # still torn down after GROUP_READ_TRIES: its counts arrive with the next read
            per_thread.append((t.tid, t.name, scale(self._specs, t.prev, cur)))
            prev_total = _added(prev_total, t.prev)
            cur_total = _added(cur_total, cur)
            t.prev = cur
        interval, self.at = now - self.at, now
        return scale(self._specs, prev_total, cur_total), per_thread, interval

    def close(self) -> None:
        threads, self._threads = self._threads, []
        for t in threads:
            t.counter.close()


def _added(a: Totals, b: Totals) -> Totals:
    return [(x + u, y + v, z + w) for (x, y, z), (u, v, w) in zip(a, b, strict=True)]


def _open_counter(
    tid: int, specs: list[EventSpec], opener: Opener, read_fd: Reader, user_only: bool = False
) -> _Counter:
    try:
        return _Counter(tid, specs, opener, True, read_fd, user_only)
    except PerfOpenError as e:
        if e.errno != errno.EINVAL:
            raise
        return _Counter(tid, specs, opener, False, read_fd, user_only)


def thread_readings(
    pid: int, user: str, per_thread: list[tuple[int, str, Scaled]], interval: float, exited: bool
) -> tuple[TaskReading, ...]:
    return tuple(
        TaskReading(tid, name, user, 1, interval, s.counts, s.counted, s.estimated, exited)
        for tid, name, s in per_thread
    )


@dataclass
class _Process:
    pid: int
    comm: str
    user: str
    threads: int
    start_time: float
    counters: CountedProcess


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
        read_fd: Reader = os.read,
        say: Callable[[str], None] | None = None,
        scan: ProcessSource | None = None,
        software: Sequence[EventSpec] = SOFTWARE_EVENTS,
    ) -> None:
        """`software`: the kernel's software events to count besides the hardware ones. `scan`: where each
        process ran and who else ran on each CPU (the live view's rows and core detail);
        without it (batch) the snapshot has no `cpu_shares`, and where each process ran is read from its
        threads' /proc files alone."""
        self._opener = opener
        self._read_fd = read_fd
        self._scan = scan
        self._where = WhereRan() if scan is None else None
        self._user_only = False
        self._processes: dict[int, _Process] = {}
        raise_open_files_limit()
        try:
            self._user_only = user_space_only(pids[0], opener)
            if self._user_only and say:
                say(user_space_note("--pid"))
            try:
                events = task_events(requested_events, software)
                specs = usable_events(events, pids[0], opener, say, "--pid", self._user_only)
            except PerfOpenError as e:
                raise self._refused(pids[0], e) from None
            self.events = [e.name for e in specs]
            self._specs = specs
            for pid in pids:
                self._processes[pid] = self._attach(pid)
        except BaseException:
            self.close()
            raise

    @property
    def user_only(self) -> bool:
        """Counting the user-space side only (see user_space_only): the kernel-side events are not counted."""
        return self._user_only

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
            comm, user, start = proc.name(), _user(proc), proc.create_time()
            threads = [(t.id, _thread_name(pid, t.id)) for t in proc.threads()]
        except psutil.NoSuchProcess:
            raise UsageError(f"--pid {pid}: no such process") from None
        except psutil.AccessDenied:
            comm, user, start, threads = str(pid), "?", 0.0, [(pid, "")]
        try:
            counters = CountedProcess(pid, threads, self._specs, self._opener, self._read_fd, self._user_only)
        except PerfOpenError as e:
            raise self._refused(pid, e) from None
        return _Process(pid, comm, user, len(threads), start, counters)

    def begin(self) -> None:
        if self._scan is not None:
            self._scan.scan()
        for p in self._processes.values():
            if self._where is not None:
                self._where.look(p.pid)
            p.counters.begin()

    def read(self, cpu_samples: Sequence[Any] = ()) -> TaskSnapshot:
        out = []
        scan = self._scan.scan() if self._scan is not None else None
        for pid, p in list(self._processes.items()):
            exited = not _alive(pid)  # checked before the read, so an exited process's read is its last
            total, per_thread, interval = p.counters.read()
            use = scan.processes.get(pid) if scan is not None else None
            if use is not None:
                cpus = tuple(sorted(use.cpus))
            elif self._where is not None:
                ran = [tid for tid, _, scaled in per_thread if scaled.counts.get("task_clock", 0) > 0]
                cpus = self._where.look(pid, ran)
            else:
                cpus = ()  # the scan did not find it: it has exited
            if not exited:
                with contextlib.suppress(psutil.Error):  # it may exit between the two looks
                    p.threads = psutil.Process(pid).num_threads()
            threads = thread_readings(pid, p.user, per_thread, interval, exited)
            out.append(
                TaskReading(
                    p.pid,
                    p.comm,
                    p.user,
                    p.threads,
                    interval,
                    total.counts,
                    total.counted,
                    total.estimated,
                    exited,
                    cgroup="" if exited else cgroup_of(pid),
                    cpus=cpus,
                    start_time=p.start_time,
                    thread_readings=threads,
                )
            )
            if exited:
                p.counters.close()
                del self._processes[pid]
                if self._where is not None:
                    self._where.forget(pid)
        shares = scan.cpu_shares() if scan is not None else {}
        return TaskSnapshot(tasks=tuple(out), mode=EXACT, cpu_shares=shares)

    def close(self) -> None:
        for p in self._processes.values():
            p.counters.close()
        self._processes.clear()
        if self._scan is not None:
            self._scan.close()


def _thread_name(pid: int, tid: int) -> str:
    try:
        with open(f"/proc/{pid}/task/{tid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().rstrip("\n")
    except OSError:
        return ""


def _user(proc: psutil.Process) -> str:
    try:
        return proc.username()
    except (KeyError, psutil.Error):  # a uid with no name
        return str(proc.uids().real)
