"""Sample's __init__ (pmutop.core.sample._slot_init, faster than the frozen dataclass's own): the same
parameters, defaults and fresh default containers, and an instance as frozen and comparable."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from pmutop.core.sample import Sample


def test_every_field_given_by_name_or_position_is_stored() -> None:
    values = {
        "cpu": 3,
        "seq": 7,
        "time": 1.5,
        "interval": 0.5,
        "tsc": 1000,
        "tsc_hz": 2e9,
        "counts": {"instructions": 5},
        "overflows": {"instructions": 1},
        "suspect": "why",
        "error": "failed",
        "estimated": {"branches": 0.5},
        "util": 0.25,
        "topdown": "perf_metrics",
        "busy": 12.5,
        "bzy_mhz": 3000.0,
        "cstates": {"C1": 50.0},
        "temp_c": 60.0,
        "throttle": ("power",),
        "package": 1,
        "pkg_temp_c": 55.0,
        "energy_j": {"package": 2.0},
        "power_src": {"busy": "msr"},
    }
    assert [f.name for f in dataclasses.fields(Sample)] == list(values)  # every field tried
    by_name = Sample(**values)
    by_position = Sample(*values.values())
    for sample in (by_name, by_position):
        assert {name: getattr(sample, name) for name in values} == values
    assert by_name == by_position


def test_defaults_and_a_fresh_container_for_every_sample() -> None:
    first, second = (Sample(0, 1, 0.0, 1.0, None, None, {}) for _ in range(2))
    assert first.overflows == {} and first.estimated == {} and first.cstates == {} and first.energy_j == {}
    assert first.power_src == {} and first.throttle == () and first.error is None and first.busy is None
    assert first.overflows is not second.overflows and first.power_src is not second.power_src
    assert str(inspect.signature(Sample)).endswith("power_src: 'dict[str, str]' = <factory>) -> None")


def test_the_sample_stays_frozen_and_replace_works() -> None:
    sample = Sample(0, 1, 0.0, 1.0, 10, 1e9, {"cycles": 1})
    with pytest.raises(dataclasses.FrozenInstanceError):
        sample.seq = 2  # type: ignore[misc]
    assert dataclasses.replace(sample, seq=2).seq == 2 and sample.seq == 1
    with pytest.raises(TypeError):
        Sample(0, 1, 0.0)  # type: ignore[call-arg]
