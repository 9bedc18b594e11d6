"""`pmutop replay FILE`: a recording in the live view, or converted with --batch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pmutop.app.console import NEEDS_TERMINAL, has_terminal, say, warn
from pmutop.app.live_view import run_feed_view
from pmutop.app.options import replay_parser
from pmutop.core.errors import UsageError
from pmutop.safety.exit_guard import ExitGuard

if TYPE_CHECKING:
    from pmutop.feeds.replay import ReplayFeed
    from pmutop.recording.reader import Recording
    from pmutop.tui.replay_controls import ReplayApp


def run_replay(argv: list[str], guard: ExitGuard) -> int:
    from pmutop.recording.reader import RecordingError, read_recording
    from pmutop.sinks.batch_replay import check_records, replay_batch

    args = replay_parser().parse_args(argv)
    if not args.batch:
        if args.count is not None:
            raise UsageError("--count needs --batch")
        if args.timestamps:
            raise UsageError("--timestamps needs --batch")
        if args.records:
            raise UsageError("--records needs --batch")
        if not has_terminal():
            raise UsageError(NEEDS_TERMINAL)
    rec = read_recording(args.file)
    # Both modes alike: nothing to show is the recording's problem (status 1, like a damaged one), said in one
    # line; an empty table (a CSV header alone, exit 0) would let a script carry on as if the run were there.
    if not rec.samples:  # reads up to the first sample only
        raise RecordingError(f"{args.file}: the recording holds no samples (it was stopped before its first interval)")
    if args.batch:
        check_records(rec, args.records)
        if rec.header.mode == "SIMULATED":
            say("SIMULATED PMU: every number shown is synthetic (a recording of the simulated PMU)")
        replay_batch(rec, args.format, count=args.count, timestamps=args.timestamps, warn=warn, records=args.records)
        # Known without reading further only for a plain file or one read to its end (the live view's status
        # line says it once its index reaches the end).
        if rec.truncated_if_known:
            warn(f"{args.file}: the last line was cut short (the recording was stopped abruptly); skipped")
        return 0
    app, feed = replay_app(rec, args.speed)
    return run_feed_view(app, feed.start, feed.close, guard)


def replay_app(rec: Recording, speed: str) -> tuple[ReplayApp, ReplayFeed]:
    """The live view over a recording: its CPUs, the top tasks recorded with the intervals, and the process
    and cgroup views' snapshots and the DRAM bandwidth where it has them."""
    from pmutop.feeds.replay import ReplayFeed
    from pmutop.tui.replay_controls import ReplayApp

    feed = ReplayFeed(rec, speed)
    app = ReplayApp(feed, rec.header.run_info(), tasks=feed, task_feed=feed.task_feed, package_feed=feed.package_feed)
    return app, feed
