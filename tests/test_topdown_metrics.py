"""pmutop.derive.topdown: hand-computed TMA fractions for every method, normalisation, combine, and a property test."""

from __future__ import annotations

import random

import pytest

from pmutop.derive import topdown
from pmutop.derive.topdown import LEVEL1, TMA_FIELDS, combine, compute, dominant, required_keys, slots_of

L2_PAIRS = (
    ("tma_heavy_operations", "tma_light_operations", "tma_retiring"),
    ("tma_branch_mispredicts", "tma_machine_clears", "tma_bad_speculation"),
    ("tma_fetch_latency", "tma_fetch_bandwidth", "tma_frontend_bound"),
    ("tma_memory_bound", "tma_core_bound", "tma_backend_bound"),
)


def level1(f: dict[str, float | None]) -> tuple[float | None, ...]:
    return tuple(f[name] for name in LEVEL1)


def approx(*values: float) -> object:
    return pytest.approx(values, abs=1e-12)


def all_none(f: dict[str, float | None]) -> bool:
    return list(f) == list(TMA_FIELDS) and all(v is None for v in f.values())


# --- one example per method: (retiring, bad speculation, frontend, backend) worked out by hand -----------

SLOTS4 = {
    "cycles": 1000,  # SLOTS = 4000
    "uops_issued_any": 2000,
    "uops_retired_retire_slots": 1800,  # retiring 1800/4000 = 0.45
    "idq_uops_not_delivered_core": 800,  # frontend 800/4000 = 0.2
    "int_misc_recovery_cycles": 50,  # bad (2000 − 1800 + 4×50)/4000 = 0.1; backend 1 − 0.2 − 2200/4000 = 0.25
}

PERF_METRICS = {
    "slots": 10000,
    "topdown_retiring": 2500,
    "topdown_bad_spec": 1000,
    "topdown_fe_bound": 2000,
    "topdown_be_bound": 4500,
}
PERF_METRICS_L2 = {
    **PERF_METRICS,
    "topdown_heavy_ops": 500,
    "topdown_br_mispredict": 800,
    "topdown_fetch_lat": 1500,
    "topdown_mem_bound": 3000,
}

GRACEMONT = {
    "cycles": 1000,  # SLOTS = 5 × 1000
    "topdown_retiring_all": 2000,  # 0.4
    "topdown_fe_bound_all": 1000,  # 0.2
    "topdown_be_bound_all": 1500,  # 0.3; bad speculation is the remainder, 0.1
}


def test_fields_and_tables_cover_everything() -> None:
    assert LEVEL1 == ("tma_retiring", "tma_bad_speculation", "tma_frontend_bound", "tma_backend_bound")
    assert TMA_FIELDS[:4] == LEVEL1
    assert len(TMA_FIELDS) == 12 and len(set(TMA_FIELDS)) == 12
    assert set(topdown.DESCRIPTIONS) == set(TMA_FIELDS) == set(topdown.LABELS)
    assert all(d and "\n" not in d for d in topdown.DESCRIPTIONS.values())
    assert set(topdown.FORMULAS) == set(topdown.METHODS)
    for method in topdown.METHODS:
        assert required_keys(method), method
    assert required_keys(None) == required_keys("nehalem") == ()


def test_slots4() -> None:
    f = compute("slots4", SLOTS4)
    assert level1(f) == approx(0.45, 0.1, 0.2, 0.25)
    assert all(f[name] is None for name in TMA_FIELDS[4:])  # no level 2 from the 4-wide formula
    assert slots_of("slots4", SLOTS4) == 4000


def test_slots4_smt_halves_core_clocks_and_recovery() -> None:
    # THREAD_ANY and RECOVERY_CYCLES_ANY count for the whole core: each thread gets half.
    counts = {
        "cpu_clk_unhalted_thread_any": 2000,  # CORE_CLKS 1000, SLOTS 4000
        "uops_issued_any": 2000,
        "uops_retired_retire_slots": 1800,
        "idq_uops_not_delivered_core": 800,
        "int_misc_recovery_cycles_any": 100,  # Recovery 50
    }
    assert slots_of("slots4_smt", counts) == 4000
    assert level1(compute("slots4_smt", counts)) == approx(0.45, 0.1, 0.2, 0.25)


