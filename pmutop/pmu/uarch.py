"""CPU signature (vendor, display family/model, stepping) → microarchitecture / code name.

Hand-written table. Names are for display only: nothing in pmutop should branch on them.
Intel model numbers match Linux `intel-family.h` and Intel's perfmon `mapfile.csv`; AMD ranges follow
the Zen-generation switch in Linux `arch/x86/kernel/cpu/amd.c`.
"""

from __future__ import annotations

from dataclasses import dataclass

from pmutop.core import topdown_methods

# Intel family 6, one name per model.
_INTEL_FAM6: dict[int, str] = {
    # Atom (Bonnell .. Airmont)
    0x1C: "Bonnell",
    0x26: "Bonnell",
    0x27: "Saltwell",
    0x35: "Saltwell",
    0x36: "Saltwell",
    0x37: "Silvermont (Bay Trail)",
    0x4A: "Silvermont (Merrifield)",
    0x4D: "Silvermont (Avoton / Rangeley)",
    0x5A: "Silvermont (Moorefield)",
    0x4C: "Airmont (Cherry Trail / Braswell)",
    # Nehalem .. Broadwell
    0x1A: "Nehalem",
    0x1E: "Nehalem",
    0x1F: "Nehalem",
    0x2E: "Nehalem-EX",
    0x25: "Westmere",
    0x2C: "Westmere-EP",
    0x2F: "Westmere-EX",
    0x2A: "Sandy Bridge",
    0x2D: "Sandy Bridge-E/EP",
    0x3A: "Ivy Bridge",
    0x3E: "Ivy Bridge-E/EP",
    0x3C: "Haswell",
    0x45: "Haswell",
    0x46: "Haswell",
    0x3F: "Haswell-E/EP",
    0x3D: "Broadwell",
    0x47: "Broadwell",
    0x4F: "Broadwell-E/EP",
    0x56: "Broadwell-DE",
    # Skylake and its client derivatives (0x8E/0x9E/0x55 are split by stepping below)
    0x4E: "Skylake",
    0x5E: "Skylake",
    0xA5: "Comet Lake",
    0xA6: "Comet Lake-U",
    0x66: "Cannon Lake",
    # Sunny Cove .. today, big cores
    0x7D: "Ice Lake",
    0x7E: "Ice Lake",
    0x9D: "Ice Lake (NNPI)",
    0x6A: "Ice Lake-SP",
    0x6C: "Ice Lake-D",
    0xA7: "Rocket Lake",
    0x8C: "Tiger Lake",
    0x8D: "Tiger Lake",
    0x8F: "Sapphire Rapids",
    0xCF: "Emerald Rapids",
    0xAD: "Granite Rapids",
    0xAE: "Granite Rapids-D",
    0xD7: "Bartlett Lake",
    # Hybrid (P + E cores)
    0x8A: "Lakefield",
    0x97: "Alder Lake",
    0x9A: "Alder Lake",
    0xB7: "Raptor Lake",
    0xBA: "Raptor Lake",
    0xBF: "Raptor Lake",
    0xAA: "Meteor Lake",
    0xAC: "Meteor Lake",
    0xC5: "Arrow Lake",
    0xC6: "Arrow Lake",
    0xB5: "Arrow Lake-U",  # Meteor Lake cores (perfmon maps it to the MTL event files)
    0xBD: "Lunar Lake",
    0xCC: "Panther Lake",
    0xD5: "Wildcat Lake",
    # Atom / E-core only parts since Goldmont
    0x5C: "Goldmont (Apollo Lake)",
    0x5F: "Goldmont (Denverton)",
    0x7A: "Goldmont Plus (Gemini Lake)",
    0x86: "Snow Ridge (Tremont)",
    0x96: "Elkhart Lake (Tremont)",
    0x9C: "Jasper Lake (Tremont)",
    0xBE: "Alder Lake-N (Gracemont)",
    0xAF: "Sierra Forest (Crestmont)",
    0xB6: "Grand Ridge (Crestmont)",
    0xDD: "Clearwater Forest (Darkmont)",
    # Xeon Phi
    0x57: "Knights Landing",
    0x85: "Knights Mill",
}

