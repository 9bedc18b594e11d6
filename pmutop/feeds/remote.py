"""`pmutop --connect URL`: a SampleFeed made from remote `pmutop serve` exporters.

Each interval every host's /metrics is scraped; the growth of its *_total counters since the last scrape
becomes one Sample per CPU, keyed as the local backends key them, so the live view shows it unchanged.
Host h's CPU c gets the id h * HOST_STRIDE + c (rows of a host stay together) and the label "host:c".
A host that cannot be reached gets an error sample on its CPUs (shown on screen) and is retried every
interval; when it answers again its rows come back by themselves.
"""

from __future__ import annotations

import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from pmutop.core.errors import PmutopError
from pmutop.core.feed import HostLabels, LostHosts, SampleFeed
from pmutop.core.ring import SampleRing
from pmutop.core.run_description import RunInfo
from pmutop.core.sample import Sample
from pmutop.derive.prometheus_names import PREFIX, TOPDOWN_CATEGORIES, metric_name
from pmutop.feeds.round_waits import RoundWaits
from pmutop.feeds.urls import split_url

HOST_STRIDE = 100_000
TIMEOUT_S = 3.0
EXPORTER_SOURCE = "exporter"  # a power value's source (Sample.power_src) when a `pmutop serve` measured it
POWER_SOURCED = ("busy", "bzy_mhz", "cstates", "temp_c", "pkg_temp_c", "energy_j")
Labels = tuple[tuple[str, str], ...]


def normalise_url(text: str) -> str:
    """[http(s)://]HOST:PORT[/path] -> the URL scraped (pmutop.feeds.urls' rule, as --prometheus's); anything
    else is a usage error (status 2)."""
    parts = split_url(text, "--connect", "http://127.0.0.1:9464")
    url = parts.geturl()
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/metrics"


def same_address(url: str) -> tuple[str, str, int, str]:
    """What tells two URLs apart: scheme, host (case-insensitive), port (the scheme's default if none), path."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return parts.scheme, (parts.hostname or "").lower(), port, parts.path


@dataclass
class Scrape:
    """One host's exporter output, per CPU."""

    info: dict[str, str] = field(default_factory=dict)
    started: float | None = None  # the exporter's start (Unix s): with the hostname, which exporter this is
    totals: dict[int, dict[str, float]] = field(default_factory=dict)  # cpu -> key -> total
    counted: dict[int, dict[str, float]] = field(default_factory=dict)  # cpu -> key -> counted seconds
    overflows: dict[int, dict[str, float]] = field(default_factory=dict)
    special: dict[int, dict[str, float]] = field(default_factory=dict)  # tsc, sampled_seconds
    gauges: dict[int, dict[str, float]] = field(default_factory=dict)  # tsc_hertz, utilization
    methods: dict[int, str] = field(default_factory=dict)
    core_types: dict[int, str] = field(default_factory=dict)
    down: dict[int, bool] = field(default_factory=dict)
    # Beside the counters (what the power sources measured): cumulative seconds / cycles, per-package energy.
    busy: dict[int, dict[str, float]] = field(default_factory=dict)  # cpu -> busy_seconds, busy_cycles
    cstates: dict[int, dict[str, float]] = field(default_factory=dict)  # cpu -> state -> seconds resident
    temp_c: dict[int, float] = field(default_factory=dict)
    packages: dict[int, int] = field(default_factory=dict)  # cpu -> package
    energy_j: dict[int, dict[str, float]] = field(default_factory=dict)  # package -> domain -> joules
    pkg_temp_c: dict[int, float] = field(default_factory=dict)  # package -> temperature

    def advanced(self, cpu: int, since: Scrape) -> bool:
        """`cpu` has samples folded in after `since` was scraped."""
        seconds = self.special.get(cpu, {}).get("sampled_seconds", 0.0)
        return seconds > since.special.get(cpu, {}).get("sampled_seconds", 0.0)

    def restarted(self, since: Scrape) -> bool:
        """The exporter began again after `since` (its totals start from zero)."""
        return any(
            self.special.get(cpu, {}).get("sampled_seconds", 0.0) < old.get("sampled_seconds", 0.0)
            for cpu, old in since.special.items()
        )


