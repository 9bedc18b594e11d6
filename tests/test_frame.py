"""An interval of every CPU as arrays (pmutop.core.frame): the frame holds exactly what the Samples hold, and
the ring of frames keeps the last intervals as arrays that readers copy without locks."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from pmutop.app.screenshots import demo_app
from pmutop.core.frame import ARRAYS, NO_TSC, FrameLayout, FrameRing, IntervalFrame
from pmutop.core.sample import Sample


def _demo_intervals(intervals: int = 3, model: str = "adl") -> list[list[Sample]]:
    """Real simulated samples of a hybrid part (P- and E-cores count different events; top-down, power, C-states,
    package energy on one CPU), one list per interval."""
    _, engine, _, clock = demo_app(cpus=6, e_cores=2, intervals=0, model=model)
    out = []
    try:
        for _ in range(intervals):
            clock.advance(1.0)
            out.append(engine.tick())
    finally:
        engine.stop()
    return out


@pytest.mark.parametrize("model", ["adl", "skx", "spr"])
def test_a_frame_gives_back_every_sample_exactly(model: str) -> None:
    intervals = _demo_intervals(model=model)
    layout = FrameLayout.of_samples(s for interval in intervals for s in interval)
    for samples in intervals:
        frame = IntervalFrame.from_samples(layout, samples)
        assert frame.samples() == samples
        for s in samples:  # each CPU's events in its own order, as a recording writes them
            back = frame.sample(layout.row_of[s.cpu])
            assert back is not None and list(back.counts) == list(s.counts)


def test_absent_values_stay_absent_and_large_counts_stay_exact() -> None:
    base = Sample(cpu=3, seq=7, time=7.0, interval=1.0, tsc=None, tsc_hz=None, counts={"b": 2**62 + 1, "a": 0})
    failed = Sample(cpu=5, seq=7, time=7.0, interval=1.0, tsc=None, tsc_hz=None, counts={}, error="cpu 5 offline")
    suspect = dataclasses.replace(
        base, cpu=4, suspect="ref-cycles above the TSC", util=0.25, estimated={"a": 0.5}, overflows={"b": 1}
    )
    layout = FrameLayout.of_samples([base, failed, suspect])
    frame = IntervalFrame.from_samples(layout, [base, failed, suspect])
    assert frame.samples() == [base, failed, suspect]  # in row order: the CPUs as first met
    row = layout.row_of[3]
    assert frame.tsc[row] == NO_TSC and math.isnan(frame.util[row]) and math.isnan(frame.busy[row])
    assert frame.column("b")[row] == 2**62 + 1  # beyond a float's 2**53: kept as an integer
    assert list(frame.counted[row]) == [True, True] and not frame.counted[layout.row_of[5]].any()
    assert layout.events == ("b", "a")  # the order first met


def test_a_cpu_without_a_sample_this_interval_has_none() -> None:
    intervals = _demo_intervals(1)
    layout = FrameLayout.of_samples(intervals[0])
    frame = IntervalFrame.from_samples(layout, intervals[0][1:])
    assert frame.seq[0] == 0 and frame.sample(0) is None
    assert frame.samples() == intervals[0][1:]


def test_the_ring_keeps_the_last_frames_and_a_history_is_a_slice() -> None:
    intervals = _demo_intervals(7)
    layout = FrameLayout.of_samples(s for interval in intervals for s in interval)
    ring = FrameRing(layout, capacity=4)
    assert ring.latest() is None and ring.since(0) == []
    for samples in intervals:
        ring.push(IntervalFrame.from_samples(layout, samples))
    assert ring.count == 7 and len(ring) == 4
    assert [f.samples() for f in ring.since(5)] == intervals[5:]
    assert [f.samples() for f in ring.since(0)] == intervals[3:]  # what is still kept
    latest = ring.latest()
    assert latest is not None and latest.samples() == intervals[-1]
    column = layout.column_of["instructions"]
    expected = [[s.counts.get("instructions", 0) for s in samples] for samples in intervals[-3:]]
    assert ring.history("counts", 3)[:, :, column].tolist() == expected
    assert ring.history("seq", 2).tolist() == [[6] * 6, [7] * 6]
    latest.counts[:] = 0  # a reader's copy: the ring is not changed through it
    assert ring.latest().samples() == intervals[-1]  # type: ignore[union-attr]
    with pytest.raises(ValueError):
        ring.push(IntervalFrame.empty(FrameLayout.of({0: ["x"]})))


def test_frames_are_flat_in_the_cpu_count() -> None:
    """A frame is the same few arrays at 4 or 1,024 CPUs: no Python object per CPU besides the shared tables."""
    for cpus in (4, 1024):
        layout = FrameLayout.of({cpu: ["instructions", "cycles"] for cpu in range(cpus)})
        frame = IntervalFrame.empty(layout)
        arrays = [v for v in vars(frame).values() if isinstance(v, np.ndarray)]
        assert len(arrays) == len(ARRAYS) and frame.counts.shape == (cpus, 2)
        assert all(len(table) in (0, cpus) for table in (frame.topdown, frame.suspect, frame.error))
