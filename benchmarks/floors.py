"""What the live view's design costs before it does any work of its own, measured the same way as the live
view (CPU seconds per minute, in the same 120x40 tmux terminal): a Textual app idle and redrawing a full
screen once a second, and N Python threads waking once a second (one sampler thread per core). These are
the floors under the live-view figures, side by side with htop in the same run."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

from benchmarks import procs
from benchmarks.stats import summary


def floors(cores: list[int], seconds: float, repeat: int, warmup: float = 3.0) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("idle", "redraw"):
        runs = []
        for k in range(repeat):
            cmd = [sys.executable, str(procs.ROOT / "benchmarks" / "floor_textual.py"), mode]
            with procs.tmux_session(f"floor-{mode}-{k}", cmd) as pid:
                time.sleep(warmup)  # past start-up: Python, Textual and the first frame
                runs.append(procs.cpu_per_minute(pid, seconds))
        out[f"floor: textual {mode}"] = summary(runs, "cpu-s/min", seconds=seconds)
    for n in cores:
        runs = []
        for _ in range(repeat):
            p = procs.spawn(
                [sys.executable, str(procs.ROOT / "benchmarks" / "floor_threads.py"), str(n)], stdout=subprocess.DEVNULL
            )
            try:
                time.sleep(warmup)
                runs.append(procs.cpu_per_minute(p.pid, seconds))
            finally:
                procs.stop(p)
        out[f"floor: {n} threads waking 1/s"] = summary(runs, "cpu-s/min", seconds=seconds)
    return out
