"""What every backend provides to the samplers: per-CPU counting objects and a way back."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

from pmutop.core.clock import Clock
from pmutop.core.errors import UsageError
from pmutop.core.undo import UndoLog
from pmutop.hw.platform import Platform
from pmutop.pmu.cpuid_decode import CpuIdentity, decode_core_type, decode_identity
from pmutop.pmu.events import EventSpec

# Intel event names -> encodings, per CPU model, core type and hybrid native model ID
# (pmutop.pmu.perfmon.Resolver.resolve).
EventResolver = Callable[[EventSpec, CpuIdentity, "int | None", "int | None"], EventSpec]


def resolve_for_cpu(
    platform: Platform, cpu: int, events: list[EventSpec] | None, resolver: EventResolver | None
) -> list[EventSpec] | None:
    """The events as this CPU counts them: Intel names looked up for its model and (hybrid) core type."""
    if events is None or all(e.resolved for e in events):
        return events
    if resolver is None:
        name = next(e.name for e in events if not e.resolved)
        raise UsageError(f"unknown event {name!r}: Intel event names need the perfmon tables")
    cpuid = platform.cpuid_fn(cpu)
    identity = decode_identity(cpuid)
    core_type = decode_core_type(cpuid)
    code, native = (core_type.code, core_type.native_model_id) if core_type else (None, None)
    return [resolver(e, identity, code, native) for e in events]


@dataclass
class Reading:
    """One CPU's counts since the previous reading."""

    at_ns: int  # clock time of the read
    tsc: int | None
    counts: dict[str, int]
    overflows: dict[str, int] = field(default_factory=dict)
    suspect: str | None = None
    estimated: dict[str, float] = field(default_factory=dict)  # key -> fraction of time counted (< 1)
    util: float | None = None  # busy fraction from the kernel's per-CPU times, where no ref cycles exist


# The longest interval pmutop samples at (--interval). Counters that cannot wrap within it are only read
# at the deadlines; narrower ones are also read in between (CpuCounters.accumulate).
LONGEST_INTERVAL_S = 3600.0


class CpuCounters(ABC):
    """One CPU's counters, driven by that CPU's sampler thread only."""

    cpu: int
    # How often accumulate() must run between two reads, or None when the counters are wide enough for
    # any interval (then read() alone is called, at the deadlines).
    accumulate_period_ns: int | None = None
    # The top-down method this CPU measures (pmutop.pmu.topdown_plan names), or None; the engine copies it into
    # each Sample.
    topdown_method: str | None = None
    # True where read() counts only `keys` (the engine then knows which plausibility checks can apply).
    counts_only_keys: bool = False

    @property
    def reads_on_own_cpu(self) -> bool:
        """The counters can be read only from this CPU (rdpmc reads the CPU it runs on); else from any thread
        (an msr file read interrupts the CPU for microseconds; perf reads through the kernel)."""
        return False

    @abstractmethod
    def start(self) -> int:
        """Program or enable counting and take the baseline; returns its clock time (ns)."""

    @abstractmethod
    def read(self) -> Reading:
        """Counts since the previous read (or since start)."""

    def accumulate(self) -> int:
        """Read the counters into running totals that the next read() reports, so that narrow counters
        cannot wrap twice unseen between reads; returns the clock time of the read (ns). Only called
        when accumulate_period_ns is not None."""
        raise NotImplementedError(f"{type(self).__name__} needs no accumulation")

    @staticmethod
    def period_for_wrap(wrap_ns: float) -> int | None:
        """accumulate_period_ns for counters that can wrap after wrap_ns: half of it, so a sampler waking
        a little late still reads before a second wrap; None when no interval is that long."""
        return None if wrap_ns > LONGEST_INTERVAL_S * 1e9 else max(1, int(wrap_ns / 2))

    @property
    @abstractmethod
    def keys(self) -> list[str]:
        """Event keys this CPU counts, in display order."""


class Backend(ABC):
    name: str  # "msr", "sim", "perf"
    simulated: bool = False
    # Software events only (perf where the PMU is out of reach), and why hardware events are unavailable then.
    software_only: bool = False
    watchdog_paused: bool = False  # the NMI watchdog was paused for this run (the msr backend does it)
    hardware_problem: str | None = None
    # Top-down this machine can measure but a plain run does not (it costs counters), and the option that would.
    topdown_off: str | None = None

    def __init__(
        self,
        platform: Platform,
        clock: Clock,
        events: list[EventSpec] | None = None,
        *,
        user: bool = True,
        kernel: bool = True,
        resolver: EventResolver | None = None,
    ) -> None:
        """`events` None means the backend's default set; `resolver` looks up Intel event names."""
        self.platform = platform
        self.clock = clock
        self.events = events
        self.user, self.kernel = user, kernel
        self.resolver = resolver
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

    def topdown_method(self, cpu: int) -> str | None:
        """The top-down method measured on `cpu` (pmutop.pmu.topdown_plan names), or None."""
        return None
