"""A deterministic synthetic per-CPU workload for the simulated PMU.

Time is cut into segments of 1/10 s of TSC ticks. Every segment has constant rates (utilisation,
frequency, IPC, cache and branch behaviour, kernel share) drawn from a phase (idle, busy compute,
memory-bound, mixed/bursty; with the "tma" mix also branchy and frontend-bound) plus per-segment jitter.
Phases last 2-20 s and come from an RNG seeded by (seed, cpu); the jitter is a hash of (seed, cpu,
segment). So the cumulative amount of every quantity at time t is a pure function of (seed, cpu, t),
whenever and however often it is read. Within a segment counts grow linearly (floored to integers).

Top-down truth: every segment also splits its issue slots (width x cycles) into the four level-1
categories (retiring, bad speculation, frontend bound, backend bound; they sum to the slots exactly at
segment boundaries) and one level-2 child of each (heavy operations, branch mispredicts, fetch latency,
memory bound), plus the uops issued and recovery cycles that make the pre-Ice Lake four-event formula
come out at the same truth (reference topdown.md section 2). Retiring follows the phase's IPC; the rest
is split by a per-regime profile. These shares come from hashes only (never the phase RNG), so adding
them left every other quantity of the "classic" mix unchanged.
"""

from __future__ import annotations

import bisect
import operator
import random
import threading
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from pmutop.sim.regimes import MIXED_WEIGHTS, MIXES, PHASE_WEIGHTS, RANGES, TMA, PhaseKind, Rates

_M64 = (1 << 64) - 1
SEGMENTS_PER_SECOND = 10
_MIXED_BURST_SEGMENTS = 5  # a mixed phase changes regime every 0.5 s
_MIN_PHASE_SEGMENTS = 2 * SEGMENTS_PER_SECOND
_MAX_PHASE_SEGMENTS = 20 * SEGMENTS_PER_SECOND
_PREFIX_PHASES = 4  # phases whose prefix sums are kept
# Phases kept for reads back in time (at least 2 s each: over a minute). An older read rebuilds the history
# from the seed, so a run of any length holds a bounded model; pmutop itself reads at most a second back.
_KEPT_PHASES = 32
_JITTER = 0.08  # +-8% per segment, clamped to the regime's range
_E_CORE_GHZ = 0.65
_E_CORE_IPC = 0.6
_P_CORE_SLOTS_PER_CYCLE = 6  # default pipeline widths; the simulated machine passes its model's
_E_CORE_SLOTS_PER_CYCLE = 4
# Level-1 then level-2 top-down categories, in PERF_METRICS byte order (reference pmu.md section 2.9).
TOPDOWN_FIELDS = (
    "retiring",
    "bad_spec",
    "fe_bound",
    "be_bound",
    "heavy_ops",
    "br_mispredict",
    "fetch_lat",
    "mem_bound",
)


def mix64(x: int) -> int:
    """splitmix64 finaliser: a cheap, well-spread 64-bit hash."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def hash64(*keys: int) -> int:
    """A deterministic 64-bit hash of integer keys."""
    x = 0
    for k in keys:
        x = _mix64_after(x, k)
    return x


def _mix64_after(x: int, k: int) -> int:
    """hash64(*keys, k) given x = hash64(*keys): the hash is a chain, so a fixed prefix of keys (seed, cpu) is
    hashed once per workload and each segment's hash costs one mix."""
    return mix64(x ^ (k & _M64))


def hash_unit(*keys: int) -> float:
    """A deterministic number in [0, 1) from integer keys."""
    return (hash64(*keys) >> 11) / float(1 << 53)


def _hash_units8(*keys: int) -> list[float]:
    """Eight numbers in (0, 1) from one hash (1/256 resolution is plenty for jitter)."""
    h = hash64(*keys)
    return [(((h >> (8 * i)) & 0xFF) + 0.5) / 256.0 for i in range(8)]


