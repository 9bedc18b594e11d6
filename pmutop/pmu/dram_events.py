"""pmutop's own table of the memory-controller events that count DRAM traffic, per CPU model.

Each count is one 64-byte cache line (core/dram_reading.BYTES_PER_LINE). The kernel's sysfs `events/` names
are compared with this table but never trusted over it: Linux shipped the wrong Ice Lake-SP umasks until
5.16 and named only one of Granite Rapids' two schedulers until 2026, and sysfs `.scale` (MiB per count)
applied on top of × 64 counts the bytes twice (perf's own DRAM_BW_Use metric in 2020). Field names are the
PMU's sysfs `format/` names; the values are encoded with that `format/` when the counters are opened.

Sources, per entry below:
- Linux arch/x86/events/intel/uncore_snbep.c: hswep_uncore_imc_events (Haswell-EP, Broadwell-EP, and
  skx_uncore_imc), snr_uncore_imc_events (icx_uncore_imc since commit 96fd2e89fba1 "perf/x86/intel/uncore:
  Fix CAS_COUNT_WRITE issue for ICX", Linux 5.16), spr_uncore_imc_events, gnr_uncore_imc_events
  (cas_count_{read,write}_sch{0,1}; before it, gnr_uncores used spr_uncore_imc and its scheduler-0 names).
- Linux arch/x86/events/intel/uncore_snb.c: snb_uncore_imc_events (data_reads event=0x01, data_writes
  event=0x02, the client `uncore_imc` up to Ice Lake) and tgl_uncore_imc_events (data_read event=0xff,umask=0x20,
  data_write event=0xff,umask=0x30; Tiger Lake, and Alder/Raptor Lake's adl_uncore_imc_free_running).
- Linux arch/x86/events/amd/uncore.c: amd_uncore_umc_format_attr (event config:0-7, rdwrmask config:8-9) and
  amd_uncore_umc_read (UMC counters saturate instead of wrapping); tools/perf/pmu-events/arch/x86/amdzen4 and
  amdzen5 memory-controller.json (umc_cas_cmd.rd: EventCode 0x0a RdWrMask 0x1; .wr: RdWrMask 0x2).
- Intel perfmon <model>/events/*_uncore*.json (UNC_M_CAS_COUNT.RD/.WR, UNC_M_CAS_COUNT_SCH0/SCH1.RD/.WR);
  Intel PCM src/cpucounters.cpp (MCCntConfig: CAS_COUNT.RD 0x05/0xcf, .WR 0x05/0xf0 from SPR; 0x04/0x0f,
  0x04/0x30 on ICX; 0x04/0x03, 0x04/0x0c before).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# AMD UMC counters are 48 bits wide and stop at their ceiling (Linux amd_uncore_umc_read: "UMC counters saturate
# and set the Overflow bit (bit 48) on overflow"); kernels before that fix hand the stuck value on unchanged.
AMD_UMC_COUNTER_BITS = 48


@dataclass(frozen=True)
class DramEvent:
    """One event: its perfmon name, its `format/` field values and the name the kernel's sysfs gives it."""

    name: str  # Intel perfmon / perf JSON name, e.g. "UNC_M_CAS_COUNT.RD" (the kernel's name for client parts)
    fields: tuple[tuple[str, int], ...]  # (format field, value), e.g. (("event", 0x04), ("umask", 0x03))
    sysfs_name: str | None = None  # events/<name> of the kernel (None: the kernel lists none for it)

    @property
    def terms(self) -> dict[str, int]:
        return dict(self.fields)


@dataclass(frozen=True)
class DramSpec:
    """How one family of parts counts DRAM traffic: which PMU instances, which events per direction (summed
    when there are several, as Granite Rapids' two schedulers), and what its kernels get wrong."""

    key: str  # short name, e.g. "SPR/EMR"
    name: str
    pmu_pattern: str  # regular expression for the PMU's sysfs name
    read: tuple[DramEvent, ...]
    write: tuple[DramEvent, ...]
    saturating_bits: int | None = None  # counters that stop at 2**bits - 1 instead of wrapping (AMD UMC)
    perfmon_dir: str | None = None  # Intel perfmon directory whose uncore JSON names these events
    kernel_note: str = ""  # the known kernel bug this table works around, said once when sysfs disagrees

    def pmu_regex(self) -> re.Pattern[str]:
        return re.compile(self.pmu_pattern)


