"""What the live view knows: per-core history and latest metrics, built from the sample rings.

Pure state, no widgets: the app feeds it samples and asks it for values; tests do the same.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import islice
from typing import TypeVar

from pmutop.core.dram_reading import PackageDram, package_totals
from pmutop.core.ring import SampleRing
from pmutop.core.sample import Sample
from pmutop.derive import topdown
from pmutop.derive.metrics import CoreMetrics, combined, for_sample, sum_counts
from pmutop.derive.power import SERIES as POWER_SERIES
from pmutop.derive.power import combined_power, power_values
from pmutop.probes.tasks import TopTask

HISTORY = 120  # intervals kept for sparklines, plots and the heatmap (a 250-column screen shows them all)
SERIES = ("ipc", "ghz", "util", "llc_misses_per_s")
TMA_SERIES = topdown.LEVEL1
Span = tuple[float, float]  # (start, end) of a history point, in seconds since the run started
Result = TypeVar("Result")
Part = TypeVar("Part")  # what _once is asked about: samples, or their counts


@dataclass
class CoreState:
    cpu: int
    core_type: str | None = None
    latest: Sample | None = None
    metrics: CoreMetrics | None = None  # of the latest sample; None while it is suspect or failed
    history: dict[str, deque[float | None]] = field(default_factory=dict)
    overflow_totals: dict[str, int] = field(default_factory=dict)
    suspect_count: int = 0
    error: str | None = None
    task: TopTask | None = None
    seen: int = 0  # samples consumed from the ring
    tma: dict[str, float | None] | None = None  # top-down fractions of the latest sample; None: not measured
    name: str | None = None  # shown instead of the number (a remote host's "host:cpu", a package's "pkg0")
    dram: PackageDram | None = None  # a package row's (the all row's: every package's) latest DRAM traffic
    # When each history point was measured, newest last (the histories end at the same point): plots are
    # drawn against time, so points of different intervals take the room they lasted.
    spans: deque[Span] = field(default_factory=lambda: deque(maxlen=HISTORY))
    # series_top's per-core part as of the last ingest: series -> (seen, largest point, points after it).
    tops: dict[str, tuple[int, float, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.history:
            self.history = {k: deque(maxlen=HISTORY) for k in (*SERIES, *TMA_SERIES, *POWER_SERIES)}

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        return f"{self.cpu}{' ' + self.core_type if self.core_type else ''}"


def summed(samples: list[Sample], sums: Callable[[list[dict[str, int]]], dict[str, int]] = sum_counts) -> Sample | None:
    """The cores' latest samples added up: the total row's counts and event rates.

    Samplers can cover slightly different times (one ran late): each core's counts are taken at its own rate
    over the longest interval, so counts / interval is the sum of the cores' rates."""
    if not samples:
        return None
    longest = max(s.interval for s in samples)
    counts: dict[str, int] = {}
    estimated: dict[str, float] = {}
    if all(not 0 < s.interval != longest for s in samples):  # the usual case: nothing to scale
        counts = sums([s.counts for s in samples])
    else:
        for s in samples:
            scale = longest / s.interval if 0 < s.interval != longest else None
            for k, v in s.counts.items():
                counts[k] = counts.get(k, 0) + (v if scale is None else round(v * scale))
    for s in samples:
        for k, f in s.estimated.items():
            estimated[k] = min(f, estimated.get(k, 1.0))
    last = samples[-1]
    return Sample(
        cpu=-1,
        seq=last.seq,
        time=last.time,
        interval=longest,
        tsc=sum(s.tsc or 0 for s in samples) or None,
        tsc_hz=last.tsc_hz,
        counts=counts,
        estimated=estimated,
    )


def resample(
    values: Sequence[float | None], spans: Sequence[Span], end: float, step: float, columns: int
) -> list[float | None]:
    """The history as `columns` columns of `step` seconds each, the last ending at `end`: a column is the mean
    of the points that cover it (a point longer than a column covers several, one shorter shares its column);
    None where nothing was measured. `values` and `spans` are aligned at their newest point."""
    if columns <= 0 or step <= 0:
        return [None] * max(columns, 0)
    sums = [0.0] * columns
    counts = [0] * columns
    left = end - columns * step
    for i in range(1, min(len(values), len(spans)) + 1):
        v = values[-i]
        t0, t1 = spans[-i]
        if v is None or t1 <= left or t0 >= end:
            continue
        # Boundaries rounded to the nearest column edge: back-to-back points fill back-to-back columns.
        c0, c1 = round((t0 - left) / step), round((t1 - left) / step)
        if c1 <= c0:  # shorter than half a column: the column of its middle
            c0 = math.floor(((t0 + t1) / 2 - left) / step)
            c1 = c0 + 1
        for c in range(max(c0, 0), min(c1, columns)):
            sums[c] += v
            counts[c] += 1
    return [total / n if n else None for total, n in zip(sums, counts, strict=True)]


