"""issue 21, `--batch --pid LIST`: per-process counters from the kernel (perf backend), as task records."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import subprocess
import sys

import pytest
from helpers.processes import run_pmutop as pmutop
from helpers.workloads import PING_PONG, beside_perf_stat, perf_stat_works, procs, start, task_records

from pmutop.core.errors import UsageError
from pmutop.hw.perf_event import PerfOpenError
from pmutop.probes.task_counters import TaskCounters

__all__ = ["procs"]  # the fixture (pytest finds it here)


@pytest.mark.integration
def test_counts_match_perf_stat_p(procs: list[subprocess.Popen[str]]) -> None:
    if not perf_stat_works():
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


# Busy on one CPU (its affinity) with two threads, until killed.
PINNED_BUSY = """
import os, sys, threading
os.sched_setaffinity(0, {int(sys.argv[1])})
def spin():
    while True:
        pass
threading.Thread(target=spin, daemon=True).start()
print("ready", flush=True)
spin()
"""


def test_batch_task_records_say_which_cpus_the_process_ran_on(procs: list[subprocess.Popen[str]]) -> None:
    cpu = max(os.sched_getaffinity(0))
    load = start(procs, PINNED_BUSY, str(cpu))
    result = pmutop("--batch", "--pid", str(load.pid), "--interval", "0.4", "--count", "3", "--format", "json")
    assert result.returncode == 0, result.stderr
    tasks = task_records(result.stdout)
    assert [r["cpus"] for r in tasks] == [[cpu]] * 3  # where it ran, measured: never [] for "not looked at"


def test_batch_command_records_say_which_cpus_the_command_ran_on() -> None:
    if not perf_stat_works():
        pytest.skip("perf_event_open is not available here")
    cpu = max(os.sched_getaffinity(0))
    busy = (
        f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.time() + 1.5\nwhile time.time() < end: pass"
    )
    result = pmutop("--batch", "--format", "json", "--interval", "0.3", "--", sys.executable, "-c", busy)
    assert result.returncode == 0, result.stderr
    ran = [r for r in task_records(result.stdout) if r["task_clock"] > 0.05e9]
    assert ran and all(r["cpus"] for r in ran), ran
    assert any(r["cpus"] == [cpu] for r in ran)  # pinned there once Python started
