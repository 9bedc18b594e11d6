"""Build a sysroot directory of plain files, as `--sysroot` reads it (snapshot layout of hw/msr.py, hw/cpuid.py)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from pmutop.core.cpulist import format_cpu_list

Regs = tuple[int, int, int, int]

# Transcribed from the Core i9-7900X (Skylake-X) dump in ../shared/cpuid: enough leaves for the decoders.
SKYLAKE_X_LEAVES: dict[tuple[int, int], Regs] = {
    (0x0, 0): (0x00000016, 0x756E6547, 0x6C65746E, 0x49656E69),
    (0x1, 0): (0x00050654, 0x00200800, 0x7FFEFBBF, 0xBFEBFBFF),
    (0x7, 0): (0x00000000, 0xD39FFFFB, 0x00000000, 0x00000000),
    (0xA, 0): (0x07300404, 0x00000000, 0x00000000, 0x00000603),
    (0x80000000, 0): (0x80000008, 0, 0, 0),
}


def write_cpuid(path: Path, leaves: dict[tuple[int, int], Regs]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for (leaf, sub), regs in leaves.items():
            f.seek((leaf | sub << 32) * 16)
            f.write(struct.pack("<4I", *regs))


def write_msrs(path: Path, values: dict[int, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "r+b" if path.exists() else "wb"
    with open(path, mode) as f:
        for address, value in values.items():
            f.seek(address * 8)
            f.write(struct.pack("<Q", value))


def read_msr(root: Path, cpu: int, address: int) -> int:
    with open(root / f"dev/cpu/{cpu}/msr", "rb") as f:
        data = os.pread(f.fileno(), 8, address * 8)
    return struct.unpack("<Q", data)[0]


# Registers a Skylake-X PMU holds when nobody uses it (what the msr backend reads or writes).
def idle_pmu_registers(gp: int = 4, fixed: int = 3) -> dict[int, int]:
    regs = {0x10: 123_456_789, 0x345: 0x33C5, 0x38D: 0, 0x38E: 0, 0x38F: 0x7_0000_000F, 0x390: 0, 0x392: 0}
    for i in range(gp):
        regs[0x186 + i] = 0
        regs[0xC1 + i] = 1000 + i
        regs[0x4C1 + i] = 1000 + i
    for i in range(fixed):
        regs[0x309 + i] = 5000 + i
    return regs


def build_sysroot(
    root: Path,
    cpus: list[int],
    leaves: dict[int, dict[tuple[int, int], Regs]] | dict[tuple[int, int], Regs],
    *,
    msrs: dict[int, int] | None = None,
    settings: dict[str, str] | None = None,
) -> Path:
    """`leaves` is either one CPU's leaves (used for every CPU) or per-CPU leaves."""
    for cpu in cpus:
        per_cpu = leaves.get(cpu) if isinstance(next(iter(leaves)), int) else leaves  # type: ignore[arg-type]
        write_cpuid(root / f"dev/cpu/{cpu}/cpuid", per_cpu)  # type: ignore[arg-type]
        if msrs is not None:
            write_msrs(root / f"dev/cpu/{cpu}/msr", msrs)
    files = {
        "sys/devices/system/cpu/online": format_cpu_list(cpus),
        "proc/sys/kernel/nmi_watchdog": "0",
        "proc/sys/kernel/perf_event_paranoid": "2",
        **(settings or {}),
    }
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text + "\n")
    return root
