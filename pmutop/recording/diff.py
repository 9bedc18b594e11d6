"""`pmutop diff A B`: two recordings compared per core and per metric (medians over the run), as a table."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from pmutop.derive.records import record
from pmutop.recording.reader import Recording

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
)
ALL = "all"


def medians(rec: Recording) -> dict[str, dict[str, float]]:
    """cpu (as text, plus "all") -> metric -> median over the samples that have it (suspect ones left out)."""
    values: dict[str, dict[str, list[float]]] = {}
    for s in rec.samples:
        if s.error or s.suspect:
            continue
        r = record(s, rec.header.mode)
        for row in (str(s.cpu), ALL):
            per = values.setdefault(row, {})
            for key, *_ in DIFF_METRICS:
                if r.get(key) is not None:
                    per.setdefault(key, []).append(float(r[key]))
    return {row: {k: statistics.median(v) for k, v in per.items() if v} for row, per in values.items()}


@dataclass
class DiffRow:
    cpu: str
    metric: str
    a: float | None
    b: float | None

    @property
    def change(self) -> float | None:
        """Relative change B vs A (None when either is missing or A is 0)."""
        if self.a is None or self.b is None or self.a == 0:
            return None
        return (self.b - self.a) / abs(self.a)


def diff_rows(a: Recording, b: Recording) -> list[DiffRow]:
    ma, mb = medians(a), medians(b)
    cpus = [*sorted({*ma, *mb} - {ALL}, key=int), ALL]
    rows = []
    for cpu in cpus:
        for key, *_ in DIFF_METRICS:
            va, vb = ma.get(cpu, {}).get(key), mb.get(cpu, {}).get(key)
            if va is not None or vb is not None:
                rows.append(DiffRow(cpu, key, va, vb))
    return rows


def diff_table(a: Recording, b: Recording) -> str:
    """The comparison as text: one line per CPU and metric, the medians of A and B and the change."""
    fmt = {key: (title, scale, spec) for key, title, scale, spec in DIFF_METRICS}

    def cell(v: float | None, key: str) -> str:
        _, scale, spec = fmt[key]
        return "-" if v is None else format(v * scale, spec)

    ha, hb = a.header, b.header
    lines = [
        f"A: {a.path}  ({ha.host}, {ha.start_text}, {len(a.intervals())} intervals of {ha.interval:g} s)",
        f"B: {b.path}  ({hb.host}, {hb.start_text}, {len(b.intervals())} intervals of {hb.interval:g} s)",
    ]
    if "SIMULATED" in (ha.mode, hb.mode):
        lines.append("SIMULATED: a recording of the simulated PMU (synthetic numbers)")
    if set(ha.cpus) != set(hb.cpus):
        lines.append("note: the recordings cover different CPUs; only CPUs in both compare")
    lines.append(f"{'cpu':>4}  {'metric':<10} {'A median':>10} {'B median':>10} {'change':>8}")
    for r in diff_rows(a, b):
        ch = r.change
        change = "-" if ch is None else f"{ch * 100:+.1f}%"
        a, b = cell(r.a, r.metric), cell(r.b, r.metric)
        lines.append(f"{r.cpu:>4}  {fmt[r.metric][0]:<10} {a:>10} {b:>10} {change:>8}")
    return "\n".join(lines)
