"""`pmutop serve`: the samples as Prometheus metrics, node_exporter style.

Raw counters only grow: each sample's deltas (already wrap-corrected by the sampler) are added to running
totals per CPU, so PromQL's rate() gives any window. A small folding thread reads the rings every interval
(the rings hold 600 samples; a scrape every 15 s would lose some at short intervals); a scrape folds too,
under a lock that only the exporter takes, never a sampler.

With `serve --cgroups` or `--cgroup PATH` the folding thread also reads the per-cgroup counters once per
interval and sums their deltas per cgroup: pmutop_cgroup_<event>_total{cgroup="<path>",name="<name>"}
(pmutop.derive.prometheus_names). Per-process (per-PID) series are never exported, whatever the task source
reads: every process that ever ran would be a series of its own (PIDs are unbounded label values, and
Prometheus keeps each series for its whole retention); cgroups are the services, containers and pods users
ask about, a bounded set. A cgroup not read for CGROUP_STALE_S leaves the output (a container removed).

With a DRAM bandwidth source (the package sampler, any core.dram_reading.PackageFeed) each reading's bytes are
added per package, memory channel and direction: pmutop_dram_bytes_total{package,channel,direction} (direction
"read" or "write"; rate() gives bytes/s), beside pmutop_dram_peak_bytes_per_second{package} where the memory's
speed is known and pmutop_dram_source_info{source} ("uncore", or "simulated" for --demo). A direction a channel
did not count in an interval adds nothing (not a zero). A channel whose counter saturated (AMD UMC) adds what it
read, a lower bound, and counts the interval in pmutop_dram_saturated_intervals_total{package,channel}: a rate
above zero says the bytes of that window are understated. Never per CPU or per process.
"""

from __future__ import annotations

import socket
import socketserver
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from pmutop.core.dram_reading import PackageDram, PackageFeed
from pmutop.core.errors import PmutopError
from pmutop.core.feed import SampleFeed
from pmutop.core.run_description import RunInfo
from pmutop.core.sample import Sample
from pmutop.core.task_reading import TaskCounterSource, TaskSnapshot
from pmutop.derive import topdown
from pmutop.derive.metrics import for_sample
from pmutop.derive.prometheus_names import (
    CGROUP_PREFIX,
    CGROUP_SECONDS,
    DRAM_BYTES,
    DRAM_PEAK,
    DRAM_SATURATED,
    DRAM_SOURCE,
    PREFIX,
    TOPDOWN_CATEGORIES,
    cgroup_metric_name,
    metric_name,
)
from pmutop.sinks.listen import DEFAULT_LISTEN as DEFAULT_LISTEN  # re-exported: callers import it from here
from pmutop.sinks.listen import parse_listen as parse_listen

LANDING_PAGE = (
    b"<!doctype html><html><head><title>pmutop exporter</title></head><body><h1>pmutop exporter</h1>"
    b'<p>Per-CPU hardware counters for Prometheus: <a href="/metrics">/metrics</a></p></body></html>\n'
)


@dataclass
class CpuTotals:
    counts: dict[str, int] = field(default_factory=dict)
    counted_s: dict[str, float] = field(default_factory=dict)
    overflows: dict[str, int] = field(default_factory=dict)
    energy_j: dict[str, float] = field(default_factory=dict)  # RAPL domain -> joules (a package's first CPU)
    cstate_s: dict[str, float] = field(default_factory=dict)  # idle state -> seconds resident
    busy_s: float | None = None  # seconds not idle (Busy% x interval), where measured
    busy_cycles: float | None = None  # clock cycles while not idle (Bzy MHz x busy seconds)
    package: int | None = None
    tsc: int = 0
    seconds: float = 0.0
    suspect: int = 0
    latest: Sample | None = None
    seen: int = 0


CGROUP_STALE_S = 300.0  # a cgroup not read for this long is dropped from the output (removed, or gone quiet)


@dataclass
class CgroupTotals:
    name: str
    counts: dict[str, int] = field(default_factory=dict)
    counted_s: float = 0.0  # seconds its counters really counted (multiplexing scales the rest)
    seconds: float = 0.0  # seconds of readings folded in
    processes: int = 0  # in its last reading
    last_read: float = 0.0  # monotonic time of its last reading


