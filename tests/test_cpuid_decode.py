"""CPUID decoding: transcribed register values (always run) and the real dumps in ../shared/cpuid."""

from __future__ import annotations

import json
import re

import pytest
from helpers.cpuid_dumps import CpuDump, cpuid_fn, load_shared_dump, parse_dump, shared_dir

from pmutop.pmu.cpuid_decode import (
    ARCH_EVENT_NAMES,
    HYBRID_PCORE_NOTE,
    CoreType,
    PerfmonInfo,
    decode_core_type,
    decode_identity,
    decode_perfmon,
    family_model_stepping,
    identity_to_dict,
    perfmon_to_dict,
)
from pmutop.pmu.uarch import microarchitecture

# Leaf 0 vendor registers (EBX, ECX, EDX as CPUID returns them), transcribed from the dumps.
INTEL_VENDOR = (0x756E6547, 0x6C65746E, 0x49656E69)  # "Genu" "ntel" "ineI"
AMD_VENDOR = (0x68747541, 0x444D4163, 0x69746E65)  # "Auth" "cAMD" "enti"

# i9-7900X brand leaves 0x80000002..4 (Skylake-X dump).
SKX_BRAND = {
    (0x80000002, 0): (0x65746E49, 0x2952286C, 0x726F4320, 0x4D542865),
    (0x80000003, 0): (0x39692029, 0x3039372D, 0x43205830, 0x40205550),
    (0x80000004, 0): (0x332E3320, 0x7A484730, 0x00000000, 0x00000000),
}

FIRST_SEVEN = ARCH_EVENT_NAMES[:7]


def fake_cpu(
    max_leaf: int = 0x16,
    vendor: tuple[int, int, int] = INTEL_VENDOR,
    leaf1: tuple[int, int, int, int] = (0x00050654, 0, 0, 0),
    max_ext: int = 0x80000008,
    **extra: tuple[int, int, int, int],
) -> CpuDump:
    """A one-CPU register table. Extra leaves as keyword `l<leaf hex>_<subleaf>`, e.g. l0A_0=(...)."""
    dump: CpuDump = {
        (0, 0): (max_leaf, vendor[0], vendor[1], vendor[2]),
        (1, 0): leaf1,
        (0x80000000, 0): (max_ext, 0, 0, 0),
    }
    for key, regs in extra.items():
        leaf, sub = key[1:].split("_")
        dump[(int(leaf, 16), int(sub))] = regs
    return dump


def perfmon(dump: CpuDump) -> PerfmonInfo:
    return decode_perfmon(cpuid_fn(dump))


# --- identity -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("eax", "vendor", "expected"),
    [
        (0x000806F8, "GenuineIntel", (6, 0x8F, 8)),  # Sapphire Rapids
        (0x00050654, "GenuineIntel", (6, 0x55, 4)),  # Skylake-X
        (0x00090672, "GenuineIntel", (6, 0x97, 2)),  # Alder Lake
        (0x00A60F12, "AuthenticAMD", (0x19, 0x61, 2)),  # Raphael
        (0x00800F11, "AuthenticAMD", (0x17, 0x01, 1)),  # Zen 1 (Naples / Summit Ridge)
        (0x00000F29, "GenuineIntel", (0xF, 0x02, 9)),  # NetBurst: base family 0xF, no extension
        (0x00300F10, "GenuineIntel", (0x12, 0x01, 0)),  # family 0x12 = 0xF + 3
        # Base family 6 with an extended model: Intel folds it in, AMD does not.
        (0x00010661, "GenuineIntel", (6, 0x16, 1)),
        (0x00010661, "AuthenticAMD", (6, 0x06, 1)),
    ],
)
def test_family_model_stepping(eax: int, vendor: str, expected: tuple[int, int, int]) -> None:
    assert family_model_stepping(eax, vendor) == expected


def test_identity_sapphire_rapids_signature() -> None:
    ident = decode_identity(cpuid_fn(fake_cpu(max_leaf=0x20, leaf1=(0x000806F8, 0, 0x7FFEFBFF, 0))))
    assert (ident.vendor, ident.family, ident.model, ident.stepping) == ("GenuineIntel", 6, 0x8F, 8)
    assert ident.uarch == "Sapphire Rapids"
    assert ident.max_leaf == 0x20
    assert ident.pdcm is True  # ECX bit 15
    assert ident.hypervisor is False
    assert ident.hypervisor_vendor is None
    assert ident.hybrid is False
    assert ident.brand is None  # max_ext 0x80000008 but the brand leaves are absent (zeros)


