"""The simulated workload's arithmetic for one segment (pmutop.sim.workload): a phase's rates, jittered per
segment, made into integer amounts per privilege mode, its top-down split and its write-backs.

The simulator's hottest code (every CPU, ten times a second): `Segments` does it in Python, `NativeSegments` in C
where the shim is built (shim/pmutop_sim.c, a line-by-line copy: the same double expressions in the same order,
truncated the same way, so the same numbers; tests/test_sim_speed_equivalence.py checks both against a plain
reference). Python's stays the reference and the fallback.
"""

from __future__ import annotations

import struct

from pmutop.hw import shim
from pmutop.sim.lanes import Within
from pmutop.sim.regimes import RANGES, TMA, WRITEBACK_SHARE, PhaseKind

_M64 = (1 << 64) - 1
_JITTER = 0.08  # +-8% per segment, clamped to the regime's range
E_CORE_GHZ = 0.65
E_CORE_IPC = 0.6
TMA_SEG_KEY = 0x746D6173  # hash key of the top-down shares' per-segment jitter
# A jitter unit is one hash byte b, u = (b + 0.5) / 256: the factor 1 + J(2u - 1) takes 256 values, so it is
# looked up (the same expression, evaluated once per byte value: bit-identical floats).
SEG_FACTOR = tuple(1.0 + _JITTER * (2.0 * ((b + 0.5) / 256.0) - 1.0) for b in range(256))
# Per regime, its fields' (low, high) bounds flattened, for the per-segment code's one unpacking.
_FLAT_RANGES = {kind: tuple(x for pair in ranges for x in pair) for kind, ranges in RANGES.items()}
_WRITEBACK_KEY = 0x7762  # "wb": the hash key of the write-back share (pmutop.sim.dram)
_UNIT_SCALE = float(1 << 53)  # hash_unit's divisor
_RECOVERY = {kind: profile.recovery for kind, profile in TMA.items()}
# Per segment: 17 user then 17 kernel amounts (pmutop.sim.workload), then the write-backs, packed 64 bits a lane.
LANES = 35
PACK = struct.Struct(f"<{LANES}Q")


