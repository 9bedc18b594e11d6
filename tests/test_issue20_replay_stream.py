"""Issue 20, item 11: replay streams the recording. Printing one interval reads only the start of the file, a
seek reads only around its target (an index built as the file is read: byte offsets, gzip checkpoints), the
live replay pushes its first interval before the index is built and says how far the index is."""

from __future__ import annotations

import gzip
import io
import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from test_record import run, text_of

from pmutop.core.sample import Sample
from pmutop.feeds.replay import HISTORY_ON_SEEK, ReplayFeed
from pmutop.recording import reader
from pmutop.recording.format import FORMAT_VERSION, Header, header_to_dict, sample_to_dict
from pmutop.recording.reader import read_recording
from pmutop.sinks.batch_replay import replay_batch
from pmutop.tui.replay_controls import ReplayApp

INTERVALS, CPUS = 20_000, 8
KEYS = ["cycles", "instructions", "ref_cycles", "llc_misses"]


def sample(cpu: int, seq: int, time: float, cycles: int, instructions: int) -> Sample:
    counts = {"cycles": cycles, "instructions": instructions, "ref_cycles": 900_000, "llc_misses": 100}
    return Sample(cpu, seq, time, 0.5, 1_000_000, 2.0e9, counts)


def sample_line(cpu: int, seq: int) -> str:
    s = sample(cpu, seq, seq * 0.5, 1_000_000 + seq, 2_000_000 + 7 * seq + cpu)
    return json.dumps({"sample": sample_to_dict(s)}, separators=(",", ":"))


# One line as the recorder writes it, with %-placeholders where the numbers that change go.
_TEMPLATE = json.dumps({"sample": sample_to_dict(sample(-101, -102, -103.0, -104, -105))}, separators=(",", ":"))
_TEMPLATE = _TEMPLATE.replace("%", "%%")
for _mark, _field in (("-101", "cpu"), ("-102", "seq"), ("-103.0", "time"), ("-104", "cycles"), ("-105", "ins")):
    _TEMPLATE = _TEMPLATE.replace(_mark, f"%({_field})" + ("r" if _field == "time" else "d"))


def write_recording(path: Path, intervals: int = INTERVALS, cpus: int = CPUS, order: str = "in-order") -> int:
    """A recording as the recorder writes it, made fast from one line's template. `order="lagging"`: two
    intervals of each CPU before the next CPU's (a recorder that fell behind). Returns the decoded size."""
    h = Header(FORMAT_VERSION, "0", "box", 1.7e9, 0.5, "msr", list(range(cpus)), dict.fromkeys(range(cpus), KEYS), {})

    def line(cpu: int, seq: int) -> str:
        return _TEMPLATE % {
            "cpu": cpu,
            "seq": seq,
            "time": seq * 0.5,
            "cycles": 1_000_000 + seq,
            "ins": 2_000_000 + 7 * seq + cpu,
        }

    assert line(3, 9) == sample_line(3, 9)  # the template writes what the recorder writes
    if order == "in-order":
        lines = [line(cpu, seq) for seq in range(1, intervals + 1) for cpu in range(cpus)]
    else:
        lines = [
            line(cpu, seq) for pair in range(1, intervals + 1, 2) for cpu in range(cpus) for seq in (pair, pair + 1)
        ]
    text = (json.dumps(header_to_dict(h)) + "\n" + "\n".join(lines) + "\n").encode()
    if path.name.endswith(".gz"):
        # As the recorder writes: a sync flush after every interval, so a seek cannot lean on stream ends.
        gz = zlib.compressobj(1, zlib.DEFLATED, 31)
        step = len(text) // intervals * 50
        parts = [gz.compress(text[i : i + step]) + gz.flush(zlib.Z_SYNC_FLUSH) for i in range(0, len(text), step)]
        path.write_bytes(b"".join(parts) + gz.flush())
    else:
        path.write_bytes(text)
    return len(text)


class CountingFile(io.FileIO):
    read_bytes = 0

    def readinto(self, buffer: Any) -> int | None:
        n = super().readinto(buffer)
        CountingFile.read_bytes += n or 0
        return n


@pytest.fixture
def bytes_read(monkeypatch: pytest.MonkeyPatch) -> type[CountingFile]:
    """Every byte the reader and the index take from a file."""

    def counting_open(path: str, mode: str = "r") -> io.BufferedReader:
        assert mode == "rb"
        return io.BufferedReader(CountingFile(path, "rb"))

    monkeypatch.setattr(reader, "open", counting_open, raising=False)
    CountingFile.read_bytes = 0
    return CountingFile


