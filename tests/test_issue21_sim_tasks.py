"""Issue 21, the simulated PMU's processes: what each process ran adds up exactly to each core's counts, a process
that moves between cores keeps its totals, an exiting job's last interval is counted, and all of it follows the
seed (pmutop.sim.processes, pmutop.sim.process_counters)."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Iterator

import pytest

from pmutop.app.main import main
from pmutop.backends.sim import SimBackend
from pmutop.core.clock import ManualClock
from pmutop.core.sample import Sample
from pmutop.core.task_reading import SIMULATED, TaskSnapshot
from pmutop.engine.engine import Engine
from pmutop.probes.tasks import SimTasks
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform
from pmutop.sim.process_counters import SimTaskCounters

HARDWARE = ("cycles", "instructions", "llc_misses", "branch_misses")
EVERY = 10_000  # a --top larger than the process table: every process that ran


class Run:
    """An unthreaded engine on a simulated machine with a manual clock: every interval's CPU samples."""

    def __init__(self, seed: int = 1, cpus: int = 8, model: str = "spr") -> None:
        self.clock = ManualClock(start_ns=1_000_000_000)
        self.platform = SimPlatform(SimConfig(cpus=cpus, seed=seed, model=model), self.clock)
        self.engine = Engine(
            SimBackend(self.platform, self.clock, None),
            self.platform,
            self.clock,
            list(range(cpus)),
            1.0,
            threaded=False,
        )
        self.engine.start()

    def interval(self, seconds: float) -> list[Sample]:
        self.clock.advance(seconds)
        self.engine.tick()
        latest = [self.engine.rings[cpu].latest() for cpu in self.engine.cpus]
        assert all(s is not None for s in latest)
        return [s for s in latest if s is not None]

    def stop(self) -> None:
        self.engine.stop()


@pytest.fixture
def run() -> Iterator[Run]:
    r = Run()
    yield r
    r.stop()


def _summed(snapshot: TaskSnapshot) -> dict[str, int]:
    total: dict[str, int] = defaultdict(int)
    for t in snapshot.tasks:
        for k, v in t.counts.items():
            total[k] += v
    return total


def test_on_each_core_the_processes_add_up_to_the_cores_counts_exactly(run: Run) -> None:
    # One source per core, fed only that core's samples: its processes are what ran on that core.
    per_core = {cpu: SimTaskCounters(run.platform.machine, top=EVERY) for cpu in run.engine.cpus}
    machine = SimTaskCounters(run.platform.machine, top=EVERY, all_cgroups=True)
    for source in [*per_core.values(), machine]:
        source.begin()
    seen_two_processes_on_a_core = False
    for seconds in [1.0, 0.37, 2.5, 1.0, 0.1] * 6:
        samples = run.interval(seconds)
        for s in samples:
            snapshot = per_core[s.cpu].read([s])
            assert snapshot.mode == SIMULATED
            summed = _summed(snapshot)
            for event in HARDWARE:
                assert summed[event] == s.counts[event], (s.cpu, event)
            seen_two_processes_on_a_core |= len(snapshot.tasks) > 1
            # task_clock is the core's unhalted time: its reference cycles at the TSC rate
            assert abs(summed["task_clock"] - s.counts["ref_cycles"] * 1e9 / run.platform.machine.config.tsc_hz) < 2
        whole = machine.read(samples)
        summed = _summed(whole)
        root = next(c for c in whole.cgroups if c.path == "/")
        for event in HARDWARE:
            assert summed[event] == sum(s.counts[event] for s in samples)
            assert root.counts[event] == summed[event]
        for shares in whole.cpu_shares.values():
            assert sum(share for _, share in shares) == pytest.approx(1.0, abs=1e-3)
    assert seen_two_processes_on_a_core  # the runs change inside intervals too