def test_smt_siblings_combined_equal_the_physical_core() -> None:
    # toplev's per-core view sums both threads' counts; slot-weighted combine of the threads gives the same.
    a = {
        "cpu_clk_unhalted_thread_any": 2000,
        "uops_issued_any": 2000,
        "uops_retired_retire_slots": 1800,
        "idq_uops_not_delivered_core": 800,
        "int_misc_recovery_cycles_any": 100,
    }
    b = {**a, "uops_issued_any": 1000, "uops_retired_retire_slots": 900, "idq_uops_not_delivered_core": 1600}
    # b: frontend 0.4, bad (100 + 200)/4000 = 0.075, retiring 0.225, backend 1 − 0.4 − 1200/4000 = 0.3
    assert level1(compute("slots4_smt", b)) == approx(0.225, 0.075, 0.4, 0.3)
    core = {k: a[k] + b[k] for k in a}
    both = combine([("slots4_smt", a), ("slots4_smt", b)])
    assert level1(both) == approx(0.3375, 0.0875, 0.3, 0.275)
    assert level1(both) == approx(*level1(compute("slots4_smt", core)))


def test_gracemont_five_wide_bad_speculation_is_the_remainder() -> None:
    assert slots_of("gracemont", GRACEMONT) == 5000
    assert level1(compute("gracemont", GRACEMONT)) == approx(0.4, 0.1, 0.2, 0.3)
    # A counted TOPDOWN_BAD_SPECULATION.ALL does not change it (perf and toplev use the remainder there).
    counted = {**GRACEMONT, "topdown_bad_speculation_all": 4000}
    assert level1(compute("gracemont", counted)) == approx(0.4, 0.1, 0.2, 0.3)


def test_crestmont_six_wide() -> None:
    counts = {
        "cycles": 1000,  # SLOTS 6000
        "topdown_retiring_all": 1800,
        "topdown_bad_speculation_all": 600,
        "topdown_fe_bound_all": 1200,
        "topdown_be_bound_all": 2400,
    }
    assert slots_of("crestmont", counts) == 6000
    assert level1(compute("crestmont", counts)) == approx(0.3, 0.1, 0.2, 0.4)


def test_skymont_eight_wide() -> None:
    counts = {
        "cycles": 1000,  # SLOTS 8000
        "topdown_retiring_all": 4000,
        "topdown_bad_speculation_all": 800,
        "topdown_fe_bound_all": 1600,
        "topdown_be_bound_all": 1600,
    }
    assert slots_of("skymont", counts) == 8000
    assert level1(compute("skymont", counts)) == approx(0.5, 0.1, 0.2, 0.2)
    # Separately counted categories that cover only 95% of the slots are scaled up to 100%.
    short = {**counts, "topdown_be_bound_all": 1200}  # sum 7600
    assert level1(compute("skymont", short)) == approx(4000 / 7600, 800 / 7600, 1600 / 7600, 1200 / 7600)


def test_zen4_six_wide_leaves_smt_contention_out() -> None:
    counts = {
        "ls_not_halted_cyc": 1000,  # SLOTS 6000
        "ex_ret_ops": 2400,  # 0.4
        "de_src_op_disp_all": 3000,  # bad (3000 − 2400)/6000 = 0.1
        "de_no_dispatch_per_slot_no_ops_from_frontend": 1200,  # 0.2
        "de_no_dispatch_per_slot_backend_stalls": 1500,  # 0.25; the other 5% went to the SMT sibling
    }
    assert slots_of("zen4", counts) == 6000
    assert level1(compute("zen4", counts)) == approx(2400 / 5700, 600 / 5700, 1200 / 5700, 1500 / 5700)


def test_zen5_eight_wide() -> None:
    counts = {
        "ls_not_halted_cyc": 1000,
        "ex_ret_ops": 4000,
        "de_src_op_disp_all": 4800,
        "de_no_dispatch_per_slot_no_ops_from_frontend": 1600,
        "de_no_dispatch_per_slot_backend_stalls": 1600,
    }
    assert slots_of("zen5", counts) == 8000
    assert level1(compute("zen5", counts)) == approx(0.5, 0.1, 0.2, 0.2)
    assert required_keys("zen5") == required_keys("zen4")
    assert required_keys("zen4") == (
        "ls_not_halted_cyc",
        "de_no_dispatch_per_slot_no_ops_from_frontend",
        "de_no_dispatch_per_slot_backend_stalls",
        "de_src_op_disp_all",
        "ex_ret_ops",
    )


def test_perf_metrics_level1_and_level2() -> None:
    f = compute("perf_metrics", PERF_METRICS)
    assert level1(f) == approx(0.25, 0.1, 0.2, 0.45)
    assert all(f[name] is None for name in TMA_FIELDS[4:])  # before Sapphire Rapids: no level 2
    assert slots_of("perf_metrics", PERF_METRICS) == 10000

    f = compute("perf_metrics", PERF_METRICS_L2)
    assert level1(f) == approx(0.25, 0.1, 0.2, 0.45)
    assert (f["tma_heavy_operations"], f["tma_light_operations"]) == approx(0.05, 0.2)
    assert (f["tma_branch_mispredicts"], f["tma_machine_clears"]) == approx(0.08, 0.02)
    assert (f["tma_fetch_latency"], f["tma_fetch_bandwidth"]) == approx(0.15, 0.05)
    assert (f["tma_memory_bound"], f["tma_core_bound"]) == approx(0.3, 0.15)


