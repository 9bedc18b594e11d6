"""The simulated machine's memory: sockets, memory channels and DRAM traffic from the same workload that drives
its core counters, so a memory-bound phase also loads the memory bus (all SIMULATED).

* Reads: every LLC miss of a package's cores fetches one 64-byte line: read bytes over an interval are exactly
  (the package's cores' LLC misses, user and kernel, over that interval) x 64. Prefetches that reach DRAM
  without a demand miss are not modelled, so nothing is read that the core counters do not show.
* Writes: a share of the lines a core misses on are dirty when they leave the LLC again (write-backs); the
  share depends on what the core is doing (a streaming, memory-bound phase writes most of what it reads; code
  misses of a frontend-bound phase write nearly nothing: pmutop.sim.regimes.WRITEBACK_SHARE) and varies per 100 ms
  segment by a hash. Write bytes = write-backs x 64. A pure function of (seed, cpu, time), like every other
  simulated count: the workload counts them with its segments (pmutop.sim.workload).
* Channels: each package has the model's channels (MEMORY); addresses interleave across them near-evenly, with
  a small fixed skew per channel (a hash of seed, package and channel). Integer lines are split so the
  channels add up to the package exactly.
* Sockets: the CPUs are cut into `sockets` contiguous blocks (default 1: the power model's single package).
* Peak: channels x MT/s x 8 bytes of the model's memory, or `--mem-peak` (what the share is shown against).
* Bound: a package never moves more than its simulated channels can (channels x MT/s x 8 bytes a second), as its
  power never exceeds the TDP (pmutop.sim.power): when the cores' misses and write-backs over an interval would
  need more, every core's lines are scaled by the same factor (reads and writes keep their ratio), so the
  traffic is the peak. Below it, reads are the LLC misses x 64 exactly.

The per-core counts are untouched: write-backs are derived here, not added to the workload.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from pmutop.core.dram_reading import BYTES_PER_LINE, SOURCE_SIMULATED, DramReading, PackageDram, package_totals
from pmutop.probes.memory_speed import MemorySpeed, package_peak
from pmutop.sim.config import SimConfig
from pmutop.sim.workload import hash_unit

MIB = 1 << 20
_SKEW = 0.03  # each channel carries 1 +- 3% of an even share
_SKEW_KEY = 0x696D63  # "imc"
_WEIGHT_SCALE = 1_000_000


@dataclass(frozen=True)
class SimMemory:
    """One socket's memory as the model's part ships it."""

    channels: int  # per socket
    mts: int  # transfers per second, millions
    kind: str  # "DDR5"
    llc_bytes: int  # the last-level cache (the self-test streams 8x this)

    @property
    def name(self) -> str:
        return f"{self.kind}-{self.mts}"


# The parts sim/power.py takes its TDPs from (Intel ARK): Xeon Platinum 8180 (6 channels DDR4-2666, 38.5 MB L3),
# 8380 (8 channels DDR4-3200, 60 MB), 8490H (8 channels DDR5-4800, 112.5 MB), Core i9-12900K (2 channels
# DDR5-4800, 30 MB).
MEMORY: dict[str, SimMemory] = {
    "skx": SimMemory(6, 2666, "DDR4", int(38.5 * MIB)),
    "icx": SimMemory(8, 3200, "DDR4", 60 * MIB),
    "spr": SimMemory(8, 4800, "DDR5", int(112.5 * MIB)),
    "adl": SimMemory(2, 4800, "DDR5", 30 * MIB),
}


class _Machine(Protocol):
    """What the memory reads from pmutop.sim.model.SimMachine."""

    config: SimConfig

    @property
    def cpus(self) -> list[int]: ...

    def elapsed_ns(self) -> int: ...

    def workload(self, cpu: int) -> Any: ...  # a Workload, or a self-test ScriptedWorkload


def package_of(cpu: int, cpus: int, sockets: int) -> int:
    """CPUs are cut into `sockets` contiguous blocks, as Linux numbers a socket's cores together."""
    return cpu * sockets // cpus


def channel_weights(seed: int, package: int, channels: int) -> list[int]:
    """Integer interleave weights: near-even, each skewed by a fixed hash of (seed, package, channel)."""
    return [
        round(_WEIGHT_SCALE * (1 + _SKEW * (2 * hash_unit(seed, package, ch, _SKEW_KEY) - 1))) for ch in range(channels)
    ]


def split_lines(lines: int, weights: list[int]) -> list[int]:
    """`lines` spread over channels by weight; the parts add up to `lines` exactly."""
    total = sum(weights)
    out, before, cumulative = [], 0, 0
    for weight in weights:
        cumulative += weight
        upto = lines * cumulative // total
        out.append(upto - before)
        before = upto
    return out


