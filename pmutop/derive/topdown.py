"""Top-down microarchitecture analysis (TMA): one interval's raw counts -> level 1 and level 2 fractions.

Pure: no hardware, no I/O. The caller (the backend) picks a *method* per CPU from its core type and counts
the events of `required_keys(method)`; `compute()` turns one interval's deltas into the fractions named by
`TMA_FIELDS` (perf's metric names), `combine()` makes the all-CPU row.

Sources (cited below by tag):
  [K-TD]  Linux tools/perf/Documentation/topdown.txt (PERF_METRICS bytes, level 2 derivation).
  [K-CORE] Linux arch/x86/events/intel/core.c icl_get_metrics_event_value(): slots × byte / 0xFF.
  [TL]    pmu-tools *_ratios.py: skl_client_ratios.py (4-wide formula, SMT halving), spr_server_ratios.py
          (PERF_METRICS_SUM normalisation, max(0, parent − child) siblings), adl_grt_ratios.py (Gracemont,
          5 wide), mtl_cmt_ratios.py / srf_ratios.py (Crestmont, 6 wide), lnl_skt_ratios.py (Skymont, 8 wide),
          ehl_ratios.py (Tremont, 4 wide).
  [PERF]  Linux tools/perf/pmu-events/arch/x86/*/…-metrics.json (tma_* metric expressions).
  [Z4]    Linux tools/perf/pmu-events/arch/x86/amdzen4/pipeline.json and amdzen5/pipeline.json (metrics),
          amdzen4/other.json (event names).
  [K-GLM] Linux arch/x86/events/intel/core.c glm_events_attrs (Goldmont's topdown-* events, total slots scale 3;
          4 for Goldmont Plus in intel_pmu_init) and tools/perf/util/stat-shadow.c td_fe_bound, td_bad_spec,
          td_retiring, td_be_bound (the level-1 formula perf applies to those events).

Normalisation (the same for every method, so CPUs of different kinds compare and combine):
  1. each level-1 category is taken as a fraction of the interval's slots;
  2. each fraction is clamped to 0..1 (counter skew inside an interval can push a formula slightly below 0
     or above 1, e.g. Backend = 1 − … on the 4-wide formula);
  3. the four are divided by their sum, so level 1 sums to exactly 1 (within float error).
  For PERF_METRICS this equals dividing each category's slot count by the sum of the four, as toplev
  (PERF_METRICS_SUM) [TL], PCM and perf's tma_* metrics [PERF] do; the kernel's raw ratio divides by SLOTS
  instead (byte / 0xFF) [K-TD, K-CORE], whose four bytes may sum to 0xFE or 0x100 after rounding.
  Level 2 (measured child / same sum) is clamped to 0..parent and its sibling is parent − child [K-TD, TL].
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterable, Mapping

from pmutop.core import topdown_methods

Counts = Mapping[str, int | float]
Fractions = dict[str, float | None]

LEVEL1: tuple[str, ...] = ("tma_retiring", "tma_bad_speculation", "tma_frontend_bound", "tma_backend_bound")
TMA_FIELDS: tuple[str, ...] = (
    *LEVEL1,
    "tma_heavy_operations",
    "tma_light_operations",
    "tma_branch_mispredicts",
    "tma_machine_clears",
    "tma_fetch_latency",
    "tma_fetch_bandwidth",
    "tma_memory_bound",
    "tma_core_bound",
)

LABELS: dict[str, str] = {
    "tma_retiring": "Retiring",
    "tma_bad_speculation": "Bad speculation",
    "tma_frontend_bound": "Frontend bound",
    "tma_backend_bound": "Backend bound",
    "tma_heavy_operations": "Heavy operations",
    "tma_light_operations": "Light operations",
    "tma_branch_mispredicts": "Branch mispredicts",
    "tma_machine_clears": "Machine clears",
    "tma_fetch_latency": "Fetch latency",
    "tma_fetch_bandwidth": "Fetch bandwidth",
    "tma_memory_bound": "Memory bound",
    "tma_core_bound": "Core bound",
}

# Wording after perf's BriefDescriptions [PERF] and topdown.txt [K-TD].
DESCRIPTIONS: dict[str, str] = {
    "tma_retiring": "slots used by uops that retired: useful work",
    "tma_bad_speculation": "slots wasted on uops that never retired (wrong path) and on recovering from it",
    "tma_frontend_bound": "slots the frontend left empty while the backend could have accepted uops",
    "tma_backend_bound": "slots not used because the backend lacked resources (memory or execution units)",
    "tma_heavy_operations": "retiring slots of heavy operations: instructions of more than one uop, microcode",
    "tma_light_operations": "retiring slots of light operations: instructions of one uop (retiring − heavy)",
    "tma_branch_mispredicts": "slots wasted because of mispredicted branches",
    "tma_machine_clears": "slots wasted on machine clears: memory ordering, SMC… (bad speculation − mispredicts)",
    "tma_fetch_latency": "frontend slots lost to fetch stalls: i-cache / iTLB misses, branch resteers",
    "tma_fetch_bandwidth": "frontend slots lost to too few uops/cycle from decoders, uop cache (frontend − latency)",
    "tma_memory_bound": "backend slots stalled on the memory subsystem (caches, DRAM, stores)",
    "tma_core_bound": "backend slots stalled on execution: ports, dividers, dependencies (backend − memory)",
}

# Issue (dispatch) width per formula method; perf_metrics counts its slots itself (TOPDOWN.SLOTS).
# Widths: Pipeline_Width in [TL] (4 skl, 5 adl_grt, 6 mtl_cmt/srf, 8 lnl_skt, 4 ehl); 6 / 8 × ls_not_halted_cyc
# [Z4]; Goldmont 3 and Goldmont Plus 4, the kernel's topdown-total-slots.scale [K-GLM].
WIDTHS: dict[str, int] = {
    topdown_methods.SLOTS4: 4,
    topdown_methods.SLOTS4_SMT: 4,
    topdown_methods.GRACEMONT: 5,
    topdown_methods.CRESTMONT: 6,
    topdown_methods.SKYMONT: 8,
    topdown_methods.TREMONT: 4,
    topdown_methods.GOLDMONT: 3,
    topdown_methods.GOLDMONT_PLUS: 4,
    topdown_methods.ZEN4: 6,
    topdown_methods.ZEN5: 8,
}
METHODS: tuple[str, ...] = (topdown_methods.PERF_METRICS, *WIDTHS)

_ECORE = ("topdown_fe_bound_all", "topdown_bad_speculation_all", "topdown_be_bound_all", "topdown_retiring_all")
_REQUIRED: dict[str, tuple[str, ...]] = {
    topdown_methods.PERF_METRICS: (
        "slots",
        "topdown_retiring",
        "topdown_bad_spec",
        "topdown_fe_bound",
        "topdown_be_bound",
    ),
    topdown_methods.SLOTS4: (
        "cycles",
        "uops_issued_any",
        "uops_retired_retire_slots",
        "idq_uops_not_delivered_core",
        "int_misc_recovery_cycles",
    ),
    topdown_methods.SLOTS4_SMT: (
        "cpu_clk_unhalted_thread_any",
        "uops_issued_any",
        "uops_retired_retire_slots",
        "idq_uops_not_delivered_core",
        "int_misc_recovery_cycles_any",
    ),
    # Gracemont: bad speculation is the remainder, as perf (alderlake cpu_atom tma_bad_speculation) and
    # toplev (adl_grt_ratios.py) compute it; TOPDOWN_BAD_SPECULATION.ALL is not needed there.
    topdown_methods.GRACEMONT: ("cycles", "topdown_fe_bound_all", "topdown_be_bound_all", "topdown_retiring_all"),
    topdown_methods.CRESTMONT: ("cycles", *_ECORE),
    topdown_methods.SKYMONT: ("cycles", *_ECORE),
    topdown_methods.TREMONT: ("cycles", *_ECORE),
    topdown_methods.GOLDMONT: (
        "cycles",
        "uops_issued_any",
        "uops_retired_any",
        "uops_not_delivered_any",
        "issue_slots_not_consumed_recovery",
    ),
    # perf event names [Z4] with '.' -> '_': de_no_dispatch_per_slot.no_ops_from_frontend (0x1A0/0x01),
    # de_no_dispatch_per_slot.backend_stalls (0x1A0/0x1E), de_src_op_disp.all (0xAA/0x07), ex_ret_ops (0xC1),
    # ls_not_halted_cyc (0x76).
    topdown_methods.ZEN4: (
        "ls_not_halted_cyc",
        "de_no_dispatch_per_slot_no_ops_from_frontend",
        "de_no_dispatch_per_slot_backend_stalls",
        "de_src_op_disp_all",
        "ex_ret_ops",
    ),
}
_REQUIRED[topdown_methods.ZEN5] = _REQUIRED[topdown_methods.ZEN4]
_REQUIRED[topdown_methods.GOLDMONT_PLUS] = _REQUIRED[topdown_methods.GOLDMONT]

# Level 2 that a method measures: (measured child, derived sibling, parent, count key). Only PERF_METRICS
# bytes 4..7 (Sapphire Rapids and later) for now [K-TD]; each pair is used when its key was counted.
_LEVEL2: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    topdown_methods.PERF_METRICS: (
        ("tma_heavy_operations", "tma_light_operations", "tma_retiring", "topdown_heavy_ops"),
        ("tma_branch_mispredicts", "tma_machine_clears", "tma_bad_speculation", "topdown_br_mispredict"),
        ("tma_fetch_latency", "tma_fetch_bandwidth", "tma_frontend_bound", "topdown_fetch_lat"),
        ("tma_memory_bound", "tma_core_bound", "tma_backend_bound", "topdown_mem_bound"),
    ),
}

_NORMALISE = "each clamped to 0..1, then the four divided by their sum"
_L2_TEXT = (
    "Heavy operations = topdown-heavy-ops / sum; Light operations = Retiring − Heavy operations\n"
    "Branch mispredicts = topdown-br-mispredict / sum; Machine clears = Bad speculation − Branch mispredicts\n"
    "Fetch latency = topdown-fetch-lat / sum; Fetch bandwidth = Frontend bound − Fetch latency\n"
    "Memory bound = topdown-mem-bound / sum; Core bound = Backend bound − Memory bound\n"
    "(Sapphire Rapids and later; each measured part clamped to 0..its parent)"
)


def _ecore_formula(width: int, bad: str) -> str:
    return (
        f"SLOTS = {width} × CPU_CLK_UNHALTED.CORE\n"
        "Retiring = TOPDOWN_RETIRING.ALL / SLOTS\n"
        f"Bad speculation = {bad}\n"
        "Frontend bound = TOPDOWN_FE_BOUND.ALL / SLOTS\n"
        "Backend bound = TOPDOWN_BE_BOUND.ALL / SLOTS\n"
        f"{_NORMALISE}"
    )


def _slots4_formula(clks: str, recovery: str) -> str:
    return (
        f"SLOTS = 4 × CORE_CLKS; CORE_CLKS = {clks}; Recovery = {recovery}\n"
        "Retiring = UOPS_RETIRED.RETIRE_SLOTS / SLOTS\n"
        "Bad speculation = (UOPS_ISSUED.ANY − UOPS_RETIRED.RETIRE_SLOTS + 4 × Recovery) / SLOTS\n"
        "Frontend bound = IDQ_UOPS_NOT_DELIVERED.CORE / SLOTS\n"
        "Backend bound = 1 − Frontend bound − (UOPS_ISSUED.ANY + 4 × Recovery) / SLOTS\n"
        f"{_NORMALISE}"
    )


def _goldmont_formula(width: int) -> str:
    return (
        f"SLOTS = {width} × CPU_CLK_UNHALTED.CORE\n"
        "Retiring = UOPS_RETIRED.ANY / SLOTS\n"
        "Bad speculation = (UOPS_ISSUED.ANY − UOPS_RETIRED.ANY + ISSUE_SLOTS_NOT_CONSUMED.RECOVERY) / SLOTS\n"
        "Frontend bound = UOPS_NOT_DELIVERED.ANY / SLOTS\n"
        "Backend bound = 1 − Retiring − Bad speculation − Frontend bound\n"
        f"{_NORMALISE}"
    )


def _zen_formula(width: int) -> str:
    return (
        f"SLOTS = {width} × ls_not_halted_cyc\n"
        "Retiring = ex_ret_ops / SLOTS\n"
        "Bad speculation = (de_src_op_disp.all − ex_ret_ops) / SLOTS\n"
        "Frontend bound = de_no_dispatch_per_slot.no_ops_from_frontend / SLOTS\n"
        "Backend bound = de_no_dispatch_per_slot.backend_stalls / SLOTS\n"
        f"{_NORMALISE} (so slots lost to the other SMT thread are left out)"
    )


# Formula text per method, one line per step (the detail view and README show it).
FORMULAS: dict[str, str] = {
    topdown_methods.PERF_METRICS: (
        "SLOTS = TOPDOWN.SLOTS (fixed counter 3); per category: slots × PERF_METRICS byte / 0xFF\n"
        "sum = retiring + bad-spec + fe-bound + be-bound slots\n"
        "Retiring = topdown-retiring / sum; Bad speculation = topdown-bad-spec / sum\n"
        "Frontend bound = topdown-fe-bound / sum; Backend bound = topdown-be-bound / sum\n" + _L2_TEXT
    ),
    topdown_methods.SLOTS4: _slots4_formula("CPU_CLK_UNHALTED.THREAD", "INT_MISC.RECOVERY_CYCLES"),
    topdown_methods.SLOTS4_SMT: _slots4_formula("CPU_CLK_UNHALTED.THREAD_ANY / 2", "INT_MISC.RECOVERY_CYCLES_ANY / 2"),
    topdown_methods.GRACEMONT: _ecore_formula(5, "1 − Retiring − Frontend bound − Backend bound"),
    topdown_methods.CRESTMONT: _ecore_formula(6, "TOPDOWN_BAD_SPECULATION.ALL / SLOTS"),
    topdown_methods.SKYMONT: _ecore_formula(8, "TOPDOWN_BAD_SPECULATION.ALL / SLOTS"),
    topdown_methods.TREMONT: _ecore_formula(4, "TOPDOWN_BAD_SPECULATION.ALL / SLOTS"),
    topdown_methods.GOLDMONT: _goldmont_formula(3),
    topdown_methods.GOLDMONT_PLUS: _goldmont_formula(4),
    topdown_methods.ZEN4: _zen_formula(6),
    topdown_methods.ZEN5: _zen_formula(8),
}


_REQUIRED_SETS = {method: frozenset(keys) for method, keys in _REQUIRED.items()}


def required_keys(method: str | None) -> tuple[str, ...]:
    """The count keys `compute(method, …)` needs for level 1 (empty for an unknown method)."""
    return _REQUIRED.get(method or "", ())


def level2_keys(method: str | None) -> tuple[str, ...]:
    """Optional count keys that add level 2 where the CPU measures it."""
    return tuple(pair[3] for pair in _LEVEL2.get(method or "", ()))


def slots_of(method: str | None, counts: Counts) -> int | float | None:
    """The interval's issue slots of one CPU (the weight of its fractions in `combine`); None if unknown."""
    if method == topdown_methods.PERF_METRICS:
        return counts.get("slots")
    width = WIDTHS.get(method or "")
    if width is None:
        return None
    if method == topdown_methods.SLOTS4_SMT:
        # With SMT on, CPU_CLK_UNHALTED.THREAD_ANY counts the physical core's cycles on both threads: each
        # thread gets half of them (CORE_CLKS in skl_client_ratios.py) [TL].
        any_clks = counts.get("cpu_clk_unhalted_thread_any")
        return None if any_clks is None else width * (any_clks / 2)
    cycles = counts.get("ls_not_halted_cyc" if method in (topdown_methods.ZEN4, topdown_methods.ZEN5) else "cycles")
    return None if cycles is None else width * cycles