class Segments:
    """One workload's segments, in Python. `key_hash` = hash64(seed, cpu); `width`: issue slots per cycle."""

    def __init__(self, key_hash: int, e_core: bool, seg_ticks: int, tsc_hz: int, width: int) -> None:
        self.key_hash = key_hash
        self.e_core = e_core
        self.seg_ticks = seg_ticks
        self.tsc_hz = tsc_hz
        self.width = width

    def run(
        self, seg: int, n: int, regime: PhaseKind, base: tuple[float, ...], varied: list[float], before: int
    ) -> list[int]:
        """The cumulative amounts (packed) after each of segments seg .. seg + n - 1, which run `regime` with
        `base` and `varied` (one phase, or one burst of a mixed phase), from `before`."""
        return run_python(self, seg, n, regime, base, varied, before)

    def amounts(self, seg: int, regime: PhaseKind, base: tuple[float, ...], varied: list[float]) -> int:
        """Integer user and kernel amounts and write-backs over segment `seg` (packed): `regime` runs with rates
        `base` and the top-down profile `varied` (Workload._tma_profile). Workload._values, _tma_values and the
        slots per category inlined, the same expressions in the same order, so the same numbers."""
        m = _M64
        # h = hash64(seed, cpu, seg): splitmix64 of (seed, cpu)'s hash ^ seg, inlined (mix64).
        x = ((self.key_hash ^ seg) + 0x9E3779B97F4A7C15) & m
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
        h = x ^ (x >> 31)
        u0, u1, u2, u3, u4, u5, u6, u7 = h.to_bytes(8, "little")
        f = SEG_FACTOR
        lo0, hi0, lo1, hi1, lo2, hi2, lo3, hi3, lo4, hi4, lo5, hi5, lo6, hi6, lo7, hi7 = _FLAT_RANGES[regime]
        b0, b1, b2, b3, b4, b5, b6, b7 = base
        # min(hi, max(lo, base x jitter)) per field, spelt as comparisons.
        util = b0 * f[u0]
        util = util if util > lo0 else lo0
        util = util if util < hi0 else hi0
        ghz = b1 * f[u1]
        ghz = ghz if ghz > lo1 else lo1
        ghz = ghz if ghz < hi1 else hi1
        ipc = b2 * f[u2]
        ipc = ipc if ipc > lo2 else lo2
        ipc = ipc if ipc < hi2 else hi2
        mpki = b3 * f[u3]
        mpki = mpki if mpki > lo3 else lo3
        mpki = mpki if mpki < hi3 else hi3
        miss_ratio = b4 * f[u4]
        miss_ratio = miss_ratio if miss_ratio > lo4 else lo4
        miss_ratio = miss_ratio if miss_ratio < hi4 else hi4
        br_per_instr = b5 * f[u5]
        br_per_instr = br_per_instr if br_per_instr > lo5 else lo5
        br_per_instr = br_per_instr if br_per_instr < hi5 else hi5
        br_miss_ratio = b6 * f[u6]
        br_miss_ratio = br_miss_ratio if br_miss_ratio > lo6 else lo6
        br_miss_ratio = br_miss_ratio if br_miss_ratio < hi6 else hi6
        kernel_frac = b7 * f[u7]
        kernel_frac = kernel_frac if kernel_frac > lo7 else lo7
        kernel_frac = kernel_frac if kernel_frac < hi7 else hi7
        if self.e_core:
            ghz *= E_CORE_GHZ
            ipc *= E_CORE_IPC
        ref = int(self.seg_ticks * util)  # util <= 1, so ref <= TSC ticks of the segment
        cycles = int(ref * ghz * 1e9 / self.tsc_hz)
        instr = int(cycles * ipc)
        llc_refs = int(instr * mpki / 1000.0 / miss_ratio)
        llc_misses = int(llc_refs * miss_ratio)
        branches = int(instr * br_per_instr)
        branch_misses = int(branches * br_miss_ratio)
        k_cycles, k_instr, k_ref = int(cycles * kernel_frac), int(instr * kernel_frac), int(ref * kernel_frac)
        k_refs, k_misses = int(llc_refs * kernel_frac), int(llc_misses * kernel_frac)  # floored: a <= b in both
        k_branches, k_br_misses = int(branches * kernel_frac), int(branch_misses * kernel_frac)

        # Top-down shares (Workload._tma_values): the per-phase (per-burst) profile, times per-segment factors.
        uops, bad_w, fe_w, be_w, heavy, br, fetch, mem = varied
        x = ((h ^ TMA_SEG_KEY) + 0x9E3779B97F4A7C15) & m  # mix64(h ^ key), inlined
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
        u0, u1, u2, u3, u4, u5, u6, u7 = (x ^ (x >> 31)).to_bytes(8, "little")
        width = self.width
        t_ret = ipc * (uops * f[u0]) / width
        t_ret = t_ret if t_ret > 0.03 else 0.03
        t_ret = t_ret if t_ret < 0.92 else 0.92
        w1, w2, w3 = bad_w * f[u1], fe_w * f[u2], be_w * f[u3]
        rest = (1.0 - t_ret) / (w1 + w2 + w3)  # = sum((w1, w2, w3)): 0 + w1 is w1 exactly
        t_bad, t_fe = w1 * rest, w2 * rest
        t_be = 1.0 - t_ret - t_bad - t_fe
        heavy, br, fetch, mem = heavy * f[u4], br * f[u5], fetch * f[u6], mem * f[u7]
        t_heavy = t_ret * (heavy if heavy < 1.0 else 1.0)
        t_br = t_bad * (br if br < 1.0 else 1.0)
        t_fetch = t_fe * (fetch if fetch < 1.0 else 1.0)
        t_mem = t_be * (mem if mem < 1.0 else 1.0)
        recovery_share = _RECOVERY[regime]

        # Slots per category (_topdown_amounts), user then kernel.
        u_cycles = cycles - k_cycles
        slots = u_cycles * width
        u_ret, u_bad, u_fe = int(slots * t_ret), int(slots * t_bad), int(slots * t_fe)
        u_be = slots - u_ret - u_bad - u_fe
        u_rec = int(u_bad * recovery_share / width)
        slots = k_cycles * width
        k_ret, k_bad, k_fe = int(slots * t_ret), int(slots * t_bad), int(slots * t_fe)
        k_be = slots - k_ret - k_bad - k_fe
        k_rec = int(k_bad * recovery_share / width)

        # Write-backs (pmutop.sim.dram): a share of the segment's misses, drawn per regime and segment.
        x = ((h ^ _WRITEBACK_KEY) + 0x9E3779B97F4A7C15) & m  # hash_unit(seed, cpu, seg, key), inlined
        x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
        x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
        wb_lo, wb_hi = WRITEBACK_SHARE[regime]
        writebacks = int(llc_misses * (wb_lo + (wb_hi - wb_lo) * (((x ^ (x >> 31)) >> 11) / _UNIT_SCALE)))
        amounts = PACK.pack(
            u_cycles,
            instr - k_instr,
            ref - k_ref,
            llc_refs - k_refs,
            llc_misses - k_misses,
            branches - k_branches,
            branch_misses - k_br_misses,
            u_ret,
            u_bad,
            u_fe,
            u_be,
            int(u_ret * t_heavy / t_ret) if t_ret else 0,
            int(u_bad * t_br / t_bad) if t_bad else 0,
            int(u_fe * t_fetch / t_fe) if t_fe else 0,
            int(u_be * t_mem / t_be) if t_be > 0 else 0,
            u_ret + u_bad - width * u_rec,
            u_rec,
            k_cycles,
            k_instr,
            k_ref,
            k_refs,
            k_misses,
            k_branches,
            k_br_misses,
            k_ret,
            k_bad,
            k_fe,
            k_be,
            int(k_ret * t_heavy / t_ret) if t_ret else 0,
            int(k_bad * t_br / t_bad) if t_bad else 0,
            int(k_fe * t_fetch / t_fe) if t_fe else 0,
            int(k_be * t_mem / t_be) if t_be > 0 else 0,
            k_ret + k_bad - width * k_rec,
            k_rec,
            writebacks,
        )
        return int.from_bytes(amounts, "little")


