"""`pmutop diff A B` for recordings with per-process and per-cgroup counters: processes compared by command
(comm: PIDs differ between two runs, the program does not) and cgroups by path (shown by the names the live view
gives them), over each whole recording.

Each value is one ratio of sums over the recording (all processes of the command, every interval): util is the
CPUs the command used on average (Σ task-clock / the recorded seconds), IPC Σ instructions / Σ cycles, GHz
Σ cycles / Σ task-clock, LLC MPKI 1000 × Σ LLC misses / Σ instructions; so a command's busy intervals weigh
as much as they ran, as `perf stat` totals do."""

from __future__ import annotations

from dataclasses import dataclass, field

from pmutop.core.task_reading import CgroupReading, TaskReading, TaskSnapshot

# (field, title, scale for display, format)
TASK_DIFF_METRICS: tuple[tuple[str, str, float, str], ...] = (
    ("cpu_seconds", "CPU s", 1.0, ".2f"),
    ("util", "util%", 100.0, ".1f"),
    ("ipc", "IPC", 1.0, ".2f"),
    ("ghz", "GHz", 1.0, ".2f"),
    ("llc_mpki", "LLC MPKI", 1.0, ".2f"),
    ("context_switches_per_s", "Ctx sw/s", 1.0, ".0f"),
)
MAX_ROWS = 30  # commands (and cgroups) shown, busiest first: a recording of many short jobs stays readable
_VALUES_WIDTH = 43  # what follows a row's name: "  metric      A      B  change"
_NAME_MIN = 12  # a name column narrower than this says too little: the line runs over instead


@dataclass
class GroupTotals:
    """The sums of one command's (or cgroup's) readings over a recording."""

    counts: dict[str, int] = field(default_factory=dict)
    processes: set[int] = field(default_factory=set)
    estimate: bool = False

    def add(self, r: TaskReading | CgroupReading) -> None:
        for k, v in r.counts.items():
            self.counts[k] = self.counts.get(k, 0) + v
        self.estimate = self.estimate or r.estimate

    def values(self, seconds: float) -> dict[str, float | None]:
        c = self.counts

        def ratio(num: str, den: str, scale: float = 1.0) -> float | None:
            return scale * c[num] / c[den] if num in c and c.get(den) else None

        clock = c.get("task_clock")
        cs = c.get("context_switches")
        return {
            "cpu_seconds": None if clock is None else clock / 1e9,
            "util": None if clock is None or seconds <= 0 else clock / 1e9 / seconds,
            "ipc": ratio("instructions", "cycles"),
            "ghz": ratio("cycles", "task_clock"),
            "llc_mpki": ratio("llc_misses", "instructions", 1000),
            "context_switches_per_s": None if cs is None or seconds <= 0 else cs / seconds,
        }


@dataclass
class TaskTotals:
    """A recording's snapshots summed per command and per cgroup path; `seconds`: the time they cover."""

    commands: dict[str, GroupTotals] = field(default_factory=dict)
    cgroups: dict[str, GroupTotals] = field(default_factory=dict)
    cgroup_names: dict[str, str] = field(default_factory=dict)  # path -> how users know it (the live view's)
    seconds: float = 0.0
    snapshots: int = 0

    def add(self, snapshot: TaskSnapshot, seconds: float) -> None:
        self.snapshots += 1
        self.seconds += seconds
        for t in snapshot.tasks:
            if t.no_permission:
                continue
            group = self.commands.setdefault(t.comm, GroupTotals())
            group.add(t)
            group.processes.add(t.pid)
        for c in snapshot.cgroups:
            if not c.no_permission:
                self.cgroups.setdefault(c.path, GroupTotals()).add(c)
                if c.name:
                    self.cgroup_names[c.path] = c.name


@dataclass
class GroupRow:
    """One command's (or cgroup's) metric in A and B."""

    name: str
    metric: str
    a: float | None
    b: float | None

    @property
    def change(self) -> float | None:
        if self.a is None or self.b is None or self.a == 0:
            return None
        return (self.b - self.a) / abs(self.a)


