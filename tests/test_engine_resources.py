"""An engine started and stopped many times in one process (the benchmarks, a test run, a future restart of
the live view) leaves no file open: every CPU's msr and cpuid file is closed when it stops, on both the native
and the Python sampler path."""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from pathlib import Path

import pytest
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers

from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.clock import MonotonicClock
from pmutop.core.sysroot import Sysroot
from pmutop.engine.engine import Engine
from pmutop.hw import native_sampler
from pmutop.hw.platform import HostPlatform

CPUS = [0, 1, 2]


def open_files() -> list[str]:
    """What this process has open (the targets of /proc/self/fd), sorted."""
    out = []
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):  # the listing's own descriptor, closed by now
            out.append(os.readlink(f"/proc/self/fd/{name}"))
    return sorted(out)


def run_once(root: Path, *, native: bool, platform: HostPlatform | None = None) -> None:
    platform = platform or HostPlatform(Sysroot(root))
    clock = MonotonicClock()
    engine = Engine(MsrBackend(platform, clock), platform, clock, CPUS, 0.05, native=native)
    try:
        engine.start()
        assert (engine._native is not None) == native
        assert engine.wait_for_samples(dict.fromkeys(CPUS, 1), timeout=10)
    finally:
        result = engine.stop()
    assert not result.failures


@pytest.mark.parametrize(
    "native",
    [
        pytest.param(True, marks=pytest.mark.skipif(not native_sampler.available(), reason="no native samplers")),
        False,
    ],
    ids=["native samplers", "python samplers"],
)
def test_starting_and_stopping_an_engine_leaves_no_file_open(tmp_path: Path, native: bool) -> None:
    build_sysroot(tmp_path, CPUS, SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    run_once(tmp_path, native=native)  # whatever the first run loads for good (modules, caches) is loaded now
    before = open_files()
    for _ in range(4):
        run_once(tmp_path, native=native)
    shared = HostPlatform(Sysroot(tmp_path))  # one platform for several engines, as a long-lived app has
    for _ in range(2):
        run_once(tmp_path, native=native, platform=shared)
    leaked = Counter(open_files()) - Counter(before)
    assert {Path(path).relative_to(tmp_path).as_posix(): n for path, n in leaked.items()} == {}