@dataclass
class DramTotals:
    """The DRAM readings folded so far: bytes per (package, channel, direction), saturated intervals per
    (package, channel), each package's latest known peak; `until`: the time of the last reading folded."""

    bytes: dict[tuple[int, int, str], float] = field(default_factory=dict)
    saturated: dict[tuple[int, int], int] = field(default_factory=dict)
    peak: dict[int, float] = field(default_factory=dict)
    until: float = float("-inf")
    seq: int = 0

    def add(self, packages: list[PackageDram]) -> None:
        for p in packages:
            if p.peak_bytes_per_s is not None:
                self.peak[p.package] = p.peak_bytes_per_s
            for c in p.channels:
                for direction, value in (("read", c.read_bytes), ("write", c.write_bytes)):
                    if value is not None:
                        key = (p.package, c.channel, direction)
                        self.bytes[key] = self.bytes.get(key, 0.0) + value
                channel = (p.package, c.channel)
                self.saturated[channel] = self.saturated.get(channel, 0) + (1 if c.saturated else 0)


class PmuCollector(Collector):
    """Folds the feed's samples into totals; collect() renders them."""

    def __init__(self, feed: SampleFeed, info: RunInfo, packages: PackageFeed | None = None) -> None:
        self.feed = feed
        self.info = info
        self.packages = packages
        self.dram = DramTotals()
        self.started = time.time()  # with the hostname, tells `--connect` two names of one exporter apart
        self._lock = threading.Lock()  # the exporter's own: the folding thread and scrapes
        self.totals = {cpu: CpuTotals() for cpu in feed.cpus}
        self.cgroups: dict[str, CgroupTotals] = {}
        self.cgroup_mode: str | None = None  # the per-cgroup counters' mode (exact, estimated, simulated)

    def fold_tasks(self, snapshot: TaskSnapshot, now: float | None = None) -> None:
        """Add one interval's cgroup readings to the per-cgroup totals; the snapshot's processes are left out
        (never exported per PID: see the module's note)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            self.cgroup_mode = snapshot.mode
            for r in snapshot.cgroups:
                if r.no_permission:
                    continue
                t = self.cgroups.get(r.path)
                if t is None:
                    t = self.cgroups[r.path] = CgroupTotals(r.name)
                t.name, t.processes, t.last_read = r.name, r.processes, now
                t.seconds += r.interval
                t.counted_s += r.counted * r.interval
                for k, v in r.counts.items():
                    t.counts[k] = t.counts.get(k, 0) + v
            for path in [p for p, t in self.cgroups.items() if now - t.last_read > CGROUP_STALE_S]:
                del self.cgroups[path]

    def fold(self) -> None:
        with self._lock:
            for cpu, t in self.totals.items():
                for s in self.feed.rings[cpu].since(t.seen):
                    t.seen = s.seq
                    self._add(t, s)
            if self.packages is not None and self.packages.seq != self.dram.seq:
                self.dram.seq = self.packages.seq
                for at, packages in self.packages.timeline():
                    if at > self.dram.until:  # not folded yet (the feed keeps the last 120 intervals)
                        self.dram.add(packages)
                        self.dram.until = at

    @staticmethod
    def _add(t: CpuTotals, s: Sample) -> None:
        if s.error:
            return
        if s.suspect:  # numbers that must not be shown as truth stay out of the counters
            t.suspect += 1
            return
        t.latest = s
        t.seconds += s.interval
        if s.tsc:
            t.tsc += s.tsc
        for k, v in s.counts.items():
            t.counts[k] = t.counts.get(k, 0) + v
            t.counted_s[k] = t.counted_s.get(k, 0.0) + s.estimated.get(k, 1.0) * s.interval
        for k, v in s.overflows.items():
            t.overflows[k] = t.overflows.get(k, 0) + v
        for k, j in s.energy_j.items():
            t.energy_j[k] = t.energy_j.get(k, 0.0) + j
        for state, pct in s.cstates.items():  # percent of the interval -> seconds, node_exporter style
            t.cstate_s[state] = t.cstate_s.get(state, 0.0) + pct / 100 * s.interval
        if s.busy is not None:
            busy_s = s.busy / 100 * s.interval
            t.busy_s = (t.busy_s or 0.0) + busy_s
            if s.bzy_mhz is not None:
                t.busy_cycles = (t.busy_cycles or 0.0) + s.bzy_mhz * 1e6 * busy_s
        elif s.util is not None and "ref_cycles" not in s.counts:
            # Software events only: the kernel's busy fraction is the utilisation; as busy seconds, rate() gives
            # it over any window (the utilization gauge is the last interval's only).
            t.busy_s = (t.busy_s or 0.0) + s.util * s.interval
        if s.package is not None:
            t.package = s.package

    def _labels(self, cpu: int) -> tuple[list[str], list[str]]:
        if self.info.core_types:
            return ["cpu", "core_type"], [str(cpu), self.info.core_types.get(cpu, "")]
        return ["cpu"], [str(cpu)]

    def describe(self) -> Iterator[Metric]:
        return iter(())  # families depend on the counted events: no registration-time checks

    def collect(self) -> Iterator[Metric]:
        self.fold()
        with self._lock:
            yield from self._families()

    def _families(self) -> list[Metric]:
        info = self.info
        base = ["cpu", "core_type"] if info.core_types else ["cpu"]
        fams: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}

        def counter(name: str, doc: str, extra: tuple[str, ...] = ()) -> CounterMetricFamily:
            if name not in fams:
                fams[name] = CounterMetricFamily(name, doc, labels=[*base, *extra])
            return fams[name]  # type: ignore[return-value]

        def gauge(name: str, doc: str, extra: tuple[str, ...] = ()) -> GaugeMetricFamily:
            if name not in fams:
                fams[name] = GaugeMetricFamily(name, doc, labels=[*base, *extra])
            return fams[name]  # type: ignore[return-value]

        sim = "true" if info.simulated else "false"
        i = GaugeMetricFamily(
            PREFIX + "info",
            "pmutop and the PMU it reads" + (" (SIMULATED: synthetic numbers)" if info.simulated else ""),
            labels=["hostname", "backend", "read_method", "cpu_model", "microarchitecture", "pmu", "simulated"],
        )
        i.add_metric(
            [info.hostname, info.backend, info.read_method, info.cpu_model, info.uarch or "", info.pmu, sim], 1
        )
        started = GaugeMetricFamily(PREFIX + "start_time_seconds", "when this exporter started (Unix time)")
        started.add_metric([], self.started)
        out: list[Metric] = [i, started]
        ci = gauge(
            PREFIX + "cpu_info", "per-CPU facts: how top-down is measured, the package", ("topdown_method", "package")
        )
        up = gauge(PREFIX + "cpu_up", "1 while the CPU's sampler runs, 0 after it stopped")
        failures = self.feed.failures()
        for cpu, t in self.totals.items():
            _, lv = self._labels(cpu)
            ci.add_metric([*lv, self.feed.topdown_method(cpu) or "", "" if t.package is None else str(t.package)], 1)
            up.add_metric(lv, 0 if cpu in failures else 1)
            counter(PREFIX + "sampled_seconds", "wall seconds of the samples folded in").add_metric(lv, t.seconds)
            counter(PREFIX + "suspect_samples", "samples left out because their numbers were suspect").add_metric(
                lv, t.suspect
            )
            if t.tsc:
                counter(PREFIX + "tsc", "TSC ticks (reference for utilisation and GHz)").add_metric(lv, t.tsc)
            for k, v in t.counts.items():
                name = metric_name(k)
                if k in TOPDOWN_CATEGORIES:
                    cat, level = TOPDOWN_CATEGORIES[k]
                    counter(name, "top-down issue slots per category", ("category", "level")).add_metric(
                        [*lv, cat, level], v
                    )
                else:
                    counter(name, f"{k} events counted").add_metric(lv, v)
                counter(
                    PREFIX + "event_counted_seconds",
                    "seconds each event was on a counter (scale multiplexed ones)",
                    ("event",),
                ).add_metric([*lv, k], t.counted_s[k])
            for k, v in t.overflows.items():
                counter(PREFIX + "counter_overflows", "counter wraps seen (and corrected)", ("counter",)).add_metric(
                    [*lv, k], v
                )
            if t.energy_j:  # only a package's first CPU carries its energy: labelled by package, not CPU
                if PREFIX + "energy_joules" not in fams:
                    fams[PREFIX + "energy_joules"] = CounterMetricFamily(
                        PREFIX + "energy_joules", "energy (RAPL) per package and domain", labels=["package", "domain"]
                    )
                package = str(t.package if t.package is not None else "")
                for k, j in t.energy_j.items():
                    fams[PREFIX + "energy_joules"].add_metric([package, k], j)
            if t.busy_s is not None:
                counter(
                    PREFIX + "busy_seconds",
                    "seconds not idle (turbostat Busy% x time; with software events only, the kernel's busy time)",
                ).add_metric(lv, t.busy_s)
            if t.busy_cycles is not None:
                counter(
                    PREFIX + "busy_cycles",
                    "clock cycles while not idle (Bzy MHz = rate of this / rate of busy_seconds)",
                ).add_metric(lv, t.busy_cycles)
            for state, seconds in t.cstate_s.items():
                counter(PREFIX + "cstate_residency_seconds", "time in each idle state", ("state",)).add_metric(
                    [*lv, state], seconds
                )
            s = t.latest
            if s is None:
                continue
            if s.temp_c is not None:
                gauge(PREFIX + "temperature_celsius", "core temperature, last interval").add_metric(lv, s.temp_c)
            if s.pkg_temp_c is not None and s.package is not None:
                if PREFIX + "package_temperature_celsius" not in fams:
                    fams[PREFIX + "package_temperature_celsius"] = GaugeMetricFamily(
                        PREFIX + "package_temperature_celsius", "package temperature, last interval", labels=["package"]
                    )
                fams[PREFIX + "package_temperature_celsius"].add_metric([str(s.package)], s.pkg_temp_c)
            if s.tsc_hz:
                gauge(PREFIX + "tsc_hertz", "TSC frequency").add_metric(lv, s.tsc_hz)
            m = for_sample(s)
            if m.ipc is not None:
                gauge(PREFIX + "ipc", "instructions per cycle, last interval").add_metric(lv, m.ipc)
            if m.util is not None:
                gauge(PREFIX + "utilization", "busy fraction, last interval").add_metric(lv, m.util)
            for field_name, value in topdown.compute(s.topdown, s.counts).items():
                if value is not None:
                    gauge(PREFIX + "tma_ratio", "top-down fraction of slots, last interval", ("category",)).add_metric(
                        [*lv, field_name.removeprefix("tma_")], value
                    )
        return out + list(fams.values()) + self._dram_families() + self._cgroup_families()

    def _dram_families(self) -> list[Metric]:
        if self.packages is None:
            return []
        source = GaugeMetricFamily(
            DRAM_SOURCE,
            "where the DRAM bandwidth comes from: uncore (the memory controllers' counters) or simulated (--demo)",
            labels=["source"],
        )
        source.add_metric([self.packages.source_name], 1)
        d = self.dram
        moved = CounterMetricFamily(
            DRAM_BYTES,
            "bytes moved between the memory controllers and DRAM (counts x 64), per package, channel and direction",
            labels=["package", "channel", "direction"],
        )
        for (package, channel, direction), value in sorted(d.bytes.items()):
            moved.add_metric([str(package), str(channel), direction], value)
        saturated = CounterMetricFamily(
            DRAM_SATURATED,
            "intervals in which the channel's counter saturated: its bytes then are a lower bound",
            labels=["package", "channel"],
        )
        for (package, channel), n in sorted(d.saturated.items()):
            saturated.add_metric([str(package), str(channel)], n)
        out: list[Metric] = [source, moved, saturated]
        if d.peak:
            peak = GaugeMetricFamily(
                DRAM_PEAK, "theoretical DRAM bandwidth of the package (channels x MT/s x 8 bytes)", labels=["package"]
            )
            for package, value in sorted(d.peak.items()):
                peak.add_metric([str(package)], value)
            out.append(peak)
        return out

    def _cgroup_families(self) -> list[Metric]:
        if self.cgroup_mode is None:
            return []
        labels = ["cgroup", "name"]
        mode = GaugeMetricFamily(
            CGROUP_PREFIX + "counters_info",
            "how the per-cgroup counters count: exact (the kernel's cgroup events), estimated (each core's counts "
            "split by busy time: not the cgroup's own counters) or simulated",
            labels=["mode"],
        )
        mode.add_metric([self.cgroup_mode], 1)
        fams: dict[str, CounterMetricFamily] = {}

        def counter(name: str, doc: str) -> CounterMetricFamily:
            if name not in fams:
                fams[name] = CounterMetricFamily(name, doc, labels=labels)
            return fams[name]

        processes = GaugeMetricFamily(CGROUP_PREFIX + "processes", "processes in the cgroup, last read", labels=labels)
        for path, t in sorted(self.cgroups.items()):
            lv = [path, t.name]
            counter(CGROUP_PREFIX + "sampled_seconds", "wall seconds of the cgroup's readings folded in").add_metric(
                lv, t.seconds
            )
            counter(
                CGROUP_PREFIX + "counted_seconds", "seconds the cgroup's counters counted (scale multiplexed ones)"
            ).add_metric(lv, t.counted_s)
            processes.add_metric(lv, t.processes)
            for k, v in t.counts.items():
                if k in CGROUP_SECONDS:
                    counter(cgroup_metric_name(k), f"seconds its tasks ran ({k})").add_metric(lv, v / CGROUP_SECONDS[k])
                else:
                    counter(cgroup_metric_name(k), f"{k} events counted in the cgroup").add_metric(lv, v)
        return [mode, processes, *fams.values()]


class Exporter:
    """The collector on a private registry (no process_/python_ metrics), served over HTTP."""

    def __init__(
        self,
        feed: SampleFeed,
        info: RunInfo,
        tasks: TaskCounterSource | None = None,
        packages: PackageFeed | None = None,
    ) -> None:
        """`tasks`: per-cgroup counters to export (read once per interval by the folding thread); `packages`:
        the DRAM bandwidth (the package sampler, read by its own thread: folded with the CPU samples)."""
        self.feed = feed
        self.tasks = tasks
        self.tasks_error: str | None = None  # why the per-cgroup counters stopped being read
        self.collector = PmuCollector(feed, info, packages)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        self._stop = threading.Event()
        self._server: WSGIServer | None = None
        self._folder: threading.Thread | None = None

    def start(self, host: str, port: int) -> None:
        from prometheus_client import make_wsgi_app

        try:
            family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        except OSError as e:
            raise PmutopError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        server_class = type("PmutopHttpServer", (_ThreadingServer,), {"address_family": family})
        try:
            self._server = make_server(
                host, port, routes(make_wsgi_app(self.registry)), server_class, handler_class=_QuietHandler
            )
        except OSError as e:
            raise PmutopError(f"cannot listen on {host}:{port}: {e.strerror or e}") from None
        threading.Thread(target=self._server.serve_forever, name="pmutop-http", daemon=True).start()
        self._folder = threading.Thread(target=self._fold_loop, name="pmutop-exporter", daemon=True)
        self._folder.start()

    def _fold_loop(self) -> None:
        seen = {cpu: 0 for cpu in self.feed.cpus}
        if self.tasks is not None:
            self.tasks.begin()
        while not self._stop.is_set():
            if self.feed.wait_for_samples(seen, timeout=0.5, stop=self._stop):
                seen = {cpu: ring.count for cpu, ring in self.feed.rings.items()}
                self.collector.fold()
                if self.tasks is not None:
                    try:
                        self.read_tasks()
                    except (PmutopError, OSError) as e:  # the CPU counters go on being served
                        self.tasks_error, self.tasks = str(e), None

    def read_tasks(self) -> None:
        """One interval's per-cgroup readings into the totals (the folding thread; tests call it directly).
        The newest sample of each CPU goes along, for a source that splits the cores' counts (msr)."""
        assert self.tasks is not None
        latest = [s for s in (ring.latest() for ring in self.feed.rings.values()) if s is not None]
        self.collector.fold_tasks(self.tasks.read(latest))

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._folder is not None:
            self._folder.join(2.0)


