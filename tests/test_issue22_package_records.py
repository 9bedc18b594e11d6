"""Issue 22, the records side: the DRAM bandwidth as `kind: "package"` batch records (JSON, CSV, table), in the
exporter, in recordings, `replay --batch`, the replay's PackageFeed and `pmutop diff`.

End to end with --demo: the simulated memory reads exactly the package's LLC misses x 64 over the interval it
covers. With the real clock the CPU samplers and the DRAM read happen microseconds apart, so the exact tests run
the simulated machine on a clock that only moves in steps of the interval (every read of one interval sees the
same instant, as the deadlines the samplers keep)."""

from __future__ import annotations

import csv
import io
import json
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pmutop.app.dram_setup import DramSetup
from pmutop.app.main import main
from pmutop.core.clock import ManualClock
from pmutop.core.dram_reading import DramReading, PackageDram, PackageFeed, package_totals
from pmutop.core.run_description import RunInfo
from pmutop.engine.engine import Engine
from pmutop.engine.package_sampler import PackageSampler
from pmutop.feeds.replay import ReplayFeed
from pmutop.recording.reader import read_recording
from pmutop.sim.config import SimConfig
from pmutop.sim.dram import SimDramCounters
from pmutop.sim.platform import SimPlatform
from pmutop.sinks.batch import run_batch
from pmutop.sinks.exporter import PmuCollector

INTERVAL = 0.1
DEMO = ("--demo", "--batch", "--interval", str(INTERVAL), "--sim-cpus", "2")


class SteppedClock:
    """The monotonic clock in steps of one interval: the samplers' deadlines fall on a step, so the CPU samples
    of an interval and the DRAM read after them all see the same instant (unless a read is a whole step late).

    A time up to `lead_ns` before a step reads as that step: a sampler's timed wait can end a hair before its
    deadline, and on a plain floor it would then read the step before and sleep one whole step more (1 run in
    about 15 failed so)."""

    step_ns = int(INTERVAL * 1e9)
    lead_ns = 5_000_000

    def now_ns(self) -> int:
        return (time.monotonic_ns() + self.lead_ns) // self.step_ns * self.step_ns


@pytest.fixture
def stepped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("pmutop.sim.model.MonotonicClock", SteppedClock)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def packages_of(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == "package"]


def test_json_package_records_are_the_packages_llc_misses_times_64(
    stepped: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *DEMO, "--format", "json", "--count", "3")
    assert code == 0, err
    records = json_lines(out)
    for index in (1, 2, 3):
        of_interval = [r for r in records if r["interval_index"] == index]
        assert [r["kind"] for r in of_interval] == ["cpu", "cpu", "package"]  # after the CPU records
        cpus, (pkg,) = of_interval[:2], of_interval[2:]
        assert pkg["time"] == cpus[0]["time"] and pkg["package"] == 0
        assert pkg["dram_read_bytes"] == sum(c["llc_misses"] for c in cpus if c["package"] == 0) * 64
        assert pkg["source"] == "simulated" and pkg["mode"] == "SIMULATED" and pkg["saturated"] is False
        assert pkg["dram_read_bytes_per_s"] == float(f"{pkg['dram_read_bytes'] / pkg['interval']:.6g}")
        assert 0 < pkg["dram_write_bytes"] <= pkg["dram_read_bytes"]
        assert pkg["dram_peak_bytes_per_s"] == 307.2e9  # SPR: 8 channels x 4800 MT/s x 8 bytes
        total = (pkg["dram_read_bytes"] + pkg["dram_write_bytes"]) / pkg["interval"]
        assert pkg["dram_peak_share"] == pytest.approx(total / 307.2e9, rel=1e-5)
        assert pkg["dram_channels"] == len(pkg["channels"]) == 8
        assert sum(c["read_bytes"] for c in pkg["channels"]) == pkg["dram_read_bytes"]
        assert sum(c["write_bytes"] for c in pkg["channels"]) == pkg["dram_write_bytes"]
        ch = pkg["channels"][3]
        assert (ch["channel"], ch["pmu"], ch["saturated"]) == (3, "sim_imc_3", False)
        assert ch["read_bytes_per_s"] == float(f"{ch['read_bytes'] / pkg['interval']:.6g}")
    assert "SIMULATED" in err


