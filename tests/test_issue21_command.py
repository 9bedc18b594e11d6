"""issue 21, `pmutop [options] -- COMMAND`: start the command, count it (threads and children too) with the
kernel's per-task counters, end with it, its status is pmutop's, a perf-stat-like summary on stderr."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time

import pytest
from helpers.processes import run_pmutop
from helpers.workloads import perf_stat_works

from pmutop.core.task_reading import TaskReading
from pmutop.sinks.summary import CommandTotals, exit_code, format_summary

# Burns `seconds` of its own CPU time (not wall time: a shared machine's load does not change the count).
BUSY = "import sys, time\nend = time.process_time() + float(sys.argv[1])\nwhile time.process_time() < end: pass\n"


PMUTOP_BATCH_JSON = (sys.executable, "-m", "pmutop", "--batch", "--format", "json")


def pmutop(*args: str) -> subprocess.CompletedProcess[str]:
    return run_pmutop(*args, timeout=90)


needs_perf = pytest.mark.skipif(not perf_stat_works(), reason="perf stat or perf_event_open is not available here")


def summary_task_clock_ms(stderr: str) -> float:
    match = re.search(r"^\s*([\d,]+\.\d+) msec task-clock", stderr, re.M)
    assert match, stderr
    return float(match.group(1).replace(",", ""))


def task_records(out: str) -> list[dict]:
    return [r for r in map(json.loads, out.splitlines()) if r["kind"] == "task"]


# -- the summary (pure)


def reading(counts: dict[str, int], estimated: dict[str, float] | None = None) -> TaskReading:
    return TaskReading(1, "x", "root", 1, 1.0, counts, 1.0, estimated or {})


def test_summary_lays_out_perf_stat_lines_with_derived_values_and_scaled_shares() -> None:
    totals = CommandTotals()
    full = {"task_clock": 1_000_000_000, "context_switches": 10, "cycles": 2_000_000_000}
    totals.add(reading(full | {"instructions": 3_000_000_000, "llc_misses": 6_000_000}))
    # A second second in which cycles were counted half the time (multiplexed) and scaled.
    totals.add(reading(full | {"instructions": 1_000_000_000, "llc_misses": 2_000_000}, {"cycles": 0.5}))
    text = format_summary(["make", "-j8"], totals, elapsed=4.0, user=1.5, sys=0.25, wait_status=0)
    lines = text.splitlines()
    assert " Performance counter stats for 'make -j8':" in lines
    assert re.search(r"^\s+2,000\.00 msec task-clock\s+#\s+0\.500 CPUs utilized$", text, re.M)
    assert re.search(r"^\s+20\s+context-switches\s+#\s+5\.000 /sec$", text, re.M)
    # cycles were counted 75% of the running time (1 s whole + 1 s half): perf stat's "(75.00%)".
    assert re.search(r"^\s+4,000,000,000\s+cycles\s+#\s+2\.000 GHz\s+\(75\.00%\)$", text, re.M)
    assert re.search(r"^\s+4,000,000,000\s+instructions\s+#\s+1\.00  insn per cycle$", text, re.M)
    assert re.search(r"^\s+8,000,000\s+LLC-misses\s+#\s+2\.00  MPKI$", text, re.M)
    assert "branch-misses" not in text  # not counted: no line
    assert re.search(r"^\s+4\.000000000 seconds time elapsed$", text, re.M)
    assert re.search(r"^\s+1\.500000000 seconds user$", text, re.M)
    assert re.search(r"^\s+0\.250000000 seconds sys$", text, re.M)
    assert "status" not in text  # exit status 0: no line


def test_summary_lists_cpu_migrations_and_page_faults_as_perf_stat_does() -> None:
    totals = CommandTotals()
    totals.add(reading({"task_clock": 1_000_000_000, "context_switches": 4, "cpu_migrations": 2, "page_faults": 3000}))
    text = format_summary(["make"], totals, elapsed=2.0, user=0.5, sys=0.5, wait_status=0)
    names = [line.split()[1] for line in text.splitlines() if re.match(r"^\s+[\d,.]+\s+\S", line)]
    assert names[:4] == ["msec", "context-switches", "cpu-migrations", "page-faults"]  # perf stat's order
    assert re.search(r"^\s+2\s+cpu-migrations\s+#\s+1\.000 /sec$", text, re.M)
    assert re.search(r"^\s+3,000\s+page-faults\s+#\s+1\.500 K/sec$", text, re.M)


@needs_perf
@pytest.mark.integration
def test_the_command_summary_counts_its_migrations_and_page_faults() -> None:
    # A megabyte touched page by page: a few hundred page faults at least.
    touch = "b = bytearray(1 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1"
    result = pmutop("--batch", "--interval", "1", "--", sys.executable, "-c", touch)
    assert result.returncode == 0, result.stderr
    faults = re.search(r"^\s+([\d,]+)\s+page-faults", result.stderr, re.M)
    assert faults and int(faults.group(1).replace(",", "")) > 256, result.stderr
    assert re.search(r"^\s+[\d,]+\s+cpu-migrations", result.stderr, re.M), result.stderr


def test_summary_says_a_failed_or_killed_command() -> None:
    exited_3, killed_term = 3 << 8, signal.SIGTERM.value
    assert "the command exited with status 3" in format_summary(
        ["false"], CommandTotals(), elapsed=1, user=0, sys=0, wait_status=exited_3
    )
    assert "the command was killed by SIGTERM (status 143)" in format_summary(
        ["sleep"], CommandTotals(), elapsed=1, user=0, sys=0, wait_status=killed_term
    )
    assert (exit_code(exited_3), exit_code(killed_term)) == (3, 143)


# -- refused before anything is touched


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        (["--batch", "--", "/nonexistent"], "pmutop: /nonexistent: no such file or directory", 127),
        (["--batch", "--", "no-such-command-pmutop"], "pmutop: no-such-command-pmutop: command not found", 127),
        (["--batch", "--", "/etc/passwd"], "pmutop: /etc/passwd: permission denied", 126),
        (["--batch", "--demo", "--", "true"], "pmutop: -- COMMAND counts a real command with the kernel's", 2),
        (["--batch", "--pid", "1", "--", "true"], "pmutop: -- COMMAND counts the command it starts: not with --pid", 2),
        (["--batch", "--connect", "localhost:1", "--", "true"], "pmutop: -- COMMAND runs and counts the command", 2),
        (["--batch", "--record", "/tmp/x.jsonl", "--", "true"], "pmutop: -- COMMAND: recordings do not carry", 2),
        (["serve", "--", "true"], "pmutop: unrecognized arguments: -- true", 2),
    ],
)
def test_a_command_that_cannot_run_here_is_one_line(args: list[str], message: str, status: int) -> None:
    result = pmutop(*args)
    assert result.returncode == status
    assert result.stderr.startswith(message) and result.stderr.count("\n") == 1, result.stderr
    assert result.stdout == ""


# -- measured for real (software events: real on this VM)


@needs_perf
@pytest.mark.integration
def test_busy_command_matches_perf_stat_and_prints_records_while_it_runs() -> None:
    command = [sys.executable, "-c", BUSY, "0.5"]
    mine = pmutop("--batch", "--interval", "0.1", "--format", "json", "--", *command)
    assert mine.returncode == 0, mine.stderr
    tasks = task_records(mine.stdout)
    assert len(tasks) >= 3  # records while it ran, 0.1 s apart
    assert {r["pid"] for r in tasks} == {tasks[0]["pid"]} and tasks[0]["pid"] != os.getpid()
    assert tasks[-1]["comm"].startswith("python")  # the command's name, not pmutop's
    assert any(r["util"] > 0.5 for r in tasks)  # the busy loop shows as the CPU it used
    perf = subprocess.run(
        ["perf", "stat", "-x", ",", "-e", "task-clock", "--", *command], capture_output=True, text=True, check=True
    )
    perf_ms = next(float(line.split(",")[0]) for line in perf.stderr.splitlines() if "task-clock" in line)
    assert summary_task_clock_ms(mine.stderr) == pytest.approx(perf_ms, rel=0.05)
    assert summary_task_clock_ms(mine.stderr) > 450  # the loop ran: the numbers compared are not two zeros
    assert re.search(r"^\s+\d\.\d{9} seconds time elapsed$", mine.stderr, re.M)
    assert float(re.search(r"([\d.]+) seconds user", mine.stderr).group(1)) > 0.1  # type: ignore[union-attr]


@needs_perf
@pytest.mark.integration
def test_children_and_their_threads_are_counted() -> None:
    one = pmutop("--batch", "--interval", "1", "--", sys.executable, "-c", BUSY, "0.4")
    busy = f"{sys.executable} -c '{BUSY}' 0.4"
    two = pmutop("--batch", "--interval", "1", "--", "sh", "-c", f"{busy} & {busy}; wait")
    assert (one.returncode, two.returncode) == (0, 0), two.stderr
    assert summary_task_clock_ms(two.stderr) == pytest.approx(2 * summary_task_clock_ms(one.stderr), rel=0.1)


@needs_perf
@pytest.mark.integration
def test_the_command_status_is_pmutops() -> None:
    result = pmutop("--batch", "--format", "json", "--", "sh", "-c", "exit 3")
    assert result.returncode == 3
    assert "the command exited with status 3" in result.stderr
    assert "Performance counter stats for 'sh -c 'exit 3'':" in result.stderr


@needs_perf
@pytest.mark.integration
def test_sigterm_to_pmutop_reaches_the_command_and_both_end() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "pmutop", "--batch", "--interval", "0.2", "--format", "json", "--", "sleep", "30"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first_task = next(line for line in proc.stdout if '"kind":"task"' in line)
        command_pid = json.loads(first_task)["pid"]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143  # the command's status: killed by the SIGTERM pmutop passed on
    assert "the command was killed by SIGTERM (status 143)" in err
    assert not os.path.exists(f"/proc/{command_pid}")  # the command ended and was reaped


@needs_perf
@pytest.mark.integration
def test_ending_before_the_command_sends_it_sigterm() -> None:
    result = pmutop("--batch", "--count", "1", "--interval", "0.2", "--", "sleep", "30")
    assert result.returncode == 143
    assert "the measurement ended before the command: sending it SIGTERM" in result.stderr
    assert "seconds time elapsed" in result.stderr


def run_in_terminal(
    argv: list[str], *, after: bytes | None = None, send: bytes = b"", timeout: float = 60
) -> tuple[int, str]:
    """Run `argv` as the foreground job of a new terminal (160x40); once `after` appears, type `send`.
    Returns the exit status and everything the terminal showed."""
    pid, master = pty.fork()
    if pid == 0:
        os.environ["TERM"] = "xterm-256color"
        os.execvp(argv[0], argv)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    shown = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if after is not None and after in shown:
                os.write(master, send)
                after = None
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the terminal's last process ended
                break
            if not data:
                break
            shown += data
    finally:
        if time.monotonic() >= deadline:
            os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        os.close(master)
    return os.waitstatus_to_exitcode(status), shown.decode(errors="replace")


# Counts the SIGINTs it gets for 0.5 s after the first, then exits 10 + that count.
COUNT_SIGINT = """
import signal, sys, time
got = []
signal.signal(signal.SIGINT, lambda *_: got.append(1))
print("command-ready", flush=True)
while not got:
    time.sleep(0.01)
