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
  (see _SKX_EVENTS, _GRACEMONT_EVENTS).
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

import dataclasses
import errno
import operator
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from pmutop.core.clock import Clock, MonotonicClock
from pmutop.hw.msr import MsrAccessError, MsrDevice
from pmutop.pmu import registers
from pmutop.sim import power as sim_power
from pmutop.sim.workload import MIXES, TOPDOWN_FIELDS, Amounts, Counts, Workload, hash_unit

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
_RDPMC_TYPE_METRICS = 0x2000  # ECX = 1 << 29 (Linux INTEL_PMC_FIXED_RDPMC_METRICS)
_BRAND = b"pmutop simulated CPU"
_TD_ATTRS = tuple(f"td_{f}" for f in TOPDOWN_FIELDS)  # Amounts fields in PERF_METRICS byte order
_TD_FIRST = Amounts._fields.index(_TD_ATTRS[0])
assert Amounts._fields[_TD_FIRST : _TD_FIRST + len(_TD_ATTRS)] == _TD_ATTRS  # contiguous, in byte order
_FIXED_ENABLE = registers.FIXED_EN_OS | registers.FIXED_EN_USR


# -- event model: the model-specific encodings that count top-down truth ------------------------------------

_CountFn = Callable[[Amounts], int]
# An event that counts one workload quantity: attrgetter is a C call (these run for every enabled counter on every
# register access), same value as `lambda a: a.<name>`.
_field: Callable[[str], _CountFn] = operator.attrgetter

# Skylake server, the four-event formula (reference topdown.md section 2). Encodings from Intel's table
# /work/shared/perfmon/SKX/events/skylakex_core.json (perfmon SKX/events/skylakex_core.json):
# UOPS_ISSUED.ANY EventCode 0x0E UMask 0x01; UOPS_RETIRED.RETIRE_SLOTS 0xC2/0x02; IDQ_UOPS_NOT_DELIVERED.CORE
# 0x9C/0x01; INT_MISC.RECOVERY_CYCLES 0x0D/0x01 (INT_MISC.RECOVERY_CYCLES_ANY is the same with AnyThread=1,
# which this model ignores). CPU_CLK_UNHALTED.THREAD(_ANY) is fixed counter 1 (event 0x00 umask 0x02) or
# 0x3C/0x00 on a GP counter: cycles, already architectural.
_SKX_EVENTS: dict[tuple[int, int], _CountFn] = {
    (0x0E, 0x01): _field("uops_issued"),
    (0xC2, 0x02): _field("td_retiring"),
    (0x9C, 0x01): _field("td_fe_bound"),
    (0x0D, 0x01): _field("recovery_cycles"),
}
_CYCLE_EVENTS = frozenset([(0x0D, 0x01)])  # model events that count cycles (at most 1 per cycle)
# Gracemont (Alder Lake E-cores), slots = 5 x CPU_CLK_UNHALTED.CORE. Encodings from
# /work/shared/perfmon/ADL/events/alderlake_gracemont_core.json: TOPDOWN_FE_BOUND.ALL 0x71/0x00,
# TOPDOWN_BAD_SPECULATION.ALL 0x73/0x00, TOPDOWN_BE_BOUND.ALL 0x74/0x00, TOPDOWN_RETIRING.ALL 0xC2/0x00.
_GRACEMONT_EVENTS: dict[tuple[int, int], _CountFn] = {
    (0x71, 0x00): _field("td_fe_bound"),
    (0x73, 0x00): _field("td_bad_spec"),
    (0x74, 0x00): _field("td_be_bound"),
    (0xC2, 0x00): _field("td_retiring"),
}


@dataclass(frozen=True)
class _CoreShape:
    """One core type of a simulated model: its PMU and pipeline."""

    gp: int
    fixed: int
    width: int  # issue slots per cycle (TOPDOWN.SLOTS per cycle)
    metrics: int  # PERF_METRICS fields: 0 = none, 4 = level 1, 8 = level 1 and 2 (Linux num_topdown_events)
    events: dict[tuple[int, int], _CountFn]


@dataclass(frozen=True)
class _ModelShape:
    cpuid_model: int  # family 6 display model (Linux intel-family.h)
    stepping: int
    version: int
    p: _CoreShape
    e: _CoreShape
    hybrid: bool  # e_cores defaults to half the CPUs
    mix: str  # the workload mix (pmutop.sim.workload.MIXES)


