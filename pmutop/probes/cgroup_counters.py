"""Per-cgroup counters for `--cgroup PATH` and `--cgroups` (the cgroup tree), as `perf stat -G CGROUP -a` counts.

Per cgroup, one counter group per online CPU, opened with perf_event_open(pid = an fd of the cgroup's v2
directory, cpu = N, flags = PERF_FLAG_PID_CGROUP): the kernel counts on CPU N only while a task of that cgroup
(or of a descendant: the scoping is recursive, kernel/events/core.c perf_cgroup_match() ->
cgroup_is_descendant()) runs there. perf does the same: tools/perf/util/cgroup.c opens the directory
(open_cgroup) and tools/perf/util/evsel.c passes its fd as the pid with PERF_FLAG_PID_CGROUP. A cgroup's reading
is the sum over its CPUs, each CPU's counts scaled by its own enabled/running; a parent's counts include its
children's, so the tree shows both.

The msr backend programs the PMU itself, so per-cgroup hardware counters would fight it: there only the kernel's
software events (task-clock, context switches: no PMU counter) are counted, and each core's hardware counts are
split by the cgroup's share of that core's busy time (its task-clock there): an estimate, labelled so.
"""

from __future__ import annotations

import errno
import os
import resource
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from pmutop.core.cpulist import format_cpu_list
from pmutop.core.errors import HardwareError, PmutopError, UsageError
from pmutop.core.sample import Sample
from pmutop.core.sysroot import Sysroot
from pmutop.core.task_reading import ESTIMATED, EXACT, CgroupReading, TaskSnapshot
from pmutop.hw.perf_event import (
    PERF_FLAG_FD_CLOEXEC,
    PERF_FLAG_PID_CGROUP,
    PERF_FORMAT_GROUP,
    PERF_FORMAT_TOTAL_TIME_ENABLED,
    PERF_FORMAT_TOTAL_TIME_RUNNING,
    PERF_TYPE_HARDWARE,
    EventSpec,
    PerfOpenError,
    explain_open_error,
    make_attr,
    parse_group_read,
    perf_event_open,
    read_paranoid,
)
from pmutop.probes.cgroup_names import CgroupNamer, find_cgroup2, path_under_root, walk
from pmutop.probes.task_counters import SOFTWARE_EVENTS, task_events

_READ_FORMAT = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
_FLAGS = PERF_FLAG_FD_CLOEXEC | PERF_FLAG_PID_CGROUP
_UNSUPPORTED = (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODEV, errno.EINVAL)
LEAVE_AFTER = 3  # intervals outside the top 2N before a cgroup of the tree stops being counted (no churn)
ESTIMATE_NOTE = (
    "est.: a cgroup's hardware counts are each core's counts split by the cgroup's share of that core's busy "
    "time (its task-clock there); exact numbers: --backend perf"
)
Opener = Callable[..., int]  # perf_event_open's signature (tests inject failures)
Reader = Callable[[int, int], bytes]  # os.read's (tests give a fake kernel's group reads)
Raw = tuple[list[int], int, int]  # one CPU's group read: counts, enabled ns, running ns


def cgroup_root_or_refuse(sysroot: Sysroot, option: str) -> str:
    """The cgroup v2 root (relative to the sysroot) cgroup counters can use; a one-line usage error otherwise."""
    if not sysroot.is_host:
        # perf_event_open needs the real cgroup directory: a copied tree under --sysroot has nothing to count.
        raise UsageError(f"{option}: --sysroot {sysroot}: cgroup counters count this host's cgroups only")
    root = find_cgroup2(sysroot)
    if root is None:
        raise UsageError(f"{option}: no cgroup v2 hierarchy at /sys/fs/cgroup or /sys/fs/cgroup/unified")
    return root


def check_paths(sysroot: Sysroot, root: str, paths: Sequence[str]) -> list[str]:
    """The --cgroup paths normalised ("/system.slice/nginx.service", also from "/sys/fs/cgroup/system.slice/
    nginx.service"); a missing one is a usage error naming it."""
    out: list[str] = []
    for text in paths:
        path = path_under_root(text, root)
        if ".." in path.split("/") or not sysroot.path(root + path).is_dir():
            raise UsageError(f"--cgroup {text}: no such cgroup under /{root}")
        if path not in out:
            out.append(path)
    return out


