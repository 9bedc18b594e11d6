"""A TaskCounterSource of made-up processes and cgroups, the same on every run: the pictures of the process and
cgroup views (pmutop.app.screenshots) and the tests read it through the real task sampler. Every number it
gives is invented: the pictures run on the simulated PMU and say SIMULATED."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from pmutop.core.sample import Sample
from pmutop.core.task_reading import ESTIMATED, EXACT, CgroupReading, TaskReading, TaskSnapshot

EVENTS = ["task_clock", "context_switches", "cycles", "instructions", "llc_misses", "branches", "branch_misses"]
SOFTWARE = ("task_clock", "context_switches")


@dataclass(frozen=True)
class Profile:
    pid: int
    comm: str
    user: str
    threads: int
    cgroup: str
    util: float  # CPUs' worth of running time
    ghz: float
    ipc: float
    mpki: float
    branch_miss: float  # of branches
    cpus: tuple[int, ...]
    counted: float = 1.0


PROFILES = (
    Profile(1201, "nginx", "www-data", 4, "/system.slice/nginx.service", 1.8, 3.1, 1.45, 1.2, 0.011, (0, 1, 2, 3)),
    Profile(
        1377,
        "postgres",
        "postgres",
        12,
        "/system.slice/postgresql.service",
        2.6,
        2.9,
        0.72,
        6.5,
        0.018,
        (4, 5, 6),
        counted=0.62,
    ),
    Profile(
        2230, "cc1plus", "alice", 1, "/user.slice/user-1000.slice/session-3.scope", 0.98, 3.6, 2.3, 0.3, 0.031, (7,)
    ),
    Profile(
        3310,
        "stream",
        "bob",
        8,
        "/user.slice/user-1001.slice/session-7.scope",
        3.9,
        2.4,
        0.35,
        28.0,
        0.002,
        (8, 9, 10, 11),
    ),
    Profile(
        4100, "java", "app", 40, "/system.slice/docker-3f2a9c.scope", 1.2, 2.7, 1.1, 3.2, 0.024, (2, 5, 9), counted=0.8
    ),
    Profile(5120, "gcc", "alice", 1, "/user.slice/user-1000.slice/session-3.scope", 0.9, 3.4, 1.9, 0.8, 0.04, (1,)),
)
CGROUP_NAMES = {"/system.slice/docker-3f2a9c.scope": "docker web"}
NO_PERMISSION = TaskReading(
    811, "sshd", "root", 1, 1.0, {}, 0.0, cgroup="/system.slice/ssh.service", no_permission=True
)


class ScriptedTasks:
    """Deterministic snapshots: `mode` EXACT (multiplexed and late-attached rows included), ESTIMATED (the msr
    backend's split of core counts) or SIMULATED; the process "gcc" exits at interval `exit_at` and its row
    stays, marked exited, for two intervals more."""

    def __init__(self, mode: str = EXACT, exit_at: int = 58, no_permission: bool = True) -> None:
        self.mode = mode
        self.events = [e for e in EVENTS if mode != ESTIMATED or e != "context_switches"]
        self.exit_at = exit_at
        self.no_permission = no_permission
        self.intervals = 0
        self.closed = False

    def begin(self) -> None:
        self.intervals = 0

    def read(self, cpu_samples: Sequence[Sample] = ()) -> TaskSnapshot:
        self.intervals += 1
        n = self.intervals
        interval = max((s.interval for s in cpu_samples), default=1.0)
        tasks: list[TaskReading] = []
        for p in PROFILES:
            if p.comm == "gcc" and n > self.exit_at:
                if n <= self.exit_at + 2:  # gone: its row stays a little, marked exited
                    tasks.append(self._reading(p, n, interval, exited=True, counts={}))
                continue
            tasks.append(self._reading(p, n, interval, exited=p.comm == "gcc" and n == self.exit_at))
        if self.no_permission and self.mode == EXACT:
            tasks.append(NO_PERMISSION)
        tasks.sort(key=lambda r: -r.counts.get("task_clock", 0))
        notes: tuple[str, ...] = ()
        if self.mode == ESTIMATED:
            notes = ("est.: the processes shown explain 87% of the cores' busy time", "exact numbers: --backend perf")
        return TaskSnapshot(tuple(tasks), self._cgroups(tasks, interval), self.mode, notes, self._shares(tasks))

    def _reading(
        self, p: Profile, n: int, interval: float, exited: bool = False, counts: dict[str, int] | None = None
    ) -> TaskReading:
        wobble = 1.0 + 0.15 * math.sin(n / 5 + p.pid)  # slow, different per process
        if counts is None:
            counts = self._counts(
                p.util * wobble, p.ghz, p.ipc / wobble**0.5, p.mpki * wobble, p.branch_miss, p.threads, interval
            )
        estimate = self.mode == ESTIMATED
        multiplexed = {k: p.counted for k in ("llc_misses", "branches", "branch_misses")} if p.counted < 1 else {}
        threads = (
            tuple(
                TaskReading(
                    p.pid + i,
                    p.comm,
                    p.user,
                    1,
                    interval,
                    {k: v // min(p.threads, 3) for k, v in counts.items()},
                    1.0 if estimate else p.counted,
                    cpus=p.cpus[i % len(p.cpus) :][:1],
                    estimate=estimate,
                )
                for i in range(min(p.threads, 3))
            )
            if counts
            else ()
        )
        return TaskReading(
            p.pid, p.comm, p.user, p.threads, interval, counts, 1.0 if estimate else p.counted,
            {} if estimate else multiplexed, exited=exited, cgroup=p.cgroup, cpus=p.cpus if counts else (),
            estimate=estimate, start_time=1_700_000_000.0 + p.pid, thread_readings=threads,
        )  # fmt: skip

    def _counts(
        self, util: float, ghz: float, ipc: float, mpki: float, branch_miss: float, threads: int, interval: float
    ) -> dict[str, int]:
        task_clock = util * interval * 1e9
        cycles = task_clock * ghz
        instructions = cycles * ipc
        branches = instructions * 0.18
        counts = {
            "task_clock": round(task_clock),
            "context_switches": round(120 * threads * interval),
            "cycles": round(cycles),
            "instructions": round(instructions),
            "llc_misses": round(instructions * mpki / 1000),
            "branches": round(branches),
            "branch_misses": round(branches * branch_miss),
        }
        return {k: v for k, v in counts.items() if k in self.events}

    def _cgroups(self, tasks: list[TaskReading], interval: float) -> tuple[CgroupReading, ...]:
        """Every cgroup a process is in and their parents; a parent counts its children (as the kernel's do)."""
        paths: set[str] = set()
        for r in tasks:
            if r.cgroup and not r.exited:
                parts = r.cgroup.strip("/").split("/")
                paths.update("/" + "/".join(parts[:i]) for i in range(1, len(parts) + 1))
        out = []
        for path in sorted(paths):
            inside = [r for r in tasks if (r.cgroup == path or r.cgroup.startswith(path + "/")) and not r.exited]
            counts: dict[str, int] = {}
            for r in inside:
                for k, v in r.counts.items():
                    counts[k] = counts.get(k, 0) + v
            name = CGROUP_NAMES.get(path, path.rsplit("/", 1)[-1])
            denied = all(r.no_permission for r in inside)
            out.append(
                CgroupReading(path, name, interval, {} if denied else counts, 0.0 if denied else 1.0,
                              processes=len(inside), no_permission=denied, estimate=self.mode == ESTIMATED)
            )  # fmt: skip
        return tuple(out)

    @staticmethod
    def _shares(tasks: list[TaskReading]) -> dict[int, tuple[tuple[int, float], ...]]:
        """Per CPU, each process's share of its busy time (a process's time spread evenly on its CPUs)."""
        per_cpu: dict[int, dict[int, float]] = {}
        for r in tasks:
            clock = r.counts.get("task_clock", 0)
            for cpu in r.cpus:
                per_cpu.setdefault(cpu, {})[r.pid] = clock / len(r.cpus)
        shares = {}
        for cpu, times in per_cpu.items():
            busy = sum(times.values()) or 1.0
            shares[cpu] = tuple(sorted(((pid, t / busy) for pid, t in times.items()), key=lambda x: -x[1]))
        return shares

    def close(self) -> None:
        self.closed = True
