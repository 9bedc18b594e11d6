"""The benchmark harness runs and writes the JSON it documents (shape only: no timing is asserted)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers.flags import needs_tmux

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as bench  # noqa: E402
from benchmarks import floors, sampler  # noqa: E402

pytestmark = pytest.mark.integration  # starts processes, terminals or servers


def test_sampler_read_path_benchmark_writes_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_threaded = sampler.threaded
    monkeypatch.setattr(sampler, "threaded", lambda **kw: real_threaded(**{**kw, "seconds": 0.2, "interval": 0.1}))
    out = tmp_path / "results.json"
    args = ["--quick", "--only", "sampler", "--sampler-cpus", "2", "--threaded-cpus", "2", "--out", str(out)]
    assert bench.main(args) == 0
    report = json.loads(out.read_text())
    assert report["quick"] is True
    results = report["results"]
    expected = {"sampler sim", "sampler sysroot-msr", "sampler sysroot-rdpmc", "sampler sim threaded"}
    assert expected <= set(results)
    for name in expected:
        r = results[name]
        assert r["unit"] == "us/core-sample" and r["min"] <= r["median"] <= r["max"] and r["runs"] == len(r["values"])
    # The rdpmc paths take one shim call per sample; the msr file path none.
    assert results["sampler sim"]["shim_calls_per_sample"] == 1.0
    assert results["sampler sysroot-rdpmc"]["shim_calls_per_sample"] == 1.0
    assert results["sampler sysroot-msr"]["shim_calls_per_sample"] == 0.0
    assert (
        results["sampler sysroot-msr"]["msr_reads_per_sample"]
        > results["sampler sysroot-rdpmc"]["msr_reads_per_sample"]
    )
    table = capsys.readouterr().out
    assert "sampler sysroot-rdpmc" in table and str(out) in table


@needs_tmux
def test_floor_benchmarks_measure_a_textual_app_and_idle_threads_and_leave_nothing_running() -> None:
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    try:
        results = floors.floors([2], seconds=0.5, repeat=1, warmup=1.0)
    finally:
        floors.procs.cleanup()
    assert set(results) == {"floor: textual idle", "floor: textual redraw", "floor: 2 threads waking 1/s"}
    for r in results.values():
        assert r["unit"] == "cpu-s/min" and r["runs"] == 1 and r["min"] >= 0
    # A redrawing app costs something; both programs ran (a program that failed to start measures nothing).
    assert results["floor: textual redraw"]["median"] > 0
    assert {p.pid for p in psutil.Process().children(recursive=True)} <= before