class _ThreadingServer(socketserver.ThreadingMixIn, WSGIServer):
    daemon_threads = True  # a slow scraper never holds the exit


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log on stderr (it is for pmutop's own lines)."""


StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def routes(metrics: WsgiApp) -> WsgiApp:
    """/metrics (GET, and HEAD: the same headers, no body), a small page at /, 404 for anything else."""

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path, method = environ.get("PATH_INFO") or "/", environ.get("REQUEST_METHOD", "GET")
        if path == "/metrics" and method == "HEAD":
            got: list[Any] = []
            body = b"".join(metrics(dict(environ, REQUEST_METHOD="GET"), lambda *a: got.extend(a)))
            headers = [(k, v) for k, v in got[1] if k.lower() != "content-length"]
            start_response(got[0], [*headers, ("Content-Length", str(len(body)))])
            return [b""]
        if path == "/metrics":
            return metrics(environ, start_response)
        if path == "/" and method in ("GET", "HEAD"):
            start_response(
                "200 OK", [("Content-Type", "text/html; charset=utf-8"), ("Content-Length", str(len(LANDING_PAGE)))]
            )
            return [b"" if method == "HEAD" else LANDING_PAGE]
        text = b"not found: pmutop serves /metrics\n"
        start_response(
            "404 Not Found", [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(text)))]
        )
        return [text]

    return app
