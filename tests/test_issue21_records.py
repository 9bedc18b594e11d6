"""issue 21, everywhere else: task and cgroup records in batch (JSON, CSV, table), in recordings, in
`pmutop replay --batch` and the replay's process/cgroup feed, and in `pmutop diff` (by command and cgroup).

The per-process counters are a fake TaskCounterSource with known readings (tests/helpers/fake_task_source.py),
plugged into a real `pmutop --demo --batch` run: everything from the batch loop on is pmutop's own code."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers.fake_task_source import EVENTS, FakeTaskSource, PushedFeed

from pmutop.app.dram_setup import DramSetup
from pmutop.app.main import main
from pmutop.app.task_setup import TaskPlan
from pmutop.core.task_reading import ESTIMATED
from pmutop.feeds.replay import ReplayFeed
from pmutop.recording.reader import read_recording
from pmutop.sinks.batch_tasks import tree_order

DEMO = ("--demo", "--batch", "--interval", "0.05", "--sim-cpus", "2")
Sources = list[FakeTaskSource]


@pytest.fixture(autouse=True)
def no_dram(monkeypatch: pytest.MonkeyPatch) -> None:
    """These runs read no DRAM bandwidth (the simulated machine's package records, issue 22, are tested in
    test_issue22_package_records.py): the task and cgroup records alone, as issue 21 made them."""
    monkeypatch.setattr("pmutop.app.commands.run.open_dram", lambda *_a, **_k: DramSetup(None, "not in these tests"))


@pytest.fixture
def fake_tasks(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Sources]:
    """Make the next runs count the fake processes and cgroups (as --tasks --cgroups would); returns the
    sources each run opened."""

    def install(plan: TaskPlan | None = None, **source: object) -> Sources:
        opened: Sources = []

        def open_source(*_: object) -> FakeTaskSource:
            opened.append(FakeTaskSource(**source))  # type: ignore[arg-type]
            return opened[-1]

        monkeypatch.setattr("pmutop.app.commands.run.check_task_options", lambda _args: plan or TaskPlan(top=32))
        monkeypatch.setattr("pmutop.app.commands.run.open_task_source", open_source)
        return opened

    return install


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines()]


def test_json_prints_cpu_then_task_then_cgroup_records_every_interval(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources]
) -> None:
    sources = fake_tasks()
    code, out, err = run(capsys, *DEMO, "--count", "3", "--format", "json")
    assert code == 0, err
    records = json_lines(out)
    for index in (1, 2, 3):
        kinds = [r["kind"] for r in records if r["interval_index"] == index]
        assert kinds == sorted(kinds, key=["cpu", "task", "cgroup"].index)  # cpu, then task, then cgroup
        assert {"cpu", "task", "cgroup"} == set(kinds)
    tasks = {(r["interval_index"], r["pid"]): r for r in records if r["kind"] == "task"}
    nginx = tasks[(1, 101)]
    assert nginx["comm"] == "nginx" and nginx["user"] == "www-data" and nginx["threads"] == 4
    assert nginx["cgroup"] == "/system.slice/nginx.service" and nginx["cpus"] == [0, 1]
    assert nginx["task_clock"] == 50_000_000 and nginx["task_clock_per_s"] == 500_000_000
    assert (nginx["util"], nginx["ghz"], nginx["ipc"], nginx["llc_mpki"]) == (0.5, 2.0, 1.5, 1.0)
    assert nginx["estimate"] is False and nginx["no_permission"] is False and nginx["mode"] == "SIMULATED"
    assert nginx["counted"] == 1.0 and nginx["estimated"] == {}
    postgres = tasks[(1, 200)]
    assert postgres["counted"] == 0.5 and postgres["estimated"] == {"cycles": 0.5, "instructions": 0.5}
    # A process pmutop may not count: a row that says so, with no number at all (never a zero).
    systemd = tasks[(1, 1)]
    assert systemd["no_permission"] is True and systemd["counted"] is None
    assert all(systemd[k] is None for k in (*EVENTS, "util", "ipc", "task_clock_per_s"))
    # The compiler exits at the second interval: read a last time, marked, then gone.
    assert tasks[(1, 300)]["exited"] is False and tasks[(2, 300)]["exited"] is True and (3, 300) not in tasks
    cgroups = {r["cgroup"]: r for r in records if r["kind"] == "cgroup" and r["interval_index"] == 1}
    system = cgroups["/system.slice"]
    assert system["name"] == "system.slice" and system["processes"] == 3
    assert system["task_clock"] == sum(tasks[(1, pid)]["task_clock"] for pid in (101, 102, 200))
    assert system["util"] == 1.75 and system["estimate"] is False and system["mode"] == "SIMULATED"
    assert sources[0].begun and sources[0].closed and sources[0].reads == 3


def test_csv_prints_one_kind_with_the_json_columns(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources]
) -> None:
    fake_tasks()
    _, as_json, _ = run(capsys, *DEMO, "--count", "2", "--format", "json")
    for kind in ("task", "cgroup"):
        code, out, err = run(capsys, *DEMO, "--count", "2", "--format", "csv", "--records", kind)
        assert code == 0, err
        rows = list(csv.DictReader(io.StringIO(out)))
        wanted = [r for r in json_lines(as_json) if r["kind"] == kind]
        assert {r["kind"] for r in rows} == {kind} and len(rows) == len(wanted)
        assert list(rows[0]) == list(wanted[0])  # the same columns in the same order
    fake_tasks()
    _, out, _ = run(capsys, *DEMO, "--count", "1", "--format", "csv", "--records", "task")
    by_pid = {int(r["pid"]): r for r in csv.DictReader(io.StringIO(out))}
    assert by_pid[101]["cpus"] == "0-1" and by_pid[101]["estimate"] == "false" and by_pid[101]["ipc"] == "1.5"
    assert by_pid[1]["no_permission"] == "true" and by_pid[1]["task_clock"] == "" and by_pid[1]["counted"] == ""
    assert by_pid[200]["estimated"] == "cycles=0.5;instructions=0.5"


def test_the_default_kind_of_csv_follows_the_options(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources]
) -> None:
    fake_tasks(TaskPlan(all_cgroups=True))  # --cgroups
    code, out, err = run(capsys, *DEMO, "--count", "1", "--format", "csv")
    assert code == 0, err
    assert out.splitlines()[0].startswith("kind,time,interval_index,cgroup,name,processes,")
    assert {line.split(",")[0] for line in out.splitlines()[1:]} == {"cgroup"}


def test_the_cgroup_table_is_a_tree_and_the_task_table_flags_what_is_not_plain(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources]
) -> None:
    fake_tasks()
    code, out, err = run(capsys, *DEMO, "--count", "2", "--records", "cgroup")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["time", "CGROUP", "Procs", "CPU%"]
    names = [line[9:37].rstrip() for line in lines[1:6]]
    assert names == ["system.slice", "  nginx.service", "  postgresql.service", "user.slice", "  user-1000.slice"]
    nginx = lines[2].split()
    assert nginx[2:4] == ["2", "75.0"]  # two processes, 0.75 of a CPU
    code, out, err = run(capsys, *DEMO, "--count", "2", "--records", "task")
    lines = out.splitlines()
    by_pid = {line.split()[1]: line for line in lines[1:]}
    assert lines[0].split()[:7] == ["time", "PID", "COMMAND", "USER", "Thr", "CPU%", "GHz"]
    assert by_pid["1"].endswith("no-permission") and "50.0" not in by_pid["1"]
    assert "0-1" in by_pid["101"] and by_pid["200"].endswith("est:50%")
    assert [line for line in lines if " 300 " in line][-1].endswith("exited")


def test_an_estimated_reading_says_so_everywhere(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources]
) -> None:
    fake_tasks(mode=ESTIMATED)
    code, out, err = run(capsys, *DEMO, "--count", "3", "--format", "json")
    assert code == 0, err
    records = json_lines(out)
    counted = [r for r in records if r["kind"] in ("task", "cgroup") and not r.get("no_permission")]
    assert counted and all(r["estimate"] is True for r in counted)
    assert err.count("est.: the processes shown explain 90%") == 1  # the snapshot's note, once
    fake_tasks(mode=ESTIMATED)
    _, out, _ = run(capsys, *DEMO, "--count", "1", "--records", "task")
    assert all("est." in line for line in out.splitlines()[1:] if " 1 systemd" not in line)


def test_tree_order_puts_children_under_their_parent_not_a_sibling_with_a_longer_name() -> None:
    from pmutop.core.task_reading import CgroupReading

    paths = ["/a-b", "/a/b", "/a", "/a/b/c"]
    ordered = tree_order(CgroupReading(p, p, 1.0, {}, 1.0) for p in paths)
    assert [(depth, c.path) for depth, c in ordered] == [(0, "/a"), (1, "/a/b"), (2, "/a/b/c"), (0, "/a-b")]


# -- recording, replay


def record(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> str:
    code, out, err = run(capsys, *DEMO, "--count", "4", "--format", "json", "--record", str(path), *extra)
    assert code == 0, err
    return out


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_replay_batch_prints_the_task_and_cgroup_records_the_live_run_printed(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources], tmp_path: Path, name: str
) -> None:
    fake_tasks()
    path = tmp_path / name
    live = record(capsys, path)
    code, replayed, err = run(capsys, "replay", str(path), "--batch", "--format", "json")
    assert code == 0, err
    assert replayed == live
    assert {r["kind"] for r in json_lines(replayed)} == {"cpu", "task", "cgroup"}
    for kind in ("task", "cgroup"):
        code, out, err = run(capsys, "replay", str(path), "--batch", "--format", "json", "--records", kind)
        assert code == 0, err
        assert json_lines(out) == [r for r in json_lines(live) if r["kind"] == kind]
    code, out, _ = run(capsys, "replay", str(path), "--batch", "--format", "csv", "--records", "task")
    assert out.splitlines()[0].startswith("kind,time,interval_index,pid,comm,user,cgroup,threads,cpus,")
    assert read_recording(str(path)).header.task_events == EVENTS


def test_a_snapshot_written_after_later_samples_still_pairs_with_its_interval(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources], tmp_path: Path
) -> None:
    """The reader of the counters may lag: its snapshot lands after the next interval's samples (snapshots
    themselves stay in order: one reader writes them one after the other)."""
    fake_tasks()
    path = tmp_path / "run.jsonl"
    live = record(capsys, path)
    lines = path.read_text().splitlines(keepends=True)
    first_snapshot = next(i for i, line in enumerate(lines) if line.startswith('{"snapshot":'))
    moved = lines.pop(first_snapshot)
    second_snapshot = next(i for i, line in enumerate(lines) if line.startswith('{"snapshot":'))
    lines.insert(second_snapshot, moved)  # after interval 2's samples, before interval 2's snapshot
    assert [line[:11] for line in lines[1:7]] == ['{"sample":{'] * 4 + ['{"snapshot"'] * 2
    path.write_text("".join(lines))
    code, replayed, err = run(capsys, "replay", str(path), "--batch", "--format", "json")
    assert code == 0, err
    assert replayed == live


def test_a_recording_cut_inside_its_last_snapshot_replays_up_to_it(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources], tmp_path: Path
) -> None:
    fake_tasks()
    path = tmp_path / "run.jsonl"
    live = json_lines(record(capsys, path))
    text = path.read_text()
    assert text.splitlines()[-1].startswith('{"snapshot":')
    path.write_text(text[: len(text) - 40])  # killed while writing the last interval's snapshot
    code, out, err = run(capsys, "replay", str(path), "--batch", "--format", "json")
    assert code == 0 and "the last line was cut short" in err
    replayed = json_lines(out)
    # Every interval's CPU records; the last interval's processes and cgroups are what was lost.
    assert replayed == [r for r in live if r["kind"] == "cpu" or r["interval_index"] < 4]


def test_an_old_recording_without_task_records_still_replays(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "old.jsonl"
    live = record(capsys, path)
    lines = path.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    assert header["version"] == 2 and header["task_events"] is None
    del header["task_events"]
    header["version"] = 1  # what pmutop wrote before task records
    path.write_text(json.dumps(header, separators=(",", ":")) + "\n" + "".join(lines[1:]))
    code, out, err = run(capsys, "replay", str(path), "--batch", "--format", "json")
    assert code == 0, err
    assert out == live
    feed = ReplayFeed(read_recording(str(path)), "max")
    try:
        assert feed.step() and feed.task_feed is None
    finally:
        feed.close()
    code, out, err = run(capsys, "replay", str(path), "--batch", "--records", "task")
    assert code == 2 and out == ""
    assert err.strip() == f"pmutop: --records task: {path} holds no task records (recorded without them)"


def test_the_replay_feed_gives_the_process_and_cgroup_views_their_feed(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources], tmp_path: Path
) -> None:
    fake_tasks()
    path = tmp_path / "run.jsonl.gz"
    record(capsys, path)
    feed = ReplayFeed(read_recording(str(path)), "max")
    try:
        tasks = feed.task_feed
        assert tasks is not None and tasks.events == EVENTS and tasks.latest() is None and tasks.seq == 0
        for _ in range(3):
            assert feed.step()
        latest = tasks.latest()
        assert tasks.seq == 3 and latest is not None
        assert {t.pid for t in latest.tasks} == {101, 102, 200, 1}  # the compiler exited at the second
        assert [r.exited for r in tasks.task_history(300)] == [False, True]
        assert len(tasks.task_history(101)) == 3 and tasks.task_history(101, start_time=1101.0)
        assert tasks.task_history(101, start_time=5.0) == []  # another process that had this PID
        assert [c.processes for c in tasks.cgroup_history("/system.slice")] == [3, 3, 3]
        assert latest.cpu_shares[0][0] == (101, 0.25)
        tasks.set_top(5)  # the view's --top: nothing to change in a recording
        feed.index.wait(timeout=10)
        feed.seek(-2)  # back to interval 1: the history is what the intervals pushed again say
        assert len(tasks.task_history(101)) == 1 and tasks.task_history(300)[0].exited is False
    finally:
        feed.close()


def test_record_tasks_from_other_threads_while_the_recorder_drains(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources], tmp_path: Path
) -> None:
    """record_tasks is called from the task sampler's thread while the recorder's own thread writes samples."""
    from pmutop.sinks.recorder import Recorder

    fake_tasks()
    source_path = tmp_path / "run.jsonl"
    record(capsys, source_path)
    header = read_recording(str(source_path)).header

    feed = PushedFeed()
    path = tmp_path / "threads.jsonl"
    recorder = Recorder(str(path), feed, header)
    source = FakeTaskSource()

    def sampler() -> None:
        for n in range(1, 101):
            feed.push(n)
            recorder.record_tasks(n, n * 0.05, source.read())

    recorder.start()  # its thread drains the samples, racing the sampler's record_tasks
    thread = threading.Thread(target=sampler)
    thread.start()
    thread.join()
    assert recorder.close() is None
    intervals = list(read_recording(str(path)).iter_recorded_intervals())
    assert len(intervals) == 100
    assert all(i.snapshot is not None and i.snapshot.interval == i.samples[0][0].seq for i in intervals)


# -- diff


def test_diff_compares_processes_by_command_and_cgroups_by_path(
    capsys: pytest.CaptureFixture[str], fake_tasks: Callable[..., Sources], tmp_path: Path
) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    fake_tasks()
    record(capsys, a)
    fake_tasks(scale=2.0)  # the same processes retiring twice the instructions in B
    record(capsys, b)
    code, out, err = run(capsys, "diff", str(a), str(b))
    assert code == 0, err
    rows = diff_section(out, "processes by command")
    # Both nginx workers are one command: 0.75 of a CPU over the recording, IPC 1.5 -> 3.0.
    assert rows[("nginx", "util%")] == ["75.0", "75.0", "+0.0%"]
    assert rows[("nginx", "IPC")] == ["1.50", "3.00", "+100.0%"]
    assert rows[("nginx", "CPU s")][:2] == ["0.30", "0.30"]  # 0.75 of a CPU × 4 readings of 0.1 s
    assert rows[("postgres", "LLC MPKI")] == ["6.00", "6.00", "+0.0%"]
    # The compiler ran two of four intervals: its average is half its share while it ran.
    assert rows[("cc1", "util%")][:2] == ["50.0", "50.0"]
    assert not [key for key in rows if key[0] == "systemd"]  # no permission: nothing to compare
    cgroups = diff_section(out, "cgroups by name")
    assert cgroups[("system.slice", "util%")][:2] == ["175.0", "175.0"]
    assert cgroups[("nginx.service", "IPC")] == ["1.50", "3.00", "+100.0%"]
    # Busiest first (CPU time over the recording: 0.4 s, 0.3 s, 0.2 s).
    assert list(dict.fromkeys(name for name, _ in rows)) == ["postgres", "nginx", "cc1"]


def diff_section(out: str, title: str) -> dict[tuple[str, str], list[str]]:
    """(name, metric) -> [A, B, change] of one section of `pmutop diff`."""
    lines = out[out.index(title) :].splitlines()[1:]
    at = lines[0].index("metric")
    rows = {}
    for line in lines[1:]:
        if not line.strip() or line.startswith(("(", "util%:", "est.:")):
            break
        rows[(line[:at].strip(), line[at : at + 10].strip())] = line[at + 11 :].split()
    return rows


def test_diff_of_recordings_without_processes_prints_no_process_section(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = tmp_path / "a.jsonl"
    record(capsys, a)
    code, out, _ = run(capsys, "diff", str(a), str(a))
    assert code == 0 and "processes by command" not in out and "cgroups by name" not in out


@pytest.mark.integration
def test_a_recorded_pid_run_replays_its_task_records(tmp_path: Path) -> None:
    """The real thing: the kernel's per-task counters (software events on this VM), --record and replay."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    path = tmp_path / "pid.jsonl.gz"
    try:
        args = ["--batch", "--pid", str(sleeper.pid), "--interval", "0.2", "--count", "3", "--format", "json"]
        live = subprocess.run(
            [sys.executable, "-m", "pmutop", *args, "--record", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)
    if live.returncode != 0 and "perf" in live.stderr:
        pytest.skip(f"per-task counters unavailable here: {live.stderr.strip()}")
    assert live.returncode == 0, live.stderr
    replayed = subprocess.run(
        [sys.executable, "-m", "pmutop", "replay", str(path), "--batch", "--format", "json", "--records", "task"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stderr
    tasks = [r for r in json_lines(live.stdout) if r["kind"] == "task"]
    assert len(tasks) == 3 and all(r["pid"] == sleeper.pid for r in tasks)
    assert json_lines(replayed.stdout) == tasks
