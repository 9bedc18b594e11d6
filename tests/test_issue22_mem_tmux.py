"""Issue 22's DRAM bandwidth in a real terminal (tmux, its own -L socket, killed at the end): `pmutop --demo`
shows its simulated channels in the header line, the package row and the memory view (6)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest
from helpers.flags import needs_tmux

from tests.test_tmux import Tmux

pytestmark = [pytest.mark.integration, needs_tmux]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def terminal(tmp_path: Path):  # type: ignore[no-untyped-def]
    tmux = Tmux(tmp_path)
    yield tmux
    tmux.kill()


def wait_exit(status: Path) -> int:
    for _ in range(300):
        if status.exists() and status.read_text().strip():
            return int(status.read_text())
        time.sleep(0.1)
    raise AssertionError("pmutop did not exit")


def test_demo_shows_the_dram_line_the_package_row_and_the_memory_view(terminal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    status = tmp_path / "status"
    command = f"{sys.executable} -m pmutop --demo --sim-cpus 4 --interval 0.2"
    cmd = f"cd {REPO} && XDG_CONFIG_HOME={tmp_path} {command}; echo $? > {status}; sleep 60"
    terminal("new-session", "-d", "-s", "t", "-x", "120", "-y", "30", cmd)
    screen = terminal.wait_for("% of 307 GB/s")  # 8 channels x DDR5-4800 x 8 bytes (the demo's Sapphire Rapids)
    line = next(line for line in screen.splitlines() if "DRAM pkg0" in line)
    assert re.search(r"R [\d.]+ [kMG]B/s  W [\d.]+ [kMG]B/s", line), line
    # One socket: no package row repeating the all row below, no DRAM columns blank on every CPU row.
    assert "SIMULATED" in screen and "pkg0" not in screen.split("DRAM pkg0")[1] and "DRAM R" not in screen
    terminal("send-keys", "-t", "t", "6")
    terminal.wait_for("sim_imc_7")
    screen = terminal.wait_for("pkg0 · DRAM read")  # the history plots, mounted with the first figures
    assert "Memory bandwidth per package and channel" in screen
    terminal("send-keys", "-t", "t", "q")
    assert wait_exit(status) == 0
