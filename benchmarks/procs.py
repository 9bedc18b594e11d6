"""Processes and tmux sessions the benchmarks start, their CPU time and memory, and their cleanup.

Every tmux session lives on a tmux server of our own (-L pmutop-bench-PID), so cleaning up is killing that
server, never anyone else's sessions; every child process is tracked and killed at exit, also on Ctrl+C.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
SOCKET = f"pmutop-bench-{os.getpid()}"
_children: list[subprocess.Popen] = []  # type: ignore[type-arg]
_tmux_used = False


def pmutop_cmd() -> list[str]:
    """pmutop as installed next to this Python (the venv), else as a module."""
    exe = Path(sys.executable).with_name("pmutop")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pmutop"]


def cleanup() -> None:
    """Kill what we started: our tmux server (all our sessions) and every child process still running."""
    if _tmux_used:
        subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True, check=False)
        # A killed server leaves its socket file (tmux(1): in $TMUX_TMPDIR or /tmp, then tmux-UID).
        (Path(os.environ.get("TMUX_TMPDIR") or "/tmp") / f"tmux-{os.getuid()}" / SOCKET).unlink(missing_ok=True)
    for p in _children:
        if p.poll() is None:
            with contextlib.suppress(OSError):
                p.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=5)
    _children.clear()


def install_cleanup() -> Callable[[], None]:
    """Clean up at exit and on SIGTERM/SIGHUP (Ctrl+C raises KeyboardInterrupt anyway); returns a function
    that puts the previous signal handlers back."""
    atexit.register(cleanup)

    def on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # unwinds through every `finally`, then atexit cleans the rest

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGHUP)}

    def uninstall() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        atexit.unregister(cleanup)

    return uninstall


def spawn(cmd: list[str], **kw) -> subprocess.Popen:  # type: ignore[no-untyped-def,type-arg]
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, **kw)
    _children.append(p)
    return p


def stop(p: subprocess.Popen, sig: int = signal.SIGINT) -> None:  # type: ignore[type-arg]
    if p.poll() is None:
        with contextlib.suppress(OSError):
            p.send_signal(sig)
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(timeout=5)
    with contextlib.suppress(ValueError):
        _children.remove(p)


def _tree(pid: int) -> list[psutil.Process]:
    """A process and its live descendants (empty when it is gone)."""
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of a process and its live descendants: the scheduler's nanosecond run time of every
    thread (/proc/PID/task/TID/schedstat), since user + system time counts in 10 ms ticks, too coarse for
    programs that use a few ms a second (0.03 CPU-s per minute over 20 s); psutil's times elsewhere."""
    total = 0.0
    for p in _tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            run_ns = _schedstat_ns(p.pid)
            if run_ns is None:
                t = p.cpu_times()
                total += t.user + t.system
            else:
                total += run_ns / 1e9
    return total


def cpu_per_minute(pid: int, seconds: float) -> float:
    """CPU seconds per minute the process tree uses over the next `seconds`."""
    t0 = tree_cpu_s(pid)
    time.sleep(seconds)
    return (tree_cpu_s(pid) - t0) / seconds * 60


def _schedstat_ns(pid: int) -> int | None:
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that just ended
    return total


def tree_rss(pid: int) -> int:
    total = 0
    for p in _tree(pid):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
            total += p.memory_info().rss
    return total


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


@contextlib.contextmanager
def tmux_session(name: str, cmd: list[str], width: int = 120, height: int = 40) -> Iterator[int]:
    """Run `cmd` in a detached tmux session of that size; yields the pane's process id (the command:
    tmux execs it). The session is killed on the way out."""
    global _tmux_used
    _tmux_used = True
    new = ["tmux", "-L", SOCKET, "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), *cmd]
    for attempt in range(3):
        # The server exits when its last session is killed: a new session at that moment can fail.
        started = subprocess.run(new, env={**os.environ, "TERM": "xterm-256color"}, capture_output=True, text=True)
        if started.returncode == 0:
            break
        if attempt == 2:
            raise RuntimeError(f"tmux new-session failed: {started.stderr.strip()}")
        time.sleep(0.3)
    try:
        pid = int(_tmux(["display-message", "-p", "-t", name, "#{pane_pid}"]).strip())
        yield pid
    finally:
        subprocess.run(["tmux", "-L", SOCKET, "kill-session", "-t", name], capture_output=True, check=False)


def _tmux(args: list[str]) -> str:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True, check=True).stdout


def send_keys(name: str, *keys: str) -> None:
    _tmux(["send-keys", "-t", name, *keys])


def capture(name: str) -> str:
    try:
        return _tmux(["capture-pane", "-p", "-t", name])
    except subprocess.CalledProcessError:
        return ""


def wait_for_screen(name: str, predicate, timeout: float = 60.0, poll: float = 0.02) -> float | None:  # type: ignore[no-untyped-def]
    """Seconds until predicate(screen text) holds, or None after timeout."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if predicate(capture(name)):
            return time.monotonic() - t0
        time.sleep(poll)
    return None


def has_all_row(screen: str) -> bool:
    """The live view's first complete frame: its `all` row has numbers, or (more CPUs than the terminal
    has lines, so `all` is below the fold) the screen is full of CPU rows with numbers."""
    lines = [line.split() for line in screen.splitlines() if line.strip()]
    if any(w[:1] == ["all"] and len(w) > 2 for w in lines):
        return True
    rows = [w for w in lines if len(w) > 2 and w[0].isdigit() and _number(w[1])]
    return len(rows) >= 25  # a 40-line terminal shows about 30


def _number(word: str) -> bool:
    try:
        float(word)
    except ValueError:
        return False
    return True
