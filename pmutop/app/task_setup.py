"""Which per-process and per-cgroup counters a run opens (--pid, --tasks, --cgroups, --cgroup, --top, -- COMMAND),
checked before anything is touched and opened after the backend is chosen."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field

from pmutop.app.console import say
from pmutop.backends.base import Backend
from pmutop.backends.perf import PerfBackend
from pmutop.core.errors import UsageError
from pmutop.core.sample import Sample
from pmutop.core.sysroot import Sysroot
from pmutop.core.task_reading import ESTIMATED, EXACT, SIMULATED, TaskCounterSource, TaskSnapshot
from pmutop.hw.platform import HostPlatform


@dataclass
class TaskPlan:
    """What the options ask for. `pids`: exactly these processes; `top`: the N busiest (the process view);
    `cgroups`: exactly these cgroup paths; `all_cgroups`: the cgroup view's tree; `command`: start and count it."""

    pids: list[int] = field(default_factory=list)
    top: int | None = None
    cgroups: list[str] = field(default_factory=list)
    all_cgroups: bool = False
    command: list[str] | None = None

    @property
    def wanted(self) -> bool:
        return bool(self.pids or self.top or self.cgroups or self.all_cgroups or self.command)


def check_task_options(args: argparse.Namespace) -> TaskPlan:
    """The processes and cgroups to count; bad combinations refused before anything is touched."""
    plan = TaskPlan(command=getattr(args, "command", None))
    pid_text, records = getattr(args, "pid", None), getattr(args, "records", None)
    if plan.command is not None:
        raise UsageError("-- COMMAND is not built yet")
    if getattr(args, "tasks", False):
        raise UsageError("--tasks is not built yet")
    _check_cgroup_options(args, plan)
    if records == "cgroup" and not (plan.cgroups or plan.all_cgroups):
        raise UsageError("--records cgroup needs --cgroups or --cgroup")
    if pid_text is None:
        if records == "task":
            raise UsageError("--records task needs --pid (the processes to count)")
        return plan
    if not args.batch:
        raise UsageError("--pid needs --batch (the live process view is still to come)")
    if getattr(args, "connect", None) or args.demo or args.backend == "sim" or args.record:
        raise UsageError("--pid counts this machine's processes live: not with --connect, --demo or --record")
    from pmutop.probes.task_counters import parse_pid_list

    plan.pids = parse_pid_list(pid_text)
    return plan


def _check_cgroup_options(args: argparse.Namespace, plan: TaskPlan) -> None:
    """--cgroup PATH (repeatable) and --cgroups: checked before anything is touched (a missing cgroup is a usage
    error naming it)."""
    plan.cgroups = list(getattr(args, "cgroup", None) or [])
    plan.all_cgroups = bool(getattr(args, "cgroups", False))
    if not (plan.cgroups or plan.all_cgroups):
        return
    option = "--cgroups" if plan.all_cgroups else "--cgroup"
    if not args.batch:
        raise UsageError(f"{option} needs --batch (the live cgroup view is still to come)")
    if getattr(args, "connect", None) or args.record:
        raise UsageError(f"{option} counts this machine's cgroups live: not with --connect or --record")
    if args.demo or args.backend == "sim":
        return  # the simulator's cgroups: see open_task_source
    from pmutop.probes.cgroup_counters import cgroup_root_or_refuse, check_paths

    sysroot = Sysroot(getattr(args, "sysroot", None) or "/")
    plan.cgroups = check_paths(sysroot, cgroup_root_or_refuse(sysroot, option), plan.cgroups)


def open_task_source(args: argparse.Namespace, plan: TaskPlan, backend: Backend) -> TaskCounterSource | None:
    """The counters the plan asks for (None: none): per process, per cgroup, or both merged. The caller closes it."""
    tasks = _open_tasks(args, plan, backend) if plan.pids else None
    try:
        cgroups = _open_cgroups(args, plan, backend) if plan.cgroups or plan.all_cgroups else None
    except BaseException:
        if tasks is not None:
            tasks.close()
        raise
    if tasks is not None and cgroups is not None:
        return CombinedSource(tasks, cgroups)
    return tasks or cgroups


def _open_tasks(args: argparse.Namespace, plan: TaskPlan, backend: Backend) -> TaskCounterSource:
    from pmutop.probes.task_counters import TaskCounters

    events = args.events
    if not isinstance(backend, PerfBackend):
        # Per-task hardware counters would take the counters the msr backend programs: software events only.
        say("--pid with the msr backend counts task-clock and context-switches only (--backend perf: all events)")
        events = []
    return TaskCounters(plan.pids, events, say=say)


def _open_cgroups(args: argparse.Namespace, plan: TaskPlan, backend: Backend) -> TaskCounterSource:
    platform = backend.platform
    if platform.simulated:
        # Hook for the simulator's cgroups (its process table grouped into services and containers).
        raise UsageError("--cgroups with --demo: coming")
    from pmutop.probes.cgroup_counters import CgroupCounters

    # The msr backend programs the PMU itself: per-cgroup hardware counters would fight it, so there the
    # hardware counts are estimated from the cores' (and said to be).
    estimate = not isinstance(backend, PerfBackend)
    if estimate:
        option = "--cgroups" if plan.all_cgroups else "--cgroup"
        say(
            f"{option} with the msr backend: task-clock and context-switches exact, hardware events est. "
            "(--backend perf: exact)"
        )
    return CgroupCounters(
        plan.cgroups,
        tree=plan.all_cgroups,
        top=args.top,
        requested_events=args.events,
        cpus=platform.online_cpus(),
        sysroot=platform.sysroot if isinstance(platform, HostPlatform) else None,
        estimate=estimate,
        say=say,
    )


class CombinedSource:
    """Per-process and per-cgroup counters read as one source: one snapshot with both."""

    def __init__(self, tasks: TaskCounterSource, cgroups: TaskCounterSource) -> None:
        self.tasks, self.cgroups = tasks, cgroups
        self.events = list(dict.fromkeys([*tasks.events, *cgroups.events]))

    def begin(self) -> None:
        self.tasks.begin()
        self.cgroups.begin()

    def read(self, cpu_samples: Sequence[Sample] = ()) -> TaskSnapshot:
        tasks, cgroups = self.tasks.read(cpu_samples), self.cgroups.read(cpu_samples)
        modes = {tasks.mode, cgroups.mode}
        mode = next((m for m in (SIMULATED, ESTIMATED) if m in modes), EXACT)
        return TaskSnapshot(
            tasks=tasks.tasks,
            cgroups=cgroups.cgroups,
            mode=mode,
            notes=tasks.notes + cgroups.notes,
            cpu_shares=tasks.cpu_shares,
        )

    def close(self) -> None:
        try:
            self.tasks.close()
        finally:
            self.cgroups.close()


def default_records(args: argparse.Namespace, plan: TaskPlan) -> str:
    """--records unset: JSON prints every kind; CSV and the table print the kind the options ask for."""
    if args.records:
        return str(args.records)
    if args.format == "json":
        return "all"
    if plan.pids or plan.top or plan.command:
        return "task"
    if plan.cgroups or plan.all_cgroups:
        return "cgroup"
    return "cpu"