def test_perf_metrics_level2_pair_only_where_counted() -> None:
    f = compute("perf_metrics", {**PERF_METRICS, "topdown_mem_bound": 3000})
    assert (f["tma_memory_bound"], f["tma_core_bound"]) == approx(0.3, 0.15)
    assert f["tma_heavy_operations"] is f["tma_light_operations"] is None


def test_perf_metrics_categories_not_summing_to_slots() -> None:
    # PERF_METRICS bytes 0x40, 0x20, 0x40, 0x60 sum to 0x100 after the CPU's rounding; the kernel reports
    # slots × byte / 0xFF each, so the four add up to more than SLOTS. pmutop divides by their sum.
    slots = 25500
    counts = {
        "slots": slots,
        "topdown_retiring": slots * 0x40 // 0xFF,
        "topdown_bad_spec": slots * 0x20 // 0xFF,
        "topdown_fe_bound": slots * 0x40 // 0xFF,
        "topdown_be_bound": slots * 0x60 // 0xFF,
    }
    assert sum(v for k, v in counts.items() if k != "slots") == 25600
    f = compute("perf_metrics", counts)
    assert level1(f) == approx(0.25, 0.125, 0.25, 0.375)
    assert sum(level1(f)) == pytest.approx(1.0, abs=1e-12)  # the kernel's own ratios would sum to 256/255


def test_perf_metrics_level2_above_its_parent_is_clamped() -> None:
    # 8-bit rounding: heavy operations a little above retiring -> heavy = retiring, light = 0.
    f = compute("perf_metrics", {**PERF_METRICS, "topdown_heavy_ops": 2600, "topdown_br_mispredict": -5})
    assert (f["tma_heavy_operations"], f["tma_light_operations"]) == approx(0.25, 0.0)
    assert (f["tma_branch_mispredicts"], f["tma_machine_clears"]) == approx(0.0, 0.1)


def test_negative_skew_is_clamped_and_renormalised() -> None:
    # Backend = 1 − 0.3 − 2900/4000 = −0.025 -> 0; the others (sum 1.025) are scaled to sum 1.
    counts = {
        "cycles": 1000,
        "uops_issued_any": 2900,
        "uops_retired_retire_slots": 2800,
        "idq_uops_not_delivered_core": 1200,
        "int_misc_recovery_cycles": 0,
    }
    f = compute("slots4", counts)
    assert level1(f) == approx(0.7 / 1.025, 0.025 / 1.025, 0.3 / 1.025, 0.0)
    assert f["tma_backend_bound"] == 0.0


def test_over_one_skew_is_clamped() -> None:
    # More retired ops than slots and fewer dispatched than retired: retiring 1.1667 -> 1, bad −10/600 -> 0.
    counts = {
        "ls_not_halted_cyc": 100,
        "ex_ret_ops": 700,
        "de_src_op_disp_all": 690,
        "de_no_dispatch_per_slot_no_ops_from_frontend": 0,
        "de_no_dispatch_per_slot_backend_stalls": 0,
    }
    assert level1(compute("zen4", counts)) == approx(1.0, 0.0, 0.0, 0.0)
    # Categories summing to 110% of the slots are scaled down.
    over = {
        "cycles": 1000,
        "topdown_retiring_all": 3000,
        "topdown_bad_speculation_all": 600,
        "topdown_fe_bound_all": 1800,
        "topdown_be_bound_all": 1200,
    }
    assert level1(compute("crestmont", over)) == approx(0.5 / 1.1, 0.1 / 1.1, 0.3 / 1.1, 0.2 / 1.1)


@pytest.mark.parametrize(
    ("method", "counts", "zeroed"),
    [
        ("slots4", SLOTS4, "cycles"),
        ("perf_metrics", PERF_METRICS, "slots"),
        ("gracemont", GRACEMONT, "cycles"),
    ],
)
def test_zero_slots_is_none(method: str, counts: dict[str, int], zeroed: str) -> None:
    assert all_none(compute(method, {**counts, zeroed: 0}))
    assert all_none(compute(method, {**counts, zeroed: -1}))
    assert slots_of(method, {**counts, zeroed: 0}) == 0


def test_nothing_counted_is_none() -> None:
    empty = dict.fromkeys(required_keys("perf_metrics"), 0) | {"slots": 1000}
    assert all_none(compute("perf_metrics", empty))


