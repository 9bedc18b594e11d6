"""Which processes ran, how much and where, once per interval: read from /proc directly (no psutil objects).

Per process one read of /proc/PID/stat (proc(5)): comm, threads, start (identity against PID reuse), utime +
stime. Per thread (/proc/PID/task/TID/stat) only for processes that used CPU in the interval and have more
than one thread: each thread's utime + stime delta goes to the CPU in its field 39 ("processor", the CPU it
last ran on, as top's "P" column), so a process that ran on two CPUs is split between them. The CPUs' own
busy time comes from /proc/stat (pmutop.probes.cputimes). User and cgroup are read only when asked (for
the processes shown), cached per process identity.
"""

from __future__ import annotations

import errno
import os
import pwd
import resource
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Protocol

import psutil

from pmutop.probes.cputimes import CLOCK_TICKS, ProcStat, stat_rows

Identity = tuple[int, int]  # (pid, start in clock ticks since boot): a reused PID is another process


@dataclass(slots=True)
class ProcessUse:
    """One process at the scan. `cpu_seconds`: CPU time (user + system) it used in the interval; `cpus`:
    where (CPU -> seconds)."""

    pid: int
    start: int  # clock ticks after boot (proc(5) field 22)
    start_time: float  # seconds since the epoch, as psutil's create_time
    comm: str
    threads: int
    zombie: bool = False
    cpu_seconds: float = 0.0
    cpus: dict[int, float] = field(default_factory=dict)
    lifetime_share: float = 0.0  # CPU time since it started / its age: how busy it has been on average

    @property
    def identity(self) -> Identity:
        return (self.pid, self.start)


@dataclass
class Scan:
    """One interval: every process that exists now, and each CPU's busy seconds since the previous scan."""

    processes: dict[int, ProcessUse]
    cpu_busy: dict[int, float]
    interval: float
    seconds: float = 0.0  # what the scan itself took (wall), for the cost figure

    def ranked(self, lifetime: bool = False) -> list[ProcessUse]:
        """The processes that used CPU in the interval, most first (PID breaks ties: a stable order).
        `lifetime`: by their average since they started instead (an interval too short to rank by)."""
        if lifetime:
            alive = [p for p in self.processes.values() if p.lifetime_share > 0 and not p.zombie]
            return sorted(alive, key=lambda p: (-p.lifetime_share, p.pid))
        used = [p for p in self.processes.values() if p.cpu_seconds > 0 and not p.zombie]
        return sorted(used, key=lambda p: (-p.cpu_seconds, p.pid))

    def cpu_shares(self) -> dict[int, tuple[tuple[int, float], ...]]:
        """Per CPU, the processes that ran on it with their share of its busy time, largest first."""
        per_cpu: dict[int, list[tuple[int, float]]] = {}
        for p in self.processes.values():
            for cpu, seconds in p.cpus.items():
                busy = self.cpu_busy.get(cpu)
                if busy and seconds > 0:
                    # Both sides are tick-granular, so a share can round past 1: clamp.
                    per_cpu.setdefault(cpu, []).append((p.pid, round(min(1.0, seconds / busy), 4)))
        return {cpu: tuple(sorted(rows, key=lambda r: (-r[1], r[0]))) for cpu, rows in sorted(per_cpu.items())}


class ProcessSource(Protocol):
    """What the per-process counters need from the system (tests give a fake)."""

    def scan(self) -> Scan: ...

    def user(self, pid: int, start: int) -> str: ...

    def cgroup(self, pid: int) -> str: ...

    def threads(self, pid: int) -> list[tuple[int, str]]:
        """(tid, name) of each thread now; [] when the process is gone."""

    def close(self) -> None: ...


