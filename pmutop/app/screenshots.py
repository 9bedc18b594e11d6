"""Regenerate screenshots/*.svg: `python -m pmutop.app.screenshots [DIR]`.

The simulated PMU with a fixed seed and a manual clock, so the pictures (and the snapshot tests built
on `demo_app`) are the same on every run and every machine.
"""

from __future__ import annotations

import asyncio
import random
import sys
from pathlib import Path

from pmutop.app.scripted_tasks import ScriptedTasks
from pmutop.backends.run_facts import collect
from pmutop.backends.sim import SimBackend
from pmutop.core.clock import ManualClock
from pmutop.core.errors import HardwareError
from pmutop.core.ring import SampleRing
from pmutop.core.run_description import RunInfo
from pmutop.core.sample import Sample
from pmutop.core.task_reading import ESTIMATED, EXACT, TaskCounterSource
from pmutop.engine.engine import Engine
from pmutop.engine.package_sampler import PackageSampler
from pmutop.engine.task_sampler import TaskSampler
from pmutop.pmu.events import EventSpec
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.probes.tasks import SimTasks
from pmutop.sim.dram import SimDramCounters
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform
from pmutop.tui.app import PmutopApp
from pmutop.tui.model import HISTORY

SIZE = (160, 50)
VIEWS: dict[str, tuple[str, ...]] = {
    "main": (),
    "detail": ("down", "enter"),
    "topdown": ("t",),
    "heatmap": ("3",),
    "help": ("question_mark",),
    "memory": ("6",),
}


def demo_app(
    *,
    seed: int = 1,
    cpus: int = 12,
    e_cores: int = 4,
    intervals: int = 60,
    interval: float = 1.0,
    events: list[EventSpec] | None = None,
    gp_counters: int = 4,
    model: str = "skx",
    task_source: TaskCounterSource | None = None,
    dram: bool = False,
) -> tuple[PmutopApp, Engine, SimPlatform, ManualClock]:
    """A live view over a simulated machine that has already run `intervals` intervals; with `task_source`,
    its per-process counters too, read by a task sampler after each interval's CPU samples; with `dram` (the
    pictures, as --demo), its simulated memory channels, read by a package sampler after them."""
    clock = ManualClock(start_ns=1_000_000_000)
    config = SimConfig(cpus=cpus, e_cores=e_cores, seed=seed, gp_counters=gp_counters, model=model)
    platform = SimPlatform(config, clock)
    backend = SimBackend(platform, clock, events)
    cpus_ = platform.online_cpus()
    power = PowerMonitor.for_platform(platform, cpus_)
    engine = Engine(backend, platform, clock, cpus_, interval, threaded=False, power=power)
    engine.start()
    tasks = SimTasks(platform, engine.cpus)
    sampler = TaskSampler(task_source, engine) if task_source is not None else None
    packages = PackageSampler(SimDramCounters(platform.machine), engine) if dram else None
    if packages is not None:
        packages.begin()
    for n in range(intervals):
        if n == intervals - 1:
            tasks.top_per_cpu()  # as the live view looked the tasks up an interval ago: CPU time counts from there
        clock.advance(interval)
        samples = engine.tick()
        if sampler is not None:
            sampler.sample_once(samples)
        if packages is not None:
            packages.sample_once(samples)
    info = collect(platform, backend, engine.cpus, hostname="demo-host")
    return PmutopApp(engine, info, tasks, task_feed=sampler, package_feed=packages), engine, platform, clock


# The pictures show a hybrid part whose P-cores measure top-down (PERF_METRICS); its E-cores need Intel's
# tables for their events, which the pictures do without (they say so).
SHOWN_MODEL = "adl"


class ScriptedFeed:
    """A SampleFeed of given samples (no hardware, no simulator): the software-only picture, where the
    kernel's events and per-CPU times are all there is. Labelled SIMULATED like every made-up number."""

    def __init__(self, cpus: list[int], samples: list[list[Sample]], interval: float = 1.0) -> None:
        self.cpus = cpus
        self.rings = {cpu: SampleRing(600) for cpu in cpus}
        for interval_samples in samples:
            for s in interval_samples:
                self.rings[s.cpu].push(s)
        self._interval = interval
        self._keys = list(samples[0][0].counts) if samples else []

    @property
    def interval(self) -> float:
        return self._interval

    def keys(self, cpu: int) -> list[str]:
        return self._keys

    def topdown_method(self, cpu: int) -> str | None:
        return None

    def elapsed(self) -> float:
        latest = [r.latest() for r in self.rings.values()]
        return max((s.time for s in latest if s is not None), default=0.0)

    def failures(self) -> dict[int, str]:
        return {}

    def wait_for_samples(self, counts, timeout, on_wait=None, stop=None) -> bool:  # type: ignore[no-untyped-def]
        if stop is not None:
            stop.wait(timeout)
        return False

    def set_interval(self, seconds: float) -> None:
        self._interval = seconds

    def wake_waiters(self) -> None:
        pass  # its waits end on `stop` by themselves


