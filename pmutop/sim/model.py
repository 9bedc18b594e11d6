"""A register-level simulated Intel core PMU (architectural perfmon v2-v6).

It answers CPUID, MSR reads/writes and rdpmc the way the SDM describes, so pmutop's real programming,
sampling, overflow and restore code runs unchanged against it. Counters advance lazily on every access
from a deterministic per-CPU `Workload`, only while enabled.

Approximations (no real hardware gives these numbers):
* Non-architectural (event, umask) pairs count a fixed fraction (0.001%-30%, log-uniform, from a hash of the pair) of
  instructions. Event code 0 counts nothing.
* CMASK > 0 turns any event into "cycles where the condition holds": a hash-derived fraction p of
  cycles, divided by CMASK (larger thresholds hold less often); INV counts the other (1 - p) share.
  INV without CMASK is ignored. EDGE counts transitions, ~p(1-p)/8 of cycles (EDGE without CMASK is
  treated as CMASK=1).
* Counts in user and kernel mode are derived (and floored) separately, so a USR+OS counter of a scaled
  event (e.g. 0x3C/0x01 at 100 MHz) can differ by one from scaling the total.
* AnyThread (v3/v4) is accepted and ignored: each CPU is its own core (no SMT), so the *_ANY events the
  four-event formula uses with SMT on (CPU_CLK_UNHALTED.THREAD_ANY, INT_MISC.RECOVERY_CYCLES_ANY) count
  what the thread counts. PC is ignored.
* Freeze on PMI (v4+) is unconditional (as if DEBUGCTL.Freeze_PerfMon_On_PMI were set); the freeze
  instant is found by bisecting time, so other counters stop where the overflow happened.
* Shapes (`SimConfig.model`): "skx" (Skylake-SP, CPUID model 0x55: v4, 4 GP, fixed 0-2, 4-wide), "icx" (Ice
  Lake-SP, 0x6A: v5, 8 GP, fixed 0-3, 5-wide, PERF_METRICS level 1), "spr" (Sapphire Rapids, 0x8F: v5, 8 GP,
  fixed 0-3, 6-wide, PERF_METRICS level 1+2) and "adl" (Alder Lake, 0x97, hybrid: P-cores as spr, E-cores
  Gracemont with 6 GP, fixed 0-2, 5-wide, no PERF_METRICS; leaf 0x1A core types). E-cores of any shape are
  Gracemont-like (5-wide, its top-down events, no PERF_METRICS). Version and counter numbers may be overridden.
* Top-down: fixed counter 3 counts TOPDOWN.SLOTS (width x cycles). PERF_METRICS (0x329, where the shape has it:
  PERF_CAPABILITIES[15] = 1) holds, per byte, round(255 x category slots / slots) over the slots counted
  since it was last written, counted only while GLOBAL_CTRL bit 48 is set and fixed counter 3 counts (with
  that counter's USR/OS selection). Writing 0 zeroes it; writing a value v loads it as the fractions of the
  slots fixed counter 3 holds at that moment (the kernel writes fixed counter 3 first for that reason) and
  reads back v until new slots are counted. Bytes 4-7 are reserved on level-1 shapes (a write with them set
  faults). rdpmc(1 << 29) reads it. GLOBAL_STATUS bit 48 is set when fixed counter 3 wraps while metrics
  count (an approximation: the SDM text on that bit is not at hand). The general-counter events of the
  four-event formula (SKX) and the E-core top-down events (Gracemont) count the workload's top-down truth
  (pmutop.sim.events: SKX_EVENTS, GRACEMONT_EVENTS).
* No PEBS, LBR or uncore.
* PMU v6 (up to 32 GP counters): CPUID.(7,1):EAX[8] and leaf 0x23 (sub-leaf 0 EAX = 0b11, sub-leaf 1 EAX/EBX =
  GP/fixed bitmaps, contiguous) are answered, and the counters live in the v6 range (IA32_PMC_GPn_CTR /
  _CFG_A at 0x1900 + 4n, IA32_PMC_FXn_CTR at 0x1980 + 4n), which is all Linux uses on v6. Whether the legacy
  0x186/0xC1/0x4C1/0x309 addresses keep working on v6 parts is not confirmed; they are modelled as aliases of
  the same counters 0-7 (fixed 0-3). CFG_B/CFG_C (auto-counter reload, PEBS) are not modelled and fault. A
  GPn_CTR write is full width with PERF_CAPABILITIES[13] (as Linux relies on) and, an assumption, sign-extends
  bit 31 like IA32_PMCx without it.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager

from pmutop.core.clock import Clock, MonotonicClock
from pmutop.hw.msr import MsrDevice
from pmutop.sim.config import SimConfig
from pmutop.sim.cpu import SimCpu
from pmutop.sim.processes import ProcessTable
from pmutop.sim.workload import Workload

_PDCM = 1 << 15
_HYBRID = 1 << 15
_ANYTHREAD_DEPRECATED = 1 << 15
_ARCH_PERFMON_EXT = 1 << 8  # CPUID.(7,1):EAX[8]: leaf 0x23 exists
_CORE_TYPE_ATOM = 0x20
_CORE_TYPE_CORE = 0x40
_BRAND = b"pmutop simulated CPU"


class SimMsrDevice(MsrDevice):
    """`/dev/cpu/N/msr` of the simulated machine."""

    def __init__(self, cpu_state: SimCpu) -> None:
        self.cpu = cpu_state.cpu
        self._state = cpu_state
        # The CPU's own methods, one call fewer on every access (the methods below say the same).
        self._read_raw = cpu_state.read  # type: ignore[method-assign]
        self._write_raw = cpu_state.write  # type: ignore[method-assign]
        self.read_many = cpu_state.read_many  # type: ignore[method-assign]

    def _read_raw(self, address: int) -> int:
        return self._state.read(address)

    def read_many(self, addresses: tuple[int, ...]) -> list[int | None]:
        return self._state.read_many(addresses)

    def _write_raw(self, address: int, value: int) -> None:
        self._state.write(address, value)

    def snapshot(self) -> dict[int, int]:
        """EVTSELs, FIXED_CTR_CTRL, GLOBAL_CTRL and GLOBAL_STATUS by address."""
        return self._state.snapshot()


class SimMachine:
    """A whole simulated machine: per-CPU PMUs fed by deterministic workloads. t=0 at construction."""

    def __init__(self, config: SimConfig, clock: Clock | None = None) -> None:
        self.config = config
        self.clock: Clock = clock if clock is not None else MonotonicClock()
        self._t0 = self.clock.now_ns()
        self.energy: tuple[int, dict[str, float]] = (-1, {})  # (ms step, joules per RAPL domain): sim/power.py
        assert config.e_cores is not None and config.mix is not None
        first_e = config.cpus - config.e_cores
        p_core, e_core = config.core_shapes()
        self._cpus = []
        for cpu in range(config.cpus):
            core = e_core if cpu >= first_e else p_core
            workload = Workload(
                config.seed, cpu, config.tsc_hz, e_core=cpu >= first_e, width=core.width, mix=config.mix
            )
            self._cpus.append(SimCpu(self, cpu, workload, core))
        self._devices = [SimMsrDevice(state) for state in self._cpus]
        # Fault injection for tests: called with the cpu right after every read_counters (rdpmc), so a
        # test can let time pass between a sampler's counter read and its GLOBAL_STATUS read.
        self.after_counter_read: Callable[[int], None] | None = None
        self._processes: ProcessTable | None = None
        self._processes_lock = threading.Lock()

    @property
    def processes(self) -> ProcessTable:
        """Who runs each stretch of each core's workload (built on first use: a run that never asks pays nothing)."""
        with self._processes_lock:
            if self._processes is None:
                config = self.config
                self._processes = ProcessTable(self, config.cpus, config.seed, config.tsc_hz)
            return self._processes

    @property
    def cpus(self) -> list[int]:
        return list(range(self.config.cpus))

    def elapsed_ns(self) -> int:
        return max(0, self.clock.now_ns() - self._t0)

    def is_e_core(self, cpu: int) -> bool:
        return self._state(cpu).workload.e_core

    def _state(self, cpu: int) -> SimCpu:
        if not 0 <= cpu < self.config.cpus:
            raise ValueError(f"no cpu {cpu} in the simulated machine ({self.config.cpus} cpus)")
        return self._cpus[cpu]

    def workload(self, cpu: int) -> Workload:
        return self._state(cpu).workload

    def states(self) -> list[SimCpu]:
        return self._cpus

    def replace_workload(self, cpu: int, workload: Workload) -> None:
        """Feed `cpu` from `workload` (anything with Workload's ticks/cumulative/e_core, e.g. the self-test's
        scripted workloads) from now on. Counters keep their values; only what happens after now changes, so
        the new workload must give its counts at the present as the baseline."""
        self._state(cpu).replace_workload(workload)

    def instant(self, cpu: int) -> AbstractContextManager[None]:
        """`cpu`'s registers all at one instant inside (pmutop.sim.cpu.SimCpu.instant)."""
        return self._state(cpu).instant()

    def msr(self, cpu: int) -> SimMsrDevice:
        self._state(cpu)
        return self._devices[cpu]

    def rdpmc(self, cpu: int, ecx: int) -> int:
        return self._state(cpu).rdpmc(ecx)

    def read_counters(self, cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> tuple[int, list[int]]:
        """What the rdpmc shim returns: (TSC, [fixed 0..n_fixed-1, GP 0..n_gp-1] + [PERF_METRICS if metrics]),
        read atomically."""
        values = self._state(cpu).read_counters(n_fixed, n_gp, metrics)
        hook = self.after_counter_read
        if hook is not None:
            hook(cpu)  # outside the CPU's lock: the hook may read or write registers
        return values

    def foreign_write(self, cpu: int, address: int, value: int) -> None:
        """Another agent's WRMSR (perf, another tool, the BIOS): no allowlist, same hardware rules."""
        if not 0 <= value < 1 << 64:
            raise ValueError(f"MSR value out of range: {value:#x}")
        self._state(cpu).write(address, value)

    def set_status_bits(self, cpu: int, bits: int) -> None:
        """Set GLOBAL_STATUS bits as STATUS_SET would (e.g. a stale CTR_FRZ)."""
        self._state(cpu).set_status_bits(bits)

    def cpuid(self, cpu: int, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        """(EAX, EBX, ECX, EDX) as CPU `cpu` would answer."""
        state = self._state(cpu)
        cfg = state.cfg  # this CPU's counter numbers
        hybrid = bool(cfg.e_cores)
        e_core = self.is_e_core(cpu)
        v6 = (cfg.version or 0) >= 6
        if leaf == 0:
            vendor = struct.unpack("<3I", b"GenuineIntel")  # EBX, EDX, ECX order
            max_leaf = 0x23 if v6 else 0x1A if hybrid else 0xA
            return (max_leaf, vendor[0], vendor[2], vendor[1])
        if leaf == 1:
            shape = cfg.shape  # family 6, the model's display model (extended model in bits 19:16)
            signature = (shape.cpuid_model >> 4) << 16 | 0x6 << 8 | (shape.cpuid_model & 0xF) << 4 | shape.stepping
            ebx = (cpu & 0xFF) << 24 | cfg.cpus % 256 << 16 | 8 << 8  # APIC id, count, CLFLUSH 64 B
            edx = 1 << 4 | 1 << 5  # TSC, MSR
            return (signature, ebx, _PDCM, edx)
        if leaf == 7:
            if subleaf == 0:  # EAX = the highest sub-leaf of leaf 7
                return (1 if v6 else 0, 0, 0, _HYBRID if hybrid else 0)
            return (_ARCH_PERFMON_EXT if v6 and subleaf == 1 else 0, 0, 0, 0)
        if leaf == 0x23 and v6:
            if subleaf == 0:  # valid sub-leaves 0 and 1; no UMASK2 / EQ / rdpmc-user-disable
                return (0b11, 0, 0, 0)
            if subleaf == 1:
                return ((1 << cfg.gp_counters) - 1, (1 << cfg.fixed_counters) - 1, 0, 0)
            return (0, 0, 0, 0)
        if leaf == 0xA:
            # EBX length 8 where fixed counter 3 counts slots (bit 7, topdown slots: available).
            ebx_length = 8 if state.metrics_fields else 7
            eax = cfg.version | cfg.gp_counters << 8 | cfg.gp_width << 16 | ebx_length << 24
            fixed_bitmap = (1 << cfg.fixed_counters) - 1
            ecx = fixed_bitmap if cfg.version >= 5 else 0
            edx = cfg.fixed_counters | cfg.fixed_width << 5
            if cfg.version >= 5:
                edx |= _ANYTHREAD_DEPRECATED
            return (eax, 0, ecx, edx)
        if leaf == 0x1A and hybrid:
            return ((_CORE_TYPE_ATOM if e_core else _CORE_TYPE_CORE) << 24 | 1, 0, 0, 0)
        if leaf == 0x80000000:
            return (0x80000004, 0, 0, 0)
        if 0x80000002 <= leaf <= 0x80000004:
            chunk = _BRAND.ljust(48, b"\0")[(leaf - 0x80000002) * 16 :][:16]
            eax, ebx, ecx, edx = struct.unpack("<4I", chunk)
            return (eax, ebx, ecx, edx)
        return (0, 0, 0, 0)