def _ev(name: str, sysfs_name: str | None, **fields: int) -> DramEvent:
    return DramEvent(name, tuple(fields.items()), sysfs_name)


# hswep_uncore_imc_events: cas_count_read event=0x04,umask=0x03; cas_count_write event=0x04,umask=0x0c.
_HSWEP_READ = (_ev("UNC_M_CAS_COUNT.RD", "cas_count_read", event=0x04, umask=0x03),)
_HSWEP_WRITE = (_ev("UNC_M_CAS_COUNT.WR", "cas_count_write", event=0x04, umask=0x0C),)

HASWELL_EP = DramSpec(
    "HSX/BDX", "Haswell-EP / Broadwell-EP", r"uncore_imc_(\d+)$", _HSWEP_READ, _HSWEP_WRITE, perfmon_dir="HSX"
)
SKYLAKE_SP = DramSpec(
    "SKX/CLX",
    "Skylake-SP / Cascade Lake / Cooper Lake",
    r"uncore_imc_(\d+)$",
    _HSWEP_READ,
    _HSWEP_WRITE,
    perfmon_dir="SKX",
)
ICELAKE_SP = DramSpec(
    "ICX",
    "Ice Lake-SP",
    r"uncore_imc_(\d+)$",
    # Ice Lake-SP uncore manual 2.4.7 (CAS_COUNT: RD b00001111, WR b00110000), snr_uncore_imc_events.
    read=(_ev("UNC_M_CAS_COUNT.RD", "cas_count_read", event=0x04, umask=0x0F),),
    write=(_ev("UNC_M_CAS_COUNT.WR", "cas_count_write", event=0x04, umask=0x30),),
    perfmon_dir="ICX",
    kernel_note=(
        "Linux before 5.16 gave Ice Lake-SP the Haswell-EP umasks (0x03/0x0c; write bandwidth reads ~0.4 MB/s), "
        "fixed by commit 96fd2e89fba1"
    ),
)
SAPPHIRE_RAPIDS = DramSpec(
    "SPR/EMR",
    "Sapphire Rapids / Emerald Rapids",
    r"uncore_imc_(\d+)$",
    read=(_ev("UNC_M_CAS_COUNT.RD", "cas_count_read", event=0x05, umask=0xCF),),
    write=(_ev("UNC_M_CAS_COUNT.WR", "cas_count_write", event=0x05, umask=0xF0),),
    perfmon_dir="SPR",
)
GRANITE_RAPIDS = DramSpec(
    "GNR/SRF",
    "Granite Rapids / Sierra Forest",
    r"uncore_imc_(\d+)$",
    # Two schedulers per channel, each with its own CAS counter: the channel's traffic is their sum.
    read=(
        _ev("UNC_M_CAS_COUNT_SCH0.RD", "cas_count_read_sch0", event=0x05, umask=0xCF),
        _ev("UNC_M_CAS_COUNT_SCH1.RD", "cas_count_read_sch1", event=0x06, umask=0xCF),
    ),
    write=(
        _ev("UNC_M_CAS_COUNT_SCH0.WR", "cas_count_write_sch0", event=0x05, umask=0xF0),
        _ev("UNC_M_CAS_COUNT_SCH1.WR", "cas_count_write_sch1", event=0x06, umask=0xF0),
    ),
    perfmon_dir="GNR",
    kernel_note=(
        "Linux before 2026 named only scheduler 0 on Granite Rapids (perf's cas_count_* show half the traffic); "
        "pmutop sums schedulers 0 and 1 (events 0x05 and 0x06)"
    ),
)
CLIENT_IMC = DramSpec(
    "client-imc",
    "Intel client memory controller (Sandy Bridge .. Ice Lake)",
    r"uncore_imc$",
    read=(_ev("data_reads", "data_reads", event=0x01),),
    write=(_ev("data_writes", "data_writes", event=0x02),),
)
CLIENT_FREE_RUNNING = DramSpec(
    "client-free-running",
    "Intel client free-running memory counters (Tiger Lake, Alder Lake, Raptor Lake)",
    r"uncore_imc_free_running(?:_(\d+))?$",
    read=(_ev("data_read", "data_read", event=0xFF, umask=0x20),),
    write=(_ev("data_write", "data_write", event=0xFF, umask=0x30),),
)
AMD_UMC = DramSpec(
    "zen-umc",
    "AMD Zen 4 / Zen 5 unified memory controller",
    r"amd_umc_(\d+)$",
    read=(_ev("umc_cas_cmd.rd", None, event=0x0A, rdwrmask=0x1),),
    write=(_ev("umc_cas_cmd.wr", None, event=0x0A, rdwrmask=0x2),),
    saturating_bits=AMD_UMC_COUNTER_BITS,
)

