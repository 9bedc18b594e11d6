"""The per-core metrics as column formulas over a frame equal the per-Sample ones to the last bit, NaN where
those are None."""

from __future__ import annotations

import dataclasses
import math

import pytest

from pmutop.app.screenshots import demo_app
from pmutop.core.frame import FrameLayout, IntervalFrame
from pmutop.core.sample import Sample
from pmutop.derive.frame_metrics import METRICS, combined, per_cpu
from pmutop.derive.metrics import combined as combined_samples
from pmutop.derive.metrics import for_sample


def _check(samples: list[Sample]) -> None:
    layout = FrameLayout.of_samples(samples)
    columns = per_cpu(IntervalFrame.from_samples(layout, samples))
    for s in samples:
        expected = for_sample(s).as_dict()
        row = layout.row_of[s.cpu]
        for name in METRICS:
            got = float(columns[name][row])
            want = expected[name]
            assert (math.isnan(got) and want is None) or got == want, (s.cpu, name, got, want)


@pytest.mark.parametrize("model", ["adl", "skx", "icx", "spr"])
def test_every_metric_of_every_cpu_equals_the_per_sample_one(model: str) -> None:
    _, engine, _, clock = demo_app(cpus=8, e_cores=2 if model == "adl" else 0, intervals=0, model=model)
    try:
        for _ in range(4):
            clock.advance(1.0)
            _check(engine.tick())
    finally:
        engine.stop()


def test_missing_inputs_and_zero_divisors_give_nan_as_the_per_sample_ones_give_none() -> None:
    base = Sample(cpu=0, seq=1, time=1.0, interval=1.0, tsc=2_000_000, tsc_hz=2e9, counts={})
    samples = [
        dataclasses.replace(base, cpu=0, counts={"instructions": 10, "cycles": 0, "ref_cycles": 0}),
        dataclasses.replace(base, cpu=1, counts={"llc_misses": 5}, tsc=None, util=0.5),  # the kernel's util
        dataclasses.replace(base, cpu=2, counts={"ref_cycles": 3_000_000, "cycles": 10}, tsc_hz=None),  # > TSC
        dataclasses.replace(base, cpu=3, counts={"llc_misses": 7, "instructions": 2**40}, interval=0.0),
        dataclasses.replace(base, cpu=4, counts={}, error="offline"),
    ]
    _check(samples)


@pytest.mark.parametrize("model", ["adl", "spr"])
def test_the_all_row_equals_the_per_sample_combination(model: str) -> None:
    _, engine, _, clock = demo_app(cpus=8, e_cores=2 if model == "adl" else 0, intervals=0, model=model)
    try:
        for step in range(4):
            clock.advance(1.0)
            samples = engine.tick()
            if step == 2:  # one suspect and one failed CPU: left out of the all row
                samples[1] = dataclasses.replace(samples[1], suspect="counts beyond what the clock allows")
                samples[2] = dataclasses.replace(samples[2], counts={}, error="cpu 2 offline")
            frame = IntervalFrame.from_samples(FrameLayout.of_samples(samples), samples)
            assert combined(frame) == combined_samples(samples).as_dict()
    finally:
        engine.stop()


def test_an_all_row_without_a_usable_cpu_knows_nothing() -> None:
    failed = Sample(cpu=0, seq=1, time=1.0, interval=1.0, tsc=None, tsc_hz=None, counts={}, error="offline")
    frame = IntervalFrame.from_samples(FrameLayout.of_samples([failed]), [failed])
    assert combined(frame) == dict.fromkeys(METRICS) == combined_samples([failed]).as_dict()