def test_identity_amd_signature() -> None:
    ident = decode_identity(cpuid_fn(fake_cpu(max_leaf=0x10, vendor=AMD_VENDOR, leaf1=(0x00A60F12, 0, 0, 0))))
    assert (ident.vendor, ident.family, ident.model, ident.stepping) == ("AuthenticAMD", 0x19, 0x61, 2)
    assert ident.uarch == "Zen 4 (Raphael)"


def test_brand_string_assembly() -> None:
    ident = decode_identity(cpuid_fn(fake_cpu(**{f"l{k[0]:X}_0": v for k, v in SKX_BRAND.items()})))
    assert ident.brand == "Intel(R) Core(TM) i9-7900X CPU @ 3.30GHz"


def test_brand_trailing_padding_stripped() -> None:
    # Raphael pads with spaces and a NUL: "...Processor" + "             \0   "
    regs = {
        "l80000002_0": (0x20444D41, 0x657A7952, 0x2035206E, 0x30303637),
        "l80000003_0": (0x2D362058, 0x65726F43, 0x6F725020, 0x73736563),
        "l80000004_0": (0x2020726F, 0x20202020, 0x20202020, 0x00202020),
    }
    ident = decode_identity(cpuid_fn(fake_cpu(max_ext=0x80000028, vendor=AMD_VENDOR, **regs)))
    assert ident.brand == "AMD Ryzen 5 7600X 6-Core Processor"


def test_brand_needs_extended_leaves() -> None:
    # The brand leaves answer, but the max extended leaf says they do not exist.
    regs = {f"l{k[0]:X}_0": v for k, v in SKX_BRAND.items()}
    assert decode_identity(cpuid_fn(fake_cpu(max_ext=0x80000001, **regs))).brand is None
    # Junk in 0x80000000 (not an extended leaf number) means no extended leaves at all.
    assert decode_identity(cpuid_fn(fake_cpu(max_ext=0x00000123, **regs))).brand is None


def test_hypervisor_bit_and_signature() -> None:
    kvm = (0x40000001, 0x4B4D564B, 0x564B4D56, 0x0000004D)  # "KVMK" "VMKV" "M\0\0\0"
    guest = fake_cpu(leaf1=(0x000806F8, 0, 0x80000000, 0), l40000000_0=kvm)
    ident = decode_identity(cpuid_fn(guest))
    assert ident.hypervisor is True
    assert ident.hypervisor_vendor == "KVMKVMKVM"
    assert identity_to_dict(ident)["hypervisor_vendor"] == "KVMKVMKVM"

    # Bit 31 clear: the hypervisor leaf is not consulted even if something answers it.
    bare = fake_cpu(leaf1=(0x000806F8, 0, 0x7FFFFFFF, 0), l40000000_0=kvm)
    ident = decode_identity(cpuid_fn(bare))
    assert ident.hypervisor is False
    assert ident.hypervisor_vendor is None


def test_hybrid_flag_needs_leaf7_in_range() -> None:
    regs = {"l7_0": (0, 0, 0, 1 << 15)}
    assert decode_identity(cpuid_fn(fake_cpu(max_leaf=0x20, **regs))).hybrid is True
    assert decode_identity(cpuid_fn(fake_cpu(max_leaf=0x6, **regs))).hybrid is False


def test_oserror_reads_as_zeros() -> None:
    def cpuid(leaf: int, subleaf: int) -> tuple[int, int, int, int]:
        if leaf == 0:
            return (0x20, *INTEL_VENDOR)
        if leaf == 1:
            return (0x00090672, 0, 0, 0)
        if leaf == 7:
            return (0, 0, 0, 1 << 15)
        raise OSError(5, "Input/output error")

    ident = decode_identity(cpuid)
    assert (ident.family, ident.model, ident.brand) == (6, 0x97, None)
    assert decode_perfmon(cpuid).version == 0
    assert decode_core_type(cpuid) is None  # 0x1A unreadable: no core type rather than a bogus one


# --- leaf 0xA -----------------------------------------------------------------------------------------


