"""`pmutop --connect`: the live view of remote `pmutop serve` exporters, losing and regaining a host."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.flags import needs_tmux
from helpers.pilot import text_of
from helpers.processes import self_signed_certificate
from helpers.serve import ROOT, free_port, scrape, start_serve, stop
from textual.widgets import DataTable, Static

from pmutop.core.errors import PmutopError, UsageError
from pmutop.derive.metrics import for_sample
from pmutop.feeds.remote import HOST_STRIDE, RemoteFeed, normalise_url, remote_info
from pmutop.tui.app import PmutopApp

pytestmark = pytest.mark.integration  # starts processes, terminals or servers

LOCAL_KEYS = ("instructions", "cycles", "ref_cycles", "llc_references", "llc_misses", "branches", "branch_misses")


def cell(app: PmutopApp, row: str, column: str) -> str:
    return app.query_one(DataTable).get_cell(row, column).plain


@pytest.fixture
def two_hosts():  # type: ignore[no-untyped-def]
    ports = [free_port(), free_port()]
    procs = [start_serve(ports[0], "--sim-cpus", "2", "--interval", "0.1"), None]
    procs[1] = start_serve(ports[1], "--sim-cpus", "1", "--interval", "0.1", "--seed", "5")
    try:
        for p in ports:
            scrape(p)
        yield ports, procs
    finally:
        for p in procs:
            if p is not None:
                stop(p)


async def wait_update(app: PmutopApp, pilot, before: int) -> None:  # type: ignore[no-untyped-def]
    for _ in range(300):
        if app.updates > before:
            return
        await pilot.pause(0.02)
    raise AssertionError("no UI update arrived")


async def poll(app: PmutopApp, pilot, feed: RemoteFeed) -> None:  # type: ignore[no-untyped-def]
    before = app.updates
    await pilot.pause(0.3)  # the remote samplers publish a few intervals
    feed.poll()
    await wait_update(app, pilot, before)


def test_urls_and_unreachable_hosts_fail_in_one_line() -> None:
    assert normalise_url("127.0.0.1:9464") == "http://127.0.0.1:9464/metrics"
    assert normalise_url("http://h:1/") == "http://h:1/metrics"
    with pytest.raises(UsageError):
        normalise_url("ftp://h/x")
    with pytest.raises(PmutopError, match=r"--connect http://127.0.0.1:\d+: .*refused"):
        RemoteFeed([f"http://127.0.0.1:{free_port()}"], 1.0)


async def test_remote_view_shows_each_host_and_recovers_from_a_lost_connection(two_hosts) -> None:  # type: ignore[no-untyped-def]
    ports, procs = two_hosts
    feed = RemoteFeed([f"http://127.0.0.1:{p}" for p in ports], 0.2)
    assert feed.cpus == [0, 1, HOST_STRIDE]
    assert set(LOCAL_KEYS) <= set(feed.keys(0)) and feed.topdown_method(HOST_STRIDE) == "perf_metrics"
    info = remote_info(feed)
    assert info.simulated
    app = PmutopApp(feed, info)
    async with app.run_test(size=(200, 40)) as pilot:
        await poll(app, pilot, feed)
        # Both hosts report the same hostname here, so their rows are told apart by address.
        labels = {cpu: cell(app, str(cpu), "cpu").strip() for cpu in feed.cpus}
        assert labels == {
            0: f"127.0.0.1:{ports[0]}:0",
            1: f"127.0.0.1:{ports[0]}:1",
            HOST_STRIDE: f"127.0.0.1:{ports[1]}:0",
        }
        for cpu in feed.cpus:
            m = for_sample(feed.rings[cpu].latest())  # type: ignore[arg-type]
            assert 0 < m.ipc < 8 and cell(app, str(cpu), "ipc").strip() == f"{m.ipc:.2f}"  # type: ignore[operator]
        assert "SIMULATED" in text_of(app.query_one("#banner", Static), width=300)

        code, _ = stop(procs[1])  # the second host goes away
        assert code == 143
        await poll(app, pilot, feed)
        banner = text_of(app.query_one("#banner", Static), width=300)
        assert f"127.0.0.1:{ports[1]}" in banner and "connection lost" in banner
        assert cell(app, str(HOST_STRIDE), "util").strip() == "failed"
        assert cell(app, "0", "util").strip() != "failed"  # the other host goes on

        procs[1] = start_serve(ports[1], "--sim-cpus", "1", "--interval", "0.1")  # back on the same port
        scrape(ports[1])
        await poll(app, pilot, feed)  # reconnects (its totals started again: no sample from this one)
        await poll(app, pilot, feed)
        assert "connection lost" not in text_of(app.query_one("#banner", Static), width=300)
        assert cell(app, str(HOST_STRIDE), "util").strip() not in ("failed", "")
        assert cell(app, str(HOST_STRIDE), "ipc").strip() != ""


@needs_tmux
def test_pmutop_connect_in_a_real_terminal(tmp_path: Path) -> None:
    from test_tmux import Tmux, wait_exit

    port = free_port()
    server = start_serve(port, "--sim-cpus", "2", "--interval", "0.2")
    tmux = Tmux(tmp_path)
    status = tmp_path / "status"
    env = f"XDG_CONFIG_HOME={tmp_path / 'config'}"
    cmd = f"{env} {sys.executable} -m pmutop --connect 127.0.0.1:{port} --interval 0.3; echo $? > {status}; sleep 60"
    try:
        scrape(port)
        tmux("new-session", "-d", "-s", "t", "-x", "150", "-y", "30", cmd)
        screen = tmux.wait_for(f"{socket.gethostname()}:1")  # rows named host:cpu
        assert "remote sim/http" in screen and "SIMULATED" in screen
        stop(server)
        tmux.wait_for("connection lost")
        server = start_serve(port, "--sim-cpus", "2", "--interval", "0.2")
        end = time.monotonic() + 30
        while "connection lost" in tmux.screen() or "failed" in tmux.screen():
            assert time.monotonic() < end, tmux.screen()
            time.sleep(0.2)
        tmux("send-keys", "-t", "t", "q")
        assert wait_exit(status) == 0
    finally:
        tmux.kill()
        stop(server)


def test_connect_batch_to_a_host_that_does_not_answer_is_one_line() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "pmutop", "--connect", "http://127.0.0.1:1", "--batch"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "--connect" in r.stderr and "refused" in r.stderr


def test_connect_batch_table_shows_the_power_columns_the_exporter_serves(two_hosts) -> None:  # type: ignore[no-untyped-def]
    ports, _ = two_hosts
    batch = ("--batch", "--format", "table", "--count", "2", "--interval", "0.3")
    r = subprocess.run(
        [sys.executable, "-m", "pmutop", "--connect", f"127.0.0.1:{ports[0]}", *batch],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    header = next(line for line in r.stdout.splitlines() if "host:cpu" in line or "CPU" in line)
    for title in ("Busy%", "BzyMHz", "°C", "PkgW"):
        assert title in header.split(), header
    rows = [line.split() for line in r.stdout.splitlines()[1:] if line.split()[1:2] in (["0"], ["1"], ["all"])]
    # Each row ends Busy% BzyMHz °C PkgW flags SIMULATED (the demo's CPU 1 carries no package energy: "-").
    assert len(rows) == 6 and all(0.0 < float(row[-6]) <= 100.0 and float(row[-5]) > 0 for row in rows), r.stdout


def test_a_tls_failure_is_said_without_openssls_source_line(tmp_path: Path) -> None:
    from helpers.fake_prometheus import FakePrometheus

    cert, key = self_signed_certificate(tmp_path)
    with FakePrometheus(tls=(cert, key)) as server, pytest.raises(PmutopError) as caught:
        RemoteFeed([server.url], 1.0)  # any https server whose certificate no known CA signed
    said = str(caught.value)
    assert said.startswith(f"--connect {server.url}: ") and "certificate" in said.lower(), said
    assert "_ssl.c" not in said, said
