"""`pmutop --prometheus URL --batch --since T`: a past window from the server's history starts at the first
sample the server holds (a window reaching further back printed empty rows for all of it), and a window of
more than a million rows is said before its first row."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from helpers.fake_prometheus import FakePrometheus
from helpers.serve import ROOT


def pmutop(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pmutop", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_a_window_from_before_the_first_sample_starts_at_it() -> None:
    with FakePrometheus(hosts=2, cpus=2) as fake:
        fake.first_sample = time.time() - 120  # two minutes of history, asked for 100 days
        proc = pmutop("--prometheus", fake.url, "--batch", "--since", "100d", "--format", "csv")
        try:
            out, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
    assert proc.returncode == 0, err
    rows = out.splitlines()[1:]
    assert 4 * 110 <= len(rows) <= 4 * 125, len(rows)  # ~120 intervals of 4 CPUs, not 100 days' worth
    assert "first sample" in err and "100 days" not in err, err
    assert "more than a million" not in err


def test_a_window_of_more_than_a_million_rows_is_said_before_it_prints() -> None:
    with FakePrometheus(hosts=10, cpus=100) as fake:  # 1,000 CPUs: 1,000 rows an interval
        proc = pmutop("--prometheus", fake.url, "--batch", "--since", "2h", "--format", "csv")
        try:
            assert proc.stderr is not None and proc.stdout is not None
            said = ""
            deadline = time.monotonic() + 60
            while "rows" not in said and time.monotonic() < deadline:
                said += proc.stderr.readline()
            os.set_blocking(proc.stdout.fileno(), False)
            try:  # what came before the warning
                printed = os.read(proc.stdout.fileno(), 1 << 20).decode()
            except BlockingIOError:
                printed = ""
        finally:
            proc.kill()
            proc.communicate()
    assert "7,200,000 rows" in said and "more than a million" in said, said
    assert len(printed.splitlines()) <= 1, printed[:300]  # no row yet (a header at most)
