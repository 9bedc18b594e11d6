"""Waiting for a remote source's first answers (an exporter's or a Prometheus server's) so that a stop ends the
wait at once: these runs have nothing of this machine to put back, and a signal must not wait out an HTTP timeout."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TypeVar

from pmutop.app.console import say
from pmutop.safety.exit_guard import ExitGuard, signal_name

FeedT = TypeVar("FeedT")


def discovered(make: Callable[[], FeedT], guard: ExitGuard) -> FeedT | None:
    """`make()`, the feed's discovery (queries that may each take their timeout), in a thread of its own, so
    a stop (Ctrl-C) ends the wait at once: None then. Its failure is raised here."""
    done = threading.Event()
    result: list[FeedT] = []
    failure: list[BaseException] = []

    def discover() -> None:
        try:
            result.append(make())
        except BaseException as e:  # handed to the main thread, which says it in one line
            failure.append(e)
        done.set()

    guard.on_stop(done.set)
    threading.Thread(target=discover, name="pmutop-discovery", daemon=True).start()
    done.wait()
    if failure:
        raise failure[0]
    return result[0] if result else None


def stopped(guard: ExitGuard) -> int:
    say(f"stopped by {signal_name(guard.signum or signal.SIGINT)}")
    return 128 + (guard.signum or signal.SIGINT)
