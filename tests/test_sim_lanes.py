"""The workload's reads within a segment interpolate every lane at once (pmutop.sim.lanes): the same numbers as
b + (a - b) * off // st lane by lane, at the extremes of every lane and offset."""

from __future__ import annotations

import random
import struct

import pytest

from pmutop.sim import segment
from pmutop.sim.lanes import Interpolator, Within

LANES = 5
TOP = (1 << 64) - 1


def pack(values: list[int]) -> int:
    return int.from_bytes(struct.pack(f"<{len(values)}Q", *values), "little")


@pytest.mark.parametrize("st", [1, 2, 3, 7, 99_999_999, 240_000_000, 300_000_001, (1 << 40) + 17])
def test_every_lane_is_floored_exactly_as_one_lane_at_a_time(st: int) -> None:
    rng = random.Random(st)
    interp = Interpolator(LANES, st)
    for _ in range(300):
        before = [rng.choice([0, rng.randrange(TOP), TOP]) for _ in range(LANES)]
        after = [b + rng.choice([0, min(1, TOP - b), rng.randrange(TOP - b + 1), TOP - b]) for b in before]
        spread = interp.spread(pack(before), pack(after))
        for off in {0, 1, st // 2, st - 1, rng.randrange(st)}:
            want = tuple(b + (a - b) * off // st for b, a in zip(before, after, strict=True))
            assert interp.at(spread, off) == want, (st, off)


def test_within_keeps_the_last_segment_and_answers_a_new_one() -> None:
    within = Within(LANES, 10)
    ends = {3: ([1, 2, 3, 4, 5], [11, 12, 13, 14, 25]), 4: ([11, 12, 13, 14, 25], [21, 22, 23, 34, 25])}
    for seg, off in [(3, 5), (3, 9), (4, 1), (3, 2)]:
        before, after = ends[seg]
        want = tuple(b + (a - b) * off // 10 for b, a in zip(before, after, strict=True))
        assert within.at(seg, pack(before), pack(after), off) == want


@pytest.mark.skipif(not segment.native_available(), reason="the shim has no C copy of the simulator's arithmetic")
@pytest.mark.parametrize("st", [1, 3, 240_000_000, (1 << 40) + 17])
def test_the_c_copy_interpolates_every_lane_as_python_does(st: int) -> None:
    rng = random.Random(st)
    native, python = segment.NativeWithin(st), Within(segment.LANES, st)
    for seg in range(200):
        before = [rng.choice([0, rng.randrange(TOP), TOP]) for _ in range(segment.LANES)]
        after = [b + rng.choice([0, min(1, TOP - b), rng.randrange(TOP - b + 1), TOP - b]) for b in before]
        for off in {o for o in (1, st // 2, st - 1, rng.randrange(st)) if 0 < o < st}:
            assert native.at(seg, pack(before), pack(after), off) == python.at(seg, pack(before), pack(after), off)
