from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from pmutop.core.clock import ManualClock
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(start_ns=1_000_000_000)


@pytest.fixture
def sim(clock: ManualClock) -> SimPlatform:
    return SimPlatform(SimConfig(cpus=4, seed=7), clock)


@pytest.fixture
def project_root() -> Path:
    return Path(__file__).resolve().parents[1]


class FakeProcess:
    """What psutil.process_iter(attrs) yields: an object with an .info dict."""

    def __init__(self, pid: int, name: str, cpu: int, user: float, system: float = 0.0, created: float = 1.0) -> None:
        times = type("cputimes", (), {"user": user, "system": system})()
        self.info = {"pid": pid, "name": name, "cpu_num": cpu, "cpu_times": times, "create_time": created}


class FakePsutil:
    """A process table the test edits between calls (s-tui style: psutil faked, not monkeypatched deep)."""

    def __init__(self) -> None:
        self.processes: list[FakeProcess] = []

    def process_iter(self, attrs: list[str]):  # type: ignore[no-untyped-def]
        return iter(list(self.processes))


@pytest.fixture
def fake_psutil() -> FakePsutil:
    return FakePsutil()


@pytest.fixture(autouse=True)
def private_config_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The live view saves its settings under $XDG_CONFIG_HOME: never the real home's (processes that tests
    start inherit this too)."""
    home = tmp_path_factory.mktemp("xdg")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home))
    return home


@pytest.fixture(autouse=True)
def machine_share(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The tests run on two workers at once (pytest-xdist). A test marked `alone` measures what this machine can
    do while it runs, so it holds the run's lock exclusively and every other test holds it shared: the other
    worker waits between two of its tests until the `alone` test is done."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    # Each worker's base temp is <the run's>/popen-gwN: the lock is the run's, not another run's.
    with open(tmp_path_factory.getbasetemp().parent / "machine.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX if request.node.get_closest_marker("alone") else fcntl.LOCK_SH)
        yield  # closing the file releases the lock