def test_skylake_leaf_0a() -> None:
    info = perfmon(fake_cpu(l0A_0=(0x07300404, 0, 0, 0x00000603)))
    assert (info.version, info.gp_counters, info.gp_mask, info.gp_width) == (4, 4, 0xF, 48)
    assert (info.fixed_counters, info.fixed_mask, info.fixed_width) == (3, 0x7, 48)
    assert info.ebx_length == 7
    assert info.available_events == FIRST_SEVEN
    assert info.unavailable_events == ()
    assert info.anythread_deprecated is False
    assert info.leaf23 is None
    assert info.notes == ()


@pytest.mark.parametrize(
    ("eax", "ecx", "edx", "mask", "count"),
    [
        (0x08300805, 0b1001, 0x0600, 0b1001, 2),  # v5, EDX count 0: ECX bitmap alone (non-contiguous)
        (0x08300805, 0b1000, 0x0603, 0b1111, 4),  # v5: EDX count 3 OR ECX bit 3
        (0x08300805, 0x0000, 0x0604, 0b1111, 4),  # v5: count only
        (0x07300404, 0x00FF, 0x0603, 0b0111, 3),  # v4: ECX is reserved, ignored
        (0x07300402, 0x0000, 0x0602, 0b0011, 2),  # v2: EDX count is valid
        (0x07300401, 0x0000, 0x0603, 0b0000, 0),  # v1: EDX is not defined, no fixed counters
    ],
)
def test_fixed_counter_existence(eax: int, ecx: int, edx: int, mask: int, count: int) -> None:
    info = perfmon(fake_cpu(l0A_0=(eax, 0, ecx, edx)))
    assert info.fixed_mask == mask
    assert info.fixed_counters == count


def test_fixed_width_only_from_v2() -> None:
    assert perfmon(fake_cpu(l0A_0=(0x07300401, 0, 0, 0x0603))).fixed_width == 0
    assert perfmon(fake_cpu(l0A_0=(0x07300402, 0, 0, 0x0603))).fixed_width == 48
    assert perfmon(fake_cpu(l0A_0=(0x07300402, 0, 0, 0x0503))).fixed_width == 40


def test_unavailable_events_limited_by_length() -> None:
    # EBX bits 4 (llc-misses) and 12 (lbr-inserts) set; length 7 hides bit 12.
    ebx = (1 << 4) | (1 << 12)
    info = perfmon(fake_cpu(l0A_0=(0x07300404, ebx, 0, 0x603)))
    assert info.unavailable_events == ("llc-misses",)
    assert info.available_events == (
        "cycles",
        "instructions",
        "ref-cycles",
        "llc-references",
        "branches",
        "branch-misses",
    )
    # Length 13 covers bit 12.
    info = perfmon(fake_cpu(l0A_0=(0x0D300805, ebx, 0, 0x8604)))
    assert info.unavailable_events == ("llc-misses", "lbr-inserts")
    assert len(info.available_events) == 11
    assert "topdown-retiring" in info.available_events


def test_short_ebx_length_noted() -> None:
    info = perfmon(fake_cpu(l0A_0=(0x05300404, 0, 0, 0x603)))
    assert info.ebx_length == 5
    assert info.available_events == FIRST_SEVEN[:5]
    assert any("EBX length 5 < 7" in n for n in info.notes)


def test_anythread_deprecated_only_v5() -> None:
    assert perfmon(fake_cpu(l0A_0=(0x08300805, 0, 0xF, 0x8604))).anythread_deprecated is True
    assert perfmon(fake_cpu(l0A_0=(0x07300404, 0, 0, 0x8603))).anythread_deprecated is False


@pytest.mark.parametrize(
    "dump",
    [
        fake_cpu(l0A_0=(0x07300400, 0xFF, 0xF, 0x603)),  # version byte 0, other fields junk
        fake_cpu(max_leaf=0x9, l0A_0=(0x07300404, 0, 0, 0x603)),  # leaf 0xA beyond max leaf
        fake_cpu(max_leaf=0x10, vendor=AMD_VENDOR, l0A_0=(0x07300404, 0, 0, 0x603)),  # not Intel
        fake_cpu(),  # leaf 0xA all zeros
    ],
)
def test_no_architectural_pmu(dump: CpuDump) -> None:
    info = perfmon(dump)
    assert info.version == 0
    assert (info.gp_counters, info.gp_mask, info.gp_width) == (0, 0, 0)
    assert (info.fixed_counters, info.fixed_mask, info.fixed_width) == (0, 0, 0)
    assert info.available_events == ()
    assert info.unavailable_events == ()
    assert info.leaf23 is None
    assert len(info.notes) == 1


