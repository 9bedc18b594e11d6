"""Issue 24, batch cost: a Sample is made without the plausibility checks and the power monitor's call where
neither can add anything, and it is the Sample the full path makes."""

from __future__ import annotations

from pathlib import Path

import pytest

from pmutop.backends.base import Backend, CpuCounters, Reading
from pmutop.core.clock import ManualClock
from pmutop.core.sysroot import Sysroot
from pmutop.core.undo import UndoLog
from pmutop.engine.engine import Engine
from pmutop.engine.sanity import CHECKED_KEYS, impossible
from pmutop.hw.platform import HostPlatform
from pmutop.probes.power.monitor import PowerMonitor

NS = 1_000_000_000


class _Counters(CpuCounters):
    """Counts that move by a fixed step every read (the perf backend's software events' shape)."""

    counts_only_keys = True

    def __init__(self, cpu: int, clock: ManualClock, counts: dict[str, int], suspect: str | None) -> None:
        self.cpu = cpu
        self._clock = clock
        self._counts = counts
        self._suspect = suspect

    @property
    def keys(self) -> list[str]:
        return list(self._counts)

    def start(self) -> int:
        return self._clock.now_ns()

    def read(self) -> Reading:
        return Reading(
            at_ns=self._clock.now_ns(),
            tsc=1_000_000 + self.cpu,
            counts=dict(self._counts),
            estimated={k: 0.5 for k in self._counts} if self.cpu else {},
            suspect=self._suspect,
            util=0.25,
        )


class _Backend(Backend):
    name = "fake"

    def __init__(self, platform: HostPlatform, clock: ManualClock, counts: dict[str, int], suspect: str | None):
        super().__init__(platform, clock)
        self._made = {cpu: _Counters(cpu, clock, counts, suspect) for cpu in (0, 1)}

    def prepare(self, cpus: list[int], undo: UndoLog) -> None:
        pass

    def counters(self, cpu: int) -> CpuCounters:
        return self._made[cpu]


def _samples(tmp_path: Path, counts: dict[str, int], *, full: bool, suspect: str | None = None) -> list[object]:
    """Three intervals of two CPUs; `full`: through the checks and the power monitor's call, as before."""
    clock = ManualClock(5 * NS)
    platform = HostPlatform(Sysroot(tmp_path))
    power = PowerMonitor([0, 1], sysroot=Sysroot(tmp_path), open_msr=None, msr_why="none")
    engine = Engine(
        _Backend(platform, clock, counts, suspect), platform, clock, [0, 1], 0.5, threaded=False, power=power
    )
    engine.start()
    for sampler in engine.samplers.values():
        assert sampler._package is not None  # nothing to read: the lean path
        if full:
            sampler._checked, sampler._package = True, None
    out: list[object] = []
    for _ in range(3):
        clock.advance(NS // 2)
        out += engine.tick()
    engine.stop()
    return out


@pytest.mark.parametrize(
    "counts",
    [
        {"cpu_clock": 500_000_000, "context_switches": 40},
        {"cycles": 10**9, "instructions": 10**11, "ref_cycles": 10**9},  # impossible: IPC of 100
    ],
)
@pytest.mark.parametrize("suspect", [None, "told by the backend"])
def test_the_lean_sample_is_the_full_paths_sample(tmp_path: Path, counts: dict[str, int], suspect: str | None) -> None:
    lean = _samples(tmp_path, counts, full=False, suspect=suspect)
    full = _samples(tmp_path, counts, full=True, suspect=suspect)
    assert lean == full and len(lean) == 6
    if "cycles" in counts or suspect:
        assert all(s.suspect for s in lean)  # type: ignore[attr-defined]


def test_a_cpu_the_power_monitor_reads_nothing_for_gets_its_package_and_no_source(tmp_path: Path) -> None:
    topology = tmp_path / "sys/devices/system/cpu/cpu1/topology"
    topology.mkdir(parents=True)
    (topology / "physical_package_id").write_text("3\n")
    mon = PowerMonitor([0, 1], sysroot=Sysroot(tmp_path), open_msr=None, msr_why="none")
    for cpu in (0, 1):
        mon.start(cpu)
    assert (mon.package_only(0), mon.package_only(1)) == (0, 3)
    for _ in range(2):
        assert mon.sample(0, 0.5, None) == {"package": 0, "power_src": {}}
        assert mon.sample(1, 0.5, 2.6e9) == {"package": 3, "power_src": {}}


def test_a_cpu_with_a_source_is_sampled(tmp_path: Path) -> None:
    state = tmp_path / "sys/devices/system/cpu/cpu0/cpuidle/state0"
    state.mkdir(parents=True)
    (state / "name").write_text("POLL\n")
    (state / "time").write_text("10\n")
    mon = PowerMonitor([0], sysroot=Sysroot(tmp_path), open_msr=None, msr_why="none")
    mon.start(0)
    assert mon.package_only(0) is None
    assert "cstates" in mon.sample(0, 0.5, None)


@pytest.mark.parametrize(
    "counts",
    [
        {"ref_cycles": 10**12},
        {"ref_cycles": 1, "cycles": 10**9},
        {"cycles": 10**6, "instructions": 10**9},
        {"llc_misses": 10**9, "llc_references": 1},
    ],
)
def test_each_plausibility_check_needs_one_of_the_checked_keys(counts: dict[str, int]) -> None:
    assert impossible(counts, 1000, 1e9) is not None
    assert not CHECKED_KEYS.isdisjoint(counts)
    others = {k: v for k, v in counts.items() if k not in CHECKED_KEYS}
    assert impossible(others, 1000, 1e9) is None