def test_the_unthreaded_batch_reads_the_dram_after_each_intervals_cpu_samples() -> None:
    """The perf backend's batch path (one loop reads every CPU): run_batch calls the sampler's sample_once."""
    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(cpus=2, model="spr"), clock)
    from pmutop.backends.sim import SimBackend

    engine = Engine(SimBackend(platform, clock, None), platform, clock, [0, 1], 0.5, threaded=False)
    engine.start()
    dram = SimDramCounters(platform.machine)
    dram.open()
    sampler = PackageSampler(dram, engine)
    sampler.begin()
    seen: list[int] = []
    sampler.add_listener(lambda index, at, packages: seen.append(index))

    def pace() -> bool:
        clock.advance(0.5)
        engine.tick()
        return True

    out = io.StringIO()
    try:
        run_batch(engine, "json", 3, "SIMULATED", out=out, pace=pace, packages=sampler)
    finally:
        engine.stop()
    records = json_lines(out.getvalue())
    for index in (1, 2, 3):
        cpus = [r for r in records if r["interval_index"] == index and r["kind"] == "cpu"]
        (pkg,) = [r for r in records if r["interval_index"] == index and r["kind"] == "package"]
        assert pkg["dram_read_bytes"] == sum(c["llc_misses"] for c in cpus) * 64 > 0
        assert pkg["interval"] == 0.5 and pkg["time"] == cpus[0]["time"]
    assert seen == [1, 2, 3]  # the recorder's listener hears each reading once


def test_csv_and_table_print_package_records_as_their_own_kind(
    stepped: None, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *DEMO, "--format", "csv", "--records", "package", "--count", "2")
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 2 and {r["kind"] for r in rows} == {"package"}
    header = out.splitlines()[0].split(",")
    assert header[:5] == ["kind", "time", "interval_index", "package", "interval"]
    assert "channels" not in header and "ch7_write_bytes_per_s" in header and "ch8_read_bytes" not in header
    row = rows[0]
    assert sum(int(row[f"ch{n}_read_bytes"]) for n in range(8)) == int(row["dram_read_bytes"])
    assert row["ch0_saturated"] == "false" and row["saturated"] == "false" and row["source"] == "simulated"
    assert row["dram_channels"] == "8" and row["mode"] == "SIMULATED"

    code, out, err = run(capsys, *DEMO, "--records", "package", "--count", "2")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:9] == ["time", "PKG", "CH", "PMU", "Read", "B/s", "Write", "B/s", "Total"]
    assert lines[0].endswith("flags  SIMULATED")
    assert len(lines) == 1 + 2 * (8 + 1)  # per interval: 8 channels, then the package's all row
    all_row = lines[9].split()
    assert all_row[1:3] == ["0", "all"] and all_row[6] == "307G" and lines[9].endswith("-  SIMULATED")
    assert lines[1].split()[1:4] == ["0", "0", "sim_imc_0"]


def test_records_package_without_a_dram_source_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    why = "no memory-controller PMU in sysfs"
    monkeypatch.setattr("pmutop.app.commands.run.open_dram", lambda *_a, **_k: DramSetup(None, why))
    code, out, err = run(capsys, *DEMO, "--records", "package", "--count", "1")
    assert code == 2 and out == ""
    assert err == f"pmutop: --records package: no DRAM bandwidth source here ({why})\n"
    code, out, err = run(capsys, *DEMO, "--format", "json", "--count", "2")  # JSON: no package records, no word
    assert code == 0 and {r["kind"] for r in json_lines(out)} == {"cpu"}
    assert "DRAM" not in err


def test_records_package_on_this_vm_says_why_there_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    devices = Path("/sys/bus/event_source/devices")
    if any(p.name.startswith(("uncore_imc", "amd_umc")) for p in devices.iterdir()):
        pytest.skip("this machine has memory-controller PMUs")
    code, out, err = run(capsys, "--batch", "--backend", "perf", "--records", "package", "--count", "1")
    if "--records package" not in err:
        pytest.skip(f"the perf backend did not start here: {err.strip()}")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("pmutop: --records package: no DRAM bandwidth source here (")