def test_no_pmu_under_hypervisor_says_so() -> None:
    info = perfmon(fake_cpu(leaf1=(0x000806F8, 0, 1 << 31, 0)))
    assert info.version == 0
    assert "hypervisor" in info.notes[0]


# --- leaf 0x23 ----------------------------------------------------------------------------------------


def leaf23_cpu(ext_bit: bool = True, subleaves: int = 0b11, hybrid_core: int | None = None) -> CpuDump:
    regs = {
        "l7_0": (0, 0, 0, (1 << 15) if hybrid_core else 0),
        "l7_1": ((1 << 8) if ext_bit else 0, 0, 0, 0),
        "l0A_0": (0x08300605, 0, 0x7, 0x8603),  # 6 GP, 3 fixed
        "l23_0": (subleaves, 0b011, 0, 0),  # UMASK2 + EQ
        "l23_1": (0x3FF, 0x77, 0, 0),  # 10 GP; fixed 0-2 and 4-6
    }
    if hybrid_core is not None:
        regs["l1A_0"] = (hybrid_core << 24 | 3, 0, 0, 0)
    return fake_cpu(max_leaf=0x23, leaf1=(0x000C06C0, 0, 0, 0), **regs)


def test_leaf23_bitmaps_override_leaf_0a() -> None:
    info = perfmon(leaf23_cpu())
    assert (info.gp_counters, info.gp_mask) == (10, 0x3FF)
    assert (info.fixed_counters, info.fixed_mask) == (6, 0x77)
    assert info.gp_width == 48 and info.fixed_width == 48  # widths still from leaf 0xA
    assert info.leaf23 is not None
    assert info.leaf23.subleaves == 0b11
    assert (info.leaf23.umask2, info.leaf23.eq, info.leaf23.rdpmc_user_disable) == (True, True, False)
    assert (info.leaf23.gp_mask, info.leaf23.fixed_mask) == (0x3FF, 0x77)
    d = perfmon_to_dict(info)
    assert d["leaf23"] == {
        "subleaves": 3,
        "umask2": True,
        "eq": True,
        "rdpmc_user_disable": False,
        "gp_mask": 0x3FF,
        "fixed_mask": 0x77,
    }
    assert d["gp_counters"] == 10


def test_leaf23_ignored_without_cpuid7_1_eax8() -> None:
    info = perfmon(leaf23_cpu(ext_bit=False))
    assert info.leaf23 is None
    assert (info.gp_counters, info.gp_mask, info.fixed_mask) == (6, 0x3F, 0x7)


def test_leaf23_without_counter_subleaf() -> None:
    info = perfmon(leaf23_cpu(subleaves=0b1))
    assert info.leaf23 is not None
    assert (info.leaf23.gp_mask, info.leaf23.fixed_mask) == (None, None)
    assert (info.gp_counters, info.fixed_counters) == (6, 3)


def test_hybrid_note_only_without_leaf23_counts() -> None:
    assert HYBRID_PCORE_NOTE not in perfmon(leaf23_cpu(hybrid_core=0x40)).notes
    assert HYBRID_PCORE_NOTE in perfmon(leaf23_cpu(ext_bit=False, hybrid_core=0x40)).notes
    assert HYBRID_PCORE_NOTE not in perfmon(leaf23_cpu(ext_bit=False, hybrid_core=0x20)).notes


# Lunar Lake (family 6 model 0xBD) as Linux sees it: PMU v6, per-core-type counters from CPUID 0x23.1.
# Lion Cove P-core: 10 GP counters (intel_lnc_event_constraints restrict events to 0x3ff) and fixed 0-3 (SLOTS
# on fixed 3); Skymont E-core: fixed 0-2 and 4-6 (intel_skt_event_constraints, asm/perf_event.h "fixed
# counter 4..6 (Atom only)"), i.e. 0x77. The E-core's 8 GP counters and what leaf 0xA reports are assumptions.
LNL_SIGNATURE = 0x000B06D1  # family 6, model 0xBD, stepping 1


