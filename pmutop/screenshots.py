"""Regenerate screenshots/*.svg: `python -m pmutop.screenshots [DIR]`.

The simulated PMU with a fixed seed and a manual clock, so the pictures (and the snapshot tests built
on `demo_app`) are the same on every run and every machine.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from pmutop.backends.sim import SimBackend
from pmutop.clock import ManualClock
from pmutop.engine.engine import Engine
from pmutop.pmu.events import EventSpec
from pmutop.runinfo import collect
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform
from pmutop.sources.tasks import SimTasks
from pmutop.tui.app import PmutopApp

SIZE = (160, 50)
VIEWS: dict[str, tuple[str, ...]] = {
    "main": (),
    "detail": ("down", "enter"),
    "topdown": ("t",),
    "heatmap": ("3",),
    "help": ("question_mark",),
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
) -> tuple[PmutopApp, Engine, SimPlatform, ManualClock]:
    """A live view over a simulated machine that has already run `intervals` intervals."""
    clock = ManualClock(start_ns=1_000_000_000)
    config = SimConfig(cpus=cpus, e_cores=e_cores, seed=seed, gp_counters=gp_counters, model=model)
    platform = SimPlatform(config, clock)
    backend = SimBackend(platform, clock, events)
    engine = Engine(backend, platform, clock, platform.online_cpus(), interval, threaded=False)
    engine.start()
    for _ in range(intervals):
        clock.advance(interval)
        engine.tick()
    info = collect(platform, backend, engine.cpus, hostname="demo-host")
    return PmutopApp(engine, info, SimTasks(platform, engine.cpus)), engine, platform, clock


# The pictures show a hybrid part whose P-cores measure top-down (PERF_METRICS); its E-cores need Intel's
# tables for their events, which the pictures do without (they say so).
SHOWN_MODEL = "adl"


async def _save(out: Path, name: str, keys: tuple[str, ...]) -> Path:
    app, engine, _, _ = demo_app(model=SHOWN_MODEL)
    try:
        async with app.run_test(size=SIZE) as pilot:
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            return Path(app.save_screenshot(filename=f"{name}.svg", path=str(out)))
    finally:
        engine.stop()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0] if argv else "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    for name, keys in VIEWS.items():
        print(asyncio.run(_save(out, name, keys)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
