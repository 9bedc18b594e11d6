"""How long one interval costs with 256 simulated cores: `python benchmarks/live_view_256.py [CPUS]`.

Reports the samplers' cost per interval (all CPUs read, as engine.tick does) and the UI thread's cost
of applying one update to the table (ingest, render, update changed cells, re-sort), plus how long the
app takes to answer a key press while updates are flowing. Numbers only; no pass/fail.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

from textual import events

from pmutop.app.screenshots import demo_app
from pmutop.tui.screens.help import HelpScreen


async def measure(cpus: int, intervals: int = 30) -> None:
    app, engine, _, clock = demo_app(cpus=cpus, e_cores=0, intervals=2)
    tick_ms: list[float] = []
    update_ms: list[float] = []
    original = app.apply_update

    def timed(tasks):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        original(tasks)
        update_ms.append((time.perf_counter() - t0) * 1e3)

    app.apply_update = timed  # type: ignore[method-assign]
    async with app.run_test(size=(160, 50)) as pilot:
        await pilot.press("s")  # sort by util: every update re-sorts 256 rows
        for _ in range(intervals):
            before = len(update_ms)
            clock.advance(1.0)
            t0 = time.perf_counter()
            engine.tick()
            tick_ms.append((time.perf_counter() - t0) * 1e3)
            while len(update_ms) == before:
                await pilot.pause(0.001)
        key_ms: list[float] = []
        for _ in range(5):  # open and close help while updates keep arriving
            clock.advance(1.0)
            engine.tick()
            t0 = time.perf_counter()
            app.post_message(events.Key("question_mark", "?"))
            while not isinstance(app.screen, HelpScreen):  # until the key has taken effect
                await asyncio.sleep(0.001)
            key_ms.append((time.perf_counter() - t0) * 1e3)
            await pilot.press("escape")
    engine.stop()

    def line(name: str, xs: list[float]) -> str:
        p95 = sorted(xs)[int(len(xs) * 0.95)]
        return f"{name:<28} mean {statistics.mean(xs):7.1f} ms   p95 {p95:7.1f} ms   max {max(xs):7.1f} ms"

    print(f"{cpus} simulated cores, {intervals} intervals")
    print(line("samplers (all CPUs, 1 read)", tick_ms))
    print(line("UI update per interval", update_ms))
    print(f"{'key press to help screen':<28} median {statistics.median(key_ms):7.1f} ms (first {key_ms[0]:.1f} ms)")


if __name__ == "__main__":
    asyncio.run(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 256))
