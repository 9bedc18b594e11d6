"""A deterministic synthetic per-CPU workload for the simulated PMU.

Time is cut into segments of 1/10 s of TSC ticks. Every segment has constant rates (utilisation,
frequency, IPC, cache and branch behaviour, kernel share) drawn from a phase (idle, busy compute,
memory-bound, mixed/bursty) plus per-segment jitter. Phases last 2-20 s and come from an RNG seeded
by (seed, cpu); the jitter is a hash of (seed, cpu, segment). So the cumulative amount of every
quantity at time t is a pure function of (seed, cpu, t), whenever and however often it is read.
Within a segment counts grow linearly (floored to integers).
"""

from __future__ import annotations

import bisect
import random
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

_M64 = (1 << 64) - 1
SEGMENTS_PER_SECOND = 10
_MIXED_BURST_SEGMENTS = 5  # a mixed phase changes regime every 0.5 s
_MIN_PHASE_SEGMENTS = 2 * SEGMENTS_PER_SECOND
_MAX_PHASE_SEGMENTS = 20 * SEGMENTS_PER_SECOND
_JITTER = 0.08  # +-8% per segment, clamped to the regime's range
_E_CORE_GHZ = 0.65
_E_CORE_IPC = 0.6
_P_CORE_SLOTS_PER_CYCLE = 6
_E_CORE_SLOTS_PER_CYCLE = 4


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
        x = mix64(x ^ (k & _M64))
    return x


def hash_unit(*keys: int) -> float:
    """A deterministic number in [0, 1) from integer keys."""
    return (hash64(*keys) >> 11) / float(1 << 53)


def _hash_units8(*keys: int) -> list[float]:
    """Eight numbers in (0, 1) from one hash (1/256 resolution is plenty for jitter)."""
    h = hash64(*keys)
    return [(((h >> (8 * i)) & 0xFF) + 0.5) / 256.0 for i in range(8)]