_MIXED = PhaseKind.MIXED  # a module global: cheaper than the enum class attribute in per-segment code
_TMA_PHASE_JITTER = 0.15  # per phase (per burst in a mixed phase)
_TMA_KEY = 0x746D61  # hash keys of the top-down shares: "tma"
_TMA_SEG_KEY = 0x746D6173
# A jitter unit is one hash byte b, u = (b + 0.5) / 256: the factor 1 + J(2u - 1) takes 256 values, so it is
# looked up (the same expression, evaluated once per byte value: bit-identical floats).
_SEG_FACTOR = tuple(1.0 + _JITTER * (2.0 * ((b + 0.5) / 256.0) - 1.0) for b in range(256))
_PHASE_FACTOR = tuple(1.0 + _TMA_PHASE_JITTER * (2.0 * ((b + 0.5) / 256.0) - 1.0) for b in range(256))


class TmaShares(NamedTuple):
    """Fractions of the slots in each top-down category (level 2 children are parts of their parent)."""

    retiring: float
    bad_spec: float
    fe_bound: float
    be_bound: float
    heavy_ops: float
    br_mispredict: float
    fetch_lat: float
    mem_bound: float


@dataclass(frozen=True)
class TopdownSlots:
    """Slots and slots per top-down category over a span of time (exact integers from the workload)."""

    slots: int
    retiring: int
    bad_spec: int
    fe_bound: int
    be_bound: int
    heavy_ops: int
    br_mispredict: int
    fetch_lat: int
    mem_bound: int

    def fractions(self) -> dict[str, float]:
        """Each category's share of the slots (what PERF_METRICS approximates in 8-bit fields)."""
        return {f: getattr(self, f) / self.slots if self.slots else 0.0 for f in TOPDOWN_FIELDS}


class Amounts(NamedTuple):
    """Cumulative event counts in one privilege mode."""

    cycles: int  # unhalted core cycles
    instructions: int
    ref_cycles: int  # TSC-rate ticks while unhalted
    llc_references: int
    llc_misses: int
    branches: int
    branch_misses: int
    slots: int  # topdown slots = pipeline width x cycles
    # Slots per top-down category (level 1 sums to `slots` at segment boundaries; level 2 within its parent).
    td_retiring: int = 0
    td_bad_spec: int = 0
    td_fe_bound: int = 0
    td_be_bound: int = 0
    td_heavy_ops: int = 0
    td_br_mispredict: int = 0
    td_fetch_lat: int = 0
    td_mem_bound: int = 0
    # For the four-event formula: issued - retired + width x recovery = bad speculation slots.
    uops_issued: int = 0
    recovery_cycles: int = 0


@dataclass(frozen=True)
class Counts:
    tsc: int  # TSC ticks elapsed since t=0
    user: Amounts
    kernel: Amounts

    # Computed on first use and kept (readers such as the thermal model ask several times). cached_property
    # stores into the instance __dict__ directly, so it works on this frozen (not slotted) dataclass; two
    # threads racing on the first access compute the same value.
    @cached_property
    def total(self) -> Amounts:
        return Amounts._make(map(operator.add, self.user, self.kernel))


# Per segment we store _N user then _N kernel integers: the 7 base quantities, then the 10 top-down ones
# (slots are derived from cycles).
_BASE = 7
_N = _BASE + 10
_Vec = tuple[int, ...]
_ZERO: _Vec = (0,) * (2 * _N)


@dataclass
class _Phase:
    kind: PhaseKind
    start: int  # first segment
    length: int  # in segments
    base: tuple[float, ...]  # field values (for steady phases)
    start_cum: _Vec  # cumulative amounts before the first segment