time.sleep(0.5)
sys.exit(10 + len(got))
"""


@needs_perf
@pytest.mark.integration
def test_ctrl_c_at_the_terminal_reaches_the_command_once_and_pmutop_waits_for_it() -> None:
    status, shown = run_in_terminal(
        [sys.executable, "-m", "pmutop", "--batch", "--interval", "5", "--", sys.executable, "-c", COUNT_SIGINT],
        after=b"command-ready",
        send=b"\x03",  # Ctrl-C: the terminal sends SIGINT to its foreground process group (pmutop and the command)
    )
    assert status == 11, shown  # the command's status: it got exactly one SIGINT, and ran to its end
    assert "the command exited with status 11" in shown
    assert "Performance counter stats for" in shown


@needs_perf
@pytest.mark.integration
def test_the_live_view_closes_when_the_command_ends_then_its_output_and_the_summary() -> None:
    status, shown = run_in_terminal(
        [
            sys.executable,
            "-m",
            "pmutop",
            "--interval",
            "0.5",
            "--",
            "sh",
            "-c",
            "echo from-the-command; sleep 2; exit 5",
        ]
    )
    assert status == 5, shown
    screen_closed = shown.rindex("\x1b[?1049l")  # the alternate screen left
    assert shown.index("from-the-command", screen_closed) < shown.index("Performance counter stats", screen_closed)
    assert "the command exited with status 5" in shown


@needs_perf
@pytest.mark.integration
def test_ctrl_c_in_the_live_view_reaches_the_command_as_sigint() -> None:
    # The live view holds the terminal in raw mode: its Ctrl-C is a key, passed on to the command as the
    # terminal would have sent it (SIGINT, status 130), not the SIGTERM of a measurement that ended first.
    status, shown = run_in_terminal(
        [sys.executable, "-m", "pmutop", "--interval", "0.5", "--", "sleep", "30"],
        after=b"Processes",
        send=b"\x03",
    )
    assert status == 130, shown
    assert "the command was killed by SIGINT (status 130)" in shown
    assert "sending it SIGTERM" not in shown


@needs_perf
@pytest.mark.integration
def test_a_sigint_sent_to_pmutop_alone_is_passed_on_once() -> None:
    proc = subprocess.Popen(
        [*PMUTOP_BATCH_JSON, "--interval", "5", "--", sys.executable, "-c", COUNT_SIGINT],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # no terminal: only what pmutop passes on reaches the command
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "command-ready"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 11, err  # the command got the one SIGINT and ended on its own; its status
    assert "the command exited with status 11" in err
