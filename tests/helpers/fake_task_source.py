"""A TaskCounterSource with known readings (pmutop.core.task_reading), for tests of what reads one: the batch
printers, the recorder, replay, diff and the exporter. No kernel counters: every number is made up here, so
the tests can say exactly what each record must hold."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pmutop.core.ring import SampleRing
from pmutop.core.sample import Sample
from pmutop.core.task_reading import ESTIMATED, EXACT, CgroupReading, TaskReading, TaskSnapshot

EVENTS = ["task_clock", "context_switches", "cycles", "instructions", "llc_misses"]


@dataclass(frozen=True)
class FakeProcess:
    pid: int
    comm: str
    user: str
    cgroup: str
    threads: int
    cpu_share: float  # of one CPU: task_clock = cpu_share × interval
    ipc: float
    ghz: float = 2.0
    mpki: float = 1.0
    exits_at: int | None = None  # the read at which it is read a last time (exited)
    no_permission: bool = False
    multiplexed: float = 1.0  # counted: < 1 scales cycles and instructions


PROCESSES = (
    FakeProcess(101, "nginx", "www-data", "/system.slice/nginx.service", 4, 0.5, 1.5),
    FakeProcess(102, "nginx", "www-data", "/system.slice/nginx.service", 4, 0.25, 1.5),
    FakeProcess(
        200, "postgres", "postgres", "/system.slice/postgresql.service", 8, 1.0, 0.8, mpki=6.0, multiplexed=0.5
    ),
    FakeProcess(300, "cc1", "dev", "/user.slice/user-1000.slice", 1, 1.0, 2.0, exits_at=2),
    FakeProcess(1, "systemd", "root", "/init.scope", 1, 0.0, 0.0, no_permission=True),
)
CGROUP_NAMES = {
    "/system.slice": "system.slice",
    "/system.slice/nginx.service": "nginx.service",
    "/system.slice/postgresql.service": "postgresql.service",
    "/user.slice": "user.slice",
    "/user.slice/user-1000.slice": "user-1000.slice",
}


def counts_of(p: FakeProcess, interval: float, scale: float = 1.0) -> dict[str, int]:
    clock = p.cpu_share * interval * 1e9
    cycles = clock * p.ghz
    instructions = cycles * p.ipc * scale
    return {
        "task_clock": round(clock),
        "context_switches": round(100 * interval * p.threads),
        "cycles": round(cycles),
        "instructions": round(instructions),
        "llc_misses": round(instructions * p.mpki / 1000),
    }


@dataclass
class FakeTaskSource:
    """Every read() is one interval of `interval` seconds; `scale` multiplies the instructions (a "B" run
    with another IPC); `mode` ESTIMATED marks every reading as the msr backend's estimate."""

    interval: float = 0.1
    scale: float = 1.0
    mode: str = EXACT
    processes: tuple[FakeProcess, ...] = PROCESSES
    events: list[str] = field(default_factory=lambda: list(EVENTS))
    reads: int = 0
    begun: bool = False
    closed: bool = False

    def begin(self) -> None:
        self.begun = True

    def read(self, cpu_samples: Sequence[Sample] = ()) -> TaskSnapshot:
        self.reads += 1
        n, estimate = self.reads, self.mode == ESTIMATED
        tasks = []
        for p in self.processes:
            if p.exits_at is not None and n > p.exits_at:
                continue
            counts = {} if p.no_permission else counts_of(p, self.interval, self.scale)
            shares = {"cycles": p.multiplexed, "instructions": p.multiplexed} if p.multiplexed < 1 else {}
            tasks.append(
                TaskReading(
                    pid=p.pid,
                    comm=p.comm,
                    user=p.user,
                    threads=p.threads,
                    interval=self.interval,
                    counts=counts,
                    counted=p.multiplexed,
                    estimated=shares,
                    exited=p.exits_at == n,
                    cgroup=p.cgroup,
                    cpus=(0, 1) if p.threads > 1 else (n % 2,),
                    no_permission=p.no_permission,
                    estimate=estimate and not p.no_permission,
                    start_time=1000.0 + p.pid,
                )
            )
        cgroups = []
        for path, name in CGROUP_NAMES.items():
            inside = [t for t in tasks if (t.cgroup + "/").startswith(path + "/") and not t.no_permission]
            total: dict[str, int] = {}
            for t in inside:
                for k, v in t.counts.items():
                    total[k] = total.get(k, 0) + v
            cgroups.append(
                CgroupReading(path, name, self.interval, total, 1.0, processes=len(inside), estimate=estimate)
            )
        notes = ("est.: the processes shown explain 90% of the cores' busy time; exact numbers: --backend perf",)
        shares_of_cpu0 = tuple((t.pid, 0.25) for t in tasks if 0 in t.cpus)
        return TaskSnapshot(
            tasks=tuple(tasks),
            cgroups=tuple(cgroups),
            mode=self.mode,
            notes=notes if estimate else (),
            cpu_shares={0: shares_of_cpu0},
        )

    def close(self) -> None:
        self.closed = True


class PushedFeed:
    """A SampleFeed of two CPUs whose samples the test pushes (no engine): one sample per CPU per push(n)."""

    def __init__(self) -> None:
        self.cpus = [0, 1]
        self.rings = {cpu: SampleRing(600) for cpu in self.cpus}
        self.interval = 0.05
        self.changed = threading.Condition()

    def push(self, n: int) -> None:
        with self.changed:
            for cpu in self.cpus:
                self.rings[cpu].push(Sample(cpu, n, n * 0.05, 0.05, None, None, counts={"instructions": 1000}))
            self.changed.notify_all()

    def keys(self, cpu: int) -> list[str]:
        return ["instructions"]

    def topdown_method(self, cpu: int) -> str | None:
        return None

    def elapsed(self) -> float:
        return 0.0

    def failures(self) -> dict[int, str]:
        return {}

    def wait_for_samples(
        self,
        counts: dict[int, int],
        timeout: float,
        on_wait: Callable[[], None] | None = None,
        stop: threading.Event | None = None,
    ) -> bool:
        with self.changed:
            return self.changed.wait_for(
                lambda: all(self.rings[c].count > n for c, n in counts.items()) or bool(stop and stop.is_set()),
                timeout=timeout,
            ) and not (stop and stop.is_set())

    def set_interval(self, seconds: float) -> None:
        pass

    def wake_waiters(self) -> None:
        with self.changed:
            self.changed.notify_all()