def read_proc_file(path: str) -> bytes | None:
    """The file's bytes, None when it is gone (the process exited) or unreadable."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096)
    except OSError:
        return None
    finally:
        os.close(fd)


def parse_stat(data: bytes) -> tuple[str, bytes, list[bytes]]:
    """(comm, state, fields from field 3 on) of a /proc/PID/stat line. comm may hold spaces and ')' : it
    ends at the last ')'."""
    head, _, tail = data.rpartition(b")")
    comm = head.partition(b"(")[2].decode(errors="replace")
    rest = tail.split()
    return comm, rest[0], rest


# proc(5) field numbers, as indexes into parse_stat's list (which starts at field 3).
_UTIME, _STIME, _THREADS, _START, _PROCESSOR = 14 - 3, 15 - 3, 20 - 3, 22 - 3, 39 - 3


class StatFiles:
    """/proc/PID/stat and /proc/PID/task/TID/stat files kept open between scans and read again with one pread:
    half the system time of opening, reading and closing each file every interval. An open file stays the
    process's (or thread's) it was opened on: once that one has exited, a read fails (ESRCH) and the path is
    opened again, so a reused PID is read as the new process. At most `budget` files are kept (the rest are
    opened each time): a few of the open-files limit, which the per-task counters need."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        self._fds: dict[str, int] = {}
        self._seen: set[str] = set()  # paths read since the last sweep

    def read(self, path: str) -> bytes | None:
        """The file's bytes, None when it is gone (its process exited) or unreadable."""
        self._seen.add(path)
        fd = self._fds.get(path)
        if fd is not None:
            try:
                data = os.pread(fd, 4096, 0)
                if data:
                    return data
            except OSError:
                pass
            del self._fds[path]  # what it was opened on has exited
            os.close(fd)
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            data = os.read(fd, 4096)
        except OSError:
            data = b""
        if data and len(self._fds) < self._budget:
            self._fds[path] = fd
        else:
            os.close(fd)
        return data or None

    def sweep(self) -> None:
        """Close the files not read since the last sweep (their processes and threads are gone)."""
        for path in [path for path in self._fds if path not in self._seen]:
            os.close(self._fds.pop(path))
        self._seen = set()

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {}