def raise_open_files_limit() -> int:
    """The soft RLIMIT_NOFILE raised to the hard limit (per-CPU counters need many fds); returns the limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return int(soft)


class _CpuGroup:
    """One counter group of one cgroup on one CPU (leader: task-clock)."""

    def __init__(self, cgroup_fd: int, cpu: int, events: Sequence[EventSpec], opener: Opener, reader: Reader) -> None:
        self.fds: list[int] = []
        self.reader = reader
        try:
            for ev in events:
                attr = make_attr(ev.type, ev.config, read_format=_READ_FORMAT)
                self.fds.append(opener(attr, cgroup_fd, cpu, self.fds[0] if self.fds else -1, _FLAGS))
        except BaseException:
            self.close()
            raise
        self.size = 8 * (3 + len(events))

    def read(self) -> Raw:
        g = parse_group_read(self.reader(self.fds[0], self.size), len(self.fds))
        return g.values, g.time_enabled, g.time_running

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in reversed(fds):
            os.close(fd)


@dataclass
class _Counted:
    path: str
    name: str
    groups: dict[int, _CpuGroup]
    prev: dict[int, Raw]
    at: float
    pinned: bool = False  # asked for by --cgroup: never leaves the tree
    outside: int = 0  # consecutive intervals outside the top 2N
    cpu_task_clock: dict[int, int] = field(default_factory=dict)  # last interval's task-clock ns per CPU

    def read(self) -> dict[int, Raw]:
        return {cpu: g.read() for cpu, g in self.groups.items()}

    def close(self) -> None:
        for g in self.groups.values():
            g.close()
        self.groups.clear()


class CgroupCounters:
    """Counts the given cgroups (`paths`) and, with `tree`, the `top` cgroups using most CPU with their
    ancestors; `read()` fills TaskSnapshot.cgroups. `estimate`: the msr backend's form (software events counted,
    hardware events estimated from the CPU samples)."""

    def __init__(
        self,
        paths: Sequence[str] = (),
        *,
        tree: bool = False,
        top: int = 32,
        requested_events: Sequence[str] | None = None,
        cpus: Sequence[int],
        sysroot: Sysroot | None = None,
        estimate: bool = False,
        opener: Opener = perf_event_open,
        reader: Reader = os.read,
        root: str | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        """`root`: the v2 root under `sysroot` (found when None; tests give a fake tree with a fake opener and
        reader)."""
        self.sysroot = sysroot or Sysroot("/")
        option = "--cgroups" if tree else "--cgroup"
        self.root = root if root is not None else cgroup_root_or_refuse(self.sysroot, option)
        self.pinned = check_paths(self.sysroot, self.root, paths)
        self.tree, self.top, self.estimate = tree, top, estimate
        self.cpus = list(cpus)
        self._opener, self._reader, self._say, self._option = opener, reader, say, option
        self._namer = CgroupNamer(self.sysroot)
        self._counted: dict[str, _Counted] = {}
        self._usage: dict[str, int] = {}  # cumulative usage_usec at the last scan (tree mode)
        self._procs: dict[str, int] = {}  # processes per cgroup, its descendants' included
        self._wanted = 0  # how many cgroups the last choice wanted counted
        self._files_limit: int | None = None  # set when EMFILE stopped adding cgroups
        self._unknown_busy: set[int] = set()  # CPUs whose busy time no sample gave (estimate)
        self.open_files_limit = raise_open_files_limit()
        wanted_hw = [e for e in task_events(requested_events) if e.type == PERF_TYPE_HARDWARE]
        if estimate:
            # Hardware counts come from the cores' samples; only the software events are opened per cgroup.
            self._specs = list(SOFTWARE_EVENTS)
            self.events = [e.name for e in self._specs] + [e.name for e in wanted_hw]
        else:
            self._specs = list(SOFTWARE_EVENTS) + self._usable(wanted_hw)
            self.events = [e.name for e in self._specs]

    def _probe_target(self) -> str:
        return self.pinned[0] if self.pinned else "/"

    def _usable(self, hardware: list[EventSpec]) -> list[EventSpec]:
        """The hardware events this PMU has (each tried once on one cgroup and CPU); says once when none."""
        kept: list[EventSpec] = []
        if not hardware:
            return kept
        fd = self._open_dir(self._probe_target())
        try:
            for ev in hardware:
                try:
                    os.close(
                        self._opener(
                            make_attr(ev.type, ev.config, read_format=_READ_FORMAT), fd, self.cpus[0], -1, _FLAGS
                        )
                    )
                    kept.append(ev)
                except PerfOpenError as e:
                    if e.errno not in _UNSUPPORTED:
                        raise self._refused(e, ev.name) from None
        finally:
            os.close(fd)
        if not kept and self._say:
            self._say(
                f"{self._option}: this PMU has no hardware events (a VM without a virtual PMU?): counting the "
                "kernel's software events task-clock and context-switches only"
            )
        return kept

    def _refused(self, e: PerfOpenError, event: str = "task_clock") -> PmutopError:
        paranoid = read_paranoid(Sysroot("/"))
        why = explain_open_error(e.errno, event=event, cpu=e.cpu, paranoid=paranoid, root=os.geteuid() == 0)
        if e.errno in (errno.EACCES, errno.EPERM):
            return UsageError(f"{self._option}: cgroup counters are CPU-wide: {why}")
        return PmutopError(f"{self._option}: {why}")

    def _open_dir(self, path: str) -> int:
        return os.open(self.sysroot.path(self.root + path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)

    # -- opening and closing -------------------------------------------------------------------------------

    def _attach(self, path: str) -> _Counted | None:
        """Counters on every CPU for one cgroup; None when it vanished. Raises OSError(EMFILE) when out of fds."""
        try:
            fd = self._open_dir(path)
        except FileNotFoundError:
            return None
        groups: dict[int, _CpuGroup] = {}
        try:
            for cpu in self.cpus:
                try:
                    groups[cpu] = _CpuGroup(fd, cpu, self._specs, self._opener, self._reader)
                except PerfOpenError as e:
                    if e.errno == errno.ENODEV:
                        continue  # the CPU went offline: the others still count the cgroup
                    if e.errno in (errno.EMFILE, errno.ENFILE):
                        raise OSError(e.errno, os.strerror(e.errno)) from None
                    raise self._refused(e) from None
        except BaseException:
            for g in groups.values():
                g.close()
            raise
        finally:
            # The events hold their own reference to the cgroup (kernel/events/core.c perf_cgroup_connect):
            # the directory fd is not needed once they are open, and the cgroup stays removable.
            os.close(fd)
        counted = _Counted(path, self._namer.name(path), groups, {}, time.monotonic(), pinned=path in self.pinned)
        counted.prev = counted.read()
        return counted

    def _open_all(self, paths: Sequence[str]) -> None:
        """Counters for each path not yet counted, parents first; on EMFILE stop adding and say so in notes."""
        self._files_limit = None
        for path in sorted(paths, key=lambda p: (p.count("/"), p)):
            if path in self._counted:
                continue
            try:
                counted = self._attach(path)
            except OSError as e:
                if e.errno not in (errno.EMFILE, errno.ENFILE):
                    raise
                self._files_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
                break
            if counted is not None:
                self._counted[path] = counted

    def begin(self) -> None:
        if self.tree:
            self._scan()
            # No interval yet: the first choice ranks by CPU used since each cgroup began.
            wanted = self._choose(dict(self._usage))
        else:
            wanted = list(self.pinned)
            self._count_processes()
        self._wanted = len(wanted)
        self._open_all(wanted)
        now = time.monotonic()
        for c in self._counted.values():
            c.prev, c.at = c.read(), now

    # -- the tree ------------------------------------------------------------------------------------------

    def _scan(self) -> dict[str, int]:
        """Every cgroup's cumulative CPU use (cpu.stat usage_usec) and processes; returns the deltas since the
        last scan (a cgroup new since then: all its use)."""
        usage: dict[str, int] = {}
        own: dict[str, int] = {}
        base = self.sysroot.path(self.root)
        for path in walk(self.sysroot, self.root):
            rel = "" if path == "/" else path
            usage[path] = _usage_usec(f"{base}{rel}/cpu.stat")
            own[path] = _lines(f"{base}{rel}/cgroup.procs")
        deltas = {p: max(0, u - self._usage.get(p, 0)) for p, u in usage.items()}
        self._usage = usage
        self._procs = _recursive(own)
        return deltas

    def _count_processes(self) -> None:
        base = self.sysroot.path(self.root)
        for top in self.pinned:
            own = {p: _lines(f"{base}{'' if p == '/' else p}/cgroup.procs") for p in walk(self.sysroot, self.root, top)}
            self._procs[top] = sum(own.values())

    def _choose(self, deltas: dict[str, int]) -> list[str]:
        """The top N cgroups by their own CPU use in the interval (a parent's usage_usec includes its children's:
        its own is what is left), their ancestors, and the pinned ones; the tree's root is the machine (the CPU
        view), not a cgroup row. Counted cgroups stay until LEAVE_AFTER intervals outside the top 2N."""
        own = dict(deltas)
        for path, used in deltas.items():
            parent = _parent(path)
            if parent is not None and parent in own:
                own[parent] -= used
        ranked = sorted((p for p in own if p != "/" and own[p] > 0), key=lambda p: -own[p])
        top, near = set(ranked[: self.top]), set(ranked[: 2 * self.top])
        keep = top | set(self.pinned)
        for path, c in self._counted.items():
            c.outside = 0 if path in near or c.pinned else c.outside + 1
            if c.outside < LEAVE_AFTER and path in deltas:
                keep.add(path)
        for path in list(keep):
            parent = _parent(path)
            while parent not in (None, "/"):
                keep.add(parent)
                parent = _parent(parent)
        return sorted(keep)

    # -- reading -------------------------------------------------------------------------------------------

    def read(self, cpu_samples: Sequence[Sample] = ()) -> TaskSnapshot:
        # The counters first, together (their interval is the CPU samples'), then the tree's files.
        base = self.sysroot.path(self.root)
        raw: list[tuple[_Counted, dict[int, Raw] | None, float, bool]] = []
        for path, c in self._counted.items():
            removed = not os.path.isdir(f"{base}{'' if path == '/' else path}")  # checked before the last read
            try:
                cur: dict[int, Raw] | None = c.read()
            except (OSError, HardwareError):  # a group the kernel put in error state: gone, like a removed one
                cur, removed = None, True
            raw.append((c, cur, time.monotonic(), removed))
        deltas = self._scan() if self.tree else None
        if not self.tree:
            self._count_processes()
        readings: list[CgroupReading] = []
        for c, cur, now, removed in raw:
            if cur is None:
                readings.append(CgroupReading(c.path, c.name, now - c.at, {}, 1.0, removed=True))
            else:
                reading = self._reading(c, cur, now - c.at, removed)
                if self.estimate:
                    reading = self._estimated(reading, c.cpu_task_clock, cpu_samples)
                readings.append(reading)
                c.prev, c.at = cur, now
            if removed:
                self._counted.pop(c.path).close()
        if deltas is not None:
            wanted = self._choose(deltas)
            for path in [p for p in self._counted if p not in wanted]:
                self._counted.pop(path).close()
            self._wanted = len(wanted)
            self._open_all(wanted)
        return TaskSnapshot(cgroups=tuple(readings), mode=ESTIMATED if self.estimate else EXACT, notes=self._notes())

    def _notes(self) -> tuple[str, ...]:
        notes = []
        if self._files_limit is not None:
            notes.append(
                f"counters on {len(self._counted)} of {self._wanted} cgroups: open files limit {self._files_limit}"
            )
        if "/" in self._counted:
            # Every task, the idle tasks included, is in the root cgroup: its task-clock is the CPUs' whole time
            # (seen here: 1 s per CPU per second, a CPU with no context switch in it included, as `perf stat -a -G /`).
            notes.append("the root cgroup's task-clock counts idle time too: its CPU% is the CPUs' whole time")
        if self.estimate:
            notes.append(ESTIMATE_NOTE)
            if self._unknown_busy:
                cpus = format_cpu_list(sorted(self._unknown_busy))
                notes.append(f"est.: cpu {cpus}: busy time unknown, its hardware counts are not split")
        return tuple(notes)

    def _reading(self, c: _Counted, cur: dict[int, Raw], interval: float, removed: bool) -> CgroupReading:
        n = len(self._specs)
        totals = [0.0] * n
        enabled_all = running_all = 0
        c.cpu_task_clock = {}
        for cpu, (values, enabled, running) in cur.items():
            before = c.prev.get(cpu)
            if before is None:
                continue
            d_enabled, d_running = enabled - before[1], running - before[2]
            enabled_all += d_enabled
            running_all += d_running
            # Scaled like `perf stat`: the count over the time the group ran, extended to the time enabled.
            scale = d_enabled / d_running if d_running > 0 else 0.0
            deltas = [(v1 - v0) * scale for v0, v1 in zip(before[0], values, strict=True)]
            totals = [t + d for t, d in zip(totals, deltas, strict=True)]
            c.cpu_task_clock[cpu] = round(deltas[0])  # the leader is task-clock
        counted = running_all / enabled_all if enabled_all > 0 else 1.0
        counts = {ev.name: round(t) for ev, t in zip(self._specs, totals, strict=True)}
        estimated = {ev.name: round(counted, 3) for ev in self._specs} if counted < 1.0 else {}
        return CgroupReading(
            path=c.path,
            name=c.name,
            interval=interval,
            counts=counts,
            counted=round(counted, 3),
            estimated=estimated,
            processes=self._procs.get(c.path, 0),
            removed=removed,
        )

    def _estimated(self, r: CgroupReading, cpu_clock: dict[int, int], samples: Sequence[Sample]) -> CgroupReading:
        """The hardware events as the cgroup's share of each core's counts (its task-clock there over the core's
        busy time); the software events stay as counted."""
        counts = dict(r.counts)
        hardware = [e for e in self.events if e not in counts]
        for s in samples:
            busy = _busy_ns(s)
            if busy is None:
                self._unknown_busy.add(s.cpu)
                continue
            share = min(1.0, cpu_clock.get(s.cpu, 0) / busy) if busy > 0 else 0.0
            for key in hardware:
                if key in s.counts:
                    counts[key] = counts.get(key, 0) + round(s.counts[key] * share)
        return replace(r, counts=counts, estimate=True)

    def cpu_task_clock(self, path: str) -> dict[int, int]:
        """The cgroup's task-clock ns per CPU in the last interval (what the estimate splits by)."""
        c = self._counted.get(path)
        return dict(c.cpu_task_clock) if c is not None else {}

    def close(self) -> None:
        for c in self._counted.values():
            c.close()
        self._counted.clear()


