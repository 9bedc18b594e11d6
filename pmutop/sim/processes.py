"""The simulated machine's processes: who runs each stretch of each core's workload.

Each core's workload (pmutop.sim.workload) is cut into runs, and every run belongs to one named process (one of
its threads): a busy phase is a sequence of compiler jobs (`cc1plus`, each a new process that exits at the end of
its run), a memory phase a thread of the `stream` pod, a mixed phase a `mysqld` thread or an `nginx` worker,
branchy a `nginx` worker, frontend-bound a thread of the `java` container, and an idle phase short runs of the
system's daemons (a per-CPU `kworker` when they are all busy elsewhere). The processes take their IPC, miss and
top-down profile from the regime they run, so the per-core counts are exactly those of the workload, unchanged,
and a process's counts over a run are the workload's amounts between the run's ends: what the processes on a
core ran adds up to the core's counts exactly, at any cut of time.

Workers and threads come from pools: a run takes the pool's first member that is not running elsewhere (a pool
grows when every member is busy), so members move between cores as the phases move (a process keeps its
identity and its totals). Runs are assigned in the order of their start (then CPU number), whatever the order of
the questions asked, so pids and placements are a function of the seed only.

Runs start and end at the workload's segment boundaries (1/10 s). Run lists and exited processes are kept for
`KEPT_SEGMENTS` (about a minute): pmutop asks about the last interval or two.
"""

from __future__ import annotations

import bisect
import heapq
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Protocol

from pmutop.sim.regimes import PhaseKind
from pmutop.sim.workload import Counts, hash64, hash_unit

KEPT_SEGMENTS = 600
FIRST_JOB_PID = 4200  # pids of processes and threads started during the run count up from here
_IDLE_RUN = (5, 30)  # segments a daemon runs in an idle phase (min, max)
_JOB_RUN = (8, 40)  # segments one compiler job runs
_DB_SHARE = 0.6  # of mixed phases run by the database (the rest: the web server)
_KEY_RUN = 0x72756E
_KEY_MIXED = 0x6D6978
_KEY_PID = 0x706964
_KEY_DAEMON = 0x6461656D

# Cgroups (cgroup v2 paths, as systemd, docker and Kubernetes name them).
DOCKER_ID = "8c1d2f6a9be04e53a7d1c36f0b2e9a4d5f7c8b1e0a3d6f9c2b5e8a1d4c7f0b3e"
POD_UID = "5b0e7d2c_3a91_4f6e_8d2b_7c4a1e9f0b36"
CONTAINER_ID = "e2b7c9d4a1f6083b5e9c2d7a4f1b6e830c5d9a2f7b4e1c6d3a8f0b5e2c9d7a14"
SESSION = "/user.slice/user-1000.slice/session-2.scope"
POD = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{POD_UID}.slice"
STREAM_SCOPE = f"{POD}/cri-containerd-{CONTAINER_ID}.scope"
JAVA_SCOPE = f"/system.slice/docker-{DOCKER_ID}.scope"
# How users know a cgroup, where it is not its last path element.
CGROUP_NAMES = {
    "/": "/",
    JAVA_SCOPE: "docker shop-api",
    POD: "pod analytics/stream-0",
    STREAM_SCOPE: "container stream (pod analytics/stream-0)",
    "/user.slice/user-1000.slice": "user-1000.slice (dev)",
}


@dataclass(frozen=True)
class Program:
    """What runs a kind of run. `kind`: "job" (a new process per run, exiting at its end), "workers" (a pool
    of single-threaded processes), "threads" (one process, a pool of threads), "daemon" (one process)."""

    comm: str
    user: str
    cgroup: str
    kind: str
    switches_per_s: int  # context switches per second of running
    pid: int = 0  # services: the pid (threads) or the first worker's
    threads: int = 1  # threads a "threads" service starts with


