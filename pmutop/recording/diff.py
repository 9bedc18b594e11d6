"""`pmutop diff A B`: two recordings compared per core and per metric (medians over the run, with their
spread), as a table. The `all` row is the machine total of each interval (as the live view's `all` row).
Recordings with per-process or per-cgroup counters are also compared per command and per cgroup
(pmutop.recording.task_diff), and recordings with DRAM bandwidth per package (pmutop.recording.package_diff),
from the same single pass over each file."""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pmutop.core.errors import UsageError
from pmutop.core.sample import Sample
from pmutop.derive import topdown
from pmutop.derive.metrics import combined
from pmutop.recording.package_diff import PackageTotals, package_diff_lines
from pmutop.recording.reader import Recording
from pmutop.recording.task_diff import TaskTotals, task_diff_lines

SOFTWARE_RATES = ("context_switches", "cpu_migrations", "page_faults")  # the kernel's software events

# (field of the flat record, title, scale for display, format)
DIFF_METRICS: tuple[tuple[str, str, float, str], ...] = (
    ("ipc", "IPC", 1.0, ".2f"),
    ("ghz", "GHz", 1.0, ".2f"),
    ("util", "util%", 100.0, ".1f"),
    ("llc_mpki", "LLC MPKI", 1.0, ".2f"),
    ("branch_miss_ratio", "brmiss%", 100.0, ".2f"),
    ("tma_retiring", "Retiring%", 100.0, ".1f"),
    ("tma_bad_speculation", "BadSpec%", 100.0, ".1f"),
    ("tma_frontend_bound", "Frontend%", 100.0, ".1f"),
    ("tma_backend_bound", "Backend%", 100.0, ".1f"),
    ("context_switches_per_s", "Ctx sw/s", 1.0, ".0f"),
    ("cpu_migrations_per_s", "Migr/s", 1.0, ".1f"),
    ("page_faults_per_s", "Faults/s", 1.0, ".0f"),
)
ALL = "all"
NOISE_MARK = "~"


@dataclass(frozen=True)
class Spread:
    median: float
    iqr: float  # interquartile range over the intervals: how much the metric moves on its own


def _spread(values: Sequence[float]) -> Spread:
    if len(values) < 2:
        return Spread(values[0], 0.0)
    q1, q2, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return Spread(q2, q3 - q1)


def _values(samples: Iterable[Sample]) -> dict[str, Any]:
    """The compared metrics of one CPU's sample, or of an interval's machine total (sums of counts over the
    CPUs, as the live `all` row): one formula for both, and none of a batch record's other fields."""
    ok = [s for s in samples if not s.error and not s.suspect]
    if not ok:
        return {}
    out: dict[str, Any] = dict(combined(ok).as_dict())
    out.update(topdown.combine((s.topdown, s.counts) for s in ok))
    for key in SOFTWARE_RATES:
        rates = [s.counts[key] / s.interval for s in ok if key in s.counts and s.interval > 0]
        if rates:
            out[f"{key}_per_s"] = sum(rates)
    return out


@dataclass(frozen=True)
class Summary:
    """One recording read once: the spreads, and how many intervals it holds."""

    spreads: dict[str, dict[str, Spread]]
    intervals: int
    tasks: TaskTotals = field(default_factory=TaskTotals)  # its per-process and per-cgroup readings, summed
    packages: PackageTotals = field(default_factory=PackageTotals)  # its DRAM readings, summed per package


def summarize(rec: Recording) -> Summary:
    """One streaming pass over the recording. Medians need every value, so each row keeps one float array
    per metric (8 bytes a value: a 400 MB recording of 8 CPUs holds ~40 MB of them), not the samples."""
    values: dict[str, dict[str, array[float]]] = {}
    intervals = 0
    tasks = TaskTotals()
    packages = PackageTotals()

    def add(row: str, r: dict[str, Any]) -> None:
        per = values.setdefault(row, {})
        for key, *_ in DIFF_METRICS:
            if r.get(key) is not None:
                per.setdefault(key, array("d")).append(float(r[key]))

    for interval in rec.iter_recorded_intervals():
        intervals += 1
        group = [s for s, _ in interval.samples]
        for s in group:
            add(str(s.cpu), _values((s,)))
        add(ALL, _values(group))
        if interval.snapshot is not None:
            snapshot = interval.snapshot.snapshot
            # The seconds its readings cover (the counters' own interval), else the CPUs'.
            spans = [r.interval for r in snapshot.tasks] + [c.interval for c in snapshot.cgroups]
            spans = spans or [s.interval for s in group]
            tasks.add(snapshot, max(spans))
        for recorded in interval.packages:
            packages.add(recorded.packages)
    spreads = {row: {k: _spread(v) for k, v in per.items() if v} for row, per in values.items()}
    return Summary(spreads, intervals, tasks, packages)


