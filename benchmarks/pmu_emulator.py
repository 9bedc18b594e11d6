"""A cheap stand-in PMU in a process of its own: `python benchmarks/pmu_emulator.py SYSROOT CPUS [HZ]`.

It keeps the counter registers of an msr sysroot (tests/helpers/sysroot_builder.py: one file per CPU,
dev/cpu/N/msr, register A at offset 8*A) counting, so that `pmutop --sysroot SYSROOT` runs its real msr
read path (pread of each register, the GLOBAL_STATUS check, delta math) on N CPUs while the cost of making
the numbers up is outside pmutop's process tree. The time-stamp counter, the three fixed counters and the
general-purpose counters advance by a per-CPU load HZ times a second (read-modify-write through a shared
mapping, so pmutop's own writes, zeroing a counter when it programs it, are kept); the control registers are
never touched, so pmutop's check for another agent reprogramming the PMU stays quiet. Runs until killed.
"""

from __future__ import annotations

import contextlib
import mmap
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

TSC = 0x10
FIXED = (0x309, 0x30A, 0x30B)  # instructions retired, core cycles, reference cycles (SDM vol. 3, 20.2.2)
GP = (0xC1, 0xC2, 0xC3, 0xC4)  # IA32_PMC0..3
GP_FULL_WIDTH = (0x4C1, 0x4C2, 0x4C3, 0x4C4)  # the same counters' full-width aliases (SDM 20.2.6)
WIDTH_MASK = (1 << 48) - 1  # counters are 48 bits wide on the sysroot's Skylake-X (CPUID 0xA: EAX[23:16])
TSC_HZ = 2_400_000_000


def _views(root: Path, cpus: int) -> list[memoryview]:
    views = []
    for cpu in range(cpus):
        with open(root / f"dev/cpu/{cpu}/msr", "r+b") as f:
            views.append(memoryview(mmap.mmap(f.fileno(), 0)).cast("Q"))
    return views


def run(root: Path, cpus: int, hz: float) -> None:
    views = _views(root, cpus)
    # A fixed spread of loads and IPCs, so the table has varied rows without any model to evaluate.
    loads = [0.05 + 0.9 * ((cpu * 37) % 100) / 100 for cpu in range(cpus)]
    ipcs = [0.4 + 2.0 * ((cpu * 53) % 100) / 100 for cpu in range(cpus)]
    last = time.monotonic()
    while True:
        time.sleep(1 / hz)
        now = time.monotonic()
        ticks = round((now - last) * TSC_HZ)
        last = now
        for regs, load, ipc in zip(views, loads, ipcs, strict=True):
            cycles = int(ticks * load)
            regs[TSC] = (regs[TSC] + ticks) & WIDTH_MASK
            regs[FIXED[0]] = (regs[FIXED[0]] + int(cycles * ipc)) & WIDTH_MASK
            regs[FIXED[1]] = (regs[FIXED[1]] + cycles) & WIDTH_MASK
            regs[FIXED[2]] = (regs[FIXED[2]] + cycles) & WIDTH_MASK
            for k, (narrow, wide) in enumerate(zip(GP, GP_FULL_WIDTH, strict=True)):
                value = (regs[narrow] + (cycles >> (k + 3))) & WIDTH_MASK
                regs[narrow] = regs[wide] = value


def build(root: Path, cpus: int) -> Path:
    """An msr sysroot of `cpus` Skylake-X CPUs with an idle PMU (the tests' builder)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from helpers import sysroot_builder  # type: ignore[import-not-found]

    return sysroot_builder.build_sysroot(
        root, list(range(cpus)), sysroot_builder.SKYLAKE_X_LEAVES, msrs=sysroot_builder.idle_pmu_registers()
    )


@contextlib.contextmanager
def running(root: Path, cpus: int, hz: float = 10.0) -> Iterator[subprocess.Popen[bytes]]:
    """The emulator as a child of the caller (not of pmutop), stopped on the way out."""
    from benchmarks import procs

    p = procs.spawn([sys.executable, __file__, str(root), str(cpus), str(hz)])
    try:
        yield p
    finally:
        procs.stop(p, signal.SIGTERM)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    run(Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 10.0)