def test_a_cgroup_counts_its_children_and_its_own_processes(run: Run) -> None:
    source = SimTaskCounters(run.platform.machine, top=EVERY, all_cgroups=True)
    source.begin()
    for _ in range(5):
        snapshot = source.read(run.interval(1.0))
        by_path = {c.path: c for c in snapshot.cgroups}
        assert {"/system.slice/nginx.service", "/user.slice/user-1000.slice/session-2.scope"} <= set(by_path)
        assert any(c.name == "docker shop-api" for c in snapshot.cgroups)
        assert any(c.name.startswith("pod analytics/") for c in snapshot.cgroups)
        for path, group in by_path.items():
            children = [c for c in snapshot.cgroups if c.parent == path]
            own = [t for t in snapshot.tasks if t.cgroup == path]
            for event in (*HARDWARE, "task_clock", "context_switches"):
                expected = sum(c.counts[event] for c in children) + sum(t.counts[event] for t in own)
                assert group.counts[event] == expected, (path, event)


def test_a_process_that_migrates_keeps_its_totals(run: Run) -> None:
    machine = run.platform.machine
    stepwise = SimTaskCounters(machine, top=EVERY)
    stepwise.begin()
    whole = SimTaskCounters(machine, top=EVERY)  # one long interval over the same span, no samples
    whole.begin()
    totals: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    cpus: dict[int, set[int]] = defaultdict(set)
    identity: dict[int, set[tuple[str, float]]] = defaultdict(set)
    for _ in range(40):
        for t in stepwise.read(run.interval(1.0)).tasks:
            for k, v in t.counts.items():
                totals[t.pid][k] += v
            cpus[t.pid] |= set(t.cpus)
            identity[t.pid].add((t.comm, t.start_time))
    once = {t.pid: t for t in whole.read().tasks}
    movers = [pid for pid in cpus if len(cpus[pid]) > 1]
    assert movers, "no process ran on more than one core in 40 s"
    # A single-threaded nginx worker moves too, not only a multi-threaded process's threads.
    assert any(getattr(machine.processes.process(pid), "comm", None) == "nginx" for pid in movers)
    for pid in movers:
        assert len(identity[pid]) == 1  # the same process wherever it runs
        assert set(once[pid].cpus) == cpus[pid]
        assert dict(totals[pid]) == once[pid].counts


def test_an_exiting_job_has_its_last_interval_counted_then_is_gone(run: Run) -> None:
    machine = run.platform.machine
    source = SimTaskCounters(machine, top=EVERY)
    source.begin()
    history: dict[int, list[tuple[dict[str, int], bool, tuple[int, ...]]]] = defaultdict(list)
    for _ in range(30):
        for t in source.read(run.interval(0.7)).tasks:
            history[t.pid].append((t.counts, t.exited, t.cpus))
    exited = {pid: h for pid, h in history.items() if any(e for _, e, _ in h)}
    assert exited, "no job exited in 21 s"
    whole_lives = 0
    for pid, h in exited.items():
        proc = machine.processes.process(pid)
        assert proc is not None and proc.comm == "cc1plus" and proc.end_tick is not None
        counts, flag, _ = h[-1]
        assert flag and counts["instructions"] > 0  # its last interval is counted...
        assert all(not e for _, e, _ in h[:-1])  # ...once: it is not shown after it exited
        if proc.start_tick > machine.workload(0).ticks(1_000_000_000):  # it started after the counting did
            whole_lives += 1
            (cpu,) = {c for _, _, cpus in h for c in cpus}  # a job runs on one core
            # Its whole life is the workload's amounts between its start and its exit on that core.
            workload = machine.workload(cpu)
            start, end = workload.cumulative_ticks(proc.start_tick), workload.cumulative_ticks(proc.end_tick)
            for event in HARDWARE:
                truth = getattr(end.total, event) - getattr(start.total, event)
                assert sum(c[event] for c, _, _ in h) == truth
    assert whole_lives


def test_pid_counts_exactly_that_process_until_it_exits(run: Run) -> None:
    machine = run.platform.machine
    run.interval(1.0)
    tasks = SimTasks(run.platform, range(8))
    tasks.top_per_cpu()
    run.interval(0.3)
    job = next(t for t in tasks.top_per_cpu().values() if t.name == "cc1plus")
    source = SimTaskCounters(machine, pids=[job.pid, 1422])
    source.begin()
    seen = []
    for _ in range(60):
        readings = source.read(run.interval(0.5)).tasks
        seen.append([(t.pid, t.exited) for t in readings])
        if len(readings) == 1:
            break
    assert all(pids[0][0] == job.pid for pids in seen[:-1])
    assert [e for pids in seen for p, e in pids if p == job.pid].count(True) == 1
    assert seen[-1] == [(1422, False)]  # mysqld runs on (zero counts while no core runs it)