def _raw_level1(method: str, c: Counts, slots: float) -> tuple[float, float, float, float]:
    """(retiring, bad speculation, frontend, backend) as fractions of `slots`, before clamping."""
    if method == topdown_methods.PERF_METRICS:
        # The kernel reports each category as slots × byte / 0xFF [K-CORE]; the msr backend does the same.
        return (
            c["topdown_retiring"] / slots,
            c["topdown_bad_spec"] / slots,
            c["topdown_fe_bound"] / slots,
            c["topdown_be_bound"] / slots,
        )
    if method in (topdown_methods.SLOTS4, topdown_methods.SLOTS4_SMT):
        # skl_client_ratios.py Frontend_Bound, Bad_Speculation, Retiring, Backend_Bound [TL]; perf's
        # skx-metrics.json has the same expressions [PERF].
        recovery = (
            c["int_misc_recovery_cycles"] if method == topdown_methods.SLOTS4 else c["int_misc_recovery_cycles_any"] / 2
        )
        issued = c["uops_issued_any"]
        retired = c["uops_retired_retire_slots"]
        frontend = c["idq_uops_not_delivered_core"] / slots
        bad = (issued - retired + 4 * recovery) / slots
        backend = 1 - frontend - (issued + 4 * recovery) / slots
        return retired / slots, bad, frontend, backend
    if method in (topdown_methods.GOLDMONT, topdown_methods.GOLDMONT_PLUS):
        # perf's td_* functions over the kernel's topdown events [K-GLM]: recovery bubbles are issue slots already
        # (ISSUE_SLOTS_NOT_CONSUMED.RECOVERY, no scale), and backend bound is the remainder.
        issued = c["uops_issued_any"]
        retired = c["uops_retired_any"]
        frontend = c["uops_not_delivered_any"] / slots
        bad = (issued - retired + c["issue_slots_not_consumed_recovery"]) / slots
        return retired / slots, bad, frontend, 1 - frontend - bad - retired / slots
    if method in (
        topdown_methods.GRACEMONT,
        topdown_methods.CRESTMONT,
        topdown_methods.SKYMONT,
        topdown_methods.TREMONT,
    ):
        retiring = c["topdown_retiring_all"] / slots
        frontend = c["topdown_fe_bound_all"] / slots
        backend = c["topdown_be_bound_all"] / slots
        # Gracemont: the remainder (adl_grt_ratios.py Bad_Speculation) [TL]; Crestmont, Skymont and Tremont count
        # it (mtl_cmt_ratios.py, lnl_skt_ratios.py, ehl_ratios.py) [TL].
        bad = (
            1 - retiring - frontend - backend
            if method == topdown_methods.GRACEMONT
            else c["topdown_bad_speculation_all"] / slots
        )
        return retiring, bad, frontend, backend
    # zen4 / zen5: pipeline.json frontend_bound, bad_speculation, backend_bound, retiring [Z4].
    retired = c["ex_ret_ops"]
    return (
        retired / slots,
        (c["de_src_op_disp_all"] - retired) / slots,
        c["de_no_dispatch_per_slot_no_ops_from_frontend"] / slots,
        c["de_no_dispatch_per_slot_backend_stalls"] / slots,
    )


