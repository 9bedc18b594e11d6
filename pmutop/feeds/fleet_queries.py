"""The PromQL of the fleet's host table: per-instance aggregates, one query per metric for the whole fleet.

One place for these strings: `pmutop --prometheus` asks them (pmutop.feeds.fleet), and the Grafana dashboard's
host table and fleet heatmap are made of the same ones (`fleet_panels`; `python -m pmutop.feeds.fleet_queries`
writes them into dashboards/grafana/pmutop.json, and a test checks the file holds exactly these).

A host's value is the sum over its CPUs of each CPU's rate (`max by (instance, cpu)` first: an exporter that
two jobs scrape is counted once), so its ratios (IPC, utilisation, MPKI) are the host's whole, not a mean of
its CPUs' ratios. `window` is a PromQL duration: pmutop's `2000ms`, or Grafana's `$__rate_interval`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pmutop.derive.prometheus_names import DRAM_BYTES, PREFIX
from pmutop.feeds.promql import DEFAULT_MATCH, restrict

HOST = ("instance",)
BUSY_CORE = 0.1  # the worst core is the lowest-IPC core among those busier than this (utilisation 0..1)
SAMPLED = PREFIX + "sampled_seconds_total"
TSC = PREFIX + "tsc_total"
CATEGORY = PREFIX + "topdown_category_slots_total"
ENERGY = PREFIX + "energy_joules_total"
DRAM = DRAM_BYTES + "_total"
GRAFANA_MATCH = DEFAULT_MATCH + '{instance=~"$instance"}'  # the dashboard's host choice, as a --match
GRAFANA_WINDOW = "$__rate_interval"


def per_cpu_rate(family: str, window: str, by: tuple[str, ...] = ("instance", "cpu")) -> str:
    """One series per CPU (`by`), an exporter scraped by two jobs counted once."""
    return f"max by ({', '.join(by)}) (rate({family}[{window}]))"


def host_rate(family: str, window: str, match: str, extra: tuple[str, ...] = ()) -> str:
    """A counter's rate summed over each instance's CPUs (and kept apart by `extra` labels)."""
    inner = per_cpu_rate(family, window, ("instance", "cpu", *extra))
    return restrict(f"sum by ({', '.join((*HOST, *extra))}) ({inner})", match)


def host_watts(window: str, match: str) -> str:
    """Package watts of each instance: the RAPL package domain's joules per second, its packages added."""
    inner = per_cpu_rate(ENERGY + '{domain="package"}', window, ("instance", "package"))
    return restrict(f"sum by (instance) ({inner})", match)


def host_dram(window: str, match: str) -> str:
    """DRAM bytes per second of each instance: every package, channel and direction (read + write)."""
    inner = per_cpu_rate(DRAM, window, ("instance", "package", "channel", "direction"))
    return restrict(f"sum by (instance) ({inner})", match)


def worst_core(window: str, match: str) -> str:
    """Each instance's worst core: the lowest IPC among its cores busier than BUSY_CORE (an idle core's IPC
    says nothing), with its `cpu` label; instances without a busy core have none."""
    ipc = f"{per_cpu_rate(PREFIX + 'instructions_total', window)} / {per_cpu_rate(PREFIX + 'cycles_total', window)}"
    util = f"{per_cpu_rate(PREFIX + 'ref_cycles_total', window)} / {per_cpu_rate(TSC, window)}"
    return restrict(f"bottomk by (instance) (1, ({ipc}) and on (instance, cpu) (({util}) > {BUSY_CORE:g}))", match)


def start_times(match: str) -> str:
    """When each instance's exporter started: a change means it restarted; none means it is lost."""
    return restrict(f"max by (instance) ({PREFIX}start_time_seconds)", match)


# -- the Grafana panels: ratios of the same sums, computed by Prometheus instead of by pmutop


def _ratio(top: str, bottom: str, factor: str = "") -> str:
    return f"{factor}({top}) / ({bottom})"


def grafana_exprs(window: str = GRAFANA_WINDOW, match: str = GRAFANA_MATCH) -> dict[str, str]:
    """The host table's columns as PromQL (refId -> expr), made of the sums pmutop asks for."""

    def rate(event: str) -> str:
        return host_rate(f"{PREFIX}{event}_total", window, match)

    tsc_hz = f"({host_rate(TSC, window, match)}) / ({host_rate(SAMPLED, window, match)})"
    return {
        "Util": _ratio(rate("ref_cycles"), host_rate(TSC, window, match), "100 * "),
        "GHz": _ratio(rate("cycles"), rate("ref_cycles"), f"{tsc_hz} / 1e9 * "),
        "IPC": _ratio(rate("instructions"), rate("cycles")),
        "MPKI": _ratio(rate("llc_misses"), rate("instructions"), "1000 * "),
        "PkgW": host_watts(window, match),
        "DRAM": host_dram(window, match),
        "Worst": worst_core(window, match),
    }


