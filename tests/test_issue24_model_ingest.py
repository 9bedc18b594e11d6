"""Issue 24, the view model's ingest at hundreds of CPUs: the all row's and each package's sums are worked out
once per ingest where their samples are the same ones (history point and latest values). These tests pin the
numbers the rows show to the formulas themselves, in the cases where the samples differ: a suspect sample, a
failed CPU, two intervals in one ingest (a paused view catching up)."""

from __future__ import annotations

import dataclasses
import random

from pmutop.app.screenshots import demo_app
from pmutop.core.ring import SampleRing
from pmutop.core.sample import Sample
from pmutop.derive import topdown
from pmutop.derive.metrics import combined
from pmutop.tui.columns import render_cell
from pmutop.tui.model import HISTORY, ViewModel, package_sample, summed


def _rings_after(intervals: int, cpus: int = 8) -> tuple[dict[int, SampleRing], list[int]]:
    """Real simulated samples (Sapphire Rapids: top-down, packages, power) of `intervals` intervals."""
    _, engine, _, clock = demo_app(cpus=cpus, e_cores=0, intervals=0, model="spr")
    for _ in range(intervals):
        clock.advance(1.0)
        engine.tick()
    engine.stop()
    return engine.rings, engine.cpus


def _expected(model: ViewModel, live: list[Sample]) -> None:
    assert model.total.metrics == combined(live)
    assert model.total.latest == summed(live)
    assert model.total.tma == topdown.combine(
        (s.topdown, s.counts) for s in live if not s.suspect
    )  # the all row weighs each CPU by its slots
    for number, state in model.packages.items():
        members = [s for s in live if s.package == number]
        assert state.latest == package_sample(number, members)
        assert state.metrics == combined(members)


def test_the_all_and_package_rows_are_the_formulas_of_the_latest_samples() -> None:
    rings, cpus = _rings_after(3)
    model = ViewModel(cpus)
    assert model.ingest(rings)
    live = [rings[cpu].latest() for cpu in cpus]
    _expected(model, live)  # type: ignore[arg-type]
    # Two intervals in one ingest: the history gets one all-row point per interval, each of its own samples.
    assert model.total.history["ipc"][-1] == combined([rings[c].since(2)[0] for c in cpus]).ipc
    assert model.total.history["ipc"][-2] == combined([rings[c].since(1)[0] for c in cpus]).ipc
    assert model.total.history["ipc"][-3] == combined([rings[c].since(0)[0] for c in cpus]).ipc


def test_a_suspect_sample_and_a_failed_cpu_change_the_all_row_as_the_formulas_say() -> None:
    rings, cpus = _rings_after(2)
    model = ViewModel(cpus)
    model.ingest(rings)
    suspect_cpu, failed_cpu = cpus[1], cpus[2]
    for cpu in cpus:  # one more interval: the same counts again, one suspect, one failed
        s = rings[cpu].latest()
        assert s is not None
        s = dataclasses.replace(s, seq=s.seq + 1, time=s.time + 1.0)
        if cpu == suspect_cpu:
            s = dataclasses.replace(s, suspect="counts beyond what the clock allows")
        if cpu == failed_cpu:
            s = dataclasses.replace(s, counts={}, error="cpu 2: the msr file went away")
        rings[cpu].push(s)
    assert model.ingest(rings)
    live = [rings[cpu].latest() for cpu in cpus if cpu != failed_cpu]
    _expected(model, live)  # type: ignore[arg-type]
    ok = [s for s in live if s is not None and not s.suspect]
    assert model.total.history["ipc"][-1] == combined(ok).ipc  # the history point: neither the suspect nor failed
    assert model.total.history["ipc"][-1] != model.total.history["ipc"][-2]  # with them it would be the same


def _push(rings: dict[int, SampleRing], cpu: int, ipc: float | None, **fields: object) -> None:
    """The CPU's next interval with this IPC (None: a point without one, as an idle core's)."""
    ring = rings[cpu]
    seq = ring.count + 1
    counts = {"cycles": 1000, "instructions": round(1000 * ipc)} if ipc is not None else {"cycles": 0}
    ring.push(Sample(cpu=cpu, seq=seq, time=float(seq), interval=1.0, tsc=2000, tsc_hz=2e3, counts=counts, **fields))


def _scanned_top(model: ViewModel) -> float:
    points = [v for core in model.cores.values() for v in core.history["ipc"] if v]
    return max(points, default=0.0)


def test_the_sparkline_scale_is_the_largest_point_kept_of_any_core_whatever_the_gaps() -> None:
    """The scale is carried from ingest to ingest (a scan of every core's history was too slow at hundreds
    of CPUs): it must still be the largest point kept, as the kept points age out, through gaps, suspect
    samples, a failed CPU and several intervals in one ingest."""
    cpus = [0, 1, 2]
    rings = {cpu: SampleRing(HISTORY * 4) for cpu in cpus}
    model = ViewModel(cpus)
    assert model.series_top("ipc") == 0.0  # nothing measured yet: the floor of the scale
    rng = random.Random(24)
    failed: set[int] = set()
    for step in range(HISTORY * 3):
        for _ in range(2 if step % 37 == 0 else 1):  # now and then two intervals arrive at once
            for cpu in set(cpus) - failed:
                if cpu == 2 and step == HISTORY:
                    _push(rings, cpu, None, error="cpu 2: the msr file went away")
                    failed.add(cpu)
                elif step % 11 == 0:
                    _push(rings, cpu, rng.uniform(0, 9), suspect="counts beyond what the clock allows")
                else:  # falling for a while (the top ages out every point), then rising, with gaps
                    trend = 4.0 - (step % 150) / 50
                    _push(rings, cpu, None if rng.random() < 0.1 else max(0.0, trend + rng.uniform(0, 0.5)))
        model.ingest(rings)
        assert model.series_top("ipc") == _scanned_top(model), f"after interval {step}"
    assert model.series_top("ipc", model.total) == max(v for v in model.total.history["ipc"] if v is not None)


def test_a_nan_point_does_not_stop_the_scale() -> None:
    """A NaN (a remote feed's value, say) equals no point: the carried scale must not fail on it, and answers
    what a scan answers."""
    model = ViewModel([0])
    model.cores[0].history["ipc"].extend([float("nan"), 1.5])
    top = model.series_top("ipc")
    assert top != top  # NaN, as max() gives with the NaN first


def test_a_sparkline_is_scaled_to_the_points_it_shows_not_to_a_burst_that_scrolled_away() -> None:
    """The table's sparklines show the last few intervals; a burst a minute ago (the plots below still show it)
    must not flatten every core's line to the lowest block: the scale is the largest point of any core among
    the points drawn (cores still compare by eye)."""
    model = ViewModel([0, 1])
    key = "llc_misses_per_s"
    model.cores[0].history[key].extend([200e6] * 5 + [2e6, 4e6, 6e6, 8e6] * 10)
    model.cores[1].history[key].extend([1e6] * 45)
    line = render_cell("llc_hist", model.cores[0], model, 12).plain
    assert len(set(line)) == 4, line  # four levels: 2, 4, 6 and 8 M/s on an 8 M/s scale
    assert render_cell("llc_hist", model.cores[1], model, 12).plain == "▁" * 12  # 1 M/s against core 0's 8 M/s
    wide = render_cell("llc_hist", model.cores[0], model, 60).plain
    assert "█" in wide[-45:-40]  # drawn, the burst sets the scale again
