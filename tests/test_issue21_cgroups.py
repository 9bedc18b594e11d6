"""issue 21, per-cgroup counters: `--cgroup PATH` and `--cgroups` (the tree), named as users know them.

Most tests run over a fake cgroup tree (plain files under a tmp sysroot) with a fake kernel behind
perf_event_open and read(); the last ones count a real cgroup on this machine and compare with `perf stat -G`."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.processes import run_pmutop as pmutop
from helpers.workloads import PING_PONG, perf_stat_works

from pmutop.app.task_setup import CombinedSource
from pmutop.core.errors import UsageError
from pmutop.core.sample import Sample
from pmutop.core.sysroot import Sysroot
from pmutop.core.task_reading import ESTIMATED, EXACT, CgroupReading, TaskReading, TaskSnapshot
from pmutop.hw.perf_event import PERF_FLAG_PID_CGROUP, PERF_TYPE_HARDWARE, PerfEventAttr, PerfOpenError
from pmutop.probes.cgroup_counters import LEAVE_AFTER, CgroupCounters
from pmutop.probes.cgroup_names import CgroupNamer, find_cgroup2

ROOT = "sys/fs/cgroup"
DOCKER_ID = "3f2a1b" + "c" * 58
CONTAINERD_ID = "ab12cd" + "e" * 58
POD_UID = "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0"


def make_cgroup(sysroot: Path, path: str, usage_usec: int = 0, procs: int = 0, root: str = ROOT) -> Path:
    d = sysroot / root / path.strip("/")
    d.mkdir(parents=True, exist_ok=True)
    (d / "cgroup.controllers").write_text("cpu memory\n")
    (d / "cpu.stat").write_text(f"usage_usec {usage_usec}\nuser_usec 0\nsystem_usec 0\n")
    (d / "cgroup.procs").write_text("".join(f"{1000 + i}\n" for i in range(procs)))
    return d


def set_usage(sysroot: Path, path: str, usage_usec: int) -> None:
    (sysroot / ROOT / path.strip("/") / "cpu.stat").write_text(f"usage_usec {usage_usec}\n")


class FakeKernel:
    """perf_event_open and read() for cgroup events over a fake tree: each (cgroup, cpu) has enabled and running
    times and one count per event, which the test advances."""

    def __init__(self, base: Path, hardware: bool = False) -> None:
        self.base = base.resolve()
        self.hardware = hardware
        self.state: dict[tuple[str, int], list[int]] = {}  # enabled, running, values...
        self.leaders: dict[int, tuple[str, int, int]] = {}  # fd -> (path, cpu, events in its group)
        self.open_fds: set[int] = set()
        self.fail_at: tuple[int, int] | None = None  # (nth group open, errno)
        self.groups_opened = 0
        self.error_state = False  # read() returns EOF, as for a group the kernel could not schedule

    def opener(self, attr: PerfEventAttr, pid: int, cpu: int, group_fd: int, flags: int) -> int:
        assert flags & PERF_FLAG_PID_CGROUP and cpu >= 0
        target = Path(os.readlink(f"/proc/self/fd/{pid}"))
        path = "/" + str(target.relative_to(self.base)).strip(".")
        if attr.type == PERF_TYPE_HARDWARE and not self.hardware:
            raise PerfOpenError("no such event", errno.ENOENT, cpu=cpu)
        if group_fd == -1:
            self.groups_opened += 1
            if self.fail_at and self.groups_opened >= self.fail_at[0]:
                raise PerfOpenError("refused", self.fail_at[1], cpu=cpu)
        fd = os.open("/dev/null", os.O_RDONLY)
        self.open_fds.add(fd)
        if group_fd == -1:
            self.leaders[fd] = (path.rstrip("/") or "/", cpu, 1)
        else:
            p, c, n = self.leaders[group_fd]
            self.leaders[group_fd] = (p, c, n + 1)
        return fd

    def reader(self, fd: int, size: int) -> bytes:
        if self.error_state:
            return b""
        path, cpu, n = self.leaders[fd]
        enabled, running, *values = self.state.get((path, cpu), [0, 0] + [0] * n)
        return struct.pack(f"={3 + n}Q", n, enabled, running, *values[:n])

    def run(self, path: str, cpu: int, ns: int, switches: int, running_share: float = 1.0) -> None:
        """The cgroup's tasks ran `ns` on `cpu` with `switches` context switches; the counter was on the PMU
        for `running_share` of it (multiplexing) and saw only that part."""
        enabled, running, clock, cs, *rest = self.state.get((path, cpu), [0, 0, 0, 0])
        seen = running_share
        self.state[(path, cpu)] = [
            enabled + ns,
            running + round(ns * seen),
            clock + round(ns * seen),
            cs + round(switches * seen),
            *rest,
        ]

    def fds_still_open(self) -> int:
        return sum(1 for fd in self.open_fds if _is_open(fd))


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    make_cgroup(tmp_path, "/", usage_usec=10_000_000, procs=1)
    return tmp_path


def counters(root: Path, kernel: FakeKernel, *paths: str, **kw: object) -> CgroupCounters:
    return CgroupCounters(
        paths,
        cpus=[0, 1],
        sysroot=Sysroot(root),
        root=ROOT,
        opener=kernel.opener,
        reader=kernel.reader,
        **kw,  # type: ignore[arg-type]
    )


# -- finding the tree, and the names -------------------------------------------------------------------------


def test_cgroup2_is_found_at_sys_fs_cgroup_or_the_hybrid_unified_mount(tmp_path: Path) -> None:
    assert find_cgroup2(Sysroot(tmp_path)) is None
    (tmp_path / "sys/fs/cgroup/cpu").mkdir(parents=True)  # v1 only: no cgroup.controllers anywhere
    assert find_cgroup2(Sysroot(tmp_path)) is None
    make_cgroup(tmp_path, "/", root="sys/fs/cgroup/unified")
    assert find_cgroup2(Sysroot(tmp_path)) == "sys/fs/cgroup/unified"
    make_cgroup(tmp_path, "/", root="sys/fs/cgroup")
    assert find_cgroup2(Sysroot(tmp_path)) == "sys/fs/cgroup"


def test_systemd_units_are_named_by_their_last_component(tmp_path: Path) -> None:
    names = CgroupNamer(Sysroot(tmp_path))
    assert names.name("/system.slice/nginx.service") == "nginx.service"
    assert names.name("/user.slice/user-1000.slice/user@1000.service") == "user@1000.service"
    assert names.name("/user.slice/user-0.slice/session-3.scope") == "session-3.scope"
    assert names.name("/") == "/"
    assert names.name("/pmutop-test-42") == "pmutop-test-42"


def test_docker_containers_are_named_by_their_name_else_the_short_id(tmp_path: Path) -> None:
    names = CgroupNamer(Sysroot(tmp_path))
    assert names.name(f"/system.slice/docker-{DOCKER_ID}.scope") == "docker 3f2a1bcccccc"
    config = tmp_path / f"var/lib/docker/containers/{DOCKER_ID}/config.v2.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"ID": DOCKER_ID, "Name": "/web"}))
    fresh = CgroupNamer(Sysroot(tmp_path))
    assert fresh.name(f"/system.slice/docker-{DOCKER_ID}.scope") == "docker web"
    assert fresh.name(f"/docker/{DOCKER_ID}") == "docker web"  # the cgroupfs driver's layout


def test_containerd_containers_are_named_from_their_oci_config(tmp_path: Path) -> None:
    path = f"/kubepods.slice/kubepods-burstable.slice/cri-containerd-{CONTAINERD_ID}.scope"
    assert CgroupNamer(Sysroot(tmp_path)).name(path) == "containerd ab12cdeeeeee"
    config = tmp_path / f"run/containerd/io.containerd.runtime.v2.task/k8s.io/{CONTAINERD_ID}/config.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"annotations": {"io.kubernetes.cri.container-name": "api"}}))
    assert CgroupNamer(Sysroot(tmp_path)).name(path) == "containerd api"


def test_kubernetes_pods_are_named_by_namespace_and_name_when_the_logs_say(tmp_path: Path) -> None:
    escaped = POD_UID.replace("-", "_")
    systemd = f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{escaped}.slice"
    cgroupfs = f"/kubepods/besteffort/pod{POD_UID}"
    names = CgroupNamer(Sysroot(tmp_path))
    assert names.name(systemd) == f"pod {POD_UID}"
    assert names.name(cgroupfs) == f"pod {POD_UID}"
    assert names.name("/kubepods.slice/kubepods-burstable.slice") == "kubepods-burstable.slice"
    (tmp_path / f"var/log/pods/default_api-0_{POD_UID}").mkdir(parents=True)
    named = CgroupNamer(Sysroot(tmp_path))
    assert named.name(systemd) == "pod default/api-0"
    assert named.name(cgroupfs) == "pod default/api-0"


# -- counting ------------------------------------------------------------------------------------------------


def test_a_cgroups_counts_are_summed_over_cpus_each_scaled_by_enabled_over_running(tree: Path) -> None:
    make_cgroup(tree, "/system.slice/nginx.service", procs=3)
    kernel = FakeKernel(tree / ROOT)
    said: list[str] = []
    c = counters(tree, kernel, "system.slice/nginx.service", say=said.append)
    assert c.events == ["task_clock", "context_switches"]
    assert len(said) == 1 and "no hardware events" in said[0]
    c.begin()
    kernel.run("/system.slice/nginx.service", 0, 400_000_000, 1000)
    kernel.run("/system.slice/nginx.service", 1, 200_000_000, 600, running_share=0.5)
    snap = c.read()
    assert snap.mode == EXACT and snap.notes == ()
    (r,) = snap.cgroups
    assert (r.path, r.name, r.processes) == ("/system.slice/nginx.service", "nginx.service", 3)
    # cpu 1's half-seen counts are extended to its enabled time, as perf stat does
    assert r.counts == {"task_clock": 600_000_000, "context_switches": 1600}
    assert r.counted == pytest.approx(500 / 600, abs=1e-3)
    assert r.estimated == {"task_clock": 0.833, "context_switches": 0.833}
    assert c.cpu_task_clock("/system.slice/nginx.service") == {0: 400_000_000, 1: 200_000_000}
    c.close()
    assert kernel.fds_still_open() == 0


def test_a_missing_cgroup_is_a_one_line_usage_error_naming_it(tree: Path) -> None:
    with pytest.raises(UsageError, match=r"^--cgroup system.slice/nope.service: no such cgroup under /sys/fs/cgroup$"):
        counters(tree, FakeKernel(tree / ROOT), "system.slice/nope.service")


def test_an_absolute_path_under_the_cgroup_root_counts_that_cgroup(tree: Path) -> None:
    make_cgroup(tree, "/system.slice/nginx.service")
    c = counters(tree, FakeKernel(tree / ROOT), "/sys/fs/cgroup/system.slice/nginx.service", "/sys/fs/cgroup/")
    assert c.pinned == ["/system.slice/nginx.service", "/"]
    c.close()
    with pytest.raises(UsageError, match=r"^--cgroup /sys/fs/cgroup/nope: no such cgroup under /sys/fs/cgroup$"):
        counters(tree, FakeKernel(tree / ROOT), "/sys/fs/cgroup/nope")


def test_a_forbidden_cgroup_event_is_one_line_saying_why(tree: Path) -> None:
    make_cgroup(tree, "/a")
    kernel = FakeKernel(tree / ROOT)
    kernel.fail_at = (1, errno.EACCES)
    c = counters(tree, kernel, "/a")
    with pytest.raises(UsageError) as e:
        c.begin()
    assert "\n" not in str(e.value) and str(e.value).startswith("--cgroup: cgroup counters are CPU-wide:")
    c.close()


def test_a_cgroup_removed_while_counted_gives_its_last_reading_then_is_gone(tree: Path) -> None:
    d = make_cgroup(tree, "/job", procs=1)
    make_cgroup(tree, "/web", procs=1)
    kernel = FakeKernel(tree / ROOT)
    c = counters(tree, kernel, "/job", "/web")
    c.begin()
    kernel.run("/job", 0, 100_000_000, 10)
    shutil.rmtree(d)
    first = c.read()
    assert [(r.path, r.removed, r.counts["task_clock"]) for r in first.cgroups] == [
        ("/job", True, 100_000_000),
        ("/web", False, 0),
    ]
    assert [r.path for r in c.read().cgroups] == ["/web"]
    c.close()
    assert kernel.fds_still_open() == 0


def test_a_group_the_kernel_cannot_read_ends_like_a_removed_cgroup(tree: Path) -> None:
    make_cgroup(tree, "/web")
    kernel = FakeKernel(tree / ROOT)
    c = counters(tree, kernel, "/web")
    c.begin()
    kernel.error_state = True
    (r,) = c.read().cgroups
    assert (r.path, r.removed, r.counts) == ("/web", True, {})
    assert c.read().cgroups == ()
    c.close()


def test_the_tree_counts_the_busiest_cgroups_with_their_ancestors_not_the_root(tree: Path) -> None:
    usage = {
        "/system.slice": 0,
        "/system.slice/nginx.service": 0,
        "/system.slice/db.service": 0,
        "/system.slice/idle.service": 0,
        "/user.slice": 0,
        "/user.slice/user-0.slice": 0,
        "/user.slice/user-0.slice/session-3.scope": 0,
    }
    for path in usage:
        make_cgroup(tree, path, procs=1)
    kernel = FakeKernel(tree / ROOT)
    c = counters(tree, kernel, tree=True, top=2)
    c.begin()
    assert c.read().cgroups == ()  # nothing has used CPU yet

    def used(nginx: int, db: int, session: int) -> None:
        for path, more in (
            ("/system.slice/nginx.service", nginx),
            ("/system.slice/db.service", db),
            ("/user.slice/user-0.slice/session-3.scope", session),
        ):
            usage[path] += more
        usage["/system.slice"] = usage["/system.slice/nginx.service"] + usage["/system.slice/db.service"]
        usage["/user.slice/user-0.slice"] = usage["/user.slice"] = usage["/user.slice/user-0.slice/session-3.scope"]
        for path, value in usage.items():
            set_usage(tree, path, value)

    used(nginx=500_000, db=300_000, session=100_000)
    c.read()  # the choice: nginx and db by their own use (their slice's use is theirs), and their slice
    used(nginx=500_000, db=300_000, session=100_000)
    kernel.run("/system.slice/nginx.service", 0, 500_000_000, 50)
    kernel.run("/system.slice", 0, 800_000_000, 80)
    snap = c.read()
    rows = {r.path: r for r in snap.cgroups}
    assert set(rows) == {"/system.slice", "/system.slice/nginx.service", "/system.slice/db.service"}
    assert rows["/system.slice"].processes == 4  # its own and its three services'
    assert rows["/system.slice"].parent == "/" and rows["/system.slice/nginx.service"].parent == "/system.slice"
    assert rows["/system.slice/nginx.service"].counts["task_clock"] == 500_000_000
    assert rows["/system.slice/nginx.service"].name == "nginx.service"
    # db goes idle and the session gets busy: the session (with its slices) comes in at once, db stays a while
    for i in range(LEAVE_AFTER):
        used(nginx=500_000, db=0, session=400_000)
        paths = {r.path for r in c.read().cgroups}
        assert "/system.slice/db.service" in paths
        if i > 0:
            assert {"/user.slice", "/user.slice/user-0.slice", "/user.slice/user-0.slice/session-3.scope"} < paths
    used(nginx=500_000, db=0, session=400_000)
    assert "/system.slice/db.service" not in {r.path for r in c.read().cgroups}
    c.close()
    assert kernel.fds_still_open() == 0


def test_out_of_files_stops_adding_cgroups_and_says_so(tree: Path) -> None:
    for name in ("a", "b", "c", "d"):
        make_cgroup(tree, f"/{name}")
    kernel = FakeKernel(tree / ROOT)
    kernel.fail_at = (5, errno.EMFILE)  # two CPUs per cgroup: the third cgroup's second group fails
    c = counters(tree, kernel, "/a", "/b", "/c", "/d")
    c.begin()
    snap = c.read()
    assert [r.path for r in snap.cgroups] == ["/a", "/b"]
    (note,) = snap.notes
    assert note.startswith("counters on 2 of 4 cgroups: open files limit ")
    c.close()
    assert kernel.fds_still_open() == 0


def sample(cpu: int, util: float, **counts: int) -> Sample:
    return Sample(cpu=cpu, seq=1, time=1.0, interval=1.0, tsc=None, tsc_hz=None, counts=counts, util=util)


def test_msr_backend_estimates_hardware_counts_by_task_clock_share(tree: Path) -> None:
    make_cgroup(tree, "/db")
    kernel = FakeKernel(tree / ROOT)
    c = counters(tree, kernel, "/db", estimate=True)
    assert c.events == ["task_clock", "context_switches", "cycles", "instructions", "llc_misses", "branch_misses"]
    c.begin()
    kernel.run("/db", 0, 250_000_000, 40)  # a quarter of cpu 0's 0.5 s busy time is half of it
    snap = c.read([sample(0, 0.5, cycles=1_000_000, instructions=2_000_000), sample(1, 0.0, cycles=9_000)])
    assert snap.mode == ESTIMATED
    (r,) = snap.cgroups
    assert r.estimate is True
    assert r.counts == {"task_clock": 250_000_000, "context_switches": 40, "cycles": 500_000, "instructions": 1_000_000}
    assert any(n.startswith("est.:") and n.endswith("exact numbers: --backend perf") for n in snap.notes)
    c.close()


class _Fixed:
    def __init__(self, snap: TaskSnapshot, events: list[str]) -> None:
        self.snap, self.events = snap, events
        self.calls: list[str] = []

    def begin(self) -> None:
        self.calls.append("begin")

    def read(self, cpu_samples: object = ()) -> TaskSnapshot:
        self.calls.append("read")
        return self.snap

    def close(self) -> None:
        self.calls.append("close")


def test_processes_and_cgroups_asked_together_come_in_one_snapshot() -> None:
    task = TaskReading(7, "nginx", "www", 2, 1.0, {"task_clock": 1}, 1.0)
    group = CgroupReading("/system.slice/nginx.service", "nginx.service", 1.0, {"task_clock": 1}, 1.0)
    tasks = _Fixed(TaskSnapshot(tasks=(task,), notes=("t",)), ["task_clock", "context_switches"])
    cgroups = _Fixed(TaskSnapshot(cgroups=(group,), mode=ESTIMATED, notes=("c",)), ["task_clock", "cycles"])
    both = CombinedSource(tasks, cgroups)
    assert both.events == ["task_clock", "context_switches", "cycles"]
    both.begin()
    snap = both.read()
    assert snap.tasks == (task,) and snap.cgroups == (group,) and snap.notes == ("t", "c")
    assert snap.mode == ESTIMATED  # one estimated part makes the whole snapshot an estimate
    both.close()
    assert tasks.calls == cgroups.calls == ["begin", "read", "close"]


def test_a_note_both_parts_give_is_said_once() -> None:
    """Keys 4 then 5 in the demo count the simulator's processes and cgroups as two parts that each say they are
    simulated: the view's notes line says it once."""
    simulated = "SIMULATED: the simulator's processes"
    tasks = _Fixed(TaskSnapshot(notes=(simulated, "t")), ["task_clock"])
    cgroups = _Fixed(TaskSnapshot(notes=(simulated, "c")), ["task_clock"])
    both = CombinedSource(tasks, cgroups)
    both.begin()
    assert both.read().notes == (simulated, "t", "c")
    both.close()