def software_app(cpus: int = 8, intervals: int = 60, seed: int = 3) -> tuple[PmutopApp, ScriptedFeed]:
    """The live view of a run that counts only the kernel's software events (a VM without a PMU)."""
    rng = random.Random(seed)
    samples = []
    for k in range(1, intervals + 1):
        row = []
        for cpu in range(cpus):
            busy = 0.9 if cpu % 3 == 0 else 0.05 + 0.4 * ((k + cpu) % 7 == 0)
            busy = min(1.0, max(0.0, busy + rng.uniform(-0.04, 0.04)))
            counts = {
                "context_switches": int(200 + 3000 * busy * rng.uniform(0.8, 1.2)),
                "cpu_migrations": int(5 + 40 * busy * rng.uniform(0.5, 1.5)),
                "page_faults": int(50 + 9000 * busy * rng.uniform(0.5, 1.5)),
            }
            row.append(
                Sample(cpu=cpu, seq=k, time=float(k), interval=1.0, tsc=None, tsc_hz=None, counts=counts, util=busy)
            )
        samples.append(row)
    feed = ScriptedFeed(list(range(cpus)), samples)
    info = RunInfo(
        hostname="demo-vm",
        cpu_model="AMD EPYC (virtual)",
        uarch=None,
        pmu="no PMU",
        backend="perf",
        read_method="read",
        simulated=True,
        hypervisor=True,
        cpus=list(range(cpus)),
        hardware_problem="perf_event_open: hardware events not supported (ENOENT)",
    )
    return PmutopApp(feed, info), feed


def failed_core_app() -> tuple[PmutopApp, Engine]:
    """The demo with cpu 3 gone (offline) after 40 intervals."""
    app, engine, _, clock = demo_app(dram=True, model=SHOWN_MODEL, intervals=40)

    def offline():  # type: ignore[no-untyped-def]
        raise HardwareError("cpu 3: read of IA32_PERF_GLOBAL_STATUS (0x38e) failed: No such device (offline?)")

    engine.samplers[3].counters.read = offline  # type: ignore[method-assign]
    for _ in range(20):
        clock.advance(1.0)
        engine.tick()
    return app, engine


# The process and cgroup views over made-up processes (pmutop.app.scripted_tasks): (mode, keys).
TASK_VIEWS: dict[str, tuple[str, tuple[str, ...]]] = {
    "processes": (EXACT, ("4",)),
    "processes-estimated": (ESTIMATED, ("4",)),
    "cgroups": (EXACT, ("5",)),
    "process-detail": (EXACT, ("4", "enter")),
}


def scene(name: str) -> tuple[PmutopApp, Engine | None, tuple[str, ...]]:
    """The app and the keys of one picture (VIEWS and SCENES)."""
    if name in TASK_VIEWS:
        mode, keys = TASK_VIEWS[name]
        app, engine, _, _ = demo_app(dram=True, model=SHOWN_MODEL, task_source=ScriptedTasks(mode))
        return app, engine, keys
    if name in VIEWS:
        # The heatmap's picture runs as long as the model keeps, so no column of the map waits for a sample.
        app, engine, _, _ = demo_app(dram=True, model=SHOWN_MODEL, intervals=HISTORY if name == "heatmap" else 60)
        return app, engine, VIEWS[name]
    if name == "software-only":
        return software_app()[0], None, ()
    if name == "failed-core":
        app, engine = failed_core_app()
        return app, engine, ()
    if name == "256-cores":
        app, engine, _, _ = demo_app(dram=True, model=SHOWN_MODEL, cpus=256, e_cores=0, intervals=30)
        return app, engine, ()
    if name == "paused":
        app, engine, _, _ = demo_app(dram=True, model=SHOWN_MODEL)
        return app, engine, ("space",)
    raise KeyError(name)


SCENES = (*VIEWS, "paused", "failed-core", "software-only", "256-cores", *TASK_VIEWS)


async def _save(out: Path, name: str) -> Path:
    app, engine, keys = scene(name)
    try:
        async with app.run_test(size=SIZE) as pilot:
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            return Path(app.save_screenshot(filename=f"{name}.svg", path=str(out)))
    finally:
        if engine is not None:
            engine.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    for name in SCENES:
        print(asyncio.run(_save(out, name)))
    from pmutop.app.fleet_screenshots import FLEET_VIEWS, save_fleet  # the fleet's, over a canned Prometheus

    for name in FLEET_VIEWS:
        print(asyncio.run(save_fleet(out, name, SIZE)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
