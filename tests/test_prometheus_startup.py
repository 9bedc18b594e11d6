"""How `pmutop --prometheus` starts and stops: a server that accepts connections but never answers is said in
seconds and Ctrl-C ends the wait at once; stopping does not wait for a round in flight; the run's clock starts
with the live rounds, not with the history fetched to fill the plots."""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.fake_prometheus import FakePrometheus
from helpers.flags import needs_tmux
from helpers.processes import start_pmutop

from pmutop.feeds.fleet import FleetFeed
from pmutop.feeds.prometheus import PrometheusFeed
from pmutop.feeds.promql import DEFAULT_MATCH, parse_server


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A local socket that accepts connections and never answers: its URL."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        listener.close()


def test_a_server_that_never_answers_is_said_within_seconds() -> None:
    with silent_server() as url:
        began = time.monotonic()
        proc = start_pmutop("--prometheus", url, "--batch", "--count", "1")
        try:
            _, err = proc.communicate(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
        took = time.monotonic() - began
    assert proc.returncode == 1 and err.count("\n") == 1 and "no answer within 3 s" in err, err
    assert took < 8.0, took  # the first answer's timeout (3 s) and Python's start, not 10 s and more


@pytest.mark.parametrize("option", ["--prometheus", "--connect"])
def test_ctrl_c_while_waiting_for_the_first_answer_ends_at_once(option: str) -> None:
    """A Prometheus server or an exporter that accepts and never answers: Ctrl-C ends the run at once (nothing of
    this machine to put back, so the way out does not wait for a restore or an HTTP timeout)."""
    with silent_server() as url:
        proc = start_pmutop(option, url, "--batch", "--count", "1")
        try:
            time.sleep(1.5)  # started, waiting for the server
            assert proc.poll() is None
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=10)
            took = time.monotonic() - sent
        finally:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
    assert proc.returncode == 128 + signal.SIGINT and "stopped by SIGINT" in err, err
    assert "Traceback" not in err
    assert took < 1.0, took


def test_stopping_does_not_wait_for_a_round_in_flight() -> None:
    with FakePrometheus() as fake:
        feed = PrometheusFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH)
        fake.mode, fake.delay = "slow", 4.0
        feed.start()
        time.sleep(1.5)  # the first round is waiting for its answers
        began = time.monotonic()
        feed.stop()
        took = time.monotonic() - began
    assert took < 1.0, took


def test_the_run_clock_starts_with_the_live_rounds_not_the_history() -> None:
    with FakePrometheus(hosts=2, cpus=2) as fake:
        for feed in (
            FleetFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH),
            PrometheusFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH),
        ):
            try:
                assert feed.prefill() >= 60  # a minute and more of history
                assert feed.elapsed() < 5.0
                times = [s.time for s in feed.rings[feed.cpus[0]]]
                assert times == sorted(times) and times[-1] - times[0] >= 59  # the plots keep their time axis
            finally:
                feed.stop()


@needs_tmux
def test_q_in_the_live_view_ends_at_once_while_the_server_hangs(tmp_path: Path) -> None:
    from test_tmux import Tmux

    tmux = Tmux(tmp_path)
    status = tmp_path / "status"
    with FakePrometheus(hosts=2, cpus=2) as fake:
        env = f"XDG_CONFIG_HOME={tmp_path / 'config'}"
        cmd = f"{env} {sys.executable} -m pmutop --prometheus {fake.url}; echo $? > {status}; sleep 60"
        try:
            tmux("new-session", "-d", "-s", "t", "-x", "160", "-y", "30", cmd)
            tmux.wait_for(fake.instances[1])  # the host table is up
            fake.mode, fake.delay = "slow", 30.0  # every round now waits for answers that do not come
            time.sleep(1.5)
            sent = time.monotonic()
            tmux("send-keys", "-t", "t", "q")
            while not (status.exists() and status.read_text().strip()):
                assert time.monotonic() - sent < 10, tmux.screen()
                time.sleep(0.02)
            took = time.monotonic() - sent
        finally:
            tmux.kill()
    assert status.read_text().strip() == "0"
    assert took < 1.0, took
