"""Hostile command-line input through the real entry point: one line on stderr, exit 2, bounded memory."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

_MEMORY_CAP = 2 << 30  # bytes of address space: an unbounded expansion fails fast instead of eating the machine


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (_MEMORY_CAP, _MEMORY_CAP))


def run_pmutop(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pmutop", *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit_memory,
        cwd=cwd,
    )


@pytest.mark.integration
def test_a_huge_cores_range_is_one_line_and_exit_2() -> None:
    done = run_pmutop("--demo", "--cores", "0-1000000000", "--batch", "--count", "1")
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        "pmutop: bad --cores value '0-1000000000': CPU 1000000000 is beyond the largest CPU number "
        "Linux supports (8191)\n"
    )