def test_the_same_seed_gives_the_same_processes_however_often_it_is_read() -> None:
    def table(seed: int, step: float) -> set[tuple[int, str, float]]:
        r = Run(seed=seed)
        try:
            source = SimTaskCounters(r.platform.machine, top=EVERY)
            source.begin()
            seen = set()
            for _ in range(round(20 / step)):
                seen |= {(t.pid, t.comm, t.start_time) for t in source.read(r.interval(step)).tasks}
            return seen
        finally:
            r.stop()

    assert table(3, 1.0) == table(3, 0.25)
    assert table(3, 1.0) != table(4, 1.0)


def test_the_per_core_counts_are_the_same_with_the_process_table() -> None:
    plain, counted = Run(seed=5), Run(seed=5)
    try:
        source = SimTaskCounters(counted.platform.machine, top=EVERY)
        source.begin()
        for _ in range(10):
            a, b = plain.interval(1.0), counted.interval(1.0)
            source.read(b)
            assert [s.counts for s in a] == [s.counts for s in b]
    finally:
        plain.stop()
        counted.stop()


def test_demo_batch_prints_simulated_task_records_that_add_up_to_the_cpu_records(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The threaded engine: the intervals' ends are the samplers' own reads (found by their TSC).
    argv = ["--demo", "--batch", "--tasks", "--format", "json", "--count", "3", "--sim-cpus", "4", "--interval", "0.2"]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    tasks = [r for r in records if r["kind"] == "task"]
    assert tasks and all(r["mode"] == "SIMULATED" for r in tasks)
    assert {r["interval_index"] for r in tasks} == {1, 2, 3}
    assert {"cc1plus", "nginx", "mysqld", "stream", "java"} & {r["comm"] for r in tasks}
    for index in (1, 2, 3):
        cpu = [r for r in records if r["kind"] == "cpu" and r["interval_index"] == index]
        task = [r for r in tasks if r["interval_index"] == index]
        for event in HARDWARE:
            assert sum(r[event] for r in task) == sum(r[event] for r in cpu), (index, event)


def test_demo_refuses_an_unknown_pid_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--demo", "--batch", "--pid", "99999", "--count", "1", "--sim-cpus", "2"])
    _, err = capsys.readouterr()
    assert code == 2
    assert err.strip().count("\n") == 0 and "--pid 99999: no such process in the simulated machine" in err


def test_demo_counts_a_cgroup_named_by_its_absolute_path(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--demo", "--batch", "--cgroup", "/sys/fs/cgroup/system.slice/", "--records", "cgroup", "--format", "json"]
    code = main([*argv, "--count", "1", "--sim-cpus", "2", "--interval", "0.1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert {json.loads(line)["cgroup"] for line in out.splitlines()} == {"/system.slice"}


def test_each_cores_top_task_is_the_process_its_slices_ran_longest_lowest_pid_first() -> None:
    machine = SimPlatform(SimConfig(cpus=6, seed=8, model="spr"), ManualClock()).machine
    table = machine.processes
    seg = table.seg_ticks
    ticks = [0, 1, seg - 1, 7 * seg + 3, 9 * seg, 31 * seg + 5, 80 * seg, 150 * seg + 17, 151 * seg, 400 * seg]
    for start, end in itertools.pairwise(ticks):
        want: dict[int, tuple[str, int, float]] = {}
        for cpu in range(6):
            busy: dict[int, int] = defaultdict(int)
            for run, before, after in table.slices(cpu, start, end):
                busy[run.pid] += after[4] - before[4]
            if busy and max(busy.values()) > 0:
                pid = min(busy, key=lambda p: (-busy[p], p))
                proc = table.process(pid)
                assert proc is not None
                want[cpu] = (proc.comm, pid, busy[pid] / table.tsc_hz)
        assert table.top_per_cpu(list(range(6)), start, end) == want, (start, end)