# Models whose name depends on the stepping: ((first, last, name), ...), fallback name.
_INTEL_FAM6_STEPPINGS: dict[int, tuple[tuple[tuple[int, int, str], ...], str]] = {
    0x55: (
        ((0, 4, "Skylake-SP/X"), (5, 7, "Cascade Lake"), (10, 11, "Cooper Lake")),
        "Cascade Lake / Cooper Lake",  # steppings 0-4 are all Skylake; later ones use CLX events
    ),
    0x8E: (
        (
            (0, 8, "Kaby Lake"),
            (9, 9, "Kaby Lake / Amber Lake"),
            (10, 10, "Kaby Lake-R / Coffee Lake-U"),
            (11, 11, "Whiskey Lake"),
            (12, 12, "Whiskey Lake / Comet Lake / Amber Lake"),
        ),
        "Kaby Lake / Coffee Lake",
    ),
    0x9E: (
        ((0, 9, "Kaby Lake"), (10, 13, "Coffee Lake")),
        "Kaby Lake / Coffee Lake",
    ),
}

# Intel families beyond 6 (family 0xF base + extended family).
_INTEL_OTHER: dict[tuple[int, int], str] = {
    (0x12, 0x01): "Nova Lake",
    (0x12, 0x03): "Nova Lake",
    (0x13, 0x01): "Diamond Rapids",
}

# AMD: (family, first model, last model, name). First match wins.
_AMD: tuple[tuple[int, int, int, str], ...] = (
    (0x15, 0x00, 0x01, "Bulldozer"),
    (0x15, 0x02, 0x1F, "Piledriver"),
    (0x15, 0x30, 0x3F, "Steamroller"),
    (0x15, 0x60, 0x7F, "Excavator"),
    (0x16, 0x00, 0x0F, "Jaguar"),
    (0x16, 0x30, 0x3F, "Puma"),
    # Family 17h: Zen+ is model 0x08 (Pinnacle Ridge) and 0x18 (Picasso), inside the Zen 1 ranges.
    (0x17, 0x08, 0x08, "Zen+ (Pinnacle Ridge)"),
    (0x17, 0x18, 0x18, "Zen+ (Picasso)"),
    (0x17, 0x01, 0x01, "Zen (Summit Ridge / Naples)"),
    (0x17, 0x11, 0x11, "Zen (Raven Ridge)"),
    (0x17, 0x00, 0x2F, "Zen"),
    (0x17, 0x50, 0x5F, "Zen"),
    (0x17, 0x30, 0x3F, "Zen 2 (Rome)"),
    (0x17, 0x60, 0x67, "Zen 2 (Renoir)"),
    (0x17, 0x68, 0x6F, "Zen 2 (Lucienne)"),
    (0x17, 0x70, 0x7F, "Zen 2 (Matisse)"),
    (0x17, 0x90, 0x91, "Zen 2 (Van Gogh)"),
    (0x17, 0xA0, 0xAF, "Zen 2 (Mendocino)"),
    (0x17, 0x40, 0x4F, "Zen 2"),
    (0x19, 0x00, 0x0F, "Zen 3 (Milan)"),
    (0x19, 0x10, 0x1F, "Zen 4 (Genoa)"),
    (0x19, 0x20, 0x2F, "Zen 3 (Vermeer)"),
    (0x19, 0x40, 0x4F, "Zen 3+ (Rembrandt)"),
    (0x19, 0x50, 0x5F, "Zen 3 (Cezanne)"),
    (0x19, 0x30, 0x3F, "Zen 3"),
    (0x19, 0x60, 0x6F, "Zen 4 (Raphael)"),
    (0x19, 0x70, 0x7F, "Zen 4 (Phoenix)"),
    (0x19, 0xA0, 0xAF, "Zen 4c (Bergamo / Siena)"),
    (0x19, 0x80, 0x9F, "Zen 4"),
    (0x1A, 0x00, 0x1F, "Zen 5 (Turin)"),
    (0x1A, 0x20, 0x2F, "Zen 5 (Strix Point)"),
    (0x1A, 0x40, 0x4F, "Zen 5 (Granite Ridge)"),
    (0x1A, 0x60, 0x6F, "Zen 5 (Krackan Point)"),
    (0x1A, 0x70, 0x7F, "Zen 5 (Strix Halo)"),
    (0x1A, 0x50, 0x5F, "Zen 6"),
    (0x1A, 0x80, 0xAF, "Zen 6"),
    (0x1A, 0xC0, 0xCF, "Zen 6"),
)


