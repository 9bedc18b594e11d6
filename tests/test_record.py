"""Recording (--record), replay (live view and --batch) and diff: what a user sees of them."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_tui import footer_text, text_of

from pmutop.app.main import main
from pmutop.core.sample import Sample
from pmutop.feeds.replay import ReplayFeed
from pmutop.recording.diff import diff_rows, diff_table
from pmutop.recording.format import FORMAT_VERSION, Header, header_to_dict, sample_to_dict
from pmutop.recording.reader import RecordingError, read_recording
from pmutop.sinks.batch_replay import replay_batch
from pmutop.tui.replay_controls import ReplayApp
from pmutop.tui.screens.replay import parse_time

DEMO = ("--demo", "--batch", "--interval", "0.05", "--sim-cpus", "3", "--format", "json")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def record_demo(capsys: pytest.CaptureFixture[str], path: Path, count: int = 6, *extra: str) -> str:
    code, out, err = run(capsys, *DEMO, "--count", str(count), "--record", str(path), *extra)
    assert code == 0, err
    return out


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_replay_batch_prints_exactly_what_the_live_run_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    live = record_demo(capsys, tmp_path / name, 8, "--sim-model", "adl")
    for fmt in ("json", "csv", "table"):
        if fmt != "json":
            code, live, err = run(capsys, *DEMO[:-1], fmt, "--count", "8", "--sim-model", "adl")
            assert code == 0, err
        code, replayed, err = run(capsys, "replay", str(tmp_path / name), "--batch", "--format", fmt, "--count", "8")
        assert code == 0, err
        assert "SIMULATED" in err
        if fmt == "json":
            assert replayed == live  # every field: deltas, rates, derived and top-down metrics
            assert len(replayed.splitlines()) == 8 * (3 + 1)  # 3 CPUs and the package (issue 22) per interval
        else:  # the simulated workload is seeded: a second live run prints the same header and shape
            assert replayed.splitlines()[0] == live.splitlines()[0]
            assert len(replayed.splitlines()) == len(live.splitlines())


def test_the_recording_has_a_header_with_the_run_facts_and_whole_samples(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "r.jsonl.gz"
    record_demo(capsys, path, 3)
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    head = json.loads(lines[0])
    assert head["format"] == "pmutop-recording" and head["version"] == FORMAT_VERSION
    assert head["mode"] == "SIMULATED" and head["cpus"] == [0, 1, 2]
    assert head["backend"]["backend"] == "sim"
    assert head["runinfo"]["simulated"] is True
    assert "instructions" in head["keys"]["0"]
    enc = {e["key"]: e for e in head["events"]}
    assert enc["llc_misses"]["raw"] == {"event": 0x2E, "umask": 0x41, "cmask": 0, "inv": False, "edge": False}
    first = json.loads(lines[1])["sample"]
    assert {"counts", "tsc", "tsc_hz", "interval", "time", "overflows", "suspect", "error", "estimated"} <= set(first)
    assert first["seq"] == 1 and first["counts"]["instructions"] > 0


def test_diff_compares_medians_per_core_and_metric(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    record_demo(capsys, tmp_path / "a.jsonl", 6, "--seed", "1")
    record_demo(capsys, tmp_path / "b.jsonl", 6, "--seed", "7")
    a, b = read_recording(str(tmp_path / "a.jsonl")), read_recording(str(tmp_path / "b.jsonl"))
    rows = {(r.cpu, r.metric): r for r in diff_rows(a, b)}
    import statistics

    ipc0 = statistics.median(
        s.counts["instructions"] / s.counts["cycles"] for s in a.samples if s.cpu == 0 and s.counts["cycles"]
    )
    assert rows[("0", "ipc")].a == pytest.approx(ipc0, abs=1e-5)
    assert ("all", "tma_backend_bound") in rows and ("2", "llc_mpki") in rows
    same = {(r.cpu, r.metric): r.change for r in diff_rows(a, a)}
    assert set(same.values()) <= {0.0, None}
    code, out, err = run(capsys, "diff", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl"))
    assert code == 0, err
    assert out.strip() == diff_table(a, b)
    assert "LLC MPKI" in out and "Retiring%" in out and "SIMULATED" in out
    line = next(x for x in out.splitlines() if x.split()[:2] == ["0", "IPC"])
    r = rows[("0", "ipc")]
    assert line.split()[-1] == f"{(r.b - r.a) / r.a * 100:+.1f}%"


def write_header(path: Path, **changes: object) -> None:
    h = Header(FORMAT_VERSION, "0", "box", 0.0, 1.0, "msr", [0], {0: ["cycles"]}, {0: None})
    path.write_text(json.dumps(header_to_dict(h) | changes) + "\n")


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: write_header(p, version=FORMAT_VERSION + 1), "is newer than this pmutop reads"),
        (lambda p: p.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(64)), "corrupt gzip data"),
        (lambda p: p.write_text("hello\nworld\n"), "not a pmutop recording"),
        (lambda p: p.write_text('{"some": "json"}\n'), "not a pmutop recording"),
        (lambda p: p.write_text(""), "empty file"),
        (lambda p: None, "no such file"),
        (lambda p: write_header(p, cpus="x"), "damaged recording header"),
    ],
    ids=["newer", "corrupt-gzip", "text", "other-json", "empty", "missing", "bad-header"],
)
@pytest.mark.parametrize("command", ["replay", "diff"])
def test_bad_recordings_give_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make, message: str, command: str
) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "x.jsonl"
    make(path)
    args = [command, str(path), "--batch"] if command == "replay" else [command, str(path), str(path)]
    code, _out, err = run(capsys, *args)
    assert code == 1
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert err.startswith(f"pmutop: {path}: ")


def test_a_damaged_line_in_the_middle_is_an_error_but_a_cut_last_line_is_not(tmp_path: Path) -> None:
    write_header(tmp_path / "x.jsonl")
    sample = json.dumps({"sample": sample_to_dict(Sample(0, 1, 1.0, 1.0, None, None, {"cycles": 5}))})
    good = (tmp_path / "x.jsonl").read_text() + sample + "\n"
    (tmp_path / "cut.jsonl").write_text(good + sample[:20])
    rec = read_recording(str(tmp_path / "cut.jsonl"))
    assert rec.truncated and len(rec.samples) == 1 and rec.samples[0].counts == {"cycles": 5}
    (tmp_path / "mid.jsonl").write_text(good + sample[:20] + "\n" + sample + "\n")
    mid = read_recording(str(tmp_path / "mid.jsonl"))  # streamed: the damage shows when the reading gets there
    with pytest.raises(RecordingError, match="damaged recording at line 3"):
        mid.intervals()


@pytest.mark.integration
def test_sigkilled_recording_replays_up_to_the_last_flushed_interval(tmp_path: Path) -> None:
    """A real pmutop killed with SIGKILL: its .gz recording replays what it printed, at most the last
    interval short."""
    path = tmp_path / "k.jsonl.gz"
    args = ["--demo", "--batch", "--interval", "0.05", "--sim-cpus", "2", "--format", "json", "--record", str(path)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pmutop", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        printed = [proc.stdout.readline() for _ in range(20)]  # 10 intervals of 2 CPUs
    finally:
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    live = printed + rest.splitlines(keepends=True)
    replay = subprocess.run(
        [sys.executable, "-m", "pmutop", "replay", str(path), "--batch", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert replay.returncode == 0, replay.stderr
    assert "Traceback" not in replay.stderr
    replayed = replay.stdout.splitlines(keepends=True)
    assert (
        len(replayed) >= len(live) - 2 * 3
    )  # at most the interval being written when it was killed (2 CPUs, 1 package)
    # The recorder may have written one more DRAM reading than stdout got out before the kill (issue 22).
    shared = min(len(replayed), len(live))
    assert replayed[:shared] == live[:shared] and len(replayed) <= len(live) + 1


def test_parse_time() -> None:
    assert parse_time("90") == 90.0
    assert parse_time("1:30") == 90.0
    assert parse_time("1:00:05.5") == 3605.5
    assert parse_time("soon") is None and parse_time("-3") is None


def test_replay_feed_seeks_and_pushes_history(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    record_demo(capsys, tmp_path / "r.jsonl", 30)
    rec = read_recording(str(tmp_path / "r.jsonl"))
    feed = ReplayFeed(rec)
    assert feed.length == 30 and feed.cpus == [0, 1, 2]
    for _ in range(5):
        assert feed.step()
    assert feed.position == 5 and feed.rings[0].count == 5
    assert feed.elapsed() == max(s.time for s in rec.intervals()[4])
    feed.seek(10)
    assert feed.position == 15
    latest = feed.rings[0].latest()
    assert latest is not None and latest.counts == rec.intervals()[14][0].counts
    assert latest.seq == feed.rings[0].count  # renumbered: the view's ring keeps counting up
    feed.seek(-100)
    assert feed.position == 1
    feed.seek_to(rec.intervals()[20][0].time)
    assert feed.position == 21
    feed.seek(100)
    assert feed.finished and not feed.step()


async def test_replay_view_shows_the_badge_position_and_seeks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record_demo(capsys, tmp_path / "r.jsonl.gz", 40)
    rec = read_recording(str(tmp_path / "r.jsonl.gz"))
    feed = ReplayFeed(rec)
    app = ReplayApp(feed, rec.header.run_info())
    async with app.run_test(size=(160, 50)) as pilot:
        before = app.updates
        feed.step()
        for _ in range(300):
            if app.updates > before:
                break
            await pilot.pause(0.02)
        banner = text_of(app.query_one("#banner"))
        assert f"REPLAY of {rec.header.host} {rec.header.start_text}" in banner
        assert "SIMULATED" in banner
        await pilot.press("right_square_bracket")
        assert feed.position == 11
        status = text_of(app.query_one("#status"))
        assert "speed 1×" in status and "at " in status
        assert "+Interval" not in footer_text(app) and "+10" in footer_text(app)
        await pilot.press("left_square_bracket")
        assert feed.position == 1
        await pilot.press("question_mark")
        await pilot.pause(0.05)
        assert "back / forward 10 intervals" in text_of(app.screen.query_one("#replay-help"))
        await pilot.press("escape")
        await pilot.press("x")
        assert feed.speed == "2"
        assert "speed 2×" in text_of(app.query_one("#status"))
        await pilot.press("space")
        assert feed.paused and app.paused
        await pilot.press("g")
        await pilot.press(*"0:01", "enter")
        await pilot.pause(0.1)
        assert feed.position == next(i for i, g in enumerate(rec.intervals()) if max(s.time for s in g) >= 1) + 1
        shown = app.query_one("#cores").get_cell("0", "ipc").plain  # type: ignore[attr-defined]
        assert shown.strip() not in ("", "-")
        await pilot.press("space")
        assert not feed.paused
        for key, screen in (
            ("2", "TopdownScreen"),
            ("3", "HeatmapScreen"),
            ("1", "KeptScreen"),
            ("enter", "DetailScreen"),
        ):
            await pilot.press(key)
            await pilot.pause(0.05)
            assert type(app.screen).__name__ == screen
        await pilot.press("right_square_bracket")  # seeking from another view refreshes it too
        await pilot.pause(0.05)
        assert app.failure is None
        await pilot.press("q")


def test_replay_batch_counts_and_drops_a_cpu_that_failed(tmp_path: Path) -> None:
    write_header(tmp_path / "f.jsonl", cpus=[0, 1], keys={"0": ["cycles"], "1": ["cycles"]})
    lines = []
    for seq in (1, 2, 3):
        for cpu in (0, 1):
            err = "cpu 1 went offline" if (cpu, seq) == (1, 2) else None
            if cpu == 1 and seq == 3:
                continue
            s = Sample(cpu, seq, seq * 1.0, 1.0, None, None, {} if err else {"cycles": 10}, error=err)
            lines.append(json.dumps({"sample": sample_to_dict(s)}))
    with open(tmp_path / "f.jsonl", "a") as f:
        f.write("\n".join(lines) + "\n")
    import io

    out, warnings = io.StringIO(), []
    done = replay_batch(read_recording(str(tmp_path / "f.jsonl")), "json", out, warn=warnings.append)
    assert done == 3
    assert [json.loads(x)["cpu"] for x in out.getvalue().splitlines()] == [0, 1, 0, 0]
    assert warnings == ["cpu 1 dropped: cpu 1 went offline"]


def test_record_to_an_unwritable_place_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _out, err = run(capsys, *DEMO, "--count", "1", "--record", str(tmp_path / "no" / "such" / "dir.jsonl"))
    assert code == 2
    assert err.strip().splitlines()[-1].startswith("pmutop: --record ")
    assert "No such file or directory" in err and "Traceback" not in err


def test_replay_live_view_needs_a_terminal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    record_demo(capsys, tmp_path / "r.jsonl", 2)
    code, _out, err = run(capsys, "replay", str(tmp_path / "r.jsonl"))
    assert code == 2 and "needs a terminal" in err


def test_replay_feed_thread_runs_to_the_end_at_max_speed_and_pauses(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    record_demo(capsys, tmp_path / "r.jsonl", 12)
    feed = ReplayFeed(read_recording(str(tmp_path / "r.jsonl")), speed="max")
    feed.set_paused(True)
    feed.start()
    try:
        assert not feed.wait_for_samples({cpu: 0 for cpu in feed.cpus}, timeout=0.3)  # paused: nothing comes
        feed.set_paused(False)
        assert feed.wait_for_samples({cpu: 11 for cpu in feed.cpus}, timeout=30)
        assert feed.finished and all(ring.count == 12 for ring in feed.rings.values())
    finally:
        feed.close()
    with pytest.raises(ValueError, match="speed must be one of"):
        feed.set_speed("3")


def test_every_sample_field_survives_the_round_trip() -> None:
    """A field added to Sample but not to the recording would make replays differ from the live run."""
    from pmutop.recording.format import SAMPLE_FIELDS, sample_from_dict

    s = Sample(
        cpu=3, seq=7, time=1.25, interval=0.5, tsc=123, tsc_hz=2.1e9, counts={"cycles": 9},
        overflows={"cycles": 1}, suspect="odd", error="gone", estimated={"cycles": 0.5}, util=0.4,
        topdown="perf_metrics", busy=40.0, bzy_mhz=3000.0, cstates={"C6": 12.5}, temp_c=55.0,
        throttle=("thermal",), package=1, pkg_temp_c=60.0, energy_j={"package": 1.5}, power_src={"busy": "msr"},
    )  # fmt: skip
    defaults = Sample(cpu=0, seq=0, time=0.0, interval=0.0, tsc=None, tsc_hz=None, counts={})
    assert all(getattr(s, f) != getattr(defaults, f) for f in SAMPLE_FIELDS)  # every field is exercised
    assert sample_from_dict(json.loads(json.dumps(sample_to_dict(s)))) == s


def test_a_count_limited_recording_holds_exactly_the_intervals_printed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--batch --count N --record F`: the engine may take one more sample before it stops (a loaded machine,
    a short interval); the recording still holds the N intervals the run printed, so its replay prints them."""
    from helpers.fake_task_source import PushedFeed

    from pmutop.sinks.recorder import Recorder

    record_demo(capsys, tmp_path / "source.jsonl", 2)
    header = read_recording(str(tmp_path / "source.jsonl")).header
    feed = PushedFeed()
    recorder = Recorder(str(tmp_path / "r.jsonl"), feed, header, limit=5)
    recorder.start()
    for n in range(1, 7):  # the sixth: sampled after the fifth was printed, before the engine stopped
        feed.push(n)
    assert recorder.close() is None
    assert ReplayFeed(read_recording(str(tmp_path / "r.jsonl"))).length == 5
