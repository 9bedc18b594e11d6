"""Where the live view's memory grows: `python benchmarks/memgrowth.py [--trace-from S] [--early S]
[--late S] [--cpus N] [--interval S] [--top K]`.

Runs the real program (`pmutop --demo --sim-cpus 64 --interval 0.05` by default) in a 120x40 tmux terminal,
starts tracemalloc in it after `--trace-from` seconds (this script starts it: pmutop needs no hook), takes a
snapshot after `--early` and after `--late` seconds, and prints the allocation sites (file:line, `--frames`
deep, grouped by the innermost frame in pmutop where there is one) that grew most between the two, with the
process's RSS at both times.
tracemalloc slows the program down while it traces, so fewer intervals pass than in the memory benchmark:
compare growth per interval, not per minute.
"""

from __future__ import annotations

import argparse
import linecache
import pickle
import sys
import tempfile
import threading
import time
import tracemalloc
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_ROOT))


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _snapshots(out: Path, trace_from: float, early: float, late: float, frames: int) -> None:
    """In the traced program: tracing from `trace_from` s (start-up and the rings' filling run at full speed
    and stay out of the snapshots), two snapshots (and RSS) to `out`, then nothing more. An allocation
    alive in both snapshots' sites that grew between them is growth; objects that are replaced in a steady
    state (ring slots, history) were made after tracing started too, but their totals stay flat."""
    t0 = time.monotonic()
    time.sleep(trace_from)
    tracemalloc.start(frames)
    for name, at in (("early", early), ("late", late)):
        time.sleep(max(0.0, at - (time.monotonic() - t0)))
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        partial = out / f"{name}.partial"
        partial.write_bytes(pickle.dumps((snap, _rss_kib(), time.monotonic() - t0)))
        partial.rename(out / f"{name}.pickle")  # whole or absent for the reader


def child(out: Path, trace_from: float, early: float, late: float, frames: int, argv: list[str]) -> None:
    threading.Thread(target=_snapshots, args=(out, trace_from, early, late, frames), daemon=True).start()
    from pmutop.app.main import main

    sys.exit(main(argv))


_PACKAGE = f"{_ROOT / 'pmutop'}/"  # pmutop's own code (not the venv's, wherever the checkout is)


def _ours(frame: tracemalloc.Frame) -> bool:
    return frame.filename.startswith(_PACKAGE)


def _short(frame: tracemalloc.Frame) -> str:
    return f"{frame.filename.removeprefix(_PACKAGE)}:{frame.lineno}"


def _site(trace_frames: tracemalloc.Traceback) -> tuple[str, str]:
    """The innermost frame in pmutop's own code (what to fix), else the innermost frame; and the pmutop
    frames that called it, innermost first (tracemalloc orders a traceback oldest first)."""
    ours = [f for f in reversed(trace_frames) if _ours(f)]
    if not ours:
        return _short(trace_frames[-1]), ""
    return _short(ours[0]), " < ".join(_short(f) for f in ours[1:4])


def report(out: Path, top: int) -> list[str]:
    (early, rss_early, t_early) = pickle.loads((out / "early.pickle").read_bytes())
    (late, rss_late, t_late) = pickle.loads((out / "late.pickle").read_bytes())
    # Net per site: the objects a steady state replaces (ring slots, caches) free as many as they make.
    growth: dict[str, list[int]] = {}
    callers: dict[str, str] = {}
    for stat in late.compare_to(early, "traceback"):
        site, chain = _site(stat.traceback)
        entry = growth.setdefault(site, [0, 0])
        if chain and stat.size_diff > 0 and site not in callers:
            callers[site] = chain
        entry[0] += stat.size_diff
        entry[1] += stat.count_diff
    total = sum(s.size_diff for s in late.compare_to(early, "filename"))
    lines = [
        f"RSS {rss_early / 1024:.1f} MiB at {t_early:.0f} s -> {rss_late / 1024:.1f} MiB at {t_late:.0f} s; "
        f"traced Python heap {total / 2**20:+.2f} MiB",
        "net growth (KiB)  blocks  site (innermost pmutop frame): its line  [called from]",
    ]
    grown = [(site, size, count) for site, (size, count) in growth.items() if size > 0]
    for site, size, count in sorted(grown, key=lambda entry: -entry[1])[:top]:
        path, line = site.rsplit(":", 1)
        source = linecache.getline(path if path.startswith("/") else _PACKAGE + path, int(line)).strip()
        called = f"  [{callers[site]}]" if callers.get(site) else ""
        lines.append(f"{size / 1024:>12.1f} {count:>7}  {site}: {source[:60]}{called}")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trace-from", type=float, default=60.0, help="start tracing after S seconds")
    # Objects that live long but are replaced (the simulator keeps up to 4 workload phases of prefix sums,
    # 80 s) look like growth until they have all been made since tracing started: the first snapshot waits.
    p.add_argument("--early", type=float, default=180.0)
    p.add_argument("--late", type=float, default=360.0)
    p.add_argument("--cpus", type=int, default=64)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--frames", type=int, default=8, help="frames kept per allocation (more: slower)")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    # pmutop's own options follow `--` (its --interval is not ours to parse).
    rest = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = p.parse_args(argv[: argv.index("--")] if "--" in argv else argv)
    if args.child:
        child(args.child, args.trace_from, args.early, args.late, args.frames, rest)
        return 0
    from benchmarks import procs

    uninstall = procs.install_cleanup()
    try:
        with tempfile.TemporaryDirectory(prefix="pmutop-memgrowth-") as tmp:
            out = Path(tmp)
            cmd = [sys.executable, __file__, "--child", tmp, "--early", str(args.early), "--late", str(args.late)]
            cmd += ["--frames", str(args.frames), "--trace-from", str(args.trace_from)]
            cmd += ["--", "--demo", "--sim-cpus", str(args.cpus), "--interval", str(args.interval)]
            with procs.tmux_session("memgrowth", cmd):
                deadline = time.monotonic() + args.late * 3 + 300  # a snapshot under load takes minutes
                while not (out / "late.pickle").exists() and time.monotonic() < deadline:
                    time.sleep(1.0)
                if not (out / "late.pickle").exists():
                    print("no snapshot: the program ended or hung (PMUTOP_DEBUG=1 to see why)", file=sys.stderr)
                    return 1
            print("\n".join(report(out, args.top)))
    finally:
        procs.cleanup()
        uninstall()
    return 0


if __name__ == "__main__":
    sys.exit(main())
