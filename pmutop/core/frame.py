"""One interval of every CPU as arrays: a row per CPU, a column per event.

A `Sample` per CPU per interval costs a dozen Python objects (the Sample, its dicts, their entries) that the
engine, the rings and the view each make, keep and collect; at hundreds of CPUs that object churn, not the
arithmetic, is pmutop's cost. An `IntervalFrame` holds the same numbers in a fixed set of numpy arrays
whatever the CPU count, and a `FrameRing` keeps the frames as arrays [interval, cpu, event], so a metric over
every CPU is one expression over a column and a CPU's history is a slice.

Absent values stay absent: an event a CPU does not count is `counted` False (its count 0), a missing TSC is
-1, a missing float (util, Busy%, temperature, a C-state, an energy domain) is NaN, a missing package -1. The
few per-CPU texts (why a sample is suspect, why a CPU failed) are sparse tables keyed by row.

`IntervalFrame.from_samples` and `IntervalFrame.samples` convert both ways, exactly: the frame carries what a
Sample carries, the order of each CPU's events included.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from pmutop.core.sample import Sample

NO_TSC = -1
NO_PACKAGE = -1
Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class FrameLayout:
    """What the rows and columns of a run's frames are: made once per run, shared by all its frames."""

    cpus: tuple[int, ...]
    events: tuple[str, ...]  # every CPU's events, in the order first met
    columns: tuple[tuple[int, ...], ...]  # per row: its CPU's events as columns, in that CPU's own order
    cstates: tuple[str, ...] = ()  # idle-state names, in the order first met
    domains: tuple[str, ...] = ()  # energy domains, in the order first met
    row_of: dict[int, int] = field(init=False, repr=False, compare=False)
    column_of: dict[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "row_of", {cpu: row for row, cpu in enumerate(self.cpus)})
        object.__setattr__(self, "column_of", {event: column for column, event in enumerate(self.events)})

    @classmethod
    def of(
        cls, keys: Mapping[int, Sequence[str]], cstates: Iterable[str] = (), domains: Iterable[str] = ()
    ) -> FrameLayout:
        """The layout of CPUs counting `keys` (cpu -> its event keys, in its order)."""
        events = tuple(dict.fromkeys(key for cpu_keys in keys.values() for key in cpu_keys))
        column_of = {event: column for column, event in enumerate(events)}
        columns = tuple(tuple(column_of[key] for key in cpu_keys) for cpu_keys in keys.values())
        return cls(tuple(keys), events, columns, tuple(dict.fromkeys(cstates)), tuple(dict.fromkeys(domains)))

    @classmethod
    def of_samples(cls, samples: Iterable[Sample]) -> FrameLayout:
        """The layout that holds `samples` (one or more per CPU): each CPU's events in its first sample's order."""
        keys: dict[int, list[str]] = {}
        cstates: dict[str, None] = {}
        domains: dict[str, None] = {}
        for s in samples:
            known = keys.setdefault(s.cpu, [])
            known.extend(k for k in s.counts if k not in known)
            cstates.update(dict.fromkeys(s.cstates))
            domains.update(dict.fromkeys(s.energy_j))
        return cls.of(keys, cstates, domains)