def lunar_lake_cpu(core: int, gp_mask: int, fixed_mask: int, leaf0a_gp: int = 8) -> CpuDump:
    return fake_cpu(
        max_leaf=0x23,
        leaf1=(LNL_SIGNATURE, 0, 1 << 15, 0),
        l7_0=(1, 0, 0, 1 << 15),
        l7_1=(1 << 8, 0, 0, 0),
        l0A_0=(0x08300006 | leaf0a_gp << 8, 0, 0x7, 0x8603),
        l1A_0=(core << 24 | 1, 0, 0, 0),
        l23_0=(0b11, 0b011, 0, 0),
        l23_1=(gp_mask, fixed_mask, 0, 0),
    )


def test_lunar_lake_p_core_v6_ten_gp_counters() -> None:
    dump = lunar_lake_cpu(0x40, 0x3FF, 0xF)
    assert decode_identity(cpuid_fn(dump)).uarch == "Lunar Lake"
    info = perfmon(dump)
    assert info.version == 6
    assert (info.gp_counters, info.gp_mask, info.gp_width) == (10, 0x3FF, 48)
    assert (info.fixed_counters, info.fixed_mask) == (4, 0xF)
    assert info.leaf23 is not None and info.leaf23.gp_mask == 0x3FF
    assert HYBRID_PCORE_NOTE not in info.notes
    assert not any("contiguous" in n for n in info.notes)


def test_lunar_lake_e_core() -> None:
    info = perfmon(lunar_lake_cpu(0x20, 0xFF, 0x77))
    assert (info.version, info.gp_counters, info.gp_mask) == (6, 8, 0xFF)
    assert (info.fixed_counters, info.fixed_mask) == (6, 0x77)


@pytest.mark.parametrize(
    ("gp_mask", "count"),
    [(0xFFFF, 16), (0xFFFFFFFF, 32), (0x2FF, 9), (0x3FE, 9)],
)
def test_leaf23_gp_bitmaps_beyond_eight(gp_mask: int, count: int) -> None:
    info = perfmon(lunar_lake_cpu(0x40, gp_mask, 0xF))
    assert (info.gp_counters, info.gp_mask) == (count, gp_mask)
    holes = [n for n in info.notes if "not contiguous" in n]
    if gp_mask & (gp_mask + 1):
        assert holes == [
            f"GP counter bitmap {gp_mask:#x} is not contiguous: only the counters below the first gap are used"
        ]
    else:
        assert holes == []


def test_register_map_and_counter_indexes_follow_the_version() -> None:
    p_core = perfmon(lunar_lake_cpu(0x40, 0x3FF, 0xF))
    assert p_core.registers.kind == "v6"
    assert p_core.gp_indexes == tuple(range(10)) and p_core.fixed_indexes == (0, 1, 2, 3)
    gapped = perfmon(lunar_lake_cpu(0x20, 0x2FF, 0x77))
    assert gapped.gp_indexes == (0, 1, 2, 3, 4, 5, 6, 7, 9)
    assert gapped.fixed_indexes == (0, 1, 2, 4, 5, 6)
    # A legacy PMU claiming 12 GP counters has registers for 8 only.
    legacy = perfmon(fake_cpu(l0A_0=(0x07300C04, 0, 0, 0x603)))
    assert legacy.registers.kind == "legacy"
    assert (legacy.gp_counters, legacy.gp_indexes) == (12, tuple(range(8)))


def test_v6_without_leaf23_counts_from_leaf_0a() -> None:
    # A hypervisor may expose v6 without the extension leaf: EAX[15:8] (here 10) is all there is.
    dump = lunar_lake_cpu(0x40, 0x3FF, 0xF, leaf0a_gp=10)
    dump[(7, 1)] = (0, 0, 0, 0)
    info = perfmon(dump)
    assert (info.version, info.gp_counters, info.gp_mask, info.leaf23) == (6, 10, 0x3FF, None)


