"""Exact interpolation of every lane of a packed vector at once (the workload's reads within a segment).

A workload keeps its cumulative amounts as vectors packed into one integer, 64 bits a lane (pmutop.sim.workload).
A read inside a segment needs, per lane, b + (a - b) * off // st (linear within the segment, floored): done lane
by lane that is a few dozen big-integer operations per read. Here the lanes are spread out to W bits each, so
one multiplication scales every lane's difference without carries between them, and the floor division by st
becomes a multiplication by M = ceil(2^s / st) and a shift by s (exact for every x = (a - b) * off < 2^N when
s >= N + bit_length(st): the error x * (M * st - 2^s) / (st * 2^s) stays below 1/st, too little to reach the
next integer). The shift is free: lane i is unpacked from byte s/8 of its W-bit slot, past the fraction bits.
"""

from __future__ import annotations

import functools
import struct

_Q = 8  # bytes of a 64-bit lane


class Interpolator:
    """b + (a - b) * off // st for all `lanes` lanes of two packed vectors, 0 <= off < st."""

    def __init__(self, lanes: int, st: int) -> None:
        if st < 1:
            raise ValueError(f"segment length must be >= 1: {st}")
        n = 64 + st.bit_length()  # (a - b) < 2^64 and off < st: the products stay below 2^n
        shift = -(-(n + st.bit_length()) // 8) * 8  # s >= n + bit_length(st), a whole number of bytes
        self.st = st
        self.shift = shift
        self.magic = -(-(1 << shift) // st)
        self.lanes = lanes
        pad = shift // 8
        # A W-bit slot per lane (W = s + 64): the lane's 64 bits at bit s (its fraction bits below), or at bit 0.
        self._high = struct.Struct("<" + f"{pad}xQ" * lanes)
        self._low = struct.Struct("<" + f"Q{pad}x" * lanes)
        self._packed = struct.Struct(f"<{lanes}Q")

    def spread(self, before: int, after: int) -> tuple[int, int]:
        """The two packed vectors (64-bit lanes) of one segment's ends, made ready for at()."""
        size = self._packed.size
        b = self._packed.unpack(before.to_bytes(size, "little"))
        d = self._packed.unpack((after - before).to_bytes(size, "little"))  # lane-wise: no lane decreases
        return int.from_bytes(self._high.pack(*b), "little"), int.from_bytes(self._low.pack(*d), "little")

    def at(self, spread: tuple[int, int], off: int) -> tuple[int, ...]:
        """Every lane at `off` ticks into the segment."""
        high, low = spread
        return self._high.unpack((high + low * (off * self.magic)).to_bytes(self._high.size, "little"))


@functools.cache
def interpolator(lanes: int, st: int) -> Interpolator:
    return Interpolator(lanes, st)


class Within:
    """One workload's reads within its segments: the last segment's spread ends kept (reads come in time
    order, mostly several per segment)."""

    def __init__(self, lanes: int, st: int) -> None:
        self._interp = interpolator(lanes, st)
        self._last: tuple[int, int, int] = (-1, 0, 0)  # (segment, spread ends), replaced whole: thread-safe

    def holds(self, seg: int) -> bool:
        """Whether segment `seg`'s ends are the ones kept (at() then costs one multiplication)."""
        return self._last[0] == seg

    def at(self, seg: int, before: int, after: int, off: int) -> tuple[int, ...]:
        """Every lane `off` ticks into segment `seg`, whose ends are `before` and `after`."""
        last = self._last
        if last[0] != seg:
            last = self._last = (seg, *self._interp.spread(before, after))
        return self._interp.at((last[1], last[2]), off)