def parse(text: str) -> Scrape:
    out = Scrape()
    fams = {f.name: f for f in text_string_to_metric_families(text)}

    def each(name: str):  # type: ignore[no-untyped-def]
        fam = fams.get(name)
        for s in fam.samples if fam else ():
            if s.name.endswith("_created"):
                continue
            yield int(s.labels["cpu"]), s.labels, s.value

    for s in fams[PREFIX + "info"].samples if PREFIX + "info" in fams else ():
        out.info = dict(s.labels)
    for s in fams[PREFIX + "start_time_seconds"].samples if PREFIX + "start_time_seconds" in fams else ():
        out.started = s.value
    for cpu, labels, _ in each(PREFIX + "cpu_info"):
        out.methods[cpu] = labels.get("topdown_method", "")
        if labels.get("core_type"):
            out.core_types[cpu] = labels["core_type"]
        if labels.get("package", "").isdigit():
            out.packages[cpu] = int(labels["package"])
        out.totals.setdefault(cpu, {})
    _parse_power(fams, each, out)
    for cpu, _, value in each(PREFIX + "cpu_up"):
        out.down[cpu] = value == 0
    # The exact event keys come from event_counted_seconds' `event` label; their families from metric_name.
    for cpu, labels, value in each(PREFIX + "event_counted_seconds"):
        out.counted.setdefault(cpu, {})[labels["event"]] = value
    by_family: dict[str, list[str]] = {}
    for counted in out.counted.values():
        for k in counted:
            by_family.setdefault(metric_name(k), [])
            if k not in by_family[metric_name(k)]:
                by_family[metric_name(k)].append(k)
    category_key = {cat: k for k, (cat, _) in TOPDOWN_CATEGORIES.items()}
    for family, keys in by_family.items():
        for cpu, labels, value in each(family):
            key = category_key.get(labels.get("category", ""), keys[0]) if "category" in labels else keys[0]
            out.totals.setdefault(cpu, {})[key] = value
    for cpu, labels, value in each(PREFIX + "counter_overflows"):
        out.overflows.setdefault(cpu, {})[labels["counter"]] = value
    for name in ("tsc", "sampled_seconds"):
        for cpu, _, value in each(PREFIX + name):
            out.special.setdefault(cpu, {})[name] = value
    for name in ("tsc_hertz", "utilization"):
        for cpu, _, value in each(PREFIX + name):
            out.gauges.setdefault(cpu, {})[name] = value
    return out


def _parse_power(fams: dict[str, Any], each: Callable[[str], Any], out: Scrape) -> None:
    """What serve exports beside the counters: Busy% and Bzy MHz (as busy seconds and cycles), C-states,
    temperatures and package energy."""
    for name in ("busy_seconds", "busy_cycles"):
        for cpu, _, value in each(PREFIX + name):
            out.busy.setdefault(cpu, {})[name] = value
    for cpu, labels, value in each(PREFIX + "cstate_residency_seconds"):
        out.cstates.setdefault(cpu, {})[labels["state"]] = value
    for cpu, _, value in each(PREFIX + "temperature_celsius"):
        out.temp_c[cpu] = value
    for family, into in (("energy_joules", out.energy_j), ("package_temperature_celsius", out.pkg_temp_c)):
        fam = fams.get(PREFIX + family)
        for s in fam.samples if fam else ():
            if s.name.endswith("_created") or not s.labels.get("package", "").isdigit():
                continue
            package = int(s.labels["package"])
            if "domain" in s.labels:
                out.energy_j.setdefault(package, {})[s.labels["domain"]] = s.value
            else:
                into[package] = s.value


def fetch(url: str, timeout: float = TIMEOUT_S) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # the user's own URL: http(s) only
        return str(r.read().decode("utf-8", "replace"))


def _why(e: BaseException) -> str:
    if isinstance(e, urllib.error.URLError):
        text = str(getattr(e.reason, "strerror", None) or e.reason)
    else:
        text = str(e) or type(e).__name__
    return re.sub(r"\s*\(_ssl\.c:\d+\)", "", text)  # not OpenSSL's source line


@dataclass
class Host:
    index: int
    url: str
    name: str
    cpus: list[int]
    last: Scrape | None = None
    down_since: float | None = None
    why: str = ""