# E-cores are Gracemont-like in every shape: 5 wide (topdown.md section 3), no PERF_METRICS (Linux
# adl_update_topdown_event counts nothing on non-big cores). Their counter numbers follow the P-cores' unless
# the model is hybrid (Gracemont: 6 GP, fixed 0-2).
_GRACEMONT = _CoreShape(gp=6, fixed=3, width=5, metrics=0, events=_GRACEMONT_EVENTS)
MODELS: dict[str, _ModelShape] = {
    # "skx" is the simulator as it always was (PMU shape and workload), now 4 wide like Skylake.
    "skx": _ModelShape(0x55, 4, 4, _CoreShape(4, 3, 4, 0, _SKX_EVENTS), _GRACEMONT, False, "classic"),
    # Linux intel_pmu_init: Ice Lake num_topdown_events = 4; Sapphire Rapids and Alder Lake = 8.
    "icx": _ModelShape(0x6A, 6, 5, _CoreShape(8, 4, 5, 4, {}), _GRACEMONT, False, "tma"),
    "spr": _ModelShape(0x8F, 8, 5, _CoreShape(8, 4, 6, 8, {}), _GRACEMONT, False, "tma"),
    "adl": _ModelShape(0x97, 2, 5, _CoreShape(8, 4, 6, 8, {}), _GRACEMONT, True, "tma"),
}


