"""What sinks see of a sample producer: a small read-only interface.

The engine implements it; so can a replayed recording or a remote exporter. Sinks (the live view, batch,
the recorder, the exporter) use only this, never the backend or the hardware. Abilities only some feeds
have are protocols of their own (ReplayControls, HostLabels, LostHosts): a feed declares them by subclassing,
and the live view asks with isinstance.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from pmutop.core.ring import SampleRing


class SampleFeed(Protocol):
    cpus: list[int]
    rings: dict[int, SampleRing]

    @property
    def interval(self) -> float:
        """The current sampling interval (s)."""
        ...

    def keys(self, cpu: int) -> list[str]:
        """Event keys `cpu` counts, in display order."""
        ...

    def topdown_method(self, cpu: int) -> str | None:
        """How top-down is measured on `cpu` (pmutop.derive.topdown method names), or None."""
        ...

    def elapsed(self) -> float:
        """Seconds since counting started (0 before)."""
        ...

    def failures(self) -> dict[int, str]:
        """CPUs whose sampler stopped -> why."""
        ...

    def wait_for_samples(
        self,
        counts: dict[int, int],
        timeout: float,
        on_wait: Callable[[], None] | None = None,
        stop: threading.Event | None = None,
    ) -> bool:
        """Block until every live CPU in `counts` has more than counts[cpu] samples (or timeout/stop)."""
        ...

    def set_interval(self, seconds: float) -> None:
        """Ask for another interval (a feed that cannot change it may ignore this)."""
        ...

    def wake_waiters(self) -> None:
        """End every wait_for_samples now (a reader that set its `stop` event calls this)."""
        ...


@runtime_checkable
class ReplayControls(Protocol):
    """A feed that replays a recording: its position can move and its pace change (the replay keys)."""

    speed: str  # "1", "2", "10" or "max"

    @property
    def duration(self) -> float:
        """Recorded seconds in all."""
        ...

    @property
    def finished(self) -> bool:
        """The last interval has been pushed."""
        ...

    @property
    def notice(self) -> str | None:
        """One line for the status bar (how far the recording is indexed, a damaged place), or None."""
        ...

    def set_paused(self, paused: bool) -> None: ...

    def seek(self, delta: int) -> None:
        """Jump `delta` intervals (back when negative)."""
        ...

    def seek_to(self, seconds: float) -> None:
        """Jump to recorded time `seconds`."""
        ...

    def next_speed(self) -> str:
        """Step to the next speed; returns it."""
        ...


@runtime_checkable
class HostLabels(Protocol):
    """A feed whose CPUs belong to several hosts: the row name of each CPU id ("host:cpu")."""

    labels: dict[int, str]


@runtime_checkable
class LostHosts(Protocol):
    """A feed whose sources can become unreachable while it runs."""

    def lost(self) -> list[str]:
        """One line per source that does not answer now."""
        ...
