"""Command line: `pmutop [options]` (live view or --batch), `pmutop info`, `pmutop events`, `pmutop restore`.

Every failure ends in one line on stderr and a non-zero status: 2 for bad input, 3 when the PMU is
in use by someone else, 4 when something could not be put back, 5 when `pmutop selftest` finds no usable
PMU, 1 for anything else (and a failed self-test check), 128+N when stopped by signal N.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from pmutop import __version__
from pmutop.backends.base import LONGEST_INTERVAL_S, Backend, EventResolver
from pmutop.backends.msr.backend import MsrBackend
from pmutop.backends.perf import PerfBackend
from pmutop.backends.run_facts import collect
from pmutop.backends.sim import SimBackend
from pmutop.core.cpulist import format_cpu_list, select_cpus
from pmutop.core.errors import HardwareError, PmuInUseError, PmutopError, UsageError
from pmutop.core.run_description import RunInfo
from pmutop.core.sysroot import Sysroot
from pmutop.core.undo import RestoreResult, UndoLog
from pmutop.engine.engine import Engine
from pmutop.hw.platform import HostPlatform, Platform
from pmutop.pmu.events import parse_events
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.probes.tasks import NoTasks, PsutilTasks, SimTasks, TaskSource
from pmutop.safety.exit_guard import EXIT_NOT_RESTORED, ExitGuard, signal_name
from pmutop.safety.state_files import RunState, StateDir, recover_dead_runs
from pmutop.sinks.exporter import DEFAULT_LISTEN, parse_listen
from pmutop.sinks.recorder import Recorder, make_header
from pmutop.tui.config import Settings, config_path
from pmutop.tui.config import load as load_settings

PROG = "pmutop"
COMMANDS = ("info", "events", "restore", "selftest", "serve", "replay", "diff")
MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = LONGEST_INTERVAL_S  # the narrow-counter reads are planned for it
REPORT_HINT = "this is a bug in pmutop: please report it to the pmutop issue tracker with the output of PMUTOP_DEBUG=1"


def say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit status 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"must be {MIN_INTERVAL_S:g} .. {MAX_INTERVAL_S:g} seconds (got {text})")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {text})")
    return value


def _bounded_int(lo: int, hi: int):
    def parse(text: str) -> int:
        value = _positive_int(text) if lo >= 1 else int(text, 10)
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"must be {lo}..{hi} (got {text})")
        return value

    return parse


def run_parser(serve: bool = False) -> OneLineParser:
    p = OneLineParser(
        prog=f"{PROG} serve" if serve else PROG,
        description="Serve the counters as Prometheus metrics on /metrics (no UI)."
        if serve
        else "Live per-core hardware performance counters: IPC, utilisation, GHz, LLC misses.",
        epilog="Commands: `pmutop info [--sysroot DIR] [--json]` describes the PMU and which backend would run; "
        "`pmutop events [--search WORD] [--json] [--download]` lists the events this CPU can count; "
        "`pmutop restore [--sysroot DIR]` puts back what a killed pmutop left programmed; "
        "`pmutop selftest [--demo] [--cores LIST]` checks the counters against known workloads; "
        "`pmutop serve [--listen HOST:PORT]` serves the counters to Prometheus; "
        "`pmutop replay FILE` and `pmutop diff A B` show and compare --record recordings.",
    )
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    if serve:
        p.add_argument(
            "--listen",
            metavar="HOST:PORT",
            default=DEFAULT_LISTEN,
            help=f"where /metrics is served (default {DEFAULT_LISTEN}: this machine only; 0.0.0.0:PORT for all)",
        )
    else:
        p.add_argument(
            "--connect",
            action="append",
            metavar="URL",
            help="show a remote `pmutop serve` (http://HOST:PORT) instead of this machine; repeat for several hosts",
        )
    p.add_argument("--cores", metavar="LIST", help="CPUs to monitor: 0-3, 0,2,4-7 or all (default: all online)")
    p.add_argument(
        "--interval",
        type=_interval,
        default=None,
        metavar="SECONDS",
        help=f"sampling interval, {MIN_INTERVAL_S:g} .. {MAX_INTERVAL_S:g} (default 1.0, or the live view's last)",
    )
    p.add_argument(
        "--backend",
        choices=("auto", "msr", "perf", "sim"),
        default="auto",
        help="auto (default): msr when root with free counters, else perf (see `pmutop info`); sim: simulated",
    )
    p.add_argument("--demo", action="store_true", help="same as --backend sim: a simulated PMU, labelled SIMULATED")
    p.add_argument("--read", choices=("rdpmc", "msr"), help="how counters are read (default rdpmc on this host)")
    p.add_argument("--sysroot", metavar="DIR", default="/", help="read hardware files under DIR (default /)")
    p.add_argument(
        "--events",
        action="append",
        metavar="LIST",
        help="events to count: instructions, cycles, ref-cycles, llc-references, llc-misses, "
        "branches, branch-misses, or event=0x..,umask=0x..[,cmask=..,inv,edge]",
    )
    ring = p.add_mutually_exclusive_group()
    ring.add_argument("--user-only", action="store_true", help="count user mode only")
    ring.add_argument("--kernel-only", action="store_true", help="count kernel mode only")
    p.add_argument(
        "--perfmon-dir",
        metavar="DIR",
        help="Intel perfmon tables for event names (default: $PMUTOP_PERFMON_DIR, else the cache that "
        "`pmutop events --download` fills)",
    )
    td = p.add_mutually_exclusive_group()
    td.add_argument(
        "--topdown",
        dest="topdown",
        action="store_true",
        default=None,
        help="measure top-down also where it takes general counters (they rotate with the other events)",
    )
    td.add_argument("--no-topdown", dest="topdown", action="store_false", help="do not measure top-down")
    p.add_argument("--force", action="store_true", help="take over counters another agent is using")
    p.add_argument(
        "--keep-nmi-watchdog",
        action="store_true",
        help="refuse to run instead of pausing the NMI watchdog (msr backend)",
    )
    p.add_argument("--batch", action="store_true", help="print records instead of the live view")
    p.add_argument("--count", type=_positive_int, metavar="N", help="with --batch: stop after N intervals")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="--batch output format")
    p.add_argument(
        "--timestamps", action="store_true", help="with --batch: add each interval's wall-clock time (UTC, ISO 8601)"
    )
    p.add_argument(
        "--record",
        metavar="FILE",
        help="also write every sample to FILE (JSON lines; gzip when FILE ends in .gz) for `pmutop replay`",
    )
    sim = p.add_argument_group("simulated PMU (--demo)")
    sim.add_argument("--sim-cpus", type=_bounded_int(1, 1024), default=8, metavar="N")
    sim.add_argument(
        "--sim-model",
        choices=("skx", "icx", "spr", "adl"),
        default="spr",
        help="CPU shape: spr (default; Sapphire Rapids, PERF_METRICS level 1 and 2), icx (level 1), "
        "skx (Skylake-SP: top-down by the four-event formula, --topdown with Intel's tables), adl (hybrid)",
    )
    sim.add_argument(
        "--sim-mix",
        choices=("classic", "tma"),
        default=None,
        help="workload phases (default: classic on skx, tma elsewhere, which adds branchy and frontend phases)",
    )
    sim.add_argument("--sim-version", type=_bounded_int(2, 6), default=None, metavar="V", help="perfmon version 2-6")
    sim.add_argument(
        "--sim-gp", type=_bounded_int(1, 32), default=None, metavar="N", help="general counters (1-8; 1-32 with v6)"
    )
    sim.add_argument("--sim-fixed", type=_bounded_int(0, 4), default=None, metavar="N", help="fixed counters (0-4)")
    sim.add_argument("--sim-gp-width", type=_bounded_int(16, 64), default=48, metavar="BITS")
    sim.add_argument("--sim-fixed-width", type=_bounded_int(16, 64), default=48, metavar="BITS")
    sim.add_argument(
        "--sim-e-cores",
        type=_bounded_int(0, 1024),
        default=None,
        metavar="N",
        help="the last N simulated CPUs are hybrid E-cores (default: half on adl, none elsewhere)",
    )
    sim.add_argument("--seed", type=int, default=1, help="simulated workload seed")
    return p


def info_parser() -> OneLineParser:
    p = OneLineParser(prog=f"{PROG} info", description="Describe the PMU and which backend pmutop would use.")
    p.add_argument("--sysroot", metavar="DIR", default="/", help="read hardware files under DIR (default /)")
    p.add_argument("--json", action="store_true", help="one JSON object")
    return p


def restore_parser() -> OneLineParser:
    p = OneLineParser(
        prog=f"{PROG} restore",
        description="Put back the PMU registers, NMI watchdog and rdpmc settings a pmutop that was killed "
        "(SIGKILL, a crash, a power cut of the terminal) left behind. Running pmutops are left alone.",
    )
    p.add_argument("--sysroot", metavar="DIR", default="/", help="the machine's files under DIR (default /)")
    return p


def replay_parser() -> OneLineParser:
    p = OneLineParser(
        prog=f"{PROG} replay",
        description="Show a recording (`pmutop --record FILE`) in the live view, or convert it with --batch.",
    )
    p.add_argument("file", metavar="FILE", help="a recording (.jsonl or .jsonl.gz)")
    p.add_argument("--speed", choices=("1", "2", "10", "max"), default="1", help="replay speed (default 1)")
    p.add_argument("--batch", action="store_true", help="print the records instead of the live view")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table", help="--batch output format")
    p.add_argument("--count", type=_positive_int, metavar="N", help="with --batch: only the first N intervals")
    p.add_argument(
        "--timestamps", action="store_true", help="with --batch: add each interval's wall-clock time (UTC, ISO 8601)"
    )
    return p


def diff_parser() -> OneLineParser:
    p = OneLineParser(
        prog=f"{PROG} diff",
        description="Compare two recordings per core and per metric (medians over each run): before / after.",
    )
    p.add_argument("a", metavar="A", help="the recording before")
    p.add_argument("b", metavar="B", help="the recording after")
    return p


def run_replay(argv: list[str], guard: ExitGuard) -> int:
    from pmutop.feeds.replay import ReplayFeed
    from pmutop.recording.reader import read_recording
    from pmutop.sinks.batch_replay import replay_batch

    args = replay_parser().parse_args(argv)
    if not args.batch:
        if args.count is not None:
            raise UsageError("--count needs --batch")
        if args.timestamps:
            raise UsageError("--timestamps needs --batch")
        if not (_isatty(sys.stdin) and _isatty(sys.stderr)):
            raise UsageError("the live view needs a terminal on stdin and stderr; use --batch for pipes and files")
    rec = read_recording(args.file)
    if rec.truncated:
        say(f"warning: {args.file}: the last line was cut short (the recording was stopped abruptly); skipped")
    if args.batch:
        if rec.header.mode == "SIMULATED":
            say("SIMULATED PMU: every number shown is synthetic (a recording of the simulated PMU)")
        warn = lambda m: say(f"warning: {m}")  # noqa: E731
        replay_batch(rec, args.format, count=args.count, timestamps=args.timestamps, warn=warn)
        return 0
    if not rec.samples:
        raise UsageError(f"{args.file}: the recording has no samples")
    from pmutop.tui.replay_controls import ReplayApp

    feed = ReplayFeed(rec, args.speed)
    return run_feed_view(ReplayApp(feed, rec.header.run_info()), feed.start, feed.close, guard)


def run_feed_view(app: Any, start: Callable[[], None], stop: Callable[[], None], guard: ExitGuard) -> int:
    """The live view over a feed that is not this machine's PMU (a recording, remote exporters)."""
    LIVE_VIEW_RAN.set()
    guard.on_stop(app.exit_soon)
    start()
    try:
        app.run()
    finally:
        stop()
    if app.failure:
        raise PmutopError(app.failure)
    if guard.signum is not None:
        say(f"stopped by {signal_name(guard.signum)}")
        return 128 + guard.signum
    return 0


