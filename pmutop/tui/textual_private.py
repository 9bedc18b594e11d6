"""Everything pmutop does with Textual's private API (textual 8), fenced in one module.

Textual may change any of this in a minor release; when it does, this module (and the DataTable subclass
in pmutop.tui.widgets.fast_table, which overrides DataTable's private cell rendering and reads its private
caches on every cell it draws) is what to look at. Each use falls back to Textual's own behaviour where it
can:

- `quick_exit_driver`: Textual's Linux driver with an input thread that sleeps until input arrives and
  exits at once (textual._time, textual._xterm_parser, the parser's `_timeout_time`, the driver's
  `_disable_mouse_support`); None (Textual's default driver) when those are not there.
- `end_after_error`: what App._handle_exception does to end the app, minus the traceback (the app's
  `_return_code`, `_exception`, `_exception_event`, `_close_messages_no_wait`).
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import threading
from codecs import getincrementaldecoder

from textual.app import App


def quick_exit_driver() -> type | None:
    """Textual's Linux driver, minus its wait on exit: the input thread polls stdin in 0.1 s steps and
    sleeps one more step on the way out, so joining it costs up to 0.2 s of every quit. pmutop never
    suspends the app, so the thread is told to stop and left to finish on its own."""
    try:
        import termios

        from textual._time import get_time
        from textual._xterm_parser import XTermParser
        from textual.drivers.linux_driver import LinuxDriver
    except ImportError:  # not Linux (or another Textual): Textual's default
        return None

    class QuickExitDriver(LinuxDriver):
        _wake_fd: int | None = None  # the write end of the input thread's wake-up pipe, while it is open
        _wake_lock = threading.Lock()  # never a write to a pipe the thread closed (or an fd reused since)

        def disable_input(self) -> None:
            if self.exit_event.is_set():
                return
            with contextlib.suppress(Exception):
                signal.signal(signal.SIGWINCH, signal.SIG_DFL)
                self._disable_mouse_support()
            self.exit_event.set()  # never cleared: the thread ends when woken
            with self._wake_lock, contextlib.suppress(OSError):
                if self._wake_fd is not None:
                    os.write(self._wake_fd, b"x")
            with contextlib.suppress(termios.error, OSError):
                termios.tcflush(self.fileno, termios.TCIFLUSH)

        def run_input_thread(self) -> None:
            """Textual's input loop wakes every 0.1 s to see whether a lone Escape has timed out: ten
            wake-ups a second for nothing. This one sleeps until input arrives, waits only as long as an
            unfinished escape sequence needs, and is woken by a pipe to exit."""
            parser = XTermParser(self._debug)
            decode = getincrementaldecoder("utf-8")().decode
            wake_r, self._wake_fd = os.pipe()
            selector = selectors.DefaultSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            selector.register(wake_r, selectors.EVENT_READ)
            try:
                while not self.exit_event.is_set():
                    due = getattr(parser, "_timeout_time", 0.0)  # when a pending sequence times out
                    timeout = None if due is None else max(0.0, due - get_time()) if due else 0.1
                    for key, _ in selector.select(timeout):
                        if key.fd != self.fileno:
                            continue
                        data = os.read(self.fileno, 4096)
                        if not data:  # the terminal is gone: nothing more will come
                            return
                        for event in parser.feed(decode(data)):
                            self.process_message(event)
                    for event in parser.tick():
                        self.process_message(event)
            finally:
                selector.close()
                with self._wake_lock:
                    wake_fd, self._wake_fd = self._wake_fd, None
                    for fd in (wake_r, wake_fd):
                        with contextlib.suppress(OSError):
                            os.close(fd)

    return QuickExitDriver


def end_after_error(app: App[int], error: Exception) -> None:
    """End `app` with return code 1 as Textual does after an unhandled error, without printing the
    traceback (App._handle_exception's work, less its console output)."""
    app._return_code = 1
    if app._exception is None:
        app._exception = error
        app._exception_event.set()
    app._close_messages_no_wait()