@pytest.fixture(scope="module", params=["big.jsonl", "big.jsonl.gz"])
def big(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("big") / request.param
    write_recording(path)
    return path


def test_printing_one_interval_reads_only_the_start_of_the_file(
    big: Path, bytes_read: type[CountingFile], capsys: pytest.CaptureFixture[str]
) -> None:
    size = big.stat().st_size
    out = io.StringIO()
    assert replay_batch(read_recording(str(big)), "json", out, count=1) == 1
    records = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [r["cpu"] for r in records] == list(range(CPUS))
    assert bytes_read.read_bytes < max(200_000, size // 100)  # ~5% would be many intervals; this is a few
    if not big.name.endswith(".gz"):  # the command as a user runs it (see the report for .gz: app/main.py)
        bytes_read.read_bytes = 0
        code, printed, err = run(capsys, "replay", str(big), "--batch", "--format", "json", "--count", "1")
        assert code == 0, err
        assert printed == out.getvalue()
        assert bytes_read.read_bytes < 200_000


def test_seeking_to_the_end_reads_only_around_it_and_shows_the_last_interval(
    big: Path, bytes_read: type[CountingFile]
) -> None:
    feed = ReplayFeed(read_recording(str(big)))
    try:
        assert feed.step()  # the first interval, whether or not the index is done
        assert feed.length == INTERVALS
        assert feed.notice is None  # indexed: no progress line any more
        before = bytes_read.read_bytes
        feed.seek(INTERVALS)
        assert feed.finished and feed.position == INTERVALS
        latest = feed.rings[0].latest()
        assert latest is not None and latest.counts["cycles"] == 1_000_000 + INTERVALS
        assert feed.elapsed() == INTERVALS * 0.5
        assert feed.rings[0].count == 1 + HISTORY_ON_SEEK  # the history before it, not the whole file
        seek_read = bytes_read.read_bytes - before
        assert seek_read < big.stat().st_size // 20  # a few MB of a gzip stream, a few hundred kB of a file
        feed.seek_to(1234 * 0.5)
        assert feed.position == 1234
        assert feed.rings[3].latest().counts["instructions"] == 2_000_000 + 7 * 1234 + 3  # type: ignore[union-attr]
    finally:
        feed.close()


@pytest.mark.parametrize("name", ["lag.jsonl", "lag.jsonl.gz"])
def test_a_lagging_recorder_s_interleaved_intervals_group_and_seek_right(tmp_path: Path, name: str) -> None:
    """Lines c0s1 c0s2 c1s1 c1s2 …: sample n of every CPU is still one interval, read straight or after a seek."""
    path = tmp_path / name
    write_recording(path, intervals=300, cpus=3, order="lagging")
    rec = read_recording(str(path))
    groups = rec.intervals()
    assert len(groups) == 300
    assert all([s.seq for s in g] == [i + 1] * 3 and [s.cpu for s in g] == [0, 1, 2] for i, g in enumerate(groups))
    feed = ReplayFeed(rec)
    try:
        for target in (151, 2, 300, 77):  # even and odd: half of them start in the middle of a pair
            feed.seek(target - feed.position)
            assert feed.position == target
            assert [feed.rings[c].latest().counts["cycles"] for c in range(3)] == [1_000_000 + target] * 3  # type: ignore[union-attr]
    finally:
        feed.close()


def test_the_live_replay_shows_its_first_interval_before_the_index_and_says_how_far_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.jsonl.gz"
    write_recording(path, intervals=500)
    from pmutop.recording.index import RecordingIndex

    monkeypatch.setattr(RecordingIndex, "start", lambda self: None)  # the index thread has not got anywhere yet
    feed = ReplayFeed(read_recording(str(path)))
    assert feed.step() and feed.rings[0].count == 1
    assert feed.notice == "indexing 0%"
    feed.seek(100)  # nothing indexed: a seek waits a moment, then stays where it is
    assert feed.position == 1
    feed.index.build()
    assert feed.notice is None and feed.duration == 250.0
    feed.seek(100)
    assert feed.position == 101


async def test_the_status_line_shows_the_index_progress(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "r.jsonl"
    write_recording(path, intervals=50)
    from pmutop.recording.index import RecordingIndex

    monkeypatch.setattr(RecordingIndex, "start", lambda self: None)
    rec = read_recording(str(path))
    feed = ReplayFeed(rec)
    app = ReplayApp(feed, rec.header.run_info())
    async with app.run_test(size=(160, 40)) as pilot:
        feed.step()
        await pilot.pause(0.1)
        app._refresh_header()
        assert "indexing 0%" in text_of(app.query_one("#status"))
        feed.index.build()
        app._refresh_header()
        assert "indexing" not in text_of(app.query_one("#status"))
        await pilot.press("q")


def test_a_damaged_line_stops_the_replay_there_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "d.jsonl"
    write_recording(path, intervals=10, cpus=2)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[9] = lines[9][:30] + b"\n"  # interval 5, cpu 0 (line 10 of the file)
    path.write_bytes(b"".join(lines))
    code, out, err = run(capsys, "replay", str(path), "--batch", "--format", "json")
    assert code == 1
    assert len(out.splitlines()) == 4 * 2  # what came before the damage
    assert err == f"pmutop: {path}: damaged recording at line 10\n"
    feed = ReplayFeed(read_recording(str(path)))
    try:
        while feed.step():
            pass
        assert feed.position == 4 and feed.finished
        assert feed.notice == f"{path}: damaged recording at line 10"
    finally:
        feed.close()


def test_a_gzip_recording_cut_short_is_known_as_such(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.gz"
    write_recording(path, intervals=40, cpus=2)
    text = gzip.decompress(path.read_bytes())
    gz = zlib.compressobj(6, zlib.DEFLATED, 31)
    path.write_bytes(gz.compress(text[:-40]) + gz.flush(zlib.Z_SYNC_FLUSH))  # killed: no stream end
    rec = read_recording(str(path))
    assert rec.truncated_if_known is None  # not known without reading the whole stream
    assert rec.truncated
    assert [len(g) for g in rec.intervals()[-2:]] == [2, 1]  # the last interval lost its cpu 1
    feed = ReplayFeed(read_recording(str(path)))
    try:
        assert feed.length == 40
        assert feed.notice is not None and "cut short" in feed.notice
    finally:
        feed.close()


def test_diff_reads_each_file_once_holding_values_not_samples(tmp_path: Path) -> None:
    import tracemalloc

    from pmutop.recording.diff import diff_table

    path = tmp_path / "a.jsonl"
    decoded = write_recording(path, intervals=500)
    tracemalloc.start()
    try:
        table = diff_table(read_recording(str(path)), read_recording(str(path)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "500 intervals of 0.5 s" in table
    assert peak < decoded / 2, peak  # the samples read into objects took several times the text
