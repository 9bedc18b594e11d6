from __future__ import annotations

from pathlib import Path

import pytest

from pmutop.clock import ManualClock
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