# --- core type ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("eax", "expected"),
    [
        (0x40000001, CoreType(0x40, 0x000001, "P", "P-core (Core)")),
        (0x20000001, CoreType(0x20, 0x000001, "E", "E-core (Atom)")),
        (0x30ABCDEF, CoreType(0x30, 0xABCDEF, "?", "unknown core type 0x30")),
    ],
)
def test_core_type(eax: int, expected: CoreType) -> None:
    hybrid = fake_cpu(max_leaf=0x20, l7_0=(0, 0, 0, 1 << 15), l1A_0=(eax, 0, 0, 0))
    assert decode_core_type(cpuid_fn(hybrid)) == expected


def test_core_type_requires_hybrid_and_leaf_1a() -> None:
    not_hybrid = fake_cpu(max_leaf=0x20, l7_0=(0, 0, 0, 0), l1A_0=(0x40000001, 0, 0, 0))
    assert decode_core_type(cpuid_fn(not_hybrid)) is None
    low_max = fake_cpu(max_leaf=0x19, l7_0=(0, 0, 0, 1 << 15), l1A_0=(0x40000001, 0, 0, 0))
    assert decode_core_type(cpuid_fn(low_max)) is None


# --- JSON views ---------------------------------------------------------------------------------------


def test_dicts_are_json_ready() -> None:
    info = perfmon(fake_cpu(l0A_0=(0x07300404, 1 << 2, 0, 0x603)))
    d = perfmon_to_dict(info)
    assert json.loads(json.dumps(d)) == d
    assert d["unavailable_events"] == ["ref-cycles"]
    assert d["leaf23"] is None
    assert {
        "version",
        "gp_counters",
        "gp_width",
        "gp_mask",
        "fixed_counters",
        "fixed_width",
        "fixed_mask",
        "unavailable_events",
        "available_events",
        "anythread_deprecated",
        "leaf23",
        "notes",
    } <= d.keys()
    ident = identity_to_dict(decode_identity(cpuid_fn(fake_cpu())))
    assert json.loads(json.dumps(ident)) == ident
    assert ident["microarchitecture"] == "Skylake-SP/X"
    assert set(ident) == {
        "vendor",
        "family",
        "model",
        "stepping",
        "brand",
        "hypervisor",
        "hypervisor_vendor",
        "pdcm",
        "hybrid",
        "microarchitecture",
    }


# --- uarch table --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("vendor", "family", "model", "stepping", "name"),
    [
        ("GenuineIntel", 6, 0x55, 4, "Skylake-SP/X"),
        ("GenuineIntel", 6, 0x55, 7, "Cascade Lake"),
        ("GenuineIntel", 6, 0x55, 11, "Cooper Lake"),
        ("GenuineIntel", 6, 0x9E, 9, "Kaby Lake"),
        ("GenuineIntel", 6, 0x9E, 13, "Coffee Lake"),
        ("GenuineIntel", 6, 0x8E, 11, "Whiskey Lake"),
        ("GenuineIntel", 6, 0x4E, 3, "Skylake"),
        ("GenuineIntel", 6, 0x97, 2, "Alder Lake"),
        ("GenuineIntel", 6, 0xBE, 0, "Alder Lake-N (Gracemont)"),
        ("GenuineIntel", 6, 0xAF, 3, "Sierra Forest (Crestmont)"),
        ("GenuineIntel", 0x12, 0x01, 0, "Nova Lake"),
        ("GenuineIntel", 0x13, 0x01, 0, "Diamond Rapids"),
        ("AuthenticAMD", 0x17, 0x08, 2, "Zen+ (Pinnacle Ridge)"),
        ("AuthenticAMD", 0x17, 0x71, 0, "Zen 2 (Matisse)"),
        ("AuthenticAMD", 0x19, 0x01, 1, "Zen 3 (Milan)"),
        ("AuthenticAMD", 0x19, 0x61, 2, "Zen 4 (Raphael)"),
        ("AuthenticAMD", 0x1A, 0x44, 0, "Zen 5 (Granite Ridge)"),
        ("GenuineIntel", 6, 0x01, 0, None),
        ("GenuineIntel", 0x19, 0x61, 2, None),  # AMD numbers under the wrong vendor
        ("AuthenticAMD", 6, 0x55, 4, None),
        ("CentaurHauls", 6, 0x0F, 0, None),
    ],
)
def test_microarchitecture(vendor: str, family: int, model: int, stepping: int, name: str | None) -> None:
    assert microarchitecture(vendor, family, model, stepping) == name


