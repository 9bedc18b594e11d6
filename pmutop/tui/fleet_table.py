"""The fleet's host table (`pmutop --prometheus`): the per-core table's logic with one row per instance.

Rows are the fleet feed's host Samples (pmutop.feeds.fleet), so Util, GHz, IPC, LLC/s, MPKI, the sparklines,
Busy% and PkgW are the per-core table's own columns over each host's summed counts. Added here: the host's CPU
count (or `lost`, `↻` after a restart), its worst core (the lowest IPC among cores more than 10% busy: the one
that hurts; an idle core's IPC says nothing), top-down level 1 (the largest category) and DRAM bandwidth where
exported. The filter adds `host~TEXT` / `host=NAME` and conditions on those columns to the usual ones.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from rich.text import Text

from pmutop.core.errors import UsageError
from pmutop.feeds.fleet import HostRow
from pmutop.tui import format as fmt
from pmutop.tui.columns import Column, columns_for, render_cell
from pmutop.tui.config import Settings
from pmutop.tui.filter import OPS, SUFFIX, RowFilter, parse_filter
from pmutop.tui.model import CoreState, ViewModel
from pmutop.tui.table_controller import CoreTable
from pmutop.tui.widgets.fast_table import FastTable

RESTARTED = "↻"
TOPDOWN_SHORT = {
    "tma_retiring": "Ret",
    "tma_bad_speculation": "Bad",
    "tma_frontend_bound": "FE",
    "tma_backend_bound": "BE",
}


def _inf(v: float | None) -> float:
    return float("-inf") if v is None else v


class HostTable(CoreTable):
    """CoreTable over host rows; `hosts` are the fleet's instances, indexed by row id."""

    def __init__(
        self,
        model: ViewModel,
        keys: list[str],
        names: dict[int, str],
        settings: Settings,
        table: Callable[[], FastTable],
        on_rows_changed: Callable[[], None],
        hosts: Sequence[HostRow],
        restarted: Callable[[HostRow], bool],
    ) -> None:
        self.hosts = hosts
        self.restarted = restarted
        super().__init__(model, keys, names, settings, table, on_rows_changed)
        self._host_columns()
        self.sort_key = settings.sort if settings.sort in self.by_key else "cpu"

    def _host_columns(self) -> None:
        """The per-core table's columns for hosts: named Host, no top task; CPUs, worst core, top-down and DRAM
        added (DRAM only when some host exports it)."""
        hosts = self.hosts
        wide = max((len(h.instance) for h in hosts), default=4) + 2
        added = {
            "cpus": Column("cpus", "CPUs", 4, 4, 1, lambda c: hosts[c.cpu].cpus if c.cpu >= 0 else float("-inf")),
            "worst": Column("worst", "Worst core", 13, 16, 2, lambda c: _inf(self._worst(c)[1])),
            "topdown": Column("topdown", "Top-down", 8, 8, 4, lambda c: _inf(_dominant(c)[1]), justify="left"),
            "dram": Column("dram", "DRAM B/s", 8, 8, 3, lambda c: _inf(self._dram(c))),
        }
        out: list[Column] = []
        for c in self.columns:
            if c.key == "task":
                continue
            out.append(replace(c, title="Host", min_width=wide, max_width=wide) if c.key == "cpu" else c)
            if c.key == "cpu":
                out.append(added["cpus"])
            if c.key == "mpki":
                out.append(added["worst"])
                if any(h.method for h in hosts):  # top-down where the hosts measure it
                    out.append(added["topdown"])
                if any(h.dram_bytes_per_s is not None for h in hosts):
                    out.append(added["dram"])
        self.columns = tuple(out)
        self.by_key = {c.key: c for c in self.columns}

    def add_power_columns(self) -> bool:
        """The per-core table's power columns, then the host columns again (and DRAM once some host has it)."""
        had_dram = "dram" in self.by_key
        if super().add_power_columns():
            self._host_columns()
            return True
        if not had_dram and any(h.dram_bytes_per_s is not None for h in self.hosts):
            self.columns = columns_for(self.keys, self.power_fields)
            self._host_columns()
            return True
        return False

    def _worst(self, core: CoreState) -> tuple[str, float | None]:
        worst = self.hosts[core.cpu].worst if core.cpu >= 0 and core.error is None else None
        return ("", None) if worst is None else (worst[0], worst[1])

    def _dram(self, core: CoreState) -> float | None:
        if core.cpu < 0:
            values = [h.dram_bytes_per_s for h in self.hosts if h.dram_bytes_per_s is not None]
            return sum(values) if values else None
        return self.hosts[core.cpu].dram_bytes_per_s if core.error is None else None

    def render(self, key: str, core: CoreState, width: int) -> Text:
        """A cell: the host columns here, the rest as the per-core table draws them."""
        host = self.hosts[core.cpu] if core.cpu >= 0 else None
        if key == "cpus":
            if host is None:  # the CPUs the all row adds up: a lost host's are not among them
                counted = sum(h.cpus for h in self.hosts if h.lost_since is None)
                return Text(str(counted).rjust(width), style="bold")
            if host.lost_since is not None:
                return Text("lost".rjust(width), style="bold red reverse")
            mark = f"{RESTARTED}{host.cpus}" if self.restarted(host) else str(host.cpus)
            return Text(mark.rjust(width), style="bold yellow" if self.restarted(host) else "")
        if key == "util" and host is not None and host.lost_since is not None:
            return Text("lost".rjust(width), style="bold red reverse")
        if key == "worst":
            cpu, ipc = self._worst(core)
            if ipc is None:
                return Text(fmt.MISSING.rjust(width), style="dim")
            return fmt.styled(f"cpu {cpu} {ipc:.2f}"[-width:].rjust(width), fmt.ipc_style(ipc))
        if key == "topdown":
            name, share = _dominant(core)
            if share is None:
                return Text(fmt.MISSING.ljust(width), style="dim")
            return Text(f"{name} {share:.0f}%".ljust(width)[:width], style="bold" if name == "BE" else "")
        if key == "dram":
            return Text(fmt.si(self._dram(core), width))
        return render_cell(key, core, self.model, width)

    def _add_row(self, row_key: str) -> None:
        core = self.core_for(row_key)
        cells = [self.render(k, core, w) for k, w in self.widths.items()]
        self._table().add_row(*cells, key=row_key)
        for k, cell in zip(self.widths, cells, strict=True):
            self._cells[(row_key, k)] = cell.plain

    def update_rows(self, rows: set[str]) -> None:
        changes = []
        for row_key in rows:
            core = self.core_for(row_key)
            for key, w in self.widths.items():
                cell = self.render(key, core, w)
                if self._cells.get((row_key, key)) != cell.plain:
                    self._cells[(row_key, key)] = cell.plain
                    changes.append((row_key, key, cell))
        self._table().set_cells(changes)


