"""Facts about a run that sinks show in headers: machine, PMU, backend, and what pmutop changed."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RunInfo:
    hostname: str
    cpu_model: str
    uarch: str | None
    pmu: str  # "PMU v4: 4 GP × 48 bit + 3 fixed × 48 bit"
    backend: str
    read_method: str
    simulated: bool
    hypervisor: bool
    cpus: list[int]
    core_types: dict[int, str] = field(default_factory=dict)  # cpu -> "P" / "E" on hybrid parts
    notices: list[str] = field(default_factory=list)
    hardware_problem: str | None = None  # perf with software events only: why there are no hardware events
    cpu_wide_problem: str | None = None  # perf with per-task counters only: why no CPU-wide counter opens
    replay: str | None = None  # a replayed recording: "<original host> <start time>"
    topdown_off: str | None = None  # top-down not measured only because it costs counters: the option that would
    watchdog_paused: bool = False  # the msr backend paused the NMI watchdog for the run (it owns a counter)
