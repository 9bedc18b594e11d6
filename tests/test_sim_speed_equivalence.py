"""The simulated workload's numbers are a fixed function of (seed, cpu, t): speed work on the model must not
change a single one (the demo, screenshots and every sim test depend on them).

Two guards: a reference implementation kept here (a plain copy of the model's formulas, no caches, no fast
paths) that the workload must match exactly; and digests of what a simulated machine answers through its
registers (counters, PERF_METRICS, temperatures, energy, APERF/MPERF), captured from the model before it was
optimised.
"""

from __future__ import annotations

import bisect
import hashlib
import random
import threading

import pytest

from pmutop.core.clock import ManualClock
from pmutop.pmu import registers
from pmutop.probes.power import regs
from pmutop.sim import regimes, segment, workload
from pmutop.sim.model import SimConfig, SimMachine
from pmutop.sim.workload import Counts, PhaseKind, Workload, hash64, hash_unit

SEC = 1_000_000_000
_M64 = (1 << 64) - 1


@pytest.fixture(params=["C", "Python"], autouse=True)
def segment_arithmetic(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every check runs on both copies of the per-segment arithmetic (pmutop.sim.segment)."""
    if request.param == "C" and not segment.native_available():
        pytest.skip("the shim has no C copy of the simulator's arithmetic")
    monkeypatch.setattr(segment, "USE_NATIVE", request.param == "C")


# -- reference implementation ------------------------------------------------------------------------------


def _ref_mix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def _ref_hash64(*keys: int) -> int:
    x = 0
    for k in keys:
        x = _ref_mix64(x ^ (k & _M64))
    return x


def _ref_units8(*keys: int) -> list[float]:
    h = _ref_hash64(*keys)
    return [(((h >> (8 * i)) & 0xFF) + 0.5) / 256.0 for i in range(8)]


class RefWorkload:
    """Today's formulas, computed the slow obvious way: every segment from scratch, all prefix sums kept."""

    def __init__(self, seed: int, cpu: int, tsc_hz: int, e_core: bool, width: int, mix: str) -> None:
        self.seed, self.cpu, self.tsc_hz, self.e_core, self.width, self.mix = seed, cpu, tsc_hz, e_core, width, mix
        self.seg_ticks = tsc_hz // 10
        self.rng = random.Random(_ref_mix64(_ref_mix64(seed & _M64) ^ cpu))
        self.phases: list[tuple[PhaseKind, int, int, tuple[float, ...]]] = []  # kind, start, length, base
        self.prefix: list[list[int]] = [[0] * 34]  # prefix[s] = cumulative before segment s

    def _extend_phases(self, seg: int) -> None:
        weights = regimes.PHASE_WEIGHTS[self.mix]
        while not self.phases or seg >= self.phases[-1][1] + self.phases[-1][2]:
            prev = self.phases[-1][0] if self.phases else None
            kinds = [k for k in weights if k != prev]
            kind = self.rng.choices(kinds, weights=[weights[k] for k in kinds])[0]
            length = self.rng.randint(20, 200)
            base = () if kind is PhaseKind.MIXED else tuple(self.rng.uniform(lo, hi) for lo, hi in regimes.RANGES[kind])
            start = self.phases[-1][1] + self.phases[-1][2] if self.phases else 0
            self.phases.append((kind, start, length, base))

    def phase(self, seg: int) -> tuple[PhaseKind, int, int, tuple[float, ...]]:
        self._extend_phases(seg)
        return self.phases[bisect.bisect_right([p[1] for p in self.phases], seg) - 1]

    def rates(self, seg: int) -> tuple[PhaseKind, PhaseKind, list[float]]:
        kind, _, _, base = self.phase(seg)
        if kind is PhaseKind.MIXED:
            burst = seg // 5
            u = (_ref_hash64(self.seed, self.cpu, burst, 0x6D69786564) >> 11) / float(1 << 53)
            units = _ref_units8(self.seed, self.cpu, burst, 0x62617365)
            regime = PhaseKind.IDLE
            for k, w in regimes.MIXED_WEIGHTS[self.mix]:
                if u < w:
                    regime = k
                    break
                u -= w
            base = tuple(lo + (hi - lo) * x for (lo, hi), x in zip(regimes.RANGES[regime], units, strict=True))
        else:
            regime = kind
        jitter = _ref_units8(self.seed, self.cpu, seg)
        values = [
            min(hi, max(lo, b * (1.0 + 0.08 * (2.0 * x - 1.0))))
            for (lo, hi), b, x in zip(regimes.RANGES[regime], base, jitter, strict=True)
        ]
        if self.e_core:
            values[1] *= 0.65
            values[2] *= 0.6
        return kind, regime, values

    def tma(self, seg: int) -> list[float]:
        kind, start, _, _ = self.phase(seg)
        _, regime, v = self.rates(seg)
        p = regimes.TMA[regime]
        key = seg // 5 if kind is PhaseKind.MIXED else start
        per_phase = _ref_units8(self.seed, self.cpu, key, 0x746D61)
        per_seg = _ref_units8(self.seed, self.cpu, seg, 0x746D6173)

        def vary(x: float, i: int) -> float:
            return x * (1.0 + 0.15 * (2.0 * per_phase[i] - 1.0)) * (1.0 + 0.08 * (2.0 * per_seg[i] - 1.0))

        retiring = min(0.92, max(0.03, v[2] * vary(p.uops_per_instr, 0) / self.width))
        w = [vary(p.bad_spec, 1), vary(p.fe_bound, 2), vary(p.be_bound, 3)]
        rest = (1.0 - retiring) / sum(w)
        bad, fe = w[0] * rest, w[1] * rest
        ch = [min(1.0, vary(c, 4 + i)) for i, c in enumerate((p.heavy_ops, p.br_mispredict, p.fetch_lat, p.mem_bound))]
        be = 1.0 - retiring - bad - fe
        return [retiring, bad, fe, be, retiring * ch[0], bad * ch[1], fe * ch[2], be * ch[3]]

    def _td(self, cycles: int, t: list[float], recovery_share: float) -> list[int]:
        slots = cycles * self.width
        ret, bad, fe = int(slots * t[0]), int(slots * t[1]), int(slots * t[2])
        be = slots - ret - bad - fe
        heavy = int(ret * t[4] / t[0]) if t[0] else 0
        br = int(bad * t[5] / t[1]) if t[1] else 0
        fetch = int(fe * t[6] / t[2]) if t[2] else 0
        mem = int(be * t[7] / t[3]) if t[3] > 0 else 0
        recovery = int(bad * recovery_share / self.width)
        return [ret, bad, fe, be, heavy, br, fetch, mem, ret + bad - self.width * recovery, recovery]

    def segment(self, seg: int) -> list[int]:
        _, regime, v = self.rates(seg)
        util, ghz, ipc, mpki, miss_ratio, bpi, bmiss, kfrac = v
        ref = int(self.seg_ticks * util)
        cycles = int(ref * ghz * 1e9 / self.tsc_hz)
        instr = int(cycles * ipc)
        llc_refs = int(instr * mpki / 1000.0 / miss_ratio)
        total = [cycles, instr, ref, llc_refs, int(llc_refs * miss_ratio), int(instr * bpi)]
        total.append(int(total[5] * bmiss))
        kernel = [int(x * kfrac) for x in total]
        user = [x - k for x, k in zip(total, kernel, strict=True)]
        t = self.tma(seg)
        rec = regimes.TMA[regime].recovery
        return user + self._td(user[0], t, rec) + kernel + self._td(kernel[0], t, rec)

    def cumulative(self, t_ns: int) -> tuple[int, list[int]]:
        """(ticks, user then kernel amounts in Amounts field order, slots included)."""
        ticks = t_ns * self.tsc_hz // SEC
        seg, off = divmod(ticks, self.seg_ticks)
        while len(self.prefix) <= seg + 1:
            s = len(self.prefix) - 1
            self.prefix.append([a + b for a, b in zip(self.prefix[-1], self.segment(s), strict=True)])
        before, after = self.prefix[seg], self.prefix[seg + 1]
        v = [b + (a - b) * off // self.seg_ticks for b, a in zip(before, after, strict=True)]
        user, kernel = v[:17], v[17:]
        return ticks, ([*user[:7], user[0] * self.width, *user[7:], *kernel[:7], kernel[0] * self.width, *kernel[7:]])


def _flat(c: Counts) -> tuple[int, list[int]]:
    return c.tsc, list(c.user) + list(c.kernel)


_CASES = [  # seed, cpu, tsc_hz, e_core, width, mix
    (1, 3, 2_000_000_000, False, 6, "tma"),
    (1, 0, 2_400_000_000, False, 4, "classic"),
    (7, 5, 2_400_000_000, True, 5, "tma"),
    (42, 1, 3_000_000_001, True, 4, "classic"),
    (3, 63, 1_900_000_000, False, 5, "tma"),
    (-5, 2, 2_400_000_000, False, 6, "classic"),
]


def _times(rng: random.Random, horizon_s: int) -> list[int]:
    """Segment and phase boundaries (and a tick either side), random points, and reads going back in time."""
    ts = [0, 1, 99_999_999, 100_000_000, 100_000_001, SEC - 1, SEC, SEC + 1]
    ts += [k * 100_000_000 + d for k in range(0, horizon_s * 10, 11) for d in (-1, 0, 1) if k * 100_000_000 + d >= 0]
    ts += [rng.randrange(horizon_s * SEC) for _ in range(300)]
    ts += [rng.randrange(horizon_s * SEC) for _ in range(100)]  # non-monotonic: jumps back and forth
    return ts


@pytest.mark.parametrize("case", _CASES)
def test_workload_matches_reference_implementation(case: tuple[int, int, int, bool, int, str]) -> None:
    seed, cpu, tsc_hz, e_core, width, mix = case
    w = Workload(seed, cpu, tsc_hz, e_core=e_core, width=width, mix=mix)
    ref = RefWorkload(seed, cpu, tsc_hz, e_core, width, mix)
    rng = random.Random(seed * 1000 + cpu)
    horizon = 120
    ref.cumulative(horizon * SEC)  # phases up to the horizon, so boundaries are known
    times = _times(rng, horizon)
    times += [s * tsc_hz // 10 * SEC // tsc_hz + d for _, s, _, _ in ref.phases for d in (-1, 0, 1, 2)]
    times = [t for t in times if 0 <= t <= horizon * SEC]
    for t in times + sorted(times) + sorted(times, reverse=True):
        assert _flat(w.cumulative(t)) == ref.cumulative(t), t
        c = w.cumulative(t)
        assert list(c.total) == [u + k for u, k in zip(c.user, c.kernel, strict=True)]
    for t in times[:200]:
        seg = w.ticks(t) // w.seg_ticks
        kind, regime, values = ref.rates(seg)
        rates = w.rates_at(t)
        assert (rates.phase, rates.regime) == (kind, regime)
        assert [
            rates.util,
            rates.ghz,
            rates.ipc,
            rates.llc_mpki,
            rates.llc_miss_ratio,
            rates.branches_per_instr,
            rates.branch_miss_ratio,
            rates.kernel_frac,
        ] == values
        assert list(w.tma_at(t)) == ref.tma(seg)
    for t0, t1 in zip(times[:100], times[100:200], strict=True):
        t0, t1 = min(t0, t1), max(t0, t1)
        a, b = ref.cumulative(t0)[1], ref.cumulative(t1)[1]
        d = [y - x for x, y in zip(a, b, strict=True)]
        user, kernel = d[:18], d[18:]
        both = [u + k for u, k in zip(user, kernel, strict=True)]
        for part, v in (("total", both), ("user", user), ("kernel", kernel)):
            td = w.topdown(t0, t1, part)
            assert [td.slots, *(getattr(td, f) for f in workload.TOPDOWN_FIELDS)] == v[7:16], (t0, t1, part)


def test_workload_read_from_many_threads_matches_reference() -> None:
    """Sampler threads and package reads share one Workload: concurrent reads give the same numbers."""
    w = Workload(2, 9, 2_400_000_000, width=6, mix="tma")
    ref = RefWorkload(2, 9, 2_400_000_000, False, 6, "tma")
    times = [i * 37_000_001 for i in range(1500)]
    expected = {t: ref.cumulative(t) for t in times}
    errors: list[int] = []

    def reader(offset: int) -> None:
        for t in times[offset:] + times[:offset]:
            if _flat(w.cumulative(t)) != expected[t]:
                errors.append(t)

    threads = [threading.Thread(target=reader, args=(k * 300,)) for k in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []


def test_hash_functions_are_splitmix64() -> None:
    rng = random.Random(5)
    for n in range(1, 6):
        for _ in range(300):
            keys = [rng.choice([rng.randrange(-(1 << 70), 1 << 70), rng.randrange(1000)]) for _ in range(n)]
            assert hash64(*keys) == _ref_hash64(*keys)
            assert hash_unit(*keys) == (_ref_hash64(*keys) >> 11) / float(1 << 53)
            assert workload._hash_units8(*keys) == _ref_units8(*keys)
            # The per-segment fast path: one more key chained onto a precomputed hash.
            k = rng.choice([rng.randrange(-(1 << 70), 1 << 70), rng.randrange(100_000)])
            assert workload._mix64_after(hash64(*keys), k) == _ref_hash64(*keys, k)


# -- what the simulated machine answers -----------------------------------------------------------------


def _machine_digest(model: str, cpus: int, seed: int) -> str:
    """Every reading a live view takes from the simulated machine, over 30 s of 100 ms samples: counters,
    PERF_METRICS, per-core and package temperature, energy, APERF/MPERF/C6, hashed in order."""
    clock = ManualClock()
    m = SimMachine(SimConfig(cpus=cpus, model=model, seed=seed), clock)
    out = hashlib.sha256()
    for cpu in m.cpus:
        dev = m.msr(cpu)
        fixed = m._state(cpu).cfg.fixed_counters
        dev.write(registers.IA32_FIXED_CTR_CTRL, sum(0x3 << 4 * i for i in range(fixed)))
        for i, ev in enumerate(
            [
                registers.RawEvent(0x3C),
                registers.RawEvent(0xC0),
                registers.RawEvent(0x2E, 0x41),
                registers.RawEvent(0xC4),
            ]
        ):
            dev.write(registers.evtsel(i), registers.encode_evtsel(ev, user=True, kernel=i != 2))
        gctrl = registers.global_ctrl_mask(range(4), range(fixed))
        if m._state(cpu).metrics_fields:
            gctrl |= registers.GLOBAL_CTRL_EN_PERF_METRICS
        dev.write(registers.IA32_PERF_GLOBAL_CTRL, gctrl)
    thermal = [regs.IA32_THERM_STATUS, regs.IA32_PACKAGE_THERM_STATUS]
    energy = [regs.MSR_PKG_ENERGY_STATUS, regs.MSR_PP0_ENERGY_STATUS, regs.MSR_DRAM_ENERGY_STATUS]
    idle = [regs.IA32_APERF, regs.IA32_MPERF, regs.MSR_CORE_C6_RESIDENCY]
    for step in range(1, 301):
        base = step * 100_000_000
        for cpu in m.cpus:
            if cpu % 3 == 2 and step % 4:  # some CPUs sampled less often
                continue
            clock.set_ns(base + cpu * 1_234_567)
            state = m._state(cpu)
            tsc, values = m.read_counters(cpu, state.cfg.fixed_counters, 4, bool(state.metrics_fields))
            dev = m.msr(cpu)
            out.update(repr((tsc, values, [dev.read(a) for a in thermal + idle])).encode())
            if cpu == 0:
                out.update(repr([dev.read(a) for a in energy]).encode())
        if step % 10 == 0:
            out.update(repr([m.workload(c).rates_at(base) for c in m.cpus]).encode())
    return out.hexdigest()


@pytest.mark.parametrize(
    ("model", "cpus", "seed", "digest"),
    [
        ("skx", 4, 1, "937744b97ddc55799042dd42b10861b76f457fe5bc9d3be0da0a0c0784adab4c"),
        ("spr", 6, 3, "fec00ca008e4fbf0a1f3a3b27ee2346222f0835551900a8d14e93d9872299514"),
        ("adl", 8, 11, "68b3fffce50f3c9b36c5d54f2e18ed00540bb28d377f2bf5eee7fade208d0269"),
    ],
)
def test_simulated_machine_readings_are_unchanged(model: str, cpus: int, seed: int, digest: str) -> None:
    assert _machine_digest(model, cpus, seed) == digest


# -- the simulated memory's write-backs (counted with the workload's segments since issue 24) -------------------


def _ref_writebacks(ref: RefWorkload, t_ns: int, per_segment: dict[int, int]) -> int:
    """What pmutop.sim.dram counted before: per segment int(its LLC misses x a share drawn per regime and segment
    by a hash), linearly within the segment (floored)."""

    def lines(s: int) -> int:
        if s not in per_segment:
            _, regime, _ = ref.rates(s)
            lo, hi = regimes.WRITEBACK_SHARE[regime]
            amounts = ref.segment(s)
            misses = amounts[4] + amounts[17 + 4]
            per_segment[s] = int(
                misses * (lo + (hi - lo) * (_ref_hash64(ref.seed, ref.cpu, s, 0x7762) >> 11) / 2.0**53)
            )
        return per_segment[s]

    seg, off = divmod(t_ns * ref.tsc_hz // SEC, ref.seg_ticks)
    done = sum(lines(s) for s in range(seg))
    return done + lines(seg) * off // ref.seg_ticks if off else done


@pytest.mark.parametrize("case", _CASES[:3])
def test_workload_writebacks_and_totals_match_reference(case: tuple[int, int, int, bool, int, str]) -> None:
    seed, cpu, tsc_hz, e_core, width, mix = case
    w = Workload(seed, cpu, tsc_hz, e_core=e_core, width=width, mix=mix)
    ref = RefWorkload(seed, cpu, tsc_hz, e_core, width, mix)
    rng = random.Random(seed)
    times = [rng.randrange(60 * SEC) for _ in range(60)] + [
        k * 100_000_000 + d for k in range(0, 600, 37) for d in (0, 1)
    ]
    per_segment: dict[int, int] = {}
    for t in times + sorted(times):
        misses, written = w.memory_lines(t)
        assert misses == w.cumulative(t).total.llc_misses
        # The process table's and thermal model's reads: the same totals, without the Counts.
        assert w.totals_ticks(w.ticks(t), (0, 1, 2, 3, 4, 5, 6)) == list(w.cumulative(t).total[:7])
        assert written == w.cumulative_writebacks(t) == _ref_writebacks(ref, t, per_segment), t


def _dram_digest(model: str, cpus: int, seed: int, sockets: int) -> str:
    """Every reading of the simulated memory channels over 20 s of 50 ms to 1 s intervals."""
    from pmutop.sim.dram import SimDramCounters

    clock = ManualClock()
    m = SimMachine(SimConfig(cpus=cpus, model=model, seed=seed), clock)
    dram = SimDramCounters(m, sockets=sockets)
    dram.open()
    out = hashlib.sha256()
    rng = random.Random(seed)
    while clock.now_ns() < 20 * SEC:
        clock.advance(rng.choice([0.05, 0.1, 0.37, 1.0]))
        for cpu in rng.sample(m.cpus, 2):  # some CPUs sampled in between, as the live view does
            m.read_counters(cpu, 3, 4)
        out.update(repr(dram.read()).encode())
    return out.hexdigest()


@pytest.mark.parametrize(
    ("model", "cpus", "seed", "sockets", "digest"),
    [
        ("spr", 8, 1, 1, "70014b5a2ed41f13ed0722af5478a5499c44dc83dbdf52f5b47875350b8296b8"),
        ("adl", 6, 4, 2, "289ed26786b7d8b0e93fdcc10a2f0492285e2e22accc8200a49c3309d87ab806"),
    ],
)
def test_simulated_memory_readings_are_unchanged(model: str, cpus: int, seed: int, sockets: int, digest: str) -> None:
    assert _dram_digest(model, cpus, seed, sockets) == digest


def test_each_run_uses_the_copy_of_the_arithmetic_it_names() -> None:
    w = Workload(1, 0, 2_400_000_000)
    assert isinstance(w._segment_amounts.__self__, segment.NativeSegments) == segment.USE_NATIVE  # type: ignore[attr-defined]