# -- the command line ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--batch", "--cgroup", "no/such/cgroup"), "--cgroup no/such/cgroup: no such cgroup under /sys/fs/cgroup"),
        (("--cgroups", "--connect", "localhost:9"), "--cgroups counts this machine's cgroups live: not with --connect"),
        (("--batch", "--cgroup", "x", "--sysroot", "/tmp"), "--sysroot /tmp: cgroup counters count this host's"),
        (("--batch", "--records", "cgroup"), "--records cgroup needs --cgroups or --cgroup"),
        (("--batch", "--cgroup", ""), "--cgroup '': expected a cgroup path, e.g. --cgroup system.slice/nginx.service"),
        (("--demo", "--batch", "--cgroup", " "), "--cgroup ' ': expected a cgroup path, e.g. --cgroup system.slice/"),
    ],
)
def test_cgroup_options_refused_in_one_line(args: tuple[str, ...], message: str) -> None:
    if "no such cgroup" in message and v2_root() is None:
        pytest.skip("no cgroup v2 hierarchy here")
    result = pmutop(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and message in result.stderr


def v2_root() -> Path | None:
    root = find_cgroup2(Sysroot("/"))
    return Path("/") / root if root else None


@pytest.fixture
def cgroup() -> Iterator[Path]:
    """A fresh cgroup under this machine's v2 root (root only); its processes go back to the root at the end."""
    root = v2_root()
    if os.geteuid() != 0 or root is None:
        pytest.skip("needs root and a cgroup v2 hierarchy")
    path = root / f"pmutop-test-{os.getpid()}"
    path.mkdir()
    try:
        yield path
    finally:
        for pid in (path / "cgroup.procs").read_text().split():
            with contextlib.suppress(OSError):  # it exited meanwhile
                (root / "cgroup.procs").write_text(pid)
        for _ in range(50):
            try:
                path.rmdir()
                break
            except OSError:
                time.sleep(0.1)


@pytest.fixture
def ping_pong(cgroup: Path) -> Iterator[subprocess.Popen[str]]:
    """Two processes ping-ponging a byte on one CPU, started inside the test cgroup (so the child is too)."""
    cpu = max(os.sched_getaffinity(0))

    def enter() -> None:
        (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    load = subprocess.Popen(
        [sys.executable, "-c", PING_PONG, str(cpu), "30"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        preexec_fn=enter,
    )
    try:
        assert load.stdout is not None and load.stdout.readline().strip() == "ready"
        yield load
    finally:
        if load.poll() is None:
            os.killpg(load.pid, signal.SIGKILL)
        load.wait(timeout=10)


@pytest.mark.integration
@pytest.mark.parametrize("asked", ["cgroup", "tree", "cgroup and pid", "absolute path"])
def test_batch_json_with_a_real_cgroup_runs(ping_pong: subprocess.Popen[str], cgroup: Path, asked: str) -> None:
    options = {
        "cgroup": ["--cgroup", cgroup.name],
        "tree": ["--cgroups", "--top", "4"],
        "cgroup and pid": ["--cgroup", f"/{cgroup.name}", "--pid", str(ping_pong.pid)],
        "absolute path": ["--cgroup", str(cgroup)],
    }[asked]
    result = pmutop("--batch", *options, "--format", "json", "--interval", "0.3", "--count", "2")
    assert result.returncode == 0, result.stderr
    kinds = {json.loads(line)["kind"] for line in result.stdout.splitlines()}
    assert "cpu" in kinds and ("task" in kinds) == ("--pid" in options)
    assert "Traceback" not in result.stderr


@pytest.mark.integration
def test_counts_match_perf_stat_g(ping_pong: subprocess.Popen[str], cgroup: Path) -> None:
    if not perf_stat_works("-a", "-G", "/"):
        pytest.skip("perf stat -G (cgroup events) is not available here")
    name = cgroup.name
    events = "task-clock,context-switches"
    perf = subprocess.Popen(
        ["perf", "stat", "-a", "-e", events, "-G", name, "-x", ",", "-I", "1000", "--interval-count", "4"],
        stderr=subprocess.PIPE,
        text=True,
    )
    mine = CgroupCounters([name], cpus=list(range(os.cpu_count() or 1)))
    mine.begin()
    readings = []
    for _ in range(4):
        time.sleep(1)
        readings += mine.read().cgroups
    mine.close()
    _, perf_err = perf.communicate(timeout=30)
    assert perf.returncode == 0, perf_err
    assert [r.processes for r in readings] == [2] * 4 and all(r.counted == 1.0 for r in readings)
    # perf stat -I -x, lines: time,value,unit,event,cgroup,...; the first interval of each is left out: right
    # after opening, cgroup events were seen to undercount here (task-clock ~8% low in the first second, 6.18).
    perf_rows: dict[str, list[tuple[float, float]]] = {}
    for line in perf_err.splitlines():
        fields = line.split(",")
        if len(fields) > 4 and fields[3] in ("task-clock", "context-switches") and fields[4] == name:
            perf_rows.setdefault(fields[3], []).append((float(fields[0]), float(fields[1])))
    assert len(perf_rows["task-clock"]) == 4
    perf_seconds = perf_rows["task-clock"][-1][0] - perf_rows["task-clock"][0][0]
    seconds = sum(r.interval for r in readings[1:])
    cs_mine = sum(r.counts["context_switches"] for r in readings[1:]) / seconds
    cs_perf = sum(v for _, v in perf_rows["context-switches"][1:]) / perf_seconds
    clock_mine = sum(r.counts["task_clock"] for r in readings[1:]) / 1e9 / seconds  # CPUs used
    clock_perf = sum(v for _, v in perf_rows["task-clock"][1:]) / 1e3 / perf_seconds  # perf prints msec
    assert cs_mine > 1000  # the workload really ran: the numbers compared are not two zeros
    assert cs_mine == pytest.approx(cs_perf, rel=0.05)
    assert clock_mine == pytest.approx(clock_perf, rel=0.05)
