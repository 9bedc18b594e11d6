"""The process view's counters (perf backend, exact): the N processes using most CPU, each counted like
`--pid` (pmutop.probes.task_counters.CountedProcess: a group per thread, inherit, scaled by enabled/running).

Who is counted changes slowly (no churn): a process enters after one interval in the top N and leaves only
after LEAVE_AFTER consecutive intervals outside the top 2N. An exited process is read one last time, then
its row stays EXITED_ROWS more intervals marked exited with no counts. Identity is (pid, start), so a PID
reused by a new process is a new row. Out of file descriptors, it counts what it could and says so.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from pmutop.core.sysroot import Sysroot
from pmutop.core.task_reading import EXACT, TaskReading, TaskSnapshot
from pmutop.hw.perf_event import PerfOpenError, perf_event_open, read_paranoid
from pmutop.probes.process_scan import Identity, ProcessScan, ProcessSource, ProcessUse, Scan
from pmutop.probes.task_counters import (
    CountedProcess,
    Opener,
    Reader,
    raise_open_files_limit,
    task_events,
    thread_readings,
    usable_events,
    user_space_note,
    user_space_only,
)

LEAVE_AFTER = 5  # consecutive intervals outside the top 2N before a counted process is dropped
EXITED_ROWS = 3  # intervals an exited process's row stays after its last reading
BOOTSTRAP_S = 0.5  # begin() ranks by CPU used since the tracker was made when that is at least this long
CGROUP_EVERY = 5  # intervals between two reads of a counted process's cgroup
FD_RESERVE = 64  # descriptors left for everything else pmutop opens (/proc files, the TUI, a recording)


class Membership:
    """Which processes are counted, with hysteresis. At most 2N: a process new in the top N then takes the
    place of the member longest outside the top 2N (one always is)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.outside: dict[Identity, int] = {}  # member -> consecutive intervals outside the top 2N

    def update(self, ranked: Sequence[Identity]) -> tuple[list[Identity], list[Identity]]:
        """This interval's ranking (most CPU first) -> (entered, left)."""
        top_2n = set(ranked[: 2 * self.n])
        left: list[Identity] = []
        for key in list(self.outside):
            self.outside[key] = 0 if key in top_2n else self.outside[key] + 1
            if self.outside[key] >= LEAVE_AFTER:
                del self.outside[key]
                left.append(key)
        entered: list[Identity] = []
        for key in ranked[: self.n]:
            if key in self.outside:
                continue
            if len(self.outside) >= 2 * self.n:
                out = [k for k in self.outside if k not in top_2n]
                if not out:
                    break
                victim = max(out, key=lambda k: self.outside[k])
                del self.outside[victim]
                left.append(victim)
            self.outside[key] = 0
            entered.append(key)
        return entered, left

    def drop(self, key: Identity) -> None:
        self.outside.pop(key, None)

    def note(self, members: int) -> tuple[str, ...]:
        """Why more than N processes are shown, when they are (the hysteresis keeps the ones that fell back)."""
        if members <= self.n:
            return ()
        return (
            f"top {self.n}: {members} processes counted: one enters after an interval in the top {self.n} and "
            f"leaves after {LEAVE_AFTER} intervals outside the top {2 * self.n}",
        )


@dataclass
class _Tracked:
    """A member: counted (counters), refused (no permission) or waiting for file descriptors (neither)."""

    pid: int
    start: int
    start_time: float
    comm: str
    user: str
    threads: int
    counters: CountedProcess | None = None
    refused: bool = False
    cgroup: str = ""
    cpus: tuple[int, ...] = ()
    cpu_seconds: float = 0.0
    cgroup_due: int = 0  # intervals until its cgroup is read again


@dataclass
class _Ghost:
    row: TaskReading
    left: int = EXITED_ROWS


@dataclass
class _Notes:
    """The facts said once (permission) or while they hold (the file budget)."""

    permission_said: bool = False
    pending: list[str] = field(default_factory=list)