def run_diff(argv: list[str]) -> int:
    from pmutop.recording.diff import diff_table
    from pmutop.recording.reader import read_recording

    args = diff_parser().parse_args(argv)
    a, b = read_recording(args.a), read_recording(args.b)
    print(diff_table(a, b), flush=True)
    return 0


def _sysroot_dir(path: str) -> Sysroot:
    if not os.path.isdir(path):
        raise UsageError(f"--sysroot {path}: not a directory")
    return Sysroot(path)


def _recover(platform: HostPlatform) -> Callable[[StateDir], object]:
    def recover(state_dir: StateDir):  # type: ignore[no-untyped-def]
        return recover_dead_runs(
            state_dir,
            lambda cpu: platform.open_msr(cpu, writable=True),
            platform.read_setting,
            platform.write_setting,
        )

    return recover


def recover_leftovers(platform: HostPlatform, stop: threading.Event | None = None) -> RestoreResult:
    """Restore what killed pmutops left on this machine; prints one line per run restored."""
    state_dir = StateDir.existing(platform.sysroot)
    if state_dir is None:
        return RestoreResult()
    try:
        if not state_dir.lock(stop=stop.is_set if stop else None):
            raise PmuInUseError(f"another pmutop holds {state_dir.path('lock')} (starting or restoring)")
        recovery = _recover(platform)(state_dir)
        for line in recovery.lines:  # type: ignore[attr-defined]
            say(line)
        return recovery.result  # type: ignore[attr-defined,no-any-return]
    finally:
        state_dir.close()


