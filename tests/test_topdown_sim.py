"""The simulator's top-down model: shapes, the workload's truth, fixed counter 3 + PERF_METRICS at register
level, and the general-counter encodings of the four-event formula (SKX) and the E-core events (Gracemont)."""

from __future__ import annotations

import errno

import pytest

from pmutop.core.clock import ManualClock
from pmutop.hw.msr import MsrAccessError
from pmutop.pmu import registers
from pmutop.pmu.cpuid_decode import CORE_TYPE_ATOM, CORE_TYPE_CORE, decode_core_type, decode_identity, decode_perfmon
from pmutop.sim.cpu import SimRdpmcFault
from pmutop.sim.model import SimConfig, SimMachine
from pmutop.sim.workload import TOPDOWN_FIELDS, PhaseKind, Workload

SEC = 1_000_000_000
METRICS_ECX = 1 << 29
SLOTS_ECX = 1 << 30 | 3
EN_3 = registers.global_ctrl_mask([], [3]) | registers.GLOBAL_CTRL_EN_PERF_METRICS


def make(**kw: object) -> tuple[SimMachine, ManualClock]:
    clock = ManualClock()
    return SimMachine(SimConfig(**kw), clock), clock  # type: ignore[arg-type]


def sel(event: int, umask: int = 0, *, cmask: int = 0, extra: int = 0) -> int:
    return registers.encode_evtsel(registers.RawEvent(event, umask, cmask=cmask), user=True, kernel=True) | extra


def cpuid_fn(m: SimMachine, cpu: int):  # type: ignore[no-untyped-def]
    return lambda leaf, subleaf=0: m.cpuid(cpu, leaf, subleaf)


def bytes_of(value: int, n: int) -> list[int]:
    return [registers.perf_metrics_byte(value, i) for i in range(n)]


def expected_bytes(td: dict[str, float], n: int) -> list[float]:
    return [255 * td[f] for f in TOPDOWN_FIELDS[:n]]


# -- shapes ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "cpuid_model", "version", "gp", "fixed", "metrics"),
    [
        ("skx", 0x55, 4, 4, 3, False),
        ("icx", 0x6A, 5, 8, 4, True),
        ("spr", 0x8F, 5, 8, 4, True),
    ],
)
def test_shapes_answer_cpuid_and_perf_capabilities(
    model: str, cpuid_model: int, version: int, gp: int, fixed: int, metrics: bool
) -> None:
    m, _ = make(model=model, cpus=2)
    ident = decode_identity(cpuid_fn(m, 0))
    pm = decode_perfmon(cpuid_fn(m, 0))
    assert (ident.family, ident.model, ident.pdcm) == (6, cpuid_model, True)
    assert (pm.version, pm.gp_counters, pm.fixed_counters) == (version, gp, fixed)
    assert ("topdown-slots" in pm.available_events) == metrics
    caps = m.msr(0).read(registers.IA32_PERF_CAPABILITIES)
    assert bool(caps & registers.PERF_CAP_PERF_METRICS) == metrics
    assert caps & registers.PERF_CAP_FW_WRITE
    assert decode_core_type(cpuid_fn(m, 0)) is None
    if not metrics:
        with pytest.raises(MsrAccessError) as e:
            m.msr(0).read(registers.MSR_PERF_METRICS)
        assert e.value.errno == errno.EIO
        with pytest.raises(MsrAccessError):
            m.msr(0).write(registers.IA32_PERF_GLOBAL_CTRL, registers.GLOBAL_CTRL_EN_PERF_METRICS)
        with pytest.raises(SimRdpmcFault):
            m.rdpmc(0, METRICS_ECX)