def _dominant(core: CoreState) -> tuple[str, float | None]:
    """Top-down level 1's largest category and its share in %, where the host measures top-down."""
    tma = core.tma or {}
    shares = [(v, k) for k, v in tma.items() if k in TOPDOWN_SHORT and v is not None]
    if not shares:
        return "", None
    share, key = max(shares)
    return TOPDOWN_SHORT[key], share * 100


# -- the host table's filter

_NAME_TERM = re.compile(r"^(host|instance)(=|~)(.+)$", re.I)
_HOST_CONDITION = re.compile(r"^(cpus|worst|dram)\s*(>=|<=|!=|==|=|>|<)\s*(-?[0-9]*\.?[0-9]+)\s*([kmg]?)$", re.I)


@dataclass(frozen=True)
class HostFilter:
    """Which hosts to show: `host~web` (part of the instance), `host=web1:9464` (all of it), `cpus>32`,
    `worst<0.5` (the worst core's IPC), `dram>10G`, and every term of the per-core filter (`ipc<1`, `util>50`)."""

    text: str
    hosts: Sequence[HostRow] = field(compare=False)
    names: tuple[tuple[str, str], ...] = ()  # ("=" or "~", lower-case text)
    conditions: tuple[tuple[str, str, float], ...] = ()
    rest: RowFilter | None = None

    def matches(self, core: CoreState) -> bool:
        host = self.hosts[core.cpu]
        name = host.instance.lower()
        for op, wanted in self.names:
            if (op == "=" and name != wanted) or (op == "~" and wanted not in name):
                return False
        for what, op, value in self.conditions:
            v: float | None
            if what == "cpus":
                v = host.cpus
            elif what == "worst":
                v = host.worst[1] if host.worst else None
            else:
                v = host.dram_bytes_per_s
            if v is None or not OPS[op](v, value):
                return False
        return self.rest is None or self.rest.matches(core)


def parse_host_filter(text: str, hosts: Sequence[HostRow]) -> HostFilter | None:
    """None for an empty filter; UsageError (one line) for a term that makes no sense."""
    glued = re.sub(r"\s*(>=|<=|!=|==|=|>|<|~)\s*", r"\1", text.strip())
    terms = [t for t in glued.split() if t.lower() != "and"]
    if not terms:
        return None
    names: list[tuple[str, str]] = []
    conditions: list[tuple[str, str, float]] = []
    rest: list[str] = []
    for term in terms:
        m = _NAME_TERM.match(term)
        if m:
            names.append((m.group(2), m.group(3).lower()))
            continue
        m = _HOST_CONDITION.match(term)
        if m:
            conditions.append((m.group(1).lower(), m.group(2), float(m.group(3)) * SUFFIX[m.group(4).lower()]))
            continue
        if term.lower().startswith(("host", "instance")):
            raise UsageError(f"cannot filter by {term!r}: host~TEXT (part of the name) or host=NAME")
        rest.append(term)
    base = parse_filter(" ".join(rest)) if rest else None
    return HostFilter(" ".join(terms), hosts, tuple(names), tuple(conditions), base)
