"""The live view's feed over a fleet (`pmutop --prometheus URL`): one row per instance, per-CPU only on demand.

A per-CPU round of 1,000 hosts x 64 CPUs is 64,000 series a query, seconds of parsing that hold the GIL
(pmutop.feeds.prometheus, which batch keeps: its records are per CPU). The host table needs per-host numbers
only, so each round asks for every counter's rate summed by instance (pmutop.feeds.fleet_queries): 1,000
series a metric, still one query per metric for the whole fleet. Each instance becomes one Sample (CPU id =
the host's index, labelled with its instance), so the live view's table, sorting, filter, plots and heatmap
work on hosts unchanged. Per-CPU series are asked only for a host whose per-core table is open
(`open_host`: the same per-CPU feed with `{instance="..."}` in every selector: one query per metric for
that view, never one per host of the fleet).

A host Sample's counts are its CPUs' rates summed, per second of the exporters' own sampling (the summed
pmutop_sampled_seconds rate over the CPU count), times the window, as a per-CPU Sample's are.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pmutop.core.errors import PmutopError
from pmutop.core.ring import SampleRing
from pmutop.core.run_description import RunInfo
from pmutop.core.sample import Sample
from pmutop.derive.prometheus_names import PREFIX, TOPDOWN_CATEGORIES, metric_name
from pmutop.feeds import fleet_queries as fq
from pmutop.feeds.prom_rounds import PromRounds, Query, clock_text
from pmutop.feeds.prometheus import PrometheusFeed, _key_order, _near, _steps
from pmutop.feeds.promql import PromError, Server, Vector, duration, restrict
from pmutop.feeds.remote import exported

HOST = ("instance",)
FLEET_HISTORY = 120  # intervals the live view keeps (pmutop.tui.model.HISTORY): the heatmap full at any width
EXTRA_FAMILIES = ("busy_seconds_total", "energy_joules_total", "dram_bytes_total")


@dataclass
class HostRow:
    """One instance in the host table."""

    index: int  # its row's CPU id
    instance: str
    info: dict[str, str]
    cpus: int
    keys: list[str]
    method: str | None  # how its CPUs measure top-down (the first CPU's), None: not
    started: float | None = None
    lost_since: float | None = None
    restarted_at: float | None = None
    dram_bytes_per_s: float | None = None  # the newest round's, where exported
    worst: tuple[str, float] | None = None  # the newest round's worst core: (cpu, its IPC)


class FleetFeed(PromRounds[HostRow]):
    """SampleFeed of per-instance aggregates, one row per instance."""

    thread_name = "pmutop-fleet"
    pool_name = "pmutop-fleet"

    # -- discovery: per-instance answers only (never one series per CPU of the fleet)

    def _discover(self, at: float) -> float:
        infos = {i["instance"]: i for i in self.client.labels(self.match, at) if "instance" in i}
        if not infos:
            raise PmutopError(f"prometheus {self.server.shown}: no pmutop instances there ({self.match} selects none)")
        counts = self.client.instant(restrict(f"count by (instance) ({PREFIX}cpu_info)", self.match), at, HOST)
        methods = self.client.labels(
            restrict(f"group by (instance, topdown_method) ({PREFIX}cpu_info)", self.match), at
        )
        method_of = {m["instance"]: m.get("topdown_method") or None for m in methods if "instance" in m}
        events = self.client.labels(
            restrict(f"group by (instance, event) ({PREFIX}event_counted_seconds_total)", self.match), at
        )
        keys: dict[str, set[str]] = {}
        for row in events:
            if "instance" in row and "event" in row:
                keys.setdefault(row["instance"], set()).add(row["event"])
        names = self.client.labels(f'count by (__name__) ({{__name__=~"{PREFIX}({"|".join(EXTRA_FAMILIES)})"}})', at)
        self._families = {n["__name__"].removeprefix(PREFIX) for n in names if "__name__" in n}
        for instance in sorted(infos):
            cpus = int(counts.get((instance,), 0))
            if not cpus or not keys.get(instance):
                self.notes.append(f"{instance}: no per-CPU counters served yet; left out")
                continue
            ordered = sorted(keys[instance], key=_key_order)
            host = HostRow(len(self.hosts), instance, infos[instance], cpus, ordered, method_of.get(instance))
            self.hosts.append(host)
            self.cpus.append(host.index)
            self.rings[host.index] = SampleRing()
            self.labels[host.index] = instance
            self._seq[host.index] = 0
        if not self.hosts:
            raise PmutopError(f"prometheus {self.server.shown}: no instance serves per-CPU counters yet")
        starts = self.client.instant(fq.start_times(self.match), at, HOST)
        for h in self.hosts:
            h.started = starts.get((h.instance,))
        return self._scrape_interval(at)

    # -- the queries: one per metric for the whole fleet, one series per instance

    def queries(self) -> list[Query]:
        w, m = duration(self.window), self.match
        families = {metric_name(k) + "_total" for h in self.hosts for k in h.keys}
        out = [Query("start", fq.start_times(m), HOST)]
        for family in sorted((families | {fq.SAMPLED, fq.TSC}) - {fq.CATEGORY}):
            out.append(Query(family, fq.host_rate(family, w, m), HOST))
        if fq.CATEGORY in families:
            out.append(Query(fq.CATEGORY, fq.host_rate(fq.CATEGORY, w, m, ("category",)), (*HOST, "category")))
        if "busy_seconds_total" in self._families:
            family = PREFIX + "busy_seconds_total"
            out.append(Query(family, fq.host_rate(family, w, m), HOST))
        if "energy_joules_total" in self._families:
            out.append(Query("watts", fq.host_watts(w, m), HOST))
        if "dram_bytes_total" in self._families:
            out.append(Query("dram", fq.host_dram(w, m), HOST))
        needs = {PREFIX + e + "_total" for e in ("instructions", "cycles", "ref_cycles")}
        if needs <= families:
            out.append(Query("worst", fq.worst_core(w, m), ("instance", "cpu")))
        return out

    # -- one Sample per host

    def build(self, values: dict[str, Vector], at: float) -> list[tuple[int, dict[str, Any]]]:
        window = self.window
        sampled = values.get(fq.SAMPLED, {})
        tscs = values.get(fq.TSC, {})
        categories = values.get(fq.CATEGORY, {})
        busy_s = values.get(PREFIX + "busy_seconds_total")
        watts, dram = values.get("watts", {}), values.get("dram")
        worst: dict[str, tuple[str, float]] = {inst: (cpu, v) for (inst, cpu), v in values.get("worst", {}).items()}
        out: list[tuple[int, dict[str, Any]]] = []
        for h in self.hosts:
            inst, where = h.instance, (h.instance,)
            if h.lost_since is not None:
                h.dram_bytes_per_s, h.worst = None, None
                out.append((h.index, {"error": f"{inst}: lost (not scraped since {clock_text(h.lost_since)})"}))
                continue
            rate = sampled.get(where)
            if not rate or rate <= 0:
                out.append((h.index, {"error": f"{inst}: no samples in the last {window:g} s"}))
                continue
            per_cpu_rate = rate / h.cpus  # seconds sampled per wall second, one CPU's on average
            scale = window / per_cpu_rate
            counts: dict[str, int] = {}
            for k in h.keys:
                if k in TOPDOWN_CATEGORIES:
                    v = categories.get((inst, TOPDOWN_CATEGORIES[k][0]))
                else:
                    v = values.get(metric_name(k) + "_total", {}).get(where)
                if v is not None:
                    counts[k] = round(v * scale)
            tsc_rate = tscs.get(where)
            fields: dict[str, Any] = {
                "interval": window,
                "tsc": None if tsc_rate is None else round(tsc_rate * scale),
                "tsc_hz": None if tsc_rate is None else tsc_rate / rate,
                "counts": counts,
                "topdown": h.method,
            }
            if busy_s is not None and where in busy_s:
                busy = max(0.0, min(1.0, busy_s[where] / rate))
                fields["busy"] = 100 * busy
                if "ref_cycles" not in counts:
                    fields["util"] = busy
            if where in watts:
                fields["energy_j"] = {"package": max(0.0, watts[where] * scale)}
            h.dram_bytes_per_s = None if dram is None or where not in dram else dram[where] / per_cpu_rate
            h.worst = worst.get(inst)
            out.append((h.index, exported(fields)))
        return out

    # -- rounds

    def history(self, start: float, end: float) -> Iterator[tuple[float, list[Sample]]]:
        """The rounds from `start` to `end` out of the server's history (query_range), pushed and yielded."""
        qs = [q for q in self.queries() if q.name not in ("start", "worst")]
        step = self.step

        def ask(q: Query) -> dict[float, Vector]:
            return self.client.matrix(q.expr, start, end, step, q.by, self.history_timeout)

        answers = list(self._pool.map(ask, qs))
        stamps = sorted({at for a in answers for at in a})
        for at in _steps(round(start, 3), round(end, 3), step):
            values = {q.name: a.get(_near(stamps, at), {}) for q, a in zip(qs, answers, strict=True)}
            yield at, self._push_round(at, self.build(values, at))

    def prefill(self, intervals: int = FLEET_HISTORY) -> int:
        """The last `intervals` steps from query_range (1,000 hosts x 120 steps: 120,000 points a query), so
        the plots and the heatmap are full at once. Returns how many; 0 when the server fails."""
        end = round(self._clock(), 3)
        start = round(end - (intervals - 1) * self.step, 3)
        self.wall0 = start - self.step
        try:
            return sum(1 for _ in self.history(start, end))
        except PromError as e:
            self.notes.append(f"no history: {e}")
            return 0

    def open_host(self, index: int, prefill: bool = True) -> HostCpus:
        """The per-CPU feed of one instance (its per-core table), its history filled; not started."""
        host = self.hosts[index]
        feed = HostCpus(self.server, self._asked, host.instance, self._timeout)
        if prefill:
            feed.prefill()
        return feed

    # -- SampleFeed (the rest: PromRounds)

    def keys(self, cpu: int) -> list[str]:
        return self.hosts[cpu].keys

    def topdown_method(self, cpu: int) -> str | None:
        return self.hosts[cpu].method

    def run_info(self) -> RunInfo:
        first = self.hosts[0].info
        cpus = sum(h.cpus for h in self.hosts)
        hosts = f"{len(self.hosts)} host{'' if len(self.hosts) == 1 else 's'}"
        return RunInfo(
            hostname=f"{hosts} ({cpus} CPUs) via {self.server.shown}",
            cpu_model=first.get("cpu_model", "?"),
            uarch=first.get("microarchitecture") or None,
            pmu=first.get("pmu", "PMU") + (f" (+{len(self.hosts) - 1} more hosts)" if len(self.hosts) > 1 else ""),
            backend="prometheus " + first.get("backend", "?"),
            read_method="promql, per host",
            simulated=self.simulated,
            hypervisor=False,
            cpus=self.cpus,
        )