class Workload:
    """Cumulative counts for one CPU as a pure function of (seed, cpu, t).

    Cheap for monotonically increasing t (prefix sums of the current phase are kept), correct for any
    t. Thread-safe.
    """

    def __init__(
        self,
        seed: int,
        cpu: int,
        tsc_hz: int,
        e_core: bool = False,
        *,
        width: int | None = None,
        mix: str = "classic",
    ) -> None:
        """`width`: issue slots per cycle (default 6 on P-cores, 4 on E-cores); `mix`: "classic" (idle, busy,
        memory, mixed) or "tma" (those plus branchy and frontend-bound phases)."""
        if tsc_hz < SEGMENTS_PER_SECOND:
            raise ValueError(f"tsc_hz too small: {tsc_hz}")
        if mix not in MIXES:
            raise ValueError(f"unknown workload mix {mix!r} (one of {', '.join(MIXES)})")
        if width is not None and not 1 <= width <= 16:
            raise ValueError(f"width must be 1..16: {width}")
        self.seed = seed
        self.cpu = cpu
        self.tsc_hz = tsc_hz
        self.e_core = e_core
        self.mix = mix
        self._weights = PHASE_WEIGHTS[mix]
        self._mixed = MIXED_WEIGHTS[mix]
        self.seg_ticks = tsc_hz // SEGMENTS_PER_SECOND
        if width is None:
            width = _E_CORE_SLOTS_PER_CYCLE if e_core else _P_CORE_SLOTS_PER_CYCLE
        self.slots_per_cycle = width
        self._lock = threading.Lock()
        self._rng_seed = mix64(mix64(seed & _M64) ^ cpu)
        self._rng = random.Random(self._rng_seed)
        self._phases: list[_Phase] = []  # the last phases (up to 2 x _KEPT_PHASES), oldest first
        self._starts: list[int] = []
        self._first = 0  # phase number of _phases[0]: phase numbers count from the start of time
        # Prefix sums of the last few phases: _pf[pi][k] = cumulative before segment (phase.start + k). More
        # than one, because the thermal model also reads a second back, often in the phase before.
        self._pf: dict[int, list[_Vec]] = {}
        self._last: tuple[int, Counts] | None = None  # the last cumulative(): readers ask for one t repeatedly
        # The last per-burst and per-phase hashes (each holds one entry: segments come in time order).
        self._burst_cache: dict[int, tuple[PhaseKind, tuple[float, ...]]] = {}  # burst -> (regime, base)
        self._tma_cache: dict[int, tuple[PhaseKind, list[float]]] = {}  # key -> (regime, varied profile)
        self._key_hash = hash64(seed, cpu)  # every per-segment hash starts with (seed, cpu)
        self._append_phase(_ZERO)

    # -- public API -------------------------------------------------------------------------------

    def ticks(self, t_ns: int) -> int:
        """TSC ticks elapsed at t (the same conversion the simulated TSC uses)."""
        return t_ns * self.tsc_hz // 1_000_000_000

    def cumulative(self, t_ns: int) -> Counts:
        if t_ns < 0:
            raise ValueError(f"negative time: {t_ns}")
        last = self._last
        if last is not None and last[0] == t_ns:
            return last[1]
        counts = self.cumulative_ticks(self.ticks(t_ns))
        self._last = (t_ns, counts)
        return counts

    def cumulative_ticks(self, ticks: int) -> Counts:
        """cumulative() at the instant the simulated TSC reads `ticks` (the amounts depend on the ticks only): the
        process table (pmutop.sim.processes) cuts each core's time at TSC values."""
        seg, off = divmod(ticks, self.seg_ticks)
        with self._lock:
            pi = self._phase_index(seg)
            phase = self._phases[pi - self._first]
            k = seg - phase.start
            before = self._prefix(pi, k)
            # The prefix sums hold each segment's amounts, so nothing is computed twice.
            after = self._prefix(pi, k + 1) if off else before
        if off:  # linear within the segment, floored
            st = self.seg_ticks
            vec: tuple[int, ...] | list[int] = [b + (a - b) * off // st for b, a in zip(before, after, strict=True)]
        else:
            vec = before
        return Counts(ticks, self._amounts(vec[:_N]), self._amounts(vec[_N:]))

    def phase_span(self, seg: int) -> tuple[PhaseKind, int, int]:
        """(kind, first segment, length in segments) of the phase holding segment `seg`."""
        with self._lock:
            phase = self._phases[self._phase_index(seg) - self._first]
            return phase.kind, phase.start, phase.length

    def rates_at(self, t_ns: int) -> Rates:
        seg = self.ticks(max(t_ns, 0)) // self.seg_ticks
        with self._lock:
            phase = self._phases[self._phase_index(seg) - self._first]
            return self._rates(phase, seg)

    def tma_at(self, t_ns: int) -> TmaShares:
        """The top-down shares of the segment running at t (before flooring to whole slots)."""
        seg = self.ticks(max(t_ns, 0)) // self.seg_ticks
        with self._lock:
            phase = self._phases[self._phase_index(seg) - self._first]
            return self._tma(phase, seg, self._rates(phase, seg))

    def topdown(self, t0_ns: int, t1_ns: int, part: str = "total") -> TopdownSlots:
        """Slots and slots per top-down category counted in [t0, t1] ("total", "user" or "kernel"): the
        exact truth a PMU reading over that span should reproduce."""
        start, end = self.cumulative(t0_ns), self.cumulative(t1_ns)
        before, after = (start.total, end.total) if part == "total" else (getattr(start, part), getattr(end, part))
        return TopdownSlots(
            after.slots - before.slots,
            *(getattr(after, f"td_{f}") - getattr(before, f"td_{f}") for f in TOPDOWN_FIELDS),
        )

    # -- phases -------------------------------------------------------------------------------------

    def _append_phase(self, start_cum: _Vec) -> None:
        rng = self._rng
        prev = self._phases[-1].kind if self._phases else None
        kinds = [k for k in self._weights if k != prev]  # always change behaviour at a boundary
        kind = rng.choices(kinds, weights=[self._weights[k] for k in kinds])[0]
        length = rng.randint(_MIN_PHASE_SEGMENTS, _MAX_PHASE_SEGMENTS)
        base = () if kind is PhaseKind.MIXED else tuple(rng.uniform(lo, hi) for lo, hi in RANGES[kind])
        start = self._phases[-1].start + self._phases[-1].length if self._phases else 0
        self._phases.append(_Phase(kind, start, length, base, start_cum))
        self._starts.append(start)
        if len(self._phases) > 2 * _KEPT_PHASES:  # forget the oldest half (in one go: amortised)
            drop = len(self._phases) - _KEPT_PHASES
            del self._phases[:drop], self._starts[:drop]
            self._first += drop

    def _restart(self) -> None:
        """Back to the start of time (a read before the phases kept): the same seed gives the same phases."""
        self._rng = random.Random(self._rng_seed)
        self._phases, self._starts, self._first, self._pf = [], [], 0, {}
        self._append_phase(_ZERO)

    def _phase_index(self, seg: int) -> int:
        """The number of the phase holding segment `seg`, making (or remaking) it if needed."""
        if seg < self._starts[0]:
            self._restart()
        while True:
            last = self._phases[-1]
            if seg < last.start + last.length:
                break
            self._append_phase(self._prefix(self._first + len(self._phases) - 1, last.length))
        return self._first + bisect.bisect_right(self._starts, seg) - 1

    def _prefix(self, pi: int, k: int) -> _Vec:
        """Cumulative amounts before segment k of phase number pi, extending the cached prefix sums."""
        phase = self._phases[pi - self._first]
        pf = self._pf.get(pi)
        if pf is None:
            if len(self._pf) >= _PREFIX_PHASES:
                del self._pf[min(self._pf)]
            pf = self._pf[pi] = [phase.start_cum]
        while len(pf) <= k:
            seg = self._segment(phase, phase.start + len(pf) - 1)
            pf.append(tuple(map(operator.add, pf[-1], seg)))  # same lengths (2 x _N): no strict zip needed
        return pf[k]

    # -- one segment ----------------------------------------------------------------------------------

    # The per-segment path below is the simulator's hot loop (every sampled CPU, every 100 ms of simulated
    # time): plain lists and locals, no per-segment objects; each step keeps the original float expression and
    # evaluation order, so every number is bit-identical to the straightforward formulas (see
    # tests/test_sim_speed_equivalence.py).

    def _rates(self, phase: _Phase, seg: int) -> Rates:
        regime, values, _ = self._values(phase, seg)
        return Rates(phase.kind, regime, *values)

    def _values(self, phase: _Phase, seg: int) -> tuple[PhaseKind, list[float], int]:
        """The regime, the Rates field values and the segment's hash (it seeds the top-down jitter too)."""
        if phase.kind is _MIXED:
            burst = seg // _MIXED_BURST_SEGMENTS
            cached = self._burst_cache.get(burst)
            if cached is None:
                # Per burst, not per segment: the same regime and base for every segment of the burst.
                u = hash_unit(self.seed, self.cpu, burst, 0x6D69786564)
                units = _hash_units8(self.seed, self.cpu, burst, 0x62617365)
                regime = PhaseKind.IDLE
                for kind, weight in self._mixed:
                    if u < weight:
                        regime = kind
                        break
                    u -= weight
                base = tuple(lo + (hi - lo) * x for (lo, hi), x in zip(RANGES[regime], units, strict=True))
                cached = (regime, base)
                self._burst_cache = {burst: cached}
            regime, base = cached
        else:
            regime = phase.kind
            base = phase.base
        h = _mix64_after(self._key_hash, seg)  # hash64(seed, cpu, seg)
        factor = _SEG_FACTOR
        values = []
        for (lo, hi), b, u in zip(RANGES[regime], base, h.to_bytes(8, "little"), strict=True):
            # min(hi, max(lo, x)) spelt as comparisons (the builtins' call overhead dominates here).
            x = b * factor[u]
            x = x if x > lo else lo
            values.append(x if x < hi else hi)
        if self.e_core:
            values[1] *= _E_CORE_GHZ
            values[2] *= _E_CORE_IPC
        return regime, values, h

    def _segment(self, phase: _Phase, seg: int) -> _Vec:
        """Integer user and kernel amounts over one whole segment."""
        regime, (util, ghz, ipc, mpki, miss_ratio, br_per_instr, br_miss_ratio, kernel_frac), h = self._values(
            phase, seg
        )
        ref = int(self.seg_ticks * util)  # util <= 1, so ref <= TSC ticks of the segment
        cycles = int(ref * ghz * 1e9 / self.tsc_hz)
        instr = int(cycles * ipc)
        llc_refs = int(instr * mpki / 1000.0 / miss_ratio)
        llc_misses = int(llc_refs * miss_ratio)
        branches = int(instr * br_per_instr)
        branch_misses = int(branches * br_miss_ratio)
        # Flooring the kernel share of a <= b keeps a <= b in both the kernel and the user part.
        k_cycles, k_instr, k_ref = int(cycles * kernel_frac), int(instr * kernel_frac), int(ref * kernel_frac)
        k_refs, k_misses = int(llc_refs * kernel_frac), int(llc_misses * kernel_frac)
        k_branches, k_br_misses = int(branches * kernel_frac), int(branch_misses * kernel_frac)
        tma = self._tma_values(phase, seg, regime, ipc, h)
        recovery = TMA[regime].recovery
        return (
            cycles - k_cycles,
            instr - k_instr,
            ref - k_ref,
            llc_refs - k_refs,
            llc_misses - k_misses,
            branches - k_branches,
            branch_misses - k_br_misses,
            *self._topdown_amounts(cycles - k_cycles, tma, recovery),
            k_cycles,
            k_instr,
            k_ref,
            k_refs,
            k_misses,
            k_branches,
            k_br_misses,
            *self._topdown_amounts(k_cycles, tma, recovery),
        )

    def _tma(self, phase: _Phase, seg: int, rates: Rates) -> TmaShares:
        """Top-down shares of one segment: the regime's profile, varied per phase (per burst in a mixed
        phase) and per segment. Hashes only: the phase RNG is never drawn from."""
        h = _mix64_after(self._key_hash, seg)
        return TmaShares(*self._tma_values(phase, seg, rates.regime, rates.ipc, h))

    def _tma_values(self, phase: _Phase, seg: int, regime: PhaseKind, ipc: float, seg_hash: int) -> list[float]:
        """_tma's eight shares as a list; `seg_hash` = hash64(seed, cpu, seg)."""
        key = seg // _MIXED_BURST_SEGMENTS if phase.kind is _MIXED else phase.start
        cached = self._tma_cache.get(key)
        if cached is None or cached[0] is not regime:  # once per phase (per burst in a mixed phase)
            # The profile times the per-phase factor, i.e. the first product of vary() below.
            per_phase = hash64(self.seed, self.cpu, key, _TMA_KEY).to_bytes(8, "little")
            varied = [x * _PHASE_FACTOR[u] for x, u in zip(TMA[regime][:8], per_phase, strict=True)]
            cached = (regime, varied)
            self._tma_cache = {key: cached}
        uops, bad_w, fe_w, be_w, heavy, br, fetch, mem = cached[1]
        # vary(x, i) = x * phase_factor[i] * seg_factor[i], evaluated left to right as before.
        f0, f1, f2, f3, f4, f5, f6, f7 = map(
            _SEG_FACTOR.__getitem__, _mix64_after(seg_hash, _TMA_SEG_KEY).to_bytes(8, "little")
        )
        retiring = ipc * (uops * f0) / self.slots_per_cycle
        retiring = retiring if retiring > 0.03 else 0.03  # min(0.92, max(0.03, x)) as comparisons
        retiring = retiring if retiring < 0.92 else 0.92
        w1, w2, w3 = bad_w * f1, fe_w * f2, be_w * f3
        rest = (1.0 - retiring) / sum((w1, w2, w3))
        bad, fe = w1 * rest, w2 * rest
        be = 1.0 - retiring - bad - fe
        # Each child share is min(1.0, vary(child)) of its parent.
        heavy, br, fetch, mem = heavy * f4, br * f5, fetch * f6, mem * f7
        return [
            retiring,
            bad,
            fe,
            be,
            retiring * (heavy if heavy < 1.0 else 1.0),
            bad * (br if br < 1.0 else 1.0),
            fe * (fetch if fetch < 1.0 else 1.0),
            be * (mem if mem < 1.0 else 1.0),
        ]

    def _topdown_amounts(self, cycles: int, tma: list[float], recovery_share: float) -> _Vec:
        """Integer slots per category for one privilege mode's cycles of a segment; level 1 sums to the
        slots exactly, each child is floored from its parent."""
        t_ret, t_bad, t_fe, t_be, t_heavy, t_br, t_fetch, t_mem = tma
        width = self.slots_per_cycle
        slots = cycles * width
        retiring, bad, fe = int(slots * t_ret), int(slots * t_bad), int(slots * t_fe)
        be = slots - retiring - bad - fe
        heavy = int(retiring * t_heavy / t_ret) if t_ret else 0
        br = int(bad * t_br / t_bad) if t_bad else 0
        fetch = int(fe * t_fetch / t_fe) if t_fe else 0
        mem = int(be * t_mem / t_be) if t_be > 0 else 0
        # Bad speculation = (issued - retired) + width x recovery cycles: split it between the two.
        recovery = int(bad * recovery_share / width)
        issued = retiring + bad - width * recovery
        return (retiring, bad, fe, be, heavy, br, fetch, mem, issued, recovery)

    def _amounts(self, vec: _Vec | list[int]) -> Amounts:
        # _make: a plain tuple build, cheaper than the generated keyword-capable __new__.
        return Amounts._make((*vec[:_BASE], vec[0] * self.slots_per_cycle, *vec[_BASE:]))
