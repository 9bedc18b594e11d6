"""`python benchmarks/floor_threads.py N`: N Python threads that each sleep on their own deadline and wake
once a second doing nothing else: what one sampler thread per core costs before it reads anything.
Runs until interrupted."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time


def _wake_every_second(start: float) -> None:
    own = threading.Event()  # as each sampler sleeps on its own Event
    k = 1
    while True:
        own.wait(max(0.0, start + k - time.monotonic()))
        k += 1


def main(n: int) -> None:
    start = time.monotonic()
    for _ in range(n):
        threading.Thread(target=_wake_every_second, args=(start,), daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        signal.pause()


if __name__ == "__main__":
    main(int(sys.argv[1]))
