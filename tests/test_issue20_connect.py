"""Issue 20, item 13 and the small `--connect` / `serve` defects: a remote feed is recorded (and replays with
its hosts) and works with --batch; one exporter named twice is shown once; bad URLs are usage errors (2);
what serve exports (Busy%, °C, package watts, C-states) reaches the remote samples; serve answers HEAD
/metrics and 404s other paths."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers.serve import ROOT, free_port, scrape, start_serve, stop

from pmutop.feeds.remote import HOST_STRIDE, RemoteFeed

pytestmark = pytest.mark.integration  # starts processes, terminals or servers


@pytest.fixture(scope="module")
def server():  # type: ignore[no-untyped-def]
    port = free_port()
    proc = start_serve(port, "--sim-cpus", "2", "--interval", "0.1")
    try:
        scrape(port)
        yield port
    finally:
        stop(proc)


def pmutop(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pmutop", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.parametrize("url", ["notaurl", "ftp://x", "http://", "127.0.0.1:99999", "127.0.0.1:port"])
def test_a_bad_url_is_one_line_and_status_2(url: str) -> None:
    r = pmutop("--connect", url)
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and f"--connect {url!r}" in r.stderr and "HOST:PORT" in r.stderr


def test_a_host_that_does_not_answer_is_status_1() -> None:
    r = pmutop("--connect", f"127.0.0.1:{free_port()}", "--batch", "--count", "1")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "refused" in r.stderr


def test_one_exporter_named_twice_is_shown_once(server: int) -> None:
    urls = [f"127.0.0.1:{server}", f"http://localhost:{server}/metrics", f"http://127.0.0.1:{server}/"]
    feed = RemoteFeed(urls, 0.1)
    assert len(feed.hosts) == 1 and feed.cpus == [0, 1]
    assert feed.notes == [
        f"--connect {urls[1]} and {urls[2]}: the same exporter as {urls[0]}; shown once",
    ]


def test_connect_batch_prints_the_remote_cpus_once_per_exporter(server: int) -> None:
    r = pmutop(
        *("--connect", f"127.0.0.1:{server}", "--connect", f"localhost:{server}"),
        *("--batch", "--count", "3", "--interval", "0.2", "--format", "json"),
    )
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert [rec["cpu"] for rec in records] == [0, 1] * 3
    assert all(rec["ipc"] and 0 < rec["ipc"] < 8 for rec in records)
    assert all(rec["mode"] == "SIMULATED" for rec in records)
    assert "the same exporter" in r.stderr and "SIMULATED" in r.stderr


def test_connect_records_a_recording_that_replays_with_its_hosts(server: int, tmp_path: Path) -> None:
    path = tmp_path / "remote.jsonl.gz"
    r = pmutop(
        *("--connect", f"127.0.0.1:{server}", "--batch", "--count", "4", "--interval", "0.2"),
        *("--format", "json", "--record", str(path)),
    )
    assert r.returncode == 0, r.stderr
    lines = gzip.decompress(path.read_bytes()).decode().splitlines()
    head = json.loads(lines[0])
    assert head["mode"] == "SIMULATED" and head["cpus"] == [0, 1]
    assert head["backend"]["hosts"] == [{"name": head["host"], "url": f"http://127.0.0.1:{server}/metrics"}]
    assert head["backend"]["labels"] == {"0": f"{head['host']}:0", "1": f"{head['host']}:1"}
    samples = [json.loads(line)["sample"] for line in lines[1:]]
    assert len(samples) >= 8 and {s["cpu"] for s in samples} == {0, 1}
    replayed = pmutop("replay", str(path), "--batch", "--format", "json")
    assert replayed.returncode == 0, replayed.stderr
    assert replayed.stdout == r.stdout  # the recording holds what the run printed


def test_two_hosts_recorded_keep_their_intervals_together(server: int, tmp_path: Path) -> None:
    other = free_port()
    proc = start_serve(other, "--sim-cpus", "1", "--interval", "0.1", "--seed", "3")
    try:
        scrape(other)
        path = tmp_path / "two.jsonl"
        r = pmutop(
            *("--connect", f"127.0.0.1:{server}", "--connect", f"127.0.0.1:{other}"),
            *("--batch", "--count", "5", "--interval", "0.15", "--format", "json", "--record", str(path)),
        )
    finally:
        stop(proc)
    assert r.returncode == 0, r.stderr
    lines = path.read_text().splitlines()
    head = json.loads(lines[0])
    assert head["cpus"] == [0, 1, HOST_STRIDE]
    assert set(head["backend"]["labels"].values()) == {
        f"127.0.0.1:{server}:0",
        f"127.0.0.1:{server}:1",
        f"127.0.0.1:{other}:0",
    }
    by_seq: dict[int, set[int]] = {}
    for line in lines[1:]:
        s = json.loads(line)["sample"]
        by_seq.setdefault(s["seq"], set()).add(s["cpu"])
    assert len(by_seq) >= 5 and all(cpus == {0, 1, HOST_STRIDE} for cpus in by_seq.values())
    replayed = pmutop("replay", str(path), "--batch", "--format", "json")
    assert replayed.returncode == 0 and replayed.stdout == r.stdout


def test_what_serve_exports_reaches_the_remote_samples(server: int) -> None:
    import time

    feed = RemoteFeed([f"127.0.0.1:{server}"], 0.1)
    time.sleep(0.35)
    feed.poll()
    time.sleep(0.35)
    feed.poll()
    first = feed.rings[0].latest()
    assert first is not None and first.error is None
    assert first.temp_c is not None and first.busy is not None and 0 < first.busy <= 100
    assert first.bzy_mhz is not None and first.bzy_mhz > 100
    assert first.cstates and all(0 <= v <= 100 for v in first.cstates.values())
    assert first.package == 0 and first.energy_j.get("package", 0) > 0  # the package's first CPU
    second = feed.rings[1].latest()
    assert second is not None and "package" not in second.energy_j  # counted once per package


def test_serve_answers_head_and_only_its_paths(server: int) -> None:
    head = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{server}/metrics", method="HEAD"))
    assert head.status == 200 and head.read() == b""
    assert "text/plain" in head.headers["Content-Type"]
    page = urllib.request.urlopen(f"http://127.0.0.1:{server}/").read().decode()
    assert 'href="/metrics"' in page and "pmutop" in page
    for path in ("/foo", "/metrics/x", "/favicon.ico"):
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(f"http://127.0.0.1:{server}{path}")
        assert e.value.code == 404
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{server}/metrics").read().decode()
    assert "pmutop_instructions_total" in metrics and int(head.headers["Content-Length"]) > 1000


def test_a_replayed_remote_recording_names_its_rows_host_cpu(server: int, tmp_path: Path) -> None:
    from pmutop.core.feed import HostLabels
    from pmutop.feeds.replay import ReplayFeed
    from pmutop.recording.reader import read_recording

    path = tmp_path / "remote.jsonl"
    r = pmutop(
        *("--connect", f"127.0.0.1:{server}", "--batch", "--count", "2", "--interval", "0.2"),
        *("--format", "json", "--record", str(path)),
    )
    assert r.returncode == 0, r.stderr
    feed = ReplayFeed(read_recording(str(path)))
    try:
        host = json.loads(path.read_text().splitlines()[0])["host"]
        assert isinstance(feed, HostLabels) and feed.labels == {0: f"{host}:0", 1: f"{host}:1"}
    finally:
        feed.close()


def test_a_lost_host_in_a_remote_recording_comes_back_in_the_replay(server: int, tmp_path: Path) -> None:
    """A host that stops answering for a while is an error sample in the recording, not the end of its rows:
    the replay shows it lost, then its numbers again, as the live --connect view did."""
    from pmutop.feeds.replay import ReplayFeed
    from pmutop.recording.reader import read_recording

    path = tmp_path / "remote.jsonl"
    r = pmutop(
        *("--connect", f"127.0.0.1:{server}", "--batch", "--count", "4", "--interval", "0.2"),
        *("--format", "json", "--record", str(path)),
    )
    assert r.returncode == 0, r.stderr
    lines = path.read_text().splitlines()
    body = [json.loads(line) for line in lines[1:]]
    lost = next(line for line in body if line["sample"]["cpu"] == 0 and line["sample"]["seq"] == 2)
    lost["sample"]["error"] = "127.0.0.1: connection refused"  # as the remote feed records a lost host
    path.write_text("\n".join([lines[0], *(json.dumps(line) for line in body)]) + "\n")
    replayed = pmutop("replay", str(path), "--batch", "--format", "json")
    assert replayed.returncode == 0, replayed.stderr
    records = [json.loads(line) for line in replayed.stdout.splitlines()]
    assert [rec["cpu"] for rec in records].count(0) == 4  # cpu 0 is back after its lost interval
    feed = ReplayFeed(read_recording(str(path)))
    try:
        while feed.step():
            pass
        assert feed.failures() == {}
    finally:
        feed.close()
