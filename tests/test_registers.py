"""MSR encodings per the SDM (and the mistakes of the seed tutorials, reference section 9)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from pmutop.core.errors import ForbiddenMsrWrite
from pmutop.hw.msr import MsrFile
from pmutop.pmu import registers


def test_evtsel_encoding() -> None:
    # LLC misses, user + kernel, enabled: the classic 0x43412E
    assert registers.encode_evtsel(registers.RawEvent(0x2E, 0x41), user=True, kernel=True) == 0x43412E
    assert registers.encode_evtsel(registers.RawEvent(0xC0), user=True, kernel=False) == 0x4100C0
    value = registers.encode_evtsel(
        registers.RawEvent(0xA3, 0x08, cmask=8, inv=True, edge=True), user=True, kernel=True
    )
    assert value == 0x08_C7_08_A3
    assert not value & (registers.EVTSEL_INT | registers.EVTSEL_ANY | registers.EVTSEL_PC)
    with pytest.raises(ValueError):
        registers.encode_evtsel(registers.RawEvent(0x100), user=True, kernel=True)


def test_fixed_ctrl_encoding() -> None:
    assert registers.encode_fixed_ctrl(range(3), user=True, kernel=True) == 0x333
    assert registers.encode_fixed_ctrl(range(3), user=True, kernel=False) == 0x222  # seed tutorial claim (e): correct
    assert registers.encode_fixed_ctrl([0, 1, 2, 3], user=False, kernel=True) == 0x1111
    assert registers.fixed_ctrl_nibble(0xB0, 1) == 0xB


def test_global_ctrl_mask() -> None:
    # Seed claim (d): 0x70000000F is 4 GP + 3 fixed, and only valid on such a PMU
    assert registers.global_ctrl_mask(range(4), range(3)) == 0x7_0000_000F
    assert registers.global_ctrl_mask(range(8), range(4)) == 0xF_0000_00FF
    assert registers.global_ctrl_mask([], [1]) == 1 << 33


def test_status_reset_mask_follows_the_version() -> None:
    v2 = registers.status_reset_writable_mask(2, 2, range(3))
    assert v2 == 0x3 | 0x7 << 32 | 1 << 62 | 1 << 63
    v4 = registers.status_reset_writable_mask(4, 4, range(3))
    assert v4 & registers.STATUS_CTR_FRZ and v4 & registers.STATUS_LBR_FRZ and v4 & registers.STATUS_OVF_UNCORE
    assert not v4 & (1 << 4)  # no fifth GP counter: writing that bit would fault
    assert v4 == 0xF | 0x7 << 32 | 1 << 55 | 0xF << 58 | 1 << 62 | 1 << 63


def test_legacy_pmc_writes_sign_extend_bit_31() -> None:
    assert registers.sign_extend_legacy_pmc_write(0x7FFF_FFFF, 48) == 0x7FFF_FFFF
    assert registers.sign_extend_legacy_pmc_write(0x8000_0000, 48) == 0xFFFF_8000_0000
    assert registers.sign_extend_legacy_pmc_write(0x1_0000_0005, 48) == 5


def test_the_allowlist_holds_only_pmu_control_and_counters() -> None:
    assert {0x186, 0x18D, 0xC1, 0x4C1, 0x309, 0x30C, 0x38D, 0x38F, 0x390} <= registers.PMU_WRITABLE_MSRS
    for forbidden in (0x10, 0x38E, 0x391, 0x392, 0x345, 0x1A0, 0x199, 0x1D9, 0xE7, 0xE8):
        assert forbidden not in registers.PMU_WRITABLE_MSRS
    # Just past the legacy blocks: not PMU counters (0x18E was the address of the ">8 events" failure).
    for forbidden in (0x18E, 0xC9, 0x4C9, 0x30D):
        assert forbidden not in registers.PMU_WRITABLE_MSRS
    # PMU v6 counters 0-31 and fixed 0-3 (tests/test_v6_registers.py checks the whole map).
    assert {0x1900, 0x1901, 0x1924, 0x1925, 0x197C, 0x197D, 0x1980, 0x198C} <= registers.PMU_WRITABLE_MSRS


def test_perf_metrics_is_allowlisted_and_nothing_else_for_top_down() -> None:
    # Top-down writes exactly FIXED_CTR3 (0x30C, a counter of the legacy map) and MSR_PERF_METRICS (0x329).
    assert registers.MSR_PERF_METRICS == 0x329 and registers.IA32_FIXED_CTR3 == 0x30C == registers.fixed_ctr(3)
    assert sorted(registers.TOPDOWN_WRITABLE_MSRS) == [0x329]
    expected = set(registers.CONTROL_WRITABLE_MSRS) | set(registers.TOPDOWN_WRITABLE_MSRS)
    for m in (registers.LEGACY_REGISTERS, registers.V6_REGISTERS):
        expected |= set(m.writable(n_fixed=registers.MAX_FIXED_COUNTERS))
    assert expected == registers.PMU_WRITABLE_MSRS
    # Its neighbours stay forbidden (0x328/0x32A are not PMU registers pmutop knows; 0x345 is read-only).
    for forbidden in (0x328, 0x32A, registers.IA32_PERF_CAPABILITIES):
        assert forbidden not in registers.PMU_WRITABLE_MSRS
    assert registers.msr_name(0x329) == "MSR_PERF_METRICS"
    assert registers.GLOBAL_CTRL_EN_PERF_METRICS == 1 << 48 == registers.STATUS_PERF_METRICS_OVF


def test_perf_metrics_overflow_bit_is_writable_only_with_perf_metrics() -> None:
    assert not registers.status_reset_writable_mask(5, 8, range(4)) & registers.STATUS_PERF_METRICS_OVF
    assert registers.status_reset_writable_mask(5, 8, range(4), perf_metrics=True) & registers.STATUS_PERF_METRICS_OVF


def test_perf_metrics_fields_by_model() -> None:
    # Linux intel_pmu_init: num_topdown_events = 4 on the Ice Lake generation, 8 from Sapphire Rapids / Alder Lake.
    for model in (0x6A, 0x6C, 0x7D, 0x7E, 0x8C, 0x8D, 0xA7):
        assert registers.perf_metrics_fields(6, model) == 4
    for model in (0x8F, 0xCF, 0xAD, 0x97, 0x9A, 0xB7, 0xAA, 0xBD):
        assert registers.perf_metrics_fields(6, model) == 8
    value = 0x0102030405060708
    assert [registers.perf_metrics_byte(value, i) for i in range(8)] == [8, 7, 6, 5, 4, 3, 2, 1]


def test_msr_file_snapshot_layout_and_allowlist(tmp_path: Path) -> None:
    path = tmp_path / "msr"
    path.write_bytes(b"")
    dev = MsrFile(path, 0, writable=True)
    dev.write(0x38F, 0x7_0000_000F)
    assert dev.read(0x38F) == 0x7_0000_000F
    with open(path, "rb") as f:
        f.seek(0x38F * 8)
        assert struct.unpack("<Q", f.read(8))[0] == 0x7_0000_000F
    size = path.stat().st_size
    with pytest.raises(ForbiddenMsrWrite, match=r"refusing to write MSR 0x1a0 \(0x1a0\) on cpu 0: not a PMU register"):
        dev.write(0x1A0, 1)
    assert path.stat().st_size == size  # nothing reached the file
    dev.close()