class RemoteFeed(RoundWaits, SampleFeed, HostLabels, LostHosts):
    """SampleFeed over HTTP. `fetch_text` is replaceable for tests.

    Polls publish in rounds: one sample for every CPU of every host (an error sample for a host that does
    not answer), so sample n of every CPU covers the same poll, as a local engine's do, and a recording of
    the feed groups into intervals like a local one. A round waits (up to 3 intervals or 10 s) until every
    answering host has something new on every CPU; the deltas then span the polls waited."""

    def __init__(self, urls: list[str], interval: float, fetch_text: Callable[[str], str] = fetch) -> None:
        self._fetch = fetch_text
        self._interval = interval
        self.hosts: list[Host] = []
        self.cpus: list[int] = []
        self.rings: dict[int, SampleRing] = {}
        self.labels: dict[int, str] = {}  # cpu id -> "host:cpu", what the view shows
        self.core_types: dict[int, str] = {}
        self.notes: list[str] = []  # one line each, for stderr (duplicates dropped)
        self._keys: dict[int, list[str]] = {}
        self._methods: dict[int, str | None] = {}
        self._seq: dict[int, int] = {}
        self._round_at = time.monotonic()  # when the last round was published
        self._new = threading.Event()
        self._stop = threading.Event()
        self._start = time.monotonic()
        self.info: dict[str, str] = {}
        checked = [(raw, normalise_url(raw)) for raw in urls]  # every URL checked before any is fetched
        kept: dict[str, list[str]] = {}  # the URL shown -> the others that name the same exporter
        by_address: dict[tuple[str, str, int, str], str] = {}
        by_identity: dict[tuple[str, float], str] = {}
        for raw, url in checked:
            if same_address(url) in by_address:
                kept[by_address[same_address(url)]].append(raw)
                continue
            try:
                scrape = parse(self._fetch(url))
            except Exception as e:
                raise PmutopError(f"--connect {raw}: {_why(e)}") from None
            if not scrape.info:
                raise PmutopError(f"--connect {raw}: no pmutop_info there (is it `pmutop serve`?)")
            identity = (scrape.info.get("hostname", ""), scrape.started) if scrape.started else None
            if identity is not None and identity in by_identity:  # another name of an exporter already shown
                kept[by_identity[identity]].append(raw)
                continue
            by_address[same_address(url)] = raw
            if identity is not None:
                by_identity[identity] = raw
            kept[raw] = []
            self._add_host(url, scrape)
        for first, others in kept.items():
            if others:
                self.notes.append(f"--connect {' and '.join(others)}: the same exporter as {first}; shown once")
        if len({h.name for h in self.hosts}) < len(self.hosts):  # same hostname twice: tell them by address
            for h in self.hosts:
                h.name = urlsplit(h.url).netloc
                for cpu in h.cpus:
                    self.labels[h.index * HOST_STRIDE + cpu] = f"{h.name}:{cpu}"
        self._thread = threading.Thread(target=self._poll_loop, name="pmutop-remote", daemon=True)

    def _add_host(self, url: str, scrape: Scrape) -> None:
        i = len(self.hosts)
        name = scrape.info.get("hostname") or urlsplit(url).hostname or url
        host = Host(i, url, name, sorted(scrape.totals), last=scrape)
        self.hosts.append(host)
        self.info = self.info or scrape.info
        for cpu in host.cpus:
            gid = i * HOST_STRIDE + cpu
            self.cpus.append(gid)
            self.rings[gid] = SampleRing()
            self.labels[gid] = f"{name}:{cpu}"
            self._keys[gid] = list(scrape.totals.get(cpu, {}))
            self._methods[gid] = scrape.methods.get(cpu) or None
            self._seq[gid] = 0
            if cpu in scrape.core_types:
                self.core_types[gid] = scrape.core_types[cpu]

    @property
    def simulated(self) -> bool:
        return any((h.last.info if h.last else {}).get("simulated") == "true" for h in self.hosts)

    def power_fields(self) -> list[str]:
        """The power columns the exporters' first answers fill (pmutop.derive.power.SERIES)."""
        families: set[str] = set()
        for h in self.hosts:
            scrape = h.last or Scrape()
            if any("busy_seconds" in b for b in scrape.busy.values()):
                families.add("busy_seconds_total")
            if any("busy_cycles" in b for b in scrape.busy.values()):
                families.add("busy_cycles_total")
            if scrape.temp_c:
                families.add("temperature_celsius")
            if any("package" in e for e in scrape.energy_j.values()):
                families.add("energy_joules_total")
        return power_fields(families)

    def describe(self) -> dict[str, Any]:
        """The recording header's backend facts: which exporters, and each CPU id's row name."""
        return {
            "backend": "remote",
            "hosts": [{"name": h.name, "url": h.url} for h in self.hosts],
            "labels": dict(self.labels),
        }

    # -- SampleFeed

    @property
    def interval(self) -> float:
        return self._interval

    def keys(self, cpu: int) -> list[str]:
        return self._keys[cpu]

    def topdown_method(self, cpu: int) -> str | None:
        return self._methods[cpu]

    def elapsed(self) -> float:
        return time.monotonic() - self._start

    def failures(self) -> dict[int, str]:
        return {}  # a lost host comes back: its rows show the error meanwhile, they do not stop

    def set_interval(self, seconds: float) -> None:
        self._interval = seconds  # how often we scrape; the remote samplers keep their own interval

    # -- polling

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(TIMEOUT_S + 1)

    def lost(self) -> list[str]:
        """One line per host that cannot be reached now."""
        return [f"{h.name} ({h.url}): connection lost: {h.why}; retrying" for h in self.hosts if h.down_since]

    def _poll_loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll()

    def poll(self) -> None:
        """Scrape every host; publish a round when each answering host has news on every CPU (or waited)."""
        scrapes: dict[int, Scrape] = {}
        for host in self.hosts:
            try:
                scrapes[host.index] = parse(self._fetch(host.url))
            except Exception as e:
                if host.down_since is None:
                    host.down_since, host.why = time.monotonic(), _why(e)
        rebased: set[int] = set()
        behind = False
        for host in self.hosts:
            new = scrapes.get(host.index)
            if new is None:
                continue
            if host.down_since is not None or host.last is None or new.restarted(host.last):
                # Back after an outage, or its totals began again: this scrape is the new baseline.
                host.down_since, host.why, host.last = None, "", new
                rebased.add(host.index)
            elif any(not (new.down.get(c) or new.advanced(c, host.last)) for c in host.cpus):
                behind = True  # a remote sampler has not published since the last round (yet)
        waited = time.monotonic() - self._round_at
        if behind and waited < max(3 * self._interval, 10.0):
            return  # the next poll's deltas span this one too
        self._round_at = time.monotonic()
        for host in self.hosts:
            new = scrapes.get(host.index)
            if new is None:
                self._push_errors(host, f"{host.name}: connection lost ({host.why})")
            elif host.index in rebased:
                self._push_errors(host, f"{host.name}: connected again, waiting for its next sample")
            else:
                self._push_deltas(host, host.last, new, waited)
                host.last = new
        self._new.set()

    def _push_errors(self, host: Host, message: str) -> None:
        for cpu in host.cpus:
            self._push(host, cpu, error=message)

    def _push(self, host: Host, cpu: int, **kw: object) -> None:
        gid = host.index * HOST_STRIDE + cpu
        self._seq[gid] += 1
        base: dict[str, object] = dict(
            cpu=gid, seq=self._seq[gid], time=self.elapsed(), interval=0.0, tsc=None, tsc_hz=None, counts={}
        )
        base.update(kw)
        self.rings[gid].push(Sample(**base))  # type: ignore[arg-type]

    def _push_deltas(self, host: Host, old: Scrape | None, new: Scrape, waited: float) -> None:
        first_of_package: dict[int, int] = {}
        for cpu in sorted(host.cpus, reverse=True):
            if cpu in new.packages:
                first_of_package[new.packages[cpu]] = cpu
        for cpu in host.cpus:
            if new.down.get(cpu):
                self._push(host, cpu, error=f"{host.name}: cpu {cpu} stopped on the remote side")
                continue
            if old is None or not new.advanced(cpu, old):
                self._push(host, cpu, error=f"{host.name}: no new sample from cpu {cpu} for {waited:.0f} s")
                continue
            span = new.special[cpu]["sampled_seconds"] - old.special.get(cpu, {}).get("sampled_seconds", 0.0)
            counts: dict[str, int] = {}
            estimated: dict[str, float] = {}
            for k, v in new.totals[cpu].items():
                before = old.totals.get(cpu, {}).get(k, 0.0)
                counts[k] = round(v - before)
                counted = new.counted.get(cpu, {}).get(k, 0.0) - old.counted.get(cpu, {}).get(k, 0.0)
                if counted < span * 0.999:
                    estimated[k] = max(0.0, counted / span)
            overflows = {
                k: round(v - old.overflows.get(cpu, {}).get(k, 0.0)) for k, v in new.overflows.get(cpu, {}).items()
            }
            tsc_now = new.special.get(cpu, {}).get("tsc")
            tsc_was = old.special.get(cpu, {}).get("tsc", 0.0)
            gauges = new.gauges.get(cpu, {})
            package = new.packages.get(cpu)
            first = package is not None and first_of_package.get(package) == cpu
            self._push(
                host,
                cpu,
                interval=span,
                tsc=None if tsc_now is None else round(tsc_now - tsc_was),
                tsc_hz=gauges.get("tsc_hertz"),
                counts=counts,
                overflows={k: v for k, v in overflows.items() if v},
                estimated=estimated,
                util=None if "ref_cycles" in counts else gauges.get("utilization"),
                topdown=new.methods.get(cpu) or None,
                **exported(_power_deltas(old, new, cpu, span, first)),
            )