class SimDramCounters:
    """The simulated machine's memory controllers, with DramCounters' interface (a DramSource): `open()`, then
    `read()` gives one PackageDram per package since the previous read. SIMULATED (source "simulated")."""

    source = SOURCE_SIMULATED

    def __init__(self, machine: _Machine, *, sockets: int = 1, mem_peak_gbs: float | None = None) -> None:
        config = machine.config
        if not 1 <= sockets <= config.cpus:
            raise ValueError(f"sockets must be 1..{config.cpus} (one CPU at least each)")
        self.machine = machine
        self.memory = MEMORY[config.model]
        self.sockets = sockets
        self.packages = {cpu: package_of(cpu, config.cpus, sockets) for cpu in machine.cpus}
        self.first_cpu = {pkg: min(c for c, p in self.packages.items() if p == pkg) for pkg in range(sockets)}
        self.weights = {pkg: channel_weights(config.seed, pkg, self.memory.channels) for pkg in range(sockets)}
        speed = MemorySpeed(self.memory.mts, 0, f"SIMULATED {self.memory.name}")
        self.peak = package_peak(self.memory.channels, sockets, speed, mem_peak_gbs)
        # What the simulated channels can move (not --mem-peak, which only changes the share shown).
        self.channels_peak = self.memory.channels * self.memory.mts * 1e6 * 8
        self._mem_peak_given = mem_peak_gbs is not None
        # Per CPU at the previous read: (its workload then, LLC misses, write-backs).
        self._prev: dict[int, tuple[Any, int, int]] = {}
        self._at_ns = 0
        self._opened = False

    @property
    def why(self) -> str:
        memory, sockets = self.memory, self.sockets
        return (
            f"SIMULATED: {memory.channels} {memory.name} memory channels per package on {sockets} "
            f"package{'s' * (sockets != 1)}; reads = the cores' LLC misses x 64, writes = write-backs x 64"
        )

    def open(self) -> None:
        """Start counting now (the first read covers the time from here)."""
        self._at_ns = self.machine.elapsed_ns()
        self._prev = {cpu: self._lines(cpu, self._at_ns) for cpu in self.machine.cpus}
        self._opened = True

    def _lines(self, cpu: int, t_ns: int) -> tuple[Any, int, int]:
        workload = self.machine.workload(cpu)
        lines = getattr(workload, "memory_lines", None)  # both at once, without the other counts (a Workload)
        if lines is not None:
            misses, written = lines(t_ns)
        else:
            misses = int(workload.cumulative(t_ns).total.llc_misses)
            written = workload.cumulative_writebacks(t_ns)
        return workload, misses, written

    def read(self) -> list[PackageDram]:
        if not self._opened:
            self.open()
        now = self.machine.elapsed_ns()
        t0, self._at_ns = self._at_ns, now
        interval = (now - t0) / 1e9
        reads = [0] * self.sockets
        writes = [0] * self.sockets
        for cpu in self.machine.cpus:
            workload, misses, written = self._lines(cpu, now)
            before, prev_misses, prev_written = self._prev[cpu]
            if workload is not before:  # replaced (the self-test): its write-backs count from t0
                prev_written = workload.cumulative_writebacks(t0)
            self._prev[cpu] = (workload, misses, written)
            pkg = self.packages[cpu]
            reads[pkg] += misses - prev_misses
            writes[pkg] += written - prev_written
        out = []
        for pkg in range(self.sockets):
            reads[pkg], writes[pkg] = self._bounded(reads[pkg], writes[pkg], interval)
            weights = self.weights[pkg]
            read_lines, write_lines = split_lines(reads[pkg], weights), split_lines(writes[pkg], weights)
            channels = tuple(
                DramReading(f"sim_imc_{ch}", pkg, ch, r * BYTES_PER_LINE, w * BYTES_PER_LINE, interval)
                for ch, (r, w) in enumerate(zip(read_lines, write_lines, strict=True))
            )
            out.append(package_totals(pkg, channels, interval, self.peak))
        return out

    def _bounded(self, reads: int, writes: int, interval: float) -> tuple[int, int]:
        """A package's (read, write) lines over `interval`, scaled alike down to what its channels can move."""
        most = int(self.channels_peak * interval) // BYTES_PER_LINE
        if reads + writes <= most:
            return reads, writes
        scaled_reads = reads * most // (reads + writes)
        return scaled_reads, min(writes * most // (reads + writes), most - scaled_reads)

    def close(self) -> None:
        self._opened = False

    def __enter__(self) -> SimDramCounters:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def peak_text(self) -> str:
        """Where the peak comes from, in one line."""
        peak = self.peak or 0.0
        if self._mem_peak_given:
            return f"--mem-peak: {peak / 1e9:g} GB/s per package"
        memory = self.memory
        return (
            f"SIMULATED {memory.name}: {memory.channels} channels x {memory.mts} MT/s x 8 bytes = "
            f"{peak / 1e9:.1f} GB/s per package"
        )

    def info_facts(self) -> dict[str, Any]:
        """`pmutop info --demo`'s memory_bandwidth: the same shape as the uncore plan's, SIMULATED."""
        memory = self.memory
        return {
            "source": SOURCE_SIMULATED,
            "why": self.why,
            "table": None,
            "channels": [
                {
                    "pmu": f"sim_imc_{ch}",
                    "package": pkg,
                    "cpu": self.first_cpu[pkg],
                    "type": None,
                    "read": [],
                    "write": [],
                    "bytes_per_count": BYTES_PER_LINE,
                    "simulated": True,
                }
                for pkg in range(self.sockets)
                for ch in range(memory.channels)
            ],
            "notes": [],
            "memory_mts": memory.mts,
            "memory_speed": self.peak_text(),
        }