def one_point_per_column(spans: Sequence[Span], end: float, step: float) -> bool:
    """True when every kept point lasted `step` and they follow one another up to `end`: then column k from
    the right is simply point k from the newest (the common case, and cheap for hundreds of cores)."""
    previous = end
    for t0, t1 in reversed(spans):
        if abs(t1 - previous) > 0.25 * step or abs((t1 - t0) - step) > 0.25 * step:
            return False
        previous = t0
    return True


def ago_text(seconds: float) -> str:
    """How long ago, for notes: "8 s ago", "2.5 min ago"."""
    if seconds >= 3600:
        return f"{seconds / 3600:.3g} h ago"
    if seconds >= 120:
        return f"{seconds / 60:.3g} min ago"
    return f"{seconds:.2g} s ago" if seconds < 1 else f"{seconds:.0f} s ago"


def package_cpu(package: int) -> int:
    """The CoreState.cpu of a package's row: below the all row's -1, so it never meets a CPU's number."""
    return -2 - package


def package_sample(package: int, samples: list[Sample], total: Sample | None = None) -> Sample | None:
    """A package's CPUs' latest samples as one, as turbostat's package line: counts added (as the all row), the
    busy share and clock averaged, each idle state's mean residency, the hottest core, the package's own
    temperature and energy (read on its first CPU), every throttle reason of its CPUs. `total`: summed(samples),
    when the caller has it."""
    total = summed(samples) if total is None else total
    if total is None:
        return None

    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    cstates: dict[str, float] = {}
    with_states = [s for s in samples if s.cstates]
    for name in dict.fromkeys(k for s in with_states for k in s.cstates):
        cstates[name] = sum(s.cstates.get(name, 0.0) for s in with_states) / len(with_states)
    energy: dict[str, float] = {}
    for s in samples:
        for domain, joules in s.energy_j.items():
            energy[domain] = energy.get(domain, 0.0) + joules
    temps = [s.temp_c for s in samples if s.temp_c is not None]
    pkg_temps = [s.pkg_temp_c for s in samples if s.pkg_temp_c is not None]
    return replace(
        total,
        cpu=package_cpu(package),
        package=package,
        busy=mean([s.busy for s in samples if s.busy is not None]),
        bzy_mhz=mean([s.bzy_mhz for s in samples if s.bzy_mhz is not None]),
        cstates=cstates,
        temp_c=max(temps) if temps else None,
        pkg_temp_c=max(pkg_temps) if pkg_temps else None,
        throttle=tuple(dict.fromkeys(r for s in samples for r in s.throttle)),
        energy_j=energy,
        power_src={k: v for s in samples for k, v in s.power_src.items()},
    )


def all_packages(packages: list[PackageDram]) -> PackageDram | None:
    """Every package's DRAM traffic as one (the all row): a peak only when every package's is known."""
    if not packages:
        return None
    peaks = [p.peak_bytes_per_s for p in packages]
    peak = None if any(v is None for v in peaks) else sum(v for v in peaks if v is not None)
    channels = tuple(c for p in packages for c in p.channels)
    return package_totals(-1, channels, max(p.interval for p in packages), peak)


def rate_series(key: str) -> str:
    """The history key of an event's per-second rate."""
    return f"ev:{key}"


