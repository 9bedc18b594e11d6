"""Per-process counting as a user who may not count CPU-wide (perf_event_paranoid 2, not root): the run goes on
with the user's own processes, and says in one line why the CPU-wide counters are missing and how to allow them."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import site
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_tmux import Tmux

pytestmark = pytest.mark.integration
REPO = Path(__file__).resolve().parents[1]
PARANOID = Path("/proc/sys/kernel/perf_event_paranoid")
NOBODY = 65534
TASKS_BATCH = ("--tasks", "--backend", "perf", "--batch", "--format", "json", "--count", "3", "--interval", "0.4")


def become_nobody() -> None:
    os.setgroups([])
    os.setgid(NOBODY)
    os.setuid(NOBODY)  # drops every capability, CAP_PERFMON included


def nobody_env() -> dict[str, str]:
    paths = [str(REPO), *site.getsitepackages()]
    return {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONPATH": os.pathsep.join(paths), "LANG": "C.UTF-8"}


def nobody_python() -> str | None:
    """An interpreter the user nobody can run with pmutop's packages (this one may live under root's home)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for exe in (sys.executable, f"/usr/bin/python{version}", f"/usr/local/bin/python{version}"):
        try:
            done = subprocess.run(
                [exe, "-c", "import pmutop.app.main, textual, psutil"],
                preexec_fn=become_nobody,
                env=nobody_env(),
                cwd="/",
                capture_output=True,
                timeout=60,
            )
        except OSError:
            continue
        if done.returncode == 0:
            return exe
    return None


@pytest.fixture
def paranoid_2() -> Iterator[None]:
    """perf_event_paranoid 2 for the test, put back afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to run a process as another user and to set perf_event_paranoid")
    try:
        before = PARANOID.read_text()
        PARANOID.write_text("2\n")
    except OSError as e:
        pytest.skip(f"cannot set perf_event_paranoid: {e}")
    try:
        yield
    finally:
        PARANOID.write_text(before)


@pytest.fixture
def python_for_nobody() -> str:
    exe = nobody_python()
    if exe is None:
        pytest.skip("no Python interpreter the user nobody can run with pmutop's packages")
    return exe


def test_tasks_as_a_user_without_cpu_wide_counters_counts_their_own_processes(
    paranoid_2: None, python_for_nobody: str
) -> None:
    busy = subprocess.Popen(["/bin/sh", "-c", "while :; do :; done"], preexec_fn=become_nobody)
    try:
        done = subprocess.run(
            [python_for_nobody, "-m", "pmutop", *TASKS_BATCH],
            preexec_fn=become_nobody,
            env=nobody_env(),
            cwd="/",
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        busy.send_signal(signal.SIGKILL)
        busy.wait()
    assert done.returncode == 0, done.stderr
    # One line: why, and how to allow them.
    why = [line for line in done.stderr.splitlines() if "CPU-wide counters unavailable" in line]
    assert len(why) == 1, done.stderr
    assert "perf_event_paranoid=2" in why[0] and "sudo sysctl kernel.perf_event_paranoid=0" in why[0]
    records = [json.loads(line) for line in done.stdout.splitlines()]
    cpus = [r for r in records if r["kind"] == "cpu"]
    assert cpus and all(r["util"] is not None for r in cpus)  # the kernel's per-CPU times: anyone may read them
    assert all(r.get("context_switches") is None for r in cpus)  # no CPU-wide counter: never a made-up zero
    mine = [r for r in records if r["kind"] == "task" and r["pid"] == busy.pid]
    assert mine, done.stdout
    assert all(not r["no_permission"] for r in mine)
    assert max(r["task_clock"] for r in mine) > 0.05e9  # a busy loop (on a loaded machine: a share of 0.4 s)
    # Context switches happen in the kernel, which a user at paranoid 2 may not count: not a zero, absent.
    assert all(r.get("context_switches") is None for r in mine)
    others = [r for r in records if r["kind"] == "task" and r["user"] not in ("nobody", str(NOBODY))]
    assert all(r["no_permission"] and r["task_clock"] is None for r in others)


def test_the_live_cpu_table_says_why_it_has_no_counters_and_how_to_allow_them(
    paranoid_2: None, python_for_nobody: str, tmp_path: Path
) -> None:
    setpriv = shutil.which("setpriv")
    if setpriv is None or shutil.which("tmux") is None:
        pytest.skip("needs setpriv and tmux")
    env = " ".join(f"{k}={shlex.quote(v)}" for k, v in nobody_env().items())
    as_nobody = f"{setpriv} --reuid={NOBODY} --regid={NOBODY} --clear-groups env {env} TERM=xterm-256color"
    tmux = Tmux(tmp_path)
    try:
        run = f"{as_nobody} {python_for_nobody} -m pmutop --tasks --backend perf --interval 0.3"
        tmux("new-session", "-d", "-s", "t", "-x", "160", "-y", "30", f"cd / && {run}; sleep 60")
        tmux.wait_for("Processes")
        tmux("send-keys", "-t", "t", "1")
        screen = tmux.wait_for("sudo sysctl kernel.perf_event_paranoid=0")
        line = next(line for line in screen.splitlines() if "sudo sysctl" in line)
        assert "no CPU-wide counters" in line, screen
        assert "Util%" in screen
    finally:
        tmux.kill()