def test_default_shape_is_the_old_simulator() -> None:
    cfg = SimConfig()
    assert (cfg.model, cfg.version, cfg.gp_counters, cfg.fixed_counters, cfg.e_cores, cfg.mix) == (
        "skx",
        4,
        4,
        3,
        0,
        "classic",
    )
    # Explicit values override the model's (and the skx shape never has PERF_METRICS, even with fixed counter 3).
    m, _ = make(version=5, fixed_counters=4)
    assert not m.msr(0).read(registers.IA32_PERF_CAPABILITIES) & registers.PERF_CAP_PERF_METRICS
    assert m.workload(0).slots_per_cycle == 4
    with pytest.raises(ValueError, match="model"):
        SimConfig(model="k7")
    with pytest.raises(ValueError, match="mix"):
        SimConfig(mix="chaos")


def test_adl_is_hybrid_with_perf_metrics_on_p_cores_only() -> None:
    m, _ = make(model="adl", cpus=4)
    assert m.config.e_cores == 2
    for cpu in range(4):
        e_core = cpu >= 2
        fn = cpuid_fn(m, cpu)
        ident, pm, core = decode_identity(fn), decode_perfmon(fn), decode_core_type(fn)
        assert (ident.family, ident.model, ident.hybrid) == (6, 0x97, True)
        assert core is not None and core.code == (CORE_TYPE_ATOM if e_core else CORE_TYPE_CORE)
        assert (pm.version, pm.gp_counters, pm.fixed_counters) == ((5, 6, 3) if e_core else (5, 8, 4))
        caps = m.msr(cpu).read(registers.IA32_PERF_CAPABILITIES)
        assert bool(caps & registers.PERF_CAP_PERF_METRICS) != e_core
        assert m.workload(cpu).slots_per_cycle == (5 if e_core else 6)