def run_python(
    segments: Segments, seg: int, n: int, regime: PhaseKind, base: tuple[float, ...], varied: list[float], before: int
) -> list[int]:
    """Segments.run, one segment at a time."""
    out = []
    for s in range(seg, seg + n):
        before += segments.amounts(s, regime, base, varied)
        out.append(before)
    return out


def python_only_reason() -> str | None:
    """Why the simulator's arithmetic runs in Python here (at several times the CPU), or None: it runs in C."""
    if native_available():
        return None
    if shim.lib is None:
        return shim.BUILD_HINT
    if not hasattr(shim.lib, "pmutop_sim_interp"):
        return "the pmutop C shim was built without the simulator's arithmetic: reinstall pmutop"
    return "this CPU's doubles do not round as Python's"


def native_available() -> bool:
    """Whether the shim has the C copy and its doubles round as Python's (not on the x87)."""
    lib = shim.lib
    return lib is not None and hasattr(lib, "pmutop_sim_interp") and bool(lib.pmutop_sim_exact())


_SEG_FACTOR_C = shim.ffi.new("double[256]", SEG_FACTOR) if native_available() else None


class NativeSegments(Segments):
    """The same segments computed by the shim (shim/pmutop_sim.c); Python's where the C code declines one."""

    def __init__(self, key_hash: int, e_core: bool, seg_ticks: int, tsc_hz: int, width: int) -> None:
        super().__init__(key_hash, e_core, seg_ticks, tsc_hz, width)
        ffi = shim.ffi
        self._params = p = ffi.new("pmutop_sim_params *")
        p.key_hash, p.tma_seg_key, p.writeback_key = key_hash, TMA_SEG_KEY, _WRITEBACK_KEY
        p.seg_ticks, p.tsc_hz, p.width, p.e_core = seg_ticks, tsc_hz, width, e_core
        p.e_core_ghz, p.e_core_ipc = E_CORE_GHZ, E_CORE_IPC
        p.seg_factor = _SEG_FACTOR_C
        self._out = ffi.new("uint64_t[]", LANES)
        self._bytes = ffi.buffer(self._out)
        self._before = ffi.new("uint64_t[]", LANES)
        self._sums = ffi.new("uint64_t[]", 0)  # run's output, grown to the longest run asked for
        self._phase: tuple[object, object] = (None, None)  # the (base, varied) the parameters hold
        self._segment = shim.lib.pmutop_sim_segment
        self._run = shim.lib.pmutop_sim_run

    def _hold(self, regime: PhaseKind, base: tuple[float, ...], varied: list[float]) -> None:
        p = self._params
        held_base, held_varied = self._phase
        if base is not held_base or varied is not held_varied:  # a new phase or burst (each has its own objects)
            p.base, p.range, p.tma = base, _FLAT_RANGES[regime], varied
            p.recovery = _RECOVERY[regime]
            p.wb_lo, p.wb_hi = WRITEBACK_SHARE[regime]
            self._phase = (base, varied)

    def amounts(self, seg: int, regime: PhaseKind, base: tuple[float, ...], varied: list[float]) -> int:
        self._hold(regime, base, varied)
        if self._segment(self._params, seg, self._out):
            return super().amounts(seg, regime, base, varied)  # it declined: Python says why (or computes it)
        return int.from_bytes(self._bytes, "little")

    def run(
        self, seg: int, n: int, regime: PhaseKind, base: tuple[float, ...], varied: list[float], before: int
    ) -> list[int]:
        if n == 1:  # the usual step (time moves on a segment at a time): one call, no buffers
            return [before + self.amounts(seg, regime, base, varied)]
        self._hold(regime, base, varied)
        ffi = shim.ffi
        size = PACK.size
        if len(self._sums) < n * LANES:
            self._sums = ffi.new("uint64_t[]", n * LANES)
        ffi.memmove(self._before, before.to_bytes(size, "little"), size)
        if self._run(self._params, seg, n, self._before, self._sums):
            return run_python(self, seg, n, regime, base, varied, before)  # declined: segment by segment
        sums = memoryview(ffi.buffer(self._sums, n * size))
        return [int.from_bytes(sums[k : k + size], "little") for k in range(0, n * size, size)]


