"""`pmutop [options]`: the live view, --batch, `pmutop serve` (Prometheus), and --connect (remote serves)."""

from __future__ import annotations

import argparse

from pmutop.app.backend_factory import build_backend, request_from_args
from pmutop.app.commands.measure_command import command_interrupt, finish_command, release_command
from pmutop.app.console import NEEDS_TERMINAL, has_terminal, say, warn
from pmutop.app.discovery import discovered, stopped
from pmutop.app.dram_setup import open_dram
from pmutop.app.live_view import SharedTasks, run_feed_view, run_live_view, task_source
from pmutop.app.platform_setup import build_platform
from pmutop.app.session import MeasurementSession
from pmutop.app.task_setup import LiveTasks, TaskPlan, check_task_options, default_records, open_task_source
from pmutop.backends.base import Backend
from pmutop.backends.perf import PerfBackend
from pmutop.backends.run_facts import collect
from pmutop.core.cpulist import format_cpu_list, select_cpus
from pmutop.core.dram_reading import PackageFeed
from pmutop.core.errors import PmutopError, UsageError
from pmutop.core.own_cost import ProcessCost, final_line
from pmutop.core.run_description import RunInfo
from pmutop.core.task_reading import TaskCounterSource
from pmutop.engine.engine import Engine
from pmutop.hw.platform import Platform
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.safety.exit_guard import ExitGuard, signal_name
from pmutop.sinks.listen import parse_listen
from pmutop.sinks.recorder import Recorder, make_header
from pmutop.tui.config import Settings, config_path
from pmutop.tui.config import load as load_settings


def serve_until_stopped(
    engine: Engine,
    info: RunInfo,
    listen: str,
    guard: ExitGuard,
    tasks: TaskCounterSource | None = None,
    packages: PackageFeed | None = None,
) -> None:
    """The exporter's sink: serve /metrics until a signal asks to stop. `tasks`: the per-cgroup counters
    (`serve --cgroups/--cgroup`); only their cgroup readings are exported (never per-process series).
    `packages`: the DRAM bandwidth (the package sampler)."""
    from pmutop.sinks.exporter import Exporter

    host, port = parse_listen(listen)
    exporter = Exporter(engine, info, tasks=tasks, packages=packages)
    exporter.start(host, port)
    try:
        if info.simulated:
            say('SIMULATED PMU: every number served is synthetic (pmutop_info{simulated="true"})')
        say(f"serving http://{listen}/metrics ({info.backend} backend, cpu {format_cpu_list(engine.cpus)})")
        guard.stop_requested.wait()
    finally:
        exporter.stop()


def run_remote(args: argparse.Namespace, guard: ExitGuard) -> int:
    """The live view (or --batch) of remote `pmutop serve` exporters, optionally recorded: no PMU here, so no
    root and nothing to restore."""
    try:
        return _run_remote(args, guard)
    finally:
        # Nothing of this machine to put back: said at once, so a signal's way out does not wait for it.
        guard.restore()


def _run_remote(args: argparse.Namespace, guard: ExitGuard) -> int:
    if args.count is not None and not args.batch:
        raise UsageError("--count needs --batch")
    if args.timestamps and not args.batch:
        raise UsageError("--timestamps needs --batch")
    from pmutop.feeds.remote import RemoteFeed, normalise_url, remote_info

    for url in args.connect:
        normalise_url(url)  # a bad URL is a usage error before anything else
    if not args.batch and not has_terminal():
        raise UsageError(NEEDS_TERMINAL)
    settings, problem = load_settings() if not args.batch else (Settings(), None)
    interval = args.interval or settings.interval or 1.0
    found = discovered(lambda: RemoteFeed(args.connect, interval), guard)
    if found is None:
        return stopped(guard)
    feed = found
    for note in feed.notes:
        say(note)
    info = remote_info(feed)
    mode = "SIMULATED" if feed.simulated else "remote"
    recorder = None
    if args.record:
        recorder = Recorder(args.record, feed, make_header(feed, info, mode, feed.describe(), None), guard.request_stop)
    guard.on_stop(feed.wake_waiters)
    try:
        if args.batch:
            from pmutop.sinks.batch import run_batch

            if info.simulated:
                say("SIMULATED PMU: every number shown is synthetic (a remote `pmutop serve --demo`)")
            feed.start()
            if recorder is not None:
                recorder.start()
            try:
                run_batch(
                    feed,
                    args.format,
                    args.count,
                    mode,
                    warn=warn,
                    stop=guard.stop_requested,
                    timestamps=args.timestamps,
                    power_fields=feed.power_fields(),
                )
            finally:
                feed.stop()
            if guard.signum is None:  # a run the user interrupted ends in one line: why it stopped
                say(final_line())  # after the last interval: what pmutop itself cost
            code = 0
        else:
            from pmutop.tui.app import PmutopApp

            app = PmutopApp(
                feed,
                info,
                settings=settings,
                settings_path=config_path(),
                settings_problem=problem,
                own_cost=ProcessCost(),
            )

            def start() -> None:
                feed.start()
                if recorder is not None:
                    recorder.start()

            code = run_feed_view(app, start, feed.stop, guard)
    finally:
        error = recorder.close() if recorder is not None else None
    if error:
        raise PmutopError(error)
    if args.batch and guard.signum is not None:
        say(f"stopped by {signal_name(guard.signum)}")
        return 128 + guard.signum
    return code