# -- workload truth -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("width", [4, 5, 6])
def test_level1_sums_to_slots_and_children_fit_their_parents(width: int) -> None:
    w = Workload(5, 1, 2_400_000_000, width=width, mix="tma")
    prev = w.cumulative(0)
    for seg in range(1, 600):
        c = w.cumulative(seg * SEC // 10)  # segment boundaries: exact
        for part, before in ((c.user, prev.user), (c.kernel, prev.kernel)):
            d = {f: getattr(part, f) - getattr(before, f) for f in part._fields}
            assert d["slots"] == width * d["cycles"]
            assert d["td_retiring"] + d["td_bad_spec"] + d["td_fe_bound"] + d["td_be_bound"] == d["slots"]
            for child, parent in (
                ("td_heavy_ops", "td_retiring"),
                ("td_br_mispredict", "td_bad_spec"),
                ("td_fetch_lat", "td_fe_bound"),
                ("td_mem_bound", "td_be_bound"),
            ):
                assert 0 <= d[child] <= d[parent]
            # The formula's identity: issued - retired + width x recovery = bad speculation.
            assert d["uops_issued"] - d["td_retiring"] + width * d["recovery_cycles"] == d["td_bad_spec"]
        prev = c


def test_every_phase_has_a_truth_consistent_with_it() -> None:
    seen: dict[PhaseKind, int] = {}
    for cpu in range(4):
        w = Workload(2, cpu, 2_400_000_000, width=6, mix="tma")
        for s in range(600):
            t = s * SEC
            rates = w.rates_at(t)
            if rates.phase is PhaseKind.MIXED or w.rates_at(t + SEC - 1).phase is not rates.phase:
                continue
            td = w.topdown(t, t + SEC).fractions()
            assert sum(td[f] for f in TOPDOWN_FIELDS[:4]) == pytest.approx(1.0, abs=1e-6)
            kind = rates.regime
            seen[kind] = seen.get(kind, 0) + 1
            if kind is PhaseKind.BUSY:  # compute: mostly retiring, backend (if any) core bound
                assert td["retiring"] > 0.3 and td["retiring"] == max(td[f] for f in TOPDOWN_FIELDS[:4])
                assert td["mem_bound"] < td["be_bound"] / 2
            elif kind is PhaseKind.MEMORY:  # backend bound, on memory
                assert td["be_bound"] > 0.6 and td["mem_bound"] > 0.65 * td["be_bound"]
            elif kind is PhaseKind.BRANCHY:  # mispredicts
                assert td["bad_spec"] > 0.25 and td["bad_spec"] == max(td[f] for f in TOPDOWN_FIELDS[:4])
                assert td["br_mispredict"] > 0.7 * td["bad_spec"]
                assert rates.branch_miss_ratio >= 0.06
            elif kind is PhaseKind.FRONTEND:  # frontend bound, on fetch latency
                assert td["fe_bound"] > 0.35 and td["fe_bound"] == max(td[f] for f in TOPDOWN_FIELDS[:4])
                assert td["fetch_lat"] > 0.55 * td["fe_bound"]
            else:  # idle: the little that runs waits on cold caches and the frontend
                assert td["fe_bound"] > td["bad_spec"]
    assert set(seen) == {PhaseKind.IDLE, PhaseKind.BUSY, PhaseKind.MEMORY, PhaseKind.BRANCHY, PhaseKind.FRONTEND}


def test_the_classic_mix_keeps_its_three_regimes() -> None:
    w = Workload(1, 2, 2_400_000_000)
    assert {w.rates_at(s * SEC // 10).regime for s in range(3000)} == {
        PhaseKind.IDLE,
        PhaseKind.BUSY,
        PhaseKind.MEMORY,
    }
    with pytest.raises(ValueError, match="mix"):
        Workload(1, 2, 2_400_000_000, mix="nope")


# -- fixed counter 3 and PERF_METRICS ------------------------------------------------------------------------


def program_slots(m: SimMachine, cpu: int, *, metrics: bool = True, nibble: int = 0x3) -> None:
    dev = m.msr(cpu)
    dev.write(registers.IA32_FIXED_CTR_CTRL, nibble << 12)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, EN_3 if metrics else registers.global_ctrl_mask([], [3]))


@pytest.mark.parametrize(("model", "n"), [("icx", 4), ("spr", 8)])
def test_perf_metrics_holds_the_rounded_fractions_since_zeroed(model: str, n: int) -> None:
    m, clock = make(model=model, cpus=2)
    dev = m.msr(1)
    program_slots(m, 1)
    clock.set_ns(3 * SEC)
    value = dev.read(registers.MSR_PERF_METRICS)
    assert value >> 8 * n == 0  # level 2 bytes are zero (reserved) on icx
    td = m.workload(1).topdown(0, 3 * SEC)
    assert dev.read(registers.fixed_ctr(3)) == td.slots
    for got, want in zip(bytes_of(value, n), expected_bytes(td.fractions(), n), strict=True):
        assert abs(got - want) <= 0.5 + 1e-9
    assert m.rdpmc(1, METRICS_ECX) == value  # rdpmc type 0x2000
    assert m.rdpmc(1, SLOTS_ECX) == td.slots
    assert m.read_counters(1, 4, 0, metrics=True)[1] == [0, 0, 0, td.slots, value]

    # Zeroing both starts a new span: the fractions are then those of the slots counted since.
    dev.write(registers.fixed_ctr(3), 0)
    dev.write(registers.MSR_PERF_METRICS, 0)
    assert dev.read(registers.MSR_PERF_METRICS) == 0
    clock.set_ns(5 * SEC)
    td2 = m.workload(1).topdown(3 * SEC, 5 * SEC)
    assert dev.read(registers.fixed_ctr(3)) == td2.slots
    for got, want in zip(
        bytes_of(dev.read(registers.MSR_PERF_METRICS), n), expected_bytes(td2.fractions(), n), strict=True
    ):
        assert abs(got - want) <= 0.5 + 1e-9


def test_perf_metrics_counts_only_with_bit_48_and_fixed_counter_3() -> None:
    m, clock = make(model="spr", cpus=1)
    dev = m.msr(0)
    program_slots(m, 0, metrics=False)  # fixed counter 3 counts, bit 48 clear
    clock.set_ns(SEC)
    assert dev.read(registers.fixed_ctr(3)) > 0 and dev.read(registers.MSR_PERF_METRICS) == 0
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0)  # bit 48 set, fixed counter 3 off
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, EN_3)
    clock.set_ns(2 * SEC)
    assert dev.read(registers.MSR_PERF_METRICS) == 0
    dev.write(registers.IA32_FIXED_CTR_CTRL, registers.FIXED_EN_USR << 12)  # user mode only: the user slots' fractions
    clock.set_ns(4 * SEC)
    td = m.workload(0).topdown(2 * SEC, 4 * SEC, part="user")
    got = bytes_of(dev.read(registers.MSR_PERF_METRICS), 8)
    assert all(abs(g - e) <= 0.5 + 1e-9 for g, e in zip(got, expected_bytes(td.fractions(), 8), strict=True))


