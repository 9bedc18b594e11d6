"""`pmutop diff A B` as a performance engineer reads it: the `all` row is the machine total, a SIMULATED
recording is never compared with a measured one, software-only recordings compare what they measured, and
the spread says whether a change is more than noise."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest
from helpers.flags import needs_perf_events

from pmutop.app.main import main
from pmutop.recording.diff import diff_rows, diff_table
from pmutop.recording.reader import read_recording

DEMO = ("--demo", "--batch", "--interval", "0.05", "--sim-cpus", "4", "--format", "json")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def record(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> None:
    code, _, err = run(capsys, *DEMO, "--count", "12", "--record", str(path), *extra)
    assert code == 0, err


def machine_total(path: Path, num: str, den: str) -> float:
    """Σnum/Σden over all CPUs per interval, then the median over the intervals (the issue's definition)."""
    rec = read_recording(str(path))
    per_interval = []
    for group in rec.intervals():
        ok = [s for s in group if not s.error and not s.suspect]
        n = sum(s.counts[num] if num != "tsc" else s.tsc for s in ok)
        d = sum(s.counts[den] if den != "tsc" else s.tsc for s in ok)
        per_interval.append(n / d)
    return statistics.median(per_interval)


def test_the_all_row_is_the_machine_total_not_every_cpus_samples_pooled(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl"
    record(capsys, a, "--seed", "1")
    record(capsys, b, "--seed", "7")
    rows = {(r.cpu, r.metric): r for r in diff_rows(read_recording(str(a)), read_recording(str(b)))}
    assert rows[("all", "ipc")].a == pytest.approx(machine_total(a, "instructions", "cycles"), rel=1e-9)
    assert rows[("all", "ipc")].b == pytest.approx(machine_total(b, "instructions", "cycles"), rel=1e-9)
    assert rows[("all", "util")].a == pytest.approx(machine_total(a, "ref_cycles", "tsc"), rel=1e-9)
    assert rows[("all", "util")].b == pytest.approx(machine_total(b, "ref_cycles", "tsc"), rel=1e-9)


def test_the_spread_is_shown_and_a_change_inside_it_is_marked_as_noise(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = tmp_path / "a.jsonl"
    record(capsys, a, "--seed", "1")
    rec = read_recording(str(a))
    rows = {(r.cpu, r.metric): r for r in diff_rows(rec, rec)}
    ipc0 = sorted(s.counts["instructions"] / s.counts["cycles"] for s in rec.samples if s.cpu == 0)
    q1, _, q3 = statistics.quantiles(ipc0, n=4, method="inclusive")
    assert rows[("0", "ipc")].a_iqr == pytest.approx(q3 - q1, abs=2e-6)  # records carry 6 decimals
    code, out, err = run(capsys, "diff", str(a), str(a))
    assert code == 0, err
    assert out.splitlines()[3].split() == [
        "cpu",
        "metric",
        "A",
        "median",
        "A",
        "IQR",
        "B",
        "median",
        "B",
        "IQR",
        "change",
    ]
    line = next(x for x in out.splitlines() if x.split()[:2] == ["0", "IPC"])
    assert line.rstrip().endswith("+0.0% ~")  # no change at all is inside the spread
    assert "~ : the change is smaller than the spread" in out


def test_a_simulated_recording_is_not_compared_with_a_measured_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sim = tmp_path / "sim.jsonl"
    record(capsys, sim)
    lines = sim.read_text().splitlines()
    header = json.loads(lines[0])
    header.update(mode="msr", simulated=False)
    real = tmp_path / "real.jsonl"
    real.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    code, out, err = run(capsys, "diff", str(sim), str(real))
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert "SIMULATED" in err and "measured" in err


@needs_perf_events
def test_software_only_recordings_compare_what_they_measured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "sw.jsonl"
    code, _, err = run(
        capsys,
        "--backend",
        "perf",
        "--batch",
        "--interval",
        "0.1",
        "--count",
        "4",
        "--cores",
        "0",
        "--record",
        str(path),
    )
    assert code == 0, err
    rec = read_recording(str(path))
    metrics = {r.metric for r in diff_rows(rec, rec)}
    assert {"context_switches_per_s", "cpu_migrations_per_s", "page_faults_per_s"} <= metrics
    out = diff_table(rec, rec)
    assert "Ctx sw/s" in out and "Faults/s" in out


@pytest.mark.parametrize("columns", [80, 120])
def test_the_cgroup_section_names_cgroups_as_the_live_view_and_fits_the_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path, columns: int
) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    record(capsys, a, "--cgroups", "--seed", "1")
    record(capsys, b, "--cgroups", "--seed", "2")
    monkeypatch.setenv("COLUMNS", str(columns))
    code, out, err = run(capsys, "diff", str(a), str(b))
    assert code == 0, err
    section = out[out.index("\ncgroups") + 1 :].split("\n\n")[0].splitlines()
    assert all(len(line) <= columns for line in section), max(section, key=len)
    names = {line[: section[1].index("metric")].strip() for line in section[2:]}
    assert {"docker shop-api", "pod analytics/stream-0", "system.slice"} <= names, names
    assert not [name for name in names if name.startswith("/") and name != "/"]  # no raw paths
