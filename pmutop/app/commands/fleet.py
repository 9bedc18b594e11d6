"""`pmutop --prometheus URL`: the live view, --batch and --record over every pmutop instance a Prometheus
server scrapes (pmutop.feeds.prometheus); --since/--until print a past window from the server's history."""

from __future__ import annotations

import argparse
import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from pmutop.app.console import NEEDS_TERMINAL, has_terminal, say, warn
from pmutop.app.discovery import discovered, stopped
from pmutop.app.live_view import run_feed_view
from pmutop.core.errors import PmutopError, UsageError
from pmutop.safety.exit_guard import ExitGuard, signal_name
from pmutop.sinks.recorder import Recorder, make_header
from pmutop.tui.config import Settings, config_path
from pmutop.tui.config import load as load_settings

if TYPE_CHECKING:
    from pmutop.feeds.promql import Server


# Options that measure this machine (or another source): none goes with --prometheus. (dest, its default)
_THIS_MACHINE = {
    "connect": None,
    "demo": False,
    "pid": None,
    "tasks": False,
    "cgroups": False,
    "cgroup": None,
    "cores": None,
    "events": None,
    "read": None,
    "user_only": False,
    "kernel_only": False,
    "perfmon_dir": None,
    "topdown": None,
    "force": False,
    "keep_nmi_watchdog": False,
    "mem_peak": None,
}
MANY_ROWS = 1_000_000  # a past window longer than this many rows is said before it prints
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def _option(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def check_fleet_options(args: argparse.Namespace) -> None:
    """Refuse, in one line, what cannot go with --prometheus (and its own options without it)."""
    own = ("match", "prometheus_ca", "bearer_token_file", "basic_auth_file", "since", "until")
    if not getattr(args, "prometheus", None):
        for dest in own:
            if getattr(args, dest, None) is not None:
                raise UsageError(f"{_option(dest)} needs --prometheus URL")
        return
    for dest, default in _THIS_MACHINE.items():
        if getattr(args, dest, default) not in (default, [], ()):
            raise UsageError(f"--prometheus reads the fleet's counters from Prometheus: not with {_option(dest)}")
    if getattr(args, "backend", "auto") != "auto":
        raise UsageError("--prometheus reads the fleet's counters from Prometheus: not with --backend")
    if getattr(args, "sysroot", "/") not in ("/", None):
        raise UsageError("--prometheus reads the fleet's counters from Prometheus: not with --sysroot")
    if getattr(args, "records", None) in ("task", "cgroup"):
        raise UsageError(f"--records {args.records}: Prometheus has per-CPU counters of the fleet only")
    if args.count is not None and not args.batch:
        raise UsageError("--count needs --batch")
    if args.timestamps and not args.batch:
        raise UsageError("--timestamps needs --batch")
    if (args.since or args.until) and not args.batch:
        raise UsageError("--since/--until print a past window: they need --batch")
    if args.until and not args.since:
        raise UsageError("--until needs --since (the window's start)")


def parse_when(text: str, option: str, now: float) -> float:
    """An RFC 3339 time (2024-05-01T10:00:00Z) or a duration ago (90s, 10m, 1h30m, 2d) -> Unix time."""
    if re.fullmatch(r"(\d+(\.\d+)?(ms|s|m|h|d|w))+", text.strip()):
        seconds = sum(float(n) * _UNITS[u] for n, _, u in re.findall(r"(\d+(\.\d+)?)(ms|s|m|h|d|w)", text))
        return now - seconds
    try:
        when = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise UsageError(f"{option} {text!r}: expected a time (2024-05-01T10:00:00Z) or a duration ago (10m)") from None
    if when.tzinfo is None:
        raise UsageError(f"{option} {text!r}: say the time zone (Z for UTC, or +02:00)")
    return when.timestamp()


def run_prometheus(args: argparse.Namespace, guard: ExitGuard) -> int:
    """The fleet feed into the live view, batch (live or a past window) and the recorder. No PMU here."""
    try:
        return _run_prometheus(args, guard)
    finally:
        # Nothing of this machine to put back: said at once, so a signal's way out does not wait for it.
        guard.restore()


def _run_prometheus(args: argparse.Namespace, guard: ExitGuard) -> int:
    check_fleet_options(args)
    from pmutop.feeds.prometheus import PrometheusFeed
    from pmutop.feeds.promql import match_selector, parse_server

    server = parse_server(args.prometheus, args.prometheus_ca, args.bearer_token_file, args.basic_auth_file)
    match = match_selector(args.match)
    now = time.time()
    since = parse_when(args.since, "--since", now) if args.since else None
    until = parse_when(args.until, "--until", now) if args.until else now
    if since is not None and since >= until:
        raise UsageError("--since must be before --until")
    if not args.batch and not has_terminal():
        raise UsageError(NEEDS_TERMINAL)
    settings, problem = load_settings() if not args.batch else (Settings(), None)
    interval = args.interval or settings.interval or 1.0
    notices = warn if args.batch else None  # the live view shows them in its banner (LostHosts)
    if not args.batch and not args.record:
        return _host_view(server, interval, match, settings, problem, guard)
    at = until if since is not None else None
    found = discovered(lambda: PrometheusFeed(server, interval, match, on_notice=notices, at=at), guard)
    if found is None:
        return stopped(guard)
    feed = found
    recorder = None
    try:
        for note in feed.notes:
            say(note)
        info = feed.run_info()
        mode = "SIMULATED" if feed.simulated else "prometheus"
        if since is not None:
            since = _window_start(feed, since, until, args.count)
            feed.wall0 = since
        if args.record:
            start = since if since is not None else None
            header = make_header(feed, info, mode, feed.describe(), None, start=start)
            recorder = Recorder(args.record, feed, header, guard.request_stop)
        guard.on_stop(feed.wake_waiters)
        if args.batch and info.simulated:
            say("SIMULATED PMU: every number shown is synthetic (pmutop serve --demo instances)")
        if since is not None:
            code = _print_window(args, feed, mode, since, until, recorder)
        elif args.batch:
            code = _live_batch(args, feed, mode, recorder, guard)
        else:
            from pmutop.tui.app import PmutopApp

            feed.prefill()  # the plots full at once (the rings hold the last intervals)
            app = PmutopApp(feed, info, settings=settings, settings_path=config_path(), settings_problem=problem)

            def start_feed() -> None:
                feed.start()
                if recorder is not None:
                    recorder.start()

            code = run_feed_view(app, start_feed, feed.stop, guard)
    finally:
        feed.stop()
        error = recorder.close() if recorder is not None else None
    if error:
        raise PmutopError(error)
    if args.batch and guard.signum is not None:
        say(f"stopped by {signal_name(guard.signum)}")
        return 128 + guard.signum
    return code


def _host_view(
    server: Server, interval: float, match: str, settings: Settings, problem: str | None, guard: ExitGuard
) -> int:
    """The live view over the fleet: one row per host from per-host queries (pmutop.feeds.fleet); a host's
    CPUs only when its per-core table is open. (--record keeps the per-CPU feed: a recording is per CPU.)"""
    from pmutop.feeds.fleet import FleetFeed
    from pmutop.tui.fleet_app import FleetApp

    found = discovered(lambda: FleetFeed(server, interval, match), guard)
    if found is None:
        return stopped(guard)
    feed = found
    try:
        for note in feed.notes:
            say(note)
        feed.prefill()  # the plots and the heatmap full at once
        app = FleetApp(feed, feed.run_info(), settings=settings, settings_path=config_path(), settings_problem=problem)
        return run_feed_view(app, feed.start, feed.stop, guard)
    finally:
        feed.stop()


def _live_batch(args: argparse.Namespace, feed: object, mode: str, recorder: Recorder | None, guard: ExitGuard) -> int:
    from pmutop.feeds.prometheus import PrometheusFeed
    from pmutop.sinks.batch import run_batch

    assert isinstance(feed, PrometheusFeed)
    feed.start()
    if recorder is not None:
        recorder.start()
    run_batch(
        feed,
        args.format,
        args.count,
        mode,
        warn=warn,
        stop=guard.stop_requested,
        timestamps=args.timestamps,
        hosts=feed.hosts_of,
        power_fields=feed.power_fields(),
    )
    return 0


def _window_start(feed: object, since: float, until: float, count: int | None) -> float:
    """Where a past window starts: --since, or the server's first sample of the instances when that is later
    (said on stderr; the rows before it would be empty). A window of more than MANY_ROWS rows is said first."""
    from pmutop.feeds.prometheus import PrometheusFeed
    from pmutop.feeds.promql import PromError

    assert isinstance(feed, PrometheusFeed)
    try:
        first = feed.first_sample(since, until)
    except PromError as e:
        raise PmutopError(str(e)) from None
    if first is not None and first > since + feed.step:
        # The first round whose rate window holds the first sample and the next scrapes.
        since = min(until - feed.step, first + feed.window - feed.step)
        when = datetime.fromtimestamp(first, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
        warn(f"--since: the server's first sample of these instances is at {when}: the window starts there")
    intervals = int((until - since) / feed.step + 1e-6)
    if count is not None:
        intervals = min(intervals, count)
    rows = intervals * len(feed.cpus)
    if rows > MANY_ROWS:
        warn(
            f"--since: this window is {rows:,} rows ({intervals:,} intervals x {len(feed.cpus):,} CPUs), more than a "
            "million: --count, a larger --interval, a later --since or --match print fewer"
        )
    return since


def _print_window(
    args: argparse.Namespace, feed: object, mode: str, since: float, until: float, recorder: Recorder | None
) -> int:
    from pmutop.feeds.prometheus import PrometheusFeed
    from pmutop.feeds.promql import PromError
    from pmutop.sinks.batch_window import print_rounds

    assert isinstance(feed, PrometheusFeed)
    first = feed.hosts[0]
    try:
        print_rounds(
            feed.history(since + feed.step, until),
            args.format,
            first.keys,
            mode,
            tma=any(feed.topdown_method(cpu) for cpu in feed.cpus),
            hosts=feed.hosts_of,
            wall0=since if args.timestamps else None,
            count=args.count,
            warn=warn,
            after_round=recorder.drain if recorder is not None else None,
        )
    except PromError as e:
        raise PmutopError(str(e)) from None
    return 0