def test_perf_metrics_writes_load_and_reserved_bits_fault() -> None:
    m, clock = make(model="icx", cpus=1)
    dev = m.msr(0)
    with pytest.raises(MsrAccessError):
        dev.write(registers.MSR_PERF_METRICS, 1 << 32)  # level 2 bytes are reserved on Ice Lake
    dev.write(registers.fixed_ctr(3), 1000)
    dev.write(registers.MSR_PERF_METRICS, 0x40_30_20_6F)  # as Linux restores a context: fixed counter 3 first
    assert dev.read(registers.MSR_PERF_METRICS) == 0x40_30_20_6F  # reads back until new slots are counted
    # Counting on, the loaded fractions weigh as the 1000 slots they describe.
    program_slots(m, 0)
    clock.set_ns(SEC)
    td = m.workload(0).topdown(0, SEC)
    loaded = [0x6F, 0x20, 0x30, 0x40]  # of 255: the 1000 slots' categories are byte / 255 x 1000
    total = sum(loaded) * 1000 / 255 + td.slots
    for k, f in enumerate(TOPDOWN_FIELDS[:4]):
        want = 255 * (loaded[k] * 1000 / 255 + getattr(td, f)) / total
        assert abs(registers.perf_metrics_byte(dev.read(registers.MSR_PERF_METRICS), k) - want) <= 0.5 + 1e-9


def test_status_bit_48_when_fixed_counter_3_wraps_under_metrics() -> None:
    m, clock = make(model="spr", cpus=1, fixed_width=32)
    dev = m.msr(0)
    program_slots(m, 0)
    clock.set_ns(2 * SEC)
    slots = m.workload(0).topdown(0, 2 * SEC).slots
    assert slots > 1 << 32  # wrapped
    status = dev.read(registers.IA32_PERF_GLOBAL_STATUS)
    assert status & registers.fixed_bit(3) and status & registers.STATUS_PERF_METRICS_OVF
    assert dev.read(registers.fixed_ctr(3)) == slots & 0xFFFF_FFFF
    dev.write(registers.IA32_PERF_GLOBAL_STATUS_RESET, registers.fixed_bit(3) | registers.STATUS_PERF_METRICS_OVF)
    assert dev.read(registers.IA32_PERF_GLOBAL_STATUS) == 0


# -- the other methods' events --------------------------------------------------------------------------------

# /work/shared/perfmon/SKX/events/skylakex_core.json
UOPS_ISSUED_ANY = (0x0E, 0x01)
UOPS_RETIRED_RETIRE_SLOTS = (0xC2, 0x02)
IDQ_UOPS_NOT_DELIVERED_CORE = (0x9C, 0x01)
INT_MISC_RECOVERY_CYCLES = (0x0D, 0x01)
# /work/shared/perfmon/ADL/events/alderlake_gracemont_core.json
TOPDOWN_FE_BOUND_ALL = (0x71, 0x00)
TOPDOWN_BAD_SPECULATION_ALL = (0x73, 0x00)
TOPDOWN_BE_BOUND_ALL = (0x74, 0x00)
TOPDOWN_RETIRING_ALL = (0xC2, 0x00)


def count(m: SimMachine, clock: ManualClock, cpu: int, evtsels: list[int], t0: int, t1: int) -> list[int]:
    """Program the event selects plus the fixed trio, count over [t0, t1]: [cycles, events...]."""
    dev = m.msr(cpu)
    for i, v in enumerate(evtsels):
        dev.write(registers.evtsel(i), v)
    dev.write(registers.IA32_FIXED_CTR_CTRL, 0x333)
    clock.set_ns(t0)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, registers.global_ctrl_mask(range(len(evtsels)), range(3)))
    clock.set_ns(t1)
    dev.write(registers.IA32_PERF_GLOBAL_CTRL, 0)
    _, values = m.read_counters(cpu, 3, len(evtsels))
    return [values[1], *values[3:]]


