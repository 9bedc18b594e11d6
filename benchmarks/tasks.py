"""What the process view costs: the live view in real mode (this machine's perf backend) at 1 s, on the core
table and on the process view counting 32 processes, side by side in one run with the same 32 background
processes running (the target: the process view adds at most 25%)."""

from __future__ import annotations

import signal
import sys
from typing import Any

from benchmarks import procs
from benchmarks.stats import skipped, summary

# Each background process wakes every 20 ms and works ~1 ms: about 5% of a CPU, so all 32 are in the top 32
# and keep their counters (the tracker's hysteresis keeps them), while the machine is far from saturated.
_WORKER = (
    "import time\n"
    "while True:\n"
    "    end = time.perf_counter() + 0.001\n"
    "    while time.perf_counter() < end: pass\n"
    "    time.sleep(0.02)\n"
)


def process_view(seconds: float, repeat: int, processes: int = 32) -> dict[str, Any]:
    workers = [procs.spawn([sys.executable, "-c", _WORKER]) for _ in range(processes)]
    out: dict[str, Any] = {}
    base = [*procs.pmutop_cmd(), "--backend", "perf", "--interval", "1"]
    variants = {
        "live view real mode (core table)": base,
        f"live view real mode + process view ({processes} counted)": [*base, "--tasks", "--top", str(processes)],
    }
    try:
        for name, cmd in variants.items():
            runs = []
            for k in range(repeat):
                session = f"tasks{len(runs)}-{k}-{len(name)}"
                with procs.tmux_session(session, cmd) as pid:
                    if procs.wait_for_screen(session, lambda s: "PID" in s or "all" in s, timeout=60) is None:
                        out[name] = skipped("no frame within 60 s")
                        break
                    runs.append(procs.cpu_per_minute(pid, seconds))
            if runs:
                out[name] = summary(runs, "cpu-s/min", seconds=seconds, background_processes=processes)
    finally:
        for w in workers:
            procs.stop(w, signal.SIGTERM)  # (SIGINT would print each worker's KeyboardInterrupt)
    names = list(variants)
    if all(n in out and "median" in out[n] for n in names):
        base_cost, view_cost = out[names[0]]["median"], out[names[1]]["median"]
        out["process view added cost"] = summary([100 * (view_cost / base_cost - 1)], "%", target="<= 25")
    return out
