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
* AnyThread (v3/v4) is accepted and ignored: each CPU is its own core. PC is ignored.
* Freeze on PMI (v4+) is unconditional (as if DEBUGCTL.Freeze_PerfMon_On_PMI were set); the freeze
  instant is found by bisecting time, so other counters stop where the overflow happened.
* No PERF_METRICS (PERF_CAPABILITIES[15] = 0), PEBS, LBR or uncore.
* PMU v6 (up to 32 GP counters): CPUID.(7,1):EAX[8] and leaf 0x23 (sub-leaf 0 EAX = 0b11, sub-leaf 1 EAX/EBX =
  GP/fixed bitmaps, contiguous) are answered, and the counters live in the v6 range (IA32_PMC_GPn_CTR /
  _CFG_A at 0x1900 + 4n, IA32_PMC_FXn_CTR at 0x1980 + 4n), which is all Linux uses on v6. Whether the legacy
  0x186/0xC1/0x4C1/0x309 addresses keep working on v6 parts is not confirmed; they are modelled as aliases of
  the same counters 0-7 (fixed 0-3). CFG_B/CFG_C (auto-counter reload, PEBS) are not modelled and fault. A
  GPn_CTR write is full width with PERF_CAPABILITIES[13] (as Linux relies on) and, an assumption, sign-extends
  bit 31 like IA32_PMCx without it.
"""

from __future__ import annotations

import errno
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pmutop.clock import Clock, MonotonicClock
from pmutop.hw.msr import MsrAccessError, MsrDevice
from pmutop.pmu import registers as r
from pmutop.sim.workload import Amounts, Counts, Workload, hash_unit

_BUS_HZ = 100_000_000  # the architectural ref event on a GP counter ticks at the bus clock
_PPM = 1_000_000
_PDCM = 1 << 15
_HYBRID = 1 << 15
_ANYTHREAD_DEPRECATED = 1 << 15
_ARCH_PERFMON_EXT = 1 << 8  # CPUID.(7,1):EAX[8]: leaf 0x23 exists
_CORE_TYPE_ATOM = 0x20
_CORE_TYPE_CORE = 0x40
_RDPMC_TYPE_GP = 0x0000
_RDPMC_TYPE_FIXED = 0x4000
_BRAND = b"pmutop simulated CPU"
_FIXED_ENABLE = r.FIXED_EN_OS | r.FIXED_EN_USR


@dataclass(frozen=True)
class SimConfig:
    cpus: int = 8
    version: int = 4  # 2..6 supported
    gp_counters: int = 4  # 1..8, or 1..32 from v6 (what the version's register map can address)
    fixed_counters: int = 3  # 0..4
    gp_width: int = 48
    fixed_width: int = 48
    tsc_hz: int = 2_400_000_000
    seed: int = 1
    e_cores: int = 0  # the last e_cores CPUs are hybrid E-cores
    full_width_writes: bool = True  # IA32_PERF_CAPABILITIES[13]
    rdpmc_enabled: bool = True  # models CR4.PCE: when False every rdpmc faults

    def __post_init__(self) -> None:
        max_gp = r.register_map(self.version).max_gp
        checks = [
            (self.cpus >= 1, "cpus must be >= 1"),
            (2 <= self.version <= 6, "version must be 2..6"),
            (1 <= self.gp_counters <= max_gp, f"gp_counters must be 1..{max_gp}"),
            (0 <= self.fixed_counters <= r.MAX_FIXED_COUNTERS, "fixed_counters must be 0..4"),
            (8 <= self.gp_width <= 64, "gp_width must be 8..64"),
            (8 <= self.fixed_width <= 64, "fixed_width must be 8..64"),
            (self.tsc_hz >= _BUS_HZ // 10, "tsc_hz too small"),
            (0 <= self.e_cores <= self.cpus, "e_cores must be 0..cpus"),
        ]
        for ok, why in checks:
            if not ok:
                raise ValueError(f"bad SimConfig: {why}")


class SimRdpmcFault(Exception):
    """rdpmc raised #GP (the real instruction would kill the process with SIGSEGV)."""


# -- event model ----------------------------------------------------------------------------------------

_CountFn = Callable[[Amounts], int]

# Architectural events (SDM table of CPUID.0AH:EBX events); 0x3C/0x01 depends on tsc_hz, see _event_fn.
_ARCH_EVENTS: dict[tuple[int, int], _CountFn] = {
    (0x3C, 0x00): lambda a: a.cycles,
    (0xC0, 0x00): lambda a: a.instructions,
    (0x2E, 0x4F): lambda a: a.llc_references,
    (0x2E, 0x41): lambda a: a.llc_misses,
    (0xC4, 0x00): lambda a: a.branches,
    (0xC5, 0x00): lambda a: a.branch_misses,
    (0xA4, 0x01): lambda a: a.slots,
}


