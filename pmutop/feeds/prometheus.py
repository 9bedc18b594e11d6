"""`pmutop --prometheus URL`: a SampleFeed made from what a Prometheus server scraped of `pmutop serve`s.

Every interval the server is asked, at one evaluation time for all queries (so the ratios of two queries are
over the same scrapes), for the rate() of each raw counter over a window: one query per metric for the whole
fleet, grouped by instance and cpu, never one per host. Each (instance, cpu) becomes one Sample, keyed as
`--connect` keys them (instance i's CPU c is i * HOST_STRIDE + c, labelled "instance:c"), so the live view,
batch and the recorder take it unchanged.

A Sample's deltas are rate x window / (the rate of the exporter's sampled_seconds): the counts per second of
the exporter's own sampling (an exporter whose samplers publish every 5 s grows in steps; wall-clock rates
over a 2 s window would jump) times the window, which is the Sample's interval. Ratios (IPC, utilisation,
GHz) are exact over the scrapes in the window: both counters of a ratio come from the same scrapes.

The window is at least two scrapes (rate() needs two points) and the step at least one scrape (nothing new
comes sooner); both are said at start when they differ from the interval asked for.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from pmutop.core.cpulist import format_cpu_list
from pmutop.core.dram_reading import SOURCE_SIMULATED, SOURCE_UNCORE, DramReading, package_totals
from pmutop.core.errors import PmutopError
from pmutop.core.ring import SampleRing
from pmutop.core.run_description import RunInfo
from pmutop.core.sample import Sample
from pmutop.derive.prometheus_names import DRAM_BYTES, DRAM_PEAK, PREFIX, TOPDOWN_CATEGORIES, metric_name
from pmutop.derive.records import COUNT_ORDER
from pmutop.feeds.prom_rounds import PromRounds, Query, clock_text
from pmutop.feeds.promql import (
    PromError,
    Vector,
    duration,
    gauge_expr,
    multiplexed_expr,
    rate_expr,
    restrict,
)
from pmutop.feeds.remote import HOST_STRIDE, exported, power_fields
from pmutop.feeds.replay_packages import ReplayPackageFeed

HISTORY_INTERVALS = 60
FIRST_SAMPLE_POINTS = 10_000  # steps of the coarse query for the first sample (Prometheus allows 11,000)
RANGE_POINTS = 400_000  # points per query_range answer at most (64,000 CPUs: 6 steps a query)
CPU = ("instance", "cpu")
POWER_FAMILIES = (
    "busy_seconds_total",
    "busy_cycles_total",
    "cstate_residency_seconds_total",
    "energy_joules_total",
    "temperature_celsius",
    "package_temperature_celsius",
    "dram_bytes_total",
)
DRAM_BY = ("instance", "package", "channel", "direction")


@dataclass
class FleetHost:
    """One pmutop instance as Prometheus labels it."""

    index: int
    instance: str
    info: dict[str, str]
    cpus: list[int]
    keys: list[str]
    methods: dict[int, str | None] = field(default_factory=dict)
    packages: dict[int, int] = field(default_factory=dict)
    core_types: dict[int, str] = field(default_factory=dict)
    started: float | None = None  # pmutop_start_time_seconds: another value means the exporter restarted
    lost_since: float | None = None  # Unix time it was first missing from the server's answer
    restarted_at: float | None = None

    def gid(self, cpu: int) -> int:
        return self.index * HOST_STRIDE + cpu

    @property
    def first_of_package(self) -> dict[int, int]:
        """package -> its first CPU (which carries the package's energy, as a local sample does)."""
        out: dict[int, int] = {}
        for cpu in sorted(self.cpus, reverse=True):
            if cpu in self.packages:
                out[self.packages[cpu]] = cpu
        return out


def _key_order(key: str) -> tuple[int, int, str]:
    """The standard events first (records' order), then slots and the top-down categories, then the rest."""
    if key in COUNT_ORDER:
        return (0, COUNT_ORDER.index(key), key)
    if key == "slots":
        return (1, 0, key)
    if key in TOPDOWN_CATEGORIES:
        return (1, 1 + list(TOPDOWN_CATEGORIES).index(key), key)
    return (2, 0, key)


class PrometheusFeed(PromRounds[FleetHost]):
    """SampleFeed over a Prometheus server's HTTP API, one row per CPU of every instance."""

    thread_name = "pmutop-prometheus"
    pool_name = "pmutop-promql"

    # -- discovery

    def _discover(self, at: float) -> float:
        self.hosts_of: dict[int, tuple[str, int]] = {}  # cpu id -> (instance, its own cpu number)
        self._gaps_said: dict[str, tuple[int, ...]] = {}  # instance -> its CPUs last said to have no samples
        self.core_types: dict[int, str] = {}
        # instance -> its DRAM bandwidth per package, each round's (only for the instances asked for: a host's
        # per-core table; the fleet's batch and recordings are per CPU).
        self.dram_feeds: dict[str, ReplayPackageFeed] = {}
        infos = self.client.labels(self.match, at)
        if not infos:
            raise PmutopError(f"prometheus {self.server.shown}: no pmutop instances there ({self.match} selects none)")
        info_of = {i["instance"]: i for i in infos if "instance" in i}
        cpu_rows = self.client.labels(restrict(f"{PREFIX}cpu_info", self.match), at)
        event_rows = self.client.labels(
            restrict(f"group by (instance, event) ({PREFIX}event_counted_seconds_total)", self.match), at
        )
        names = self.client.labels(f'count by (__name__) ({{__name__=~"{PREFIX}({"|".join(POWER_FAMILIES)})"}})', at)
        self._families = {n["__name__"].removeprefix(PREFIX) for n in names if "__name__" in n}
        keys: dict[str, set[str]] = {}
        for row in event_rows:
            if "instance" in row and "event" in row:
                keys.setdefault(row["instance"], set()).add(row["event"])
        cpus: dict[str, dict[int, dict[str, str]]] = {}
        for row in cpu_rows:
            if row.get("instance") in info_of and row.get("cpu", "").isdigit():
                cpus.setdefault(row["instance"], {})[int(row["cpu"])] = row
        for instance in sorted(info_of):
            if not cpus.get(instance) or not keys.get(instance):
                self.notes.append(f"{instance}: no per-CPU counters served yet; left out")
                continue
            self._add_host(instance, info_of[instance], cpus[instance], sorted(keys[instance], key=_key_order))
        if not self.hosts:
            raise PmutopError(f"prometheus {self.server.shown}: no instance serves per-CPU counters yet")
        starts = self.client.instant(self._start_expr(), at, ("instance",))
        for host in self.hosts:
            host.started = starts.get((host.instance,))
        return self._scrape_interval(at)

    def _add_host(self, instance: str, info: dict[str, str], cpus: dict[int, dict[str, str]], keys: list[str]) -> None:
        host = FleetHost(len(self.hosts), instance, info, sorted(cpus), keys)
        for cpu, row in cpus.items():
            host.methods[cpu] = row.get("topdown_method") or None
            if row.get("package", "").isdigit():
                host.packages[cpu] = int(row["package"])
            if row.get("core_type"):
                host.core_types[cpu] = row["core_type"]
        self.hosts.append(host)
        for cpu in host.cpus:
            gid = host.gid(cpu)
            self.cpus.append(gid)
            self.rings[gid] = SampleRing()
            self.labels[gid] = f"{instance}:{cpu}"
            self.hosts_of[gid] = (instance, cpu)
            self._seq[gid] = 0
            if cpu in host.core_types:
                self.core_types[gid] = host.core_types[cpu]

    # -- the queries

    def _start_expr(self) -> str:
        return restrict(f"max by (instance) ({PREFIX}start_time_seconds)", self.match)

    def queries(self) -> list[Query]:
        """One query per metric for the whole fleet, at the current window."""
        w, m = self.window, self.match
        families = {metric_name(k) + "_total" for h in self.hosts for k in h.keys}
        category = PREFIX + "topdown_category_slots_total"
        out = [Query("start", self._start_expr(), ("instance",))]
        for name in ("sampled_seconds_total", "tsc_total"):
            out.append(Query(PREFIX + name, rate_expr(PREFIX + name, w, CPU, m), CPU))
        for family in sorted(families - {category}):
            out.append(Query(family, rate_expr(family, w, CPU, m), CPU))
        if category in families:
            out.append(Query(category, rate_expr(category, w, (*CPU, "category"), m), (*CPU, "category")))
        out.append(Query("multiplexed", multiplexed_expr(w, m), (*CPU, "event")))
        for name in ("busy_seconds_total", "busy_cycles_total"):
            if name in self._families:
                out.append(Query(PREFIX + name, rate_expr(PREFIX + name, w, CPU, m), CPU))
        if "cstate_residency_seconds_total" in self._families:
            family, by = PREFIX + "cstate_residency_seconds_total", (*CPU, "state")
            out.append(Query(family, rate_expr(family, w, by, m), by))
        if "energy_joules_total" in self._families:
            family, by = PREFIX + "energy_joules_total", ("instance", "package", "domain")
            out.append(Query(family, rate_expr(family, w, by, m), by))
        if "temperature_celsius" in self._families:
            out.append(Query("temp", gauge_expr(PREFIX + "temperature_celsius", w, CPU, m), CPU))
        if "package_temperature_celsius" in self._families:
            per_package = ("instance", "package")
            expr = gauge_expr(PREFIX + "package_temperature_celsius", w, per_package, m)
            out.append(Query("pkg_temp", expr, per_package))
        if self.dram_feeds:
            expr = f"max by ({', '.join(DRAM_BY)}) (rate({DRAM_BYTES}_total[{duration(w)}]))"
            out.append(Query("dram", restrict(expr, m), DRAM_BY))
            per_package = ("instance", "package")
            out.append(Query("dram_peak", gauge_expr(DRAM_PEAK, w, per_package, m), per_package))
        return out

    def follow_dram(self, instance: str) -> ReplayPackageFeed | None:
        """The DRAM bandwidth `instance`'s exporter measures, per package and channel, from the next round on
        (its memory views' figures); None when it exports none."""
        if "dram_bytes_total" not in self._families:
            return None
        host = next(h for h in self.hosts if h.instance == instance)
        simulated = host.info.get("simulated") == "true"
        feed = ReplayPackageFeed(
            SOURCE_SIMULATED if simulated else SOURCE_UNCORE,
            f"{instance}'s exporter: {DRAM_BYTES}_total per package and channel",
        )
        self.dram_feeds[instance] = feed
        return feed

    def _push_dram(self, dram: Vector, peaks: Vector, at: float) -> None:
        """Each followed instance's DRAM bytes per package over the window (wall-clock rates x the window), and
        the peak its exporter knows (None: the share is not guessed)."""
        window = self.window
        per_channel: dict[str, dict[int, dict[int, dict[str, float]]]] = {}
        for (inst, pkg, channel, direction), rate in dram.items():
            if pkg.isdigit() and channel.isdigit():
                chan = per_channel.setdefault(inst, {}).setdefault(int(pkg), {}).setdefault(int(channel), {})
                chan[direction] = max(0.0, rate) * window
        for inst, feed in self.dram_feeds.items():
            packages = []
            for package, channels in sorted(per_channel.get(inst, {}).items()):
                readings = tuple(
                    DramReading(f"channel {n}", package, n, c.get("read"), c.get("write"), window)
                    for n, c in sorted(channels.items())
                )
                packages.append(package_totals(package, readings, window, peaks.get((inst, str(package)))))
            feed.push(round(at - self.wall0, 3), packages)

    def power_fields(self) -> list[str]:
        """The power columns the instances' exporters fill (pmutop.derive.power.SERIES)."""
        return power_fields(self._families)

    def _ask_range(self, query: Query, start: float, end: float) -> dict[float, Vector]:
        return self.client.matrix(query.expr, start, end, self.step, query.by, self.history_timeout)

    # -- building samples

    def build(self, values: dict[str, Vector], at: float) -> list[tuple[int, dict[str, Any]]]:
        """One round's Sample fields per cpu id (seq, cpu and time are added when pushed)."""
        window = self.window
        sampled = values.get(PREFIX + "sampled_seconds_total", {})
        tscs = values.get(PREFIX + "tsc_total", {})
        multiplexed = _by_cpu(values.get("multiplexed", {}))
        busy_s = values.get(PREFIX + "busy_seconds_total")
        busy_cycles = values.get(PREFIX + "busy_cycles_total", {})
        temps = values.get("temp", {})
        category = PREFIX + "topdown_category_slots_total"
        sources = {}  # key -> (its vector, category label or None)
        for h in self.hosts:
            for k in h.keys:
                if k not in sources:
                    family = metric_name(k) + "_total"
                    sources[k] = (values.get(family, {}), TOPDOWN_CATEGORIES[k][0] if family == category else None)
        per_state = _by_cpu(values.get(PREFIX + "cstate_residency_seconds_total", {}))
        energy = _by_host_package(values.get(PREFIX + "energy_joules_total", {}))
        pkg_temps = values.get("pkg_temp", {})
        if self.dram_feeds:
            self._push_dram(values.get("dram", {}), values.get("dram_peak", {}), at)
        out: list[tuple[int, dict[str, Any]]] = []
        for h in self.hosts:
            inst = h.instance
            first = h.first_of_package
            gaps: list[int] = []
            for cpu in h.cpus:
                gid, where = h.gid(cpu), (inst, str(cpu))
                if h.lost_since is not None:
                    out.append((gid, {"error": f"{inst}: lost (not scraped since {clock_text(h.lost_since)})"}))
                    continue
                rate = sampled.get(where)
                if not rate or rate <= 0:
                    gaps.append(cpu)
                    out.append((gid, {"error": f"{inst}: no samples from cpu {cpu} in the last {window:g} s"}))
                    continue
                scale = window / rate  # per second of the exporter's own sampling, times the window
                counts: dict[str, int] = {}
                for k in h.keys:
                    vector, cat = sources[k]
                    v = vector.get((inst, str(cpu), cat) if cat else where)
                    if v is not None:
                        counts[k] = round(v * scale)
                tsc_rate = tscs.get(where)
                fields: dict[str, Any] = {
                    "interval": window,
                    "tsc": None if tsc_rate is None else round(tsc_rate * scale),
                    "tsc_hz": None if tsc_rate is None else tsc_rate / rate,
                    "counts": counts,
                    "estimated": {k: max(0.0, v) for k, v in multiplexed.get(where, {}).items()},
                    "topdown": h.methods.get(cpu),
                }
                if busy_s is not None and where in busy_s:
                    busy = busy_s[where] / rate
                    fields["busy"] = max(0.0, min(100.0, 100 * busy))
                    if where in busy_cycles and busy_s[where] > 0:
                        fields["bzy_mhz"] = busy_cycles[where] / busy_s[where] / 1e6
                    if "ref_cycles" not in counts:
                        fields["util"] = max(0.0, min(1.0, busy))
                if where in per_state:
                    fields["cstates"] = {s: max(0.0, 100 * v / rate) for s, v in per_state[where].items()}
                if where in temps:
                    fields["temp_c"] = temps[where]
                package = h.packages.get(cpu)
                if package is not None:
                    fields["package"] = package
                    if first.get(package) == cpu:
                        joules = energy.get((inst, str(package)))
                        if joules:
                            fields["energy_j"] = {d: max(0.0, j * scale) for d, j in joules.items()}
                        if (inst, str(package)) in pkg_temps:
                            fields["pkg_temp_c"] = pkg_temps[(inst, str(package))]
                out.append((gid, exported(fields)))
            if h.lost_since is None:
                self._say_gaps(inst, gaps, window)
            else:
                self._gaps_said.pop(inst, None)  # its loss is said instead
        return out

    def _say_gaps(self, instance: str, gaps: list[int], window: float) -> None:
        """One line when CPUs of an instance have no samples in the window (their rows and records are empty
        meanwhile; batch says it on stderr), and one when they have again; not a line every round."""
        before, now = self._gaps_said.get(instance, ()), tuple(gaps)
        if now == before:
            return
        if now:
            self._notice(f"{instance}: no samples from cpu {format_cpu_list(gaps)} in the last {window:g} s")
        else:
            self._notice(f"{instance}: samples from cpu {format_cpu_list(list(before))} again")
        self._gaps_said[instance] = now

    # -- rounds: live, and from the server's history

    def first_sample(self, start: float, end: float) -> float | None:
        """When the server's first sample of the instances between `start` and `end` is (Unix s, to a scrape
        interval); None: none there. Two query_range of one series: over the whole window at a coarse step, then
        over the coarse step before the first point found, at the scrape interval (or as near as the server's
        limit of points allows)."""
        expr = f"count({self.match})"

        def first(since: float, until: float, step: float) -> float | None:
            return min(self.client.matrix(expr, since, until, step, (), self.history_timeout), default=None)

        coarse = max(self.scrape_s, (end - start) / FIRST_SAMPLE_POINTS)
        found = first(start, end, coarse)
        if found is None or coarse <= self.scrape_s:
            return found
        fine = max(self.scrape_s, coarse / FIRST_SAMPLE_POINTS)  # a window of years: still within the limit
        return first(max(start, found - coarse), found, fine) or found

    def history(self, start: float, end: float) -> Iterator[tuple[float, list[Sample]]]:
        """The rounds from `start` to `end` (Unix s, one every step) out of the server's history, each pushed
        into the rings (the plots, the recorder) and yielded; query_range in chunks of RANGE_POINTS points."""
        step, end = self.step, round(end, 3)
        per_chunk = max(1, min(10_000, RANGE_POINTS // max(1, len(self.cpus))))
        t = round(start, 3)
        while t <= end + 1e-6:
            last = min(round(t + (per_chunk - 1) * step, 3), end)
            qs = [q for q in self.queries() if q.name != "start"]
            answers = list(self._pool.map(functools.partial(self._ask_range, start=t, end=last), qs))
            stamps = sorted({at for a in answers for at in a})
            for at in _steps(t, last, step):
                values = {q.name: a.get(_near(stamps, at), {}) for q, a in zip(qs, answers, strict=True)}
                yield at, self._push_round(at, self.build(values, at))
            t = round(last + step, 3)

    def prefill(self, intervals: int = HISTORY_INTERVALS) -> int:
        """The last `intervals` steps from query_range into the rings, before the live rounds, so the plots
        are full at once (fewer on a large fleet: RANGE_POINTS per query). Returns how many; 0 when the server
        has none or fails (the live rounds say why)."""
        intervals = min(intervals, max(1, RANGE_POINTS // max(1, len(self.cpus))))
        end = round(self._clock(), 3)
        start = round(end - (intervals - 1) * self.step, 3)
        self.wall0 = start - self.step
        try:
            return sum(1 for _ in self.history(start, end))
        except PromError as e:
            self.notes.append(f"no history: {e}")
            return 0

    # -- SampleFeed (the rest: PromRounds)

    def keys(self, cpu: int) -> list[str]:
        return self.hosts[cpu // HOST_STRIDE].keys

    def topdown_method(self, cpu: int) -> str | None:
        return self.hosts[cpu // HOST_STRIDE].methods.get(cpu % HOST_STRIDE)

    # -- what the header, recordings and sinks need

    def describe(self) -> dict[str, Any]:
        """The recording header's backend facts: the server, each instance, each CPU id's row and host."""
        return {
            "backend": "prometheus",
            "server": self.server.shown,
            "hosts": [{"name": h.instance, "url": h.instance} for h in self.hosts],
            "labels": dict(self.labels),
            "cpu_hosts": {gid: list(where) for gid, where in self.hosts_of.items()},
        }

    def run_info(self) -> RunInfo:
        """The live view's header: the first instance's machine, how many instances."""
        first = self.hosts[0].info
        more = len(self.hosts) - 1
        return RunInfo(
            hostname=f"{len(self.hosts)} instances via {self.server.shown}" if more else self.hosts[0].instance,
            cpu_model=first.get("cpu_model", "?"),
            uarch=first.get("microarchitecture") or None,
            pmu=first.get("pmu", "PMU") + (f" (+{more} more hosts)" if more else ""),
            backend="prometheus " + first.get("backend", "?"),
            read_method="promql",
            simulated=self.simulated,
            hypervisor=False,
            cpus=self.cpus,
            core_types=self.core_types,
        )


def _by_cpu(vector: Vector) -> dict[tuple[str, str], dict[str, float]]:
    """(instance, cpu, label) -> value  ==>  (instance, cpu) -> label -> value."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for (inst, cpu, label), v in vector.items():
        out.setdefault((inst, cpu), {})[label] = v
    return out


def _by_host_package(vector: Vector) -> dict[tuple[str, str], dict[str, float]]:
    out: dict[tuple[str, str], dict[str, float]] = {}
    for (inst, package, domain), v in vector.items():
        out.setdefault((inst, package), {})[domain] = v
    return out


def _steps(start: float, end: float, step: float) -> Iterator[float]:
    n = 0
    while (at := round(start + n * step, 3)) <= end + 1e-6:
        yield at
        n += 1


def _near(stamps: list[float], at: float) -> float:
    """The answer's timestamp for step `at` (the server's float rounding may differ by a millisecond)."""
    for s in stamps:
        if abs(s - at) < 0.002:
            return s
    return at
