"""`pmutop --prometheus URL --batch --since T`: a past window from the server's history starts at the first
sample the server holds (a window reaching further back printed empty rows for all of it), and a window of
more than a million rows is said before its first row."""

from __future__ import annotations

import os
import time

from helpers.fake_prometheus import FakePrometheus
from helpers.processes import start_pmutop

# The real-Prometheus fixture (three `pmutop serve --demo`, scraped every second), shared with that module.
from test_issue23_prometheus_feed import fleet  # noqa: F401


def test_a_window_from_before_the_first_sample_starts_at_it() -> None:
    with FakePrometheus(hosts=2, cpus=2) as fake:
        fake.first_sample = time.time() - 120  # two minutes of history, asked for 100 days
        proc = start_pmutop("--prometheus", fake.url, "--batch", "--since", "100d", "--format", "csv")
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
        proc = start_pmutop("--prometheus", fake.url, "--batch", "--since", "2h", "--format", "csv")
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


def test_a_real_servers_window_starts_at_its_first_sample(fleet) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    """Against a Prometheus that has scraped for a few seconds: --since 100d asks a coarse and a fine
    query_range within the server's 11,000 points a series, and prints seconds of rows, not 100 days."""
    base, instances, _, _ = fleet
    proc = start_pmutop("--prometheus", base, "--batch", "--since", "100d", "--format", "csv", "--interval", "2")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "first sample" in err, err
    rows = [dict(zip(out.splitlines()[0].split(","), line.split(","), strict=True)) for line in out.splitlines()[1:]]
    assert 6 <= len(rows) <= 6 * 60, len(rows)  # six CPUs, a row each 2 s since the server began
    assert {row["host"] for row in rows} == set(instances)
    assert sum(1 for row in rows if row["ipc"]) >= len(rows) - 6, out  # numbers from the first rows on
