"""Which per-process and per-cgroup counters a run opens (--pid, --tasks, --cgroups, --cgroup, --top, -- COMMAND),
checked before anything is touched and opened after the backend is chosen."""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pmutop.app.console import say
from pmutop.backends.base import Backend
from pmutop.backends.perf import PerfBackend
from pmutop.backends.sim import SimBackend
from pmutop.core.errors import PmutopError, UsageError
from pmutop.core.feed import SampleFeed
from pmutop.core.sample import Sample
from pmutop.core.sysroot import Sysroot
from pmutop.core.task_reading import ESTIMATED, EXACT, SIMULATED, TaskCounterSource, TaskFeed, TaskSnapshot
from pmutop.hw.platform import HostPlatform
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
    command_path: str = ""  # the command's executable, found as a shell finds it

    @property
    def wanted(self) -> bool:
        return bool(self.pids or self.top or self.cgroups or self.all_cgroups or self.command)


def check_task_options(args: argparse.Namespace) -> TaskPlan:
    """The processes and cgroups to count; bad combinations refused before anything is touched."""
    plan = TaskPlan(command=getattr(args, "command", None))
    pid_text, records = getattr(args, "pid", None), getattr(args, "records", None)
    tasks = bool(getattr(args, "tasks", False))
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
    _check_cgroup_options(args, plan)
    if records == "cgroup" and not (plan.cgroups or plan.all_cgroups):
        raise UsageError("--records cgroup needs --cgroups or --cgroup")
    if pid_text is None and not tasks:
        if records == "task":
            raise UsageError("--records task needs --pid or --tasks (the processes to count)")
        return plan
    option = "--pid" if pid_text is not None else "--tasks"
    if getattr(args, "connect", None):
        raise UsageError(f"{option} counts this machine's processes: not with --connect")
    if pid_text is not None:
        from pmutop.probes.task_counters import parse_pid_list

        plan.pids = parse_pid_list(pid_text)
    else:
        plan.top = int(getattr(args, "top", 32) or 32)
    return plan


def _simulated_plan(args: argparse.Namespace, plan: TaskPlan) -> TaskPlan:
    """--demo: the simulated machine's processes and cgroups (pmutop.sim.process_counters)."""
    pid_text, records = getattr(args, "pid", None), getattr(args, "records", None)
    if pid_text is not None:
        from pmutop.probes.task_counters import parse_pid_list

        plan.pids = parse_pid_list(pid_text)
    elif getattr(args, "tasks", False):
        plan.top = getattr(args, "top", None) or 32
    plan.cgroups = _cgroup_texts(args)
    plan.all_cgroups = bool(getattr(args, "cgroups", False))
    if records == "task" and not (plan.pids or plan.top):
        raise UsageError("--records task needs --pid or --tasks (the processes to count)")
    if records == "cgroup" and not (plan.cgroups or plan.all_cgroups):
        raise UsageError("--records cgroup needs --cgroups or --cgroup")
    return plan


def _cgroup_texts(args: argparse.Namespace) -> list[str]:
    """The --cgroup values; an empty one is refused (it would silently mean the root cgroup)."""
    texts = [str(c) for c in getattr(args, "cgroup", None) or []]
    for text in texts:
        if not text.strip():
            raise UsageError(f"--cgroup {text!r}: expected a cgroup path, e.g. --cgroup system.slice/nginx.service")
    return texts


def _check_cgroup_options(args: argparse.Namespace, plan: TaskPlan) -> None:
    """--cgroup PATH (repeatable) and --cgroups: checked before anything is touched (a missing cgroup is a usage
    error naming it)."""
    plan.cgroups = _cgroup_texts(args)
    plan.all_cgroups = bool(getattr(args, "cgroups", False))
    if not (plan.cgroups or plan.all_cgroups):
        return
    option = "--cgroups" if plan.all_cgroups else "--cgroup"
    if getattr(args, "connect", None):
        raise UsageError(f"{option} counts this machine's cgroups live: not with --connect")
    from pmutop.probes.cgroup_counters import cgroup_root_or_refuse, check_paths

    sysroot = Sysroot(getattr(args, "sysroot", None) or "/")
    plan.cgroups = check_paths(sysroot, cgroup_root_or_refuse(sysroot, option), plan.cgroups)