def empty_row(row: TaskReading, interval: float, **changes: Any) -> TaskReading:
    """A row with no counts (exited, no permission)."""
    return replace(row, interval=interval, counts={}, estimated={}, counted=0.0, cpus=(), thread_readings=(), **changes)


class TopTaskCounters:
    """A TaskCounterSource: the top `top` processes by CPU, counted exactly."""

    def __init__(
        self,
        top: int = 32,
        requested_events: Sequence[str] | None = None,
        *,
        opener: Opener = perf_event_open,
        read_fd: Reader = os.read,
        source: ProcessSource | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self._opener, self._read_fd = opener, read_fd
        self._limit = raise_open_files_limit()
        self._base_fds = len(os.listdir("/proc/self/fd"))
        self._source = source or ProcessScan()
        # A user at perf_event_paranoid 2 counts the user-space side of their own processes only.
        self._user_only = user_space_only(os.getpid(), opener)
        if self._user_only and say:
            say(user_space_note("--tasks"))
        try:
            specs = usable_events(task_events(requested_events), os.getpid(), opener, say, "--tasks", self._user_only)
        except PerfOpenError:
            # Not even pmutop itself may be counted: each process's row will say "no permission".
            specs = task_events([])
        self._specs = specs
        self.events = [e.name for e in specs]
        self._members = Membership(top)
        self._tracked: dict[Identity, _Tracked] = {}
        self._ghosts: dict[Identity, _Ghost] = {}
        self._files_full = False
        self._notes = _Notes()
        self._source.scan()  # the baseline: begin() ranks by the CPU used since now

    def set_top(self, n: int) -> None:
        """Count the top `n` from the next interval (members beyond 2n leave as the hysteresis says)."""
        self._members.n = n

    def begin(self) -> None:
        """Count the top N by CPU used since the counters were made, from now (so the first interval has rows)."""
        scan = self._source.scan()
        # A few clock ticks since the tracker was made cannot rank processes: their average since they
        # started does (the first interval then has rows; from then on, each interval's own ranking).
        self._update(scan, freed=True, lifetime=scan.interval < BOOTSTRAP_S)
        for t in self._tracked.values():
            if t.counters is not None:
                t.counters.begin()

    def read(self, cpu_samples: Sequence[Any] = ()) -> TaskSnapshot:
        scan = self._source.scan()
        rows: list[TaskReading] = []
        for key, ghost in list(self._ghosts.items()):
            rows.append(empty_row(ghost.row, scan.interval))
            ghost.left -= 1
            if ghost.left == 0:
                del self._ghosts[key]
        freed = False
        for key, t in list(self._tracked.items()):
            info = scan.processes.get(t.pid)
            gone = info is None or info.start != t.start or info.zombie
            if not gone and info is not None:
                self._refresh(t, info)
            row = self._row(t, scan.interval, exited=gone)
            if row is not None:
                rows.append(row)
            if gone:
                freed |= self._forget(key)
                self._members.drop(key)
                if row is not None:
                    self._ghosts[key] = _Ghost(row)
        freed |= self._update(scan, freed)
        rows.sort(key=lambda r: (r.exited, -r.counts.get("task_clock", 0), r.pid))
        return TaskSnapshot(tasks=tuple(rows), mode=EXACT, notes=self._take_notes(), cpu_shares=scan.cpu_shares())

    def _row(self, t: _Tracked, interval: float, exited: bool) -> TaskReading | None:
        """The member's reading of this interval (None: it waits for file descriptors, nothing to show)."""
        threads: tuple[TaskReading, ...] = ()
        if t.refused:
            counts, scaled, seconds = {}, None, interval
        elif t.counters is None:
            return None
        else:
            scaled, per_thread, seconds = t.counters.read()
            counts, threads = scaled.counts, thread_readings(t.pid, t.user, per_thread, seconds, exited)
        return TaskReading(
            t.pid,
            t.comm,
            t.user,
            t.threads,
            seconds,
            counts,
            scaled.counted if scaled else 0.0,
            scaled.estimated if scaled else {},
            exited=exited,
            cgroup=t.cgroup,
            cpus=t.cpus,
            no_permission=t.refused,
            start_time=t.start_time,
            thread_readings=threads,
        )

    def _refresh(self, t: _Tracked, info: ProcessUse) -> None:
        t.comm, t.threads, t.cpu_seconds = info.comm, info.threads, info.cpu_seconds
        t.cpus = tuple(sorted(info.cpus))
        # It may move (systemd-run, a container runtime): read again every few intervals (a read per process
        # per interval was a sixth of the tracker's cost, for a path that seldom changes).
        if t.cgroup_due <= 0:
            t.cgroup = self._source.cgroup(t.pid)
            t.cgroup_due = CGROUP_EVERY
        t.cgroup_due -= 1

    def _forget(self, key: Identity) -> bool:
        """Close a member's counters; True when that gave file descriptors back."""
        t = self._tracked.pop(key, None)
        if t is None or t.counters is None:
            return False
        t.counters.close()
        return True

    def _update(self, scan: Scan, freed: bool, lifetime: bool = False) -> bool:
        """Members in and out by this interval's ranking; counters opened for the new ones (and for those
        that waited for file descriptors). True when some counters were closed."""
        ranked = scan.ranked(lifetime)
        entered, left = self._members.update([p.identity for p in ranked])
        for key in left:
            freed |= self._forget(key)
        by_key = {p.identity: p for p in ranked}
        for key in entered:
            p = by_key[key]
            user = self._source.user(p.pid, p.start)
            self._tracked[key] = _Tracked(p.pid, p.start, p.start_time, p.comm, user, p.threads)
            self._refresh(self._tracked[key], p)
        if freed:
            self._files_full = False
        refused_now = 0
        held = sum(m.counters.fds for m in self._tracked.values() if m.counters is not None)
        for key, t in self._tracked.items():
            if t.counters is not None or t.refused or self._files_full:
                continue
            outcome = self._attach(t, held)
            held += t.counters.fds if t.counters is not None else 0
            refused_now += outcome == "refused"
            if outcome == "gone":
                self._members.drop(key)
        self._tracked = {k: t for k, t in self._tracked.items() if k in self._members.outside}
        if refused_now and not self._notes.permission_said:
            self._notes.permission_said = True
            paranoid = read_paranoid(Sysroot("/"))
            self._notes.pending.append(
                f"no permission to count some processes (perf_event_paranoid {paranoid}, or another user's): "
                'their rows say "no permission"'
            )
        return freed

    def _attach(self, t: _Tracked, held: int) -> str:
        """ "counted", "refused", "full" (out of file descriptors) or "gone". `held`: the counters' fds now."""
        need = max(1, t.threads) * len(self._specs)
        if self._base_fds + held + need > self._limit - FD_RESERVE:
            self._files_full = True
            return "full"
        threads = self._source.threads(t.pid)
        if not threads:
            return "gone"
        try:
            t.counters = CountedProcess(t.pid, threads, self._specs, self._opener, self._read_fd, self._user_only)
        except PerfOpenError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):
                self._files_full = True
                return "full"
            if e.errno in (errno.EACCES, errno.EPERM):
                t.refused = True
                return "refused"
            return "gone"  # ESRCH: it ended since the scan (or the kernel will not count it: not shown)
        return "counted"

    def _take_notes(self) -> tuple[str, ...]:
        notes, self._notes.pending = tuple(self._notes.pending), []
        notes += self._members.note(len(self._tracked))
        waiting = [t for t in self._tracked.values() if t.counters is None and not t.refused]
        if waiting:
            counted = sum(1 for t in self._tracked.values() if t.counters is not None)
            wanted = counted + len(waiting)
            notes += (f"counters on {counted} of {wanted} processes: open files limit {self._limit}",)
        return notes

    @property
    def counted(self) -> int:
        """How many processes have counters now."""
        return sum(1 for t in self._tracked.values() if t.counters is not None)

    def close(self) -> None:
        for key in list(self._tracked):
            self._forget(key)
        self._source.close()