def run_restore(argv: list[str]) -> int:
    args = restore_parser().parse_args(argv)
    platform = HostPlatform(_sysroot_dir(args.sysroot))
    state_dir = StateDir.existing(platform.sysroot)
    if state_dir is None:
        print(f"nothing to restore: no pmutop state under {platform.sysroot.path('run/pmutop')}")
        return 0
    try:
        if not state_dir.lock():
            raise PmuInUseError(f"another pmutop holds {state_dir.path('lock')} (starting or restoring)")
        entries = state_dir.entries()
        for e in entries:
            if e.alive:
                print(f"pmutop pid {e.pid} is running (cpu {format_cpu_list(e.cpus)}): left alone")
        recovery = _recover(platform)(state_dir)
    finally:
        state_dir.close()
    for line in recovery.lines:  # type: ignore[attr-defined]
        if line.startswith("warning: "):
            say(line)
        else:
            print(line)
    if not any(not e.alive for e in entries):
        print("nothing to restore")
    result: RestoreResult = recovery.result  # type: ignore[attr-defined]
    if result.failures:
        say("could not restore: " + "; ".join(result.failures[:5]))
        return EXIT_NOT_RESTORED
    return 0


def build_platform(args: argparse.Namespace) -> Platform:
    if args.backend == "sim":
        from pmutop.sim.model import SimConfig
        from pmutop.sim.platform import SimPlatform

        if args.sysroot != "/":
            raise UsageError("--sysroot describes real hardware; it cannot be combined with --demo/--backend sim")
        if args.sim_e_cores is not None and args.sim_e_cores > args.sim_cpus:
            raise UsageError(f"--sim-e-cores {args.sim_e_cores} exceeds --sim-cpus {args.sim_cpus}")
        if (args.sim_version or 5) < 6 and (args.sim_gp or 0) > 8:
            raise UsageError(f"--sim-gp {args.sim_gp} needs --sim-version 6 (the legacy registers hold 8 counters)")
        try:
            config = SimConfig(
                cpus=args.sim_cpus,
                version=args.sim_version,
                gp_counters=args.sim_gp,
                fixed_counters=args.sim_fixed,
                gp_width=args.sim_gp_width,
                fixed_width=args.sim_fixed_width,
                seed=args.seed,
                e_cores=args.sim_e_cores,
                model=args.sim_model,
                mix=args.sim_mix,
            )
        except ValueError as e:
            raise UsageError(str(e).removeprefix("bad SimConfig: ")) from None
        return SimPlatform(config)
    return HostPlatform(_sysroot_dir(args.sysroot))


