"""The `/` filter language: CPU lists, core types and conditions on the columns."""

from __future__ import annotations

import pytest

from pmutop.core.errors import UsageError
from pmutop.derive.metrics import CoreMetrics
from pmutop.tui.filter import parse_filter
from pmutop.tui.model import CoreState


def core(cpu: int, kind: str | None = None, **metrics: float) -> CoreState:
    c = CoreState(cpu, kind)
    c.metrics = CoreMetrics(**metrics)  # type: ignore[arg-type]
    return c


CORES = [
    core(0, "P", util=0.95, ipc=2.5, llc_misses_per_s=2e6, branch_miss_ratio=0.01),
    core(1, "P", util=0.10, ipc=0.4, llc_misses_per_s=5e3, branch_miss_ratio=0.08),
    core(2, "E", util=0.60, ipc=0.9, llc_misses_per_s=1.5e6),
    core(3, "E", util=0.02),
]


def shown(text: str) -> list[int]:
    f = parse_filter(text)
    return [c.cpu for c in CORES if f is None or f.matches(c)]


@pytest.mark.parametrize(
    ("text", "cpus"),
    [
        ("", [0, 1, 2, 3]),
        ("0-1", [0, 1]),
        ("0,2 3", [0, 2, 3]),  # lists add up
        ("E", [2, 3]),
        ("p-cores", [0, 1]),
        ("type=e", [2, 3]),
        ("util>50", [0, 2]),
        ("util > 50", [0, 2]),
        ("util>=60", [0, 2]),
        ("ipc<1", [1, 2]),  # a core without a value never matches a condition
        ("llc>1M", [0, 2]),
        ("brmiss>5%", [1]),
        ("E and util>50", [2]),
        ("0-2 ipc<1 util<50", [1]),
    ],
)
def test_terms(text: str, cpus: list[int]) -> None:
    assert shown(text) == cpus


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("speed>3", "no column 'speed'"),
        ("util>>3", "cannot filter by"),
        ("x", "cannot filter by"),
        ("5-2", "5-2"),
    ],
)
def test_nonsense_is_one_line(text: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_filter(text)
    assert message in str(e.value) and "\n" not in str(e.value)
