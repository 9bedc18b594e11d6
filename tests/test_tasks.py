from __future__ import annotations

from conftest import FakeProcess, FakePsutil

from pmutop.core.clock import ManualClock
from pmutop.probes.tasks import PsutilTasks, SimTasks
from pmutop.sim.platform import SimPlatform


def test_top_task_is_the_largest_cpu_time_delta_per_core(fake_psutil: FakePsutil) -> None:
    tasks = PsutilTasks([0, 1], fake_psutil.process_iter)
    fake_psutil.processes = [FakeProcess(10, "postgres", 0, 100.0), FakeProcess(11, "java", 0, 500.0)]
    assert tasks.top_per_cpu() == {}  # first call only primes: no interval yet
    fake_psutil.processes = [
        FakeProcess(10, "postgres", 0, 100.9, 0.05),  # 0.95 s in the interval
        FakeProcess(11, "java", 0, 500.2),  # more total time, less in the interval
        FakeProcess(12, "gcc", 1, 0.4, created=5.0),  # started during the interval
        FakeProcess(13, "cron", 7, 3.0, created=5.0),  # on a CPU we do not watch
    ]
    top = tasks.top_per_cpu()
    assert set(top) == {0, 1}
    assert (top[0].name, top[0].pid) == ("postgres", 10) and abs(top[0].cpu_seconds - 0.95) < 1e-9
    assert (top[1].name, top[1].pid) == ("gcc", 12)


def test_a_reused_pid_is_a_new_process(fake_psutil: FakePsutil) -> None:
    tasks = PsutilTasks([0], fake_psutil.process_iter)
    fake_psutil.processes = [FakeProcess(10, "old", 0, 50.0, created=1.0)]
    tasks.top_per_cpu()
    fake_psutil.processes = [FakeProcess(10, "new", 0, 0.3, created=9.0)]
    top = tasks.top_per_cpu()
    assert top[0].name == "new" and abs(top[0].cpu_seconds - 0.3) < 1e-9


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