# Models in Intel's mapfile whose product name this table does not claim to know.
UNNAMED_MAPFILE_MODELS = {0xE5}


def test_uarch_covers_intel_mapfile() -> None:
    shared = shared_dir()
    mapfile = shared / "perfmon" / "mapfile.csv" if shared else None
    if mapfile is None or not mapfile.is_file():
        pytest.skip("../shared/perfmon/mapfile.csv not available")
    pattern = re.compile(r"^GenuineIntel-(\d+)-([0-9A-F]+)(?:-\[([0-9A-F]+)\])?$")
    checked = 0
    for line in mapfile.read_text().splitlines()[1:]:
        cols = line.split(",")
        m = pattern.match(cols[0])
        if m is None or cols[3] not in ("core", "hybridcore"):
            continue
        family, model = int(m.group(1)), int(m.group(2), 16)
        if model in UNNAMED_MAPFILE_MODELS:
            continue
        steppings = [int(c, 16) for c in m.group(3)] if m.group(3) else [0]
        for stepping in steppings:
            name = microarchitecture("GenuineIntel", family, model, stepping)
            assert name is not None, cols[0]
            checked += 1
            # The mapfile splits 0x55 by stepping into Skylake-X (SKX) and Cascade Lake (CLX) event files.
            if model == 0x55 and family == 6:
                assert name.startswith("Skylake") == (cols[2].startswith("/SKX/")), (stepping, name)
    assert checked > 50


# --- real dumps (../shared/cpuid) ---------------------------------------------------------------------


def shared_dump(fragment: str) -> dict[int, CpuDump]:
    dump = load_shared_dump(fragment)
    if dump is None:
        pytest.skip(f"../shared/cpuid/*{fragment}* not available")
    return dump


def test_parse_dump_format() -> None:
    text = """\
------[ Versions ]------

Program Version : AIDA64 Engineer v7.50.7209 Beta
CPUID Revision    : 00090672h

------[ CPUID Registers / Logical CPU #3 ]------

allcpu: Package 0 / Core 1 / Thread 1: Valid, Virtual, Intel Core

CPUID 00000000: 00000020-756E6547-6C65746E-49656E69 [GenuineIntel]
CPUID 00000004: FC004122-01C0003F-0000003F-00000000 [SL 01] [L1I: 32 KB]
CPUID 0000000D: 00000010-00000000-00000001-00000000 [SL 0B]
CPUID 0000001A: 40000001-00000000-00000000-00000000 [Core: Golden Cove]
CPUID 80000004: 4B303039-00000000-00000000-00000000 [900K]

------[ All CPUs ]------

CPU   0: APICID    0 / Package 0 / Core   0 / Thread 0: Valid

------[ MSR Registers / Logical CPU #3 ]------

MSR 00000017: 0004-0000-0000-0000 [PlatID = 1]
"""
    cpus = parse_dump(text)
    assert list(cpus) == [3]
    assert cpus[3] == {
        (0x0, 0): (0x00000020, 0x756E6547, 0x6C65746E, 0x49656E69),
        (0x4, 1): (0xFC004122, 0x01C0003F, 0x0000003F, 0x00000000),
        (0xD, 0xB): (0x00000010, 0x00000000, 0x00000001, 0x00000000),
        (0x1A, 0): (0x40000001, 0, 0, 0),
        (0x80000004, 0): (0x4B303039, 0, 0, 0),
    }
    assert cpuid_fn(cpus[3])(0x4, 7) == (0, 0, 0, 0)


def test_dump_skylake_x() -> None:
    cpus = shared_dump("SkylakeX")
    assert sorted(cpus) == list(range(20))
    for n, dump in cpus.items():
        fn = cpuid_fn(dump)
        ident = decode_identity(fn)
        assert (ident.vendor, ident.family, ident.model, ident.stepping) == ("GenuineIntel", 6, 0x55, 4), n
        assert ident.uarch == "Skylake-SP/X"
        assert ident.brand == "Intel(R) Core(TM) i9-7900X CPU @ 3.30GHz"
        assert (ident.max_leaf, ident.hypervisor, ident.pdcm, ident.hybrid) == (0x16, False, True, False)
        # 0A: 07300404-00000000-00000000-00000603
        info = decode_perfmon(fn)
        assert (info.version, info.gp_counters, info.gp_mask, info.gp_width) == (4, 4, 0xF, 48)
        assert (info.fixed_counters, info.fixed_mask, info.fixed_width) == (3, 0x7, 48)
        assert (info.ebx_length, info.unavailable_events, info.available_events) == (7, (), FIRST_SEVEN)
        assert (info.anythread_deprecated, info.leaf23, info.notes) == (False, None, ())
        assert decode_core_type(fn) is None