def record(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> str:
    code, out, err = run(capsys, *DEMO, "--count", "4", "--format", "json", "--record", str(path), *extra)
    assert code == 0, err
    return out


@pytest.mark.parametrize("name", ["run.jsonl", "run.jsonl.gz"])
def test_record_then_replay_batch_prints_the_same_package_records(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    live = record(capsys, path)
    assert len(packages_of(json_lines(live))) == 4
    code, replayed, err = run(capsys, "replay", str(path), "--batch", "--format", "json")
    assert code == 0, err
    assert replayed == live  # every record, the package ones in their place
    code, out, err = run(capsys, "replay", str(path), "--batch", "--format", "json", "--records", "package")
    assert code == 0 and json_lines(out) == packages_of(json_lines(live))
    code, out, err = run(capsys, "replay", str(path), "--batch", "--format", "csv", "--records", "package")
    assert code == 0 and [r["dram_read_bytes"] for r in csv.DictReader(io.StringIO(out))] == [
        str(r["dram_read_bytes"]) for r in packages_of(json_lines(live))
    ]
    header = read_recording(str(path)).header
    assert header.version == 3 and header.dram is not None and header.dram["source"] == "simulated"
    assert "SIMULATED" in header.dram["why"]


def test_a_reading_written_after_the_next_intervals_samples_still_pairs_by_time(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    live = record(capsys, path)
    lines = path.read_text().splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if line.startswith('{"packages":'))
    moved = lines.pop(first)
    second = next(i for i, line in enumerate(lines) if line.startswith('{"packages":'))
    lines.insert(second, moved)  # after interval 2's samples
    path.write_text("".join(lines))
    code, replayed, err = run(capsys, "replay", str(path), "--batch", "--format", "json")
    assert code == 0, err
    assert replayed == live


def test_old_recordings_without_package_lines_still_replay(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    live = json_lines(record(capsys, path))
    lines = path.read_text().splitlines(keepends=True)
    header = json.loads(lines[0])
    del header["dram"]
    header["version"] = 2  # what pmutop wrote before DRAM readings
    body = [line for line in lines[1:] if not line.startswith('{"packages":')]
    path.write_text(json.dumps(header) + "\n" + "".join(body))
    code, out, err = run(capsys, "replay", str(path), "--batch", "--format", "json")
    assert code == 0, err
    assert json_lines(out) == [r for r in live if r["kind"] == "cpu"]
    feed = ReplayFeed(read_recording(str(path)), "max")
    try:
        assert feed.step() and feed.package_feed is None
    finally:
        feed.close()
    code, out, err = run(capsys, "replay", str(path), "--batch", "--records", "package")
    assert code == 2 and out == ""
    assert err == (
        f"pmutop: --records package: {path} holds no package records (recorded without a DRAM bandwidth source)\n"
    )


def test_a_recording_without_a_dram_source_stays_version_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setattr("pmutop.app.commands.run.open_dram", lambda *_a, **_k: DramSetup(None, "none here"))
    path = tmp_path / "run.jsonl"
    record(capsys, path)
    header = json.loads(path.read_text().splitlines()[0])
    assert header["version"] == 2 and header["dram"] is None  # readable by the pmutop before


def test_the_replay_feed_gives_the_memory_views_a_package_feed(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "run.jsonl"
    live = packages_of(json_lines(record(capsys, path)))
    feed = ReplayFeed(read_recording(str(path)), "max")
    try:
        packages: PackageFeed | None = feed.package_feed
        assert packages is not None and packages.seq == 0 and packages.latest() is None
        assert packages.source_name == "simulated" and packages.why.startswith("SIMULATED")
        while feed.step():
            pass
        assert packages.seq == 4
        latest = packages.latest()
        assert latest is not None and latest[0].read_bytes == live[-1]["dram_read_bytes"]
        assert [p.read_bytes for p in packages.history(0)] == [r["dram_read_bytes"] for r in live]
        assert [round(t, 3) for t, _ in packages.timeline()] == [r["time"] for r in live]
        assert packages.latest_time() == pytest.approx(live[-1]["time"], abs=1e-3)
        feed.seek(-2)  # back to interval 2: the history is pushed again up to it
        assert [p.read_bytes for p in packages.history(0)] == [r["dram_read_bytes"] for r in live[:2]]
        assert packages.seq > 4  # the view redraws
    finally:
        feed.close()


def test_diff_compares_dram_bandwidth_per_package(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    live_a = packages_of(json_lines(record(capsys, a)))
    live_b = packages_of(json_lines(record(capsys, b, "--sim-model", "adl")))
    code, out, err = run(capsys, "diff", str(a), str(b))
    assert code == 0, err
    lines = out.splitlines()
    start = lines.index("DRAM bandwidth per package (average over each whole recording)")
    assert lines[start + 1].split() == ["package", "metric", "A", "B", "change"]

    def average(records: list[dict[str, Any]], key: str) -> float:
        return sum(r[key] for r in records) / sum(r["interval"] for r in records)

    from pmutop.core.numfmt import si

    for row, key, title in (
        (lines[start + 2], "dram_read_bytes", "read"),
        (lines[start + 3], "dram_write_bytes", "write"),
    ):
        ra, rb = average(live_a, key), average(live_b, key)
        change = f"{(rb - ra) / ra * 100:+.1f}%"
        assert row.split() == ["0", title, "B/s", si(ra).strip(), si(rb).strip(), change]


class FakePackages:
    """A PackageFeed with readings the test sets."""

    source_name = "uncore"
    why = "2 channels per package (test)"

    def __init__(self) -> None:
        self.readings: list[tuple[float, list[PackageDram]]] = []

    @property
    def seq(self) -> int:
        return len(self.readings)

    def latest(self) -> list[PackageDram] | None:
        return self.readings[-1][1] if self.readings else None

    def latest_time(self) -> float:
        return self.readings[-1][0] if self.readings else 0.0

    def history(self, package: int) -> list[PackageDram]:
        return [p for _, ps in self.readings for p in ps if p.package == package]

    def timeline(self) -> list[tuple[float, list[PackageDram]]]:
        return list(self.readings)


def reading(package: int, reads: list[float | None], writes: list[float | None], **kw: Any) -> PackageDram:
    saturated = kw.pop("saturated", ())
    channels = tuple(
        DramReading(f"amd_umc_{package * 2 + n}", package, n, r, w, 1.0, n in saturated)
        for n, (r, w) in enumerate(zip(reads, writes, strict=True))
    )
    return package_totals(package, channels, 1.0, kw.get("peak"))


def scrape(collector: PmuCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for fam in collector.collect()
        for s in fam.samples
        if s.name.startswith("pmutop_dram")
    }


class EmptyFeed:
    """No CPUs: the exporter's DRAM families alone."""

    def __init__(self) -> None:
        self.cpus: list[int] = []
        self.rings: dict[int, Any] = {}

    def failures(self) -> dict[int, str]:
        return {}


def test_the_exporter_sums_dram_bytes_per_package_channel_and_direction() -> None:
    packages = FakePackages()
    info = RunInfo("h", "m", None, "p", "perf", "r", simulated=False, hypervisor=False, cpus=[])
    collector = PmuCollector(EmptyFeed(), info, packages)  # type: ignore[arg-type]
    packages.readings.append((1.0, [reading(0, [640, 64], [128, 0], peak=100e9), reading(1, [6400, 0], [0, 0])]))
    packages.readings.append(
        (2.0, [reading(0, [64, None], [64, 64], peak=100e9, saturated={1}), reading(1, [64, 64], [64, 64])])
    )
    first = scrape(collector)
    assert scrape(collector) == first  # a second scrape adds nothing: each reading is folded once

    def value(name: str, **labels: str) -> float:
        return first[(name, tuple(sorted(labels.items())))]

    assert value("pmutop_dram_bytes_total", package="0", channel="0", direction="read") == 704
    assert value("pmutop_dram_bytes_total", package="0", channel="1", direction="read") == 64  # None added nothing
    assert value("pmutop_dram_bytes_total", package="0", channel="1", direction="write") == 64
    assert value("pmutop_dram_bytes_total", package="1", channel="0", direction="read") == 6464
    assert value("pmutop_dram_saturated_intervals_total", package="0", channel="1") == 1
    assert value("pmutop_dram_saturated_intervals_total", package="1", channel="0") == 0
    assert value("pmutop_dram_peak_bytes_per_second", package="0") == 100e9
    assert ("pmutop_dram_peak_bytes_per_second", (("package", "1"),)) not in first  # unknown: absent
    assert value("pmutop_dram_source_info", source="uncore") == 1
    labels = {k for _, pairs in first for k, _ in pairs}
    assert labels == {"package", "channel", "direction", "source"}  # never per CPU, never per process
    packages.readings.append((3.0, [reading(0, [64, 64], [0, 0], peak=100e9), reading(1, [0, 0], [0, 0])]))
    assert (
        scrape(collector)[("pmutop_dram_bytes_total", (("channel", "0"), ("direction", "read"), ("package", "0")))]
        == 768
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_serve_demo_exports_the_simulated_dram_bandwidth() -> None:
    port = free_port()
    args = ["serve", "--demo", "--listen", f"127.0.0.1:{port}", "--interval", "0.1", "--sim-cpus", "2"]
    proc = subprocess.Popen([sys.executable, "-m", "pmutop", *args], stderr=subprocess.PIPE, text=True)
    try:
        deadline, text = time.monotonic() + 30, ""
        # Until every channel has moved bytes both ways (the first 0.1 s interval of a quiet phase may write none).
        while time.monotonic() < deadline and not _every_channel_moved(text):
            time.sleep(0.2)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
                    text = response.read().decode()
            except OSError:
                continue
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    dram = [line for line in text.splitlines() if line.startswith("pmutop_dram")]
    assert 'pmutop_dram_source_info{source="simulated"} 1.0' in dram
    moved = [line for line in dram if line.startswith("pmutop_dram_bytes_total{")]
    assert len(moved) == 8 * 2  # 8 channels x read, write on the one simulated package
    assert all(float(line.split()[-1]) > 0 for line in moved)
    assert 'pmutop_dram_bytes_total{channel="7",direction="write",package="0"}' in "\n".join(moved)
    assert 'pmutop_dram_peak_bytes_per_second{package="0"} 3.072e+11' in dram
    assert 'pid="' not in text and "comm=" not in text  # no per-process series


def _every_channel_moved(text: str) -> bool:
    moved = [line for line in text.splitlines() if line.startswith("pmutop_dram_bytes_total{")]
    return len(moved) == 8 * 2 and all(float(line.split()[-1]) > 0 for line in moved)


class ListenedSampler:
    """What PackagePairing uses of the package sampler: its listeners, timeline and failure."""

    failure: str | None = None

    def __init__(self) -> None:
        self.listeners: list[Any] = []

    def add_listener(self, callback: Any) -> None:
        self.listeners.append(callback)

    def timeline(self) -> list[tuple[float, list[PackageDram]]]:
        return []

    def read(self, index: int, at: float) -> None:
        for callback in self.listeners:
            callback(index, at, [reading(0, [64 * index], [0])])


def test_the_threaded_batch_pairs_readings_by_time_and_never_prints_one_twice_or_drops_it() -> None:
    from pmutop.sinks.batch_packages import PackagePairing

    sampler = ListenedSampler()
    pairing = PackagePairing(sampler, wait=0.05)  # type: ignore[arg-type]
    sampler.read(1, 0.1)
    assert [at for at, _ in pairing.take(0.1, lambda: False)] == [0.1]
    started = time.monotonic()
    assert pairing.take(0.2, lambda: False) == []  # the sampler was late: nothing for this interval...
    assert time.monotonic() - started < 1.0  # ...after a short wait
    sampler.read(2, 0.3)  # its reading covers intervals 2 and 3: printed once, with interval 3
    assert [at for at, _ in pairing.take(0.3, lambda: False)] == [0.3]
    assert pairing.take(0.3, lambda: True) == []