def _check_modes(args: argparse.Namespace, serving: bool) -> None:
    """Option combinations that cannot work, refused before anything is touched."""
    if serving:
        parse_listen(args.listen)  # a bad address fails before the PMU is touched
        if args.batch:
            raise UsageError("serve has no --batch: it serves /metrics")


def start_view(args: argparse.Namespace, plan: TaskPlan) -> str | None:
    """The view --tasks, --pid or -- COMMAND (processes) and --cgroups or --cgroup (cgroups) open on."""
    if getattr(args, "tasks", False) or plan.pids or plan.command:
        return "processes"
    if getattr(args, "cgroups", False) or plan.cgroups:
        return "cgroups"
    return None


def run(args: argparse.Namespace, argv: list[str], guard: ExitGuard) -> int:
    if args.demo:
        args.backend = "sim"
    serving = getattr(args, "listen", None) is not None
    _check_modes(args, serving)
    fleet_options = ("prometheus", "match", "prometheus_ca", "bearer_token_file", "basic_auth_file", "since", "until")
    if any(getattr(args, dest, None) is not None for dest in fleet_options):
        from pmutop.app.commands.fleet import run_prometheus

        return run_prometheus(args, guard)  # before the task options: they count this machine
    plan = check_task_options(args)
    if getattr(args, "connect", None):
        return run_remote(args, guard)
    if args.count is not None and not args.batch:
        raise UsageError("--count needs --batch")
    if args.timestamps and not args.batch:
        raise UsageError("--timestamps needs --batch")
    if not args.batch and not serving and not has_terminal():
        raise UsageError(NEEDS_TERMINAL)
    platform = build_platform(args)
    cpus = select_cpus(args.cores, platform.online_cpus(), platform.possible_cpus())
    session = MeasurementSession(platform, cpus, guard)
    session.recover_leftovers()
    request = request_from_args(args)
    request.per_task = bool(plan.pids or plan.top or plan.command)  # worth a run without CPU-wide counters
    backend = build_backend(request, platform)
    task_counters = open_task_source(args, plan, backend, guard)
    try:
        session.dram = open_dram(platform, cpus, args.mem_peak)
        if getattr(args, "records", None) == "package" and session.dram.source is None:
            raise UsageError(f"--records package: no DRAM bandwidth source here ({session.dram.why})")
        code = _measure(args, argv, guard, platform, cpus, session, backend, serving, plan, task_counters)
        return finish_command(task_counters, code)  # -- COMMAND: its summary and status
    finally:
        if session.dram is not None:
            session.dram.close()
        if task_counters is not None:
            task_counters.close()


