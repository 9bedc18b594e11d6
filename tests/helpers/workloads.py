"""Workloads for the tests that compare pmutop's per-process and per-cgroup counts with `perf stat`: a
ping-pong load, the processes it runs in (killed at the end) and the side-by-side comparison with perf."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

# Two processes ping-ponging one byte through pipes on one CPU (argv: cpu, seconds): every round trip is a
# context switch of each. Prints "ready" once the child is there.
PING_PONG = r"""
import os, sys, time
cpu, seconds = int(sys.argv[1]), float(sys.argv[2])
os.sched_setaffinity(0, {cpu})
a_r, a_w = os.pipe(); b_r, b_w = os.pipe()
end = time.monotonic() + seconds
if os.fork() == 0:
    # Keep only our ends: with a copy of a_w open here, read(a_r) would never see EOF once the
    # parent is gone, and this process would outlive the test.
    os.close(a_w); os.close(b_r)
    os.sched_setaffinity(0, {cpu})
    try:
        while os.read(a_r, 1):
            os.write(b_w, b"x")
    except OSError:  # the parent died mid round trip (EPIPE): just leave
        pass
    os._exit(0)
os.close(a_r); os.close(b_w)
print("ready", flush=True)
while time.monotonic() < end:  # every round trip is two context switches on this CPU
    os.write(a_w, b"x"); os.read(b_r, 1)
os.close(a_w)
os.wait()
"""


def perf_stat_works(*options: str) -> bool:
    """`perf stat -e task-clock OPTIONS -- true` runs here (perf installed, its events allowed)."""
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(
        ["perf", "stat", "-e", "task-clock", *options, "--", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes a test starts; each one's whole process group is killed and reaped at the end."""
    started: list[subprocess.Popen[str]] = []
    try:
        yield started
    finally:
        for p in started:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=10)


def start(procs: list[subprocess.Popen[str]], code: str, *args: str) -> subprocess.Popen[str]:
    """`python -c CODE ARGS` in its own process group, once it printed "ready"."""
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, start_new_session=True)
    procs.append(p)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def task_records(out: str) -> list[dict]:
    return [r for r in map(json.loads, out.splitlines()) if r["kind"] == "task"]


def beside_perf_stat(procs: list[subprocess.Popen[str]], pid: int, *args: str, count: int) -> list[dict]:
    """`pmutop --batch --format json --interval 1 --count COUNT ARGS`; once its first interval is out, `perf
    stat -p PID -I 1000` counts the next COUNT - 1 seconds beside it, so both see the same seconds (a few ms
    apart: the workload's rate drifts with the machine's load, and pmutop's start is load). Asserts that
    pmutop's task_clock and context switches of PID over those intervals are within 5% of perf's; returns
    PID's task records (all intervals)."""
    mine = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pmutop",
            "--batch",
            "--format",
            "json",
            "--interval",
            "1",
            "--count",
            str(count),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    procs.append(mine)
    assert mine.stdout is not None and mine.stderr is not None
    first = mine.stdout.readline()
    perf_stat = ["perf", "stat", "-p", str(pid), "-e", "task-clock,context-switches", "-x", ","]
    perf = subprocess.Popen(
        [*perf_stat, "-I", "1000", "--interval-count", str(count - 1)], stderr=subprocess.PIPE, text=True
    )
    out = mine.stdout.read()  # (communicate() would skip what readline() buffered)
    assert mine.wait(timeout=30) == 0, mine.stderr.read()
    _, perf_err = perf.communicate(timeout=30)
    rows = [r for r in task_records(first + out) if r["pid"] == pid]
    compared = [r for r in rows if r["interval_index"] > 1]
    assert len(compared) == count - 1
    seconds = sum(r["interval"] for r in compared)
    # perf stat -I -x, lines: time,value,unit,event,...
    perf_totals: dict[str, float] = {}
    perf_seconds = 0.0
    for line in perf_err.splitlines():
        fields = line.split(",")
        if len(fields) > 3 and fields[3] in ("task-clock", "context-switches"):
            perf_totals[fields[3]] = perf_totals.get(fields[3], 0.0) + float(fields[1])
            perf_seconds = float(fields[0])
    assert perf_seconds > count - 1.5
    cs_mine = sum(r["context_switches"] for r in compared) / seconds
    assert cs_mine == pytest.approx(perf_totals["context-switches"] / perf_seconds, rel=0.05)
    clock_mine = sum(r["task_clock"] for r in compared) / 1e9 / seconds  # CPUs used
    assert clock_mine == pytest.approx(perf_totals["task-clock"] / 1e3 / perf_seconds, rel=0.05)  # perf: msec
    assert cs_mine > 1000  # the workload really ran: the numbers compared are not two zeros
    return rows
