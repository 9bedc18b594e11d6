from __future__ import annotations

import pytest

from pmutop.core.ring import SampleRing
from pmutop.core.sample import Sample
from pmutop.derive.metrics import combined, compute, for_sample
from pmutop.engine.sanity import impossible


def sample(cpu: int = 0, seq: int = 1, **counts: int) -> Sample:
    tsc = counts.pop("tsc", 2_000_000_000)
    return Sample(cpu=cpu, seq=seq, time=float(seq), interval=1.0, tsc=tsc, tsc_hz=2.0e9, counts=counts)


def test_metric_formulas() -> None:
    m = compute(
        {
            "instructions": 3_000_000_000,
            "cycles": 1_500_000_000,
            "ref_cycles": 1_000_000_000,
            "llc_references": 4_000_000,
            "llc_misses": 1_000_000,
            "branches": 500_000_000,
            "branch_misses": 5_000_000,
        },
        tsc=2_000_000_000,
        tsc_hz=2.0e9,
        interval=0.5,
    )
    assert m.util == pytest.approx(0.5)
    assert m.ghz == pytest.approx(3.0)  # 1.5x the 2 GHz reference clock
    assert m.ipc == pytest.approx(2.0)
    assert m.llc_misses_per_s == pytest.approx(2_000_000)
    assert m.llc_mpki == pytest.approx(1000 * 1_000_000 / 3_000_000_000)
    assert m.llc_miss_ratio == pytest.approx(0.25)
    assert m.branch_miss_ratio == pytest.approx(0.01)


def test_missing_or_zero_inputs_give_none() -> None:
    m = compute({"instructions": 10, "cycles": 0}, tsc=None, tsc_hz=None, interval=1.0)
    assert m.ipc is None and m.util is None and m.ghz is None and m.llc_mpki is None
    assert m.llc_misses_per_s is None


def test_combined_is_computed_from_summed_counts() -> None:
    a = sample(0, instructions=100, cycles=100, ref_cycles=2_000_000_000)
    b = sample(1, instructions=300, cycles=100, ref_cycles=0)
    m = combined([a, b])
    assert m.ipc == pytest.approx(2.0)
    assert m.util == pytest.approx(0.5)  # one busy core and one idle core
    bad = Sample(cpu=2, seq=1, time=1, interval=1, tsc=1, tsc_hz=1.0, counts={"cycles": 10**12}, suspect="x")
    assert combined([a, b, bad]).ipc == pytest.approx(2.0)


def test_impossible_numbers() -> None:
    assert impossible({"ref_cycles": 3_000_000_000}, 2_000_000_000, 2e9) is not None
    assert impossible({"ref_cycles": 1_990_000_000}, 2_000_000_000, 2e9) is None
    assert "GHz" in (impossible({"cycles": 30_000_000_000, "ref_cycles": 1_000_000_000}, None, 2e9) or "")
    assert "IPC" in (impossible({"cycles": 1_000_000, "instructions": 20_000_000}, None, None) or "")
    assert for_sample(sample(instructions=1, cycles=2)).ipc == 0.5


def test_ring_is_bounded_and_readers_resume() -> None:
    ring = SampleRing(3)
    for seq in range(1, 6):
        ring.push(sample(seq=seq))
    assert ring.count == 5 and len(ring) == 3
    assert [s.seq for s in ring.since(0)] == [3, 4, 5]
    assert [s.seq for s in ring.since(4)] == [5]
    assert ring.since(5) == []
    latest = ring.latest()
    assert latest is not None and latest.seq == 5


def test_as_dict_has_every_field_as_dataclasses_would_give_it() -> None:
    import dataclasses

    from pmutop.derive.metrics import CoreMetrics

    values = CoreMetrics(*(0.5 + i for i in range(len(dataclasses.fields(CoreMetrics)))))
    assert values.as_dict() == dataclasses.asdict(values)
    assert list(values.as_dict()) == [f.name for f in dataclasses.fields(CoreMetrics)]


def test_a_bound_fixed_cell_prints_what_fixed_prints() -> None:
    from pmutop.core.numfmt import fixed, fixed_cell

    for spec, scale in ((".1f", 100.0), (".2f", 1.0), (".0f", 1.0)):
        cell = fixed_cell(spec, scale)
        for value in (None, 0.0, 0.12345, 0.99951, -3.5, 1e9):
            assert cell(value, 7) == fixed(value, spec, 7, scale)