def spreads(rec: Recording) -> dict[str, dict[str, Spread]]:
    """cpu (as text, plus "all") -> metric -> median and IQR over the intervals that have it (suspect samples
    left out)."""
    return summarize(rec).spreads


@dataclass
class DiffRow:
    cpu: str
    metric: str
    a: float | None
    b: float | None
    a_iqr: float | None = None
    b_iqr: float | None = None

    @property
    def change(self) -> float | None:
        """Relative change B vs A (None when either is missing or A is 0)."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return (self.b - self.a) / abs(self.a)

    @property
    def within_noise(self) -> bool:
        """The medians differ by less than the larger of the two spreads: not a change one can tell from noise."""
        if self.a is None or self.b is None:
            return False
        return abs(self.b - self.a) <= max(self.a_iqr or 0.0, self.b_iqr or 0.0)


def check_comparable(a: Recording, b: Recording) -> None:
    """A SIMULATED recording against a measured one compares nothing real: refused in one line."""
    sim_a, sim_b = a.header.mode == "SIMULATED", b.header.mode == "SIMULATED"
    if sim_a != sim_b:
        simulated, measured = (a, b) if sim_a else (b, a)
        raise UsageError(
            f"diff: {simulated.path} is SIMULATED and {measured.path} was measured ({measured.header.mode}):"
            " simulated numbers do not compare with real ones"
        )


def diff_rows(a: Recording, b: Recording) -> list[DiffRow]:
    check_comparable(a, b)
    return _rows(spreads(a), spreads(b))


def _rows(sa: dict[str, dict[str, Spread]], sb: dict[str, dict[str, Spread]]) -> list[DiffRow]:
    cpus = [*sorted({*sa, *sb} - {ALL}, key=int), ALL]
    rows = []
    for cpu in cpus:
        for key, *_ in DIFF_METRICS:
            va, vb = sa.get(cpu, {}).get(key), sb.get(cpu, {}).get(key)
            if va is not None or vb is not None:
                rows.append(
                    DiffRow(
                        cpu,
                        key,
                        None if va is None else va.median,
                        None if vb is None else vb.median,
                        None if va is None else va.iqr,
                        None if vb is None else vb.iqr,
                    )
                )
    return rows


def diff_table(a: Recording, b: Recording, width: int | None = None) -> str:
    """The comparison as text: one line per CPU and metric, the medians and IQRs of A and B and the change;
    `width`: the terminal's (long process and cgroup names are shortened to fit it)."""
    check_comparable(a, b)
    fmt = {key: (title, scale, spec) for key, title, scale, spec in DIFF_METRICS}
    sum_a, sum_b = summarize(a), summarize(b)  # one pass over each file
    rows = _rows(sum_a.spreads, sum_b.spreads)

    def cell(v: float | None, key: str) -> str:
        _, scale, spec = fmt[key]
        return "-" if v is None else format(v * scale, spec)

    ha, hb = a.header, b.header
    lines = [
        f"A: {a.path}  ({ha.host}, {ha.start_text}, {sum_a.intervals} intervals of {ha.interval:g} s)",
        f"B: {b.path}  ({hb.host}, {hb.start_text}, {sum_b.intervals} intervals of {hb.interval:g} s)",
    ]
    if "SIMULATED" in (ha.mode, hb.mode):
        lines.append("SIMULATED: a recording of the simulated PMU (synthetic numbers)")
    if set(ha.cpus) != set(hb.cpus):
        lines.append("note: the recordings cover different CPUs; only CPUs in both compare")
    lines.append(
        f"{'cpu':>4}  {'metric':<10} {'A median':>10} {'A IQR':>9} {'B median':>10} {'B IQR':>9} {'change':>8}"
    )
    for r in rows:
        ch = r.change
        change = "-" if ch is None else f"{ch * 100:+.1f}%"
        if ch is not None and r.within_noise:
            change += f" {NOISE_MARK}"
        lines.append(
            f"{r.cpu:>4}  {fmt[r.metric][0]:<10} {cell(r.a, r.metric):>10} {cell(r.a_iqr, r.metric):>9}"
            f" {cell(r.b, r.metric):>10} {cell(r.b_iqr, r.metric):>9} {change:>8}"
        )
    lines.append(
        f"IQR: interquartile range over the intervals; the all row is the machine total of each interval."
        f"  {NOISE_MARK} : the change is smaller than the spread (noise)"
    )
    lines += task_diff_lines(sum_a.tasks, sum_b.tasks, width)
    lines += package_diff_lines(sum_a.packages, sum_b.packages)
    return "\n".join(lines)