@dataclass(frozen=True, eq=False)
class IntervalFrame:
    """One interval of every CPU of a layout. A row without a sample this interval has seq 0."""

    layout: FrameLayout
    seq: Ints  # [cpu]: the CPU's sample number (1, 2, ...); 0: no sample this interval
    time: Floats  # [cpu]: seconds since the start, at the read
    interval: Floats  # [cpu]: wall seconds the sample covers
    tsc: Ints  # [cpu]: TSC ticks in the interval; NO_TSC: none
    tsc_hz: Floats  # [cpu]: NaN: none
    counts: Ints  # [cpu, event]: deltas
    counted: Flags  # [cpu, event]: the sample has this event
    overflows: Ints  # [cpu, event]: wraps seen in the interval
    estimated: Floats  # [cpu, event]: share of the interval counted; NaN: not estimated
    util: Floats  # [cpu]: busy fraction from the kernel's CPU times; NaN: none
    busy: Floats  # [cpu]: Busy%
    bzy_mhz: Floats  # [cpu]
    temp_c: Floats  # [cpu]
    pkg_temp_c: Floats  # [cpu]
    package: Ints  # [cpu]: NO_PACKAGE: unknown
    cstates: Floats  # [cpu, state]: % of the interval; NaN: not measured
    energy_j: Floats  # [cpu, domain]: joules; NaN: not measured
    topdown: tuple[str | None, ...]  # [cpu]: the top-down method, None: not measured
    throttle: tuple[tuple[str, ...], ...]  # [cpu]
    power_src: tuple[dict[str, str], ...]  # [cpu]: field -> source (shared, never changed)
    suspect: dict[int, str]  # row -> why its numbers must not be shown as truth
    error: dict[int, str]  # row -> why its sampler stopped

    @classmethod
    def empty(cls, layout: FrameLayout) -> IntervalFrame:
        """A frame with no sample on any row, to fill in place (a writer's)."""
        n, e = len(layout.cpus), len(layout.events)
        nan = np.full(n, math.nan)
        return cls(
            layout,
            seq=np.zeros(n, np.int64),
            time=nan.copy(),
            interval=nan.copy(),
            tsc=np.full(n, NO_TSC, np.int64),
            tsc_hz=nan.copy(),
            counts=np.zeros((n, e), np.int64),
            counted=np.zeros((n, e), np.bool_),
            overflows=np.zeros((n, e), np.int64),
            estimated=np.full((n, e), math.nan),
            util=nan.copy(),
            busy=nan.copy(),
            bzy_mhz=nan.copy(),
            temp_c=nan.copy(),
            pkg_temp_c=nan.copy(),
            package=np.full(n, NO_PACKAGE, np.int64),
            cstates=np.full((n, len(layout.cstates)), math.nan),
            energy_j=np.full((n, len(layout.domains)), math.nan),
            topdown=(None,) * n,
            throttle=((),) * n,
            power_src=({},) * n,
            suspect={},
            error={},
        )

    @classmethod
    def from_samples(cls, layout: FrameLayout, samples: Iterable[Sample]) -> IntervalFrame:
        """The frame of one interval's samples (at most one per CPU of `layout`; CPUs without one: seq 0)."""
        frame = cls.empty(layout)
        topdown, throttle, power_src = list(frame.topdown), list(frame.throttle), list(frame.power_src)
        state_of = {name: k for k, name in enumerate(layout.cstates)}
        domain_of = {name: k for k, name in enumerate(layout.domains)}
        for s in samples:
            row = layout.row_of[s.cpu]
            frame.seq[row] = s.seq
            frame.time[row] = s.time
            frame.interval[row] = s.interval
            if s.tsc is not None:
                frame.tsc[row] = s.tsc
            _put(frame.tsc_hz, row, s.tsc_hz)
            for key, value in s.counts.items():
                column = layout.column_of[key]
                frame.counts[row, column] = value
                frame.counted[row, column] = True
            for key, value in s.overflows.items():
                frame.overflows[row, layout.column_of[key]] = value
            for key, share in s.estimated.items():
                frame.estimated[row, layout.column_of[key]] = share
            for name, value in ((n, getattr(s, n)) for n in ("util", "busy", "bzy_mhz", "temp_c", "pkg_temp_c")):
                _put(getattr(frame, name), row, value)
            if s.package is not None:
                frame.package[row] = s.package
            for name, pct in s.cstates.items():
                frame.cstates[row, state_of[name]] = pct
            for domain, joules in s.energy_j.items():
                frame.energy_j[row, domain_of[domain]] = joules
            topdown[row], throttle[row], power_src[row] = s.topdown, s.throttle, s.power_src
            if s.suspect is not None:
                frame.suspect[row] = s.suspect
            if s.error is not None:
                frame.error[row] = s.error
        return _with(frame, topdown=tuple(topdown), throttle=tuple(throttle), power_src=tuple(power_src))

    def sample(self, row: int) -> Sample | None:
        """The Sample of one row (None where the CPU has no sample this interval)."""
        seq = int(self.seq[row])
        if not seq:
            return None
        layout = self.layout
        events = layout.events
        columns = layout.columns[row]
        counted = self.counted[row]
        counts = {events[c]: int(self.counts[row, c]) for c in columns if counted[c]}
        overflows = {events[c]: int(self.overflows[row, c]) for c in columns if self.overflows[row, c]}
        estimated = {
            events[c]: float(self.estimated[row, c]) for c in columns if not math.isnan(self.estimated[row, c])
        }
        tsc = int(self.tsc[row])
        package = int(self.package[row])
        return Sample(
            cpu=layout.cpus[row],
            seq=seq,
            time=float(self.time[row]),
            interval=float(self.interval[row]),
            tsc=None if tsc == NO_TSC else tsc,
            tsc_hz=_get(self.tsc_hz, row),
            counts=counts,
            overflows=overflows,
            suspect=self.suspect.get(row),
            error=self.error.get(row),
            estimated=estimated,
            util=_get(self.util, row),
            topdown=self.topdown[row],
            busy=_get(self.busy, row),
            bzy_mhz=_get(self.bzy_mhz, row),
            cstates=_present(layout.cstates, self.cstates[row]),
            temp_c=_get(self.temp_c, row),
            throttle=self.throttle[row],
            package=None if package == NO_PACKAGE else package,
            pkg_temp_c=_get(self.pkg_temp_c, row),
            energy_j=_present(layout.domains, self.energy_j[row]),
            power_src=self.power_src[row],
        )

    def samples(self) -> list[Sample]:
        """Every row's Sample, in row order, rows without one left out."""
        return [s for s in map(self.sample, range(len(self.layout.cpus))) if s is not None]

    def column(self, event: str) -> Ints:
        """One event's deltas on every row (0 where not counted: see `counted`)."""
        return self.counts[:, self.layout.column_of[event]]


