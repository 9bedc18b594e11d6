"""`pmutop --prometheus` against a real Prometheus (Debian's package, scrape interval 1 s) scraping three
`pmutop serve --demo` instances with different seeds: batch output agrees with each instance's own counters
over the same window, every instance is listed, a stopped instance is lost while the others go on, and a
recording of the fleet keeps its hosts."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from helpers.serve import ROOT, free_port, scrape, start_serve, stop

pytestmark = pytest.mark.integration  # starts processes and servers


def api(base: str, expr: str, at: float) -> list[dict]:  # type: ignore[type-arg]
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr, "time": f"{at:.3f}"})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def fleet():  # type: ignore[no-untyped-def]
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus binary (Debian package `prometheus`)")
    ports = [free_port() for _ in range(3)]
    serves = [start_serve(p, "--sim-cpus", "2", "--interval", "0.5", "--seed", str(i + 1)) for i, p in enumerate(ports)]
    work = Path(tempfile.mkdtemp(prefix="pmutop-i23-prom-"))
    prom_port = free_port()
    targets = ", ".join(f"'127.0.0.1:{p}'" for p in ports)
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n"
        f"scrape_configs:\n  - job_name: pmutop\n    static_configs:\n      - targets: [{targets}]\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{prom_port}"
    try:
        for p in ports:
            scrape(p)
        deadline = time.monotonic() + 40
        while True:  # until rate() over 3 s (the feed's window) has points for every CPU of every instance
            try:
                if len(api(base, "rate(pmutop_instructions_total[3s])", time.time())) == 6:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not scrape pmutop: {proc.stderr.read() if proc.stderr else ''}"[-2000:])
            time.sleep(0.5)
        ready = time.time()  # every CPU has rates from here on
        time.sleep(2)
        yield base, [f"127.0.0.1:{p}" for p in ports], serves, ready
    finally:
        for s in serves:
            stop(s)
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def own_counters(base: str, instance: str, cpu: int, at: float, window: float, unseen: int = 0) -> dict[str, float]:
    """The instance's own counters over (at - window, at]: the first and last raw points Prometheus scraped
    of each (what the exporter served), as IPC, utilisation and GHz; without the newest `unseen` points (stored
    after pmutop asked)."""

    def delta(name: str) -> float:
        sel = f'{name}{{instance="{instance}",cpu="{cpu}"}}[{int(window * 1000)}ms]'
        points = api(base, sel, at)[0]["values"]
        points = points[: len(points) - unseen]
        return float(points[-1][1]) - float(points[0][1])

    instructions, cycles = delta("pmutop_instructions_total"), delta("pmutop_cycles_total")
    ref, tsc = delta("pmutop_ref_cycles_total"), delta("pmutop_tsc_total")
    sampled = delta("pmutop_sampled_seconds_total")
    return {"ipc": instructions / cycles, "util": ref / tsc, "ghz": cycles / ref * (tsc / sampled) / 1e9}


def run(*args: str, timeout: float = 40) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pmutop", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def test_batch_agrees_with_each_instances_own_counters_and_lists_every_instance(fleet, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    base, instances, _, _ = fleet
    rec = tmp_path / "fleet.jsonl"
    r = run("--prometheus", base, "--batch", "--format", "json", "--count", "2", "--timestamps", "--record", str(rec))
    assert r.returncode == 0, r.stderr
    assert "Prometheus scrapes every 1 s: a new interval every 1 s, each the rates over the last 3 s" in r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert {(x["host"], x["cpu"]) for x in records} == {(i, c) for i in instances for c in (0, 1)}
    assert len(records) == 12 and all(x["interval"] == 3.0 and x["mode"] == "SIMULATED" for x in records)
    ipcs = set()
    for x in records:
        from datetime import datetime

        at = datetime.fromisoformat(x["timestamp"].replace("Z", "+00:00")).timestamp()
        # The newest scrape may not have been stored yet when pmutop asked (Prometheus ingests a scrape a moment
        # after its timestamp): the record then covers the window's points without it.
        windows = [own_counters(base, x["host"], x["cpu"], at, x["interval"], unseen) for unseen in (0, 1)]
        matches = [
            all(x[metric] == pytest.approx(own[metric], rel=0.01) for metric in ("ipc", "util", "ghz"))
            for own in windows
        ]
        assert any(matches), (x["host"], x["cpu"], x, windows)
        ipcs.add(round(x["ipc"], 3))
    assert len(ipcs) > 3  # different seeds, different workloads: not one number copied around
    # The recording keeps the hosts: its replay prints the same records, host and all.
    replay = run("replay", str(rec), "--batch", "--format", "json")
    assert replay.returncode == 0, replay.stderr
    replayed = [json.loads(line) for line in replay.stdout.splitlines()]
    assert [(x["host"], x["cpu"], x["ipc"]) for x in replayed] == [(x["host"], x["cpu"], x["ipc"]) for x in records]


def test_a_past_window_comes_from_the_servers_history(fleet) -> None:  # type: ignore[no-untyped-def]
    base, instances, _, ready = fleet
    time.sleep(max(0.0, ready + 11 - time.time()))  # the window (8 s to 4 s ago, 3 s rates) all in the history
    r = run("--prometheus", base, "--batch", "--format", "csv", "--since", "8s", "--until", "4s", "--interval", "2")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    header = lines[0].split(",")
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    assert len(rows) == 2 * 6  # two steps of 2 s, six CPUs
    assert {row["host"] for row in rows} == set(instances)
    assert all(0.05 < float(row["ipc"] or "nan") < 8 for row in rows), r.stdout


def test_stopping_one_instance_shows_it_lost_while_the_others_go_on(fleet) -> None:  # type: ignore[no-untyped-def]
    base, instances, serves, _ = fleet
    proc = subprocess.Popen(
        [sys.executable, "-m", "pmutop", "--prometheus", base, "--batch", "--format", "json", "--count", "8"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert proc.stdout is not None
        first = [json.loads(proc.stdout.readline()) for _ in range(6)]  # the first interval: every CPU
        assert {x["host"] for x in first} == set(instances)
        serves[2].send_signal(signal.SIGTERM)  # the last instance stops
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert f"{instances[2]}: lost (Prometheus has no current samples of it); the others go on" in err
    assert "Traceback" not in err
    last = [json.loads(line) for line in out.splitlines()][-6:]  # the eighth interval
    by_host = {(x["host"], x["cpu"]): x for x in last}
    assert all(by_host[(instances[2], c)]["ipc"] is None for c in (0, 1))
    assert all(0.05 < by_host[(i, c)]["ipc"] < 8 for i in instances[:2] for c in (0, 1))