def level1_error(got: tuple[float, float, float, float], td: dict[str, float]) -> float:
    return max(abs(g - td[f]) for g, f in zip(got, TOPDOWN_FIELDS[:4], strict=True))


@pytest.mark.parametrize("any_thread", [False, True])
def test_skx_four_event_formula_gives_the_truth(any_thread: bool) -> None:
    extra = registers.EVTSEL_ANY if any_thread else 0  # the _ANY events: AnyThread, one thread per core here
    recovery = sel(*INT_MISC_RECOVERY_CYCLES, extra=extra, cmask=1 if any_thread else 0)  # Linux: cmask=1
    evtsels = [sel(*e) for e in (UOPS_ISSUED_ANY, UOPS_RETIRED_RETIRE_SLOTS, IDQ_UOPS_NOT_DELIVERED_CORE)]
    for cpu in range(2):
        m, clock = make(cpus=2, mix="tma")
        t0, t1 = 7 * SEC + 123, 19 * SEC + 456_789  # mid-segment ends
        cycles, issued, retired, not_delivered, rec = count(m, clock, cpu, [*evtsels, recovery], t0, t1)
        slots = 4 * cycles  # SLOTS = 4 x CPU_CLK_UNHALTED.THREAD (topdown.md section 2)
        frontend = not_delivered / slots
        bad = (issued - retired + 4 * rec) / slots
        retiring = retired / slots
        backend = 1 - frontend - (issued + 4 * rec) / slots
        td = m.workload(cpu).topdown(t0, t1)
        assert td.slots == slots
        assert level1_error((retiring, bad, frontend, backend), td.fractions()) < 1e-6


def test_gracemont_events_give_the_truth_on_adl_e_cores() -> None:
    m, clock = make(model="adl", cpus=2)
    e = 1
    evtsels = [sel(*ev) for ev in (TOPDOWN_FE_BOUND_ALL, TOPDOWN_BAD_SPECULATION_ALL, TOPDOWN_BE_BOUND_ALL)]
    evtsels.append(sel(*TOPDOWN_RETIRING_ALL))
    t0, t1 = 3 * SEC + 77, 40 * SEC + 5
    cycles, fe, bad, be, ret = count(m, clock, e, evtsels, t0, t1)
    slots = 5 * cycles  # SLOTS = 5 x CPU_CLK_UNHALTED.CORE on Gracemont
    td = m.workload(e).topdown(t0, t1)
    assert td.slots == slots
    assert level1_error((ret / slots, bad / slots, fe / slots, be / slots), td.fractions()) < 1e-6
    # Gracemont's bad speculation as perf and toplev take it: the remainder.
    assert abs((1 - (ret + fe + be) / slots) - td.fractions()["bad_spec"]) < 1e-6


def test_other_encodings_keep_the_hash_model() -> None:
    # TOPDOWN_RETIRING.ALL's encoding means nothing on a Skylake P-core, and Skylake's on an E-core.
    m, clock = make(model="adl", cpus=2)
    p_ret, e_ret = sel(*TOPDOWN_RETIRING_ALL), sel(*UOPS_RETIRED_RETIRE_SLOTS)
    (_, on_p), (_, on_e) = (count(m, clock, 0, [p_ret], 0, SEC), count(m, clock, 1, [e_ret], SEC, 2 * SEC))
    assert on_p != m.workload(0).topdown(0, SEC).retiring
    assert on_e != m.workload(1).topdown(SEC, 2 * SEC).retiring
    w = m.workload(0)
    ins = w.cumulative(SEC).total.instructions - w.cumulative(0).total.instructions
    assert 0 < on_p < ins  # a fraction of instructions, as every unknown event