COMPILER = Program("cc1plus", "dev", SESSION, "job", 40)
STREAM = Program("stream", "root", STREAM_SCOPE, "threads", 15, pid=3107)
DATABASE = Program("mysqld", "mysql", "/system.slice/mysql.service", "threads", 2500, pid=1422, threads=4)
WEB = Program("nginx", "www-data", "/system.slice/nginx.service", "workers", 6000, pid=1301)
JAVA = Program("java", "app", JAVA_SCOPE, "threads", 900, pid=2650, threads=8)
DAEMONS = (
    Program("systemd-journal", "root", "/system.slice/systemd-journald.service", "daemon", 3000, pid=388),
    Program("sshd", "root", "/system.slice/ssh.service", "daemon", 1500, pid=901),
    Program("cron", "root", "/system.slice/cron.service", "daemon", 800, pid=870),
    Program("containerd", "root", "/system.slice/containerd.service", "daemon", 4000, pid=1010),
    Program("kubelet", "root", "/system.slice/kubelet.service", "daemon", 2500, pid=1188),
)
KWORKER = Program("kworker", "root", "/", "daemon", 5000)
_BY_REGIME = {PhaseKind.BUSY: COMPILER, PhaseKind.MEMORY: STREAM, PhaseKind.BRANCHY: WEB, PhaseKind.FRONTEND: JAVA}
SERVICES = (STREAM, DATABASE, WEB, JAVA, *DAEMONS)


@dataclass
class SimProcess:
    pid: int
    comm: str
    user: str
    cgroup: str
    start_tick: int  # TSC ticks since the machine started (0: it was running already)
    switches_per_s: int
    multithreaded: bool = False
    tids: list[int] = field(default_factory=list)  # its threads, the pid first
    end_tick: int | None = None  # when it exits (jobs: known at their start)
    busy_until: list[int] = field(default_factory=list)  # per thread: the end of its current run


@dataclass(frozen=True)
class Run:
    """One stretch of one core run by one thread: [start, end) in TSC ticks."""

    start: int
    end: int
    pid: int
    tid: int


Amounts5 = tuple[int, int, int, int, int]  # cycles, instructions, llc_misses, branch_misses, ref_cycles (totals)
Slice = tuple[Run, Amounts5, Amounts5]
_AMOUNTS5 = (
    0,
    1,
    4,
    6,
    2,
)  # Amounts positions of Amounts5's fields  # a run's part of an interval: the amounts at its two ends


class _Workload(Protocol):
    seg_ticks: int

    def cumulative_ticks(self, ticks: int) -> Counts: ...

    def phase_span(self, seg: int) -> tuple[PhaseKind, int, int]: ...


class _Machine(Protocol):
    def workload(self, cpu: int) -> _Workload: ...  # pmutop.sim.model.SimMachine


def amounts5(counts: Counts) -> Amounts5:
    user, kernel = counts.user, counts.kernel
    return (
        user.cycles + kernel.cycles,
        user.instructions + kernel.instructions,
        user.llc_misses + kernel.llc_misses,
        user.branch_misses + kernel.branch_misses,
        user.ref_cycles + kernel.ref_cycles,
    )


