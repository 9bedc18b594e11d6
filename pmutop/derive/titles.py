"""What each column of the per-CPU table is called and which counted events it is made of: one naming for the
live view and the batch table, so a column reads the same in both."""

from __future__ import annotations

from pmutop.derive.records import extra_events

TITLES: dict[str, str] = {
    "cpu": "CPU",
    "util": "Util%",
    "ghz": "GHz",
    "ipc": "IPC",
    "ipc_hist": "IPC hist",
    "llc_per_s": "LLC miss/s",
    "mpki": "MPKI",
    "llc_ratio": "LLC miss%",
    "llc_hist": "LLC/s hist",
    "br_ratio": "Br miss%",
    "task": "Top task",
    # Beside the counters (pmutop.probes.power), shown for the fields some source measures.
    "busy": "Busy%",
    "bzy_mhz": "BzyMHz",
    "temp_c": "°C",
    "pkg_watts": "PkgW",
}
# The derived metric (pmutop.derive.metrics.CoreMetrics field) each metric column shows.
METRIC_OF: dict[str, str] = {
    "util": "util",
    "ghz": "ghz",
    "ipc": "ipc",
    "llc_per_s": "llc_misses_per_s",
    "mpki": "llc_mpki",
    "llc_ratio": "llc_miss_ratio",
    "br_ratio": "branch_miss_ratio",
}
# Event keys a column needs: it is shown only when all are counted (Util% also comes from the kernel's CPU times).
NEEDS: dict[str, tuple[str, ...]] = {
    "util": (),
    "ghz": ("cycles", "ref_cycles"),
    "ipc": ("instructions", "cycles"),
    "ipc_hist": ("instructions", "cycles"),
    "llc_per_s": ("llc_misses",),
    "mpki": ("llc_misses", "instructions"),
    "llc_ratio": ("llc_misses", "llc_references"),
    "llc_hist": ("llc_misses",),
    "br_ratio": ("branch_misses", "branches"),
}
# Every counted event a column is computed from (an estimated one makes the cell an estimate).
INPUTS: dict[str, tuple[str, ...]] = NEEDS | {"util": ("ref_cycles",)}


def metric_columns(keys: list[str]) -> list[str]:
    """The metric columns (METRIC_OF, in order) that a run counting `keys` can fill."""
    counted = set(keys)
    return [c for c in METRIC_OF if set(NEEDS[c]) <= counted]


def rate_events(keys: list[str], shown: list[str]) -> list[str]:
    """Counted events shown as their own per-second rate: those no shown column is computed from (an event
    with no derived column, e.g. `branches` without `branch-misses`, or a raw or Intel event), so every counted
    event appears somewhere. Issue slots and top-down categories appear as the top-down fractions instead."""
    covered = {k for c in shown for k in INPUTS.get(c, ())}
    extras = set(extra_events(keys))
    return [k for k in keys if k in extras or (k not in covered and k in _STANDARD)]


_STANDARD = frozenset(k for needs in NEEDS.values() for k in needs)