class PhaseKind(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    MEMORY = "memory"
    MIXED = "mixed"


@dataclass(frozen=True)
class Rates:
    """What one segment of the workload does (P-core values scaled for E-cores)."""

    phase: PhaseKind  # the phase in force
    regime: PhaseKind  # the steady behaviour actually running (differs from phase only in MIXED)
    util: float  # unhalted fraction of wall time
    ghz: float  # core clock while unhalted
    ipc: float
    llc_mpki: float  # LLC misses per 1000 instructions
    llc_miss_ratio: float  # misses / references
    branches_per_instr: float
    branch_miss_ratio: float
    kernel_frac: float  # share of every quantity counted at CPL 0


# (low, high) per field of Rates, for a P-core.
_RANGES: dict[PhaseKind, tuple[tuple[float, float], ...]] = {
    PhaseKind.IDLE: (
        (0.01, 0.05),
        (0.8, 1.6),
        (0.5, 1.0),
        (0.5, 3.0),
        (0.2, 0.5),
        (0.15, 0.22),
        (0.02, 0.06),
        (0.4, 0.8),
    ),
    PhaseKind.BUSY: (
        (0.9, 1.0),
        (3.4, 4.8),
        (2.0, 3.5),
        (0.05, 0.8),
        (0.05, 0.3),
        (0.12, 0.2),
        (0.003, 0.02),
        (0.01, 0.05),
    ),
    PhaseKind.MEMORY: (
        (0.93, 0.98),
        (2.4, 3.8),
        (0.2, 0.7),
        (10.0, 40.0),
        (0.4, 0.9),
        (0.08, 0.14),
        (0.005, 0.03),
        (0.02, 0.1),
    ),
}
_STEADY = (PhaseKind.IDLE, PhaseKind.BUSY, PhaseKind.MEMORY)
_PHASE_WEIGHTS = {PhaseKind.IDLE: 3, PhaseKind.BUSY: 3, PhaseKind.MEMORY: 2, PhaseKind.MIXED: 2}
_MIXED_WEIGHTS = ((PhaseKind.BUSY, 0.45), (PhaseKind.MEMORY, 0.2), (PhaseKind.IDLE, 0.35))


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


@dataclass(frozen=True)
class Counts:
    tsc: int  # TSC ticks elapsed since t=0
    user: Amounts
    kernel: Amounts

    @property
    def total(self) -> Amounts:
        return Amounts(*(u + k for u, k in zip(self.user, self.kernel, strict=True)))


# Per segment we store 7 user then 7 kernel integers (slots are derived from cycles).
_N = 7
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

    def __init__(self, seed: int, cpu: int, tsc_hz: int, e_core: bool = False) -> None:
        if tsc_hz < SEGMENTS_PER_SECOND:
            raise ValueError(f"tsc_hz too small: {tsc_hz}")
        self.seed = seed
        self.cpu = cpu
        self.tsc_hz = tsc_hz
        self.e_core = e_core
        self.seg_ticks = tsc_hz // SEGMENTS_PER_SECOND
        self.slots_per_cycle = _E_CORE_SLOTS_PER_CYCLE if e_core else _P_CORE_SLOTS_PER_CYCLE
        self._lock = threading.Lock()
        self._rng = random.Random(mix64(mix64(seed & _M64) ^ cpu))
        self._phases: list[_Phase] = []
        self._starts: list[int] = []
        # Prefix sums of one phase: _pf[k] = cumulative before segment (phase.start + k).
        self._pf_phase = -1
        self._pf: list[_Vec] = []
        self._append_phase(_ZERO)

    # -- public API -------------------------------------------------------------------------------

    def ticks(self, t_ns: int) -> int:
        """TSC ticks elapsed at t (the same conversion the simulated TSC uses)."""
        return t_ns * self.tsc_hz // 1_000_000_000

    def cumulative(self, t_ns: int) -> Counts:
        if t_ns < 0:
            raise ValueError(f"negative time: {t_ns}")
        ticks = self.ticks(t_ns)
        seg, off = divmod(ticks, self.seg_ticks)
        with self._lock:
            pi = self._phase_index(seg)
            phase = self._phases[pi]
            k = seg - phase.start
            before = self._prefix(pi, k)
            # The prefix sums hold each segment's amounts, so nothing is computed twice.
            after = self._prefix(pi, k + 1) if off else before
        vec = [b + (a - b) * off // self.seg_ticks for b, a in zip(before, after, strict=True)]
        return Counts(ticks, self._amounts(vec[:_N]), self._amounts(vec[_N:]))

    def rates_at(self, t_ns: int) -> Rates:
        seg = self.ticks(max(t_ns, 0)) // self.seg_ticks
        with self._lock:
            phase = self._phases[self._phase_index(seg)]
            return self._rates(phase, seg)

    # -- phases -------------------------------------------------------------------------------------

    def _append_phase(self, start_cum: _Vec) -> None:
        rng = self._rng
        prev = self._phases[-1].kind if self._phases else None
        kinds = [k for k in _PHASE_WEIGHTS if k != prev]  # always change behaviour at a boundary
        kind = rng.choices(kinds, weights=[_PHASE_WEIGHTS[k] for k in kinds])[0]
        length = rng.randint(_MIN_PHASE_SEGMENTS, _MAX_PHASE_SEGMENTS)
        base = () if kind is PhaseKind.MIXED else tuple(rng.uniform(lo, hi) for lo, hi in _RANGES[kind])
        start = self._phases[-1].start + self._phases[-1].length if self._phases else 0
        self._phases.append(_Phase(kind, start, length, base, start_cum))
        self._starts.append(start)

    def _phase_index(self, seg: int) -> int:
        while True:
            last = self._phases[-1]
            if seg < last.start + last.length:
                break
            self._append_phase(self._prefix(len(self._phases) - 1, last.length))
        return bisect.bisect_right(self._starts, seg) - 1

    def _prefix(self, pi: int, k: int) -> _Vec:
        """Cumulative amounts before segment k of phase pi, extending the cached prefix sums."""
        phase = self._phases[pi]
        if self._pf_phase != pi:
            self._pf_phase = pi
            self._pf = [phase.start_cum]
        pf = self._pf
        while len(pf) <= k:
            seg = self._segment(phase, phase.start + len(pf) - 1)
            pf.append(tuple(a + b for a, b in zip(pf[-1], seg, strict=True)))
        return pf[k]

    # -- one segment ----------------------------------------------------------------------------------

    def _rates(self, phase: _Phase, seg: int) -> Rates:
        if phase.kind is PhaseKind.MIXED:
            burst = seg // _MIXED_BURST_SEGMENTS
            u = hash_unit(self.seed, self.cpu, burst, 0x6D69786564)
            regime = PhaseKind.IDLE
            for kind, weight in _MIXED_WEIGHTS:
                if u < weight:
                    regime = kind
                    break
                u -= weight
            ranges = _RANGES[regime]
            units = _hash_units8(self.seed, self.cpu, burst, 0x62617365)
            base = tuple(lo + (hi - lo) * u for (lo, hi), u in zip(ranges, units, strict=True))
        else:
            regime = phase.kind
            ranges = _RANGES[regime]
            base = phase.base
        jitter = _hash_units8(self.seed, self.cpu, seg)
        values = [
            min(hi, max(lo, b * (1.0 + _JITTER * (2.0 * u - 1.0))))
            for (lo, hi), b, u in zip(ranges, base, jitter, strict=True)
        ]
        if self.e_core:
            values[1] *= _E_CORE_GHZ
            values[2] *= _E_CORE_IPC
        return Rates(phase.kind, regime, *values)

    def _segment(self, phase: _Phase, seg: int) -> _Vec:
        """Integer user and kernel amounts over one whole segment."""
        r = self._rates(phase, seg)
        ref = int(self.seg_ticks * r.util)  # util <= 1, so ref <= TSC ticks of the segment
        cycles = int(ref * r.ghz * 1e9 / self.tsc_hz)
        instr = int(cycles * r.ipc)
        llc_refs = int(instr * r.llc_mpki / 1000.0 / r.llc_miss_ratio)
        llc_misses = int(llc_refs * r.llc_miss_ratio)
        branches = int(instr * r.branches_per_instr)
        branch_misses = int(branches * r.branch_miss_ratio)
        total = (cycles, instr, ref, llc_refs, llc_misses, branches, branch_misses)
        # Flooring the kernel share of a <= b keeps a <= b in both the kernel and the user part.
        kernel = tuple(int(x * r.kernel_frac) for x in total)
        user = tuple(x - k for x, k in zip(total, kernel, strict=True))
        return user + kernel

    def _amounts(self, v: list[int]) -> Amounts:
        return Amounts(*v, slots=v[0] * self.slots_per_cycle)
