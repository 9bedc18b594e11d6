"""`python -m benchmarks [--quick] [--only NAME ...] [--out FILE]`: measure, print a table, write JSON.

Benchmarks (all by default): sampler (read path per core-sample, threaded vs one thread), live (the live
view at 1 s on 2 CPUs, demo and real mode, side by side with htop, btop, s-tui, bpytop and glances),
readpath (the live view on an emulated msr read path at 4, 64, 256 and 1,024 CPUs, and the demo at 256), floors
(what a Textual app and one Python thread per core cost doing nothing else: the floor under the live view's
figures), keys (key to screen at the most CPUs, demo and read path), batch (batch mode vs perf stat), memory (RSS
growth), startup (first frame, batch exit), tasks (the process view's added cost, real mode), draw
(in-process: a table redraw with every row changed, headless). Where there is
a target the figure says it and whether it is met; the machine's load shows in the numbers, so compare
figures of the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import draw, floors, peers, procs, programs, readpath, sampler, tasks

NAMES = ("sampler", "live", "readpath", "floors", "keys", "batch", "memory", "startup", "tasks", "draw")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[1])
    p.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES), help="which benchmarks to run")
    p.add_argument("--quick", action="store_true", help="short durations, one run each: a smoke run (minutes)")
    p.add_argument("--repeat", type=int, help="runs per figure (default 3, 1 with --quick)")
    p.add_argument("--seconds", type=float, help="duration of the live view runs (default 60, 10 with --quick)")
    p.add_argument("--batch-seconds", type=float, help="duration of the batch runs (default 30, 10 with --quick)")
    p.add_argument("--memory-minutes", type=float, help="memory: RSS after this long vs after 1 min (default 10)")
    p.add_argument("--cores", type=int, nargs="+", default=[2, 64, 256], help="thread counts of the floors")
    p.add_argument(
        "--readpath-cpus",
        type=int,
        nargs="+",
        default=[4, 64, 256, 1024],
        help="CPUs of the emulated msr read path (the demo and the Python drive at 256, keys at the largest)",
    )
    p.add_argument("--presses", type=int, help="key presses per key-latency figure (default 40, 10 with --quick)")
    p.add_argument(
        "--install-peers",
        action="store_true",
        help=f"install the missing peers first (apt-get: htop btop; pip into {peers.VENV}: s-tui bpytop glances)",
    )
    p.add_argument("--sampler-cpus", type=int, default=64, help="CPUs of the read-path benchmark (default 64)")
    p.add_argument("--threaded-cpus", type=int, default=256, help="CPUs of the threaded sampler run (default 256)")
    p.add_argument("--out", type=Path, help="JSON output (default: results/<UTC time>-<commit>.json beside this file)")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    repeat = args.repeat or (1 if quick else 3)
    results: dict[str, Any] = {}
    if "sampler" in args.only:
        results.update(sampler.read_path(cpus=args.sampler_cpus, ticks=3 if quick else 10, repeat=max(repeat, 3)))
        results.update(
            sampler.native_read_path(cpus=args.sampler_cpus, seconds=1 if quick else 3, repeat=max(repeat, 3))
        )
        results.update(sampler.threaded(cpus=args.threaded_cpus, seconds=3 if quick else 10, repeat=repeat))
        results.update(
            sampler.threaded_sysroot(
                tuple(args.readpath_cpus), seconds=2 if quick else 20, repeat=1 if quick else max(repeat, 2)
            )
        )
    seconds = args.seconds or (10 if quick else 60)
    if "live" in args.only:
        results.update(peers.side_by_side(seconds, repeat))
    if "readpath" in args.only:
        # The demo and the Python drive beside the read path at 256 CPUs.
        middle = 256 if 256 in args.readpath_cpus else max(args.readpath_cpus)
        results.update(readpath.cost(args.readpath_cpus, middle, seconds, repeat, python_cpus=middle))
    if "floors" in args.only:
        # Floors are steady programs: half a minute each is enough (the full run is long already).
        results.update(floors.floors(args.cores, min(args.seconds or 30, 30) if not quick else 10, repeat))
    if "keys" in args.only:
        presses = args.presses or (10 if quick else 40)
        results.update(readpath.key_latency(cpus=max(args.readpath_cpus), presses=presses))
    if "batch" in args.only:
        results.update(programs.batch(args.batch_seconds or (10 if quick else 30), repeat))
    if "memory" in args.only:
        minutes = args.memory_minutes or (0.5 if quick else 10)
        results.update(programs.memory(first_s=min(60.0, minutes * 60 / 3), later_s=minutes * 60))
    if "startup" in args.only:
        results.update(programs.startup(repeat))
    if "tasks" in args.only:
        results.update(tasks.process_view(seconds, repeat))
    if "draw" in args.only:
        results.update(draw.redraw(frames=10 if quick else 40, repeat=repeat))
    return results


def _target_notes(r: dict[str, Any]) -> list[str]:
    """The comparisons: x htop, p95, the ratio, the target and whether it is met."""
    notes = []
    if "x_htop" in r:
        notes.append(f"{r['x_htop']:.1f}x htop")
    if "p95" in r:
        notes.append(f"p95 {r['p95']:.3g}")
    if r.get("ratio") is not None:
        notes.append(f"ratio {r['ratio']:.2f}")
    if "target" in r:
        met = {True: "MET", False: "NOT MET"}.get(r["met"], "") if "met" in r else ""
        notes.append(f"target {r['target']} {met}".rstrip())
    return notes


def table(results: dict[str, Any]) -> str:
    width = max([36, *(len(name) + 1 for name in results)])
    lines = [f"{'figure':<{width}} {'min':>9} {'median':>9} {'max':>9}  unit / notes"]
    for name, r in results.items():
        if "skipped" in r:
            lines.append(f"{name:<{width}} {'skipped':>9}  {r['skipped']}")
        elif name == "memory":
            lines.append(
                f"{name:<{width}} {r['rss_early']:>9.1f} {'':>9} {r['rss_late']:>9.1f}  MiB after "
                f"{r['early_s']:.0f} s and {r['late_s']:.0f} s ({r['cpus']} cores), " + ", ".join(_target_notes(r))
            )
        else:
            notes = [r["unit"], f"{r['runs']} runs"] + ([f"RSS {r['rss_mib']:.0f} MiB"] if "rss_mib" in r else [])
            for key in ("msr_reads_per_sample", "status_reads_per_sample", "shim_calls_per_sample"):
                if key in r:
                    notes.append(f"{key.removesuffix('_per_sample').replace('_', ' ')}/sample {r[key]:.2f}")
            notes += [f"{k.replace('_', ' ')} {v:.2f}x" for k, v in r.items() if k.startswith("ratio_to_") and v]
            notes += _target_notes(r)
            lines.append(f"{name:<{width}} {r['min']:>9.3g} {r['median']:>9.3g} {r['max']:>9.3g}  {', '.join(notes)}")
    return "\n".join(lines)


RESULTS = Path(__file__).with_name("results")  # one JSON file a run: date, machine and commit in its name and body


def _commit() -> str:
    """The measured checkout's commit ("+" when it has uncommitted changes), or "unknown" outside git."""
    root = Path(__file__).parent.parent
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+" if dirty.stdout.strip() else "")


def _machine() -> dict[str, Any]:
    """What the figures depend on: the CPU, how many, the kernel, Python, and whether it is a VM."""
    cpuinfo = ""
    with contextlib.suppress(OSError):
        cpuinfo = Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")), "")
    flags = next((line for line in cpuinfo.splitlines() if line.startswith("flags")), "")
    return {
        "host": platform.node(),
        "cpu": model,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "hypervisor": " hypervisor" in flags,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.install_peers:
        for problem in peers.install():
            print(f"peers: {problem}", file=sys.stderr)
    uninstall = procs.install_cleanup()
    started = time.time()
    try:
        results = run(args)
    except KeyboardInterrupt:
        print("interrupted: everything started was stopped", file=sys.stderr)
        return 130
    finally:
        procs.cleanup()
        uninstall()
    commit = _commit()
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "commit": commit,
        "machine": _machine(),
        "quick": args.quick,
        "argv": sys.argv[1:] if argv is None else argv,
        "results": results,
    }
    out = args.out or RESULTS / f"{time.strftime('%Y-%m-%dT%H%M%SZ', time.gmtime(started))}-{commit[:9]}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(results))
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
