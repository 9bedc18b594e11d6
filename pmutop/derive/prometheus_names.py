"""The names pmutop's metrics have in Prometheus: written by `pmutop serve`, read back by `--connect`."""

from __future__ import annotations

import re

from pmutop.derive.records import STANDARD_EVENTS

PREFIX = "pmutop_"
# The architectural events keep fixed names (the dashboard and the README's PromQL use them).
NAMED = STANDARD_EVENTS  # the inputs of the derived metrics (pmutop.derive.records)
# PERF_METRICS keys (slots already): one family with a category label, so top-down sums in PromQL.
TOPDOWN_SLOTS = "slots"
TOPDOWN_CATEGORIES: dict[str, tuple[str, str]] = {  # count key -> (category, level)
    "topdown_retiring": ("retiring", "1"),
    "topdown_bad_spec": ("bad_speculation", "1"),
    "topdown_fe_bound": ("frontend_bound", "1"),
    "topdown_be_bound": ("backend_bound", "1"),
    "topdown_heavy_ops": ("heavy_operations", "2"),
    "topdown_br_mispredict": ("branch_mispredicts", "2"),
    "topdown_fetch_lat": ("fetch_latency", "2"),
    "topdown_mem_bound": ("memory_bound", "2"),
}
# Names the exporter uses itself: an event key that would collide gets an `event_` prefix.
RESERVED = {"tsc", "counter_overflows", "event_counted_seconds", "sampled_seconds", "suspect_samples", "energy_joules"}
# DRAM bandwidth (`pmutop serve` with a memory-controller source): per package and channel, never per CPU.
DRAM_BYTES = PREFIX + "dram_bytes"  # counter {package, channel, direction}: exposed as ..._total
DRAM_PEAK = PREFIX + "dram_peak_bytes_per_second"  # gauge {package}, where the memory speed is known
DRAM_SATURATED = PREFIX + "dram_saturated_intervals"  # counter {package, channel}: its bytes then a lower bound
DRAM_SOURCE = PREFIX + "dram_source_info"  # gauge {source}: uncore or simulated
RESERVED |= {name.removeprefix(PREFIX) for name in (DRAM_BYTES, DRAM_PEAK, DRAM_SATURATED, DRAM_SOURCE)}


def metric_name(key: str) -> str:
    """The counter family (without _total) a count key is exported as."""
    if key == TOPDOWN_SLOTS:
        return PREFIX + "topdown_slots"
    if key in TOPDOWN_CATEGORIES:
        return PREFIX + "topdown_category_slots"
    safe = re.sub(r"[^a-zA-Z0-9_]", "_", key).lower()
    if key not in NAMED and (safe in RESERVED or safe.startswith("topdown_category")):
        safe = "event_" + safe
    return PREFIX + safe


# Per-cgroup counters (`pmutop serve --cgroups/--cgroup`): one family per event, labelled by cgroup path and name.
# task_clock is the time the cgroup's tasks ran: exported in seconds, the base unit, with the name Prometheus'
# naming rules and every other exporter give CPU time (process_cpu_seconds_total, cAdvisor's
# container_cpu_usage_seconds_total): https://prometheus.io/docs/practices/naming/ ("use base units",
# "_total" for counters, "_seconds" for time). Per-process series are never exported: a PID is a label value
# without bound (every short-lived process a new series, kept by Prometheus for its whole retention).
CGROUP_PREFIX = PREFIX + "cgroup_"
CGROUP_SECONDS = {"task_clock": 1e9}  # count key -> its units per second (the kernel counts task-clock in ns)
CGROUP_RESERVED = {"counted_seconds", "sampled_seconds", "processes", "counters_info"}


def cgroup_metric_name(key: str) -> str:
    """The counter family (without _total) a cgroup's count key is exported as."""
    if key == "task_clock":
        return CGROUP_PREFIX + "cpu_seconds"
    safe = re.sub(r"[^a-zA-Z0-9_]", "_", key).lower()
    if safe in CGROUP_RESERVED or safe == "cpu_seconds":
        safe = "event_" + safe
    return CGROUP_PREFIX + safe
