"""How top-down is measured per CPU and core type (pmutop.pmu.topdown_plan), from real CPUID dumps, with no
perfmon tables (the encodings are built in) and with Intel's real tables as a cross-check (../shared; those
tests skip without it)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from helpers.cpuid_dumps import cpuid_fn, load_shared_dump
from helpers.flags import SHARED_PERFMON

from pmutop.core.sysroot import Sysroot
from pmutop.pmu import topdown_plan
from pmutop.pmu.cpuid_decode import (
    CoreType,
    CpuIdentity,
    Leaf23Info,
    PerfmonInfo,
    decode_core_type,
    decode_identity,
    decode_perfmon,
)
from pmutop.pmu.perfmon import AnyThreadSpec, PerfmonTables
from pmutop.pmu.registers import RawEvent
from pmutop.pmu.uarch import core_uarch

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "topdown"
P_CORE = CoreType(0x40, 1, "P", "P-core (Core)")
E_CORE = CoreType(0x20, 1, "E", "E-core (Atom)")


def ident(
    family: int, model: int, stepping: int = 0, *, vendor: str = "GenuineIntel", hybrid: bool = False
) -> CpuIdentity:
    return CpuIdentity(vendor, family, model, stepping, None, 0x20, False, None, True, hybrid, None)


def pmu(version: int, gp: int = 8, fixed_mask: int = 0x7, *, leaf23: bool = False) -> PerfmonInfo:
    l23 = Leaf23Info(3, False, False, False, (1 << gp) - 1, fixed_mask) if leaf23 else None
    return PerfmonInfo(
        version=version,
        gp_counters=gp,
        gp_mask=(1 << gp) - 1,
        gp_width=48,
        fixed_counters=fixed_mask.bit_count(),
        fixed_mask=fixed_mask,
        fixed_width=48,
        ebx_length=7,
        unavailable_events=(),
        available_events=(),
        anythread_deprecated=version >= 5,
        leaf23=l23,
        notes=(),
    )


def atom(native: int) -> CoreType:
    return CoreType(0x20, native, "E", "E-core (Atom)")


@pytest.fixture
def real() -> PerfmonTables:
    if not (SHARED_PERFMON / "mapfile.csv").is_file():
        pytest.skip("shared/perfmon (Intel's perfmon tables) is not present")
    return PerfmonTables(SHARED_PERFMON)


def dump_cpu(fragment: str, cpu: int) -> tuple[CpuIdentity, CoreType | None, PerfmonInfo, object]:
    dumps = load_shared_dump(fragment)
    if dumps is None:
        pytest.skip(f"no CPUID dump matching {fragment!r} in shared/cpuid")
    fn = cpuid_fn(dumps[cpu])
    return decode_identity(fn), decode_core_type(fn), decode_perfmon(fn), fn


def raws(plan: topdown_plan.TopdownPlan) -> dict[str, tuple[RawEvent | None, int | None]]:
    return {e.key: (e.raw, e.fixed_index) for e in plan.events}


# --- transcribed rows (always run) --------------------------------------------------------------------


def test_skylake_x_without_smt_is_the_four_event_formula() -> None:
    plan = topdown_plan.plan_topdown(
        ident(6, 0x55, 4), None, pmu(4, 4), perf_capabilities=0x33C5, smt=False, tables=None, backend="msr"
    )
    assert (plan.method, plan.detail, plan.gp_counters, plan.width, plan.approximate) == (
        "slots4",
        "four-event formula; encodings built into pmutop",
        4,
        4,
        False,
    )
    assert plan.keys == (
        "uops_issued_any",
        "uops_retired_retire_slots",
        "idq_uops_not_delivered_core",
        "int_misc_recovery_cycles",
        "cycles",
    )
    assert raws(plan) == {
        "uops_issued_any": (RawEvent(0x0E, 0x01), None),
        "uops_retired_retire_slots": (RawEvent(0xC2, 0x02), None),
        "idq_uops_not_delivered_core": (RawEvent(0x9C, 0x01), None),
        "int_misc_recovery_cycles": (RawEvent(0x0D, 0x01), None),
        "cycles": (RawEvent(0x3C, 0x00), 1),
    }
    assert not any(isinstance(e, AnyThreadSpec) for e in plan.events)
    assert plan.costs_counters and not plan.enabled(None) and plan.enabled(True) and not plan.enabled(False)


def test_skylake_x_with_smt_counts_per_core_with_anythread() -> None:
    plan = topdown_plan.plan_topdown(
        ident(6, 0x55, 4), None, pmu(4, 4), perf_capabilities=None, smt=True, tables=None, backend="perf"
    )
    assert (plan.method, plan.detail, plan.approximate) == (
        "slots4_smt",
        "four-event formula, per physical core (AnyThread); encodings built into pmutop",
        False,
    )
    assert plan.keys == (
        "uops_issued_any",
        "uops_retired_retire_slots",
        "idq_uops_not_delivered_core",
        "int_misc_recovery_cycles_any",
        "cpu_clk_unhalted_thread_any",
    )
    anys = {e.key: e for e in plan.events if isinstance(e, AnyThreadSpec)}
    assert set(anys) == {"int_misc_recovery_cycles_any", "cpu_clk_unhalted_thread_any"}
    assert all(e.any_thread for e in anys.values())
    # THREAD_ANY on its general-counter encoding (THREAD_P_ANY): it must not share fixed counter 1 with `cycles`.
    thread_any = anys["cpu_clk_unhalted_thread_any"]
    assert (thread_any.raw, thread_any.fixed_index, thread_any.name) == (
        RawEvent(0x3C, 0x00),
        None,
        "CPU_CLK_UNHALTED.THREAD_ANY",
    )
    assert anys["int_misc_recovery_cycles_any"].raw == RawEvent(0x0D, 0x01)
    assert plan.gp_counters == 5


@pytest.mark.parametrize(
    ("perfmon", "backend", "fmt", "why"),
    [
        (pmu(5, 4), "msr", True, "PMU v5+ has no AnyThread"),
        (pmu(2, 4), "msr", True, "PMU v2 has no AnyThread"),
        (pmu(4, 4), "perf", False, "the kernel offers no AnyThread (no `any` format)"),
    ],
)
def test_anythread_only_on_pmu_v3_v4_else_an_approximation(
    perfmon: PerfmonInfo, backend: str, fmt: bool, why: str
) -> None:
    plan = topdown_plan.plan_topdown(
        ident(6, 0x55, 4),
        None,
        perfmon,
        perf_capabilities=None,
        smt=True,
        tables=None,
        backend=backend,
        any_thread_format=fmt,
    )
    assert (plan.method, plan.approximate) == ("slots4", True)
    assert (
        plan.detail == f"four-event formula, per thread (approximation: SMT on and {why}); encodings built into pmutop"
    )
    assert not any(isinstance(e, AnyThreadSpec) for e in plan.events)


def test_v3_with_smt_uses_anythread() -> None:
    plan = topdown_plan.plan_topdown(
        ident(6, 0x55, 4), None, pmu(3, 4), perf_capabilities=None, smt=True, tables=None, backend="msr"
    )
    assert plan.method == "slots4_smt"


def test_gracemont_from_the_built_in_table() -> None:
    plan = topdown_plan.plan_topdown(
        ident(6, 0x97, 2, hybrid=True), E_CORE, pmu(5, 6), perf_capabilities=None, smt=False,
        tables=None, backend="msr",
    )  # fmt: skip
    assert (plan.method, plan.detail, plan.width, plan.gp_counters) == (
        "gracemont",
        "E-core events (Gracemont, 5 wide); encodings built into pmutop",
        5,
        4,
    )
    assert raws(plan) == {
        "topdown_fe_bound_all": (RawEvent(0x71, 0x00), None),
        "topdown_bad_speculation_all": (RawEvent(0x73, 0x00), None),
        "topdown_be_bound_all": (RawEvent(0x74, 0x00), None),
        "topdown_retiring_all": (RawEvent(0xC2, 0x00), None),
        "cycles": (RawEvent(0x3C, 0x00), 1),
    }


def test_without_tables_the_formula_cores_measure_from_the_built_in_events() -> None:
    for core_type, model, method in ((None, 0x55, "slots4"), (E_CORE, 0x97, "gracemont")):
        plan = topdown_plan.plan_topdown(
            ident(6, model, 4, hybrid=core_type is not None), core_type, pmu(4, 4), perf_capabilities=None,
            smt=False, tables=None, backend="msr",
        )  # fmt: skip
        assert plan.method == method and plan.enabled(True)
        assert plan.to_dict()["encodings"] == "encodings built into pmutop"


def test_a_core_without_built_in_events_says_so() -> None:
    plan = topdown_plan.plan_topdown(
        ident(6, 0x66, 3), None, pmu(4, 4), perf_capabilities=None, smt=False, tables=None, backend="msr"
    )
    assert plan.detail == "unavailable: pmutop ships no top-down events for Palm Cove"


def test_perf_metrics_needs_no_tables_and_costs_no_counters() -> None:
    spr = topdown_plan.plan_topdown(
        ident(6, 0x8F, 8), None, pmu(5, 8, 0xF), perf_capabilities=1 << 15, smt=True, tables=None, backend="msr"
    )
    assert (spr.method, spr.level2, spr.detail, spr.gp_counters) == (
        "perf_metrics",
        True,
        "PERF_METRICS, level 1 and 2",
        0,
    )
    assert spr.keys == (
        "slots",
        "topdown_retiring",
        "topdown_bad_spec",
        "topdown_fe_bound",
        "topdown_be_bound",
        "topdown_heavy_ops",
        "topdown_br_mispredict",
        "topdown_fetch_lat",
        "topdown_mem_bound",
    )
    assert [(e.key, e.fixed_index, e.raw) for e in spr.events] == [("slots", 3, None)]
    assert spr.enabled(None) and not spr.enabled(False)
    icx = topdown_plan.plan_topdown(
        ident(6, 0x6A, 6), None, pmu(5, 8, 0xF), perf_capabilities=1 << 15, smt=True, tables=None, backend="msr"
    )
    assert (icx.method, icx.level2, icx.detail, len(icx.keys)) == ("perf_metrics", False, "PERF_METRICS, level 1", 5)


def test_perf_metrics_needs_the_capability_bit_and_fixed_counter_3() -> None:
    clear = topdown_plan.plan_topdown(
        ident(6, 0x8F, 8), None, pmu(5, 8, 0xF), perf_capabilities=0x33C5 & ~(1 << 15), smt=False, tables=None,
        backend="msr",
    )  # fmt: skip
    assert clear.detail == "unavailable: IA32_PERF_CAPABILITIES bit 15 (PERF_METRICS) is clear"
    no_fixed3 = topdown_plan.plan_topdown(
        ident(6, 0x8F, 8), None, pmu(5, 8, 0x7), perf_capabilities=1 << 15, smt=False, tables=None, backend="msr"
    )
    assert no_fixed3.detail == "unavailable: no fixed counter 3 (TOPDOWN.SLOTS) in CPUID"
    unread = topdown_plan.plan_topdown(
        ident(6, 0x8F, 8), None, pmu(5, 8, 0xF), perf_capabilities=None, smt=False, tables=None, backend="msr"
    )
    assert unread.detail == "PERF_METRICS, level 1 and 2 (assumed from the model: PERF_CAPABILITIES not read)"


def test_perf_backend_follows_the_kernels_topdown_events() -> None:
    l1 = ("slots", *topdown_plan.PERF_TOPDOWN_L1)
    args = {"perf_capabilities": None, "smt": False, "tables": None, "backend": "perf"}
    spr = topdown_plan.plan_topdown(
        ident(6, 0x8F, 8), None, pmu(5, 8, 0xF), perf_events=(*l1, *topdown_plan.PERF_TOPDOWN_L2), **args
    )
    assert (spr.method, spr.level2, spr.detail) == ("perf_metrics", True, "perf topdown events, level 1 and 2")
    older_kernel = topdown_plan.plan_topdown(ident(6, 0x8F, 8), None, pmu(5, 8, 0xF), perf_events=l1, **args)
    assert (older_kernel.level2, older_kernel.detail) == (False, "perf topdown events, level 1")
    none = topdown_plan.plan_topdown(ident(6, 0x8F, 8), None, pmu(5, 8, 0xF), perf_events=("cycles-ct",), **args)
    assert none.method is None and none.detail.startswith("unavailable: the kernel lists no topdown events")
    # An E-core PMU lists topdown-* (general-counter events) but no slots: never the PERF_METRICS group.
    grt = topdown_plan.plan_topdown(
        ident(6, 0x97, 2, hybrid=True), E_CORE, pmu(5, 6), perf_events=topdown_plan.PERF_TOPDOWN_L1, **args
    )
    assert grt.method != "perf_metrics"


def test_amd_through_perf_only() -> None:
    zen4_args = {"perf_capabilities": None, "smt": True, "tables": None}
    zen4 = topdown_plan.plan_topdown(
        ident(0x19, 0x61, 2, vendor="AuthenticAMD"), None, pmu(0, 0, 0), backend="perf", **zen4_args
    )
    assert (zen4.method, zen4.width, zen4.gp_counters, zen4.detail) == (
        "zen4",
        6,
        5,
        "pipeline utilisation events (Zen 4, 6 wide)",
    )
    # Linux tools/perf/pmu-events/arch/x86/amdzen4: other.json (de_*), core.json (ex_ret_ops, ls_not_halted_cyc).
    assert raws(zen4) == {
        "ls_not_halted_cyc": (RawEvent(0x76, 0x00), None),
        "de_no_dispatch_per_slot_no_ops_from_frontend": (RawEvent(0x1A0, 0x01), None),
        "de_no_dispatch_per_slot_backend_stalls": (RawEvent(0x1A0, 0x1E), None),
        "de_src_op_disp_all": (RawEvent(0xAA, 0x07), None),
        "ex_ret_ops": (RawEvent(0xC1, 0x00), None),
    }
    zen5 = topdown_plan.plan_topdown(
        ident(0x1A, 0x44, 0, vendor="AuthenticAMD"), None, pmu(0, 0, 0), backend="perf", **zen4_args
    )
    assert (zen5.method, zen5.width, zen5.keys) == ("zen5", 8, zen4.keys)
    msr = topdown_plan.plan_topdown(
        ident(0x19, 0x61, 2, vendor="AuthenticAMD"), None, pmu(0, 0, 0), backend="msr", **zen4_args
    )
    assert msr.detail == "unavailable: AMD top-down is counted through perf only (--backend perf)"
    zen3 = topdown_plan.plan_topdown(
        ident(0x19, 0x21, 0, vendor="AuthenticAMD"), None, pmu(0, 0, 0), backend="perf", **zen4_args
    )
    assert zen3.method is None and "Zen 3 has no pipeline-utilisation events" in zen3.detail


def test_cores_without_a_method_say_why() -> None:
    args = {"perf_capabilities": None, "smt": False, "tables": None, "backend": "msr"}
    darkmont = topdown_plan.plan_topdown(ident(6, 0xDD, 1), None, pmu(6, 8), **args)
    assert darkmont.method is None and darkmont.core == "Darkmont"
    assert (
        darkmont.detail == "unavailable: no top-down method in pmutop for this core yet (its slot width is not in "
        "pmutop's sources)"
    )
    hidden = topdown_plan.plan_topdown(ident(6, 0x97, 2, hybrid=True), None, pmu(5, 6), **args)
    assert hidden.detail == "unavailable: hybrid CPU without a core type (CPUID 0x1A): the core cannot be told"
    nehalem = topdown_plan.plan_topdown(
        dataclasses.replace(ident(6, 0x1A, 5), uarch="Nehalem"), None, pmu(3, 4), **args
    )
    assert nehalem.detail == "unavailable: no top-down method known for Nehalem"
    with pytest.raises(ValueError, match="backend"):
        topdown_plan.plan_topdown(
            ident(6, 0x55, 4), None, pmu(4, 4), perf_capabilities=None, smt=False, tables=None, backend="x"
        )


def test_core_uarch_table() -> None:
    assert core_uarch("GenuineIntel", 6, 0x55).name == "Skylake"  # type: ignore[union-attr]
    assert core_uarch("GenuineIntel", 6, 0xC5, 0x20, 2).name == "Crestmont"  # type: ignore[union-attr]
    assert core_uarch("GenuineIntel", 6, 0xC5, 0x20, 3).name == "Skymont"  # type: ignore[union-attr]
    assert core_uarch("GenuineIntel", 6, 0xBD, 0x40, 3).topdown == "perf_metrics_l2"  # type: ignore[union-attr]
    assert core_uarch("GenuineIntel", 6, 0x8C).topdown == "perf_metrics"  # type: ignore[union-attr]
    assert core_uarch("GenuineIntel", 6, 0x97) is None  # hybrid model, core type unknown
    assert core_uarch("GenuineIntel", 6, 0x1A) is None


def test_smt_from_sysfs_per_core(tmp_path: Path) -> None:
    topo = tmp_path / "sys/devices/system/cpu"
    for cpu, siblings in ((0, "0,4"), (1, "1"), (2, "2-3")):
        (topo / f"cpu{cpu}/topology").mkdir(parents=True)
        (topo / f"cpu{cpu}/topology/thread_siblings_list").write_text(siblings + "\n")
    read = Sysroot(tmp_path).read_text
    assert [topdown_plan.smt_from_sysfs(read, c) for c in range(4)] == [True, False, True, None]


def test_smt_from_cpuid_dumps() -> None:
    *_, skx = dump_cpu("SkylakeX", 0)
    *_, adl_e = dump_cpu("AlderLake", 16)
    assert topdown_plan.smt_from_cpuid(skx) is True  # type: ignore[arg-type]
    assert topdown_plan.smt_from_cpuid(adl_e) is False  # type: ignore[arg-type]
    assert topdown_plan.smt_from_cpuid(lambda leaf, sub: (0xA, 0, 0, 0)) is None


# --- Intel's real tables (../shared/perfmon) and real CPUID dumps ---------------------------------------------


def test_real_skylake_x_dump_and_table(real: PerfmonTables) -> None:
    identity, core_type, perfmon, _ = dump_cpu("SkylakeX", 0)
    plan = topdown_plan.plan_topdown(
        identity, core_type, perfmon, perf_capabilities=None, smt=False, tables=real, backend="msr"
    )
    assert plan.method == "slots4" and plan.core == "Skylake"
    assert raws(plan)["int_misc_recovery_cycles"] == (RawEvent(0x0D, 0x01), None)
    smt = topdown_plan.plan_topdown(
        identity, core_type, perfmon, perf_capabilities=None, smt=True, tables=real, backend="msr"
    )
    assert smt.method == "slots4_smt"
    assert raws(smt)["cpu_clk_unhalted_thread_any"] == (RawEvent(0x3C, 0x00), None)


def test_real_sandy_bridge_encoding_differs(real: PerfmonTables) -> None:
    plan = topdown_plan.plan_topdown(
        ident(6, 0x2A, 7), None, pmu(3, 4), perf_capabilities=None, smt=False, tables=real, backend="msr"
    )
    assert raws(plan)["int_misc_recovery_cycles"] == (RawEvent(0x0D, 0x03, cmask=1), None)


def test_real_sapphire_rapids_dump_is_level_2(real: PerfmonTables) -> None:
    identity, core_type, perfmon, _ = dump_cpu("SapphireRapids", 0)
    plan = topdown_plan.plan_topdown(
        identity, core_type, perfmon, perf_capabilities=0x1_F3C5 | 1 << 15, smt=True, tables=real, backend="msr"
    )
    assert (plan.method, plan.level2, plan.detail) == ("perf_metrics", True, "PERF_METRICS, level 1 and 2")


def test_real_ice_lake_server_is_level_1(real: PerfmonTables) -> None:
    plan = topdown_plan.plan_topdown(
        ident(6, 0x6A, 6), None, pmu(5, 8, 0xF), perf_capabilities=1 << 15, smt=True, tables=real, backend="msr"
    )
    assert (plan.method, plan.level2) == ("perf_metrics", False)


def test_real_alder_lake_p_and_e_cores(real: PerfmonTables) -> None:
    identity, p_type, p_pmu, _ = dump_cpu("AlderLake", 0)
    _, e_type, e_pmu, _ = dump_cpu("AlderLake", 16)
    p = topdown_plan.plan_topdown(
        identity, p_type, p_pmu, perf_capabilities=1 << 15, smt=True, tables=real, backend="msr"
    )
    # CPUID 0xA shows the common subset (3 fixed counters); the P-core has fixed counter 3 (as Linux assumes).
    assert p_pmu.fixed_mask == 0x7
    assert (p.method, p.level2, p.core) == ("perf_metrics", True, "Golden Cove")
    e = topdown_plan.plan_topdown(
        identity, e_type, e_pmu, perf_capabilities=None, smt=False, tables=real, backend="msr"
    )
    assert (e.method, e.width, e.core) == ("gracemont", 5, "Gracemont")
    assert raws(e)["topdown_retiring_all"] == (RawEvent(0xC2, 0x00), None)
    assert raws(e)["topdown_fe_bound_all"] == (RawEvent(0x71, 0x00), None)


@pytest.mark.parametrize(
    ("identity", "core_type"),
    [(ident(6, 0xAA, 4, hybrid=True), atom(2)), (ident(6, 0xAF, 3), None), (ident(6, 0xC5, 2, hybrid=True), atom(2))],
    ids=["meteor-lake-e", "sierra-forest", "arrow-lake-h-lp-e"],
)
def test_real_crestmont_retires_at_0x72(real: PerfmonTables, identity: CpuIdentity, core_type: CoreType | None) -> None:
    plan = topdown_plan.plan_topdown(
        identity, core_type, pmu(5, 8), perf_capabilities=None, smt=False, tables=real, backend="perf"
    )
    assert (plan.method, plan.width, plan.detail) == (
        "crestmont",
        6,
        "E-core events (Crestmont, 6 wide); encodings built into pmutop, the perfmon table agrees",
    )
    assert raws(plan) == {
        "topdown_fe_bound_all": (RawEvent(0x71, 0x00), None),
        "topdown_bad_speculation_all": (RawEvent(0x73, 0x00), None),
        "topdown_be_bound_all": (RawEvent(0x74, 0x00), None),
        "topdown_retiring_all": (RawEvent(0x72, 0x00), None),
        "cycles": (RawEvent(0x3C, 0x00), 1),
    }


def test_real_lunar_lake_skymont_uses_fixed_counters_4_to_6(real: PerfmonTables) -> None:
    args = {"perf_capabilities": None, "smt": False, "tables": real, "backend": "msr"}
    lnl = ident(6, 0xBD, 1, hybrid=True)
    plan = topdown_plan.plan_topdown(lnl, atom(3), pmu(6, 8, 0x77, leaf23=True), **args)
    assert (plan.method, plan.width, plan.core) == ("skymont", 8, "Skymont")
    # Fixed counters 4-6 from Intel's table; the *.ALL_P encodings are what perf opens (and Linux schedules them
    # on those fixed counters itself).
    assert raws(plan) == {
        "topdown_fe_bound_all": (RawEvent(0x9C, 0x01), 5),
        "topdown_bad_speculation_all": (RawEvent(0x73, 0x00), 4),
        "topdown_be_bound_all": (RawEvent(0xA4, 0x02), None),
        "topdown_retiring_all": (RawEvent(0xC2, 0x02), 6),
        "cycles": (RawEvent(0x3C, 0x00), 1),
    }
    assert plan.gp_counters == 1  # only backend bound takes a general counter
    without_fixed = topdown_plan.plan_topdown(lnl, atom(3), pmu(6, 8, 0x7, leaf23=True), **args)
    assert without_fixed.gp_counters == 4
    lion_cove = topdown_plan.plan_topdown(
        lnl, CoreType(0x40, 3, "P", "P-core"), pmu(6, 10, 0xF, leaf23=True), **{**args, "perf_capabilities": 1 << 15}
    )
    assert (lion_cove.method, lion_cove.level2) == ("perf_metrics", True)


def test_real_arrow_lake_crestmont_table_lacks_the_all_names_but_has_the_p_twins(real: PerfmonTables) -> None:
    events = real.events_for(ident(6, 0xC5, 2, hybrid=True), 0x20, 2)
    assert "TOPDOWN_RETIRING.ALL" not in events and "TOPDOWN_RETIRING.ALL_P" in events


def test_a_perfmon_table_that_disagrees_is_named_and_the_built_in_encoding_used(
    real: PerfmonTables, tmp_path: Path
) -> None:
    # Sandy Bridge's table mapped to Skylake-SP: INT_MISC.RECOVERY_CYCLES is 0x0D/0x03 cmask 1 there, and
    # IDQ_UOPS_NOT_DELIVERED.CORE is limited to counters 0-3. The plan keeps the built-in encodings and says so.
    (tmp_path / "mapfile.csv").write_text(
        "Family-model,Version,Filename,EventType,Core Type,Native Model ID,Core Role Name\n"
        "GenuineIntel-6-55-[01234],V1,/SNB/events/sandybridge_core.json,core,,,\n"
    )
    (tmp_path / "SNB/events").mkdir(parents=True)
    (tmp_path / "SNB/events/sandybridge_core.json").write_bytes(
        (SHARED_PERFMON / "SNB/events/sandybridge_core.json").read_bytes()
    )
    plan = topdown_plan.plan_topdown(
        ident(6, 0x55, 4), None, pmu(4, 4), perf_capabilities=None, smt=False, tables=PerfmonTables(tmp_path),
        backend="msr",
    )  # fmt: skip
    assert plan.method == "slots4"
    assert raws(plan)["int_misc_recovery_cycles"] == (RawEvent(0x0D, 0x01), None)
    assert plan.detail.startswith("four-event formula; encodings built into pmutop; the perfmon table differs: ")
    assert "INT_MISC.RECOVERY_CYCLES: built in event=0x0d,umask=0x01, table event=0x0d,umask=0x03,cmask=1" in (
        plan.detail
    )


def test_real_zen4_dump(real: PerfmonTables) -> None:
    identity, core_type, perfmon, _ = dump_cpu("Raphael", 0)
    plan = topdown_plan.plan_topdown(
        identity, core_type, perfmon, perf_capabilities=None, smt=True, tables=real, backend="perf"
    )
    assert (plan.method, plan.core) == ("zen4", "Zen 4")


# --- pmutop info ----------------------------------------------------------------------------------------


def _info(root: Path) -> tuple[dict[str, object], str]:
    from pmutop.app.commands.info import gather, render_text
    from pmutop.hw.platform import HostPlatform

    facts = gather(HostPlatform(Sysroot(root)), probe=False)
    return facts, render_text(facts)


def test_info_per_core_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers
    from test_topdown_perf import ADL_E_LEAVES, ADL_P_LEAVES, SPR_LEAVES, add_siblings

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PMUTOP_PERFMON_DIR", raising=False)
    spr = build_sysroot(tmp_path / "spr", [0, 1], SPR_LEAVES, msrs={**idle_pmu_registers(8, 4), 0x345: 1 << 15})
    facts, text = _info(spr)
    (group,) = facts["cpu_groups"]  # type: ignore[misc]
    assert group["topdown"]["method"] == "perf_metrics" and group["topdown"]["level2"]
    assert group["topdown"]["backend"] == "msr" and group["topdown"]["default_on"]
    assert "top-down (msr backend): Golden Cove, PERF_METRICS, level 1 and 2\n" in text

    cleared = build_sysroot(
        tmp_path / "vm", [0], SPR_LEAVES, msrs={**idle_pmu_registers(8, 4), 0x345: 0x33C5 & ~(1 << 15)}
    )
    _, text = _info(cleared)
    assert "top-down (msr backend): unavailable: IA32_PERF_CAPABILITIES bit 15 (PERF_METRICS) is clear" in text

    skx = build_sysroot(tmp_path / "skx", [0, 1], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    add_siblings(skx, {0: "0-1", 1: "0-1"})
    facts, text = _info(skx)  # no perfmon tables: the encodings are built in
    assert facts["cpu_groups"][0]["topdown"]["method"] == "slots4_smt"  # type: ignore[index]
    assert facts["cpu_groups"][0]["topdown"]["encodings"] == "encodings built into pmutop"  # type: ignore[index]
    assert (
        "top-down (msr backend): Skylake, four-event formula, per physical core (AnyThread); encodings built into "
        "pmutop; takes 5 general-purpose counters, so only when asked (--topdown)"
    ) in text
    monkeypatch.setenv("PMUTOP_PERFMON_DIR", str(FIXTURE))
    _, text = _info(skx)
    assert (
        "top-down (msr backend): Skylake, four-event formula, per physical core (AnyThread); encodings built into "
        "pmutop, the perfmon table agrees; takes 5 general-purpose counters, so only when asked (--topdown)"
    ) in text

    adl = build_sysroot(
        tmp_path / "adl",
        [0, 16],
        {0: ADL_P_LEAVES, 16: ADL_E_LEAVES},
        msrs={**idle_pmu_registers(6, 3), 0x345: 0x33C5 | 1 << 15},
    )
    facts, text = _info(adl)
    p, e = facts["cpu_groups"]  # type: ignore[misc]
    assert (p["cpus"], p["topdown"]["method"], e["cpus"], e["topdown"]["method"]) == (
        "0",
        "perf_metrics",
        "16",
        "gracemont",
    )
    assert "E-core events (Gracemont, 5 wide); encodings built into pmutop, the perfmon table agrees; takes 4 " in text
