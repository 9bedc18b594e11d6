"""Test helper: parse AIDA64 / InstLatx64 CPUID dump text into per-CPU register tables.

Format (one logical CPU per section):

    ------[ CPUID Registers / Logical CPU #0 ]------
    CPUID 0000000A: 07300404-00000000-00000000-00000603
    CPUID 00000007: 00000020-00000000-00000000-00000000 [SL 01]
    CPUID 80000002: 65746E49-2952286C-726F4320-4D542865 [Intel(R) Core(TM]

Everything else (version headers, "allcpu:" lines, cache summaries, MSR sections) is ignored.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from helpers.flags import SHARED

Regs = tuple[int, int, int, int]
CpuDump = dict[tuple[int, int], Regs]

_HEX8 = r"([0-9A-Fa-f]{8})"
_CPUID_LINE = re.compile(rf"^\s*CPUID {_HEX8}:\s*{_HEX8}-{_HEX8}-{_HEX8}-{_HEX8}(?:\s*\[SL ([0-9A-Fa-f]{{1,8}})\])?")
_LOGICAL_CPU = re.compile(r"Logical CPU #(\d+)")
_SECTION = re.compile(r"^-+\[.*\]-+\s*$")


def parse_dump(text: str) -> dict[int, CpuDump]:
    """Logical CPU number → {(leaf, subleaf): (eax, ebx, ecx, edx)}. Lines without [SL nn] are sub-leaf 0."""
    cpus: dict[int, CpuDump] = {}
    # CPUID lines before any section header belong to CPU 0 (single-CPU dumps have no header).
    current: int | None = 0
    for line in text.splitlines():
        cpu = _LOGICAL_CPU.search(line)
        if cpu is not None:
            # AIDA64 also has "MSR Registers / Logical CPU #N" sections; they hold no CPUID lines.
            current = None if "MSR" in line else int(cpu.group(1))
            continue
        if _SECTION.match(line):
            current = None
            continue
        m = _CPUID_LINE.match(line)
        if m is None or current is None:
            continue
        leaf = int(m.group(1), 16)
        subleaf = int(m.group(6), 16) if m.group(6) else 0
        regs = (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16), int(m.group(5), 16))
        cpus.setdefault(current, {}).setdefault((leaf, subleaf), regs)
    return cpus


def cpuid_fn(dump: CpuDump) -> Callable[[int, int], Regs]:
    """A CpuidFn over one CPU's table; leaves/sub-leaves absent from the dump read as zeros."""

    def cpuid(leaf: int, subleaf: int) -> Regs:
        return dump.get((leaf, subleaf), (0, 0, 0, 0))

    return cpuid


def shared_dir() -> Path | None:
    """/work/shared (the folder beside the repository), or None when it is absent."""
    path = SHARED
    return path if path.is_dir() else None


def load_shared_dump(name_fragment: str) -> dict[int, CpuDump] | None:
    """Parse the one file in shared/cpuid whose name contains `name_fragment`; None if there is none."""
    shared = shared_dir()
    if shared is None or not (shared / "cpuid").is_dir():
        return None
    matches = sorted(p for p in (shared / "cpuid").iterdir() if name_fragment.lower() in p.name.lower())
    if not matches:
        return None
    if len(matches) > 1:
        raise ValueError(f"{name_fragment!r} matches several dumps: {[p.name for p in matches]}")
    return parse_dump(matches[0].read_text(encoding="latin-1"))