_SELECTOR = re.compile(r"\b((?:rate|avg_over_time)\()(" + PREFIX + r"[a-z0-9_]+)\[")


class HostCpus(PrometheusFeed):
    """The per-CPU feed of one instance: PrometheusFeed's queries with `{instance="..."}` in every selector,
    so the server computes and sends that host's series only."""

    def __init__(self, server: Server, interval: float, instance: str, timeout: float | None = None) -> None:
        self.instance = instance
        self._matcher = "{instance=" + json.dumps(instance) + "}"
        super().__init__(server, interval, f"{PREFIX}info{self._matcher}", timeout)
        self.package_feed = self.follow_dram(instance)  # its memory views: what its exporter measured

    @functools.cached_property
    def _start_matcher(self) -> str:
        return f"{PREFIX}start_time_seconds{self._matcher}"

    def queries(self) -> list[Query]:
        out = []
        for q in super().queries():
            expr = _SELECTOR.sub(lambda m: f"{m.group(1)}{m.group(2)}{self._matcher}[", q.expr)
            expr = expr.replace(f"({PREFIX}start_time_seconds)", f"({self._start_matcher})")
            out.append(Query(q.name, expr, q.by))
        return out

    def run_info(self) -> RunInfo:
        info = super().run_info()
        info.hostname = self.instance
        return info