def open_task_source(
    args: argparse.Namespace, plan: TaskPlan, backend: Backend, guard: ExitGuard | None = None
) -> TaskCounterSource | None:
    """The counters the plan asks for (None: none): per process, per cgroup, or both merged; `guard`: for
    -- COMMAND (it passes signals on). The caller closes it."""
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
    if plan.command:
        from pmutop.app.commands.measure_command import start_command

        assert guard is not None
        return start_command(args, plan.command, plan.command_path, guard, _task_events(args, backend, "-- COMMAND"))
    tasks = _open_tasks(args, plan, backend) if plan.pids or plan.top else None
    try:
        cgroups = _open_cgroups(args, plan, backend) if plan.cgroups or plan.all_cgroups else None
    except BaseException:
        if tasks is not None:
            tasks.close()
        raise
    if tasks is not None and cgroups is not None:
        return CombinedSource(tasks, cgroups)
    return tasks or cgroups


def _task_events(args: argparse.Namespace, backend: Backend, what: str) -> list[str] | None:
    """--events for per-task counters: with the msr backend none of the hardware ones (they would take the
    counters the msr backend programs): software events only."""
    if isinstance(backend, PerfBackend):
        return args.events
    say(f"{what} with the msr backend counts task-clock and context-switches only (--backend perf: all events)")
    return []


def _open_tasks(
    args: argparse.Namespace, plan: TaskPlan, backend: Backend, tell: Callable[[str], None] = say
) -> TaskCounterSource:
    """--pid: exactly those processes; --tasks: the top N by CPU (perf: exact; msr: an estimate from the
    cores' counts). `tell`: where its one-line facts go (stderr, or the live view once it runs)."""
    if plan.pids:
        from pmutop.probes.process_scan import ProcessScan
        from pmutop.probes.task_counters import TaskCounters

        # The live view shows where each process ran and who ran on each core: one /proc scan per interval.
        scan = None if args.batch else ProcessScan()
        return TaskCounters(plan.pids, _task_events(args, backend, "--pid"), say=say, scan=scan)
    assert plan.top is not None
    if isinstance(backend, PerfBackend):
        from pmutop.probes.top_tasks import TopTaskCounters

        return TopTaskCounters(plan.top, args.events, say=tell)
    from pmutop.pmu.events import DEFAULT_EVENTS
    from pmutop.probes.task_estimate import TaskEstimate

    chosen = backend.events
    keys = [e.key for e in chosen] if chosen is not None else [n.replace("-", "_") for n in DEFAULT_EVENTS]
    return TaskEstimate(plan.top, keys)


def _open_cgroups(
    args: argparse.Namespace, plan: TaskPlan, backend: Backend, tell: Callable[[str], None] = say
) -> TaskCounterSource:
    platform = backend.platform
    from pmutop.probes.cgroup_counters import CgroupCounters

    # The msr backend programs the PMU itself: per-cgroup hardware counters would fight it, so there the
    # hardware counts are estimated from the cores' (and said to be).
    estimate = not isinstance(backend, PerfBackend)
    if estimate:
        option = "--cgroups" if plan.all_cgroups else "--cgroup"
        tell(
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
        say=tell,
    )


