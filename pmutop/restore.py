"""Putting the machine back: an undo log run on every way out, and signals turned into exits.

Every change pmutop makes outside its own process (MSRs, the rdpmc sysfs file, the NMI watchdog)
is recorded here *before* it is made, and undone newest-first exactly once.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class _Undo:
    what: str
    action: Callable[[], list[str] | None]


class UndoLog:
    def __init__(self) -> None:
        self._items: list[_Undo] = []
        self._lock = threading.Lock()
        self._done = False

    def push(self, what: str, action: Callable[[], list[str] | None]) -> None:
        """Record how to undo a change; `action` may return warnings (e.g. registers left alone)."""
        with self._lock:
            if self._done:
                raise RuntimeError("undo log already ran")
            self._items.append(_Undo(what, action))

    def __len__(self) -> int:
        return len(self._items)

    def run(self) -> list[str]:
        """Undo everything, newest first; a failing step does not stop the others. Returns problems."""
        with self._lock:
            items, self._items = self._items, []
            self._done = True
        problems: list[str] = []
        with signals_deferred():
            for item in reversed(items):
                try:
                    problems.extend(item.action() or [])
                except Exception as e:  # keep going: the other registers still need restoring
                    problems.append(f"could not undo {item.what}: {e}")
        return problems


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived; unwinds the main thread like KeyboardInterrupt does for SIGINT."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.name = signal.Signals(signum).name


EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _raise_terminated(signum: int, _frame: object) -> None:
    raise Terminated(signum)


def install_exit_handlers() -> dict[int, object]:
    """SIGTERM/SIGHUP raise Terminated in the main thread; returns the handlers they replace."""
    return {s: signal.signal(s, _raise_terminated) for s in EXIT_SIGNALS}


@contextmanager
def exit_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM/SIGHUP raise Terminated in the main thread (so `finally` restores)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = install_exit_handlers()
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)  # type: ignore[arg-type]


@contextmanager
def signals_deferred() -> Iterator[None]:
    """Hold off SIGINT/SIGTERM/SIGHUP while restoring, so a second Ctrl-C cannot cut the restore short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, *EXIT_SIGNALS)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    try:
        yield
    finally:
        # Anything that arrived meanwhile is dropped: we are already on the way out.
        handlers = {s: signal.signal(s, signal.SIG_IGN) for s in sigs}
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
        for s, h in handlers.items():
            signal.signal(s, h)