def microarchitecture(vendor: str, family: int, model: int, stepping: int) -> str | None:
    """Display name for a CPU signature (display family/model), or None when unknown."""
    if vendor == "GenuineIntel":
        if family == 6:
            by_stepping = _INTEL_FAM6_STEPPINGS.get(model)
            if by_stepping is not None:
                ranges, fallback = by_stepping
                for first, last, name in ranges:
                    if first <= stepping <= last:
                        return name
                return fallback
            return _INTEL_FAM6.get(model)
        return _INTEL_OTHER.get((family, model))
    if vendor == "AuthenticAMD":
        for fam, first, last, name in _AMD:
            if fam == family and first <= model <= last:
                return name
        return None
    if vendor == "HygonGenuine" and family == 0x18:
        return "Dhyana (Zen)"
    return None


# --- Core microarchitecture and its top-down class ------------------------------------------------------
#
# microarchitecture() names the product; top-down analysis depends on the core inside it, and on hybrid parts
# on the core type (CPUID 0x1A). core_uarch() answers that; pmutop.pmu.topdown_plan turns the class into a
# measurement plan. Model numbers: Linux intel-family.h and Intel's perfmon mapfile.csv (which table a core
# type uses); classes: Linux arch/x86/events/intel/core.c (num_topdown_events 4 on Ice Lake, 8 from Sapphire
# Rapids and Alder Lake), pmu-tools *_ratios.py and Linux perf's *-metrics.json (E-core slot widths), Linux
# tools/perf/pmu-events/arch/x86/amdzen4|amdzen5/pipeline.json (AMD dispatch widths).

# Each class is named after the method that measures it (pmutop.core.topdown_methods); PERF_METRICS_L2 is
# measured by perf_metrics too, with level 2 added.
TD_SLOTS4 = topdown_methods.SLOTS4  # Sandy Bridge .. Cascade Lake: the four-event formula, 4 slots per cycle
TD_PERF_METRICS = topdown_methods.PERF_METRICS  # Sunny/Willow/Cypress Cove: SLOTS + PERF_METRICS, level 1
TD_PERF_METRICS_L2 = "perf_metrics_l2"  # Golden Cove and later: PERF_METRICS level 1 and 2
TD_GRACEMONT = topdown_methods.GRACEMONT
TD_CRESTMONT = topdown_methods.CRESTMONT
TD_SKYMONT = topdown_methods.SKYMONT
TD_TREMONT = topdown_methods.TREMONT
TD_GOLDMONT = topdown_methods.GOLDMONT
TD_GOLDMONT_PLUS = topdown_methods.GOLDMONT_PLUS
TD_ZEN4 = topdown_methods.ZEN4
TD_ZEN5 = topdown_methods.ZEN5

_CORE = 0x40  # CPUID 0x1A core types (SDM): Intel Core (P-core) and Intel Atom (E-core)
_ATOM = 0x20


@dataclass(frozen=True)
class CoreUarch:
    """The core microarchitecture of one CPU (one hybrid core type) and how top-down analysis fits it."""

    name: str  # "Golden Cove", "Gracemont", "Skylake", "Zen 4"
    topdown: str | None  # a TD_* class, or None when pmutop knows no top-down method for this core
    width: int | None = None  # slots per cycle for the event formulas (None: PERF_METRICS counts slots itself)
    why_not: str = ""  # when topdown is None: why, in a few words