def group_rows(
    a: dict[str, GroupTotals],
    sa: float,
    b: dict[str, GroupTotals],
    sb: float,
    labels: dict[str, str] | None = None,
) -> tuple[list[GroupRow], int]:
    """Rows of the MAX_ROWS busiest names (by CPU time in A and B together), each shown as `labels` says (else
    as itself); and how many names were left out."""

    def busy(name: str) -> int:
        return sum(side[name].counts.get("task_clock", 0) for side in (a, b) if name in side)

    names = sorted({*a, *b}, key=lambda n: (-busy(n), n))
    rows = []
    for name in names[:MAX_ROWS]:
        va = a[name].values(sa) if name in a else {}
        vb = b[name].values(sb) if name in b else {}
        estimate = any(side[name].estimate for side in (a, b) if name in side)
        label = (labels or {}).get(name, name) + (" (est.)" if estimate else "")
        for key, *_ in TASK_DIFF_METRICS:
            if va.get(key) is not None or vb.get(key) is not None:
                rows.append(GroupRow(label, key, va.get(key), vb.get(key)))
    return rows, max(0, len(names) - MAX_ROWS)


def cgroup_labels(a: TaskTotals, b: TaskTotals) -> dict[str, str]:
    """Each cgroup path as the live view names it ("docker shop-api", "pod analytics/stream-0"); the path where
    two cgroups share a name (two "app.service" in different slices), so no two rows read alike."""
    names = {path: b.cgroup_names.get(path) or a.cgroup_names.get(path) or path for path in {*a.cgroups, *b.cgroups}}
    seen: dict[str, int] = {}
    for name in names.values():
        seen[name] = seen.get(name, 0) + 1
    return {path: name if seen[name] == 1 else path for path, name in names.items()}


def _fit(text: str, width: int) -> str:
    """`text` in `width` characters: a path keeps its end (the cgroup itself), a name its start."""
    if len(text) <= width:
        return text
    if text.startswith("/"):
        return "…" + text[len(text) - width + 1 :]
    return text[: width - 1] + "…"


def task_diff_lines(a: TaskTotals, b: TaskTotals, width: int | None = None) -> list[str]:
    """The processes-by-command and cgroups-by-name sections of `pmutop diff` (none when neither recording
    holds per-process or per-cgroup readings); `width`: the terminal's, long names are shortened to fit it."""
    if not (a.snapshots or b.snapshots):
        return []
    fmt = {key: (title, scale, spec) for key, title, scale, spec in TASK_DIFF_METRICS}

    def cell(v: float | None, key: str) -> str:
        _, scale, spec = fmt[key]
        return "-" if v is None else format(v * scale, spec)

    lines: list[str] = []
    for what, title, sa, sb, labels in (
        ("command", "processes by command", a.commands, b.commands, None),
        ("cgroup", "cgroups by name", a.cgroups, b.cgroups, cgroup_labels(a, b)),
    ):
        rows, left_out = group_rows(sa, a.seconds, sb, b.seconds, labels)
        if not rows:
            continue
        lines.append("")
        lines.append(f"{title} (over each whole recording: {a.seconds:.1f} s in A, {b.seconds:.1f} s in B)")
        name_width = max(len(what), *(len(r.name) for r in rows))
        if width is not None:
            name_width = min(name_width, max(_NAME_MIN, width - _VALUES_WIDTH))
        lines.append(f"{what:<{name_width}}  {'metric':<10} {'A':>10} {'B':>10} {'change':>8}")
        for r in rows:
            change = "-" if r.change is None else f"{r.change * 100:+.1f}%"
            name = _fit(r.name, name_width)
            lines.append(
                f"{name:<{name_width}}  {fmt[r.metric][0]:<10} {cell(r.a, r.metric):>10} {cell(r.b, r.metric):>10}"
                f" {change:>8}"
            )
        if left_out:
            lines.append(f"({left_out} more {what}s, less busy, not shown)")
    if any(r.estimate for side in (a, b) for group in (side.commands, side.cgroups) for r in group.values()):
        lines.append("est.: estimated from the cores' counts (msr backend), not per-process counters")
    # Two short lines: the footer fits an 80-column terminal like the rows above it.
    lines.append("util%: CPUs used on average over the recording;")
    lines.append("IPC, GHz, LLC MPKI: ratios of the sums over the recording")
    return lines