def _power_deltas(old: Scrape, new: Scrape, cpu: int, span: float, first_of_package: bool) -> dict[str, Any]:
    """Busy%, Bzy MHz, C-state % and temperatures of one CPU over `span` seconds; the package's energy on
    its first CPU (as a local sample carries it). Only what the exporter served."""
    out: dict[str, Any] = {}
    now, was = new.busy.get(cpu, {}), old.busy.get(cpu, {})
    if "busy_seconds" in now:
        busy_s = now["busy_seconds"] - was.get("busy_seconds", 0.0)
        out["busy"] = max(0.0, min(100.0, 100 * busy_s / span))
        if "busy_cycles" in now and busy_s > 0:
            out["bzy_mhz"] = (now["busy_cycles"] - was.get("busy_cycles", 0.0)) / busy_s / 1e6
    cstates = new.cstates.get(cpu, {})
    if cstates:
        before = old.cstates.get(cpu, {})
        out["cstates"] = {k: max(0.0, 100 * (v - before.get(k, 0.0)) / span) for k, v in cstates.items()}
    if cpu in new.temp_c:
        out["temp_c"] = new.temp_c[cpu]
    package = new.packages.get(cpu)
    if package is not None:
        out["package"] = package
        if first_of_package:
            energy, before_j = new.energy_j.get(package, {}), old.energy_j.get(package, {})
            out["energy_j"] = {k: max(0.0, j - before_j.get(k, 0.0)) for k, j in energy.items()}
            if package in new.pkg_temp_c:
                out["pkg_temp_c"] = new.pkg_temp_c[package]
    return out


