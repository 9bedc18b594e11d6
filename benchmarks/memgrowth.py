"""Where the live view's memory grows: `python benchmarks/memgrowth.py [--early S] [--late S] [--cpus N]
[--interval S] [--top K]`.

Runs the real program (`pmutop --demo --sim-cpus 64 --interval 0.05` by default) in a 120x40 tmux terminal
under tracemalloc (this script starts it: pmutop needs no hook), takes a snapshot after `--early` and after
`--late` seconds, and prints the allocation sites (file:line, 10 frames deep, grouped by the innermost frame
in pmutop where there is one) that grew most between the two, with the process's RSS at both times.
tracemalloc slows the program down (about 2x), so fewer intervals pass than in the memory benchmark: compare
growth per interval, not per minute.
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

FRAMES = 10


def _rss_kib() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def _snapshots(out: Path, early: float, late: float) -> None:
    """In the traced program: two snapshots (and RSS) to `out`, then nothing more."""
    t0 = time.monotonic()
    for name, at in (("early", early), ("late", late)):
        time.sleep(max(0.0, at - (time.monotonic() - t0)))
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        partial = out / f"{name}.partial"
        partial.write_bytes(pickle.dumps((snap, _rss_kib(), time.monotonic() - t0)))
        partial.rename(out / f"{name}.pickle")  # whole or absent for the reader


def child(out: Path, early: float, late: float, argv: list[str]) -> None:
    tracemalloc.start(FRAMES)
    threading.Thread(target=_snapshots, args=(out, early, late), daemon=True).start()
    from pmutop.app.main import main

    sys.exit(main(argv))


def _site(trace_frames: tracemalloc.Traceback) -> str:
    """The innermost frame in pmutop's own code (what to fix), else the innermost frame."""
    for frame in trace_frames:
        if "/pmutop/" in frame.filename:
            return f"{frame.filename.split('/pmutop/', 1)[1]}:{frame.lineno}"
    frame = trace_frames[0]
    return f"{frame.filename}:{frame.lineno}"


def report(out: Path, top: int) -> list[str]:
    (early, rss_early, t_early) = pickle.loads((out / "early.pickle").read_bytes())
    (late, rss_late, t_late) = pickle.loads((out / "late.pickle").read_bytes())
    growth: dict[str, list[int]] = {}
    for stat in late.compare_to(early, "traceback"):
        if stat.size_diff <= 0:
            continue
        entry = growth.setdefault(_site(stat.traceback), [0, 0, 0])
        entry[0] += stat.size_diff
        entry[1] += stat.count_diff
        entry[2] = max(entry[2], stat.size)
    total = sum(s.size_diff for s in late.compare_to(early, "filename"))
    lines = [
        f"RSS {rss_early / 1024:.1f} MiB at {t_early:.0f} s -> {rss_late / 1024:.1f} MiB at {t_late:.0f} s; "
        f"traced Python heap {total / 2**20:+.2f} MiB",
        "growth (KiB)  blocks  site (innermost pmutop frame)",
    ]
    for site, (size, count, _) in sorted(growth.items(), key=lambda kv: -kv[1][0])[:top]:
        source = linecache.getline(str(_ROOT / "pmutop" / site.split(":")[0]), int(site.rsplit(":", 1)[1])).strip()
        lines.append(f"{size / 1024:>12.1f} {count:>7}  {site}  {source[:70]}")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--early", type=float, default=60.0)
    p.add_argument("--late", type=float, default=240.0)
    p.add_argument("--cpus", type=int, default=64)
    p.add_argument("--interval", type=float, default=0.05)
    p.add_argument("--top", type=int, default=15)
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    args, rest = p.parse_known_args()
    if args.child:
        child(args.child, args.early, args.late, rest)
        return 0
    from benchmarks import procs

    uninstall = procs.install_cleanup()
    try:
        with tempfile.TemporaryDirectory(prefix="pmutop-memgrowth-") as tmp:
            out = Path(tmp)
            cmd = [sys.executable, __file__, "--child", tmp, "--early", str(args.early), "--late", str(args.late)]
            cmd += ["--demo", "--sim-cpus", str(args.cpus), "--interval", str(args.interval)]
            with procs.tmux_session("memgrowth", cmd):
                deadline = time.monotonic() + args.late + 120
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