def _put(array: Floats, row: int, value: float | None) -> None:
    if value is not None:
        array[row] = value


def _get(array: Floats, row: int) -> float | None:
    value = float(array[row])
    return None if math.isnan(value) else value


def _present(names: tuple[str, ...], values: Floats) -> dict[str, float]:
    return {name: float(v) for name, v in zip(names, values, strict=True) if not math.isnan(v)}


def _with(frame: IntervalFrame, **tables: object) -> IntervalFrame:
    """`frame` with its per-row tables replaced (the arrays are shared, not copied)."""
    fields = {name: getattr(frame, name) for name in IntervalFrame.__dataclass_fields__}
    return IntervalFrame(**(fields | tables))


ARRAYS = tuple(
    name for name, spec in IntervalFrame.__dataclass_fields__.items() if spec.type in ("Ints", "Floats", "Flags")
)
TABLES = ("topdown", "throttle", "power_src", "suspect", "error")


class FrameRing:
    """The last `capacity` frames of one layout as arrays [interval, cpu, ...]: one writer pushes, any number of
    readers copy without locks (a slot is written before the count moves; a reader that fell a whole ring
    behind gets the frames still kept)."""

    def __init__(self, layout: FrameLayout, capacity: int = 600) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.layout = layout
        self.capacity = capacity
        blank = IntervalFrame.empty(layout)
        self._arrays = {name: np.repeat(getattr(blank, name)[np.newaxis], capacity, axis=0) for name in ARRAYS}
        self._tables: list[dict[str, object]] = [{} for _ in range(capacity)]
        self._count = 0  # frames ever pushed; written only by the writer

    def push(self, frame: IntervalFrame) -> None:
        if frame.layout is not self.layout and frame.layout != self.layout:
            raise ValueError("a frame of another layout")
        slot = self._count % self.capacity
        for name, array in self._arrays.items():
            array[slot] = getattr(frame, name)
        self._tables[slot] = {name: getattr(frame, name) for name in TABLES}
        self._count += 1

    @property
    def count(self) -> int:
        return self._count

    def __len__(self) -> int:
        return min(self._count, self.capacity)

    def latest(self) -> IntervalFrame | None:
        n = self._count
        return self._frame(n - 1) if n else None

    def since(self, count: int) -> list[IntervalFrame]:
        """The frames pushed after a reader had seen `count` of them (oldest first, at most `capacity`)."""
        end = self._count
        numbers = range(max(count, end - self.capacity), end)
        frames = [self._frame(k) for k in numbers]
        kept_from = self._count - self.capacity  # frames older than this were overwritten while being copied
        return [frame for k, frame in zip(numbers, frames, strict=True) if k >= kept_from]

    def history(self, name: str, points: int) -> npt.NDArray[np.generic]:
        """The newest `points` intervals of one array (an event's deltas: "counts", [interval, cpu, event];
        a per-CPU field: [interval, cpu]), oldest first, copied."""
        n = min(points, len(self))
        end = self._count
        slots = [(end - n + k) % self.capacity for k in range(n)]
        return self._arrays[name][slots]

    def _frame(self, k: int) -> IntervalFrame:
        slot = k % self.capacity
        arrays = {name: array[slot].copy() for name, array in self._arrays.items()}
        return IntervalFrame(layout=self.layout, **arrays, **self._tables[slot])  # type: ignore[arg-type]