def _fraction(count: Callable[[Amounts], int], ppm: int) -> _CountFn:
    return lambda a: count(a) * ppm // _PPM


def _event_fn(evtsel: int, tsc_hz: int) -> _CountFn:
    """Cumulative count of the event an EVTSEL selects, as a monotonic function of workload amounts.

    Deltas are taken as f(new) - f(old), so floored fractions never drift or go negative.
    """
    event = evtsel & r.EVTSEL_EVENT_MASK
    umask = (evtsel >> r.EVTSEL_UMASK_SHIFT) & 0xFF
    cmask = (evtsel >> r.EVTSEL_CMASK_SHIFT) & 0xFF
    edge = bool(evtsel & r.EVTSEL_EDGE)
    inv = bool(evtsel & r.EVTSEL_INV)
    if event == 0:
        return lambda a: 0
    if cmask or edge:
        p = (0.05 + 0.9 * hash_unit(event, umask, 0x636D61736B)) / max(cmask, 1)
        if inv and cmask:
            p = 1.0 - p
        if edge:
            p = p * (1.0 - p) / 8.0
        return _fraction(lambda a: a.cycles, int(p * _PPM))
    if (event, umask) == (0x3C, 0x01):
        return lambda a: a.ref_cycles * _BUS_HZ // tsc_hz
    fn = _ARCH_EVENTS.get((event, umask))
    if fn is not None:
        return fn
    # Log-uniform between 0.001% and 30% of instructions: most real events are rare per instruction.
    ppm = int(10 * 30_000 ** hash_unit(event, umask, 0x726177))
    return _fraction(lambda a: a.instructions, ppm)


_FIXED_FNS: tuple[_CountFn, ...] = (
    lambda a: a.instructions,
    lambda a: a.cycles,
    lambda a: a.ref_cycles,  # TSC rate while unhalted
    lambda a: a.slots,
)


@dataclass
class _Counter:
    fn: _CountFn
    user: bool
    kernel: bool
    pmi: bool
    width: int
    status_bit: int
    read: Callable[[], int]
    write: Callable[[int], None]

    def delta(self, old: Counts, new: Counts) -> int:
        d = 0
        if self.user:
            d += self.fn(new.user) - self.fn(old.user)
        if self.kernel:
            d += self.fn(new.kernel) - self.fn(old.kernel)
        return d


# -- one CPU ----------------------------------------------------------------------------------------------