def _clamp(x: float, hi: float = 1.0) -> float:
    """min(max(x, 0.0), hi), spelt as comparisons (the same value, sign of a zero included)."""
    x = 0.0 if x < 0.0 else x
    return hi if hi < x else x


def compute(method: str | None, counts: Counts) -> Fractions:
    """Every TMA field for one CPU's interval; None where not measured (unknown method, a required key
    missing, zero slots, nothing counted). Level 1 sums to 1; level 2 siblings sum to their parent."""
    out: Fractions = dict.fromkeys(TMA_FIELDS)
    keys = _REQUIRED_SETS.get(method or "")
    if not keys or method is None or not keys <= counts.keys():
        return out
    slots = slots_of(method, counts)
    if slots is None or slots <= 0:
        return out
    clamped = [_clamp(x) for x in _raw_level1(method, counts, slots)]
    total = sum(clamped)
    if total <= 0:
        return out
    for name, x in zip(LEVEL1, clamped, strict=True):
        out[name] = x / total
    for child, sibling, parent, key in _LEVEL2.get(method, ()):
        value = counts.get(key)
        parent_value = out[parent]
        if value is None or parent_value is None:
            continue
        # Same denominator as level 1 (toplev divides level 2 by PERF_METRICS_SUM too) [TL]; 8-bit rounding
        # can make a child exceed its parent by a little, hence the clamp.
        child_value = _clamp(_clamp(value / slots) / total, parent_value)
        out[child] = child_value
        out[sibling] = parent_value - child_value
    return out


