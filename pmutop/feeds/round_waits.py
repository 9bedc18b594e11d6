"""How a reader waits on a polled feed (remote, Prometheus, fleet): its poller pushes a whole round into the
rings (one sample for every CPU id, an error sample where a source did not answer) and then sets `_new`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from pmutop.core.ring import SampleRing

POLL_S = 0.05  # how often a wait looks again when no round came (a round sets `_new` and ends it sooner)


class RoundWaits:
    """SampleFeed's wait_for_samples and wake_waiters for a feed whose poller sets `_new` after each round."""

    rings: dict[int, SampleRing]
    _new: threading.Event

    def wait_for_samples(
        self,
        counts: dict[int, int],
        timeout: float,
        on_wait: Callable[[], None] | None = None,
        stop: threading.Event | None = None,
    ) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            # Every CPU: a round gives each one a sample (a lost host's an error), so none holds the others.
            if all(self.rings[c].count > n for c, n in counts.items()):
                return True
            if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                return False
            self._new.wait(POLL_S)
            self._new.clear()
            if on_wait:
                on_wait()

    def wake_waiters(self) -> None:
        self._new.set()