class CombinedSource:
    """Per-process and per-cgroup counters read as one source: one snapshot with all of them. A part may be
    added while another thread reads (the live view's keys 4 and 5 start counting): it begins at once."""

    def __init__(self, *parts: TaskCounterSource) -> None:
        self.parts = list(parts)
        self.events: list[str] = []
        self._lock = threading.Lock()
        self._begun = False
        self._merge_events()

    def _merge_events(self) -> None:
        self.events = list(dict.fromkeys(e for part in self.parts for e in part.events))

    def set_top(self, n: int) -> None:
        """The process view's top N, for the parts that pick their processes."""
        for part in self.parts:
            set_top = getattr(part, "set_top", None)
            if callable(set_top):
                set_top(n)

    def add(self, part: TaskCounterSource) -> None:
        with self._lock:
            if self._begun:
                part.begin()
            self.parts.append(part)
            self._merge_events()

    def begin(self) -> None:
        with self._lock:
            self._begun = True
            for part in self.parts:
                part.begin()

    def read(self, cpu_samples: Sequence[Sample] = ()) -> TaskSnapshot:
        with self._lock:
            snapshots = [part.read(cpu_samples) for part in self.parts]
        if not snapshots:
            return TaskSnapshot(mode=EXACT)
        modes = {s.mode for s in snapshots}
        mode = next((m for m in (SIMULATED, ESTIMATED) if m in modes), EXACT)
        return TaskSnapshot(
            tasks=tuple(t for s in snapshots for t in s.tasks),
            cgroups=tuple(c for s in snapshots for c in s.cgroups),
            mode=mode,
            notes=tuple(dict.fromkeys(n for s in snapshots for n in s.notes)),  # a note both parts give, once
            cpu_shares=next((s.cpu_shares for s in snapshots if s.cpu_shares), {}),
        )

    def close(self) -> None:
        parts, self.parts = self.parts, []
        errors: list[BaseException] = []
        for part in parts:
            try:
                part.close()
            except BaseException as e:  # the others are closed all the same
                errors.append(e)
        if errors:
            raise errors[0]


class LiveTasks:
    """The live view's per-process and per-cgroup counters: those the options asked for, read from the start,
    and those keys 4 and 5 start while the view runs (the top processes, the cgroup tree): the options only
    choose the view to open on. One TaskSampler reads them all; `stop()` ends it and closes what it opened
    (`source`, the options' counters, is the caller's to close)."""

    def __init__(
        self,
        args: argparse.Namespace,
        plan: TaskPlan,
        backend: Backend,
        feed: SampleFeed,
        source: TaskCounterSource | None,
    ) -> None:
        from pmutop.engine.task_sampler import TaskSampler

        self.args, self.backend, self.feed = args, backend, feed
        self.counting = {
            "processes": bool(plan.pids or plan.top or plan.command),
            "cgroups": bool(plan.cgroups or plan.all_cgroups),
        }
        self._combined = CombinedSource(source) if source is not None else CombinedSource()
        self._opened: list[TaskCounterSource] = []
        self.sampler: TaskSampler | None = TaskSampler(self._combined, feed) if source is not None else None
        platform = backend.platform
        self.can_start = isinstance(backend, SimBackend) or (
            isinstance(platform, HostPlatform) and platform.sysroot.is_host
        )

    def start(self, view: str) -> tuple[TaskFeed | None, list[str]]:
        """Count what `view` ("processes", "cgroups") shows, from now, unless counted already: the feed (None:
        those counters could not start) and the lines to tell the user (why not, or facts of the new counters)."""
        from pmutop.engine.task_sampler import TaskSampler

        if view not in self.counting or self.counting[view]:
            return self.sampler, []
        lines: list[str] = []
        try:
            part = self._open(view, lines.append)
        except PmutopError as e:
            return None, [*lines, str(e)]
        self._opened.append(part)
        self.counting[view] = True
        self._combined.add(part)
        if self.sampler is None:
            self.sampler = TaskSampler(self._combined, self.feed)
            self.sampler.start()
        else:
            self.sampler.events = list(self._combined.events)
        return self.sampler, lines

    def _open(self, view: str, tell: Callable[[str], None]) -> TaskCounterSource:
        args, backend = self.args, self.backend
        top = int(getattr(args, "top", None) or 32)
        if isinstance(backend, SimBackend):
            from pmutop.sim.process_counters import SimTaskCounters

            return SimTaskCounters(
                backend.platform.machine,  # type: ignore[attr-defined]  # a SimBackend runs on a SimPlatform
                top=top if view == "processes" else None,
                all_cgroups=view == "cgroups",
                requested_events=args.events,
            )
        if view == "processes":
            return _open_tasks(args, TaskPlan(top=top), backend, tell)
        from pmutop.probes.cgroup_counters import cgroup_root_or_refuse

        cgroup_root_or_refuse(Sysroot(getattr(args, "sysroot", None) or "/"), "cgroup counters")
        return _open_cgroups(args, TaskPlan(all_cgroups=True), backend, tell)

    def stop(self) -> None:
        if self.sampler is not None:
            self.sampler.stop()
        for part in self._opened:
            part.close()
        self._opened = []


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