def combine(parts: Iterable[tuple[str | None, Counts]]) -> Fractions:
    """The all-CPU row: each CPU's fractions weighted by its slots (so a wide or busy core counts more, and
    P- and E-cores of different widths mix). CPUs without level 1 this interval (idle: zero slots; not
    measured) are left out. A level 2 field is given only when every CPU left in measured it, so siblings
    still sum to their parent."""
    return combine_weighed(weighed(method, counts) for method, counts in parts)


def weighed(method: str | None, counts: Counts) -> tuple[int | float | None, Fractions]:
    """One CPU's slots and fractions, as combine_weighed takes them (computed once, combined many times)."""
    return slots_of(method, counts), compute(method, counts)


def combine_weighed(parts: Iterable[tuple[int | float | None, Fractions]]) -> Fractions:
    """combine() of CPUs whose slots and fractions are already known (see `weighed`)."""
    out: Fractions = dict.fromkeys(TMA_FIELDS)
    weighted = [(slots, f) for slots, f in parts if f[LEVEL1[0]] is not None and slots is not None and slots > 0]
    if not weighted:
        return out
    weights = [s for s, _ in weighted]
    total = sum(weights)
    # One column per field, the CPUs in order.
    columns = zip(*(map(f.__getitem__, TMA_FIELDS) for _, f in weighted), strict=True)
    for name, values in zip(TMA_FIELDS, columns, strict=True):
        # The same products, summed in the same order, as sum(s * v for ...); a None (a CPU that did not measure
        # this field) raises TypeError, and the row then has no value for it.
        with contextlib.suppress(TypeError):
            out[name] = sum(map(operator.mul, weights, values)) / total
    return out


def dominant(fractions: Mapping[str, float | None]) -> str | None:
    """The display name of the level-1 category with the largest share (the first on a tie), or None."""
    best: str | None = None
    for name in LEVEL1:
        value = fractions.get(name)
        if value is None:
            return None
        if best is None or value > (fractions.get(best) or 0.0):
            best = name
    return None if best is None else LABELS[best]