def test_dump_sapphire_rapids() -> None:
    cpus = shared_dump("SapphireRapids")
    assert sorted(cpus) == list(range(40))
    for n, dump in cpus.items():
        fn = cpuid_fn(dump)
        ident = decode_identity(fn)
        assert (ident.family, ident.model, ident.stepping) == (6, 0x8F, 8), n
        assert ident.uarch == "Sapphire Rapids"
        assert ident.brand == "Intel(R) Xeon(R) w7-2475X"
        assert (ident.max_leaf, ident.hypervisor, ident.pdcm, ident.hybrid) == (0x20, False, True, False)
        # 0A: 08300805-00000000-0000000F-00008604; max leaf 0x20 so no leaf 0x23
        info = decode_perfmon(fn)
        assert (info.version, info.gp_counters, info.gp_mask, info.gp_width) == (5, 8, 0xFF, 48)
        assert (info.fixed_counters, info.fixed_mask, info.fixed_width) == (4, 0xF, 48)
        assert info.ebx_length == 8
        assert info.unavailable_events == ()
        assert info.available_events == (*FIRST_SEVEN, "topdown-slots")
        assert (info.anythread_deprecated, info.leaf23, info.notes) == (True, None, ())


def test_dump_alder_lake_hybrid() -> None:
    cpus = shared_dump("AlderLake")
    assert sorted(cpus) == list(range(24))
    for n, dump in cpus.items():
        fn = cpuid_fn(dump)
        ident = decode_identity(fn)
        assert (ident.family, ident.model, ident.stepping) == (6, 0x97, 2), n
        assert ident.uarch == "Alder Lake"
        assert ident.brand == "12th Gen Intel(R) Core(TM) i9-12900K"
        assert (ident.max_leaf, ident.hybrid, ident.pdcm) == (0x20, True, True)

        core = decode_core_type(fn)
        # CPUs 0-15: 8 Golden Cove cores x 2 threads; 16-23: 8 Gracemont cores.
        if n < 16:
            assert core == CoreType(0x40, 0x000001, "P", "P-core (Core)"), n
        else:
            assert core == CoreType(0x20, 0x000001, "E", "E-core (Atom)"), n

        # Both core types answer 0A: 07300605-00000000-00000007-00008603 (the common subset).
        info = decode_perfmon(fn)
        assert (info.version, info.gp_counters, info.gp_mask, info.gp_width) == (5, 6, 0x3F, 48), n
        assert (info.fixed_counters, info.fixed_mask, info.fixed_width) == (3, 0x7, 48), n
        assert (info.ebx_length, info.unavailable_events, info.available_events) == (7, (), FIRST_SEVEN)
        assert info.anythread_deprecated is True
        assert info.leaf23 is None  # CPUID.(7,1):EAX = 00400810, bit 8 clear
        assert info.notes == ((HYBRID_PCORE_NOTE,) if n < 16 else ()), n


def test_dump_zen4_raphael() -> None:
    cpus = shared_dump("Raphael")
    assert sorted(cpus) == list(range(12))
    for n, dump in cpus.items():
        fn = cpuid_fn(dump)
        ident = decode_identity(fn)
        assert (ident.vendor, ident.family, ident.model, ident.stepping) == ("AuthenticAMD", 0x19, 0x61, 2), n
        assert ident.uarch is not None and "Zen 4" in ident.uarch
        assert ident.brand == "AMD Ryzen 5 7600X 6-Core Processor"
        assert (ident.max_leaf, ident.hypervisor, ident.pdcm, ident.hybrid) == (0x10, False, False, False)
        info = decode_perfmon(fn)
        assert (info.version, info.gp_counters, info.gp_mask) == (0, 0, 0)
        assert (info.fixed_counters, info.fixed_mask, info.fixed_width) == (0, 0, 0)
        assert "AuthenticAMD" in info.notes[0]
        assert decode_core_type(fn) is None