def _measure(
    args: argparse.Namespace,
    argv: list[str],
    guard: ExitGuard,
    platform: Platform,
    cpus: list[int],
    session: MeasurementSession,
    backend: Backend,
    serving: bool,
    plan: TaskPlan,
    task_counters: TaskCounterSource | None,
) -> int:
    mode = "SIMULATED" if platform.simulated else backend.name
    # The live view starts where the user left it (sort, columns, view, interval); --interval wins.
    settings = load_settings() if not (args.batch or serving) else (Settings(), None)
    interval = args.interval or settings[0].interval or 1.0
    power = PowerMonitor.for_platform(platform, cpus)
    # A batch table has no idle-state column: their files are not read every interval (CSV, JSON and a
    # recording carry the shares).
    power.read_idle_states = not (args.batch and args.format == "table" and not args.record)
    # Batch mode with perf reads every CPU from the main thread, as `perf stat -I` does: perf reads any CPU's
    # counters from anywhere, and no sampler threads means no wake-ups and no GIL hand-offs between them.
    unthreaded = args.batch and isinstance(backend, PerfBackend) and not args.record
    failed_cpus: dict[int, str] = {}
    tasks: SharedTasks | None = None  # the recording's and the live view's task lookup, when recording
    with session.open(backend, argv, interval=interval, power=power, threaded=not unthreaded) as engine:
        guard.on_stop(engine.wake_waiters)  # a signal ends the batch loop's wait at once (it does not poll)
        engine.start(guard.stop_requested)
        session.started()
        if session.dram is not None and not guard.stop_requested.is_set():
            # session.dram.sampler: the live view's and the sinks' packages; batch reads it in its own loop, so
            # each interval's records, and a recording's, pair the reading with exactly that interval.
            session.dram.start(engine, own_thread=not args.batch)
        if not guard.stop_requested.is_set():
            release_command(task_counters)  # -- COMMAND runs from now on
        info = collect(platform, backend, cpus)
        recorder: Recorder | None = None
        if args.record and not guard.stop_requested.is_set():
            task_events = task_counters.events if task_counters is not None else None
            dram = session.dram.sampler if session.dram is not None else None
            header = make_header(
                engine, info, mode, backend.describe(), backend.events, task_events=task_events, packages=dram
            )
            # The recording keeps each CPU's top task as the live view shows it: one lookup per interval for both.
            tasks = SharedTasks(task_source(platform, cpus), engine)
            # A recording that cannot be written whole stops the run: the user learns it now, not at the end.
            limit = args.count if args.batch else None  # the recording holds the intervals the run printed
            recorder = Recorder(args.record, engine, header, on_failure=guard.request_stop, tasks=tasks, limit=limit)
            session.record_to(recorder)
            recorder.start()
            if dram is not None:
                dram.add_listener(recorder.record_packages)  # each DRAM reading, after its interval's samples
        if guard.stop_requested.is_set():
            pass
        elif serving:
            for notice in backend.notices:
                say(notice)
            dram = session.dram.sampler if session.dram is not None else None
            serve_until_stopped(engine, collect(platform, backend, cpus), args.listen, guard, task_counters, dram)
            failed_cpus = engine.failures()
        elif args.batch:
            from pmutop.sinks.batch import run_batch

            if platform.simulated:
                say("SIMULATED PMU: every number shown is synthetic")
            for notice in backend.notices:  # the live view shows these in its header instead
                say(notice)
            failed_cpus = run_batch(
                engine,
                args.format,
                args.count,
                mode,
                warn=warn,
                stop=guard.stop_requested,
                timestamps=args.timestamps,
                pace=(lambda: engine.tick_on_schedule(guard.stop_requested)) if unthreaded else None,
                power_fields=power.measured_fields(),
                tasks=task_counters,
                records=default_records(args, plan),
                on_tasks=recorder.record_tasks if recorder is not None else None,
                packages=session.dram.sampler if session.dram is not None else None,
            )
            if guard.signum is None:  # a run the user interrupted ends in one line: why it stopped
                say(final_line())  # after the last interval: what pmutop itself cost
        else:
            # Per-process counters are read in their own thread, just after each interval's CPU samples; keys 4
            # and 5 start them in a run without --tasks or --cgroups.
            live = LiveTasks(args, plan, backend, engine, task_counters)
            if live.sampler is not None:
                if recorder is not None:
                    live.sampler.add_listener(recorder.record_tasks)  # the recording keeps what the views show
                live.sampler.start()
            try:
                run_live_view(
                    engine,
                    info,
                    platform,
                    cpus,
                    guard,
                    settings,
                    tasks,
                    live.sampler,
                    start_view(args, plan),
                    session.dram,
                    command_interrupt(task_counters),
                    live.start if live.can_start else None,
                )
            finally:
                live.stop()
            failed_cpus = engine.failures()
            for cpu, why in failed_cpus.items():
                warn(f"cpu {cpu} dropped: {why}")
    if tasks is not None:
        tasks.close()  # the /proc files its scan keeps open
    if guard.failure:
        raise PmutopError(guard.failure)
    if session.recording_error:
        if not session.result.failures:
            raise PmutopError(session.recording_error)
        say(session.recording_error)  # and the exit status says what could not be put back (4)
    code = guard.exit_code(session.result, 1 if failed_cpus else 0)
    if guard.signum is not None:
        say(f"stopped by {signal_name(guard.signum)}")
    elif failed_cpus and code == 1:
        say(f"cpu {format_cpu_list(sorted(failed_cpus))} failed during the run (see above)")
    return code
