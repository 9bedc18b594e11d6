"""The one owner of the way out.

Every terminating signal is blocked in every thread (the mask is set before any other thread starts, so
all threads inherit it) and taken synchronously by one guardian thread with sigwait. So a signal can
never interrupt the restore half-way, a second signal is simply noted, and the guardian works whatever
the main thread is stuck in (a UI that hangs while the terminal goes away, a blocked write).

On the first signal the guardian asks the run to stop (the batch loop and the live view watch
`stop_requested`), then gives the main thread GRACE_S to restore and exit. If it has not, the guardian
runs the same restore itself (exactly once: `UndoLog.run` is shared), prints the one line and ends the
process with 128+N (or EXIT_NOT_RESTORED when something could not be put back).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import termios
import threading
from collections.abc import Callable
from typing import Any

from pmutop.core.undo import RestoreResult

TERMINATING: tuple[signal.Signals, ...] = (
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGPIPE,
    signal.SIGALRM,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGXCPU,
    signal.SIGXFSZ,
    signal.SIGVTALRM,
    signal.SIGPROF,
)
GRACE_S = 1.5  # how long the main thread gets to restore and exit after a signal
EXIT_NOT_RESTORED = 4
# siginfo's si_code for a signal the kernel sent itself, as a terminal does to its whole foreground process group
# on Ctrl-C, Ctrl-\ and hangup (kill() gives SI_USER): include/uapi/asm-generic/siginfo.h, drivers/tty/n_tty.c.
SI_KERNEL = 0x80
# Leave the alternate screen, show the cursor, stop mouse reporting: what a UI that never closed left on.
_TERMINAL_RESET = b"\x1b[?1049l\x1b[?25h\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1006l\x1b[?2004l"


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class ExitGuard:
    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self.signum: int | None = None
        self.failure: str | None = None  # an uncaught exception in some thread
        self.stop_requested = threading.Event()
        self._on_stop: list[Callable[[], None]] = []
        self._restore: Callable[[], RestoreResult] | None = None
        self._report: Callable[[RestoreResult], None] | None = None
        self._restored = threading.Event()
        self._thread: threading.Thread | None = None
        self._closing = False
        self._closed = threading.Event()  # set by uninstall(): the guardian must end, not exit
        self._old_mask: set[int | signal.Signals] | None = None
        self._old_excepthook = threading.excepthook
        self._tty_attrs: list[Any] | None = None
        self._divert: Callable[[int, bool], bool] | None = None

    # -- set-up

    def install(self) -> None:
        """Call from the main thread before starting any other thread."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, TERMINATING)
        with contextlib.suppress(OSError, termios.error, ValueError):
            if sys.stdin is not None and os.isatty(sys.stdin.fileno()):
                self._tty_attrs = termios.tcgetattr(sys.stdin.fileno())
        self._thread = threading.Thread(target=self._watch, name="pmutop-exit", daemon=True)
        self._thread.start()
        threading.excepthook = self._thread_exception

    def uninstall(self) -> None:
        """Undo install() (for callers that go on running: tests calling main() in-process)."""
        if self._thread is None:
            return
        self._closing = True
        self._closed.set()
        threading.excepthook = self._old_excepthook
        with contextlib.suppress(ProcessLookupError, OSError):
            signal.pthread_kill(self._thread.ident or 0, signal.SIGUSR2)
        self._thread.join(timeout=2.0)
        self._thread = None
        # Signals that came after the first one are still pending: take them now, or unblocking would
        # let the default action kill the process with the wrong status after all was done.
        with contextlib.suppress(OSError):
            while signal.sigtimedwait(TERMINATING, 0) is not None:
                pass
        if self._old_mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self._old_mask)

    def on_stop(self, callback: Callable[[], None]) -> None:
        """Called (from the guardian thread; it must not block) when a stop is requested."""
        self._on_stop.append(callback)
        if self.stop_requested.is_set():
            self._notify(callback)

    def set_restore(self, restore: Callable[[], RestoreResult], report: Callable[[RestoreResult], None]) -> None:
        """`restore` puts the machine back (idempotent, shared with the main thread); `report` prints."""
        self._restore, self._report = restore, report

    def divert_signals(self, handler: Callable[[int, bool], bool] | None) -> None:
        """While set (None: no more), each terminating signal goes first to `handler(signum, from_terminal)`,
        called from the guardian thread (it must not block); True: it took the signal and the run goes on
        (`pmutop -- COMMAND` passes signals to the command and ends when the command ends). `from_terminal`:
        the kernel sent it (a terminal's Ctrl-C reaches its whole foreground process group), not kill()."""
        self._divert = handler

    # -- the way out

    def restore(self) -> RestoreResult:
        """Run the restore (once; later calls return the first result)."""
        result = self._restore() if self._restore else RestoreResult()
        self._restored.set()
        return result

    def exit_code(self, result: RestoreResult, default: int) -> int:
        if result.failures:
            return EXIT_NOT_RESTORED
        if self.signum is not None:
            return 128 + self.signum
        return default

    def request_stop(self) -> None:
        if self.stop_requested.is_set():
            return
        self.stop_requested.set()
        for cb in list(self._on_stop):
            self._notify(cb)

    @staticmethod
    def _notify(cb: Callable[[], None]) -> None:
        with contextlib.suppress(Exception):
            cb()

    def _thread_exception(self, args: threading.ExceptHookArgs) -> None:
        if args.exc_type is SystemExit:
            return
        where = args.thread.name if args.thread else "a thread"
        self.failure = (
            self.failure or f"internal error in {where}: {args.exc_value} (a bug in pmutop: please report it)"
        )
        self.request_stop()

    def _watch(self) -> None:
        while True:
            info = signal.sigwaitinfo(TERMINATING)
            signum = info.si_signo
            if self._closing:
                return
            if self.signum is not None:
                continue  # already on the way out: the restore is running or done
            divert = self._divert
            if divert is not None and divert(signum, info.si_code == SI_KERNEL):
                continue
            self.signum = signum
            self.request_stop()
            self._deadline()
            return

    def _deadline(self) -> None:
        if self._restored.wait(GRACE_S):
            # The main thread restored; give it the same time again to print and exit on its own.
            if self._closed.wait(GRACE_S):
                return
            result = self.restore()
        else:
            result = self.restore()
            self._reset_terminal()
            if self._report:
                with contextlib.suppress(Exception):
                    self._report(result)
            with contextlib.suppress(Exception):
                self._say(f"stopped by {signal_name(self.signum or 0)}")
        os._exit(self.exit_code(result, 1))

    def _reset_terminal(self) -> None:
        """The UI did not close: put the terminal back as it was (best effort, never blocking)."""
        if self._tty_attrs is None:
            return
        with contextlib.suppress(OSError, termios.error, ValueError):
            fd = sys.stdin.fileno()
            termios.tcsetattr(fd, termios.TCSANOW, self._tty_attrs)
            out = os.open(os.ttyname(fd), os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            try:
                os.write(out, _TERMINAL_RESET)
            finally:
                os.close(out)