DASHBOARD = Path(__file__).resolve().parents[2] / "dashboards" / "grafana" / "pmutop.json"
FLEET_IDS = range(100, 110)  # the dashboard's fleet panels (the hand-written ones have smaller ids)
_SOURCE = {"type": "prometheus", "uid": "${datasource}"}
UNITS = {"Util": "percent", "GHz": "none", "IPC": "none", "MPKI": "none", "PkgW": "watt", "DRAM": "Bps"}


def fleet_panels(top: int) -> list[dict[str, Any]]:
    """The dashboard's fleet row, from `top` down: the host table (one row per instance, the columns of
    pmutop's host table) and the fleet heatmaps (hosts down, time across)."""
    exprs = grafana_exprs()
    table_targets = [
        {"datasource": _SOURCE, "expr": expr, "refId": ref, "instant": True, "format": "table", "range": False}
        for ref, expr in exprs.items()
    ]
    renames = {f"Value #{ref}": ref if ref != "Worst" else "Worst core IPC" for ref in exprs}
    overrides = [
        {"matcher": {"id": "byName", "options": ref}, "properties": [{"id": "unit", "value": unit}]}
        for ref, unit in UNITS.items()
    ]
    host_table = {
        "id": 101,
        "type": "table",
        "title": "Hosts (as pmutop --prometheus shows them)",
        "description": "One row per instance: every CPU's rate summed per host, then the ratios; the worst core "
        f"is the lowest-IPC core of those more than {BUSY_CORE * 100:g}% busy. Same PromQL as pmutop's host table.",
        "gridPos": {"h": 10, "w": 24, "x": 0, "y": top + 1},
        "datasource": _SOURCE,
        "targets": table_targets,
        "transformations": [
            {"id": "merge", "options": {}},
            {"id": "organize", "options": {"excludeByName": {"Time": True}, "renameByName": renames}},
        ],
        "fieldConfig": {"defaults": {"decimals": 2}, "overrides": overrides},
        "options": {"showHeader": True, "sortBy": [{"displayName": "IPC", "desc": False}]},
    }

    def heatmap(panel_id: int, ref: str, title: str, y: int, top_value: float) -> dict[str, Any]:
        return {
            "id": panel_id,
            "type": "status-history",
            "title": title,
            "description": "One row per instance (its CPUs' counts summed), time across: pmutop's fleet heatmap.",
            "gridPos": {"h": 12, "w": 24, "x": 0, "y": y},
            "datasource": _SOURCE,
            "targets": [
                {"datasource": _SOURCE, "expr": exprs[ref], "legendFormat": "{{instance}}", "refId": "A", "range": True}
            ],
            "fieldConfig": {
                "defaults": {"color": {"mode": "continuous-BlPu"}, "min": 0, "max": top_value, "decimals": 2},
                "overrides": [],
            },
            "options": {"showValue": "never", "rowHeight": 0.9, "colWidth": 1, "legend": {"showLegend": True}},
        }

    return [
        {"id": 100, "type": "row", "title": "Fleet: one row per host", "gridPos": {"h": 1, "w": 24, "x": 0, "y": top}},
        host_table,
        heatmap(102, "IPC", "IPC per host (heatmap: hosts down, time across)", top + 11, 4),
        heatmap(103, "Util", "Utilisation per host, % (heatmap: hosts down, time across)", top + 23, 100),
    ]


def with_fleet_panels(dashboard: dict[str, Any]) -> dict[str, Any]:
    """`dashboard` with its fleet panels (re)placed below the others."""
    panels = [p for p in dashboard["panels"] if p.get("id") not in FLEET_IDS]
    top = max((p["gridPos"]["y"] + p["gridPos"]["h"] for p in panels), default=0)
    return dashboard | {"panels": panels + fleet_panels(top)}


if __name__ == "__main__":  # rewrite the dashboard's fleet panels from the queries above
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DASHBOARD
    path.write_text(json.dumps(with_fleet_panels(json.loads(path.read_text())), indent=2, ensure_ascii=False) + "\n")
