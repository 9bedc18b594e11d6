"""What every backend provides to the samplers: per-CPU counting objects and a way back."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from pmutop.restore import UndoLog


@dataclass
class Reading:
    """One CPU's counts since the previous reading."""

    at_ns: int  # clock time of the read
    tsc: int | None
    counts: dict[str, int]
    overflows: dict[str, int] = field(default_factory=dict)
    suspect: str | None = None


class CpuCounters(ABC):
    """One CPU's counters, driven by that CPU's sampler thread only."""

    cpu: int

    @abstractmethod
    def start(self) -> int:
        """Program or enable counting and take the baseline; returns its clock time (ns)."""

    @abstractmethod
    def read(self) -> Reading:
        """Counts since the previous read (or since start)."""

    @property
    @abstractmethod
    def keys(self) -> list[str]:
        """Event keys this CPU counts, in display order."""


class Backend(ABC):
    name: str  # "msr", "sim", "perf"
    simulated: bool = False

    def __init__(self) -> None:
        self.notices: list[str] = []  # what pmutop changed or chose, told to the user once
        self.read_method = "?"

    @abstractmethod
    def prepare(self, cpus: list[int], undo: UndoLog) -> None:
        """Check every CPU, make machine-wide changes (each recorded in `undo` first). Writes no counters."""

    @abstractmethod
    def counters(self, cpu: int) -> CpuCounters: ...

    def describe(self) -> dict[str, object]:
        """Facts for headers and JSON: backend, read method, PMU shape."""
        return {"backend": self.name, "read_method": self.read_method}