class NativeWithin:
    """pmutop.sim.lanes.Within's reads within a segment, in C (pmutop_sim_interp: 128-bit products)."""

    def __init__(self, st: int) -> None:
        self._st = st
        self._new = shim.ffi.new
        self._buffer = shim.ffi.buffer
        self._interp = shim.lib.pmutop_sim_interp
        self._python = Within(LANES, st)

    def holds(self, seg: int) -> bool:
        return True  # every segment costs the same here

    def at(self, seg: int, before: int, after: int, off: int) -> tuple[int, ...]:
        size = PACK.size
        out = self._new("uint64_t[35]")  # one per read: readers in several threads (the workload's lock is not held)
        if self._interp(before.to_bytes(size, "little"), after.to_bytes(size, "little"), off, self._st, out):
            return self._python.at(seg, before, after, off)
        return PACK.unpack(self._buffer(out))


USE_NATIVE = True  # False: Python's arithmetic even where the shim has the C copy (the tests run both)


def within(st: int) -> Within | NativeWithin:
    """A new workload's reads within its segments (of st ticks): in C where the shim has them, else in Python."""
    return NativeWithin(st) if USE_NATIVE and native_available() else Within(LANES, st)


def segments(key_hash: int, e_core: bool, seg_ticks: int, tsc_hz: int, width: int) -> Segments:
    """A new workload's segments: in C where the shim has them, else in Python."""
    kind = NativeSegments if USE_NATIVE and native_available() else Segments
    return kind(key_hash, e_core, seg_ticks, tsc_hz, width)