class _SimCpu:
    """The PMU state of one logical CPU. Every public method takes the CPU's lock."""

    def __init__(self, machine: SimMachine, cpu: int, workload: Workload) -> None:
        cfg = machine.config
        self.machine = machine
        self.cfg = cfg
        self.cpu = cpu
        self.workload = workload
        self.lock = threading.Lock()
        self.evtsel = [0] * cfg.gp_counters
        self.gp = [0] * cfg.gp_counters
        self.fixed = [0] * cfg.fixed_counters
        self.fixed_ctrl = 0
        self.global_ctrl = 0
        self.status = 0
        self._t = 0  # ns since machine start, never goes back
        self._cum = workload.cumulative(0)
        self._enabled: list[_Counter] | None = None  # cache, dropped by every register write
        fixed = range(cfg.fixed_counters)
        self.global_ctrl_valid = r.global_ctrl_mask(range(cfg.gp_counters), fixed)
        self.status_valid = r.status_reset_writable_mask(cfg.version, cfg.gp_counters, fixed)
        self.gp_mask = (1 << cfg.gp_width) - 1
        self.fixed_mask = (1 << cfg.fixed_width) - 1
        self.regs = r.register_map(cfg.version)
        self._registers = _register_table(cfg)

    # -- counting -----------------------------------------------------------------------------------

    def _frozen(self) -> bool:
        return self.cfg.version >= 4 and bool(self.status & r.STATUS_CTR_FRZ)

    def _active(self) -> list[_Counter]:
        """Counters that count right now (per-counter enable AND global enable AND not frozen)."""
        if self._frozen():
            return []
        if self._enabled is None:
            self._enabled = self._enabled_counters()
        return self._enabled

    def _enabled_counters(self) -> list[_Counter]:
        out: list[_Counter] = []
        freeze_on_pmi = self.cfg.version >= 4
        for i, sel in enumerate(self.evtsel):
            if sel & r.EVTSEL_EN and self.global_ctrl & r.gp_bit(i) and sel & (r.EVTSEL_USR | r.EVTSEL_OS):
                out.append(
                    _Counter(
                        _event_fn(sel, self.cfg.tsc_hz),
                        bool(sel & r.EVTSEL_USR),
                        bool(sel & r.EVTSEL_OS),
                        freeze_on_pmi and bool(sel & r.EVTSEL_INT),
                        self.cfg.gp_width,
                        r.gp_bit(i),
                        lambda i=i: self.gp[i],
                        lambda v, i=i: self.gp.__setitem__(i, v),
                    )
                )
        for i in range(self.cfg.fixed_counters):
            nib = r.fixed_ctrl_nibble(self.fixed_ctrl, i)
            if nib & _FIXED_ENABLE and self.global_ctrl & r.fixed_bit(i):
                out.append(
                    _Counter(
                        _FIXED_FNS[i],
                        bool(nib & r.FIXED_EN_USR),
                        bool(nib & r.FIXED_EN_OS),
                        freeze_on_pmi and bool(nib & r.FIXED_PMI),
                        self.cfg.fixed_width,
                        r.fixed_bit(i),
                        lambda i=i: self.fixed[i],
                        lambda v, i=i: self.fixed.__setitem__(i, v),
                    )
                )
        return out

    def _advance(self) -> None:
        """Bring counters and status up to the clock's present."""
        now = max(self.machine.elapsed_ns(), self._t)
        if now == self._t:
            return
        new = self.workload.cumulative(now)
        active = self._active()
        pmi = [c for c in active if c.pmi]
        if pmi and self._pmi_overflows(pmi, new):
            # Freeze where the overflow happened: count up to that instant, then nothing more.
            lo, hi = self._t, now
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self._pmi_overflows(pmi, self.workload.cumulative(mid)):
                    hi = mid
                else:
                    lo = mid
            self._count(active, self.workload.cumulative(hi))
            active = []
        self._count(active, new)
        self._t = now
        self._cum = new

    def _pmi_overflows(self, pmi: list[_Counter], new: Counts) -> bool:
        return any((c.read() + c.delta(self._cum, new)) >> c.width for c in pmi)

    def _count(self, active: list[_Counter], new: Counts) -> None:
        for c in active:
            value = c.read() + c.delta(self._cum, new)
            if value >> c.width:
                self.status |= c.status_bit
                if c.pmi:
                    self.status |= r.STATUS_CTR_FRZ
            c.write(value & ((1 << c.width) - 1))
        self._cum = new

    # -- registers ----------------------------------------------------------------------------------

    def _inuse(self) -> int:
        value = 0
        pmi = False
        for i, sel in enumerate(self.evtsel):
            if sel & r.EVTSEL_EVENT_MASK:
                value |= r.gp_bit(i)
            pmi |= bool(sel & r.EVTSEL_INT)
        for i in range(self.cfg.fixed_counters):
            nib = r.fixed_ctrl_nibble(self.fixed_ctrl, i)
            if nib & _FIXED_ENABLE:
                value |= r.fixed_bit(i)
            pmi |= bool(nib & r.FIXED_PMI)
        return value | (r.INUSE_PMI if pmi else 0)

    def tsc(self) -> int:
        return self.workload.ticks(self._t)

    def read(self, address: int) -> int:
        with self.lock:
            self._advance()
            value = self._read(address)
        if value is None:
            raise MsrAccessError(self.cpu, address, "read", errno.EIO)
        return value

    def _read(self, address: int) -> int | None:
        cfg = self.cfg
        reg = self._registers.get(address)
        if reg is not None:
            kind, i = reg
            if kind == _EVTSEL:
                return self.evtsel[i]
            return self.fixed[i] if kind == _FIXED else self.gp[i]
        readers: dict[int, Callable[[], int]] = {
            r.IA32_TIME_STAMP_COUNTER: self.tsc,
            r.IA32_PERF_CAPABILITIES: lambda: r.PERF_CAP_FW_WRITE if cfg.full_width_writes else 0,
            r.IA32_FIXED_CTR_CTRL: lambda: self.fixed_ctrl,
            r.IA32_PERF_GLOBAL_STATUS: lambda: self.status,
            r.IA32_PERF_GLOBAL_CTRL: lambda: self.global_ctrl,
            r.IA32_PERF_GLOBAL_STATUS_RESET: lambda: 0,
        }
        if cfg.version >= 4:
            readers[r.IA32_PERF_GLOBAL_STATUS_SET] = lambda: 0  # write-only
            readers[r.IA32_PERF_GLOBAL_INUSE] = self._inuse
        reader = readers.get(address)
        return None if reader is None else reader()

    def write(self, address: int, value: int) -> None:
        with self.lock:
            self._advance()  # count up to now under the old configuration
            if not self._write(address, value):
                raise MsrAccessError(self.cpu, address, "write", errno.EIO)
            self._enabled = None

    def _write(self, address: int, value: int) -> bool:
        """Apply a WRMSR; False means #GP (nothing changed)."""
        cfg = self.cfg
        kind, i = self._registers.get(address, (None, 0))
        if kind == _EVTSEL:
            if value >> 32 or (cfg.version >= 5 and value & r.EVTSEL_ANY):
                return False
            self.evtsel[i] = value
            return True
        if kind == _PMC_V6 and cfg.full_width_writes:
            kind = _PMC_FULL
        if kind in (_PMC_SIGN_EXTEND, _PMC_V6):
            self.gp[i] = r.sign_extend_legacy_pmc_write(value, cfg.gp_width)
            return True
        if kind == _PMC_FULL:
            if not cfg.full_width_writes or value > self.gp_mask:
                return False
            self.gp[i] = value
            return True
        if kind == _FIXED:
            if value > self.fixed_mask:
                return False
            self.fixed[i] = value
            return True
        if address == r.IA32_FIXED_CTR_CTRL:
            any_bits = sum(r.FIXED_ANY << 4 * i for i in range(cfg.fixed_counters))
            if value >> 4 * cfg.fixed_counters or (cfg.version >= 5 and value & any_bits):
                return False
            self.fixed_ctrl = value
            return True
        if address == r.IA32_PERF_GLOBAL_CTRL:
            if value & ~self.global_ctrl_valid:
                return False
            self.global_ctrl = value
            return True
        if address == r.IA32_PERF_GLOBAL_STATUS_RESET:
            if value & ~self.status_valid:
                return False
            self.status &= ~value  # write-1-to-clear
            return True
        if address == r.IA32_PERF_GLOBAL_STATUS_SET and cfg.version >= 4:
            if value & ~self.status_valid:
                return False
            self.status |= value
            return True
        return False  # read-only (TSC, capabilities, status, INUSE) or not implemented

    def set_status_bits(self, bits: int) -> None:
        with self.lock:
            self._advance()
            if bits & ~self.status_valid:
                raise ValueError(f"status bits {bits & ~self.status_valid:#x} do not exist on this PMU")
            self.status |= bits

    def snapshot(self) -> dict[int, int]:
        with self.lock:
            self._advance()
            regs = {self.regs.evtsel(i): v for i, v in enumerate(self.evtsel)}
            regs[r.IA32_FIXED_CTR_CTRL] = self.fixed_ctrl
            regs[r.IA32_PERF_GLOBAL_CTRL] = self.global_ctrl
            regs[r.IA32_PERF_GLOBAL_STATUS] = self.status
            return regs

    # -- rdpmc --------------------------------------------------------------------------------------

    def _rdpmc(self, ecx: int) -> int:
        if not self.cfg.rdpmc_enabled:
            raise SimRdpmcFault(f"cpu {self.cpu}: rdpmc with CR4.PCE clear")
        kind, index = ecx >> 16, ecx & 0xFFFF
        if kind == _RDPMC_TYPE_GP and index < self.cfg.gp_counters:
            return self.gp[index]
        if kind == _RDPMC_TYPE_FIXED and index < self.cfg.fixed_counters:
            return self.fixed[index]
        raise SimRdpmcFault(f"cpu {self.cpu}: rdpmc ecx={ecx:#x} is not a counter")

    def rdpmc(self, ecx: int) -> int:
        if not 0 <= ecx < 1 << 32:
            raise SimRdpmcFault(f"cpu {self.cpu}: rdpmc ecx={ecx:#x} out of range")
        with self.lock:
            self._advance()
            return self._rdpmc(ecx)

    def read_counters(self, n_fixed: int, n_gp: int) -> tuple[int, list[int]]:
        with self.lock:
            self._advance()
            values = [self._rdpmc(_RDPMC_TYPE_FIXED << 16 | i) for i in range(n_fixed)]
            values += [self._rdpmc(_RDPMC_TYPE_GP << 16 | i) for i in range(n_gp)]
            return self.tsc(), values


