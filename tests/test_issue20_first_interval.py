"""Issue 20, item 5 (first part): a record's interval never exceeds the time since the start it reports."""

from __future__ import annotations

import json

import pytest

from pmutop.app.main import main
from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.clock import ManualClock
from pmutop.engine.engine import Engine
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform

ROUNDING = 0.0005  # `time` is printed to the millisecond


@pytest.mark.parametrize("cpus", ["2", "64"])
def test_every_batch_record_covers_no_more_than_the_run_so_far(capsys: pytest.CaptureFixture[str], cpus: str) -> None:
    args = ["--demo", "--sim-cpus", cpus, "--batch", "--count", "3", "--interval", "0.1", "--format", "json"]
    code = main(args)
    out, err = capsys.readouterr()
    assert code == 0, err
    records = [r for line in out.splitlines() if (r := json.loads(line))["kind"] == "cpu"]  # not package (issue 22)
    assert len(records) == 3 * int(cpus)
    for r in records:
        assert r["interval"] <= r["time"] + ROUNDING, (r["cpu"], r["interval_index"], r["interval"], r["time"])
    first = [r for r in records if r["interval_index"] == 1]
    assert all(r["time"] > 0 for r in first)


def test_time_counts_from_the_earliest_counter_start_when_programming_takes_time() -> None:
    # An unthreaded engine starts every CPU's counters one after the other; programming takes time (here 50 ms a
    # CPU). The first interval of the CPU started first is the longest: the time must be at least that long.
    clock = ManualClock()
    platform = SimPlatform(SimConfig(cpus=4, model="spr"), clock)
    backend = MsrBackend(platform, clock)
    engine = Engine(backend, platform, clock, [0, 1, 2, 3], 0.2, threaded=False)
    original = backend.counters

    def slow_counters(cpu: int):  # type: ignore[no-untyped-def]
        counters = original(cpu)
        start = counters.start

        def start_later() -> int:
            clock.advance(0.05)
            return start()

        counters.start = start_later  # type: ignore[method-assign]
        return counters

    backend.counters = slow_counters  # type: ignore[method-assign]
    try:
        engine.start()
        clock.advance(0.2)
        engine.tick()
        samples = [engine.rings[cpu].latest() for cpu in range(4)]
        for s in samples:
            assert s is not None and s.interval <= s.time + 1e-9, (s.cpu, s.interval, s.time)
        assert samples[0].interval == pytest.approx(0.35)  # cpu 0 started 150 ms before cpu 3
    finally:
        engine.stop()
