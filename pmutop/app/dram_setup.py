"""Which DRAM bandwidth source a run opens (`--mem-peak`), the engine-side sampler that reads it, and closing
both on every way out.

The simulated machine has its own (SIMULATED); this host has the uncore reader when pmutop's table finds
memory-controller PMUs here, else nothing (the `why` says what is missing: nothing is made up). A refused open
is one line and the run goes on without bandwidth. The memory controllers are separate hardware units from the
core PMU, so this works beside either core backend.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from typing import Any

from pmutop.app.console import say
from pmutop.backends.facts import cpuinfo_identity
from pmutop.core.dram_reading import DramSource
from pmutop.core.errors import PmutopError
from pmutop.engine.engine import Engine
from pmutop.engine.package_sampler import PackageSampler
from pmutop.hw.cpus import describe_cpus
from pmutop.hw.perf_event import PerfOpenError, perf_event_open, read_paranoid
from pmutop.hw.platform import HostPlatform, Platform
from pmutop.probes.dram import DramCounters, Opener, plan_dram

_PERMISSION = (errno.EACCES, errno.EPERM)


@dataclass
class DramSetup:
    """The run's DRAM source (None: none here, `why` says why), its sampler once the engine runs, and the one
    line to show when the kernel refused the counters."""

    source: DramSource | None
    why: str
    refusal: str | None = None
    sampler: PackageSampler | None = None
    _closed: bool = field(default=False, repr=False)

    def start(self, engine: Engine, own_thread: bool = True) -> PackageSampler | None:
        """The sampler, reading once per interval after the CPU samples: in its own thread beside a threaded
        engine (the live view, serve); else (`own_thread` False: batch, which prints each interval's readings
        with it; or an unthreaded engine) whoever drives the run calls sampler.sample_once() itself."""
        if self.source is None or self._closed:
            return None
        self.sampler = PackageSampler(self.source, engine)
        if engine.threaded and own_thread:
            self.sampler.start()
        else:
            self.sampler.begin()
        return self.sampler

    def close(self) -> None:
        """Stop the sampler, then close the source (once; any way out)."""
        if self._closed:
            return
        self._closed = True
        if self.sampler is not None:
            self.sampler.stop()
        if self.source is not None:
            self.source.close()


def refusal_line(paranoid: int | None) -> str:
    now = "unknown" if paranoid is None else str(paranoid)
    return f"DRAM bandwidth: needs root or perf_event_paranoid <= 0 (now {now})"


def open_dram(
    platform: Platform, cpus: list[int], mem_peak_gbs: float | None = None, *, opener: Opener | None = None
) -> DramSetup:
    """The opened source for this run, or why there is none (never raises for missing or refused hardware).
    `opener`: perf_event_open (tests give a fake kernel)."""
    if platform.simulated:
        from pmutop.sim.dram import SimDramCounters
        from pmutop.sim.platform import SimPlatform

        assert isinstance(platform, SimPlatform)
        sim = SimDramCounters(platform.machine, mem_peak_gbs=mem_peak_gbs)
        sim.open()
        return DramSetup(sim, sim.why)
    if not isinstance(platform, HostPlatform) or not platform.sysroot.is_host:
        return DramSetup(None, "--sysroot describes another machine: its memory controllers are not here")
    vendor, family, model = _identity(platform, cpus)
    plan = plan_dram(platform.sysroot, vendor, family, model)
    if plan.source == "none":
        return DramSetup(None, plan.why)
    refused: list[int] = []
    open_event = opener or perf_event_open

    def remembering(*args: Any, **kwargs: Any) -> int:
        try:
            return open_event(*args, **kwargs)
        except PerfOpenError as e:
            refused.append(e.errno)
            raise

    counters = DramCounters(plan, sysroot=platform.sysroot, mem_peak_gbs=mem_peak_gbs, opener=remembering)
    try:
        counters.open()
    except PmutopError as e:
        line = str(e)
        if refused and refused[-1] in _PERMISSION and os.geteuid() != 0:
            line = refusal_line(read_paranoid(platform.sysroot))
        say(line)
        return DramSetup(None, line.removeprefix("DRAM bandwidth: "), refusal=line)
    return DramSetup(counters, counters.why)


def _identity(platform: HostPlatform, cpus: list[int]) -> tuple[str | None, int | None, int | None]:
    """Vendor, family and model from CPUID (the first CPU), else /proc/cpuinfo."""
    identity = describe_cpus(platform, cpus[:1]).identity
    if identity is not None:
        return identity.vendor, identity.family, identity.model
    facts = cpuinfo_identity(platform) or {}
    return facts.get("vendor"), facts.get("family"), facts.get("model")