# What an MSR address is: (kind, counter index).
_EVTSEL = "evtsel"
_PMC_SIGN_EXTEND = "pmc"  # IA32_PMCx: WRMSR sign-extends EAX[31:0]
_PMC_FULL = "a_pmc"  # IA32_A_PMCx: full width, only with PERF_CAPABILITIES[13]
_PMC_V6 = "gp_ctr"  # IA32_PMC_GPn_CTR: full width with PERF_CAPABILITIES[13], else (assumed) sign-extending
_FIXED = "fixed"


def _register_table(cfg: SimConfig) -> dict[int, tuple[str, int]]:
    """Every counter and event-select address this PMU answers, built from pmutop's own register maps.

    v6 parts get the v6 range plus the legacy addresses as aliases of counters 0-7 (see the module docstring).
    """
    maps = [r.LEGACY_REGISTERS] + ([r.V6_REGISTERS] if cfg.version >= 6 else [])
    table: dict[int, tuple[str, int]] = {}
    for regs in maps:
        for i in range(min(cfg.gp_counters, regs.max_gp)):
            table[regs.evtsel(i)] = (_EVTSEL, i)
            if regs.kind == "v6":
                table[regs.pmc(i)] = (_PMC_V6, i)
            else:
                table[regs.pmc(i)] = (_PMC_SIGN_EXTEND, i)
                table[regs.counter(i, full_width=True)] = (_PMC_FULL, i)
        for i in range(min(cfg.fixed_counters, regs.max_fixed)):
            table[regs.fixed_ctr(i)] = (_FIXED, i)
    return table


