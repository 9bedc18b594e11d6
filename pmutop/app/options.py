"""The command line's parsers: `pmutop [options]`, `pmutop serve`, and one per command."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import NoReturn

from pmutop import __version__
from pmutop.app.console import PROG
from pmutop.backends.base import LONGEST_INTERVAL_S
from pmutop.core.errors import UsageError
from pmutop.sinks.listen import DEFAULT_LISTEN

MIN_INTERVAL_S = 0.01
MAX_INTERVAL_S = LONGEST_INTERVAL_S  # the narrow-counter reads are planned for it
BACKENDS = ("auto", "msr", "perf", "sim")
SIM_MODELS = ("skx", "icx", "spr", "adl")
BATCH_FORMATS = ("table", "csv", "json")
SYSROOT_HELP = "read hardware files under DIR (default /)"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit status 2)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def add_sysroot(parser: argparse.ArgumentParser, help_text: str = SYSROOT_HELP) -> None:
    """--sysroot DIR: another machine's files (a snapshot) instead of this one's."""
    parser.add_argument("--sysroot", metavar="DIR", default="/", help=help_text)


def _interval(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or not MIN_INTERVAL_S <= value <= MAX_INTERVAL_S:
        raise argparse.ArgumentTypeError(f"must be {MIN_INTERVAL_S:g} .. {MAX_INTERVAL_S:g} seconds (got {text})")
    return value


MAX_MEM_PEAK_GBS = 100_000.0  # far beyond any socket's memory (HBM parts reach a few TB/s)


def _mem_peak(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of GB/s") from None
    if not math.isfinite(value) or not 0 < value <= MAX_MEM_PEAK_GBS:
        raise argparse.ArgumentTypeError(f"must be a bandwidth in GB/s, > 0 and <= {MAX_MEM_PEAK_GBS:g} (got {text})")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1 (got {text})")
    return value


def _bounded_int(lo: int, hi: int) -> Callable[[str], int]:
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
    )  # the main command's list of the other commands: pmutop.app.usage.main_parser
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
            help="show a remote `pmutop serve` (HOST:PORT or http://HOST:PORT) instead of this machine; repeat for "
            "several hosts; works with --batch and --record",
        )
        _add_prometheus_options(p)
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
        choices=BACKENDS,
        default="auto",
        help="auto (default): msr when root with free counters, else perf (see `pmutop info`); sim: simulated",
    )
    p.add_argument("--demo", action="store_true", help="same as --backend sim: a simulated PMU, labelled SIMULATED")
    p.add_argument("--read", choices=("rdpmc", "msr"), help="how counters are read (default rdpmc on this host)")
    add_sysroot(p)
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
    topdown = p.add_mutually_exclusive_group()
    topdown.add_argument(
        "--topdown",
        dest="topdown",
        action="store_true",
        default=None,
        help="measure top-down also where it takes general counters (they rotate with the other events)",
    )
    topdown.add_argument("--no-topdown", dest="topdown", action="store_false", help="do not measure top-down")
    p.add_argument("--force", action="store_true", help="take over counters another agent is using")
    p.add_argument(
        "--keep-nmi-watchdog",
        action="store_true",
        help="refuse to run instead of pausing the NMI watchdog (msr backend)",
    )
    p.add_argument("--batch", action="store_true", help="print records instead of the live view")
    p.add_argument("--count", type=_positive_int, metavar="N", help="with --batch: stop after N intervals")
    p.add_argument("--format", choices=BATCH_FORMATS, default="table", help="--batch output format")
    p.add_argument(
        "--timestamps", action="store_true", help="with --batch: add each interval's wall-clock time (UTC, ISO 8601)"
    )
    cgroup_path = "a path under the cgroup v2 root: /sys/fs/cgroup, or /sys/fs/cgroup/unified on hybrid hosts"
    if serve:
        p.add_argument(
            "--cgroups",
            action="store_true",
            help="also serve per-cgroup counters (pmutop_cgroup_<event>_total{cgroup,name}) for the --top N cgroups "
            "using most CPU, with their parents. Per-process series are never served: PIDs come and go without "
            "bound, and each would be a new series in Prometheus (unbounded cardinality); cgroups are the services "
            "and containers",
        )
    else:
        p.add_argument(
            "--pid",
            metavar="LIST",
            help="count exactly these processes (1234,5678), threads and children included, as `perf stat -p` "
            '(perf backend), in the process view (key 4); with --batch: one "kind": "task" record per process per '
            "interval",
        )
        p.add_argument(
            "--tasks",
            action="store_true",
            help="open on the process view (key 4), counting the --top N processes using most CPU; with --batch: "
            "a task record per counted process",
        )
        p.add_argument(
            "--cgroups",
            action="store_true",
            help="open on the cgroup view (key 5), counting the --top N cgroups using most CPU with their parents; "
            "with --batch: a cgroup record per counted cgroup",
        )
    p.add_argument(
        "--cgroup",
        metavar="PATH",
        action="append",
        help=f"count exactly this cgroup (repeatable; {cgroup_path}, e.g. system.slice/nginx.service)",
    )
    p.add_argument(
        "--top",
        type=_bounded_int(1, 4096),
        default=32,
        metavar="N",
        help="how many processes (--tasks) and cgroups (--cgroups) to count: those using most CPU (default 32)",
    )
    if not serve:
        p.add_argument(
            "--records",
            choices=("cpu", "task", "cgroup", "package"),
            help="with --batch: print one kind of record. JSON prints every kind (cpu, task, cgroup, package); "
            "CSV and the table print one kind: task with --pid, --tasks or -- COMMAND, cgroup with --cgroups or "
            "--cgroup, else cpu. package: DRAM read/write bandwidth per socket and memory channel (CSV: one "
            "ch<N>_read_bytes_per_s, ch<N>_write_bytes_per_s, ... column per channel)",
        )
    p.add_argument(
        "--mem-peak",
        type=_mem_peak,
        metavar="GB/s",
        help="theoretical DRAM bandwidth of one socket, for the share of peak (default: channels x MT/s x 8 "
        "from the SMBIOS memory devices; unknown when those are unreadable)",
    )
    p.add_argument(
        "--record",
        metavar="FILE",
        help="also write every sample to FILE (JSON lines; gzip when FILE ends in .gz) for `pmutop replay`",
    )
    _add_sim_options(p)
    return p


def _add_prometheus_options(p: argparse.ArgumentParser) -> None:
    """--prometheus and its options: a fleet's pmutop instances through the Prometheus server scraping them."""
    fleet = p.add_argument_group("a fleet through Prometheus (--prometheus)")
    fleet.add_argument(
        "--prometheus",
        metavar="URL",
        help="show every `pmutop serve` a Prometheus server (or Thanos, Mimir, VictoriaMetrics) scrapes, from its "
        "HTTP API (http(s)://HOST:PORT; user:password@ in the URL for basic auth); works with --batch and --record",
    )
    fleet.add_argument(
        "--match",
        metavar="SELECTOR",
        help='which instances: label matchers on pmutop_info, e.g. \'{job="pmutop",env="prod"}\' (default: all)',
    )
    fleet.add_argument("--prometheus-ca", metavar="FILE", help="CA certificate(s) to verify an https server with")
    fleet.add_argument("--bearer-token-file", metavar="FILE", help="send the token in FILE (Authorization: Bearer)")
    fleet.add_argument("--basic-auth-file", metavar="FILE", help="basic auth from FILE: one line user:password")
    fleet.add_argument(
        "--since",
        metavar="TIME",
        help="with --batch: print a past window from the server's history, from TIME (2024-05-01T10:00:00Z, or "
        "a duration ago: 10m, 1h30m) at --interval",
    )
    fleet.add_argument("--until", metavar="TIME", help="with --since: the window's end (default now)")


