"""Which per-process and per-cgroup counters a run opens (--pid, --tasks, --cgroups, --cgroup, --top, -- COMMAND),
checked before anything is touched and opened after the backend is chosen."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from pmutop.app.console import say
from pmutop.backends.base import Backend
from pmutop.backends.perf import PerfBackend
from pmutop.core.errors import UsageError
from pmutop.core.task_reading import TaskCounterSource


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
    tasks = bool(getattr(args, "tasks", False))
    if plan.command is not None:
        raise UsageError("-- COMMAND is not built yet")
    if getattr(args, "cgroups", False) or getattr(args, "cgroup", None):
        raise UsageError("--cgroups and --cgroup are not built yet")
    if pid_text is None and not tasks:
        if records == "task":
            raise UsageError("--records task needs --pid or --tasks (the processes to count)")
        if records == "cgroup":
            raise UsageError("--records cgroup needs --cgroups or --cgroup")
        return plan
    option = "--pid" if pid_text is not None else "--tasks"
    if getattr(args, "connect", None):
        raise UsageError(f"{option} counts this machine's processes: not with --connect")
    if args.demo or args.backend == "sim":
        raise UsageError(f"{option} with the simulated PMU is not built yet")
    if args.record:
        raise UsageError(f"{option} is not recorded yet: not with --record")
    if pid_text is not None:
        from pmutop.probes.task_counters import parse_pid_list

        plan.pids = parse_pid_list(pid_text)
    else:
        plan.top = int(getattr(args, "top", 32) or 32)
    return plan


def open_task_source(args: argparse.Namespace, plan: TaskPlan, backend: Backend) -> TaskCounterSource | None:
    """The counters the plan asks for (None: none). The caller closes it. --pid counts exactly those
    processes; --tasks the top N by CPU (perf: exact; msr: an estimate from the cores' counts)."""
    if backend.simulated:
        return None  # the simulator's process table is its own source
    exact = isinstance(backend, PerfBackend)
    if plan.pids:
        from pmutop.probes.process_scan import ProcessScan
        from pmutop.probes.task_counters import TaskCounters

        events = args.events
        if not exact:
            # Per-task hardware counters would take the counters the msr backend programs: software events only.
            say("--pid with the msr backend counts task-clock and context-switches only (--backend perf: all events)")
            events = []
        # The live view shows where each process ran and who ran on each core: one /proc scan per interval.
        scan = None if args.batch else ProcessScan()
        return TaskCounters(plan.pids, events, say=say, scan=scan)
    if plan.top:
        if exact:
            from pmutop.probes.top_tasks import TopTaskCounters

            return TopTaskCounters(plan.top, args.events, say=say)
        from pmutop.pmu.events import DEFAULT_EVENTS
        from pmutop.probes.task_estimate import TaskEstimate

        chosen = backend.events
        keys = [e.key for e in chosen] if chosen is not None else [n.replace("-", "_") for n in DEFAULT_EVENTS]
        return TaskEstimate(plan.top, keys)
    return None


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
