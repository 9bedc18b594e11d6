from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from pmutop.core.clock import ManualClock
from pmutop.probes.process_scan import ProcessUse, Scan
from pmutop.probes.tasks import ProcTasks, SimTasks
from pmutop.sim.platform import SimPlatform


class _Scans:
    """ProcessScan's answers, one per call (the tracker's scan of /proc is tested in test_issue21_tracker)."""

    def __init__(self, root: Path, *scans: list[ProcessUse]) -> None:
        self.root, self._scans = str(root), list(scans)

    def scan(self) -> Scan:
        return Scan({p.pid: p for p in self._scans.pop(0)}, {}, 1.0)


def _use(pid: int, comm: str, cpus: dict[int, float], start: int = 100) -> ProcessUse:
    return ProcessUse(pid, start, 0.0, comm, len(cpus) or 1, cpu_seconds=sum(cpus.values()), cpus=cpus)


def test_top_task_per_cpu_is_the_largest_cpu_time_there_with_psutils_name(tmp_path: Path) -> None:
    (tmp_path / "12").mkdir()
    (tmp_path / "12" / "cmdline").write_bytes(b"/usr/sbin/busy-loop-with-a-long-name\0--flag\0")
    scans = _Scans(
        tmp_path,
        [],  # the first scan only primes
        [
            _use(10, "postgres", {0: 0.95}),
            _use(11, "java", {0: 0.2, 1: 0.3}),  # its threads on two CPUs: each CPU gets its own share
            _use(12, "busy-loop-with-", {1: 0.4}),  # the kernel's comm is cut at 15 characters
            _use(13, "cron", {7: 3.0}),  # on a CPU not shown
        ],
    )
    tasks = ProcTasks([0, 1], scans)  # type: ignore[arg-type]
    assert tasks.top_per_cpu() == {}
    top = tasks.top_per_cpu()
    assert set(top) == {0, 1}
    assert (top[0].name, top[0].pid, top[0].cpu_seconds) == ("postgres", 10, 0.95)
    assert (top[1].name, top[1].pid) == ("busy-loop-with-a-long-name", 12)  # completed from the command line


def test_on_this_machines_proc_a_busy_process_is_found_on_its_cpu() -> None:
    spinner = subprocess.Popen(["bash", "-c", "while :; do :; done"])
    try:
        tasks = ProcTasks(range(os.cpu_count() or 1))
        tasks.top_per_cpu()
        time.sleep(1.0)
        top = tasks.top_per_cpu()
        assert top and all(t.cpu_seconds > 0 and t.name for t in top.values())
        assert sum(t.cpu_seconds for t in top.values()) >= 0.2  # at least the spinner's share of a CPU
    finally:
        spinner.kill()
        spinner.wait()


def test_only_the_cpus_asked_for() -> None:
    tasks = ProcTasks([10_000])
    tasks.top_per_cpu()
    assert tasks.top_per_cpu() == {}


def test_simulated_tasks_follow_the_workload_phase(sim: SimPlatform, clock: ManualClock) -> None:
    # Each regime is run by its program (pmutop.sim.processes): the top task of a core is that program.
    programs = {
        "busy": {"cc1plus"},
        "memory": {"stream"},
        "mixed": {"mysqld", "nginx"},
        "branchy": {"nginx"},
        "frontend": {"java"},
        "idle": {"systemd-journal", "sshd", "cron", "containerd", "kubelet"} | {f"kworker/{c}:1" for c in range(4)},
    }
    source = SimTasks(sim, sim.online_cpus())
    for _ in range(20):
        clock.advance(0.1)  # one workload segment: one run per core
        start = sim.machine.elapsed_ns() - 50_000_000
        tasks = source.top_per_cpu()
        assert set(tasks) == set(sim.online_cpus())
        for cpu, task in tasks.items():
            regime = str(sim.machine.workload(cpu).rates_at(start).regime)
            phase = str(sim.machine.workload(cpu).rates_at(start).phase)
            assert task.name in programs[phase if phase == "mixed" else regime], (cpu, regime, task)
            assert sim.machine.processes.process(task.pid).comm == task.name