class ViewModel:
    def __init__(
        self,
        cpus: list[int],
        core_types: dict[int, str] | None = None,
        rate_keys: tuple[str, ...] = (),
        names: dict[int, str] | None = None,
    ) -> None:
        """`rate_keys`: events (beyond the standard metrics' inputs) whose rates keep a history too."""
        core_types = core_types or {}
        self.names = names or {}  # cpu -> shown label (a remote host's "host:cpu")
        self.rate_keys = rate_keys
        self.series = (*SERIES, *TMA_SERIES, *POWER_SERIES, *(rate_series(k) for k in rate_keys))
        self.cores = {cpu: self._core(cpu, core_types.get(cpu)) for cpu in cpus}
        self.total = self._core(-1, None)
        # One row per package (socket), by number, from the samples' package ids; none for a remote feed's
        # hosts (their package numbers repeat across hosts).
        self.packages: dict[int, CoreState] = {}
        self.track_packages = not self.names
        self.intervals = 0  # intervals seen (the total row's history length, before the cap)
        self.new_errors: list[str] = []  # failures not yet announced
        self.new_suspects: list[str] = []
        self._tops: dict[tuple[object, ...], float] = {}  # (series, cores/all/packages[, columns]) -> largest value
        self.measures_topdown = False  # some CPU measures top-down (its samples say how)
        # Interval changes, as (time of the change, old seconds, new seconds): histories then mix intervals
        # of two lengths, and the views mark where.
        self.interval_marks: list[tuple[float, float, float]] = []
        self.latest_time = 0.0  # end of the newest interval (s since the start): the plots' "now"
        self.step = 0.0  # today's interval (s): a history column's width; the app sets it (0: a cell a point)
        self._uniform: tuple[float, bool] | None = None  # (step, one point per column?) since the last ingest
        # Each sample's top-down slots and fractions during one ingest (the sample is kept: ids are reused).
        self._weighings: dict[int, tuple[Sample, tuple[int | float | None, topdown.Fractions]]] = {}
        self._results: dict[tuple[object, tuple[int, ...]], object] = {}  # _once's, during one ingest

    @property
    def waiting(self) -> bool:
        """No interval has come yet (a saved view can open before the first): the views say they wait for it."""
        return self.intervals == 0

    def _core(self, cpu: int, core_type: str | None) -> CoreState:
        return CoreState(
            cpu, core_type, history={k: deque(maxlen=HISTORY) for k in self.series}, name=self.names.get(cpu)
        )

    def _append_rates(self, core: CoreState, s: Sample | None) -> None:
        for k in self.rate_keys:
            v = s.counts.get(k) if s is not None and not s.suspect else None
            core.history[rate_series(k)].append(None if v is None or not s.interval else v / s.interval)  # type: ignore[union-attr]

    def mark_interval_change(self, old: float, new: float) -> None:
        """The next interval is `new` seconds long: it starts where the newest one ended. Steps taken before
        the next interval (`-` pressed twice) are one change."""
        if self.interval_marks and self.interval_marks[-1][0] == self.latest_time:
            old = self.interval_marks.pop()[1]
        if old != new:
            self.interval_marks.append((self.latest_time, old, new))

    def kept_marks(self) -> list[tuple[float, float, float]]:
        """The interval changes inside the kept history (or made since its newest point)."""
        oldest = self.total.spans[0][0] if self.total.spans else self.latest_time
        return [m for m in self.interval_marks if m[0] >= oldest]

    def interval_note(self) -> str:
        """Where the kept history changed interval, e.g. "interval 1 s → 0.5 s 12 s ago"."""
        notes = [
            f"interval {old:g} s → {new:g} s {ago_text(self.latest_time - at)}" for at, old, new in self.kept_marks()
        ]
        return "; ".join(notes[-2:])

    def ingest(self, rings: dict[int, SampleRing]) -> bool:
        """Consume every new sample; True when anything changed."""
        by_interval: dict[int, list[Sample]] = {}
        for cpu, core in self.cores.items():
            for s in rings[cpu].since(core.seen):
                core.seen = s.seq
                self._apply(core, s)
                by_interval.setdefault(s.seq, []).append(s)
        if not by_interval:
            return False
        # The total row gets one point per interval (sample k of every CPU), however many arrived at once.
        for seq in sorted(by_interval):
            self.intervals += 1
            ok = [s for s in by_interval[seq] if not (s.error or s.suspect)]
            end = max(s.time for s in by_interval[seq])
            self.total.spans.append((end - max(s.interval for s in by_interval[seq]), end))
            self.latest_time = end
            m = self._once(self._combined, ok)
            self.total.metrics = m
            for k in SERIES:
                self.total.history[k].append(getattr(m, k))
            for k, v in combined_power(ok).items():
                self.total.history[k].append(v)
            if self.measures_topdown:
                tma = self._once(self._combined_tma, ok)
                for k in TMA_SERIES:
                    self.total.history[k].append(tma[k])
            if self.rate_keys:
                self._append_rates(self.total, self._once(self._summed, ok))
            if self.track_packages:
                self._package_interval(ok, end)
        live = [c.latest for c in self.cores.values() if c.latest is not None and c.error is None]
        self.total.metrics = self._once(self._combined, live)
        self.total.latest = self._once(self._summed, live)
        if self.measures_topdown:
            self.total.tma = self._once(self._combined_tma, [s for s in live if not s.suspect])
        self.total.overflow_totals = {}
        for core in self.cores.values():
            for k, v in core.overflow_totals.items():
                self.total.overflow_totals[k] = self.total.overflow_totals.get(k, 0) + v
        self.total.suspect_count = sum(c.suspect_count for c in self.cores.values())
        if self.track_packages:
            for number, members in self._by_package(live).items():
                state = self._package(number)
                state.latest = package_sample(number, members, self._once(self._summed, members))
                state.metrics = self._once(self._combined, members)
                if self.measures_topdown:
                    state.tma = self._once(self._combined_tma, [s for s in members if not s.suspect])
        self._tops = {}
        self._uniform = None
        self._weighings = {}
        self._results = {}
        return True

    def _once(self, compute: Callable[[list[Part]], Result], samples: list[Part]) -> Result:
        """compute(samples), once per ingest for the same samples: with one interval per ingest (the usual
        case) the all row's and each package's history point and latest values are of the same samples, and at
        hundreds of CPUs each sum is a good part of the ingest. (Ids are safe keys during one ingest: the
        rings hold every sample; the results are dropped at its end.)"""
        key = (compute, tuple(map(id, samples)))
        if key not in self._results:
            self._results[key] = compute(samples)
        return self._results[key]  # type: ignore[return-value]

    def _sum_counts(self, counts: list[dict[str, int]]) -> dict[str, int]:
        """sum_counts, once per ingest for the same counts: the all row's metrics and its summed counts (and a
        one-package machine's package row) add up the same cores' counts. Callers only read the result."""
        return self._once(sum_counts, counts)

    def _combined(self, samples: list[Sample]) -> CoreMetrics:
        return combined(samples, self._sum_counts)

    def _summed(self, samples: list[Sample]) -> Sample | None:
        return summed(samples, self._sum_counts)

    def _combined_tma(self, samples: list[Sample]) -> topdown.Fractions:
        return topdown.combine_weighed(self._weighed(s) for s in samples)

    @staticmethod
    def _by_package(samples: list[Sample]) -> dict[int, list[Sample]]:
        out: dict[int, list[Sample]] = {}
        for s in samples:
            if s.package is not None:
                out.setdefault(s.package, []).append(s)
        return out

    def _package(self, number: int) -> CoreState:
        state = self.packages.get(number)
        if state is None:
            state = self._core(package_cpu(number), None)
            state.name = f"pkg{number}"
            self.packages = dict(sorted({**self.packages, number: state}.items()))
        return state

    def _package_interval(self, ok: list[Sample], end: float) -> None:
        """One history point per package for one interval (as the all row's, over the package's CPUs)."""
        for number, members in self._by_package(ok).items():
            state = self._package(number)
            state.spans.append((end - max(s.interval for s in members), end))
            m = self._once(self._combined, members)
            for k in SERIES:
                state.history[k].append(getattr(m, k))
            power = combined_power(members)
            temps = [s.pkg_temp_c for s in members if s.pkg_temp_c is not None]
            if temps:  # turbostat's PkgTmp where measured, else the hottest core
                power["temp_c"] = max(temps)
            for k, v in power.items():
                state.history[k].append(v)
            if self.measures_topdown:
                tma = self._once(self._combined_tma, members)
                for k in TMA_SERIES:
                    state.history[k].append(tma[k])
            if self.rate_keys:
                self._append_rates(state, self._once(self._summed, members))

    def set_dram(self, packages: list[PackageDram]) -> None:
        """The latest DRAM traffic per package (and on the all row, every package's added up)."""
        for p in packages:
            if self.track_packages or p.package in self.packages:
                self._package(p.package).dram = p
        self.total.dram = all_packages(packages)

    def _weighed(self, s: Sample) -> tuple[int | float | None, topdown.Fractions]:
        """A sample's top-down slots and fractions, worked out once per ingest (the core's row, the all row's
        history and latest, its package's: each used to compute them again)."""
        known = self._weighings.get(id(s))
        if known is None or known[0] is not s:
            known = self._weighings[id(s)] = (s, topdown.weighed(s.topdown, s.counts))
        return known[1]

    def _apply(self, core: CoreState, s: Sample) -> None:
        if s.error is not None:
            if core.error is None:
                self.new_errors.append(s.error)
            core.error = s.error
            core.metrics = None
            core.tma = None
            return
        core.error = None  # a remote host that came back (a local sampler never recovers)
        core.latest = s
        core.spans.append((s.time - s.interval, s.time))
        for k, v in s.overflows.items():
            core.overflow_totals[k] = core.overflow_totals.get(k, 0) + v
        if s.suspect:
            if not core.suspect_count or core.metrics is not None:
                self.new_suspects.append(f"cpu {core.cpu}: {s.suspect}")
            core.suspect_count += 1
            core.metrics = None
            core.tma = None
            for k in self.series:
                core.history[k].append(None)
            return
        core.metrics = for_sample(s)
        for k in SERIES:
            core.history[k].append(getattr(core.metrics, k))
        for k, power in power_values(s).items():
            core.history[k].append(power)
        if self.rate_keys:
            self._append_rates(core, s)
        if s.topdown is not None:
            self.measures_topdown = True
            core.tma = self._weighed(s)[1]
            for k in TMA_SERIES:
                core.history[k].append(core.tma[k])

    def columns_of(self, core: CoreState, key: str, columns: int) -> Sequence[float | None]:
        """`key`'s history as `columns` cells of today's interval each, newest last (the table's sparklines,
        like the plots, against time): the history itself when every point lasted one interval."""
        if self._one_point_per_column():
            return core.history[key]
        return resample(core.history[key], core.spans, self.latest_time, self.step, columns)

    def _one_point_per_column(self) -> bool:
        step = self.step
        if step <= 0:
            return True
        if self._uniform is None or self._uniform[0] != step:  # once per ingest, not once per cell
            self._uniform = (step, one_point_per_column(self.total.spans, self.latest_time, step))
        return self._uniform[1]

    def set_tasks(self, tasks: dict[int, TopTask]) -> None:
        for cpu, core in self.cores.items():
            core.task = tasks.get(cpu)

    def series_top(self, key: str, core: CoreState | None = None) -> float:
        """The largest value in the kept history of `key`: over all cores (one scale, so cores compare by
        eye), or of the total row alone (a sum across cores would flatten every core's line)."""
        kind = 0 if core is None or core.cpu >= 0 else 1 if core is self.total else 2  # packages: their own scale
        cached = self._tops.get((key, kind))
        if cached is None:  # once per ingest, not once per cell
            if kind == 0:
                cached = max((_kept_top(c, key) for c in self.cores.values()), default=0.0)
            else:
                rows = [self.total] if kind == 1 else self.packages.values()
                cached = max((_scan_top(c.history[key])[0] for c in rows), default=0.0)
            self._tops[(key, kind)] = cached
        return cached

    def shown_top(self, key: str, core: CoreState, columns: int) -> float:
        """The scale of a `columns`-wide sparkline: the largest of the points drawn, of every core's (one scale,
        so cores compare by eye) or of the total or package rows'. A burst that scrolled out of the sparkline
        would flatten every line still shown. (When the interval changed, the cells are resampled: the whole
        kept history then, which never clips.)"""
        if not self._one_point_per_column():
            return self.series_top(key, core)
        kind = 0 if core.cpu >= 0 else 1 if core is self.total else 2
        cached = self._tops.get((key, kind, columns))
        if cached is None:  # once per ingest, not once per cell
            rows = self.cores.values() if kind == 0 else [self.total] if kind == 1 else self.packages.values()
            cached = max((_tail_top(c.history[key], columns) for c in rows), default=0.0)
            self._tops[(key, kind, columns)] = cached
        return cached

    @property
    def overflow_count(self) -> int:
        return sum(self.total.overflow_totals.values())


