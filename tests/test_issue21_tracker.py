"""issue 21, the process view's counters: the top N processes by CPU (perf, exact; hysteresis, exited rows,
PID reuse), the msr backend's estimate, and `--batch --tasks` against `perf stat -p`."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest
from helpers.processes import run_pmutop as pmutop
from helpers.workloads import PING_PONG, beside_perf_stat, perf_stat_works, procs, start

from pmutop.app.console import NEEDS_TERMINAL
from pmutop.core.sample import Sample
from pmutop.core.task_reading import ESTIMATED, TaskSnapshot
from pmutop.hw.perf_event import PerfOpenError
from pmutop.probes.process_scan import ProcessScan, ProcessUse, Scan
from pmutop.probes.task_estimate import TaskEstimate
from pmutop.probes.top_tasks import TopTaskCounters

__all__ = ["procs"]  # the fixture (pytest finds it here)
TICK_NS = 1_000_000  # each fake thread's task_clock grows by this per read
# Busy for argv[1] seconds of wall time.
SPIN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end: pass"


class FakeKernel:
    """perf_event_open and read() without a PMU: real fds (/dev/null, so closing and fd counts are real),
    and each group's task_clock grows by TICK_NS and context switches by 10 per read. `refuse(pid, opened)`
    may answer an errno for a thread (`opened`: how many distinct processes were counted so far)."""

    def __init__(self, refuse: Callable[[int, int], int | None] | None = None) -> None:
        self.refuse = refuse
        self.reads: dict[int, int] = {}
        self.pids: set[int] = set()

    def open(self, _attr: object, tid: int, _cpu: int, group: int, *_: object) -> int:
        why = self.refuse(tid, len(self.pids)) if self.refuse else None
        if why:
            raise PerfOpenError(os.strerror(why), why)
        fd = os.open("/dev/null", os.O_RDONLY | os.O_CLOEXEC)
        if group == -1:
            self.reads[fd] = 0
            if tid != os.getpid():  # the hardware probe opens pmutop's own
                self.pids.add(tid)
        return fd

    def read(self, fd: int, size: int) -> bytes:
        n = size // 8 - 3
        self.reads[fd] += 1
        k = self.reads[fd]
        return struct.pack(f"={3 + n}Q", n, k * 1000, k * 1000, *[k * TICK_NS, k * 10][:n])


class FakeSource:
    """A ProcessSource whose processes and CPU use the test sets before each read (`use`)."""

    def __init__(self) -> None:
        self.procs: dict[int, ProcessUse] = {}

    def use(self, cpu: dict[int, float], *, start: dict[int, int] | None = None) -> None:
        """The processes that exist at the next scan (pid -> CPU seconds used in the interval, on CPU pid % 2)."""
        starts = start or {}
        self.procs = {
            pid: ProcessUse(pid, starts.get(pid, 100), 1e9 + starts.get(pid, 100), f"p{pid}", 1, False, s, {pid % 2: s})
            for pid, s in cpu.items()
        }

    def scan(self) -> Scan:
        return Scan({pid: replace(p) for pid, p in self.procs.items()}, {0: 1.0, 1: 1.0}, 1.0)

    def user(self, pid: int, start: int) -> str:
        return "alice"

    cgroup_path = "/user.slice"
    cgroup_reads = 0

    def cgroup(self, pid: int) -> str:
        self.cgroup_reads += 1
        return self.cgroup_path

    def threads(self, pid: int) -> list[tuple[int, str]]:
        return [(pid, f"p{pid}-main")] if pid in self.procs else []

    def close(self) -> None:
        pass


def tracker(source: FakeSource, top: int, kernel: FakeKernel | None = None) -> TopTaskCounters:
    kernel = kernel or FakeKernel()
    return TopTaskCounters(top, [], opener=kernel.open, read_fd=kernel.read, source=source)


def ranked(n: int, first: int = 1) -> dict[int, float]:
    """`n` processes, pid `first` busiest."""
    return {pid: 0.5 - 0.01 * i for i, pid in enumerate(range(first, first + n))}


def rows(snapshot: TaskSnapshot) -> dict[int, tuple[bool, dict[str, int]]]:
    return {r.pid: (r.exited, r.counts) for r in snapshot.tasks}


@pytest.fixture
def source() -> Iterator[FakeSource]:
    yield FakeSource()


def test_a_process_enters_after_one_interval_in_the_top_n(source: FakeSource) -> None:
    source.use(ranked(6))
    t = tracker(source, top=2)
    t.begin()  # ranks by the CPU used since the tracker was made: 1 and 2 are counted from now
    snap = t.read()
    assert sorted(rows(snap)) == [1, 2]
    assert all(r.counts == {"task_clock": TICK_NS, "context_switches": 10} for r in snap.tasks)
    # 5 becomes the busiest: it is counted from the next interval on, its first row covers a whole interval.
    source.use(ranked(6) | {5: 0.9})
    assert sorted(rows(t.read())) == [1, 2]
    snap = t.read()
    assert sorted(rows(snap)) == [1, 2, 5]
    five = next(r for r in snap.tasks if r.pid == 5)
    assert five.counts["task_clock"] == TICK_NS and five.counted == 1.0
    assert (five.user, five.cgroup, five.cpus, five.start_time) == ("alice", "/user.slice", (1,), 1e9 + 100)
    assert [(th.pid, th.comm) for th in five.thread_readings] == [(5, "p5-main")]
    # The snapshot lists who ran on each CPU with their share, counted or not.
    assert snap.cpu_shares[1][0] == (5, 0.9) and (3, 0.48) in snap.cpu_shares[1]
    t.close()


def test_a_process_stays_while_in_the_top_2n_and_leaves_after_5_intervals_outside(source: FakeSource) -> None:
    source.use(ranked(8))
    t = tracker(source, top=2)
    t.begin()
    # 1 falls to fourth place (inside the top 2N = 4): it stays, interval after interval.
    source.use(ranked(8) | {1: 0.47})
    for _ in range(8):
        assert 1 in rows(t.read())
    # Now it used no CPU at all (outside the top 4): counted 5 more intervals, gone from the 6th.
    source.use(ranked(8) | {1: 0.0})
    seen = [1 in rows(t.read()) for _ in range(7)]
    assert seen == [True] * 5 + [False] * 2
    t.close()


def test_more_processes_than_the_top_n_say_why(source: FakeSource) -> None:
    source.use(ranked(8))
    t = tracker(source, top=2)
    t.begin()
    snap = t.read()
    assert len(snap.tasks) == 2 and not any("top 2" in n for n in snap.notes)
    # 3 and 4 take the lead; 1 and 2 stay counted while in the top 4: four rows for a top 2, and a line says why.
    source.use(ranked(8) | {3: 0.9, 4: 0.8})
    t.read()
    snap = t.read()
    assert len(snap.tasks) == 4
    assert (
        "top 2: 4 processes counted: one enters after an interval in the top 2 and leaves after 5 intervals "
        "outside the top 4"
    ) in snap.notes
    t.close()


def test_no_churn_when_the_top_processes_swap_places(source: FakeSource) -> None:
    source.use(ranked(4))
    kernel = FakeKernel()
    t = tracker(source, top=2, kernel=kernel)
    t.begin()
    for i in range(10):  # 1,2 and 3,4 swap every interval: all four stay counted, nothing reopened
        source.use(ranked(4) if i % 2 else {3: 0.5, 4: 0.49, 1: 0.1, 2: 0.09})
        t.read()
    assert sorted(rows(t.read())) == [1, 2, 3, 4]
    assert kernel.pids == {1, 2, 3, 4}
    t.close()


def test_an_exited_process_is_read_once_more_then_marked_3_intervals_then_gone(source: FakeSource) -> None:
    source.use(ranked(3))
    t = tracker(source, top=3)
    t.begin()
    t.read()
    source.use({1: 0.5, 3: 0.4})  # 2 exited during this interval
    last = rows(t.read())
    assert last[2] == (True, {"task_clock": TICK_NS, "context_switches": 10})  # its last interval, counted
    after = [rows(t.read()).get(2) for _ in range(5)]
    assert after == [(True, {})] * 3 + [None] * 2
    t.close()


def test_the_printers_show_exited_and_no_permission_rows_without_counts() -> None:
    import io

    from pmutop.core.task_reading import TaskReading
    from pmutop.sinks.batch_tasks import TASK_PRINTERS

    events = ["task_clock", "context_switches"]
    gone = TaskReading(7, "worker", "alice", 0, 1.0, {}, 0.0, exited=True)
    denied = TaskReading(8, "sshd", "root", 1, 1.0, {}, 0.0, no_permission=True)
    out = {}
    for fmt, printer in TASK_PRINTERS.items():
        buf = io.StringIO()
        p = printer(buf, events, "perf")
        p.write(gone, time=1.0, index=1)
        p.write(denied, time=1.0, index=1)
        out[fmt] = buf.getvalue().splitlines()
    table = out["table"]
    assert table[1].split()[-1] == "exited" and table[2].split()[-1] == "no-permission"
    assert "-" in table[1].split()  # the empty values print as '-', not 0
    assert '"task_clock":null' in out["json"][0] and '"exited":true' in out["json"][0]
    # kind,time,interval_index,pid,comm,user,cgroup,threads,cpus,interval, then the counts: empty, not 0
    assert out["csv"][1].startswith("task,1.0,1,7,worker,alice,,0,,1.0,,,")


def test_a_real_process_that_exits_between_two_reads_keeps_its_last_interval() -> None:
    spin = subprocess.Popen([sys.executable, "-c", SPIN, "1.2"])
    try:
        t = TopTaskCounters(32, [])
        time.sleep(0.3)
        t.begin()
        snaps = []
        for _ in range(5):
            time.sleep(0.4)
            snaps.append([r for r in t.read().tasks if r.pid == spin.pid])
        t.close()
    finally:
        spin.kill()
        spin.wait()
    mine = [row for snap in snaps for row in snap]
    live = [r for r in mine if not r.exited]
    last = next(r for r in mine if r.exited)
    assert live and all(r.counts["task_clock"] > 0.1e9 for r in live)
    # Its last reading is counted (the part of the interval before it exited), the rows after it are empty.
    assert "task_clock" in last.counts and last.counts["task_clock"] < 0.45e9
    exited = [r.counts for r in mine if r.exited]
    assert exited[1:] == [{}] * (len(exited) - 1)


def samples(counts: dict[int, dict[str, int]]) -> list[Sample]:
    return [Sample(cpu, 1, 1.0, 1.0, None, None, c) for cpu, c in counts.items()]


def test_the_msr_estimate_splits_each_cores_counts_by_busy_time_and_says_so(source: FakeSource) -> None:
    # 2 ran 0.5 s on CPU 0, 4 ran 0.25 s on CPU 0; 3 ran 0.5 s on CPU 1; each CPU was busy 1 s.
    source.use({2: 0.5, 4: 0.25, 3: 0.5})
    est = TaskEstimate(2, ["instructions", "cycles", "ref_cycles"], source=source)
    est.begin()
    snap = est.read(samples({0: {"instructions": 4000, "cycles": 2000}, 1: {"instructions": 1000, "cycles": 800}}))
    assert snap.mode == ESTIMATED and est.events == ["task_clock", "cycles", "instructions"]
    by_pid = {r.pid: r for r in snap.tasks}
    assert sorted(by_pid) == [2, 3]  # the top 2
    assert by_pid[2].counts == {"task_clock": 500_000_000, "cycles": 1000, "instructions": 2000}
    assert by_pid[3].counts == {"task_clock": 500_000_000, "cycles": 400, "instructions": 500}
    assert all(r.estimate and r.counted == 0.0 for r in snap.tasks)
    # 1 s of the cores' 2 s busy time is explained by the two shown.
    assert snap.notes == (
        "est.: the processes shown explain 50% of the cores' busy time; exact numbers: --backend perf",
    )
    assert snap.cpu_shares[0] == ((2, 0.5), (4, 0.25))
    est.close()


@pytest.mark.integration
def test_batch_tasks_finds_a_busy_process_with_perf_stat_p_numbers(procs: list[subprocess.Popen[str]]) -> None:
    if not perf_stat_works():
        pytest.skip("perf stat or perf_event_open is not available here")
    cpu = max(os.sched_getaffinity(0))
    load = start(procs, PING_PONG, str(cpu), "30")
    time.sleep(0.5)  # it is busy before pmutop ranks the processes
    rows_ = beside_perf_stat(procs, load.pid, "--tasks", "--backend", "perf", count=3)
    # Found in the first interval already (busy since before pmutop started), counted whole every interval.
    assert [r["interval_index"] for r in rows_] == [1, 2, 3] and not any(r["exited"] for r in rows_)
    assert all(r["counted"] == 1.0 and r["user"] == "root" and r["comm"].startswith("python") for r in rows_)


def test_tasks_and_pid_options_reach_the_live_view_and_refuse_what_cannot_work() -> None:
    assert pmutop("--tasks", "--connect", "localhost:1").stderr.strip() == (
        "pmutop: --tasks counts this machine's processes: not with --connect"
    )
    # Live --pid and --tasks are accepted (the simulator's processes with --demo): here they stop only because
    # there is no terminal.
    for args in (("--pid", "1"), ("--tasks",), ("--tasks", "--pid", "1"), ("--tasks", "--demo")):
        result = pmutop(*args)
        assert (result.returncode, result.stderr.strip()) == (2, f"pmutop: {NEEDS_TERMINAL}")


def test_scan_reads_this_machine_quickly() -> None:
    scan = ProcessScan()
    scan.scan()
    here = subprocess.Popen(["sleep", "5"])
    try:
        time.sleep(0.2)
        result = scan.scan()
    finally:
        here.kill()
        here.wait()
    me = result.processes[os.getpid()]
    assert me.comm.startswith("python") and result.processes[here.pid].comm == "sleep"
    assert scan.user(os.getpid(), me.start) == "root" and scan.cgroup(os.getpid()).startswith("/")
    assert result.seconds < 0.2  # (about 1 ms for 80 processes on the test VM)
    scan.close()


def test_live_pid_rows_say_where_the_process_ran() -> None:
    from pmutop.probes.task_counters import TaskCounters

    spin = subprocess.Popen([sys.executable, "-c", SPIN, "3"])
    try:
        counters = TaskCounters([spin.pid], [], scan=ProcessScan())
        counters.begin()
        time.sleep(0.6)
        snap = counters.read()
        counters.close()
    finally:
        spin.kill()
        spin.wait()
    (row,) = snap.tasks
    assert row.cpus and row.cgroup.startswith("/") and row.start_time > 0
    assert any(pid == spin.pid for cpu in row.cpus for pid, _ in snap.cpu_shares[cpu])


def test_a_process_moved_to_another_cgroup_shows_it_within_five_intervals(source: FakeSource) -> None:
    """The cgroup is read when a process enters, then once every 5 intervals (a read per process per interval was
    a sixth of the tracker's cost): a move (systemd-run, a container runtime) shows within 5 intervals."""
    source.use(ranked(4))
    t = tracker(source, top=4)
    t.begin()
    t.read()
    source.cgroup_reads = 0
    source.cgroup_path = "/system.slice/moved.service"
    seen = []
    for _ in range(5):
        seen.append({r.cgroup for r in t.read().tasks})
    assert seen[-1] == {"/system.slice/moved.service"}
    assert source.cgroup_reads <= 4 + 4  # each process's once or twice in 5 intervals, not 20 reads
