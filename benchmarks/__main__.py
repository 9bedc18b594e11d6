"""`python -m benchmarks [--quick] [--only NAME ...] [--out FILE]`: measure, print a table, write JSON.

Benchmarks (all by default): sampler (read path per core-sample, threaded vs one thread), live (live view
CPU time vs htop), floors (what a Textual app and one Python thread per core cost doing nothing else: the
floor under the live view's figures), keys (key to screen at 256 cores), batch (batch mode vs perf stat),
memory (RSS growth), startup (first frame, batch exit), tasks (the process view's added cost, real mode).
Numbers only, no pass/fail; the machine's load shows in them, so compare figures of the same run.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import floors, procs, programs, sampler, tasks

NAMES = ("sampler", "live", "floors", "keys", "batch", "memory", "startup", "tasks")


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n\n")[1])
    p.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES), help="which benchmarks to run")
    p.add_argument("--quick", action="store_true", help="short durations, one run each: a smoke run (minutes)")
    p.add_argument("--repeat", type=int, help="runs per figure (default 3, 1 with --quick)")
    p.add_argument("--seconds", type=float, help="duration of the live view runs (default 60, 10 with --quick)")
    p.add_argument("--batch-seconds", type=float, help="duration of the batch runs (default 30, 10 with --quick)")
    p.add_argument("--memory-minutes", type=float, help="memory: RSS after this long vs after 1 min (default 10)")
    p.add_argument("--cores", type=int, nargs="+", default=[2, 64, 256], help="simulated cores for the live view")
    p.add_argument("--sampler-cpus", type=int, default=64, help="CPUs of the read-path benchmark (default 64)")
    p.add_argument("--threaded-cpus", type=int, default=256, help="CPUs of the threaded sampler run (default 256)")
    p.add_argument("--out", type=Path, default=Path(__file__).with_name("results.json"), help="JSON output")
    return p.parse_args(argv)


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = args.quick
    repeat = args.repeat or (1 if quick else 3)
    results: dict[str, Any] = {}
    if "sampler" in args.only:
        results.update(sampler.read_path(cpus=args.sampler_cpus, ticks=3 if quick else 10, repeat=max(repeat, 3)))
        results.update(sampler.threaded(cpus=args.threaded_cpus, seconds=3 if quick else 10, repeat=repeat))
        results.update(sampler.threaded_sysroot(seconds=5 if quick else 20, repeat=max(repeat, 2)))
    if "live" in args.only:
        results.update(programs.live_view(args.cores, args.seconds or (10 if quick else 60), repeat))
    if "floors" in args.only:
        # Floors are steady programs: half a minute each is enough (the full run is long already).
        results.update(floors.floors(args.cores, min(args.seconds or 30, 30) if not quick else 10, repeat))
    if "keys" in args.only:
        results.update(programs.key_latency(cores=max(args.cores), presses=5 if quick else 20))
    if "batch" in args.only:
        results.update(programs.batch(args.batch_seconds or (10 if quick else 30), repeat))
    if "memory" in args.only:
        minutes = args.memory_minutes or (0.5 if quick else 10)
        results.update(programs.memory(first_s=min(60.0, minutes * 60 / 3), later_s=minutes * 60))
    if "startup" in args.only:
        results.update(programs.startup(repeat))
    if "tasks" in args.only:
        results.update(tasks.process_view(args.seconds or (10 if quick else 60), repeat))
    return results


def table(results: dict[str, Any]) -> str:
    lines = [f"{'figure':<30} {'min':>10} {'median':>10} {'max':>10}  unit / notes"]
    for name, r in results.items():
        if "skipped" in r:
            lines.append(f"{name:<30} {'skipped':>10}  {r['skipped']}")
        elif name == "memory":
            lines.append(
                f"{name:<30} {r['rss_early']:>10.1f} {'':>10} {r['rss_late']:>10.1f}  MiB after "
                f"{r['early_s']:.0f} s and {r['late_s']:.0f} s (ratio {r['ratio']:.2f}, {r['cpus']} cores)"
            )
        else:
            notes = [r["unit"], f"{r['runs']} runs"]
            for key in ("msr_reads_per_sample", "status_reads_per_sample", "shim_calls_per_sample"):
                if key in r:
                    notes.append(f"{key.removesuffix('_per_sample').replace('_', ' ')}/sample {r[key]:.2f}")
            notes += [f"{k.replace('_', ' ')} {v:.2f}x" for k, v in r.items() if k.startswith("ratio_to_") and v]
            lines.append(f"{name:<30} {r['min']:>10.3g} {r['median']:>10.3g} {r['max']:>10.3g}  {', '.join(notes)}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
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
    report = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "host": platform.node(),
        "cpus": __import__("os").cpu_count(),
        "quick": args.quick,
        "results": results,
    }
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(results))
    print(f"written {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
