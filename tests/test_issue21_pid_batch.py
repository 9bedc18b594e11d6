"""issue 21, `--batch --pid LIST`: per-process counters from the kernel (perf backend), as task records."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from pmutop.core.errors import UsageError
from pmutop.hw.perf_event import PerfOpenError
from pmutop.probes.task_counters import TaskCounters

# Two processes ping-ponging one byte through pipes on one CPU: every round trip is a context switch of each.
PING_PONG = r"""
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
a_r, a_w = os.pipe(); b_r, b_w = os.pipe()
if os.fork() == 0:
    os.close(a_w); os.close(b_r)
    try:
        while os.read(a_r, 1):
            os.write(b_w, b"x")
    except OSError:
        pass
    os._exit(0)
os.close(a_r); os.close(b_w)
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    os.write(a_w, b"x"); os.read(b_r, 1)
os.close(a_w)
os.wait()
"""


def pmutop(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pmutop", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


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
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, text=True, start_new_session=True)
    procs.append(p)
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    return p


def perf_available() -> bool:
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(["perf", "stat", "-e", "task-clock", "--", "true"], capture_output=True, check=False)
    return probe.returncode == 0


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


@pytest.mark.integration
def test_counts_match_perf_stat_p(procs: list[subprocess.Popen[str]]) -> None:
    if not perf_available():
        pytest.skip("perf stat or perf_event_open is not available here")
    cpu = max(os.sched_getaffinity(0))
    load = start(procs, PING_PONG, str(cpu), "30")
    tasks = beside_perf_stat(procs, load.pid, "--pid", str(load.pid), count=4)
    assert [r["pid"] for r in tasks] == [load.pid] * 4 and not any(r["exited"] for r in tasks)
    assert all(r["counted"] == 1.0 and r["comm"].startswith("python") for r in tasks)
    assert tasks[-1]["util"] == pytest.approx(tasks[-1]["task_clock"] / 1e9 / tasks[-1]["interval"], rel=1e-3)


def test_an_exiting_process_is_read_a_last_time_and_dropped(procs: list[subprocess.Popen[str]]) -> None:
    short = start(procs, "import time; print('ready', flush=True); time.sleep(1.3)")
    result = pmutop("--batch", "--pid", str(short.pid), "--interval", "0.5", "--count", "6", "--format", "json")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    tasks = [r for r in records if r["kind"] == "task"]
    assert 1 <= len(tasks) < 6
    assert [r["exited"] for r in tasks] == [False] * (len(tasks) - 1) + [True]
    # The CPU records go on after it is dropped, every interval; every record has its kind.
    assert {r["kind"] for r in records} == {"cpu", "task"}
    assert max(r["interval_index"] for r in records if r["kind"] == "cpu") == 6
    assert result.stderr.count("--pid: this PMU has no hardware events") <= 1


def test_csv_prints_task_records_with_the_json_columns(procs: list[subprocess.Popen[str]]) -> None:
    load = start(procs, "import time; print('ready', flush=True); time.sleep(30)")
    args = ("--batch", "--pid", str(load.pid), "--interval", "0.3", "--count", "2")
    as_csv = pmutop(*args, "--format", "csv")
    as_json = pmutop(*args, "--format", "json", "--records", "task")
    assert as_csv.returncode == 0 and as_json.returncode == 0, as_csv.stderr + as_json.stderr
    rows = list(csv.DictReader(io.StringIO(as_csv.stdout)))
    tasks = task_records(as_json.stdout)
    assert [r["kind"] for r in rows] == ["task", "task"] and len(tasks) == 2
    assert list(rows[0]) == list(tasks[0])
    # The CPU records keep CSV and JSON columns identical too, `kind` included.
    cpu_csv = pmutop("--batch", "--count", "1", "--interval", "0.2", "--format", "csv")
    assert cpu_csv.stdout.splitlines()[0].startswith("kind,time,") and cpu_csv.stdout.splitlines()[1].startswith("cpu,")
    table = pmutop(*args, "--format", "table")
    assert table.returncode == 0 and "PID" in table.stdout.splitlines()[0] and str(load.pid) in table.stdout


def unused_pid() -> int:
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--pid", "{nopid}"), "pmutop: --pid {nopid}: no such process"),
        (("--pid", "12,abc"), "pmutop: --pid 12,abc: expected process ids separated by commas, e.g. --pid 1234,5678"),
        (("--records", "task"), "pmutop: --records task needs --pid or --tasks (the processes to count)"),
    ],
)
def test_bad_pid_arguments_are_one_line_and_status_2(args: tuple[str, ...], message: str) -> None:
    nopid = str(unused_pid())
    result = pmutop("--batch", "--count", "1", *(a.format(nopid=nopid) for a in args))
    assert result.returncode == 2
    assert result.stderr.strip() == message.format(nopid=nopid)
    assert result.stdout == ""


def test_a_process_the_user_may_not_count_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: object) -> int:
        raise PerfOpenError("denied", errno.EACCES)

    monkeypatch.setattr("pmutop.probes.task_counters.read_paranoid", lambda _root: 2)
    with pytest.raises(UsageError) as caught:
        TaskCounters([1], opener=refuse)
    assert str(caught.value) == "--pid 1: not permitted (perf_event_paranoid 2)"
    assert caught.value.exit_code == 2
