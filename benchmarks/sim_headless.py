"""What the demo's simulated machine costs without the screen: `python benchmarks/sim_headless.py [CPUS]
[--intervals N] [--interval S] [--profile]`.

The demo's data path (`--demo`: the spr model, every CPU sampled, power and thermal registers, the package
sampler's simulated DRAM, each core's top task) on a manual clock, one thread, in-process: ms of this
thread's CPU time per interval (and per core-sample), so the simulator's share of the live view's cost can
be measured and profiled on its own. Numbers only; no pass/fail.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time

from pmutop.backends.sim import SimBackend
from pmutop.core.clock import ManualClock
from pmutop.engine.engine import Engine
from pmutop.engine.one_thread import OneThreadDrive
from pmutop.engine.package_sampler import PackageSampler
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.probes.tasks import SimTasks
from pmutop.sim.dram import SimDramCounters
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform


def run(cpus: int, intervals: int, interval: float, profile: bool) -> None:
    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(cpus=cpus, seed=1, model="spr"), clock)
    backend = SimBackend(platform, clock)
    power = PowerMonitor.for_platform(platform, platform.online_cpus())
    engine = Engine(backend, platform, clock, platform.online_cpus(), interval, threaded=False, power=power)
    engine.start()
    # The demo's drive: one thread takes every CPU's sample, each CPU's reads at one instant of its time.
    drive = OneThreadDrive(engine)
    tasks = SimTasks(platform, engine.cpus)
    packages = PackageSampler(SimDramCounters(platform.machine), engine)
    packages.begin()

    def one() -> None:
        clock.advance(interval)
        drive._take_all()
        packages.sample_once([engine.rings[cpu].latest() for cpu in engine.cpus])
        tasks.top_per_cpu()

    for _ in range(3):  # past start-up
        one()
    profiler = cProfile.Profile() if profile else None
    t0 = time.thread_time_ns()
    if profiler is not None:
        profiler.enable()
    for _ in range(intervals):
        one()
    if profiler is not None:
        profiler.disable()
    spent_ms = (time.thread_time_ns() - t0) / 1e6
    engine.stop()
    per = spent_ms / intervals
    print(
        f"{cpus} CPUs, {intervals} intervals of {interval:g} s: {per:.1f} ms per interval, "
        f"{per * 1000 / cpus:.1f} us per core-sample, {per / interval * 60 / 1000:.2f} CPU s/min"
    )
    if profiler is not None:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(45)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cpus", type=int, nargs="?", default=256)
    p.add_argument("--intervals", type=int, default=20)
    p.add_argument("--interval", type=float, default=1.0)
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    run(args.cpus, args.intervals, args.interval, args.profile)


if __name__ == "__main__":
    main()