def _add_sim_options(p: argparse.ArgumentParser, *, workload: bool = True) -> None:
    """The --sim-* shape options; `workload`: also the workload's (--sim-mix, --seed: a run's only)."""
    sim = p.add_argument_group("simulated PMU (--demo)")
    sim.add_argument("--sim-cpus", type=_bounded_int(1, 1024), default=8, metavar="N")
    sim.add_argument(
        "--sim-model",
        choices=SIM_MODELS,
        default="spr",
        help="CPU shape: spr (default; Sapphire Rapids, PERF_METRICS level 1 and 2), icx (level 1), "
        "skx (Skylake-SP: top-down by the four-event formula, with --topdown), adl (hybrid)",
    )
    if workload:
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
    if workload:
        sim.add_argument("--seed", type=int, default=1, help="simulated workload seed")
    else:
        p.set_defaults(sim_mix=None, seed=1)


def _add_demo(p: argparse.ArgumentParser, what: str) -> None:
    """--demo and the simulated machine's shape, for a command that describes a machine (info, events)."""
    p.add_argument("--demo", action="store_true", help=f"{what} of the simulated PMU (labelled SIMULATED)")
    p.set_defaults(backend="auto")
    _add_sim_options(p, workload=False)


def info_parser() -> OneLineParser:
    p = OneLineParser(prog=f"{PROG} info", description="Describe the PMU and which backend pmutop would use.")
    add_sysroot(p)
    p.add_argument("--json", action="store_true", help="one JSON object")
    _add_demo(p, "describe the machine")
    return p