_SLOTS4_CORES = ("Sandy Bridge", "Ivy Bridge", "Haswell", "Broadwell", "Skylake", "Palm Cove")
_L1_CORES = ("Sunny Cove", "Willow Cove", "Cypress Cove")
_L2_CORES = ("Golden Cove", "Raptor Cove", "Redwood Cove", "Lion Cove", "Cougar Cove", "Coyote Cove", "Panther Cove")
_NO_TMA = "no top-down method in pmutop for this core"
_TOPDOWN_BY_CORE: dict[str, tuple[str | None, int | None, str]] = {
    **{name: (TD_SLOTS4, 4, "") for name in _SLOTS4_CORES},
    **{name: (TD_PERF_METRICS, None, "") for name in _L1_CORES},
    **{name: (TD_PERF_METRICS_L2, None, "") for name in _L2_CORES},
    "Gracemont": (TD_GRACEMONT, 5, ""),  # perf adl-metrics.json: TOPDOWN_*.ALL / (5 * CPU_CLK_UNHALTED.CORE)
    "Crestmont": (TD_CRESTMONT, 6, ""),  # mtl/srf metrics: 6 * CPU_CLK_UNHALTED.CORE
    "Skymont": (TD_SKYMONT, 8, ""),  # lnl/arl metrics: 8 * CPU_CLK_UNHALTED.CORE
    "Zen 4": (TD_ZEN4, 6, ""),  # amdzen4/pipeline.json: total_dispatch_slots = 6 * ls_not_halted_cyc
    "Zen 5": (TD_ZEN5, 8, ""),  # amdzen5/pipeline.json: 8 * ls_not_halted_cyc
    # Same events as Skymont (fixed counters 4-6 in Intel's tables), but no slot width in pmutop's sources.
    "Darkmont": (None, None, _NO_TMA + " yet (its slot width is not in pmutop's sources)"),
    "Arctic Wolf": (None, None, _NO_TMA + " yet (its slot width is not in pmutop's sources)"),
    # Linux perf snowridgex/snr-metrics.json SLOTS "4 * CPU_CLK_UNHALTED.CORE"; pmu-tools ehl_ratios.py
    # Pipeline_Width 4.
    "Tremont": (TD_TREMONT, 4, ""),
    # Linux core.c glm_events_attrs: topdown-total-slots.scale "3"; intel_pmu_init, INTEL_ATOM_GOLDMONT_PLUS:
    # "Goldmont Plus has 4-wide pipeline", scale "4". (Intel's GLP table still describes UOPS_NOT_DELIVERED.ANY
    # with Goldmont's 3 uops per cycle, text carried over from the GLM table; pmutop follows the kernel, as perf.)
    "Goldmont": (TD_GOLDMONT, 3, ""),
    "Goldmont Plus": (TD_GOLDMONT_PLUS, 4, ""),
    "Zen 3": (None, None, "Zen 3 has no pipeline-utilisation events (Zen 4 and later have them)"),
    "Zen 6": (None, None, _NO_TMA + " yet"),
}

# Non-hybrid Intel family 6 models -> core.
_INTEL_FAM6_CORES: dict[int, str] = {
    **dict.fromkeys((0x2A, 0x2D), "Sandy Bridge"),
    **dict.fromkeys((0x3A, 0x3E), "Ivy Bridge"),
    **dict.fromkeys((0x3C, 0x45, 0x46, 0x3F), "Haswell"),
    **dict.fromkeys((0x3D, 0x47, 0x4F, 0x56), "Broadwell"),
    # Skylake client/server and every derivative with the same core (Kaby/Coffee/Whiskey/Comet Lake,
    # Cascade/Cooper Lake on 0x55).
    **dict.fromkeys((0x4E, 0x5E, 0x55, 0x8E, 0x9E, 0xA5, 0xA6), "Skylake"),
    0x66: "Palm Cove",  # Cannon Lake
    **dict.fromkeys((0x7D, 0x7E, 0x9D, 0x6A, 0x6C), "Sunny Cove"),  # Ice Lake client / server / D
    **dict.fromkeys((0x8C, 0x8D), "Willow Cove"),  # Tiger Lake
    0xA7: "Cypress Cove",  # Rocket Lake
    0x8F: "Golden Cove",  # Sapphire Rapids
    0xCF: "Raptor Cove",  # Emerald Rapids
    0xD7: "Raptor Cove",  # Bartlett Lake (P-cores only)
    **dict.fromkeys((0xAD, 0xAE), "Redwood Cove"),  # Granite Rapids
    **dict.fromkeys((0x5C, 0x5F), "Goldmont"),
    0x7A: "Goldmont Plus",
    **dict.fromkeys((0x86, 0x96, 0x9C), "Tremont"),  # Snow Ridge, Elkhart Lake, Jasper Lake
    0xBE: "Gracemont",  # Alder Lake-N (E-cores only)
    **dict.fromkeys((0xAF, 0xB6), "Crestmont"),  # Sierra Forest, Grand Ridge
    0xDD: "Darkmont",  # Clearwater Forest
}

