"""A counter overflow is counted once on the native path. The native threads read GLOBAL_STATUS; the drain
clears the bits it saw after it folded the reading (pmutop.backends.msr.counters.read_from). A thread's next
reading can be taken before that clear lands (the drain is late, or slow on many CPUs), and then shows the
same bit again: that is the old overflow, not a new one, and it must be neither counted again nor leave the
counter expecting a wrap that never comes.

A stand-in for the native buffer: readings as a native thread takes them (clock, TSC, counters, status) of a
Skylake-X sysroot's CPU whose instructions counter wraps, fed to read_from in the drain's order."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers

from pmutop.backends.msr.backend import MsrBackend
from pmutop.backends.msr.counters import MsrCpuCounters
from pmutop.core.clock import ManualClock
from pmutop.core.sysroot import Sysroot
from pmutop.core.undo import UndoLog
from pmutop.hw.platform import HostPlatform
from pmutop.pmu import registers

MS = 1_000_000
TOP = 1 << 48  # Skylake-X's fixed counters are 48 bits wide
INSTRUCTIONS_BIT = registers.fixed_bit(0)


@pytest.fixture
def counters(tmp_path: Path):  # type: ignore[no-untyped-def]
    build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    clock = ManualClock(start_ns=1000 * MS)
    platform = HostPlatform(Sysroot(tmp_path))
    backend = MsrBackend(platform, clock)
    undo = UndoLog()
    backend.prepare([0], undo)
    counters = backend.counters(0)
    counters.program()
    yield counters, clock
    undo.run()


def values(counters: MsrCpuCounters, instructions: int) -> list[int]:
    """A reading's counters: fixed 0..n-1 then GP 0..n-1 (only instructions moves here)."""
    n = len(counters.native_core(pin=False).addresses) - 1  # type: ignore[union-attr]
    return [instructions] + [0] * (n - 1)


@pytest.mark.parametrize(
    "wrapped_in",
    ["the flagged reading", "the next reading"],  # the counter read before or after the wrap that set the bit
)
def test_an_overflow_seen_again_before_its_bit_was_cleared_counts_once(counters, wrapped_in: str) -> None:  # type: ignore[no-untyped-def]
    counters, clock = counters
    counters.start_native(1000 * MS, 0, values(counters, TOP - 1000))
    first = 400 if wrapped_in == "the flagged reading" else TOP - 10
    # Reading 1 (at 2000 ms): status shows the overflow. The drain folds it at 2100 ms and clears the bit then.
    clock.set_ns(2100 * MS)
    one = counters.read_from(2000 * MS, 10, values(counters, first), INSTRUCTIONS_BIT, None)
    # Reading 2 was taken at 2050 ms, before that clear: its status still shows the bit.
    clock.set_ns(3100 * MS)
    two = counters.read_from(2050 * MS, 20, values(counters, 600), INSTRUCTIONS_BIT, None)
    # Reading 3, long after: the bit is clear.
    clock.set_ns(4100 * MS)
    three = counters.read_from(3000 * MS, 30, values(counters, 900), 0, None)
    readings = [one, two, three]
    assert sum(r.overflows.get("instructions", 0) for r in readings) == 1
    assert [r.counts["instructions"] for r in readings] == [
        (first - (TOP - 1000)) % TOP,
        (600 - first) % TOP,
        300,
    ]
    assert [r.suspect for r in readings] == [None, None, None]


def test_a_reading_taken_after_the_clear_still_counts_a_new_overflow(counters) -> None:  # type: ignore[no-untyped-def]
    counters, clock = counters
    counters.start_native(1000 * MS, 0, values(counters, TOP - 1000))
    clock.set_ns(2100 * MS)
    one = counters.read_from(2000 * MS, 10, values(counters, 400), INSTRUCTIONS_BIT, None)
    # Hours later (a 48-bit counter cannot wrap sooner): a new wrap, read after the clear.
    clock.set_ns(9000_000 * MS)
    two = counters.read_from(8000_000 * MS, 20, values(counters, 300), INSTRUCTIONS_BIT, None)
    assert [one.overflows, two.overflows] == [{"instructions": 1}, {"instructions": 1}]
    assert two.counts["instructions"] == TOP - 100
