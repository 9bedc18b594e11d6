"""The memory's transfer rate from the SMBIOS memory devices, for the theoretical DRAM bandwidth peak.

Peak per package = channels × MT/s × 8 bytes (a 64-bit channel moves 8 bytes a transfer; a DDR5 channel's two
32-bit subchannels together do the same). The rate is each populated device's Configured Memory Speed; the
peak is unknown (None) when it cannot be read, never guessed. `--mem-peak GB/s` (per package) replaces it.

SMBIOS type 17 "Memory Device" (DMTF DSP0134 3.x, section 7.18), offsets from the structure start:
0x01 Length (BYTE); 0x0C Size (WORD; 0 = no device installed, 0xFFFF = unknown);
0x20 Configured Memory Speed (WORD, MT/s, spec 2.7+; 0 = unknown, 0xFFFF = see 0x58);
0x58 Extended Configured Memory Speed (DWORD, MT/s, spec 3.3+).
Linux exposes each structure as /sys/firmware/dmi/entries/17-<n>/raw (root only).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from pmutop.core.sysroot import Sysroot

DMI_ENTRIES = "sys/firmware/dmi/entries"
SMBIOS_MEMORY_DEVICE = 17
_SIZE = 0x0C
_CONFIGURED_SPEED = 0x20
_EXTENDED_CONFIGURED_SPEED = 0x58
BYTES_PER_TRANSFER = 8  # a 64-bit channel


@dataclass(frozen=True)
class MemorySpeed:
    """What the SMBIOS memory devices say: the slowest populated device's configured MT/s and how many are
    populated, or why not."""

    mts: int | None
    populated: int
    why: str  # where the rate came from, or why it is unknown


def configured_mts(raw: bytes) -> tuple[bool, int | None]:
    """(populated, configured MT/s or None) of one type-17 structure."""
    if len(raw) < 2 or raw[0] != SMBIOS_MEMORY_DEVICE:
        return False, None
    length = min(raw[1], len(raw))

    def word(offset: int) -> int | None:
        return struct.unpack_from("<H", raw, offset)[0] if offset + 2 <= length else None

    size = word(_SIZE)
    if size is None or size == 0:
        return False, None
    speed = word(_CONFIGURED_SPEED)
    if speed == 0xFFFF and length >= _EXTENDED_CONFIGURED_SPEED + 4:
        speed = struct.unpack_from("<I", raw, _EXTENDED_CONFIGURED_SPEED)[0]
    if speed in (None, 0, 0xFFFF):
        return True, None
    return True, speed


def read_memory_speed(sysroot: Sysroot) -> MemorySpeed:
    base = sysroot.path(DMI_ENTRIES)
    try:
        entries = sorted(p.name for p in base.iterdir() if p.name.startswith(f"{SMBIOS_MEMORY_DEVICE}-"))
    except OSError:
        return MemorySpeed(None, 0, f"no SMBIOS tables ({base} missing)")
    if not entries:
        return MemorySpeed(None, 0, "SMBIOS lists no memory devices (type 17)")
    speeds: list[int] = []
    populated = 0
    unreadable = 0
    for name in entries:
        try:
            raw = (base / name / "raw").read_bytes()
        except OSError:
            unreadable += 1
            continue
        present, mts = configured_mts(raw)
        populated += present
        if mts is not None:
            speeds.append(mts)
    if unreadable == len(entries):
        return MemorySpeed(None, 0, f"SMBIOS memory devices unreadable ({base}/17-*/raw is root only)")
    if not speeds:
        return MemorySpeed(None, populated, "SMBIOS memory devices give no configured speed")
    return MemorySpeed(min(speeds), populated, f"SMBIOS: {populated} memory devices, configured {min(speeds)} MT/s")


def package_peak(channels: int, packages: int, speed: MemorySpeed, mem_peak_gbs: float | None) -> float | None:
    """One package's theoretical peak in bytes/s: `--mem-peak` when given, else channels × MT/s × 8.

    `channels` are the channels counted on the package; with SMBIOS's populated count the peak counts no more
    channels than there are devices per package (a channel without a DIMM moves nothing)."""
    if mem_peak_gbs is not None:
        return mem_peak_gbs * 1e9
    if speed.mts is None or channels <= 0:
        return None
    if speed.populated and packages > 0:
        channels = min(channels, max(1, speed.populated // packages))
    return channels * speed.mts * 1e6 * BYTES_PER_TRANSFER