# Hybrid models: (core type, native model ID or None for any) -> core. Arrow Lake-H (0xC5) has two E-core
# kinds told apart by the native model ID, as Intel's mapfile does: Skymont (3) and low-power Crestmont (2).
_HybridCores = dict[tuple[int, int | None], str]
_GLC_GRT: _HybridCores = {(_CORE, None): "Golden Cove", (_ATOM, None): "Gracemont"}
_RPC_GRT: _HybridCores = {(_CORE, None): "Raptor Cove", (_ATOM, None): "Gracemont"}
_RWC_CMT: _HybridCores = {(_CORE, None): "Redwood Cove", (_ATOM, None): "Crestmont"}
_LNC_SKT: _HybridCores = {(_CORE, None): "Lion Cove", (_ATOM, None): "Skymont"}
_CGC_DKT: _HybridCores = {(_CORE, None): "Cougar Cove", (_ATOM, None): "Darkmont"}
_CYC_AWF: _HybridCores = {(_CORE, None): "Coyote Cove", (_ATOM, None): "Arctic Wolf"}
_INTEL_HYBRID_CORES: dict[tuple[int, int], _HybridCores] = {
    (6, 0x8A): {(_CORE, None): "Sunny Cove", (_ATOM, None): "Tremont"},  # Lakefield
    **dict.fromkeys(((6, 0x97), (6, 0x9A)), _GLC_GRT),  # Alder Lake
    **dict.fromkeys(((6, 0xB7), (6, 0xBA), (6, 0xBF)), _RPC_GRT),  # Raptor Lake
    **dict.fromkeys(((6, 0xAA), (6, 0xAC), (6, 0xB5)), _RWC_CMT),  # Meteor Lake, Arrow Lake-U
    **dict.fromkeys(((6, 0xBD), (6, 0xC6)), _LNC_SKT),  # Lunar Lake, Arrow Lake-S
    (6, 0xC5): {(_CORE, None): "Lion Cove", (_ATOM, 3): "Skymont", (_ATOM, 2): "Crestmont", (_ATOM, None): "Skymont"},
    **dict.fromkeys(((6, 0xCC), (6, 0xD5)), _CGC_DKT),  # Panther Lake, Wildcat Lake
    **dict.fromkeys(((0x12, 0x01), (0x12, 0x03)), _CYC_AWF),  # Nova Lake
}
_INTEL_OTHER_CORES: dict[tuple[int, int], str] = {(0x13, 0x01): "Panther Cove"}  # Diamond Rapids

# AMD cores: (family, first model, last model, core), the ranges of _AMD above.
_AMD_CORES: tuple[tuple[int, int, int, str], ...] = (
    (0x19, 0x10, 0x1F, "Zen 4"),
    (0x19, 0x60, 0x7F, "Zen 4"),
    (0x19, 0x80, 0xAF, "Zen 4"),
    (0x19, 0x00, 0x5F, "Zen 3"),
    (0x1A, 0x00, 0x4F, "Zen 5"),
    (0x1A, 0x60, 0x7F, "Zen 5"),
    (0x1A, 0x50, 0x5F, "Zen 6"),
    (0x1A, 0x80, 0xAF, "Zen 6"),
    (0x1A, 0xC0, 0xCF, "Zen 6"),
)


def _core_name(vendor: str, family: int, model: int, core_type: int | None, native_model_id: int | None) -> str | None:
    if vendor == "GenuineIntel":
        hybrid = _INTEL_HYBRID_CORES.get((family, model))
        if hybrid is not None:
            if core_type is None:
                return None  # a hybrid model without CPUID 0x1A (some VMs): the core cannot be told
            return hybrid.get((core_type, native_model_id)) or hybrid.get((core_type, None))
        if family == 6:
            return _INTEL_FAM6_CORES.get(model)
        return _INTEL_OTHER_CORES.get((family, model))
    if vendor == "AuthenticAMD":
        for fam, first, last, name in _AMD_CORES:
            if fam == family and first <= model <= last:
                return name
    return None


def core_uarch(
    vendor: str,
    family: int,
    model: int,
    core_type: int | None = None,
    native_model_id: int | None = None,
) -> CoreUarch | None:
    """The core of this CPU signature (and hybrid core type / native model ID), or None when unknown."""
    name = _core_name(vendor, family, model, core_type, native_model_id)
    if name is None:
        return None
    topdown, width, why = _TOPDOWN_BY_CORE.get(name, (None, None, _NO_TMA))
    return CoreUarch(name, topdown, width, why)