# Intel family 6 models (Linux intel-family.h, perfmon mapfile.csv).
_INTEL_FAM6: dict[int, DramSpec] = {
    0x3F: HASWELL_EP,
    0x4F: HASWELL_EP,
    0x56: HASWELL_EP,
    0x55: SKYLAKE_SP,  # every stepping: Skylake-SP, Cascade Lake, Cooper Lake (skx_uncore_imc)
    0x6A: ICELAKE_SP,
    0x6C: ICELAKE_SP,
    0x8F: SAPPHIRE_RAPIDS,
    0xCF: SAPPHIRE_RAPIDS,  # Emerald Rapids: spr_uncore_init
    0xAD: GRANITE_RAPIDS,
    0xAE: GRANITE_RAPIDS,
    0xAF: GRANITE_RAPIDS,  # Sierra Forest: gnr_uncore_init
    # Client parts with the PCI IMC of snb_uncore_imc (uncore_snb.c *_uncore_pci_ids).
    0x2A: CLIENT_IMC,
    0x3A: CLIENT_IMC,
    0x3C: CLIENT_IMC,
    0x45: CLIENT_IMC,
    0x46: CLIENT_IMC,
    0x3D: CLIENT_IMC,
    0x47: CLIENT_IMC,
    0x4E: CLIENT_IMC,
    0x5E: CLIENT_IMC,
    0x8E: CLIENT_IMC,
    0x9E: CLIENT_IMC,
    0xA5: CLIENT_IMC,
    0xA6: CLIENT_IMC,
    0x7D: CLIENT_IMC,
    0x7E: CLIENT_IMC,
    # Client parts with the MMIO free-running counters (tgl_uncore_mmio_init, adl_uncore_mmio_init).
    0x8C: CLIENT_FREE_RUNNING,
    0x8D: CLIENT_FREE_RUNNING,
    0x97: CLIENT_FREE_RUNNING,
    0x9A: CLIENT_FREE_RUNNING,
    0xB7: CLIENT_FREE_RUNNING,
    0xBA: CLIENT_FREE_RUNNING,
    0xBF: CLIENT_FREE_RUNNING,
}

# AMD (family, first model, last model): the Zen 4 and Zen 5 ranges of pmu/uarch.py; the UMC PMU needs
# PerfMonV2 (Linux amd_uncore_umc_ctx_init), which Zen 3 and older do not have.
_AMD_UMC_MODELS = ((0x19, 0x10, 0x1F), (0x19, 0x60, 0xAF), (0x1A, 0x00, 0x4F), (0x1A, 0x60, 0x7F))

ALL_SPECS = (
    HASWELL_EP,
    SKYLAKE_SP,
    ICELAKE_SP,
    SAPPHIRE_RAPIDS,
    GRANITE_RAPIDS,
    CLIENT_IMC,
    CLIENT_FREE_RUNNING,
    AMD_UMC,
)


def dram_spec(vendor: str, family: int, model: int) -> DramSpec | None:
    """The table entry for a CPU signature (display family/model), or None when pmutop has none."""
    if vendor == "GenuineIntel" and family == 6:
        return _INTEL_FAM6.get(model)
    if vendor == "AuthenticAMD":
        for fam, first, last in _AMD_UMC_MODELS:
            if fam == family and first <= model <= last:
                return AMD_UMC
    return None


def models_of(spec: DramSpec) -> list[int]:
    """The Intel family-6 models a spec covers (tests cross-check them against perfmon's mapfile)."""
    return sorted(m for m, s in _INTEL_FAM6.items() if s is spec)
