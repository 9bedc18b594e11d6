"""The simulated machine's frequency, idle, thermal and RAPL registers, derived from the same workload that
drives its counters, so busy phases run faster, hotter and draw more power (all SIMULATED).

APERF/MPERF are the workload's unhalted core/reference cycles (what they count on hardware: SDM 14.2,
turbostat); the halted rest of the TSC is split into C1 and C6 residency; the temperature follows the current
utilisation and clock; package energy = idle power x time + energy per cycle and per LLC miss. The energy
counters start just below their 32-bit wrap so the wrap happens within the first second.

The simulated machine is one package whatever its CPU count, so its power must stay what one package of the
model can draw: when the CPUs' peak dynamic power would exceed the model's TDP (PACKAGE_TDP_W), the energy per
cycle and per LLC miss shrink in proportion (as a many-core part runs each core at less power), and the core
domain's idle share never exceeds the package's idle power.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Protocol

from pmutop.probes.power import regs
from pmutop.sim.config import SimConfig
from pmutop.sim.regimes import RANGES
from pmutop.sim.workload import Counts, Workload

TJMAX = 100
POWER_UNIT = 0xA0E03  # power 1/8 W, energy 1/2^14 J (61 µJ), time 1/2^10 s: a typical client part
ENERGY_UNIT_J = regs.energy_unit_joules(POWER_UNIT)
ENERGY_START = (1 << 32) - (1 << 16)  # counts: wraps after ~4 J
IDLE_PKG_W = 4.0
IDLE_CORE_W = 0.5
DRAM_W = 1.5
J_PER_CYCLE = 1.1e-9  # ~4.4 W per core at 4 GHz
J_PER_LLC_MISS = 15e-9
C6_SHARE = 0.7  # of halted time
# One package's power limit per model: Xeon Platinum 8180 (Skylake-SP, 205 W), 8380 (Ice Lake-SP, 270 W), 8490H
# (Sapphire Rapids, 350 W) TDP; Core i9-12900K (Alder Lake) processor base power 125 W.
PACKAGE_TDP_W = {"skx": 205.0, "icx": 270.0, "spr": 350.0, "adl": 125.0}


def _peak_cpu_watts() -> float:
    """The most one busy CPU can draw: per regime, the highest clock, IPC and MPKI its ranges allow."""
    peak = 0.0
    for ranges in RANGES.values():
        ghz, ipc, mpki = ranges[1][1], ranges[2][1], ranges[3][1]
        peak = max(peak, ghz * 1e9 * (J_PER_CYCLE + ipc * mpki / 1000 * J_PER_LLC_MISS))
    return peak


PEAK_CPU_W = _peak_cpu_watts()


@functools.cache
def dynamic_scale(config: SimConfig) -> float:
    """The factor on the energy per cycle and per miss that keeps every CPU at its peak within the TDP."""
    budget = PACKAGE_TDP_W[config.model] - IDLE_PKG_W
    return min(1.0, budget / (config.cpus * PEAK_CPU_W))


# What this model reads and keeps on the simulated machine, declared here so the machine depends on it rather
# than the other way round (pmutop.sim.cpu.SimCpu and pmutop.sim.model.SimMachine are what it is given).


class PowerMachine(Protocol):
    energy: tuple[int, dict[str, float]]  # (ms step, joules per RAPL domain), the package's: see _energy
    config: SimConfig

    @property
    def cpus(self) -> list[int]: ...

    def elapsed_ns(self) -> int: ...

    def states(self) -> Sequence[PowerCpu]: ...


class PowerCpu(Protocol):
    workload: Workload
    thermal: tuple[int, float]  # (time step, temperature): see _temperature
    thermal_points: tuple[object, dict[int, tuple[int, int, int]]]  # (workload, points): see _window_point
    unhalted: tuple[int, object, int, int, int]  # (time, workload, TSC ticks, cycles, ref cycles): see read

    @property
    def machine(self) -> PowerMachine: ...

    @property
    def advanced(self) -> bool: ...

    @property
    def cum(self) -> Counts: ...

    @property
    def time_ns(self) -> int: ...


THERMAL_WINDOW_NS = 1_000_000_000  # the die follows the load of about the last second
THERMAL_STEP_NS = 100_000_000  # the readout changes every 100 ms, so a package read of all cores is cheap


def _temperature(cpu: PowerCpu, t_ns: int) -> float:
    step = t_ns // THERMAL_STEP_NS
    if cpu.thermal[0] != step:
        cpu.thermal = (step, _die_temperature(cpu, step * THERMAL_STEP_NS))
    return cpu.thermal[1]


def _die_temperature(cpu: PowerCpu, t_ns: int) -> float:
    tsc_hz = cpu.workload.tsc_hz
    a_tsc, a_ref, a_cycles = _window_point(cpu, max(0, t_ns - THERMAL_WINDOW_NS))
    b_tsc, b_ref, b_cycles = _window_point(cpu, t_ns)
    ticks = b_tsc - a_tsc
    ref = b_ref - a_ref
    if ticks <= 0 or ref <= 0:
        return 35.0
    util = min(1.0, ref / ticks)
    ghz = (b_cycles - a_cycles) / ref * tsc_hz / 1e9
    return 35.0 + 55.0 * util * min(1.0, ghz / 4.0)


def _window_point(cpu: PowerCpu, t_ns: int) -> tuple[int, int, int]:
    """(TSC ticks, total reference cycles, total cycles) of the CPU's workload at t, a multiple of the thermal
    step. Kept for the window's length: a window's start is usually an earlier window's end (a step read a
    second before), so each new step costs one workload evaluation, not two."""
    workload = cpu.workload
    points_of, points = cpu.thermal_points
    if points_of is not workload:  # replaced (self-test): the old workload's points do not apply
        points = {}
    point = points.get(t_ns)
    if point is None:
        ticks, cycles, ref_cycles = _unhalted(workload, t_ns)
        point = (ticks, ref_cycles, cycles)
        # Copy on write: the package read evaluates every CPU from one CPU's thread while each CPU's own
        # sampler may read its temperature, so a published dict is never changed.
        keep = t_ns - THERMAL_WINDOW_NS
        points = {t: p for t, p in points.items() if t >= keep}
        points[t_ns] = point
        cpu.thermal_points = (workload, points)
    return point


def _therm_status(temp: float) -> int:
    readout = max(0, min(0x7F, round(TJMAX - temp)))
    return regs.THERM_READING_VALID | readout << 16


ENERGY_STEP_NS = 1_000_000  # RAPL counters update about every millisecond (SDM 15.10.1)


def _energy(cpu: PowerCpu, domain: str) -> int:
    """The package's 32-bit energy counter: every CPU of the (single) simulated package contributes what it
    has run up to its own latest register access (a sampled CPU's model is advanced by its own sampler, so the
    package read costs no model evaluation, and the sum only grows). All domains in one pass per ms."""
    machine = cpu.machine
    now_ns = machine.elapsed_ns() // ENERGY_STEP_NS * ENERGY_STEP_NS
    cached = machine.energy
    if cached[0] != now_ns:
        cycles = misses = 0
        for state in machine.states():
            # A CPU nobody samples (not selected) is never advanced: its workload still heats the package.
            counts = state.cum if state.advanced else state.workload.cumulative(now_ns)
            for part in (counts.user, counts.kernel):
                cycles += part.cycles
                misses += part.llc_misses
        secs = now_ns / 1e9
        scale = dynamic_scale(machine.config)
        core_idle_w = min(IDLE_CORE_W * len(machine.cpus), IDLE_PKG_W)  # the cores are part of the package
        joules = {
            "package": IDLE_PKG_W * secs + scale * (J_PER_CYCLE * cycles + J_PER_LLC_MISS * misses),
            "core": core_idle_w * secs + scale * J_PER_CYCLE * cycles,
            "dram": DRAM_W * secs + scale * J_PER_LLC_MISS * misses,
        }
        # A CPU whose sampler lags adds its whole backlog at its next sample; a real package never draws more
        # than its TDP, so the counter grows at most that fast and what is left over comes in later reads.
        last_ns, last = cached
        if last:
            most = PACKAGE_TDP_W[machine.config.model] * max(0, now_ns - last_ns) / 1e9
            joules = {domain: min(value, last[domain] + most) for domain, value in joules.items()}
        cached = machine.energy = (now_ns, joules)
    return (ENERGY_START + int(cached[1][domain] / ENERGY_UNIT_J)) & 0xFFFFFFFF


def _unhalted(workload: Workload, t_ns: int) -> tuple[int, int, int]:
    """(TSC ticks, cycles, reference cycles) of the workload at t."""
    ticks = workload.ticks(t_ns)
    totals = getattr(workload, "totals_ticks", None)  # a Workload's (not a self-test script's): no Counts built
    if totals is not None:
        cycles, ref_cycles = totals(ticks, (0, 2))
        return ticks, cycles, ref_cycles
    total = workload.cumulative(t_ns).total
    return ticks, total.cycles, total.ref_cycles


def read(cpu: PowerCpu, address: int, now_ns: int) -> int | None:
    """The value of a power/thermal/idle MSR on this simulated CPU at `now_ns` (ns since the machine started), or
    None (the register does not exist)."""
    if address in (regs.IA32_APERF, regs.IA32_MPERF, regs.MSR_CORE_C6_RESIDENCY):
        kept = cpu.unhalted  # the three are read together (one instant when read at once: read_many)
        if kept[0] != now_ns or kept[1] is not cpu.workload:
            if now_ns == cpu.time_ns:  # the counters were counted up to this instant: the amounts are there
                cum = cpu.cum
                user, kernel = cum.user, cum.kernel
                kept = (now_ns, cpu.workload, cum.tsc, user.cycles + kernel.cycles, user.ref_cycles + kernel.ref_cycles)
            else:
                kept = (now_ns, cpu.workload, *_unhalted(cpu.workload, now_ns))
            cpu.unhalted = kept
        _, _, ticks, cycles, ref_cycles = kept
        if address == regs.IA32_APERF:
            return cycles
        if address == regs.IA32_MPERF:
            return ref_cycles
        return int(max(0, ticks - ref_cycles) * C6_SHARE)
    if address == regs.MSR_TEMPERATURE_TARGET:
        return TJMAX << 16
    if address == regs.IA32_THERM_STATUS:
        return _therm_status(_temperature(cpu, now_ns))
    if address == regs.IA32_PACKAGE_THERM_STATUS:
        return _therm_status(max(_temperature(state, now_ns) for state in cpu.machine.states()))
    if address == regs.MSR_RAPL_POWER_UNIT:
        return POWER_UNIT
    domain = {regs.MSR_PKG_ENERGY_STATUS: "package", regs.MSR_PP0_ENERGY_STATUS: "core"}.get(address)
    if domain is None and address == regs.MSR_DRAM_ENERGY_STATUS:
        domain = "dram"
    return _energy(cpu, domain) if domain else None
