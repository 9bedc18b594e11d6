"""The live view's wait for what the engine reads just after each interval's CPU samples: the package sampler's
DRAM bandwidth and the task sampler's per-process and per-cgroup counters, each in a thread of its own. The
sample watcher waits for them briefly, so one screen update shows the interval whole: a poll of their own
(four times a second) cost a second screen refresh per interval, and showed them up to a quarter second late.
A reading that comes later than the wait shows with the view's one-second clock tick."""

from __future__ import annotations

import time

from pmutop.core.timeline import Timeline

WAIT_S = 0.2  # at most,
WAIT_SHARE = 0.25  # and at most this share of the interval


def seqs(feeds: list[object]) -> list[int]:
    """Where each feed is now (0 for one that is not a timeline)."""
    return [feed.seq if isinstance(feed, Timeline) else 0 for feed in feeds]


def wait_for_interval(feeds: list[object], seen: list[int], interval: float) -> list[int]:
    """In the sample watcher's thread, once an interval's CPU samples are in: wait for each feed that a thread of
    its own reads (and that has not failed) to move past where it was (`seen`); returns where they are now. No
    wait for a replay's or a remote feed (nothing comes after the samples there)."""
    deadline = time.monotonic() + min(WAIT_S, interval * WAIT_SHARE)
    for feed, was in zip(feeds, seen, strict=True):
        if isinstance(feed, Timeline) and feed.reading_thread and feed.failure is None:
            feed.wait_past(was, max(0.0, deadline - time.monotonic()))
    return seqs(feeds)
