"""Placing events on PMUs with more than 8 GP counters (PMU v6: Lunar Lake / Arrow Lake P-cores have 10)."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from pmutop.core.errors import UsageError
from pmutop.pmu import registers
from pmutop.pmu.cpuid_decode import PerfmonInfo
from pmutop.pmu.events import EventSpec
from pmutop.pmu.plan import assign, plan_counters


def pmu(version: int, gp_mask: int, fixed_mask: int = 0xF) -> PerfmonInfo:
    return PerfmonInfo(
        version=version,
        gp_counters=gp_mask.bit_count(),
        gp_mask=gp_mask,
        gp_width=48,
        fixed_counters=fixed_mask.bit_count(),
        fixed_mask=fixed_mask,
        fixed_width=48,
        ebx_length=8,
        unavailable_events=(),
        available_events=(),
        anythread_deprecated=True,
        leaf23=None,
        notes=(),
    )


def raw(i: int, counters: int | None = None) -> EventSpec:
    return EventSpec(f"r{i:02x}d1", registers.RawEvent(0xD1, i), counters=counters)


def test_assign_is_polynomial_when_a_counter_mask_is_oversubscribed() -> None:
    # Lion Cove restricts e.g. LLC events to counters 0-9 (0x3ff, Linux intel_lnc_event_constraints).
    # Eleven such events on 16 counters cannot fit; proving it must not enumerate 10! placements.
    events = [raw(i, 0x3FF) for i in range(11)]
    t0 = time.perf_counter()
    assert assign(events, 16) is None
    assert assign(events[:10], 16) is not None
    assert time.perf_counter() - t0 < 1.0


def test_oversubscribed_restricted_events_rotate_quickly() -> None:
    t0 = time.perf_counter()
    plan = plan_counters(pmu(6, 0xFFFF), [raw(i, 0x3FF) for i in range(12)], cpu=0)
    assert time.perf_counter() - t0 < 2.0
    assert [len(g) for g in plan.gp_groups] == [10, 2]
    assert all(p.index < 10 for g in plan.gp_groups for p in g)


def test_assign_honours_masks_exactly() -> None:
    events = [raw(0, 0b0100), raw(1, 0b0011), raw(2, 0b0110), raw(3)]
    idx = assign(events, 4)
    assert idx is not None
    assert idx[0] == 2 and idx[1] in (0, 1) and idx[2] == 1 and idx[1] == 0
    assert len(set(idx)) == 4
    assert assign([raw(0, 0b1), raw(1, 0b1)], 4) is None
    assert assign([], 4) == []


def test_ten_events_on_a_ten_counter_pmu_need_no_rotation() -> None:
    plan = plan_counters(pmu(6, 0x3FF), [raw(i) for i in range(10)], cpu=0, rotate=False)
    assert sorted(p.index for p in plan.gp) == list(range(10))
    assert plan.n_gp_read == 10


def test_eleven_events_on_ten_counters() -> None:
    with pytest.raises(UsageError, match="do not fit the 10 general-purpose counters"):
        plan_counters(pmu(6, 0x3FF), [raw(i) for i in range(11)], cpu=0, rotate=False)
    plan = plan_counters(pmu(6, 0x3FF), [raw(i) for i in range(11)], cpu=0)
    assert [len(g) for g in plan.gp_groups] == [10, 1]


def test_non_contiguous_bitmap_uses_the_contiguous_prefix() -> None:
    # rdpmc reads GP 0..n-1 in one go: a hole would fault, so only the counters below the first hole are used.
    plan = plan_counters(pmu(6, 0b1111_0111), [raw(i) for i in range(4)], cpu=0)
    assert [len(g) for g in plan.gp_groups] == [3, 1]
    assert plan.n_gp_read == 3


def test_legacy_pmu_is_capped_at_its_8_registers() -> None:
    plan = plan_counters(pmu(5, 0xFFF), [raw(i) for i in range(9)], cpu=0)
    assert [len(g) for g in plan.gp_groups] == [8, 1]
    with pytest.raises(UsageError, match="do not fit the 8 general-purpose counters"):
        plan_counters(pmu(5, 0xFFF), [raw(i) for i in range(9)], cpu=0, rotate=False)


def test_restriction_beyond_the_usable_counters_is_refused() -> None:
    with pytest.raises(UsageError, match="may only use GP counters 0x400"):
        plan_counters(pmu(5, 0xFFF), [raw(0, 0x400)], cpu=0)
    plan = plan_counters(pmu(6, 0xFFF), [raw(0, 0x400)], cpu=0)
    assert [p.index for p in plan.gp] == [10]


def test_default_events_on_a_v6_pmu() -> None:
    plan = plan_counters(pmu(6, 0x3FF, 0x77), None, cpu=0)
    assert {p.index for p in plan.fixed} == {0, 1, 2}
    assert not plan.dropped
    restricted = [replace(raw(i), counters=1 << (9 - i)) for i in range(3)]
    plan = plan_counters(pmu(6, 0x3FF), restricted, cpu=0)
    assert sorted(p.index for p in plan.gp) == [7, 8, 9]