_SOURCES: dict[tuple[str, ...], dict[str, str]] = {}  # one power_src per set of fields, shared by the samples


def exported(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields`, given power_src naming the exporter as the source of each power value it carries (the live view
    shows a power column for the fields some sample's power_src names). Samples never change their power_src:
    those with the same fields share one (no new dict per CPU per round)."""
    present = tuple(k for k in POWER_SOURCED if fields.get(k) not in (None, {}))
    if present:
        src = _SOURCES.get(present)
        if src is None:
            src = _SOURCES[present] = {k: EXPORTER_SOURCE for k in present}
        fields["power_src"] = src
    return fields


def power_fields(families: set[str]) -> list[str]:
    """The power columns (pmutop.derive.power.SERIES) an exporter serving these families (names without the
    pmutop_ prefix) fills: a batch table's header names them before the first interval."""
    wanted = {
        "busy": "busy_seconds_total",
        "bzy_mhz": "busy_cycles_total",
        "temp_c": "temperature_celsius",
        "pkg_watts": "energy_joules_total",
    }
    return [k for k, family in wanted.items() if family in families]


def remote_info(feed: RemoteFeed) -> RunInfo:
    """The live view's header for remote hosts: the first host's machine, every host's name."""
    first = feed.info
    more = len(feed.hosts) - 1
    return RunInfo(
        hostname=", ".join(h.name for h in feed.hosts),
        cpu_model=first.get("cpu_model", "?"),
        uarch=first.get("microarchitecture") or None,
        pmu=first.get("pmu", "PMU") + (f" (+{more} more hosts)" if more else ""),
        backend="remote " + first.get("backend", "?"),
        read_method="http",
        simulated=feed.simulated,
        hypervisor=False,
        cpus=feed.cpus,
        core_types=feed.core_types,
    )