class ProcessTable:
    """The processes of a simulated machine and the runs of every core, built forward in time on demand.
    Thread-safe (the batch, the live view and a recorder may ask)."""

    def __init__(self, machine: _Machine, cpus: int, seed: int, tsc_hz: int) -> None:
        self._machine = machine
        self.cpus = cpus
        self.seed = seed
        self.tsc_hz = tsc_hz
        self.seg_ticks = machine.workload(0).seg_ticks
        self._lock = threading.Lock()
        self.processes: dict[int, SimProcess] = {}
        self._pools: dict[str, list[int]] = {}  # program comm -> pids (workers) or [pid] (threads, daemons)
        self._next_pid = FIRST_JOB_PID
        for program in SERVICES:
            self._service(program)
        self._runs: list[list[Run]] = [[] for _ in range(cpus)]
        self._starts: list[list[int]] = [[] for _ in range(cpus)]
        self._phase: list[tuple[PhaseKind, int, int]] = [(PhaseKind.IDLE, 0, 0)] * cpus
        self._pending = [(0, cpu) for cpu in range(cpus)]  # (start segment, cpu) of each core's next run
        self._horizon = -1  # every run starting at or before this segment is assigned
        self._amounts: list[dict[int, Amounts5]] = [{} for _ in range(cpus)]  # recent cut points per core

    # -- identity -------------------------------------------------------------------------------------

    def _service(self, program: Program) -> SimProcess:
        threads = program.kind == "threads"
        proc = SimProcess(program.pid, program.comm, program.user, program.cgroup, 0, program.switches_per_s, threads)
        proc.tids = [program.pid] + [self._alloc_pid() for _ in range(program.threads - 1)]
        proc.busy_until = [0] * len(proc.tids)
        self.processes[proc.pid] = proc
        self._pools[program.comm] = [proc.pid]
        return proc

    def _alloc_pid(self) -> int:
        pid = self._next_pid
        # Other processes come and go meanwhile: a small deterministic gap, as a busy machine's pids have.
        self._next_pid += 1 + hash64(self.seed, pid, _KEY_PID) % 3
        return pid

    def _new_process(self, program: Program, start: int, end: int | None) -> SimProcess:
        pid = self._alloc_pid()
        proc = SimProcess(pid, program.comm, program.user, program.cgroup, start, program.switches_per_s)
        proc.tids, proc.busy_until, proc.end_tick = [pid], [0], end
        self.processes[pid] = proc
        return proc

    # -- assignment, in start order ---------------------------------------------------------------------

    def _advance(self, seg: int) -> None:
        """Assign every run that starts at or before segment `seg`, in (start, cpu) order."""
        if seg <= self._horizon:
            return
        pending = self._pending
        while pending[0][0] <= seg:
            start, cpu = pending[0]
            end, program = self._shape(cpu, start)
            run = self._assign(cpu, start, end, program)
            self._runs[cpu].append(run)
            self._starts[cpu].append(run.start)
            heapq.heapreplace(pending, (end, cpu))
        self._horizon = seg
        self._forget(seg - KEPT_SEGMENTS)

    def _shape(self, cpu: int, start: int) -> tuple[int, Program]:
        """The end segment and the program of core `cpu`'s run starting at segment `start`."""
        kind, first, length = self._phase[cpu]
        if start >= first + length:
            kind, first, length = self._phase[cpu] = self._machine.workload(cpu).phase_span(start)
        phase_end = first + length
        h = hash64(self.seed, cpu, start, _KEY_RUN)
        if kind in (PhaseKind.IDLE, PhaseKind.BUSY):
            lo, hi = _IDLE_RUN if kind is PhaseKind.IDLE else _JOB_RUN
            end = start + lo + h % (hi - lo + 1)
            if end + lo > phase_end:  # too little left for another run: this one takes it
                end = phase_end
            program = COMPILER if kind is PhaseKind.BUSY else DAEMONS[h % len(DAEMONS)]
            return end, program
        if kind is PhaseKind.MIXED:
            db = hash_unit(self.seed, cpu, first, _KEY_MIXED) < _DB_SHARE
            return phase_end, DATABASE if db else WEB
        return phase_end, _BY_REGIME[kind]

    def _assign(self, cpu: int, start_seg: int, end_seg: int, program: Program) -> Run:
        st = self.seg_ticks
        start, end = start_seg * st, end_seg * st
        if program.kind == "job":
            proc = self._new_process(program, start, end)
            return Run(start, end, proc.pid, proc.pid)
        if program.kind == "threads":
            proc = self.processes[program.pid]
            i = _first_free(proc.busy_until, start)
            if i is None:  # every thread is running elsewhere: the service starts another
                proc.tids.append(self._alloc_pid())
                proc.busy_until.append(0)
                i = len(proc.tids) - 1
            proc.busy_until[i] = end
            return Run(start, end, proc.pid, proc.tids[i])
        if program.kind == "workers":
            pool = self._pools[program.comm]
            for pid in pool:
                proc = self.processes[pid]
                if proc.busy_until[0] <= start:
                    break
            else:  # every worker is busy: the server forks another
                proc = self._new_process(program, start, None)
                pool.append(proc.pid)
            proc.busy_until[0] = end
            return Run(start, end, proc.pid, proc.pid)
        # A daemon: the one the hash chose, else the next one free, else this CPU's kworker.
        first = DAEMONS.index(program)
        for k in range(len(DAEMONS)):
            proc = self.processes[DAEMONS[(first + k) % len(DAEMONS)].pid]
            if proc.busy_until[0] <= start:
                break
        else:
            proc = self._kworker(cpu)
        proc.busy_until[0] = end
        return Run(start, end, proc.pid, proc.pid)

    def _kworker(self, cpu: int) -> SimProcess:
        name = f"kworker/{cpu}:1"
        pool = self._pools.get(name)
        if pool is None:
            proc = self._new_process(KWORKER, 0, None)
            proc.comm = name
            self._pools[name] = pool = [proc.pid]
        return self.processes[pool[0]]

    def _forget(self, seg: int) -> None:
        """Drop runs that ended before segment `seg` and processes that exited before it."""
        if seg <= 0:
            return
        tick = seg * self.seg_ticks
        for cpu in range(self.cpus):
            runs = self._runs[cpu]
            n = 0
            while n < len(runs) - 1 and runs[n].end < tick:
                n += 1
            if n > 64:  # in batches: amortised
                del runs[:n], self._starts[cpu][:n]
        gone = [pid for pid, p in self.processes.items() if p.end_tick is not None and p.end_tick < tick]
        if len(gone) > 64:
            for pid in gone:
                del self.processes[pid]

    # -- questions ------------------------------------------------------------------------------------

    def cut(self, cpu: int, tick: int) -> Amounts5:
        """Core `cpu`'s amounts at TSC `tick` (kept for the last few cuts: each interval's end is the next's start)."""
        cache = self._amounts[cpu]
        found = cache.get(tick)
        if found is None:
            workload = self._machine.workload(cpu)
            totals = getattr(workload, "totals_ticks", None)  # a Workload's: without building its Counts
            if totals is not None:
                cycles, instructions, llc_misses, branch_misses, ref_cycles = totals(tick, _AMOUNTS5)
                found = (cycles, instructions, llc_misses, branch_misses, ref_cycles)
            else:
                found = amounts5(workload.cumulative_ticks(tick))
            if len(cache) >= 8:
                del cache[min(cache)]
            cache[tick] = found
        return found

    def slices(self, cpu: int, start: int, end: int) -> list[Slice]:
        """The runs of core `cpu` in [start, end) (TSC ticks), each with the core's amounts at its part's ends:
        consecutive parts share their cut, so they add up to the core's amounts over [start, end] exactly."""
        if end <= start:
            return []
        with self._lock:
            self._advance(end // self.seg_ticks)
            runs, starts = self._runs[cpu], self._starts[cpu]
            i = max(0, bisect.bisect_right(starts, start) - 1)
            out: list[Slice] = []
            lo = start
            before = self.cut(cpu, lo)
            while lo < end and i < len(runs):
                run = runs[i]
                hi = min(run.end, end)
                if hi > lo:
                    after = self.cut(cpu, hi)
                    out.append((run, before, after))
                    lo, before = hi, after
                i += 1
            return out

    def process(self, pid: int) -> SimProcess | None:
        with self._lock:
            return self.processes.get(pid)

    def alive_at(self, tick: int) -> Iterator[SimProcess]:
        """The processes that exist at `tick` (started, not exited)."""
        with self._lock:
            self._advance(tick // self.seg_ticks)
            procs = list(self.processes.values())
        return (p for p in procs if p.start_tick <= tick and (p.end_tick is None or p.end_tick > tick))

    def top_per_cpu(self, cpus: list[int], start: int, end: int) -> dict[int, tuple[str, int, float]]:
        """Per core, the process that ran longest in [start, end) (TSC ticks): (comm, pid, seconds running), the
        longest running first and the lowest pid among equals. slices() for every core under one lock (the live
        view asks every interval for every core)."""
        out: dict[int, tuple[str, int, float]] = {}
        if end <= start:
            return out
        cut, processes, hz = self.cut, self.processes, self.tsc_hz
        with self._lock:
            self._advance(end // self.seg_ticks)
            for cpu in cpus:
                runs, starts = self._runs[cpu], self._starts[cpu]
                i = max(0, bisect.bisect_right(starts, start) - 1)
                busy: dict[int, int] = {}
                lo, before = start, cut(cpu, start)[4]  # reference cycles: time running
                while lo < end and i < len(runs):
                    run = runs[i]
                    hi = run.end if run.end < end else end
                    if hi > lo:
                        after = cut(cpu, hi)[4]
                        busy[run.pid] = busy.get(run.pid, 0) + after - before
                        lo, before = hi, after
                    i += 1
                best, most = 0, 0
                for pid, ran in busy.items():
                    if ran > most or (ran == most and ran and pid < best):
                        best, most = pid, ran
                proc = processes.get(best) if most > 0 else None
                if proc is not None:
                    out[cpu] = (proc.comm, best, most / hz)
        return out


def _first_free(busy_until: list[int], start: int) -> int | None:
    for i, until in enumerate(busy_until):
        if until <= start:
            return i
    return None


def cgroup_name(path: str) -> str:
    """How users know a cgroup: the unit's name, a container or pod by name."""
    return CGROUP_NAMES.get(path) or path.rsplit("/", 1)[-1]


def cgroup_ancestors(path: str) -> list[str]:
    """The path and every parent up to the root: "/a/b" -> ["/a/b", "/a", "/"]."""
    out = [path]
    while path not in ("", "/"):
        path = path.rsplit("/", 1)[0] or "/"
        out.append(path)
    return out
