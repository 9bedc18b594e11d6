"""A recording keeps each CPU's top task as the live view showed it, and the simulated tasks' CPU time is the
time they ran in the interval (not a fraction)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pmutop.app.main import main
from pmutop.core.clock import ManualClock
from pmutop.probes.tasks import SimTasks
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform


def test_a_batch_recording_keeps_the_top_task_of_each_busy_cpu(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    code = main(["--demo", "--batch", "--count", "3", "--interval", "0.1", "--sim-cpus", "4", "--record", str(path)])
    _, err = capsys.readouterr()
    assert code == 0, err
    lines = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    tasks = [line["task"] for line in lines if line.get("task")]
    assert tasks and all(t["name"].startswith("sim-") and t["pid"] >= 4000 for t in tasks)


def test_simulated_tasks_report_the_cpu_time_of_the_interval() -> None:
    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(cpus=8, seed=7), clock)
    source = SimTasks(platform, range(8))
    source.top_per_cpu()
    clock.advance(0.5)
    busy = {cpu: platform.machine.workload(cpu).rates_at(platform.machine.elapsed_ns()).util for cpu in range(8)}
    tops = source.top_per_cpu()
    assert tops
    for cpu, task in tops.items():
        assert task.cpu_seconds == pytest.approx(busy[cpu] * 0.5, rel=1e-6)