def events_parser() -> OneLineParser:
    """Options of `pmutop events`."""
    from pmutop.pmu import perfmon  # here, not at the top: its HTTP client is loaded by this command only

    p = OneLineParser(
        prog=f"{PROG} events",
        description="List the event names this machine's CPUs accept: architectural, software, "
        "and Intel's per-model events from Intel's perfmon tables.",
    )
    add_sysroot(p)
    p.add_argument("--search", metavar="WORD", help="only events whose name or description contains WORD")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.add_argument(
        "--perfmon-dir",
        metavar="DIR",
        help=f"Intel's perfmon tables (a copy of github.com/intel/perfmon; default ${perfmon.PERFMON_ENV}, "
        f"then {perfmon.cache_dir()})",
    )
    p.add_argument(
        "--download",
        action="store_true",
        help="first fetch mapfile.csv and this machine's core event tables into --perfmon-dir (or the cache)",
    )
    p.add_argument(
        "--perfmon-url", metavar="URL", help=f"where --download fetches from (default {perfmon.PERFMON_URL})"
    )
    _add_demo(p, "the events")
    return p


def restore_parser() -> OneLineParser:
    p = OneLineParser(
        prog=f"{PROG} restore",
        description="Put back the PMU registers, NMI watchdog and rdpmc settings a pmutop that was killed "
        "(SIGKILL, a crash, a power cut of the terminal) left behind. Running pmutops are left alone.",
    )
    add_sysroot(p, help_text="the machine's files under DIR (default /)")
    return p


def selftest_parser() -> OneLineParser:
    p = OneLineParser(
        prog=f"{PROG} selftest",
        description="Run known workloads on each CPU and check that the counters count them right. "
        "Exit status 0: all passed; 1: a check failed; 5: no usable PMU here.",
    )
    p.add_argument("--cores", metavar="LIST", help="CPUs to test: 0-3, 0,2,4-7 or all (default: all online)")
    p.add_argument("--backend", choices=BACKENDS, default="auto")
    p.add_argument("--demo", action="store_true", help="same as --backend sim: the simulated PMU")
    p.add_argument("--read", choices=("rdpmc", "msr"), help="msr backend: how counters are read")
    add_sysroot(p)
    p.add_argument("--force", action="store_true", help="take over counters another agent is using")
    p.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    p.add_argument("--sim-cpus", type=int, default=8, metavar="N", help="simulated CPUs (default 8, as --demo)")
    p.add_argument("--sim-model", choices=SIM_MODELS, default="spr")
    return p


def replay_parser() -> OneLineParser:
    p = OneLineParser(
        prog=f"{PROG} replay",
        description="Show a recording (`pmutop --record FILE`) in the live view, or convert it with --batch.",
    )
    p.add_argument("file", metavar="FILE", help="a recording (.jsonl or .jsonl.gz)")
    p.add_argument("--speed", choices=("1", "2", "10", "max"), default="1", help="replay speed (default 1)")
    p.add_argument("--batch", action="store_true", help="print the records instead of the live view")
    p.add_argument("--format", choices=BATCH_FORMATS, default="table", help="--batch output format")
    p.add_argument("--count", type=_positive_int, metavar="N", help="with --batch: only the first N intervals")
    p.add_argument(
        "--timestamps", action="store_true", help="with --batch: add each interval's wall-clock time (UTC, ISO 8601)"
    )
    p.add_argument(
        "--records",
        choices=("cpu", "task", "cgroup", "package"),
        help="with --batch: print one kind of record. JSON prints every kind the recording holds (cpu, then "
        "task, then cgroup, then package, per interval); CSV and the table print one kind (default cpu)",
    )
    return p


def diff_parser() -> OneLineParser:
    p = OneLineParser(
        prog=f"{PROG} diff",
        description="Compare two recordings per core and per metric (medians over each run): before / after; "
        "recordings with per-process or per-cgroup counters are also compared per command and per cgroup, and "
        "recordings with DRAM bandwidth per package (read and write bytes/s, averaged over each recording).",
    )
    p.add_argument("a", metavar="A", help="the recording before")
    p.add_argument("b", metavar="B", help="the recording after")
    return p
