"""The live view for real: pmutop in a tmux terminal over a sysroot of plain files (msr backend)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.flags import needs_tmux
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers, read_msr

pytestmark = [pytest.mark.integration, needs_tmux]

WATCHDOG = "proc/sys/kernel/nmi_watchdog"
ORIGINAL = idle_pmu_registers() | {0x38F: 0x3_0000_0001}


class Tmux:
    def __init__(self, tmp: Path) -> None:
        self.socket = f"pmutop-test-{os.getpid()}-{tmp.name}"

    def __call__(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.socket, *args], check=True, capture_output=True, text=True).stdout

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "t")

    def wait_for(self, text: str, timeout: float = 30.0) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            screen = self.screen()
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared:\n{self.screen()}")

    def wait_gone(self, text: str, timeout: float) -> None:
        end = time.monotonic() + timeout
        while text in self.screen():
            if time.monotonic() > end:
                raise AssertionError(f"{text!r} still on screen after {timeout} s:\n{self.screen()}")
            time.sleep(0.05)

    def kill(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True)
        tmux_socket_path(self.socket).unlink(missing_ok=True)  # a killed server leaves its socket file


def tmux_socket_path(name: str) -> Path:
    """Where `tmux -L name` keeps its socket (tmux(1): $TMUX_TMPDIR or /tmp, then tmux-UID)."""
    return Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / name


def test_the_test_terminal_leaves_no_server_or_socket_behind(tmp_path: Path) -> None:
    tmux = Tmux(tmp_path)
    tmux("new-session", "-d", "-s", "t", "-x", "80", "-y", "24", "sleep 60")
    assert tmux_socket_path(tmux.socket).exists()
    tmux.kill()
    assert not tmux_socket_path(tmux.socket).exists()
    assert subprocess.run(["tmux", "-L", tmux.socket, "ls"], capture_output=True).returncode != 0


@pytest.fixture
def live(tmp_path: Path):  # type: ignore[no-untyped-def]
    root = tmp_path / "root"
    build_sysroot(root, [0, 1], SKYLAKE_X_LEAVES, msrs=ORIGINAL, settings={WATCHDOG: "1"})
    status = tmp_path / "status"
    tmux = Tmux(tmp_path)
    # Textual draws on stderr, so it cannot be redirected: messages are read off the screen after exit.
    cmd = f"{sys.executable} -m pmutop --sysroot {root} --interval 0.2; echo $? > {status}; sleep 60"
    tmux("new-session", "-d", "-s", "t", "-x", "100", "-y", "30", cmd)
    yield tmux, root, status
    tmux.kill()


def wait_exit(status: Path) -> int:
    for _ in range(300):
        if status.exists() and status.read_text().strip():
            return int(status.read_text())
        time.sleep(0.1)
    raise AssertionError("pmutop did not exit")


def test_q_in_a_real_terminal_restores_the_pmu(live) -> None:  # type: ignore[no-untyped-def]
    tmux, root, status = live
    screen = tmux.wait_for("Top task")
    assert "msr/msr" in screen and "NMI watchdog paused" in screen
    assert read_msr(root, 0, 0x186) == 0x434F2E and (root / WATCHDOG).read_text().strip() == "0"
    tmux("send-keys", "-t", "t", "q")
    assert wait_exit(status) == 0
    assert tmux.screen().strip() == ""  # terminal restored, nothing printed
    assert (root / WATCHDOG).read_text().strip() == "1"
    for address in (0x186, 0x187, 0x38D, 0x38F):
        assert read_msr(root, 0, address) == ORIGINAL[address]


def test_sigterm_in_the_live_view_restores_and_reports(live) -> None:  # type: ignore[no-untyped-def]
    tmux, root, status = live
    tmux.wait_for("Top task")
    shell = tmux("list-panes", "-t", "t", "-F", "#{pane_pid}").strip()
    pmutop = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    assert pmutop
    os.kill(int(pmutop[0]), signal.SIGTERM)
    assert wait_exit(status) == 143
    assert tmux.screen().strip() == "pmutop: stopped by SIGTERM"
    assert (root / WATCHDOG).read_text().strip() == "1"
    assert read_msr(root, 1, 0x38F) == ORIGINAL[0x38F]


def pmutop_pid(tmux: Tmux) -> int:
    shell = tmux("list-panes", "-t", "t", "-F", "#{pane_pid}").strip()
    children = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    return int(children[0]) if children else int(shell)  # a lone command is exec'd by the shell


def gone(pid: int, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] == "Z":  # exited, not yet reaped by its (dead) parent
            return True
        time.sleep(0.05)
    return False


def test_kill_int_of_the_live_view_exits_130_and_restores(live) -> None:  # type: ignore[no-untyped-def]
    tmux, root, status = live
    tmux.wait_for("Top task")
    os.kill(pmutop_pid(tmux), signal.SIGINT)
    assert wait_exit(status) == 130
    assert tmux.screen().strip() == "pmutop: stopped by SIGINT"
    assert (root / WATCHDOG).read_text().strip() == "1"
    assert read_msr(root, 0, 0x186) == ORIGINAL[0x186]


@pytest.mark.parametrize("attempt", range(4))
def test_closing_the_terminal_restores_the_pmu_on_16_cpus(tmp_path: Path, attempt: int) -> None:
    """Like an SSH session dropping: the terminal goes away under a live view sampling 16 CPUs at 0.2 s."""
    cpus = list(range(16))
    root = tmp_path / "root"
    build_sysroot(root, cpus, SKYLAKE_X_LEAVES, msrs=ORIGINAL, settings={WATCHDOG: "1"})
    tmux = Tmux(tmp_path)
    pid: int | None = None
    try:
        tmux(
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "40",
            f"{sys.executable} -m pmutop --sysroot {root} --interval 0.2",
        )
        tmux.wait_for("Top task")
        pid = pmutop_pid(tmux)
        assert (root / WATCHDOG).read_text().strip() == "0"
        time.sleep(0.3 * attempt)  # land the hang-up at different points of the refresh cycle
        tmux.kill()
        assert gone(pid, timeout=10), "pmutop is still running after its terminal went away"
    finally:
        tmux.kill()
        if pid is not None:  # a failed run must not leave it behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert (root / WATCHDOG).read_text().strip() == "1"
    for cpu in cpus:
        for address in (0x186, 0x187, 0x38D, 0x38F):
            assert read_msr(root, cpu, address) == ORIGINAL[address], (cpu, hex(address))
    assert not list((root / "run/pmutop").glob("*.json"))


def test_a_cpu_failing_in_the_live_view_is_restored_and_the_exit_says_so(live) -> None:  # type: ignore[no-untyped-def]
    tmux, root, status = live
    tmux.wait_for("Top task")
    os.truncate(root / "dev/cpu/1/msr", 0)  # its reads fail from now on; writes still work
    tmux.wait_for("1 core failed")
    tmux("send-keys", "-t", "t", "q")
    assert wait_exit(status) == 1
    screen = tmux.screen()
    assert "pmutop: warning: cpu 1 dropped: cpu 1: read of" in screen
    assert "pmutop: cpu 1 failed during the run (see above)" in screen
    assert (root / WATCHDOG).read_text().strip() == "1"
    for cpu in (0, 1):
        for address in (0x186, 0x38D, 0x38F):
            assert read_msr(root, cpu, address) == ORIGINAL[address], (cpu, hex(address))


def test_a_real_terminal_shows_panels_filters_and_keeps_the_settings(tmp_path: Path) -> None:
    status = tmp_path / "status"
    config = tmp_path / "xdg"
    tmux = Tmux(tmp_path)
    cmd = (
        f"XDG_CONFIG_HOME={config} {sys.executable} -m pmutop --demo --cores 0-7 --interval 0.2; "
        f"echo $? > {status}; sleep 60"
    )
    try:
        tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", cmd)
        screen = tmux.wait_for("all CPUs · IPC")
        assert "SIMULATED" in screen and "now" in screen
        tmux.wait_for("0:00:01")  # Textual drops what is typed while it starts
        # A lone Escape is told from the start of a key sequence by a timeout: it still closes the help
        # by itself, with no other key after it; arrow keys (sequences) still move the highlight.
        tmux("send-keys", "-t", "t", "?")
        tmux.wait_for("pmutop keys")
        tmux("send-keys", "-t", "t", "Escape")
        tmux.wait_gone("pmutop keys", timeout=2.0)
        tmux("send-keys", "-t", "t", "Down")
        tmux.wait_for("cpu 1 · IPC")
        tmux("send-keys", "-t", "t", "/")
        tmux.wait_for("Enter: apply")  # the filter bar is open (typed sooner, keys reach the table)
        tmux("send-keys", "-t", "t", "-l", "0-1")
        tmux("send-keys", "-t", "t", "Enter")
        screen = tmux.wait_for("filter 0-1: 2/8")
        rows = [line.split()[0] for line in screen.splitlines() if line[:1] == " " and line.split()[:1]]
        assert "5" not in rows and "all" in rows
        tmux("send-keys", "-t", "t", "s")
        tmux.wait_for("sort Util%")
        tmux("send-keys", "-t", "t", "F10")
        assert wait_exit(status) == 0
        assert tmux.screen().strip() == ""
        saved = (config / "pmutop" / "config.toml").read_text()
        assert 'sort = "util"' in saved
    finally:
        tmux.kill()