def _parent(path: str) -> str | None:
    if path == "/":
        return None
    return path.rsplit("/", 1)[0] or "/"


def _recursive(own: dict[str, int]) -> dict[str, int]:
    """Per cgroup, its own count plus every descendant's (children are summed into parents, deepest first)."""
    total = dict(own)
    for path in sorted(own, key=lambda p: -p.count("/")):
        parent = _parent(path)
        if parent is not None and parent in total and path != "/":
            total[parent] += total[path]
    return total


def _usage_usec(path: str) -> int:
    """cpu.stat's usage_usec (the first line; Documentation/admin-guide/cgroup-v2.rst "cpu.stat"), 0 if gone."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return 0
    key, _, value = head.partition(b"\n")[0].partition(b" ")
    return int(value) if key == b"usage_usec" and value.strip().isdigit() else 0


def _busy_ns(s: Sample) -> float | None:
    """A core's busy ns in its sample's interval: the kernel's CPU times (util), else turbostat's Busy% (MPERF),
    else the reference cycles over the TSC; None when the sample says nothing about it."""
    if s.util is not None:
        fraction = s.util
    elif s.busy is not None:
        fraction = s.busy / 100
    elif s.tsc and "ref_cycles" in s.counts:
        fraction = min(1.0, s.counts["ref_cycles"] / s.tsc)
    else:
        return None
    return fraction * s.interval * 1e9


def _lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return f.read().count(b"\n")
    except OSError:
        return 0
