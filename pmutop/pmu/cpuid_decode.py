"""Decode the CPUID leaves pmutop needs: identity (leaves 0, 1, 7, 0x40000000, 0x80000002..4),
architectural PerfMon (0xA, 0x23) and hybrid core type (0x1A).

Pure functions over a `CpuidFn`; nothing here touches hardware. CPUID answers for the logical CPU that
executes it, so the caller passes a function bound to one CPU (e.g. reads of /dev/cpu/N/cpuid).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pmutop.pmu.registers import CounterRegisters, register_map
from pmutop.pmu.uarch import microarchitecture

CpuidFn = Callable[[int, int], tuple[int, int, int, int]]

# Index = CPUID.0AH:EBX bit (SDM; Linux kvm selftests pmu.h for bits 7..12).
ARCH_EVENT_NAMES: tuple[str, ...] = (
    "cycles",
    "instructions",
    "ref-cycles",
    "llc-references",
    "llc-misses",
    "branches",
    "branch-misses",
    "topdown-slots",
    "topdown-backend-bound",
    "topdown-bad-spec",
    "topdown-fe-bound",
    "topdown-retiring",
    "lbr-inserts",
)

CORE_TYPE_ATOM = 0x20
CORE_TYPE_CORE = 0x40

HYBRID_PCORE_NOTE = (
    "CPUID 0xA reports the common subset on hybrid parts; the kernel assumes +2 GP and +1 fixed on P-cores"
)

_ZERO = (0, 0, 0, 0)
_EXT_BASE = 0x80000000
_HV_BASE = 0x40000000


@dataclass(frozen=True)
class CpuIdentity:
    vendor: str
    family: int
    model: int
    stepping: int
    brand: str | None
    max_leaf: int
    hypervisor: bool
    hypervisor_vendor: str | None
    pdcm: bool
    hybrid: bool
    uarch: str | None


@dataclass(frozen=True)
class Leaf23Info:
    subleaves: int
    umask2: bool
    eq: bool
    rdpmc_user_disable: bool
    gp_mask: int | None
    fixed_mask: int | None


@dataclass(frozen=True)
class PerfmonInfo:
    version: int
    gp_counters: int
    gp_mask: int
    gp_width: int
    fixed_counters: int
    fixed_mask: int
    fixed_width: int
    ebx_length: int
    unavailable_events: tuple[str, ...]
    available_events: tuple[str, ...]
    anythread_deprecated: bool
    leaf23: Leaf23Info | None
    notes: tuple[str, ...]

    @property
    def registers(self) -> CounterRegisters:
        """Where this PMU's counters live: the legacy MSRs, or the 0x1900 range from version 6 (as Linux does)."""
        return register_map(self.version)

    @property
    def gp_indexes(self) -> tuple[int, ...]:
        """GP counters that exist (set bits of gp_mask, which may have gaps) and have an MSR in `registers`:
        the event selects to inspect for foreign use."""
        return tuple(i for i in range(self.registers.max_gp) if self.gp_mask >> i & 1)

    @property
    def fixed_indexes(self) -> tuple[int, ...]:
        """Fixed counters that exist and have an MSR in `registers`."""
        return tuple(i for i in range(self.registers.max_fixed) if self.fixed_mask >> i & 1)


@dataclass(frozen=True)
class CoreType:
    code: int
    native_model_id: int
    short: str
    name: str