def topdown_tables(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """Intel's tables for the top-down formulas (--perfmon-dir, else the usual places), unless it is off."""
    if args.topdown is False:
        return None
    from pmutop.pmu.perfmon import PerfmonTables

    return PerfmonTables.locate(args.perfmon_dir)


def event_resolver(perfmon_dir: str | None) -> EventResolver:
    """Intel event names, resolved lazily: the tables are read only when such a name is used."""
    from pmutop.pmu.perfmon import PerfmonTables, Resolver

    resolver = Resolver(PerfmonTables.locate(perfmon_dir))
    return resolver.resolve


def choose_backend(args: argparse.Namespace, platform: Platform) -> tuple[str, bool, str | None]:
    """(backend, software_only, why hardware events are unavailable) for --backend auto/perf."""
    if args.backend in ("sim", "msr"):
        return args.backend, False, None
    assert isinstance(platform, HostPlatform)
    if args.backend == "auto" and not platform.sysroot.is_host:
        return "msr", False, None  # perf counts this host's CPUs only: the msr backend says what is wrong
    from pmutop.app.commands.info import gather, verdict

    facts = gather(platform, probe=False)
    if args.force and facts.get("counters_in_use", {}).get("busy"):
        facts["counters_in_use"] = {"checked": True, "busy": []}  # --force: take the counters over with msr
    v = verdict(facts)
    perf = facts.get("perf") or {}
    if args.backend == "perf":
        if not perf.get("checked"):
            raise UsageError("--backend perf counts this host's CPUs; it cannot be combined with --sysroot")
        if perf.get("hardware_ok"):
            return "perf", False, None
        if perf.get("software_ok"):
            return "perf", True, perf.get("hardware_problem")
        raise HardwareError(str(perf.get("software_problem")))
    if v["backend"] is None:
        fix = next((f for f in v["fixes"]), "")
        message = "no backend can run here: " + "; ".join(v["reasons"]) + (f" (fix: {fix})" if fix else "")
        busy = (facts.get("counters_in_use") or {}).get("busy")
        raise PmuInUseError(message) if busy else HardwareError(message)
    return v["backend"], v["events"] == "software", perf.get("hardware_problem")


def build_backend(args: argparse.Namespace, platform: Platform) -> Backend:
    events = parse_events(args.events) if args.events else None
    resolver = event_resolver(args.perfmon_dir) if events and any(not e.resolved for e in events) else None
    name, software_only, problem = choose_backend(args, platform)
    if name == "perf" and args.read:
        say(
            f"--read {args.read} is ignored: the perf backend reads its counters with read() on perf's file descriptors"
        )
    if name == "perf":
        assert isinstance(platform, HostPlatform)
        return PerfBackend(
            platform,
            platform.clock,
            events,
            user=not args.kernel_only,
            kernel=not args.user_only,
            resolver=resolver,
            software_only=software_only,
            hardware_problem=problem,
            topdown=args.topdown,
            tables=topdown_tables(args),
        )
    cls = SimBackend if name == "sim" else MsrBackend
    return cls(
        platform,
        platform.clock,
        events,
        read_method=args.read,
        user=not args.kernel_only,
        kernel=not args.user_only,
        force=args.force,
        keep_nmi_watchdog=args.keep_nmi_watchdog,
        resolver=resolver,
        topdown=args.topdown,
        tables=topdown_tables(args),
    )


def task_source(platform: Platform, cpus: list[int]) -> TaskSource:
    if platform.simulated:
        return SimTasks(platform, cpus)
    if platform.pins_threads:  # this host's CPUs: its processes are the ones running there
        return PsutilTasks(cpus)
    return NoTasks()


LIVE_VIEW_RAN = threading.Event()  # main() then skips the interpreter's teardown


def run_live_view(
    engine: Engine,
    info: RunInfo,
    platform: Platform,
    cpus: list[int],
    guard: ExitGuard,
    settings: tuple[Settings, str | None],
) -> None:
    from pmutop.tui.app import PmutopApp

    LIVE_VIEW_RAN.set()
    app = PmutopApp(
        engine,
        info,
        task_source(platform, cpus),
        settings=settings[0],
        settings_path=config_path(),
        settings_problem=settings[1],
    )
    guard.on_stop(app.exit_soon)  # a signal, or an error in another thread: close the UI, then restore
    app.run()
    if app.failure:
        raise PmutopError(app.failure)


def _isatty(stream: object) -> bool:
    try:
        return stream is not None and stream.isatty()  # type: ignore[attr-defined]
    except (ValueError, OSError):  # closed
        return False


class RunEnd:
    """The restore of one run, shared by the main thread and the exit guardian: exactly once."""

    def __init__(self, engine: Engine, state: RunState | None) -> None:
        self.engine = engine
        self.state = state
        self.recorder: Recorder | None = None
        self._lock = threading.Lock()
        self._result: RestoreResult | None = None

    def __call__(self) -> RestoreResult:
        if not self._lock.acquire(timeout=10.0):
            return RestoreResult(failures=["the restore did not finish within 10 s"])
        try:
            if self._result is None:
                if self.state is not None:
                    self.state.lock_for_restore()
                result = self.engine.stop()
                if self.recorder is not None:  # after the samplers stopped: the last samples are in the rings
                    note = self.recorder.close()
                    if note:
                        result.notes.append(note)
                if self.state is not None:
                    try:
                        self.state.finish(result, result.failed_cpus)
                    except OSError as e:
                        result.notes.append(f"could not remove the state file: {e.strerror or e}")
                self._result = result
            return self._result
        finally:
            self._lock.release()


def report_restore(result: RestoreResult) -> None:
    for note in result.notes:
        say(f"warning: {note}")
    if result.failures:
        say(
            f"could not restore everything ({len(result.failures)} problems): "
            + "; ".join(result.failures[:3])
            + " (`pmutop restore` retries)"
        )


def serve_until_stopped(engine: Engine, info_: RunInfo, listen: str, guard: ExitGuard) -> None:
    """The exporter's sink: serve /metrics until a signal asks to stop."""
    from pmutop.sinks.exporter import Exporter

    host, port = parse_listen(listen)
    exporter = Exporter(engine, info_)
    exporter.start(host, port)
    try:
        if info_.simulated:
            say('SIMULATED PMU: every number served is synthetic (pmutop_info{simulated="true"})')
        say(f"serving http://{listen}/metrics ({info_.backend} backend, cpu {format_cpu_list(engine.cpus)})")
        guard.stop_requested.wait()
    finally:
        exporter.stop()


def run_remote(args: argparse.Namespace, guard: ExitGuard) -> int:
    """The live view of remote `pmutop serve` exporters: no PMU here, so no root and nothing to restore."""
    if args.batch:
        raise UsageError("--connect shows the live view; it cannot be combined with --batch")
    if not (_isatty(sys.stdin) and _isatty(sys.stderr)):
        raise UsageError("the live view needs a terminal on stdin and stderr")
    from pmutop.feeds.remote import RemoteFeed, remote_info
    from pmutop.tui.app import PmutopApp

    settings, problem = load_settings()
    feed = RemoteFeed(args.connect, args.interval or settings.interval or 1.0)
    info = remote_info(feed)
    app = PmutopApp(feed, info, settings=settings, settings_path=config_path(), settings_problem=problem)
    return run_feed_view(app, feed.start, feed.stop, guard)


def run(args: argparse.Namespace, argv: list[str], guard: ExitGuard) -> int:
    if args.demo:
        args.backend = "sim"
    serving = getattr(args, "listen", None) is not None
    if serving:
        parse_listen(args.listen)  # a bad address fails before the PMU is touched
        if args.batch:
            raise UsageError("serve has no --batch: it serves /metrics")
    if getattr(args, "connect", None):
        return run_remote(args, guard)
    if args.count is not None and not args.batch:
        raise UsageError("--count needs --batch")
    if args.timestamps and not args.batch:
        raise UsageError("--timestamps needs --batch")
    # Textual draws on stderr and reads stdin.
    if not args.batch and not serving and not (_isatty(sys.stdin) and _isatty(sys.stderr)):
        raise UsageError("the live view needs a terminal on stdin and stderr; use --batch for pipes and files")
    platform = build_platform(args)
    cpus = select_cpus(args.cores, platform.online_cpus(), platform.possible_cpus())
    if isinstance(platform, HostPlatform):
        leftovers = recover_leftovers(platform, guard.stop_requested)
        if leftovers.failures:
            raise HardwareError(
                "could not restore what a killed pmutop left: "
                + "; ".join(leftovers.failures[:3])
                + " (`pmutop restore` retries)"
            )
    backend = build_backend(args, platform)
    mode = "SIMULATED" if platform.simulated else backend.name
    state = None
    if isinstance(platform, HostPlatform) and isinstance(backend, MsrBackend):
        state = RunState.begin(
            platform.sysroot,
            cpus,
            argv,
            recover=_recover(platform),  # type: ignore[arg-type]
            say=say,
            stop=guard.stop_requested.is_set,
        )
    # The live view starts where the user left it (sort, columns, view, interval); --interval wins.
    settings = load_settings() if not (args.batch or serving) else (Settings(), None)
    interval = args.interval or settings[0].interval or 1.0
    # A batch table shows none of the power readings (CSV, JSON and recordings do): not read at all then.
    table_only = args.batch and args.format == "table" and not args.record
    power = None if table_only else PowerMonitor.for_platform(platform, cpus)
    # Batch mode with perf reads every CPU from the main thread, as `perf stat -I` does: perf reads any CPU's
    # counters from anywhere, and no sampler threads means no wake-ups and no GIL hand-offs between them.
    unthreaded = args.batch and isinstance(backend, PerfBackend) and not args.record
    engine = Engine(
        backend, platform, platform.clock, cpus, interval, undo=UndoLog(state), power=power, threaded=not unthreaded
    )
    end = RunEnd(engine, state)
    guard.set_restore(end, report_restore)
    failed_cpus: dict[int, str] = {}
    guard.on_stop(engine.wake_waiters)  # a signal ends the batch loop's wait at once (it does not poll)
    try:
        engine.start(guard.stop_requested)
        if state is not None:
            state.started()
        info = collect(platform, backend, cpus)
        if args.record and not guard.stop_requested.is_set():
            header = make_header(engine, info, mode, backend.describe(), backend.events)
            end.recorder = Recorder(args.record, engine, header)
            end.recorder.start()
        if guard.stop_requested.is_set():
            pass
        elif serving:
            for notice in backend.notices:
                say(notice)
            serve_until_stopped(engine, collect(platform, backend, cpus), args.listen, guard)
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
                warn=lambda m: say(f"warning: {m}"),
                stop=guard.stop_requested,
                timestamps=args.timestamps,
                pace=(lambda: engine.tick_on_schedule(guard.stop_requested)) if unthreaded else None,
            )
        else:
            run_live_view(engine, info, platform, cpus, guard, settings)
            failed_cpus = engine.failures()
            for cpu, why in failed_cpus.items():
                say(f"warning: cpu {cpu} dropped: {why}")
    finally:
        result = guard.restore()
        report_restore(result)
    if guard.failure:
        raise PmutopError(guard.failure)
    code = guard.exit_code(result, 1 if failed_cpus else 0)
    if guard.signum is not None:
        say(f"stopped by {signal_name(guard.signum)}")
    elif failed_cpus and code == 1:
        say(f"cpu {format_cpu_list(sorted(failed_cpus))} failed during the run (see above)")
    return code


