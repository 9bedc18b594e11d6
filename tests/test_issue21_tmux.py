"""Issue 21's views in a real terminal (tmux, its own -L socket, killed at the end): keys 4 and 5 in
`pmutop --demo`, and the process view over the fake per-task source."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.flags import needs_tmux
from helpers.workloads import perf_stat_works

from tests.test_tmux import Tmux

pytestmark = [pytest.mark.integration, needs_tmux]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def terminal(tmp_path: Path):  # type: ignore[no-untyped-def]
    tmux = Tmux(tmp_path)
    yield tmux
    tmux.kill()


def start(tmux: Tmux, tmp_path: Path, command: str) -> Path:
    status = tmp_path / "status"
    # Settings go to the test's directory, not the user's; the status file says how it ended.
    cmd = f"cd {REPO} && XDG_CONFIG_HOME={tmp_path} {command}; echo $? > {status}; sleep 60"
    tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "30", cmd)
    return status


def wait_exit(status: Path) -> int:
    for _ in range(300):
        if status.exists() and status.read_text().strip():
            return int(status.read_text())
        time.sleep(0.1)
    raise AssertionError("pmutop did not exit")


def test_keys_4_and_5_start_counting_processes_and_cgroups_in_a_plain_run(terminal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The options only choose the view to open on: pressing 4 counts the top processes there and then, 5 the
    # cgroup tree, as --tasks and --cgroups would have.
    status = start(terminal, tmp_path, f"{sys.executable} -m pmutop --demo --interval 0.2")
    terminal.wait_for("Top task")
    terminal("send-keys", "-t", "t", "4")
    screen = terminal.wait_for("Processes   ")
    assert "start with" not in screen
    terminal.wait_for("cc1plus")
    terminal("send-keys", "-t", "t", "5")
    screen = terminal.wait_for("system.slice")
    assert "Cgroups   " in screen and "start with" not in screen
    terminal("send-keys", "-t", "t", "4")  # the processes are still counted beside the cgroups
    terminal.wait_for("Processes   ")
    terminal.wait_for("cc1plus")
    terminal("send-keys", "-t", "t", "Escape")
    terminal.wait_for("Top task")
    terminal("send-keys", "-t", "t", "q")
    assert wait_exit(status) == 0


def test_key_4_counts_this_hosts_processes_with_the_perf_backend(terminal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    if not perf_stat_works():
        pytest.skip("perf_event_open is not available here")
    status = start(terminal, tmp_path, f"{sys.executable} -m pmutop --backend perf --interval 0.3")
    terminal.wait_for("Util")
    terminal("send-keys", "-t", "t", "4")
    screen = terminal.wait_for("PID")
    terminal.wait_for("python")  # pmutop itself is one of the busiest processes
    assert "start with" not in screen
    terminal("send-keys", "-t", "t", "q")
    assert wait_exit(status) == 0


def test_the_process_view_in_a_real_terminal(terminal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    script = "from tests.helpers.fake_tasks import task_app; app = task_app(intervals=20)[0]; app.run()"
    status = start(terminal, tmp_path, f'{sys.executable} -c "{script}"')
    terminal.wait_for("Top task")
    terminal("send-keys", "-t", "t", "4")
    screen = terminal.wait_for("stream (8)")
    assert "Processes   7 counted" in screen and "no permission" in screen
    terminal("send-keys", "-t", "t", "Enter")
    terminal.wait_for("stream (pid 3310, 8 threads)")
    terminal("send-keys", "-t", "t", "Escape")
    terminal.wait_for("Processes   7 counted")
    terminal("send-keys", "-t", "t", "5")
    terminal.wait_for("system.slice")
    terminal("send-keys", "-t", "t", "q")
    assert wait_exit(status) == 0


def test_demo_tasks_live_opens_the_process_view_and_its_recording_keeps_the_processes(terminal, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    recording = tmp_path / "run.jsonl"
    command = f"{sys.executable} -m pmutop --demo --sim-cpus 4 --tasks --interval 0.2 --record {recording}"
    status = start(terminal, tmp_path, command)
    screen = terminal.wait_for("SIMULATED")
    screen = terminal.wait_for("cc1plus") if "cc1plus" not in screen else screen
    assert "PID" in screen  # it opened on the process view
    time.sleep(1.0)
    terminal("send-keys", "-t", "t", "q")
    assert wait_exit(status) == 0
    replay = [sys.executable, "-m", "pmutop", "replay", str(recording), "--batch", "--records", "task"]
    done = subprocess.run([*replay, "--format", "json"], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.returncode == 0, done.stderr
    tasks = [json.loads(line) for line in done.stdout.splitlines()]
    assert tasks and all(t["kind"] == "task" for t in tasks)
    assert {"cc1plus"} & {t["comm"] for t in tasks}
