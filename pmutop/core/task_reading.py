"""What per-process and per-cgroup counters give their readers for one interval: plain values, no kernel objects.

Shared by the probes that count (perf per task, perf per cgroup, the msr-backend estimate, the simulator), the
engine's task sampler, the live view's process and cgroup views, the batch printers, the recorder and the
exporter (a neutral leaf, as psutil keeps its shared types)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pmutop.core.sample import Sample

# How a snapshot's numbers were obtained (shown in the views' titles and in every record's "mode"-like field).
EXACT = "exact"  # the kernel's per-task / per-cgroup counters (perf backend)
ESTIMATED = "estimated"  # msr backend: each core's counts split by each process's share of its busy time
SIMULATED = "simulated"  # the simulator's process table (exact sums of what its cores ran)


@dataclass(frozen=True)
class TaskReading:
    """One counted process over one interval.

    `counts` are the kernel's deltas under the CPU records' names (task_clock in ns, context_switches, cycles,
    ...), already scaled by enabled/running; `counted` is running/enabled over the interval (1.0: a counter
    covered all of it); `estimated` names the events whose counts were scaled (multiplexed), with their share.
    `exited`: the process is gone and this is its last reading (or one of the few after, counts empty).
    `no_permission`: pmutop may not count it (perf_event_paranoid, another user's): counts empty.
    `estimate`: the counts are the process's share of its cores' counts (msr backend), not its own counters.
    `cpus`: the CPUs it ran on in the interval, where known. `start_time`: the process's start (psutil's
    create_time): with `pid`, its identity across PID reuse. `thread_readings`: per thread (pid = tid) where
    the source has them (one counter group per thread)."""

    pid: int
    comm: str
    user: str
    threads: int
    interval: float  # seconds since the previous reading (or since the counters were opened)
    counts: dict[str, int]
    counted: float
    estimated: dict[str, float] = field(default_factory=dict)
    exited: bool = False
    cgroup: str = ""  # its cgroup v2 path, "/system.slice/nginx.service"
    cpus: tuple[int, ...] = ()
    no_permission: bool = False
    estimate: bool = False
    start_time: float = 0.0
    thread_readings: tuple[TaskReading, ...] = ()


@dataclass(frozen=True)
class CgroupReading:
    """One counted cgroup over one interval. A cgroup's counters count its descendants too (the kernel's
    cgroup v2 perf events are hierarchical), so a parent's counts include its children's.

    `path` is relative to the cgroup root ("/system.slice/docker-3f2a….scope"); `name` is how users know it
    ("nginx.service", "docker web", "pod default/api-0"); `processes`: how many processes it and its descendants
    hold (cgroup.procs, recursive like the counts); other fields as in TaskReading."""

    path: str
    name: str
    interval: float
    counts: dict[str, int]
    counted: float
    estimated: dict[str, float] = field(default_factory=dict)
    processes: int = 0
    no_permission: bool = False
    estimate: bool = False
    removed: bool = False  # the cgroup was removed while counted: this is its last reading

    @property
    def parent(self) -> str | None:
        if self.path in ("", "/"):
            return None
        head = self.path.rsplit("/", 1)[0]
        return head or "/"


@dataclass(frozen=True)
class TaskSnapshot:
    """Everything the per-task counters give for one interval.

    `mode`: EXACT, ESTIMATED or SIMULATED. `notes`: one-line facts the views show once (e.g. "counters on 20
    of 32 processes: open files limit 1024", "est.: the processes shown explain 87% of the cores' busy time;
    exact numbers: --backend perf"). `cpu_shares`: per CPU, the processes that ran on it in the interval with
    their share of its busy time ((pid, share), largest first)."""

    tasks: tuple[TaskReading, ...] = ()
    cgroups: tuple[CgroupReading, ...] = ()
    mode: str = EXACT
    notes: tuple[str, ...] = ()
    cpu_shares: dict[int, tuple[tuple[int, float], ...]] = field(default_factory=dict)


class TaskCounterSource(Protocol):
    """Per-process (and per-cgroup) counters read once per interval (pmutop.probes.task_counters and friends)."""

    events: list[str]  # what every reading's counts may hold, in order

    def begin(self) -> None:
        """The first interval starts now (the CPU counters' first interval starts about now too)."""

    def read(self, cpu_samples: Sequence[Sample] = ()) -> TaskSnapshot:
        """This interval's readings; `cpu_samples` are the same interval's per-CPU samples (an estimating
        source splits them; exact sources ignore them)."""

    def close(self) -> None: ...


class TaskFeed(Protocol):
    """What the live view reads: the latest snapshot and a short history per process and cgroup, filled by
    the engine's task sampler once per interval (never by the UI thread)."""

    events: list[str]

    @property
    def seq(self) -> int:
        """Grows by one per snapshot: the view redraws only when it changed."""

    def latest(self) -> TaskSnapshot | None: ...

    def task_history(self, pid: int, start_time: float = 0.0) -> list[TaskReading]:
        """Oldest first, as far back as the sampler keeps (at least 60 intervals)."""

    def cgroup_history(self, path: str) -> list[CgroupReading]: ...

    def set_top(self, n: int) -> None:
        """How many processes to count (the view's `--top N`); takes effect next interval."""


# Starts counting what a live view ("processes", "cgroups") shows, in a run whose options did not ask for it:
# the feed (None: they could not start) and the lines to tell the user (why not, or the new counters' facts).
TaskStarter = Callable[[str], "tuple[TaskFeed | None, list[str]]"]