def _stat_budget() -> int:
    """How many stat files a scan keeps open: a sixteenth of the soft open-files limit, at most 512."""
    try:
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (OSError, ValueError):
        return 0
    return 512 if soft == resource.RLIM_INFINITY else min(512, soft // 16)


class ProcessScan:
    """The real ProcessSource: /proc. `root` is for tests (a fake /proc tree)."""

    def __init__(self, root: str = "/proc", now: Callable[[], float] = time.monotonic) -> None:
        self._root = root
        self._files = StatFiles(_stat_budget())
        self._now = now
        self._boot = psutil.boot_time()
        self._stat = ProcStat(f"{root}/stat")
        self._prev_ticks: dict[Identity, int] = {}
        self._prev_threads: dict[Identity, dict[int, int]] = {}
        self._prev_busy: dict[int, float] = {}
        self._prev_at: float | None = None
        self._users: dict[Identity, str] = {}
        self._names: dict[int, str] = {}

    @property
    def root(self) -> str:
        return self._root

    def scan(self) -> Scan:
        t0 = time.perf_counter()
        at = self._now()
        primed = self._prev_at is not None
        interval = at - self._prev_at if self._prev_at is not None else 0.0
        processes: dict[int, ProcessUse] = {}
        ticks: dict[Identity, int] = {}
        threads_seen: dict[Identity, dict[int, int]] = {}
        root = self._root
        uptime = time.clock_gettime(time.CLOCK_BOOTTIME) * CLOCK_TICKS  # the clock of the start field
        for name in os.listdir(root):
            if not name.isdigit():
                continue
            data = self._files.read(f"{root}/{name}/stat")
            if not data:
                continue  # exited since the listing
            comm, state, f = parse_stat(data)
            pid, start = int(name), int(f[_START])
            used = int(f[_UTIME]) + int(f[_STIME])
            key = (pid, start)
            ticks[key] = used
            p = ProcessUse(pid, start, self._boot + start / CLOCK_TICKS, comm, int(f[_THREADS]), state == b"Z")
            age = uptime - start
            p.lifetime_share = used / age if age > 0 else 0.0
            processes[pid] = p
            # A process first seen after the first scan started during the interval: all its time is new.
            delta = used - self._prev_ticks.get(key, 0) if (key in self._prev_ticks or primed) else 0
            if delta <= 0:
                if key in self._prev_threads:
                    threads_seen[key] = self._prev_threads[key]
                continue
            p.cpu_seconds = delta / CLOCK_TICKS
            if p.threads <= 1:
                p.cpus[int(f[_PROCESSOR])] = p.cpu_seconds
            else:
                threads_seen[key] = self._split_threads(p, int(f[_PROCESSOR]), delta, self._prev_threads.get(key))
        self._files.sweep()
        self._prev_ticks, self._prev_threads = ticks, threads_seen
        self._users = {k: v for k, v in self._users.items() if k in ticks}
        busy = self._cpu_busy()
        self._prev_at = at
        return Scan(processes, busy, interval, time.perf_counter() - t0)

    def _split_threads(self, p: ProcessUse, main_cpu: int, delta: int, prev: dict[int, int] | None) -> dict[int, int]:
        """Each thread's share of the process's `delta` ticks on its CPU; what no live thread explains (threads
        that ended in the interval, or no per-thread baseline yet) goes to the main thread's CPU."""
        now: dict[int, int] = {}
        task_dir = f"{self._root}/{p.pid}/task"
        try:
            tids = os.listdir(task_dir)
        except OSError:
            tids = []
        explained = 0
        for tid in tids:
            data = self._files.read(f"{task_dir}/{tid}/stat")
            if not data:
                continue
            _, _, f = parse_stat(data)
            used = int(f[_UTIME]) + int(f[_STIME])
            now[int(tid)] = used
            if prev is None:
                continue  # no baseline: a thread's whole life is not this interval's
            d = used - prev.get(int(tid), 0)
            if d > 0:
                cpu = int(f[_PROCESSOR])
                p.cpus[cpu] = p.cpus.get(cpu, 0.0) + d / CLOCK_TICKS
                explained += d
        if delta > explained:
            p.cpus[main_cpu] = p.cpus.get(main_cpu, 0.0) + (delta - explained) / CLOCK_TICKS
        return now

    def _cpu_busy(self) -> dict[int, float]:
        """Busy seconds of each CPU since the previous scan ({} on the first)."""
        text = self._stat.read()
        numbers = [int(line[3:].split(None, 1)[0]) for line in text.split(b"\n") if line[3:4].isdigit()]
        rows = stat_rows(text)
        now = {cpu: busy for cpu, (busy, _) in zip(numbers, rows, strict=False)}
        out = {cpu: now[cpu] - self._prev_busy[cpu] for cpu in now if cpu in self._prev_busy}
        self._prev_busy = now
        return out

    def user(self, pid: int, start: int) -> str:
        """The real user's name (a uid without a name: the number), as psutil's username()."""
        key = (pid, start)
        if key not in self._users:
            uid = None
            for line in (read_proc_file(f"{self._root}/{pid}/status") or b"").split(b"\n"):
                if line.startswith(b"Uid:"):
                    uid = int(line.split()[1])
                    break
            self._users[key] = "?" if uid is None else _user_name(uid)
        return self._users[key]

    def cgroup(self, pid: int) -> str:
        return cgroup_of(pid, self._root)

    def threads(self, pid: int) -> list[tuple[int, str]]:
        try:
            tids = sorted(int(t) for t in os.listdir(f"{self._root}/{pid}/task"))
        except OSError as e:
            if e.errno in (errno.ENOENT, errno.ESRCH):
                return []
            return [(pid, "")]
        out = []
        for tid in tids:
            name = read_proc_file(f"{self._root}/{pid}/task/{tid}/comm")
            out.append((tid, name.decode(errors="replace").rstrip("\n") if name else ""))
        return out

    def close(self) -> None:
        self._stat.close()
        self._files.close()


class WhereRan:
    """Which CPUs given processes ran on since the previous look, without a scan of every process (batch
    --pid, -- COMMAND): each of its threads that ran counts for the CPU it last ran on (field 39), as the
    process scan splits a process. A thread ran when its CPU time (utime + stime, clock ticks) grew, or when
    its own counter says so (`ran`: below a tick, a short wake-up). Threads, not children: a child started
    with `inherit` is counted in the process's counts but is a process of its own here."""

    def __init__(self, root: str = "/proc") -> None:
        self._root = root
        self._ticks: dict[int, dict[int, int]] = {}  # pid -> tid -> utime + stime at the previous look

    def look(self, pid: int, ran: Collection[int] = ()) -> tuple[int, ...]:
        """The CPUs since the previous look (the first look only notes where each thread is: ()); `ran`: the
        threads known to have run since then."""
        task_dir = f"{self._root}/{pid}/task"
        try:
            tids = os.listdir(task_dir)
        except OSError:
            tids = []
        before = self._ticks.get(pid)
        now: dict[int, int] = {}
        cpus: set[int] = set()
        for tid in tids:
            data = read_proc_file(f"{task_dir}/{tid}/stat")
            if not data:
                continue
            _, _, f = parse_stat(data)
            used = int(f[_UTIME]) + int(f[_STIME])
            now[int(tid)] = used
            if before is not None and (used > before.get(int(tid), 0) or int(tid) in ran):
                cpus.add(int(f[_PROCESSOR]))
        self._ticks[pid] = now
        return tuple(sorted(cpus))

    def forget(self, pid: int) -> None:
        self._ticks.pop(pid, None)


def cgroup_of(pid: int, root: str = "/proc") -> str:
    """The cgroup v2 path (the `0::` line of /proc/PID/cgroup), "" where there is none (or it is gone)."""
    for line in (read_proc_file(f"{root}/{pid}/cgroup") or b"").split(b"\n"):
        if line.startswith(b"0::"):
            return line[3:].decode(errors="replace")
    return ""


_USER_NAMES: dict[int, str] = {}


def _user_name(uid: int) -> str:
    if uid not in _USER_NAMES:
        try:
            _USER_NAMES[uid] = pwd.getpwuid(uid).pw_name
        except KeyError:
            _USER_NAMES[uid] = str(uid)
    return _USER_NAMES[uid]