@dataclass(frozen=True)
class SimConfig:
    """The simulated machine. Fields left None take the model's value (`MODELS`)."""

    cpus: int = 8
    version: int | None = None  # 2..6 supported
    gp_counters: int | None = None  # 1..8, or 1..32 from v6 (what the version's register map can address)
    fixed_counters: int | None = None  # 0..4
    gp_width: int = 48
    fixed_width: int = 48
    tsc_hz: int = 2_400_000_000
    seed: int = 1
    e_cores: int | None = None  # the last e_cores CPUs are hybrid E-cores (model default: half on "adl", else 0)
    full_width_writes: bool = True  # IA32_PERF_CAPABILITIES[13]
    rdpmc_enabled: bool = True  # models CR4.PCE: when False every rdpmc faults
    model: str = "skx"  # one of MODELS
    mix: str | None = None  # workload mix: "classic" or "tma" (adds branchy and frontend-bound phases)
    # The fields given explicitly (they apply to E-cores too); the others took the model's values.
    explicit: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = MODELS.get(self.model)
        if shape is None:
            raise ValueError(f"bad SimConfig: model must be one of {', '.join(MODELS)}")
        defaults = {
            "version": shape.version,
            "gp_counters": shape.p.gp,
            "fixed_counters": shape.p.fixed,
            "e_cores": self.cpus // 2 if shape.hybrid else 0,
            "mix": shape.mix,
        }
        object.__setattr__(self, "explicit", frozenset(k for k in defaults if getattr(self, k) is not None))
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        assert self.version is not None and self.e_cores is not None
        max_gp = registers.register_map(self.version).max_gp if 2 <= self.version <= 6 else 0
        checks = [
            (self.cpus >= 1, "cpus must be >= 1"),
            (2 <= self.version <= 6, "version must be 2..6"),
            (all(1 <= s.gp <= max_gp for s in self.core_shapes()), f"gp_counters must be 1..{max_gp}"),
            (
                all(0 <= s.fixed <= registers.MAX_FIXED_COUNTERS for s in self.core_shapes()),
                "fixed_counters must be 0..4",
            ),
            (8 <= self.gp_width <= 64, "gp_width must be 8..64"),
            (8 <= self.fixed_width <= 64, "fixed_width must be 8..64"),
            (self.tsc_hz >= _BUS_HZ // 10, "tsc_hz too small"),
            (0 <= self.e_cores <= self.cpus, "e_cores must be 0..cpus"),
            (self.mix in MIXES, f"mix must be one of {', '.join(MIXES)}"),
        ]
        for ok, why in checks:
            if not ok:
                raise ValueError(f"bad SimConfig: {why}")

    @property
    def shape(self) -> _ModelShape:
        return MODELS[self.model]

    def core_shapes(self) -> tuple[_CoreShape, _CoreShape]:
        """(P-core, E-core) as simulated. P-cores take gp_counters/fixed_counters; E-cores too, except on a
        hybrid model where those were not given (then Gracemont's)."""
        shape = self.shape
        assert self.gp_counters is not None and self.fixed_counters is not None
        gp, fixed = self.gp_counters, self.fixed_counters
        e_gp = shape.e.gp if shape.hybrid and "gp_counters" not in self.explicit else gp
        e_fixed = shape.e.fixed if shape.hybrid and "fixed_counters" not in self.explicit else fixed

        def core(base: _CoreShape, n_gp: int, n_fixed: int) -> _CoreShape:
            # PERF_METRICS is derived from fixed counter 3: without it there is none.
            return _CoreShape(n_gp, n_fixed, base.width, base.metrics if n_fixed >= 4 else 0, base.events)

        return core(shape.p, gp, fixed), core(shape.e, e_gp, e_fixed)


class SimRdpmcFault(Exception):
    """rdpmc raised #GP (the real instruction would kill the process with SIGSEGV)."""


# -- event model ----------------------------------------------------------------------------------------

# Architectural events (SDM table of CPUID.0AH:EBX events); 0x3C/0x01 depends on tsc_hz, see _event_fn.
_ARCH_EVENTS: dict[tuple[int, int], _CountFn] = {
    (0x3C, 0x00): _field("cycles"),
    (0xC0, 0x00): _field("instructions"),
    (0x2E, 0x4F): _field("llc_references"),
    (0x2E, 0x41): _field("llc_misses"),
    (0xC4, 0x00): _field("branches"),
    (0xC5, 0x00): _field("branch_misses"),
    (0xA4, 0x01): _field("slots"),
}


def _fraction(count: Callable[[Amounts], int], ppm: int) -> _CountFn:
    return lambda a: count(a) * ppm // _PPM


def _event_fn(evtsel: int, tsc_hz: int, model_events: dict[tuple[int, int], _CountFn] | None = None) -> _CountFn:
    """Cumulative count of the event an EVTSEL selects, as a monotonic function of workload amounts.
    `model_events`: the core's own encodings (top-down events) before the architectural ones.

    Deltas are taken as f(new) - f(old), so floored fractions never drift or go negative.
    """
    event = evtsel & registers.EVTSEL_EVENT_MASK
    umask = (evtsel >> registers.EVTSEL_UMASK_SHIFT) & 0xFF
    cmask = (evtsel >> registers.EVTSEL_CMASK_SHIFT) & 0xFF
    edge = bool(evtsel & registers.EVTSEL_EDGE)
    inv = bool(evtsel & registers.EVTSEL_INV)
    if event == 0:
        return lambda a: 0
    if cmask == 1 and not (edge or inv) and (event, umask) in _CYCLE_EVENTS and model_events:
        # An event counting cycles already counts 1 per cycle: CMASK=1 changes nothing (Linux programs
        # topdown-recovery-bubbles on Skylake as event=0xd,umask=0x1,cmask=1).
        return model_events.get((event, umask)) or (lambda a: 0)
    if cmask or edge:
        p = (0.05 + 0.9 * hash_unit(event, umask, 0x636D61736B)) / max(cmask, 1)
        if inv and cmask:
            p = 1.0 - p
        if edge:
            p = p * (1.0 - p) / 8.0
        return _fraction(_field("cycles"), int(p * _PPM))
    if (event, umask) == (0x3C, 0x01):
        return lambda a: a.ref_cycles * _BUS_HZ // tsc_hz
    fn = (model_events or {}).get((event, umask)) or _ARCH_EVENTS.get((event, umask))
    if fn is not None:
        return fn
    # Log-uniform between 0.001% and 30% of instructions: most real events are rare per instruction.
    ppm = int(10 * 30_000 ** hash_unit(event, umask, 0x726177))
    return _fraction(_field("instructions"), ppm)


_FIXED_FNS: tuple[_CountFn, ...] = (
    _field("instructions"),
    _field("cycles"),
    _field("ref_cycles"),  # TSC rate while unhalted
    _field("slots"),
)


@dataclass
class _Counter:
    fn: _CountFn
    user: bool
    kernel: bool
    pmi: bool
    width: int
    status_bit: int
    regs: list[int]  # the CPU's gp or fixed counter values (never replaced, only written by index)
    index: int

    def read(self) -> int:
        return self.regs[self.index]

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

    def __init__(self, machine: SimMachine, cpu: int, workload: Workload, core: _CoreShape) -> None:
        # This CPU's config: the machine's with its core type's counter numbers (hybrid parts differ).
        cfg = dataclasses.replace(machine.config, gp_counters=core.gp, fixed_counters=core.fixed)
        self.machine = machine
        self.cfg = cfg
        self.core = core
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
        self.thermal: tuple[int, float] = (-1, 0.0)  # (time step, temperature): see sim/power.py
        self.thermal_points: tuple[object, dict[int, tuple[int, int, int]]] = (None, {})  # sim/power.py
        self._cum = workload.cumulative(0)
        self._enabled: list[_Counter] | None = None  # cache, dropped by every register write
        fixed = range(cfg.fixed_counters)
        self.metrics_fields = core.metrics
        self.global_ctrl_valid = registers.global_ctrl_mask(range(cfg.gp_counters), fixed)
        self.status_valid = registers.status_reset_writable_mask(
            cfg.version, cfg.gp_counters, fixed, perf_metrics=bool(self.metrics_fields)
        )
        if self.metrics_fields:
            self.global_ctrl_valid |= registers.GLOBAL_CTRL_EN_PERF_METRICS
        # PERF_METRICS: slots per category (x 255, so a loaded fraction of fixed counter 3 stays an integer)
        # since it was last written, and the value written while nothing has been counted since.
        self._metrics_acc = [0] * 8
        self._metrics_loaded: int | None = None
        self._metrics_src: _Counter | None = None  # fixed counter 3 while it feeds PERF_METRICS
        self.gp_mask = (1 << cfg.gp_width) - 1
        self.fixed_mask = (1 << cfg.fixed_width) - 1
        self.regs = registers.register_map(cfg.version)
        self._registers = _register_table(cfg)
        # The other registers a read answers, built once (not per read).
        self._readers: dict[int, Callable[[], int]] = {
            registers.IA32_TIME_STAMP_COUNTER: self.tsc,
            registers.IA32_PERF_CAPABILITIES: lambda: (
                (registers.PERF_CAP_FW_WRITE if cfg.full_width_writes else 0)
                | (registers.PERF_CAP_PERF_METRICS if self.metrics_fields else 0)
            ),
            registers.IA32_FIXED_CTR_CTRL: lambda: self.fixed_ctrl,
            registers.IA32_PERF_GLOBAL_STATUS: lambda: self.status,
            registers.IA32_PERF_GLOBAL_CTRL: lambda: self.global_ctrl,
            registers.IA32_PERF_GLOBAL_STATUS_RESET: lambda: 0,
        }
        if cfg.version >= 4:
            self._readers[registers.IA32_PERF_GLOBAL_STATUS_SET] = lambda: 0  # write-only
            self._readers[registers.IA32_PERF_GLOBAL_INUSE] = self._inuse
        if self.metrics_fields:
            self._readers[registers.MSR_PERF_METRICS] = self._perf_metrics
        # Registers whose value does not move with time: reading them needs no advance. Counting is additive
        # (a counter adds fn(new) - fn(old)), so fewer, longer advances give exactly the same counts.
        self._static = frozenset(
            [a for a, (kind, _) in self._registers.items() if kind == _EVTSEL]
            + [
                a
                for a in self._readers
                if a
                not in (
                    registers.IA32_TIME_STAMP_COUNTER,
                    registers.IA32_PERF_GLOBAL_STATUS,
                    registers.MSR_PERF_METRICS,
                )
            ]
        )

    # -- counting -----------------------------------------------------------------------------------

    def _frozen(self) -> bool:
        return self.cfg.version >= 4 and bool(self.status & registers.STATUS_CTR_FRZ)

    def _active(self) -> list[_Counter]:
        """Counters that count right now (per-counter enable AND global enable AND not frozen)."""
        if self._frozen():
            return []
        if self._enabled is None:
            self._enabled = self._enabled_counters()
        return self._enabled

    def _enabled_counters(self) -> list[_Counter]:
        out: list[_Counter] = []
        self._metrics_src = None
        freeze_on_pmi = self.cfg.version >= 4
        for i, sel in enumerate(self.evtsel):
            if (
                sel & registers.EVTSEL_EN
                and self.global_ctrl & registers.gp_bit(i)
                and sel & (registers.EVTSEL_USR | registers.EVTSEL_OS)
            ):
                out.append(
                    _Counter(
                        _event_fn(sel, self.cfg.tsc_hz, self.core.events),
                        bool(sel & registers.EVTSEL_USR),
                        bool(sel & registers.EVTSEL_OS),
                        freeze_on_pmi and bool(sel & registers.EVTSEL_INT),
                        self.cfg.gp_width,
                        registers.gp_bit(i),
                        self.gp,
                        i,
                    )
                )
        for i in range(self.cfg.fixed_counters):
            nib = registers.fixed_ctrl_nibble(self.fixed_ctrl, i)
            if nib & _FIXED_ENABLE and self.global_ctrl & registers.fixed_bit(i):
                out.append(
                    _Counter(
                        _FIXED_FNS[i],
                        bool(nib & registers.FIXED_EN_USR),
                        bool(nib & registers.FIXED_EN_OS),
                        freeze_on_pmi and bool(nib & registers.FIXED_PMI),
                        self.cfg.fixed_width,
                        registers.fixed_bit(i),
                        self.fixed,
                        i,
                    )
                )
                if i == 3 and self.metrics_fields and self.global_ctrl & registers.GLOBAL_CTRL_EN_PERF_METRICS:
                    self._metrics_src = out[-1]
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
        src = self._metrics_src
        old = self._cum
        # _Counter.delta inlined: this runs for every enabled counter on every register access.
        old_user, old_kernel, new_user, new_kernel = old.user, old.kernel, new.user, new.kernel
        for c in active:
            fn = c.fn
            d = fn(new_user) - fn(old_user) if c.user else 0
            if c.kernel:
                d += fn(new_kernel) - fn(old_kernel)
            value = c.regs[c.index] + d
            if value >> c.width:
                self.status |= c.status_bit
                if c.pmi:
                    self.status |= registers.STATUS_CTR_FRZ
                if c is src:
                    self.status |= registers.STATUS_PERF_METRICS_OVF
                value &= (1 << c.width) - 1
            c.regs[c.index] = value
            if c is src:
                self._count_metrics(c, new)
        self._cum = new

    def _count_metrics(self, c: _Counter, new: Counts) -> None:
        """PERF_METRICS follows fixed counter 3: the same slots, split by category (same USR/OS)."""
        old = self._cum
        added = False
        fields = slice(_TD_FIRST, _TD_FIRST + self.metrics_fields)  # td_* fields are adjacent in Amounts
        acc = self._metrics_acc
        for on, a, b in ((c.user, old.user, new.user), (c.kernel, old.kernel, new.kernel)):
            if not on:
                continue
            for k, (x, y) in enumerate(zip(a[fields], b[fields], strict=True)):
                if y != x:
                    acc[k] += 255 * (y - x)
                    added = True
        if added:
            self._metrics_loaded = None

    def _perf_metrics(self) -> int:
        if self._metrics_loaded is not None:
            return self._metrics_loaded
        acc = self._metrics_acc
        total = sum(acc[:4])
        if not total:
            return 0
        value = 0
        for k in range(self.metrics_fields):
            value |= min(255, (510 * acc[k] + total) // (2 * total)) << 8 * k  # round half up
        return value

    def _write_perf_metrics(self, value: int) -> bool:
        if value >> 8 * self.metrics_fields:
            return False  # reserved bytes (level 2 on a level-1 part)
        if value == 0:
            self._metrics_acc = [0] * 8
            self._metrics_loaded = None
            return True
        # A loaded value is the fractions of the slots fixed counter 3 holds now (Linux restores a context by
        # writing fixed counter 3, then PERF_METRICS).
        weight = max(self.fixed[3], 1)
        self._metrics_acc = [(value >> 8 * k & 0xFF) * weight for k in range(8)]
        self._metrics_loaded = value
        return True

    # -- registers ----------------------------------------------------------------------------------

    def _inuse(self) -> int:
        value = 0
        pmi = False
        for i, sel in enumerate(self.evtsel):
            if sel & registers.EVTSEL_EVENT_MASK:
                value |= registers.gp_bit(i)
            pmi |= bool(sel & registers.EVTSEL_INT)
        for i in range(self.cfg.fixed_counters):
            nib = registers.fixed_ctrl_nibble(self.fixed_ctrl, i)
            if nib & _FIXED_ENABLE:
                value |= registers.fixed_bit(i)
            pmi |= bool(nib & registers.FIXED_PMI)
        return value | (registers.INUSE_PMI if pmi else 0)

    def tsc(self) -> int:
        return self.workload.ticks(self._t)

    @property
    def advanced(self) -> bool:
        """Whether anything has read or written this CPU's counting registers yet."""
        return self._t > 0

    @property
    def cum(self) -> Counts:
        """What this CPU has run up to its latest register access."""
        return self._cum

    def read(self, address: int) -> int:
        with self.lock:
            if address not in self._static:
                self._advance()
            value = self._read(address)
        if value is None:
            raise MsrAccessError(self.cpu, address, "read", errno.EIO)
        return value

    def _read(self, address: int) -> int | None:
        reg = self._registers.get(address)
        if reg is not None:
            kind, i = reg
            if kind == _EVTSEL:
                return self.evtsel[i]
            return self.fixed[i] if kind == _FIXED else self.gp[i]
        reader = self._readers.get(address)
        return sim_power.read(self, address) if reader is None else reader()

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
            if value >> 32 or (cfg.version >= 5 and value & registers.EVTSEL_ANY):
                return False
            self.evtsel[i] = value
            return True
        if kind == _PMC_V6 and cfg.full_width_writes:
            kind = _PMC_FULL
        if kind in (_PMC_SIGN_EXTEND, _PMC_V6):
            self.gp[i] = registers.sign_extend_legacy_pmc_write(value, cfg.gp_width)
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
        if address == registers.IA32_FIXED_CTR_CTRL:
            any_bits = sum(registers.FIXED_ANY << 4 * i for i in range(cfg.fixed_counters))
            if value >> 4 * cfg.fixed_counters or (cfg.version >= 5 and value & any_bits):
                return False
            self.fixed_ctrl = value
            return True
        if address == registers.IA32_PERF_GLOBAL_CTRL:
            if value & ~self.global_ctrl_valid:
                return False
            self.global_ctrl = value
            return True
        if address == registers.IA32_PERF_GLOBAL_STATUS_RESET:
            if value & ~self.status_valid:
                return False
            self.status &= ~value  # write-1-to-clear
            return True
        if address == registers.MSR_PERF_METRICS and self.metrics_fields:
            return self._write_perf_metrics(value)
        if address == registers.IA32_PERF_GLOBAL_STATUS_SET and cfg.version >= 4:
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
            regs[registers.IA32_FIXED_CTR_CTRL] = self.fixed_ctrl
            regs[registers.IA32_PERF_GLOBAL_CTRL] = self.global_ctrl
            regs[registers.IA32_PERF_GLOBAL_STATUS] = self.status
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
        if kind == _RDPMC_TYPE_METRICS and index == 0 and self.metrics_fields:
            return self._perf_metrics()
        raise SimRdpmcFault(f"cpu {self.cpu}: rdpmc ecx={ecx:#x} is not a counter")

    def rdpmc(self, ecx: int) -> int:
        if not 0 <= ecx < 1 << 32:
            raise SimRdpmcFault(f"cpu {self.cpu}: rdpmc ecx={ecx:#x} out of range")
        with self.lock:
            self._advance()
            return self._rdpmc(ecx)

    def read_counters(self, n_fixed: int, n_gp: int, metrics: bool = False) -> tuple[int, list[int]]:
        with self.lock:
            self._advance()
            values = [self._rdpmc(_RDPMC_TYPE_FIXED << 16 | i) for i in range(n_fixed)]
            values += [self._rdpmc(_RDPMC_TYPE_GP << 16 | i) for i in range(n_gp)]
            if metrics:
                values.append(self._rdpmc(_RDPMC_TYPE_METRICS << 16))
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
    maps = [registers.LEGACY_REGISTERS] + ([registers.V6_REGISTERS] if cfg.version >= 6 else [])
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
            self._cpus.append(_SimCpu(self, cpu, workload, core))
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

    def states(self) -> list[_SimCpu]:
        return self._cpus

    def replace_workload(self, cpu: int, workload: Workload) -> None:
        """Feed `cpu` from `workload` (anything with Workload's ticks/cumulative/e_core, e.g. the self-test's
        scripted workloads) from now on. Counters keep their values; only what happens after now changes, so
        the new workload must give its counts at the present as the baseline."""
        state = self._state(cpu)
        with state.lock:
            state._advance()
            state.workload = workload
            state._cum = workload.cumulative(state._t)

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
            a, b, c, d = struct.unpack("<4I", chunk)
            return (a, b, c, d)
        return (0, 0, 0, 0)
