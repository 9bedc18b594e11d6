"""A deterministic synthetic per-CPU workload for the simulated PMU.

Time is cut into segments of 1/10 s of TSC ticks. Every segment has constant rates (utilisation,
frequency, IPC, cache and branch behaviour, kernel share) drawn from a phase (idle, busy compute,
memory-bound, mixed/bursty; with the "tma" mix also branchy and frontend-bound) plus per-segment jitter.
Phases last 2-20 s and come from an RNG seeded by (seed, cpu); the jitter is a hash of (seed, cpu,
segment). So the cumulative amount of every quantity at time t is a pure function of (seed, cpu, t),
whenever and however often it is read. Within a segment counts grow linearly (floored to integers). Each
segment also writes back a share of its LLC misses to memory (pmutop.sim.dram's writes).

Cost: each segment is counted once, as time passes (ten a second per CPU, whatever reads it); a window of the
last few seconds of cumulative sums answers reads, and older reads sum their phase again from its start.

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
import random
import threading
from dataclasses import dataclass

from pmutop.sim.counts import TOPDOWN_FIELDS as TOPDOWN_FIELDS
from pmutop.sim.counts import Amounts as Amounts
from pmutop.sim.counts import Counts as Counts
from pmutop.sim.counts import TmaShares as TmaShares
from pmutop.sim.counts import TopdownSlots as TopdownSlots
from pmutop.sim.hashing import _hash_units8 as _hash_units8
from pmutop.sim.hashing import _mix64_after as _mix64_after
from pmutop.sim.hashing import hash64 as hash64
from pmutop.sim.hashing import hash_unit as hash_unit
from pmutop.sim.hashing import mix64 as mix64
from pmutop.sim.regimes import (
    MIXED_WEIGHTS,
    MIXES,
    PHASE_WEIGHTS,
    RANGES,
    TMA,
    PhaseKind,
    Rates,
)
from pmutop.sim.segment import E_CORE_GHZ, E_CORE_IPC, PACK, SEG_FACTOR, TMA_SEG_KEY, segments, within

_M64 = (1 << 64) - 1
SEGMENTS_PER_SECOND = 10
_MIXED_BURST_SEGMENTS = 5  # a mixed phase changes regime every 0.5 s
_MIN_PHASE_SEGMENTS = 2 * SEGMENTS_PER_SECOND
_MAX_PHASE_SEGMENTS = 20 * SEGMENTS_PER_SECOND
# Segments of sums kept behind the newest counted (3.2 to 6.4 s): pmutop reads at most a second or two back. A
# read further back sums its phase again from the phase's start.
_WINDOW = 32
# Phases kept for reads back in time (4 to 8, of 2 s at least; up to 64 grew the heap for 10 minutes). An older
# read rebuilds the history from the seed, so a run of any length holds a bounded model.
_KEPT_PHASES = 4
_P_CORE_SLOTS_PER_CYCLE = 6  # default pipeline widths; the simulated machine passes its model's
_E_CORE_SLOTS_PER_CYCLE = 4


_MIXED = PhaseKind.MIXED  # a module global: cheaper than the enum class attribute in per-segment code
_TMA_PHASE_JITTER = 0.15  # per phase (per burst in a mixed phase)
_TMA_KEY = 0x746D61  # hash keys of the top-down shares: "tma"
# Per-phase jitter, as the per-segment one (pmutop.sim.segment.SEG_FACTOR).
_PHASE_FACTOR = tuple(1.0 + _TMA_PHASE_JITTER * (2.0 * ((b + 0.5) / 256.0) - 1.0) for b in range(256))


# Per segment we store _N user then _N kernel integers: the 7 base quantities, then the 10 top-down ones
# (slots are derived from cycles); then the lines written back to memory (pmutop.sim.dram), user and kernel
# together.
_BASE = 7
_N = _BASE + 10
_WRITEBACKS = 2 * _N  # index of the write-backs in a vector
_LLC_MISSES = 4  # index of llc_misses in each privilege mode's part
_Vec = tuple[int, ...]
# A vector is stored packed into one integer, 64 bits a lane (lane i = bits 64i..64i+63), so adding a segment to
# the sums is one integer addition and a window entry one object. Every amount is >= 0 and a lane's sum stays
# below 2^64 (slots, the fastest-growing, at 6 x 5 GHz take 19 years), so lanes never carry into each other.
_PACK = PACK
_LANE = (1 << 64) - 1
assert _PACK.size == 8 * (2 * _N + 1)


def _unpacked(packed: int) -> _Vec:
    return _PACK.unpack(packed.to_bytes(_PACK.size, "little"))


@dataclass(slots=True)
class _Phase:
    kind: PhaseKind
    start: int  # first segment
    length: int  # in segments
    base: tuple[float, ...]  # field values (for steady phases)
    start_cum: int | None  # cumulative amounts (packed) before the first segment (None until counted up to it)


class Workload:
    """Cumulative counts for one CPU as a pure function of (seed, cpu, t).

    Cheap for monotonically increasing t (a window of recent prefix sums is kept), correct for any t.
    Thread-safe.
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
        self._within = within(self.seg_ticks)  # reads within a segment (pmutop.sim.lanes, in C where built)
        if width is None:
            width = _E_CORE_SLOTS_PER_CYCLE if e_core else _P_CORE_SLOTS_PER_CYCLE
        self.slots_per_cycle = width
        self._width_given = width
        self._lock = threading.Lock()
        self._rng = random.Random(mix64(mix64(seed & _M64) ^ cpu))
        self._phases: list[_Phase] = []  # the last phases (up to 2 x _KEPT_PHASES), oldest first
        self._starts: list[int] = []
        self._first = 0  # phase number of _phases[0]: phase numbers count from the start of time
        # The window: _win[i] = cumulative before segment _win_first + i, for the last _WINDOW to 2 x _WINDOW
        # segments counted. One vector per segment, made and dropped in time order: a steady, bounded heap.
        self._win: list[int] = [0]  # packed
        self._win_first = 0
        self._cursor = 0  # phase number of the segment after the window's last
        # Prefix sums from a phase's start, for a read before the window (phase number, sums).
        self._back: tuple[int, list[int]] | None = None
        self._history: Workload | None = None  # the same workload from the seed, for reads before the phases kept
        self._last: tuple[int, Counts] | None = None  # the last cumulative(): readers ask for one t repeatedly
        # The last per-burst and per-phase hashes (each holds one entry: segments come in time order).
        self._burst_cache: dict[int, tuple[PhaseKind, tuple[float, ...]]] = {}  # burst -> (regime, base)
        self._tma_cache: dict[int, tuple[PhaseKind, list[float]]] = {}  # key -> (regime, varied profile)
        self._key_hash = hash64(seed, cpu)  # every per-segment hash starts with (seed, cpu)
        arithmetic = segments(self._key_hash, e_core, self.seg_ticks, tsc_hz, width)
        self._segment_amounts, self._segment_run = arithmetic.amounts, arithmetic.run
        self._append_phase()
        self._phases[0].start_cum = 0

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
            ends = self._ends(seg, off)
        if ends is None:  # before every phase kept: rebuilt from the seed, this workload left as it is
            return self._from_seed(seg).cumulative_ticks(ticks)
        before, after = ends
        vec = self._within.at(seg, before, after, off) if off else _unpacked(before)  # linear, floored
        return Counts(ticks, self._amounts(vec[:_N]), self._amounts(vec[_N:_WRITEBACKS]))

    def totals_ticks(self, ticks: int, fields: tuple[int, ...]) -> list[int]:
        """cumulative_ticks(ticks).total's fields at these Amounts positions (cycles 0 ... branch_misses 6; -1:
        the write-backs) without building the rest: the process table's, thermal model's and memory's reads."""
        seg, off = divmod(ticks, self.seg_ticks)
        with self._lock:
            ends = self._ends(seg, off)
        if ends is None:
            return self._from_seed(seg).totals_ticks(ticks, fields)
        before, after = ends
        if not off or self._within.holds(seg):  # every lane at hand, or at one multiplication
            vec = self._within.at(seg, before, after, off) if off else _unpacked(before)
            return [vec[_WRITEBACKS] if field < 0 else vec[field] + vec[_N + field] for field in fields]
        st = self.seg_ticks  # a few lanes in another segment: cheaper one by one than spreading all of them
        out = []
        for field in fields:
            # User and kernel are interpolated (floored) each on its own, as cumulative() does.
            shifts = (64 * _WRITEBACKS,) if field < 0 else (64 * field, 64 * (_N + field))
            total = 0
            for i in shifts:
                b = before >> i & _LANE
                total += b + ((after >> i & _LANE) - b) * off // st
            out.append(total)
        return out

    def memory_lines(self, t_ns: int) -> tuple[int, int]:
        """(LLC misses, lines written back) up to t, user and kernel: what pmutop.sim.dram reads."""
        misses, written = self.totals_ticks(self.ticks(t_ns), (_LLC_MISSES, -1))
        return misses, written

    def cumulative_writebacks(self, t_ns: int) -> int:
        """Lines written back to memory up to t (each segment writes back a share of its LLC misses)."""
        return self.memory_lines(t_ns)[1]

    def phase_span(self, seg: int) -> tuple[PhaseKind, int, int]:
        """(kind, first segment, length in segments) of the phase holding segment `seg`."""
        with self._lock:
            pi = self._phase_index(seg)
            if pi is not None:
                phase = self._phases[pi - self._first]
                return phase.kind, phase.start, phase.length
        return self._from_seed(seg).phase_span(seg)

    def rates_at(self, t_ns: int) -> Rates:
        seg = self.ticks(max(t_ns, 0)) // self.seg_ticks
        with self._lock:
            pi = self._phase_index(seg)
            if pi is not None:
                return self._rates(self._phases[pi - self._first], seg)
        return self._from_seed(seg).rates_at(t_ns)

    def tma_at(self, t_ns: int) -> TmaShares:
        """The top-down shares of the segment running at t (before flooring to whole slots)."""
        seg = self.ticks(max(t_ns, 0)) // self.seg_ticks
        with self._lock:
            pi = self._phase_index(seg)
            if pi is not None:
                phase = self._phases[pi - self._first]
                return self._tma(phase, seg, self._rates(phase, seg))
        return self._from_seed(seg).tma_at(t_ns)

    def topdown(self, t0_ns: int, t1_ns: int, part: str = "total") -> TopdownSlots:
        """Slots and slots per top-down category counted in [t0, t1] ("total", "user" or "kernel"): the
        exact truth a PMU reading over that span should reproduce."""
        start, end = self.cumulative(t0_ns), self.cumulative(t1_ns)
        before, after = (start.total, end.total) if part == "total" else (getattr(start, part), getattr(end, part))
        return TopdownSlots(
            after.slots - before.slots,
            *(getattr(after, f"td_{f}") - getattr(before, f"td_{f}") for f in TOPDOWN_FIELDS),
        )

    # -- phases and prefix sums -----------------------------------------------------------------------

    def _from_seed(self, seg: int) -> Workload:
        """The same workload from the seed, for a read of `seg` before the phases kept (rare), so this one keeps
        its present; kept for the next such read (they come in time order: each segment is counted once)."""
        with self._lock:
            history = self._history
            if history is None or seg < history._starts[0]:
                history = self._history = Workload(
                    self.seed, self.cpu, self.tsc_hz, self.e_core, width=self._width_given, mix=self.mix
                )
            return history

    def _append_phase(self) -> None:
        rng = self._rng
        prev = self._phases[-1].kind if self._phases else None
        kinds = [k for k in self._weights if k != prev]  # always change behaviour at a boundary
        kind = rng.choices(kinds, weights=[self._weights[k] for k in kinds])[0]
        length = rng.randint(_MIN_PHASE_SEGMENTS, _MAX_PHASE_SEGMENTS)
        base = () if kind is PhaseKind.MIXED else tuple(rng.uniform(lo, hi) for lo, hi in RANGES[kind])
        start = self._phases[-1].start + self._phases[-1].length if self._phases else 0
        self._phases.append(_Phase(kind, start, length, base, None))
        self._starts.append(start)
        # Forget the oldest half (in one go: amortised), never the phase being counted (phases asked about far
        # ahead of it, rates_at the future, are made before it is reached).
        drop = min(len(self._phases) - _KEPT_PHASES, self._cursor - self._first)
        if len(self._phases) > 2 * _KEPT_PHASES and drop > 0:
            del self._phases[:drop], self._starts[:drop]
            self._first += drop
            if self._back is not None and self._back[0] < self._first:
                self._back = None

    def _phase_index(self, seg: int) -> int | None:
        """The number of the phase holding segment `seg` (making it if needed); None before the phases kept."""
        if seg < self._starts[0]:
            return None
        while True:
            last = self._phases[-1]
            if seg < last.start + last.length:
                break
            self._append_phase()
        return self._first + bisect.bisect_right(self._starts, seg) - 1

    def _ends(self, seg: int, off: int) -> tuple[int, int] | None:
        """The cumulative vectors (packed) before segment `seg` and (when `off`) after it; None before the phases
        kept."""
        win = self._win
        i = seg - self._win_first
        if i >= 0:
            if i + (off > 0) >= len(win):
                # One segment further than asked: the next reads (the rest of this sample, the memory's, the next
                # interval's thermal step) then mostly find it counted, for one call here instead of several.
                self._extend(seg + 2)
                win = self._win
                i = seg - self._win_first
            return win[i], win[i + 1] if off else win[i]
        return self._ends_before_window(seg, off)

    def _extend(self, upto: int) -> None:
        """Count segments until the window holds the cumulative before segment `upto`."""
        win = self._win
        seg = self._win_first + len(win) - 1  # the first segment not counted yet
        phase = self._phases[self._cursor - self._first]
        end = phase.start + phase.length
        while seg < upto:
            if seg >= end:  # into the next phase
                self._cursor += 1
                if self._cursor - self._first >= len(self._phases):
                    self._append_phase()
                phase = self._phases[self._cursor - self._first]
                phase.start_cum = win[-1]
                end = phase.start + phase.length
            # A run of segments with the same rates: the phase's, or a burst's in a mixed phase.
            n = min(upto, end) - seg
            if phase.kind is _MIXED:
                n = min(n, _MIXED_BURST_SEGMENTS - seg % _MIXED_BURST_SEGMENTS)
                regime, base = self._burst(seg)
                key = seg // _MIXED_BURST_SEGMENTS
            else:
                regime, base, key = phase.kind, phase.base, phase.start
            win += self._segment_run(seg, n, regime, base, self._varied(key, regime), win[-1])
            seg += n
        if len(win) > 2 * _WINDOW:  # forget the oldest half (in one go: amortised)
            drop = len(win) - _WINDOW
            del win[:drop]
            self._win_first += drop

    def _ends_before_window(self, seg: int, off: int) -> tuple[int, int] | None:
        """_ends for a segment the window has passed: summed again from its phase's start (kept a while)."""
        pi = self._phase_index(seg)
        if pi is None:
            return None
        phase = self._phases[pi - self._first]
        back = self._back
        if back is None or back[0] != pi:
            assert phase.start_cum is not None  # the window has passed the phase's start
            back = self._back = (pi, [phase.start_cum])
        pf = back[1]
        k = seg - phase.start
        while len(pf) <= k + (off > 0):
            pf.append(pf[-1] + self._segment(phase, phase.start + len(pf) - 1))
        return pf[k], pf[k + 1] if off else pf[k]

    # -- one segment ----------------------------------------------------------------------------------

    # The per-segment arithmetic is the simulator's hot loop (every sampled CPU, every 100 ms of simulated time):
    # pmutop.sim.segment, in C where the shim is built. Each step there and here keeps the original float
    # expression and evaluation order, so every number is bit-identical to the straightforward formulas (see
    # tests/test_sim_speed_equivalence.py).

    def _rates(self, phase: _Phase, seg: int) -> Rates:
        regime, values, _ = self._values(phase, seg)
        return Rates(phase.kind, regime, *values)

    def _burst(self, seg: int) -> tuple[PhaseKind, tuple[float, ...]]:
        """The regime and base of the burst of a mixed phase holding `seg` (per burst, not per segment: the same
        for every segment of the burst)."""
        burst = seg // _MIXED_BURST_SEGMENTS
        cached = self._burst_cache.get(burst)
        if cached is None:
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
        return cached

    def _tma_profile(self, key: int, regime: PhaseKind) -> tuple[PhaseKind, list[float]]:
        """The regime's top-down profile times the per-phase (per-burst) factors, i.e. the first product of
        vary() (tests/test_sim_speed_equivalence.py); kept for the phase (burst) `key`."""
        per_phase = hash64(self.seed, self.cpu, key, _TMA_KEY).to_bytes(8, "little")
        varied = [x * _PHASE_FACTOR[u] for x, u in zip(TMA[regime][:8], per_phase, strict=True)]
        cached = (regime, varied)
        self._tma_cache = {key: cached}
        return cached

    def _values(self, phase: _Phase, seg: int) -> tuple[PhaseKind, list[float], int]:
        """The regime, the Rates field values and the segment's hash (it seeds the top-down jitter too)."""
        if phase.kind is _MIXED:
            regime, base = self._burst(seg)
        else:
            regime = phase.kind
            base = phase.base
        h = _mix64_after(self._key_hash, seg)  # hash64(seed, cpu, seg)
        factor = SEG_FACTOR
        values = []
        for (lo, hi), b, u in zip(RANGES[regime], base, h.to_bytes(8, "little"), strict=True):
            # min(hi, max(lo, x)) spelt as comparisons (the builtins' call overhead dominates here).
            x = b * factor[u]
            x = x if x > lo else lo
            values.append(x if x < hi else hi)
        if self.e_core:
            values[1] *= E_CORE_GHZ
            values[2] *= E_CORE_IPC
        return regime, values, h

    def _segment(self, phase: _Phase, seg: int) -> int:
        """Integer user and kernel amounts and write-backs over one whole segment, packed (pmutop.sim.segment)."""
        if phase.kind is _MIXED:
            regime, base = self._burst(seg)
            tma_key = seg // _MIXED_BURST_SEGMENTS
        else:
            regime, base = phase.kind, phase.base
            tma_key = phase.start
        return self._segment_amounts(seg, regime, base, self._varied(tma_key, regime))

    def _varied(self, key: int, regime: PhaseKind) -> list[float]:
        """The top-down profile of the phase (burst) `key`, varied (_tma_profile), kept while it runs."""
        cached = self._tma_cache.get(key)
        if cached is None or cached[0] is not regime:
            cached = self._tma_profile(key, regime)
        return cached[1]

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
            cached = self._tma_profile(key, regime)
        uops, bad_w, fe_w, be_w, heavy, br, fetch, mem = cached[1]
        # vary(x, i) = x * phase_factor[i] * seg_factor[i], evaluated left to right as before.
        f0, f1, f2, f3, f4, f5, f6, f7 = map(
            SEG_FACTOR.__getitem__, _mix64_after(seg_hash, TMA_SEG_KEY).to_bytes(8, "little")
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

    def _amounts(self, vec: _Vec | list[int]) -> Amounts:
        # _make: a plain tuple build, cheaper than the generated keyword-capable __new__.
        return Amounts._make((*vec[:_BASE], vec[0] * self.slots_per_cycle, *vec[_BASE:]))
