"""What a per-process counter gives the batch printer for one interval: plain values, no kernel objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol


@dataclass(frozen=True)
class TaskReading:
    """One counted process over one interval.

    `counts` are the kernel's deltas under the CPU records' names (task_clock in ns, context_switches, cycles,
    ...), already scaled by enabled/running; `counted` is running/enabled over the interval (1.0: a counter
    covered all of it); `estimated` names the events whose counts were scaled (multiplexed), with their share.
    `exited`: the process is gone and this is its last reading."""

    pid: int
    comm: str
    user: str
    threads: int
    interval: float  # seconds since the previous reading (or since the counters were opened)
    counts: dict[str, int]
    counted: float
    estimated: dict[str, float] = field(default_factory=dict)
    exited: bool = False


class TaskCounterSource(Protocol):
    """Per-process counters read once per interval (pmutop.probes.task_counters)."""

    events: list[str]  # what every reading's counts may hold, in order

    def begin(self) -> None:
        """The first interval starts now (the CPU counters' first interval starts about now too)."""

    def read(self) -> list[TaskReading]: ...

    def close(self) -> None: ...
