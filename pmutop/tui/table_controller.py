"""The per-core table's logic: which columns fit, which rows pass the filter, their order, and which cells
changed since the last interval. The app owns the widget and the screen; this owns what the table shows.
Row keys are CPU ids as text, "pkgN" for a package's row (after the CPUs, in package order, whatever the sort
or the filter: like the all row) and TOTAL_ROW for the all row (always last)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import replace

from rich.text import Text
from textual.coordinate import Coordinate
from textual.widgets.data_table import CellDoesNotExist, ColumnKey, RowDoesNotExist, RowKey

from pmutop.tui.columns import (
    COLUMN_FORMULAS,
    CSTATE_PREFIX,
    DRAM_KEYS,
    POWER_KEYS,
    TURBOSTAT_KEYS,
    Column,
    cell_parts,
    columns_for,
    layout,
    off_by_default,
    render_cell,
)
from pmutop.tui.config import Settings
from pmutop.tui.filter import RowFilter
from pmutop.tui.model import CoreState, ViewModel
from pmutop.tui.widgets.fast_table import FastTable

TOTAL_ROW = "total"
PACKAGE_ROW = "pkg"  # + the package number: the row key and label of a package's row
SCROLLBAR = 2
POWER_CHECKS = 3  # what the power sources measure shows in the first samples


class CoreTable:
    """State and sync of the table widget `table()` returns. `on_rows_changed` is called when rows were
    added or removed (the app fits the layout to the new height)."""

    def __init__(
        self,
        model: ViewModel,
        keys: list[str],
        names: dict[int, str],
        settings: Settings,
        table: Callable[[], FastTable],
        on_rows_changed: Callable[[], None],
        dram: bool = False,
    ) -> None:
        """`dram`: a DRAM bandwidth source measures this run: its columns where there are several packages (on one,
        the header's DRAM line says it all)."""
        self.model = model
        self.dram = dram
        self.keys = keys
        self._table = table
        self._on_rows_changed = on_rows_changed
        self.power_fields: frozenset[str] = frozenset()  # turbostat-style fields the samples carry
        self._power_checks = 0
        # Rows named "host:cpu" (a remote or fleet feed): the first column as wide as the longest name.
        self.name_width = max(len(n) for n in names.values()) + 2 if names else 0
        self.columns = self._named(columns_for(keys, dram=dram))
        self.by_key = {c.key: c for c in self.columns}
        # A remote feed's rows are labelled "host:cpu": sorting reads the label back to the row's key.
        self.label_keys = {label: str(cpu) for cpu, label in names.items()}
        self.sort_key = settings.sort if settings.sort in self.by_key else "cpu"
        if self.by_key[self.sort_key].sort_value is None:
            self.sort_key = "cpu"
        self.reverse = settings.reverse
        self.hidden = {k for k in settings.hidden_columns if k in self.by_key and k != "cpu"}
        self.turned_on = set(settings.shown_columns)  # columns off by default chosen with `c` (may come later)
        self.widths: dict[str, int] = {}
        self._width: int | None = None  # the width the columns were built for
        self._per_package = False  # the columns were built for several packages (the DRAM columns)
        self.dropped = 0  # columns that do not fit the width (the "+N columns" marker)
        self.row_filter: RowFilter | None = None
        self.shown_rows: list[str] = []  # row keys in the table, in display order
        self._cells: dict[tuple[str, str], str] = {}  # (row, column) -> plain text shown
        self.stale: set[str] = set()  # rows off screen whose cells were not refreshed

    def core_for(self, row_key: str) -> CoreState:
        if row_key == TOTAL_ROW:
            return self.model.total
        if row_key.startswith(PACKAGE_ROW):
            return self.model.packages[int(row_key[len(PACKAGE_ROW) :])]
        return self.model.cores[int(row_key)]

    def several_packages(self) -> bool:
        return len(self.model.packages) > 1

    def package_rows(self) -> list[str]:
        """The package rows' keys, in package order: none on a single socket (the row would repeat the all row)."""
        if not self.several_packages():
            return []
        return [f"{PACKAGE_ROW}{n}" for n in self.model.packages]

    def cpu_rows_shown(self) -> int:
        return sum(1 for r in self.shown_rows if r != TOTAL_ROW and not r.startswith(PACKAGE_ROW))

    def _wanted_rows(self) -> list[str]:
        """Row keys that pass the filter, in CPU order; the package rows, then the all row, last (never
        filtered: they sum their CPUs, whatever the filter shows)."""
        f = self.row_filter
        rows = [str(cpu) for cpu, core in self.model.cores.items() if f is None or f.matches(core)]
        return [*rows, *self.package_rows(), TOTAL_ROW]

    def _column_label(self, key: str) -> Text:
        col = self.by_key[key]
        title = col.title + (("▼" if self.reverse else "▲") if key == self.sort_key else "")
        return Text(title, justify=col.justify)  # type: ignore[arg-type]

    def sort_title(self) -> str:
        title = self.by_key[self.sort_key].title
        return title if self.sort_key in self.widths else title + " (hidden column)"

    # -- columns and rows

    def build(self, width: int, force: bool = False) -> bool:
        """(Re)create the columns for this width; rows keep their keys. On start, resize, column choice.
        True when the table was rebuilt."""
        self._width, self._per_package = width, self.several_packages()
        # DRAM figures are a package's: with one package, a column blank on every CPU row says nothing the header's
        # DRAM line does not.
        chosen = tuple(c for c in self.columns if self.wanted(c.key) and (self._per_package or c.key not in DRAM_KEYS))
        widths = layout(width - SCROLLBAR, chosen)
        self.dropped = len(chosen) - len(widths)
        if widths == self.widths and not force:
            return False
        table = self._table()
        cursor_row = self.cursor_row_key()
        self.widths = widths
        self._cells.clear()
        table.clear(columns=True)
        for key, w in widths.items():
            table.add_column(self._column_label(key), width=w, key=key)
        self.shown_rows = []
        self.sync_rows()
        self.move_cursor_to(cursor_row)
        return True

    def _add_row(self, row_key: str) -> None:
        core = self.core_for(row_key)
        cells = [render_cell(k, core, self.model, w) for k, w in self.widths.items()]
        self._table().add_row(*cells, key=row_key)
        for k, cell in zip(self.widths, cells, strict=True):
            self._cells[(row_key, k)] = cell.plain

    def sync_rows(self) -> bool:
        """Add and remove rows so the table holds exactly the filtered rows, then order them. True when
        the set of rows changed."""
        if self.dram and self._width is not None and self._per_package != self.several_packages():
            self.build(self._width, force=True)  # a second package came: its DRAM columns, then the rows
            return True
        wanted = self._wanted_rows()
        have = set(self.shown_rows)
        changed = set(wanted) != have
        if changed:
            table = self._table()
            for row_key in have - set(wanted):
                with contextlib.suppress(RowDoesNotExist):
                    table.remove_row(row_key)
                for k in self.widths:
                    self._cells.pop((row_key, k), None)
            for row_key in wanted:
                if row_key not in have:
                    self._add_row(row_key)
            self.shown_rows = [r for r in self.shown_rows if r in wanted] + [r for r in wanted if r not in have]
            self._on_rows_changed()
        self.sort(force=changed)
        return changed

    def add_power_columns(self) -> bool:
        """Busy%, BzyMHz, °C and PkgW columns for the fields some CPU's samples measure (looked for in the
        first few updates). True when the table was rebuilt with new columns."""
        if self._power_checks >= POWER_CHECKS:
            return False
        self._power_checks += 1
        fields: set[str] = set()
        for core in self.model.cores.values():
            if core.latest is not None:
                fields.update(core.latest.power_src)
                fields.update(CSTATE_PREFIX + name for name in core.latest.cstates)
        if "energy_j" in fields or any(f.startswith("energy") for f in fields):
            fields.add("pkg_watts")
        if {"busy", "bzy_mhz"} <= fields:
            fields.add("avg_mhz")
        measured = frozenset(f for f in fields if f in POWER_KEYS or f in TURBOSTAT_KEYS or f.startswith(CSTATE_PREFIX))
        if measured <= self.power_fields:
            return False
        self.power_fields = measured | self.power_fields
        self.columns = self._named(columns_for(self.keys, self.power_fields, self.dram))
        self.by_key = {c.key: c for c in self.columns}
        return True

    def _named(self, columns: tuple[Column, ...]) -> tuple[Column, ...]:
        if not self.name_width:
            return columns
        wide = self.name_width
        return tuple(replace(c, min_width=wide, max_width=wide) if c.key == "cpu" else c for c in columns)

    def choose_columns(self, shown: list[str]) -> None:
        self.hidden = {
            c.key for c in self.columns if c.key not in shown and c.key != "cpu" and not off_by_default(c.key)
        }
        self.turned_on = {k for k in shown if off_by_default(k)}

    def wanted(self, key: str) -> bool:
        """Chosen to be shown (when it fits): not turned off, and turned on if it is off by default."""
        return key in self.turned_on if off_by_default(key) else key not in self.hidden

    def column_settings(self) -> dict[str, list[str]]:
        return {"hidden_columns": sorted(self.hidden), "shown_columns": sorted(self.turned_on)}

    def shown_formulas(self) -> list[tuple[str, str]]:
        """The formulas behind the columns this run fills (util from the kernel when no ref cycles)."""
        out = []
        for c in self.columns:
            formula = COLUMN_FORMULAS.get(c.key)
            if c.key == "util" and "ref_cycles" not in self.keys:
                formula = "100 × busy / total from the kernel's per-CPU times (/proc/stat)"
            if c.key.startswith("ev:"):
                formula = f"{c.key[3:]} / interval seconds"
            if c.key.startswith(CSTATE_PREFIX):
                formula = f"% of the interval in idle state {c.key[len(CSTATE_PREFIX) :]} (turbostat)"
            if formula:
                out.append((c.title, formula))
        if "ref_cycles" in self.keys:
            out.append(("TSC Hz", "TSC ticks / wall seconds since the start"))
        return out

    # -- cells

    def visible_rows(self) -> set[str]:
        """Row keys on screen now (with a row of margin): only these are re-rendered each interval."""
        table = self._table()
        if not table.size.height:  # not laid out yet: all of them
            return set(self.shown_rows)
        first = int(table.scroll_y)
        last = first + table.size.height + 1
        return set(self.rows_in_order()[max(0, first - 1) : last])

    def rows_in_order(self) -> list[str]:
        return [str(r.key.value) for r in self._table().ordered_rows]

    def update_rows(self, rows: set[str]) -> None:
        changes = []
        cells, model = self._cells, self.model
        for row_key in rows:
            core = self.core_for(row_key)
            for key, w in self.widths.items():
                plain, style = cell_parts(key, core, model, w)
                if cells.get((row_key, key)) != plain:  # a Text only for a cell that changed
                    cells[(row_key, key)] = plain
                    changes.append((row_key, key, Text(plain, style=style)))
        self._table().set_cells(changes)

    def take_visible_stale(self) -> set[str]:
        """The stale rows now on screen, no longer stale once taken (the caller updates them)."""
        visible = self.visible_rows() & self.stale
        self.stale -= visible
        return visible

    def show_update(self, changed: bool) -> None:
        """One interval on the table: rows in or out of the filter, the order, the cells on screen; the
        rows off screen wait (stale) until scrolled into view."""
        packages = self.package_rows()
        new_packages = any(r not in self.shown_rows for r in packages)  # the first samples name them
        rows_changed = self.sync_rows() if (changed and (self.row_filter is not None or new_packages)) else False
        if changed and not rows_changed:
            self.sort()
        visible = self.visible_rows()
        self.stale = (self.stale | set(self.shown_rows)) - visible
        self.update_rows(visible)

    def hidden_update(self) -> None:
        """An interval while another view hides the table: every row waits."""
        self.stale = set(self.shown_rows)

    def apply_filter(self) -> None:
        self.sync_rows()
        self.update_rows(self.visible_rows())

    # -- sorting and the cursor

    def cursor_row_key(self) -> str | None:
        table = self._table()
        if not table.row_count:
            return None
        try:
            return table.coordinate_to_cell_key(Coordinate(table.cursor_row, 0)).row_key.value
        except CellDoesNotExist:
            return None

    def move_cursor_to(self, row_key: str | None) -> None:
        if row_key is None:
            return
        table = self._table()
        with contextlib.suppress(RowDoesNotExist):
            table.move_cursor(row=table.get_row_index(RowKey(row_key)), animate=False)

    def update_dram_rows(self, hidden: bool = False) -> None:
        """New DRAM figures: the package rows and the all row, where on screen (the others wait, stale; all
        of them while another view hides the table)."""
        if not hidden and any(r not in self.shown_rows for r in self.package_rows()):
            self.sync_rows()  # a package only the DRAM figures name (its CPUs not among those counted)
        rows = {r for r in self.shown_rows if r == TOTAL_ROW or r.startswith(PACKAGE_ROW)}
        visible = set() if hidden else self.visible_rows() & rows
        self.stale |= rows - visible
        self.update_rows(visible)

    def _order(self) -> list[str]:
        """Row keys in the order the sort asks for; the package rows, then the all row, always last."""
        col = self.by_key[self.sort_key]
        cores = self.model.cores
        packages = [r for r in self.shown_rows if r.startswith(PACKAGE_ROW)]
        rows = [r for r in self.shown_rows if r != TOTAL_ROW and not r.startswith(PACKAGE_ROW)]
        if col.sort_value is None or col.key == "cpu":
            ordered = sorted(rows, key=int, reverse=self.reverse)
        else:
            value = col.sort_value
            # Missing values (-inf) go last whichever way; ties keep CPU order.
            ordered = sorted(rows, key=lambda r: (value(cores[int(r)]), -int(r)), reverse=True)
            if not self.reverse:
                ordered.reverse()
        return [*ordered, *sorted(packages, key=lambda r: int(r[len(PACKAGE_ROW) :])), TOTAL_ROW]

    def sort(self, force: bool = False) -> None:
        """Reorder the table only when the order changed (dolphie's habit: most intervals it does not)."""
        order = self._order()
        if not force and order == self.rows_in_order():
            return
        rank = {r: i for i, r in enumerate(order)}
        cursor_row = self.cursor_row_key()
        self._table().sort(key=lambda row: rank.get(row_key_of(row, self.label_keys), len(rank)))
        self.move_cursor_to(cursor_row)

    def set_sort(self, key: str, reverse: bool) -> None:
        self.sort_key, self.reverse = key, reverse
        table = self._table()
        for k in self.widths:
            table.columns[ColumnKey(k)].label = self._column_label(k)
        table.refresh()
        self.sort(force=True)

    def sortable(self, key: str) -> bool:
        column = self.by_key.get(key)
        return column is not None and column.sort_value is not None

    def visible_sortable(self) -> list[str]:
        """Sortable columns on screen: `s`, `<`, `>` and F6 never pick a hidden one."""
        return [k for k in self.widths if self.by_key[k].sort_value is not None]

    def sort_step(self, step: int) -> str:
        """The sortable column `step` places from the current one."""
        keys = self.visible_sortable()
        i = keys.index(self.sort_key) if self.sort_key in keys else -1 if step > 0 else 0
        return keys[(i + step) % len(keys)]


def row_key_of(row: object, label_keys: dict[str, str] | None = None) -> str:
    """DataTable.sort passes the row's cells: the first is the CPU label ("3 P", "all", a remote "host:3"),
    read back to the row key (`label_keys`: label -> key, for labels that are not the CPU number)."""
    cell = row[0] if isinstance(row, (list, tuple)) else row
    text = cell.plain if isinstance(cell, Text) else str(cell)
    label = text.split()[0] if text.strip() else TOTAL_ROW
    if label == "all":
        return TOTAL_ROW
    return (label_keys or {}).get(label, label)
