"""What a sampler publishes once per interval for one CPU."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Sample:
    cpu: int
    seq: int  # 1, 2, ... per CPU; sample n covers the n-th interval since counting started
    time: float  # seconds since the engine started, at the read
    interval: float  # wall seconds this sample covers
    tsc: int | None  # TSC ticks in the interval (None when the backend has no TSC)
    tsc_hz: float | None  # TSC frequency measured over wall time since the start
    counts: dict[str, int]  # event key -> delta in this interval
    overflows: dict[str, int] = field(default_factory=dict)  # event key -> wraps seen in this interval
    suspect: str | None = None  # why these numbers must not be shown as truth
    error: str | None = None  # the CPU's sampler stopped (offline, read failure)
    estimated: dict[str, float] = field(default_factory=dict)  # event key -> fraction of time it was counted
    util: float | None = None  # busy fraction from the kernel's per-CPU times (when there are no ref cycles)
    topdown: str | None = None  # how top-down is measured on this CPU (pmutop.derive.topdown method), None: not
    # Beside the counters (pmutop.probes.power): None/empty where no source measured it.
    busy: float | None = None  # Busy% = 100 x MPERF / TSC (turbostat)
    bzy_mhz: float | None = None  # TSC MHz x APERF / MPERF: the average clock while not idle
    cstates: dict[str, float] = field(default_factory=dict)  # idle state name -> % of the interval
    temp_c: float | None = None  # core temperature
    throttle: tuple[str, ...] = ()  # "thermal", "critical", "power": what limits the clock now
    package: int | None = None  # physical package of this CPU
    pkg_temp_c: float | None = None  # package temperature (the package's first CPU only)
    energy_j: dict[str, float] = field(default_factory=dict)  # domain -> joules this interval (first CPU only)
    power_src: dict[str, str] = field(default_factory=dict)  # field -> source it came from
