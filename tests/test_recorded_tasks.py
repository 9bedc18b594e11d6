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
    # The simulated machine's processes (pmutop.sim.processes): each a pid of its process table.
    programs = {"cc1plus", "stream", "mysqld", "nginx", "java", "systemd-journal", "sshd", "cron", "containerd"}
    assert tasks and all(t["name"] in programs | {"kubelet"} or t["name"].startswith("kworker/") for t in tasks)
    assert all(t["pid"] > 1 for t in tasks)


def test_simulated_tasks_report_the_cpu_time_of_the_interval() -> None:
    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(cpus=8, seed=7), clock)
    source = SimTasks(platform, range(8))
    source.top_per_cpu()
    clock.advance(0.5)
    now = platform.machine.elapsed_ns()
    busy = {}  # seconds each core was busy in the interval: its unhalted reference cycles at the TSC rate
    for cpu in range(8):
        workload = platform.machine.workload(cpu)
        ref = workload.cumulative(now).total.ref_cycles - workload.cumulative(now - 500_000_000).total.ref_cycles
        busy[cpu] = ref / workload.tsc_hz
    tops = source.top_per_cpu()
    assert tops
    for cpu, task in tops.items():
        # The top task ran at most as long as the core was busy, and all of it where it ran alone.
        assert task.cpu_seconds <= busy[cpu] * (1 + 1e-6)
    assert any(task.cpu_seconds == pytest.approx(busy[cpu], rel=1e-6) for cpu, task in tops.items())