def _silence_stdout() -> None:
    """stdout is unusable (reader gone, disk full): point it at /dev/null so nothing more fails on exit."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def _main(argv: list[str], guard: ExitGuard) -> int:
    if argv and argv[0] == "events":
        from pmutop.app.commands.events import events_main

        print(events_main(argv[1:]), flush=True)
        return 0
    if argv and argv[0] == "info":
        args = info_parser().parse_args(argv[1:])
        sysroot = _sysroot_dir(args.sysroot)
        from pmutop.app.commands.info import run_info

        print(run_info(HostPlatform(sysroot), args.json), flush=True)
        return 0
    if argv and argv[0] == "restore":
        return run_restore(argv[1:])
    if argv and argv[0] == "selftest":
        from pmutop.app.commands.selftest import selftest_main

        return selftest_main(argv[1:], guard)
    if argv and argv[0] == "serve":
        return run(run_parser(serve=True).parse_args(argv[1:]), argv, guard)
    if argv and argv[0] == "replay":
        return run_replay(argv[1:], guard)
    if argv and argv[0] == "diff":
        return run_diff(argv[1:])
    return run(run_parser().parse_args(argv), argv, guard)


def main(argv: Sequence[str] | None = None) -> int:
    code = _guarded_main(list(sys.argv[1:] if argv is None else argv))
    if LIVE_VIEW_RAN.is_set():
        # Everything that matters is done (PMU restored, terminal back, messages written); tearing down
        # the interpreter's Textual objects would add ~0.2 s before the shell returns. Quitting must feel
        # instant.
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                if stream is not None:
                    stream.flush()
        os._exit(code)
    return code


def _guarded_main(argv: list[str]) -> int:
    guard = ExitGuard(say)
    guard.install()  # before any other thread starts: every thread inherits the blocked signals
    try:
        code = _main(argv, guard)
        if sys.stdout is not None:
            sys.stdout.flush()
        return code
    except PmutopError as e:
        say(str(e))
        return e.exit_code
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly; stdout is unusable now.
        _silence_stdout()
        return 0
    except OSError as e:
        if e.errno is not None and getattr(e, "filename", None) is None:
            _silence_stdout()
            say(f"cannot write the output: {e.strerror or e}")
            return 1
        say(f"{e.filename}: {e.strerror or e}" if e.filename else f"{e.strerror or e}")
        return 1
    except Exception as e:  # a bug: still one line (PMUTOP_DEBUG=1 shows the traceback)
        if os.environ.get("PMUTOP_DEBUG"):
            raise
        say(f"internal error: {e} ({REPORT_HINT})")
        return 1
    finally:
        guard.uninstall()
