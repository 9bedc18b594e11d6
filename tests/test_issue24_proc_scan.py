"""Issue 24, the top-task column's scan of /proc in the real live view: each process's (and a busy process's
threads') stat file stays open between intervals and is read again with one pread. What it reads must be what
a fresh open reads: the process's numbers now, never a file of a process that exited (a reused PID is another
process), and nothing left open."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from pmutop.probes.process_scan import ProcessScan, StatFiles


def _open_fds() -> set[str]:
    """What this process has open (the listing's own descriptor is gone by the time it is read)."""
    out = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            out.add(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:
            continue
    return out


def _utime(data: bytes) -> int:
    return int(data.rpartition(b")")[2].split()[11])


def test_a_kept_file_reads_the_numbers_of_now() -> None:
    files = StatFiles(budget=8)
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        path = f"/proc/{spinner.pid}/stat"
        first = files.read(path)
        time.sleep(0.5)
        again = files.read(path)
        assert first is not None and again is not None
        assert _utime(again) > _utime(first)  # the same open file, the CPU time it has now
        assert path in _open_fds()
    finally:
        spinner.kill()
        spinner.wait()
        files.close()


def test_the_file_of_a_process_that_exited_is_never_read_again(tmp_path: Path) -> None:
    files = StatFiles(budget=8)
    sleeper = subprocess.Popen(["sleep", "60"])
    path = f"/proc/{sleeper.pid}/stat"
    try:
        assert files.read(path) is not None
    finally:
        sleeper.kill()
        sleeper.wait()
    assert files.read(path) is None  # gone: the kept file says so and is closed, the path is not there
    files.sweep()
    assert path not in _open_fds()
    files.close()


def test_at_most_the_budget_is_kept_and_sweep_and_close_leave_nothing_open() -> None:
    before = _open_fds()
    files = StatFiles(budget=2)
    pids = [str(pid) for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit())[:5]]
    for pid in pids:
        files.read(f"/proc/{pid}/stat")
    assert len(_open_fds() - before) == 2
    files.sweep()  # every file was read since the last sweep: all kept
    assert len(_open_fds() - before) == 2
    files.sweep()  # none read since: all closed
    assert _open_fds() == before
    files.read(f"/proc/{pids[0]}/stat")
    files.close()
    assert _open_fds() == before


def test_a_scan_of_this_machine_closes_what_it_kept() -> None:
    before = _open_fds()
    scan = ProcessScan()
    scan.scan()
    busy = scan.scan()
    assert os.getpid() in busy.processes
    scan.close()
    assert _open_fds() == before
