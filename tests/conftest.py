from __future__ import annotations

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
