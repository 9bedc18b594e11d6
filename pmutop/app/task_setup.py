"""Which per-process and per-cgroup counters a run opens (--pid, --tasks, --cgroups, --cgroup, --top, -- COMMAND),
checked before anything is touched and opened after the backend is chosen."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from pmutop.app.console import say
from pmutop.backends.base import Backend
from pmutop.backends.perf import PerfBackend
from pmutop.backends.sim import SimBackend
from pmutop.core.errors import UsageError
from pmutop.core.task_reading import TaskCounterSource
from pmutop.safety.exit_guard import ExitGuard


@dataclass
class TaskPlan:
    """What the options ask for. `pids`: exactly these processes; `top`: the N busiest (the process view);
    `cgroups`: exactly these cgroup paths; `all_cgroups`: the cgroup view's tree; `command`: start and count it."""

    pids: list[int] = field(default_factory=list)
    top: int | None = None
    cgroups: list[str] = field(default_factory=list)
    all_cgroups: bool = False
    command: list[str] | None = None
    command_path: str = ""  # the executable the command runs, found as a shell finds it

    @property
    def wanted(self) -> bool:
        return bool(self.pids or self.top or self.cgroups or self.all_cgroups or self.command)


def check_task_options(args: argparse.Namespace) -> TaskPlan:
    """The processes and cgroups to count; bad combinations refused before anything is touched."""
    plan = TaskPlan(command=getattr(args, "command", None))
    pid_text, records = getattr(args, "pid", None), getattr(args, "records", None)
    if plan.command is not None:
        from pmutop.app.commands.measure_command import check_command

        plan.command_path = check_command(args, plan.command)
        if args.backend == "auto":
            args.backend = "perf"  # the command is counted exactly with per-task perf counters: perf everywhere
        if not args.batch:
            args.tasks = True  # the live view opens on the process view
        return plan
    if args.demo or args.backend == "sim":
        return _simulated_plan(args, plan)
    if getattr(args, "tasks", False) or getattr(args, "cgroups", False) or getattr(args, "cgroup", None):
        raise UsageError("--tasks, --cgroups and --cgroup are not built yet")
    if pid_text is None:
        if records == "task":
            raise UsageError("--records task needs --pid (the processes to count)")
        if records == "cgroup":
            raise UsageError("--records cgroup needs --cgroups or --cgroup")
        return plan
    if not args.batch:
        raise UsageError("--pid needs --batch (the live process view is still to come)")
    if getattr(args, "connect", None) or args.demo or args.backend == "sim" or args.record:
        raise UsageError("--pid counts this machine's processes live: not with --connect, --demo or --record")
    from pmutop.probes.task_counters import parse_pid_list

    plan.pids = parse_pid_list(pid_text)
    return plan


def _simulated_plan(args: argparse.Namespace, plan: TaskPlan) -> TaskPlan:
    """--demo: the simulated machine's processes and cgroups (pmutop.sim.process_counters)."""
    pid_text, records = getattr(args, "pid", None), getattr(args, "records", None)
    if pid_text is not None:
        from pmutop.probes.task_counters import parse_pid_list

        plan.pids = parse_pid_list(pid_text)
    elif getattr(args, "tasks", False):
        plan.top = getattr(args, "top", None) or 32
    plan.cgroups = [str(c) for c in getattr(args, "cgroup", None) or []]
    plan.all_cgroups = bool(getattr(args, "cgroups", False))
    if records == "task" and not (plan.pids or plan.top):
        raise UsageError("--records task needs --pid or --tasks (the processes to count)")
    if records == "cgroup" and not (plan.cgroups or plan.all_cgroups):
        raise UsageError("--records cgroup needs --cgroups or --cgroup")
    if plan.wanted and args.record:
        raise UsageError("--pid, --tasks, --cgroups and --cgroup cannot be recorded yet")
    return plan


def open_task_source(
    args: argparse.Namespace, plan: TaskPlan, backend: Backend, guard: ExitGuard | None = None
) -> TaskCounterSource | None:
    """The counters the plan asks for (None: none); `guard`: for -- COMMAND (it passes signals on). The caller
    closes it."""
    if isinstance(backend, SimBackend) and plan.wanted:
        from pmutop.sim.process_counters import SimTaskCounters

        return SimTaskCounters(
            backend.platform.machine,  # type: ignore[attr-defined]  # a SimBackend runs on a SimPlatform
            pids=plan.pids,
            top=plan.top,
            cgroups=plan.cgroups,
            all_cgroups=plan.all_cgroups,
            requested_events=args.events,
        )
    if not plan.pids and not plan.command:
        return None
    from pmutop.probes.task_counters import TaskCounters

    events = args.events
    if not isinstance(backend, PerfBackend):
        # Per-task hardware counters would take the counters the msr backend programs: software events only.
        what = "-- COMMAND" if plan.command else "--pid"
        say(f"{what} with the msr backend counts task-clock and context-switches only (--backend perf: all events)")
        events = []
    if plan.command:
        from pmutop.app.commands.measure_command import start_command

        assert guard is not None
        return start_command(args, plan.command, plan.command_path, guard, events)
    return TaskCounters(plan.pids, events, say=say)


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
