"""The benchmark harness runs and writes the JSON it documents (shape only: no timing is asserted)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.flags import needs_perf_events, needs_tmux

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as bench  # noqa: E402
from benchmarks import floors, sampler  # noqa: E402
from benchmarks.stats import summary  # noqa: E402
from pmutop.hw import native_sampler  # noqa: E402

pytestmark = pytest.mark.integration  # starts processes, terminals or servers


def test_sampler_read_path_benchmark_writes_its_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real_threaded = sampler.threaded
    monkeypatch.setattr(sampler, "threaded", lambda **kw: real_threaded(**{**kw, "seconds": 0.2, "interval": 0.1}))
    out = tmp_path / "results.json"
    args = ["--quick", "--only", "sampler", "--sampler-cpus", "2", "--threaded-cpus", "2", "--out", str(out)]
    args += ["--readpath-cpus", "2", "3"]
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
    # The default read path (native sampler threads where the shim has them) and the Python one beside it.
    paths = ["native (default)", "python"] if native_sampler.available() else ["python"]
    for path in paths:
        assert results[f"read path 3 cpus {path}"]["ratio_to_2"] > 0
        assert results[f"read path 2 cpus {path}"]["median"] > 0
    if native_sampler.available():
        assert results["sampler sysroot-msr native (default)"]["median"] > 0
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


# -- issue 24: peers side by side, the emulated read path, key latency, targets (shape only, no timing)


def test_the_stand_in_pmu_keeps_the_counters_counting_and_leaves_the_control_registers_alone(tmp_path: Path) -> None:
    from helpers.sysroot_builder import read_msr

    from benchmarks import pmu_emulator

    root = pmu_emulator.build(tmp_path / "sysroot", 2)
    before = {cpu: {a: read_msr(root, cpu, a) for a in (0x10, 0x309, 0x30A, 0xC1, 0x186, 0x38F)} for cpu in (0, 1)}
    try:
        with pmu_emulator.running(root, 2, hz=20):
            time.sleep(1.0)
            after = {cpu: {a: read_msr(root, cpu, a) for a in before[cpu]} for cpu in (0, 1)}
    finally:
        bench.procs.cleanup()
    for cpu in (0, 1):
        for counter in (0x10, 0x309, 0x30A, 0xC1):  # TSC, instructions, cycles, PMC0
            assert after[cpu][counter] > before[cpu][counter], f"cpu {cpu} {counter:#x}"
        assert after[cpu][0x10] - before[cpu][0x10] >= after[cpu][0x30A] - before[cpu][0x30A]  # load <= 100%
        for control in (0x186, 0x38F):  # pmutop's check for another agent stays quiet
            assert after[cpu][control] == before[cpu][control]
    assert read_msr(root, 0, 0xC1) == read_msr(root, 0, 0x4C1)  # a counter and its full-width alias agree


@needs_tmux
def test_peers_side_by_side_measure_each_peer_or_say_why_not_and_set_the_target() -> None:
    from benchmarks import peers

    try:
        results = peers.side_by_side(seconds=0.5, repeat=1, warmup=0.5)
    finally:
        peers.procs.cleanup()
    names = [p.name for p in [*peers.peers(), *peers.pmutop_programs()]]
    assert list(results) == names
    for name in names:
        r = results[name]
        assert (r.get("skipped")) or (r["unit"] == "cpu-s/min" and r["min"] >= 0), (name, r)
    for name in ("pmutop --demo --sim-cpus 2", "pmutop real mode (--backend perf)"):
        r = results[name]
        if "median" in r and ("median" in results["s-tui -r 1"] or "median" in results["bpytop (1 s)"]):
            assert r["target"].startswith("<= ") and "s-tui and bpytop" in r["target"]
            assert r["met"] == (r["ratio"] <= 0.8)
    missing = [n for n in names[:5] if "skipped" in results[n]]
    for name in missing:
        assert "not installed" in results[name]["skipped"] and "--install-peers" in results[name]["skipped"]
    if missing:
        pytest.skip(f"not installed here: {', '.join(missing)} (the figures of the others were checked)")


@needs_tmux
def test_read_path_benchmark_gives_ratios_against_the_smallest_machine_and_the_demo() -> None:
    from benchmarks import readpath

    try:
        results = readpath.cost([2, 4], demo_cpus=4, seconds=0.5, repeat=1, warmup=0.2, python_cpus=4)
    finally:
        readpath.procs.cleanup()
    python = "read path 4 CPUs, Python drive"  # pmutop's default read path against its Python one
    assert set(results) == {"read path 2 CPUs", "read path 4 CPUs", python, "demo 4 CPUs (same run)"}
    assert results[python]["ratio"] == results[python]["median"] / results["read path 4 CPUs"]["median"]
    assert results[python]["samplers"] == "Python drive"
    for r in results.values():
        assert r["unit"] == "cpu-s/min" and r["runs"] == 1 and r["median"] > 0  # pmutop ran and drew
        assert 10 < r["rss_mib"] < 2000  # the live view's memory at the end of its run
    assert "ratio" not in results["read path 2 CPUs"]
    assert (
        results["read path 4 CPUs"]["ratio"]
        == results["read path 4 CPUs"]["median"] / results["read path 2 CPUs"]["median"]
    )
    demo = results["demo 4 CPUs (same run)"]
    assert demo["target"] == "<= 1.5x the read path at 4 CPUs" and demo["met"] == (demo["ratio"] <= 1.5)


@needs_tmux
def test_key_latency_gives_the_95th_percentile_on_the_demo_and_the_read_path() -> None:
    from benchmarks import readpath

    try:
        results = readpath.key_latency(cpus=4, presses=3)
    finally:
        readpath.procs.cleanup()
    assert set(results) == {"key latency demo 4 CPUs", "key latency read path 4 CPUs"}
    for r in results.values():
        assert r["unit"] == "ms" and r["runs"] == 3 and r["p95"] == max(r["values"])  # of 3: the slowest
        assert r["target"] == "p95 <= 50 ms" and r["met"] == (r["p95"] <= 50)
    assert readpath.p95([float(v) for v in range(1, 41)]) == 38.0  # nearest rank of 40 presses


def test_the_table_says_whether_each_target_is_met() -> None:
    results = {
        "pmutop --demo --sim-cpus 2": {
            **summary([0.8], "cpu-s/min"),
            "x_htop": 5.2,
            "ratio": 1.78,
            "target": "<= 0.448 (the cheaper of s-tui and bpytop)",
            "met": False,
        },
        "key latency demo 256 CPUs": {
            **summary([30.0, 40.0], "ms"),
            "p95": 40.0,
            "target": "p95 <= 50 ms",
            "met": True,
        },
        "s-tui -r 1": {"skipped": "s-tui is not installed (python -m benchmarks --only live --install-peers)"},
    }
    lines = bench.table(results).splitlines()
    assert "5.2x htop, ratio 1.78, target <= 0.448 (the cheaper of s-tui and bpytop) NOT MET" in lines[1]
    assert lines[2].endswith("p95 40, target p95 <= 50 ms MET")
    assert "skipped" in lines[3] and "--install-peers" in lines[3]


def test_memory_growth_finder_names_the_allocation_sites_that_grew() -> None:
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "memgrowth.py"),
            "--trace-from",
            "1",
            "--early",
            "2",
            "--late",
            "4",
            "--cpus",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("RSS ") and "traced Python heap" in lines[0]
    assert lines[1].startswith("net growth (KiB)")
    assert all(re.search(r"\S+:\d+", line) for line in lines[2:])  # file:line of each site


@needs_perf_events
def test_batch_floor_runs_the_real_batch_mode_with_util_unknown() -> None:
    # Where the perf backend falls back to software events (this VM), Util% comes from /proc/stat; the floor
    # runner prints the same records with Util% unknown, so that read is the only difference it measures.
    arguments = ["--batch", "--backend", "perf", "--events", "cpu-clock,context-switches", "--interval", "0.2"]
    common = {"capture_output": True, "text": True, "timeout": 60, "cwd": ROOT}
    floor = subprocess.run([sys.executable, "benchmarks/batch_floor.py", *arguments, "--count", "2"], **common)
    assert floor.returncode == 0, floor.stderr
    header, *rows = floor.stdout.splitlines()
    assert header.split()[:3] == ["time", "CPU", "Util%"] and rows
    assert {row.split()[2] for row in rows} == {"-"}  # unknown on every row, the total's included
    assert "own cost" in floor.stderr  # the rest of batch mode ran as usual


def test_batch_benchmark_measures_pmutop_perf_stat_and_the_floor_side_by_side() -> None:
    from benchmarks import programs

    try:
        results = programs.batch(seconds=0.3, repeat=1)
    finally:
        programs.procs.cleanup()
    assert set(results) == {programs.MINE, programs.PERF_STAT, programs.FLOOR, programs.PYTHON_FLOOR, programs.C_FLOOR}
    mine, perf = results[programs.MINE], results[programs.PERF_STAT]
    if "skipped" in mine or "skipped" in perf:
        pytest.skip(f"batch or perf stat cannot run here: {mine.get('skipped') or perf.get('skipped')}")
    assert mine["ratio"] == mine["median"] / perf["median"] and mine["met"] == (mine["ratio"] <= 0.9)
    floors = [results[programs.FLOOR], results[programs.PYTHON_FLOOR]]
    if programs.c_compiler():  # else it says why it was skipped
        floors.append(results[programs.C_FLOOR])
    else:
        assert "C compiler" in results[programs.C_FLOOR]["skipped"]
    for floor in floors:
        assert floor["ratio"] == floor["median"] / perf["median"] and "target" not in floor


def _c_floor(tmp_path: Path) -> list[str]:
    from benchmarks import programs

    built = programs._c_floor(str(tmp_path))
    if isinstance(built, str):
        pytest.skip(built)
    return built


@needs_perf_events
@pytest.mark.parametrize("language", ["python", "c"])
def test_batch_floors_read_every_cpu_each_interval(language: str, tmp_path: Path) -> None:
    # The bare loops the batch benchmark sets beside pmutop: a line per CPU and an `all` line every interval,
    # from the same perf groups (the cpu-clock column: the interval's seconds, as perf counted them).
    command = [sys.executable, "benchmarks/batch_python_floor.py"] if language == "python" else _c_floor(tmp_path)
    floor = subprocess.Popen([*command, "0.1"], stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert floor.stdout is not None
        cpus = len(os.sched_getaffinity(0))
        lines = [floor.stdout.readline().split() for _ in range(2 * (cpus + 1))]
    finally:
        floor.kill()
        floor.wait()
    first, second = lines[: cpus + 1], lines[cpus + 1 :]
    assert [line[1] for line in first] == [*map(str, sorted(os.sched_getaffinity(0))), "all"]
    assert [float(first[0][0]), float(second[0][0])] == [0.1, 0.2]  # each deadline's time, as batch mode prints it
    assert all(0.05 < float(line[2]) < 0.3 for line in first[:-1])  # cpu-clock: about 0.1 s per interval
    # Context switches counted (at least the loop's own sleeps), and the `all` line their sum.
    assert int(first[-1][2]) == sum(int(line[3]) for line in first[:-1]) > 0