def _tail_top(history: deque[float | None], points: int) -> float:
    """The largest of the newest `points` points (None, 0 and NaN are no point)."""
    return max((v for v in islice(reversed(history), points) if v and v == v), default=0.0)


def _scan_top(history: deque[float | None]) -> tuple[float, int]:
    """The largest point of a history and how many points came after its newest occurrence. The series are
    never negative, so the scan skips the None (and 0) points in C."""
    top = max(filter(None, history), default=0.0)
    if not top:
        return 0.0, 0
    for age, v in enumerate(reversed(history)):
        if v == top:
            return top, age
    return top, len(history)  # a NaN top equals no point: as if about to leave, so the next call scans again


def _kept_top(core: CoreState, key: str) -> float:
    """_scan_top of a core's history, carried from the last ingest: the core's samples are numbered (seq)
    and each adds at most one point, so after one more sample only the newest point is new, and only losing
    the top off the far end needs a scan. At hundreds of CPUs a scan of every core's history per ingest was
    a good part of the live view's cost. (Samples that add no point, a failed CPU's, only age the top early:
    a scan then, never a wrong answer.)"""
    history = core.history[key]
    known = core.tops.get(key)
    if known is not None and core.seen == known[0]:
        return known[1]
    if known is not None and core.seen == known[0] + 1 and known[2] + 1 < len(history):
        _, top, age = known
        newest = history[-1]
        top, age = (newest, 0) if newest and newest > top else (top, age + 1)
    else:
        top, age = _scan_top(history)
    core.tops[key] = (core.seen, top, age)
    return top
