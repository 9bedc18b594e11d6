"""Whole-program figures: batch mode's CPU time against perf stat, memory growth, and start-up time. Each
runs the real program (in a real terminal: tmux) and measures it from outside (psutil)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

from benchmarks import procs
from benchmarks.stats import skipped, summary

MINE = "batch pmutop --backend perf"
PERF_STAT = "batch perf stat -I 500"
FLOOR = "batch pmutop without its Util% source"
PYTHON_FLOOR = "batch floor: its system calls from a bare Python loop"
C_FLOOR = "batch floor: its system calls from a bare C loop"


def batch(seconds: float, repeat: int) -> dict[str, Any]:
    """CPU seconds per minute of pmutop's batch mode (perf backend, two software events, 0.5 s) against
    `perf stat -a -A -I 500` counting the same events; and, to show what pmutop's figure is made of, the same
    batch run without its Util% source (benchmarks/batch_floor.py: /proc/stat where there are no hardware
    events, as in a VM without a PMU; perf stat shows no utilisation), and the floor under any Python batch
    here: the same reads and writes from a bare Python loop (benchmarks/batch_python_floor.py), and from a bare
    C loop (benchmarks/batch_c_floor.c, compiled for the run; skipped without a C compiler)."""
    with tempfile.TemporaryDirectory(prefix="pmutop-batch-floor-") as build:
        return _batch(seconds, repeat, _c_floor(build))


def c_compiler() -> str | None:
    """The C compiler the C floor is built with, if this machine has one."""
    return shutil.which("cc") or shutil.which("gcc")


def _c_floor(build: str) -> list[str] | str:
    """The C floor's command (its interval to follow), compiled into `build`, or why there is none."""
    compiler = c_compiler()
    if compiler is None:
        return "no C compiler (cc) to build benchmarks/batch_c_floor.c"
    binary = os.path.join(build, "batch_c_floor")
    source = str(procs.ROOT / "benchmarks" / "batch_c_floor.c")
    done = subprocess.run([compiler, "-O2", "-o", binary, source], capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        return f"benchmarks/batch_c_floor.c did not compile: {lines[-1] if lines else done.returncode}"
    return [binary]


def _batch(seconds: float, repeat: int, c_floor: list[str] | str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    arguments = ["--batch", "--backend", "perf", "--events", "cpu-clock,context-switches", "--interval", "0.5"]
    commands = {
        MINE: [*procs.pmutop_cmd(), *arguments],
        PERF_STAT: ["perf", "stat", "-a", "-A", "-I", "500", "-e", "cpu-clock,context-switches"],
        FLOOR: [sys.executable, str(procs.ROOT / "benchmarks" / "batch_floor.py"), *arguments],
        PYTHON_FLOOR: [sys.executable, str(procs.ROOT / "benchmarks" / "batch_python_floor.py"), "0.5"],
    }
    if isinstance(c_floor, str):
        out[C_FLOOR] = skipped(c_floor)
    else:
        commands[C_FLOOR] = [*c_floor, "0.5"]
    runs: dict[str, list[float]] = {}
    for name, cmd in commands.items():
        if not procs.have(cmd[0]) and not os.path.exists(cmd[0]):
            out[name] = skipped(f"{cmd[0]} is not installed")
        else:
            runs[name] = []
    # They take turns (pmutop, perf stat, the floor, pmutop, ...): a machine whose load changes during the
    # benchmark weighs on all of them alike.
    for _ in range(repeat):
        for name in list(runs):
            took = _steady_cpu_per_minute(commands[name], seconds)
            if isinstance(took, str):
                out[name] = skipped(took)
                del runs[name]
            else:
                runs[name].append(took)
    for name, values in runs.items():
        out[name] = summary(values, "cpu-s/min", seconds=seconds)
    mine, perf = (out.get(name, {}).get("median") for name in (MINE, PERF_STAT))
    if mine is not None and perf:
        r = out[MINE]
        r["ratio"] = mine / perf
        r["target"] = "<= 0.9x perf stat -I 500"
        r["met"] = r["ratio"] <= 0.9
    for name in (FLOOR, PYTHON_FLOOR, C_FLOOR):  # against perf stat, like the figure above them
        value = out.get(name, {}).get("median")
        if value is not None and perf:
            out[name]["ratio"] = value / perf
    return out


def _steady_cpu_per_minute(cmd: list[str], seconds: float) -> float | str:
    """CPU s/min of `cmd` over `seconds` once past its start-up, or why it could not run."""
    # perf stat prints every interval on stderr: into a file, since a pipe nobody reads fills up (64 KiB) and
    # then blocks it, which would make its figure too low.
    with tempfile.TemporaryFile() as errors:
        p = procs.spawn(cmd, stdout=subprocess.DEVNULL, stderr=errors)
        try:
            time.sleep(1.0)  # past start-up: the steady state is what is compared
            if p.poll() is not None:
                errors.seek(0)
                err = errors.read().decode(errors="replace").strip()
                return f"exited {p.returncode}: {err.splitlines()[-1] if err else ''}"
            return procs.cpu_per_minute(p.pid, seconds)
        finally:
            procs.stop(p)


def memory(first_s: float, later_s: float, cores: int = 64) -> dict[str, Any]:
    """RSS of the live view at 0.05 s with 64 simulated cores after `first_s` and after `later_s`."""
    cmd = [*procs.pmutop_cmd(), "--demo", "--sim-cpus", str(cores), "--interval", "0.05"]
    with procs.tmux_session("memory", cmd) as pid:
        t0 = time.monotonic()
        time.sleep(first_s)
        early = procs.tree_rss(pid)
        time.sleep(max(0.0, later_s - (time.monotonic() - t0)))
        late = procs.tree_rss(pid)
    return {
        "memory": {
            "unit": "MiB",
            "rss_early": early / 2**20,
            "rss_late": late / 2**20,
            "early_s": first_s,
            "late_s": later_s,
            "ratio": late / early if early else None,
            "target": "<= 1.05 (flat within 5%)",
            "met": bool(early) and late / early <= 1.05,
            "cpus": cores,
        }
    }


def startup(repeat: int, cores: int = 64) -> dict[str, Any]:
    """Seconds from launch to the first complete frame of the live view, and for `--batch --count 1`."""
    frames = []
    for k in range(repeat):
        cmd = [*procs.pmutop_cmd(), "--demo", "--sim-cpus", str(cores), "--interval", "1"]
        t0 = time.monotonic()
        with procs.tmux_session(f"start-{k}", cmd):
            took = procs.wait_for_screen(f"start-{k}", procs.has_all_row, timeout=120)
            if took is not None:
                frames.append(time.monotonic() - t0)
    batches = []
    for _ in range(repeat):
        t0 = time.monotonic()
        p = procs.spawn(
            [*procs.pmutop_cmd(), "--demo", "--sim-cpus", str(cores), "--batch", "--count", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        p.wait(timeout=120)
        batches.append(time.monotonic() - t0)
        procs.stop(p)
    out: dict[str, Any] = {}
    out["start-up to first frame"] = summary(frames, "s", cpus=cores) if frames else skipped("no frame in 120 s")
    out["start-up batch --count 1"] = summary(batches, "s", cpus=cores, interval=1.0)
    return out