class _Leaves:
    """Range-checked CPUID reads.

    A leaf above the reported maximum reads as zeros: Intel CPUs answer such queries with the data of the
    highest basic leaf, which would otherwise decode as garbage. Leaves the CpuidFn cannot answer
    (OSError) also read as zeros.
    """

    def __init__(self, cpuid: CpuidFn) -> None:
        self._cpuid = cpuid
        self.max_basic = self.raw(0)[0]
        ext = self.raw(_EXT_BASE)[0]
        # Very old CPUs return junk here; a valid answer is itself an extended leaf number.
        self.max_ext = ext if _EXT_BASE <= ext <= 0x8000FFFF else 0

    def raw(self, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        try:
            eax, ebx, ecx, edx = self._cpuid(leaf, subleaf)
        except OSError:
            return _ZERO
        return (eax & 0xFFFFFFFF, ebx & 0xFFFFFFFF, ecx & 0xFFFFFFFF, edx & 0xFFFFFFFF)

    def get(self, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        limit = self.max_ext if leaf >= _EXT_BASE else self.max_basic
        if leaf > limit:
            return _ZERO
        return self.raw(leaf, subleaf)

    def vendor(self) -> str:
        _, ebx, ecx, edx = self.get(0)
        return _regs_text(ebx, edx, ecx)

    def hybrid(self) -> bool:
        return bool(self.get(7, 0)[3] >> 15 & 1)


def _regs_text(*regs: int) -> str:
    """Registers as little-endian ASCII (vendor, brand, hypervisor signatures), NULs dropped."""
    return struct.pack(f"<{len(regs)}I", *regs).decode("latin-1").replace("\0", "")


def _bit(value: int, n: int) -> bool:
    return bool(value >> n & 1)


def family_model_stepping(eax: int, vendor: str) -> tuple[int, int, int]:
    """Display family, display model and stepping from CPUID.1:EAX.

    Intel folds the extended model in for base family 6 and 0xF; AMD (and Hygon) only for 0xF.
    The extended family is added only when the base family is 0xF, for every vendor.
    """
    stepping = eax & 0xF
    model = eax >> 4 & 0xF
    base_family = eax >> 8 & 0xF
    ext_model = eax >> 16 & 0xF
    ext_family = eax >> 20 & 0xFF
    family = base_family + ext_family if base_family == 0xF else base_family
    amd_like = vendor in ("AuthenticAMD", "HygonGenuine")
    if base_family == 0xF or (base_family == 6 and not amd_like):
        model |= ext_model << 4
    return family, model, stepping


def decode_identity(cpuid: CpuidFn) -> CpuIdentity:
    r = _Leaves(cpuid)
    vendor = r.vendor()
    eax1, _, ecx1, _ = r.get(1)
    family, model, stepping = family_model_stepping(eax1, vendor)

    brand: str | None = None
    if r.max_ext >= 0x80000004:
        regs = [reg for leaf in range(0x80000002, 0x80000005) for reg in r.get(leaf)]
        brand = _regs_text(*regs).strip() or None

    hypervisor = _bit(ecx1, 31)
    hypervisor_vendor: str | None = None
    if hypervisor:
        # Hypervisor leaves live outside both ranges; CPUID.1:ECX[31] is what makes them valid.
        _, ebx, ecx, edx = r.raw(_HV_BASE)
        hypervisor_vendor = _regs_text(ebx, ecx, edx).strip() or None

    return CpuIdentity(
        vendor=vendor,
        family=family,
        model=model,
        stepping=stepping,
        brand=brand,
        max_leaf=r.max_basic,
        hypervisor=hypervisor,
        hypervisor_vendor=hypervisor_vendor,
        pdcm=_bit(ecx1, 15),
        hybrid=r.hybrid(),
        uarch=microarchitecture(vendor, family, model, stepping),
    )


def _core_type(r: _Leaves) -> CoreType | None:
    if not r.hybrid() or r.max_basic < 0x1A:
        return None
    eax = r.get(0x1A)[0]
    if eax == 0:  # hybrid flag without a core type (seen under some hypervisors): nothing to report
        return None
    code = eax >> 24
    if code == CORE_TYPE_CORE:
        short, name = "P", "P-core (Core)"
    elif code == CORE_TYPE_ATOM:
        short, name = "E", "E-core (Atom)"
    else:
        short, name = "?", f"unknown core type {code:#x}"
    return CoreType(code=code, native_model_id=eax & 0xFFFFFF, short=short, name=name)


def decode_core_type(cpuid: CpuidFn) -> CoreType | None:
    """Hybrid core type of the CPU that answers `cpuid`; None on non-hybrid parts."""
    return _core_type(_Leaves(cpuid))


def _no_pmu(note: str) -> PerfmonInfo:
    return PerfmonInfo(
        version=0,
        gp_counters=0,
        gp_mask=0,
        gp_width=0,
        fixed_counters=0,
        fixed_mask=0,
        fixed_width=0,
        ebx_length=0,
        unavailable_events=(),
        available_events=(),
        anythread_deprecated=False,
        leaf23=None,
        notes=(note,),
    )


def _leaf23(r: _Leaves) -> Leaf23Info | None:
    # CPUID.(7,1):EAX[8] = ArchPerfmonExt; without it leaf 0x23 is not defined even if max_leaf covers it.
    if r.max_basic < 0x23 or not _bit(r.get(7, 1)[0], 8):
        return None
    subleaves, ebx0, _, _ = r.get(0x23, 0)
    gp_mask = fixed_mask = None
    if _bit(subleaves, 1):
        gp_mask, fixed_mask, _, _ = r.get(0x23, 1)
    return Leaf23Info(
        subleaves=subleaves,
        umask2=_bit(ebx0, 0),
        eq=_bit(ebx0, 1),
        rdpmc_user_disable=_bit(ebx0, 2),
        gp_mask=gp_mask,
        fixed_mask=fixed_mask,
    )


def decode_perfmon(cpuid: CpuidFn) -> PerfmonInfo:
    """Architectural PMU of the CPU that answers `cpuid` (leaf 0xA, refined by leaf 0x23.1 when present)."""
    r = _Leaves(cpuid)
    vendor = r.vendor()
    if vendor != "GenuineIntel":
        return _no_pmu(f"{vendor or 'unknown vendor'}: CPUID leaf 0xA describes Intel PMUs only")
    if r.max_basic < 0xA:
        return _no_pmu(f"CPUID leaf 0xA not supported (max basic leaf {r.max_basic:#x})")
    eax, ebx, ecx, edx = r.get(0xA)
    version = eax & 0xFF
    if version == 0:
        hv = " (hypervisor exposes no virtual PMU)" if _bit(r.get(1)[2], 31) else ""
        return _no_pmu(f"CPUID leaf 0xA reports no architectural PMU{hv}")

    notes: list[str] = []
    gp_counters = eax >> 8 & 0xFF
    gp_mask = (1 << gp_counters) - 1
    gp_width = eax >> 16 & 0xFF
    ebx_length = eax >> 24 & 0xFF

    # EDX fixed-counter fields are only defined from v2; the ECX bitmap only from v5.
    fixed_count = edx & 0x1F if version > 1 else 0
    fixed_width = edx >> 5 & 0xFF if version > 1 else 0
    fixed_mask = (1 << fixed_count) - 1
    if version >= 5:
        fixed_mask |= ecx  # SDM RDPMC rule: fixed i exists iff EDX[4:0] > i or ECX[i]
    anythread_deprecated = version >= 5 and _bit(edx, 15)

    known = min(ebx_length, len(ARCH_EVENT_NAMES))
    unavailable = tuple(ARCH_EVENT_NAMES[i] for i in range(known) if _bit(ebx, i))
    available = tuple(ARCH_EVENT_NAMES[i] for i in range(known) if not _bit(ebx, i))

    leaf23 = _leaf23(r)
    from_leaf23 = False
    if leaf23 is not None and leaf23.gp_mask is not None and leaf23.fixed_mask is not None:
        # Per-CPU bitmaps: exact on hybrid parts, and counters need not be contiguous.
        gp_mask, fixed_mask = leaf23.gp_mask, leaf23.fixed_mask
        from_leaf23 = True
        notes.append("counter bitmaps from CPUID 0x23 sub-leaf 1")

    if gp_mask & (gp_mask + 1):
        # CPUID 0x23.1 EAX is a bitmap: a gap is legal, but rdpmc of a missing counter faults and pmutop reads
        # counters 0..n-1 in one sweep (pmutop.pmu.plan).
        notes.append(
            f"GP counter bitmap {gp_mask:#x} is not contiguous: only the counters below the first gap are used"
        )
    if ebx_length < 7:
        notes.append(f"EBX length {ebx_length} < 7: Linux does not use this architectural PMU")
    if 2 <= version <= 4 and fixed_count == 0:
        notes.append(f"PMU v{version} reports no fixed counters (Linux assumes 3 on bare metal)")
    core = _core_type(r)
    if core is not None and core.code == CORE_TYPE_CORE and not from_leaf23:
        notes.append(HYBRID_PCORE_NOTE)

    return PerfmonInfo(
        version=version,
        gp_counters=gp_mask.bit_count(),
        gp_mask=gp_mask,
        gp_width=gp_width,
        fixed_counters=fixed_mask.bit_count(),
        fixed_mask=fixed_mask,
        fixed_width=fixed_width,
        ebx_length=ebx_length,
        unavailable_events=unavailable,
        available_events=available,
        anythread_deprecated=anythread_deprecated,
        leaf23=leaf23,
        notes=tuple(notes),
    )


def perfmon_to_dict(info: PerfmonInfo) -> dict[str, Any]:
    """JSON-ready view (tuples become lists, leaf23 a dict or None)."""
    leaf23: dict[str, Any] | None = None
    if info.leaf23 is not None:
        l23 = info.leaf23
        leaf23 = {
            "subleaves": l23.subleaves,
            "umask2": l23.umask2,
            "eq": l23.eq,
            "rdpmc_user_disable": l23.rdpmc_user_disable,
            "gp_mask": l23.gp_mask,
            "fixed_mask": l23.fixed_mask,
        }
    return {
        "version": info.version,
        "gp_counters": info.gp_counters,
        "gp_width": info.gp_width,
        "gp_mask": info.gp_mask,
        "fixed_counters": info.fixed_counters,
        "fixed_width": info.fixed_width,
        "fixed_mask": info.fixed_mask,
        "ebx_length": info.ebx_length,
        "unavailable_events": list(info.unavailable_events),
        "available_events": list(info.available_events),
        "anythread_deprecated": info.anythread_deprecated,
        "leaf23": leaf23,
        "notes": list(info.notes),
    }


def identity_to_dict(ident: CpuIdentity) -> dict[str, Any]:
    return {
        "vendor": ident.vendor,
        "family": ident.family,
        "model": ident.model,
        "stepping": ident.stepping,
        "brand": ident.brand,
        "hypervisor": ident.hypervisor,
        "hypervisor_vendor": ident.hypervisor_vendor,
        "pdcm": ident.pdcm,
        "hybrid": ident.hybrid,
        "microarchitecture": ident.uarch,
    }