@pytest.mark.parametrize("method", topdown.METHODS)
def test_missing_keys_are_none(method: str) -> None:
    full = dict.fromkeys(required_keys(method), 1000)
    assert compute(method, full)["tma_retiring"] is not None
    for key in required_keys(method):
        partial = {k: v for k, v in full.items() if k != key}
        assert all_none(compute(method, partial)), key


def test_unknown_method_is_none() -> None:
    assert all_none(compute(None, SLOTS4))
    assert all_none(compute("nehalem", SLOTS4))
    assert slots_of(None, SLOTS4) is None and slots_of("nehalem", SLOTS4) is None
    assert slots_of("slots4", {}) is None


def test_combine_weights_p_and_e_cores_by_slots() -> None:
    # P-core: 10000 slots at (0.25, 0.1, 0.2, 0.45); E-core (Gracemont): 5000 slots at (0.4, 0.1, 0.2, 0.3).
    row = combine([("perf_metrics", PERF_METRICS_L2), ("gracemont", GRACEMONT)])
    assert level1(row) == approx(0.3, 0.1, 0.2, 0.4)
    # The E-core has no level 2, so the all row has none (a P-core-only share would not add up).
    assert all(row[name] is None for name in TMA_FIELDS[4:])


def test_combine_level2_when_every_cpu_has_it() -> None:
    other = {**PERF_METRICS_L2, "slots": 30000, "topdown_retiring": 7500, "topdown_bad_spec": 3000}
    other |= {"topdown_fe_bound": 6000, "topdown_be_bound": 13500, "topdown_heavy_ops": 4500}
    row = combine([("perf_metrics", PERF_METRICS_L2), ("perf_metrics", other)])
    assert level1(row) == approx(0.25, 0.1, 0.2, 0.45)
    assert row["tma_heavy_operations"] == pytest.approx((10000 * 0.05 + 30000 * 0.15) / 40000)
    for child, sibling, parent in L2_PAIRS:
        assert row[child] + row[sibling] == pytest.approx(row[parent])


def test_combine_skips_idle_and_unmeasured_cpus() -> None:
    idle = {**GRACEMONT, "cycles": 0}
    row = combine([("slots4", SLOTS4), ("gracemont", idle), (None, {"cycles": 5}), ("zen4", {"ex_ret_ops": 1})])
    assert level1(row) == approx(0.45, 0.1, 0.2, 0.25)
    assert all_none(combine([]))
    assert all_none(combine([("gracemont", idle)]))


def test_dominant() -> None:
    assert dominant(compute("perf_metrics", PERF_METRICS)) == "Backend bound"
    assert dominant(compute("slots4", SLOTS4)) == "Retiring"
    assert dominant(compute("slots4", {})) is None
    assert dominant({}) is None
    tie = dict.fromkeys(LEVEL1, 0.25)
    assert dominant(tie) == "Retiring"  # the first in LEVEL1 order


# --- property: level 1 always sums to 1 when defined, whatever the counts ---------------------------------


def _random_counts(rng: random.Random, method: str) -> dict[str, int]:
    scale = rng.choice((1, 10, 1000, 10**6, 10**9))
    counts = {k: rng.randint(-scale // 20, scale) for k in required_keys(method)}
    if rng.random() < 0.5:
        counts.update({k: rng.randint(-scale // 20, scale) for k in topdown.level2_keys(method)})
    if rng.random() < 0.1:  # idle / broken intervals
        counts[rng.choice(list(counts))] = 0
    return counts


def _check(f: dict[str, float | None]) -> None:
    values = level1(f)
    if values[0] is None:
        assert all_none(f)
        return
    assert all(v is not None and 0.0 <= v <= 1.0 for v in values)
    assert sum(v for v in values if v is not None) == pytest.approx(1.0, abs=1e-9)
    for child, sibling, parent in L2_PAIRS:
        if f[child] is None:
            assert f[sibling] is None
            continue
        assert 0.0 <= f[child] <= f[parent] + 1e-12
        assert 0.0 <= f[sibling] <= f[parent] + 1e-12
        assert f[child] + f[sibling] == pytest.approx(f[parent], abs=1e-12)


def test_level1_always_sums_to_one() -> None:
    rng = random.Random(20240611)
    defined = 0
    for _ in range(4000):
        method = rng.choice(topdown.METHODS)
        f = compute(method, _random_counts(rng, method))
        _check(f)
        defined += f["tma_retiring"] is not None
    assert defined > 2000  # the property was actually exercised


def test_combined_row_always_sums_to_one() -> None:
    rng = random.Random(7)
    for _ in range(500):
        parts = []
        for _ in range(rng.randint(0, 6)):
            method = rng.choice((*topdown.METHODS, None))
            parts.append((method, _random_counts(rng, method) if method else {}))
        _check(combine(parts))