# -- public ----------------------------------------------------------------------------------------------


class SimMsrDevice(MsrDevice):
    """`/dev/cpu/N/msr` of the simulated machine."""

    def __init__(self, cpu_state: _SimCpu) -> None:
        self.cpu = cpu_state.cpu
        self._state = cpu_state

    def _read_raw(self, address: int) -> int:
        return self._state.read(address)

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
        first_e = config.cpus - config.e_cores
        self._cpus = [
            _SimCpu(self, cpu, Workload(config.seed, cpu, config.tsc_hz, e_core=cpu >= first_e))
            for cpu in range(config.cpus)
        ]
        self._devices = [SimMsrDevice(state) for state in self._cpus]
        # Fault injection for tests: called with the cpu right after every read_counters (rdpmc), so a
        # test can let time pass between a sampler's counter read and its GLOBAL_STATUS read.
        self.after_counter_read: Callable[[int], None] | None = None

    @property
    def cpus(self) -> list[int]:
        return list(range(self.config.cpus))

    def elapsed_ns(self) -> int:
        return max(0, self.clock.now_ns() - self._t0)

    def is_e_core(self, cpu: int) -> bool:
        return self._state(cpu).workload.e_core

    def _state(self, cpu: int) -> _SimCpu:
        if not 0 <= cpu < self.config.cpus:
            raise ValueError(f"no cpu {cpu} in the simulated machine ({self.config.cpus} cpus)")
        return self._cpus[cpu]

    def workload(self, cpu: int) -> Workload:
        return self._state(cpu).workload

    def msr(self, cpu: int) -> SimMsrDevice:
        self._state(cpu)
        return self._devices[cpu]

    def rdpmc(self, cpu: int, ecx: int) -> int:
        return self._state(cpu).rdpmc(ecx)

    def read_counters(self, cpu: int, n_fixed: int, n_gp: int) -> tuple[int, list[int]]:
        """What the rdpmc shim returns: (TSC, [fixed 0..n_fixed-1, GP 0..n_gp-1]), read atomically."""
        values = self._state(cpu).read_counters(n_fixed, n_gp)
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
        cfg = self.config
        hybrid = cfg.e_cores > 0
        e_core = self.is_e_core(cpu)
        v6 = cfg.version >= 6
        if leaf == 0:
            vendor = struct.unpack("<3I", b"GenuineIntel")  # EBX, EDX, ECX order
            max_leaf = 0x23 if v6 else 0x1A if hybrid else 0xA
            return (max_leaf, vendor[0], vendor[2], vendor[1])
        if leaf == 1:
            signature = 0x5 << 16 | 0x6 << 8 | 0x5 << 4 | 0x4  # family 6 model 0x55 stepping 4
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
            eax = cfg.version | cfg.gp_counters << 8 | cfg.gp_width << 16 | 7 << 24
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
            a, b, c, d = struct.unpack("<4I", chunk)
            return (a, b, c, d)
        return (0, 0, 0, 0)
