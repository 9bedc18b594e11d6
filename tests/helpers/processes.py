"""Helpers for tests that run pmutop as a process."""

from __future__ import annotations

import select
import subprocess
import sys


def wait_for_output(proc: subprocess.Popen[str], timeout: float = 30.0) -> str:
    """The next line pmutop prints, failing the test when none comes within `timeout` seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "pmutop printed nothing"
    return proc.stdout.readline()


def run_pmutop(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m pmutop ARGS` to its end: its exit status, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "pmutop", *args], capture_output=True, text=True, timeout=timeout, check=False
    )
