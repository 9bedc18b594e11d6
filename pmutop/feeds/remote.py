"""`pmutop --connect URL`: a SampleFeed made from remote `pmutop serve` exporters.

Each interval every host's /metrics is scraped; the growth of its *_total counters since the last scrape
becomes one Sample per CPU, keyed as the local backends key them, so the live view shows it unchanged.
Host h's CPU c gets the id h * HOST_STRIDE + c (rows of a host stay together) and the label "host:c".
A host that cannot be reached gets an error sample on its CPUs (shown on screen) and is retried every
interval; when it answers again its rows come back by themselves.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

from pmutop.core.errors import PmutopError, UsageError
from pmutop.core.feed import HostLabels, LostHosts, SampleFeed
from pmutop.core.ring import SampleRing
from pmutop.core.run_description import RunInfo
from pmutop.core.sample import Sample
from pmutop.derive.prometheus_names import PREFIX, TOPDOWN_CATEGORIES, metric_name

HOST_STRIDE = 100_000
TIMEOUT_S = 3.0
Labels = tuple[tuple[str, str], ...]


def normalise_url(text: str) -> str:
    url = text if "://" in text else f"http://{text}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"--connect {text!r}: expected http://HOST:PORT")
    return url if parts.path not in ("", "/") else url.rstrip("/") + "/metrics"


@dataclass
class Scrape:
    """One host's exporter output, per CPU."""

    info: dict[str, str] = field(default_factory=dict)
    totals: dict[int, dict[str, float]] = field(default_factory=dict)  # cpu -> key -> total
    counted: dict[int, dict[str, float]] = field(default_factory=dict)  # cpu -> key -> counted seconds
    overflows: dict[int, dict[str, float]] = field(default_factory=dict)
    special: dict[int, dict[str, float]] = field(default_factory=dict)  # tsc, sampled_seconds
    gauges: dict[int, dict[str, float]] = field(default_factory=dict)  # tsc_hertz, utilization
    methods: dict[int, str] = field(default_factory=dict)
    core_types: dict[int, str] = field(default_factory=dict)
    down: dict[int, bool] = field(default_factory=dict)


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
    for cpu, labels, _ in each(PREFIX + "cpu_info"):
        out.methods[cpu] = labels.get("topdown_method", "")
        if labels.get("core_type"):
            out.core_types[cpu] = labels["core_type"]
        out.totals.setdefault(cpu, {})
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


def fetch(url: str, timeout: float = TIMEOUT_S) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:  # the user's own URL: http(s) only
        return str(r.read().decode("utf-8", "replace"))


def _why(e: BaseException) -> str:
    if isinstance(e, urllib.error.URLError):
        return str(getattr(e.reason, "strerror", None) or e.reason)
    return str(e) or type(e).__name__


@dataclass
class Host:
    index: int
    url: str
    name: str
    cpus: list[int]
    last: Scrape | None = None
    down_since: float | None = None
    why: str = ""


class RemoteFeed(SampleFeed, HostLabels, LostHosts):
    """SampleFeed over HTTP. `fetch_text` is replaceable for tests."""

    def __init__(self, urls: list[str], interval: float, fetch_text: Callable[[str], str] = fetch) -> None:
        self._fetch = fetch_text
        self._interval = interval
        self.hosts: list[Host] = []
        self.cpus: list[int] = []
        self.rings: dict[int, SampleRing] = {}
        self.labels: dict[int, str] = {}  # cpu id -> "host:cpu", what the view shows
        self.core_types: dict[int, str] = {}
        self._keys: dict[int, list[str]] = {}
        self._methods: dict[int, str | None] = {}
        self._seq: dict[int, int] = {}
        self._new = threading.Event()
        self._stop = threading.Event()
        self._start = time.monotonic()
        self.info: dict[str, str] = {}
        for i, raw in enumerate(urls):
            url = normalise_url(raw)
            try:
                scrape = parse(self._fetch(url))
            except Exception as e:
                raise PmutopError(f"--connect {raw}: {_why(e)}") from None
            if not scrape.info:
                raise PmutopError(f"--connect {raw}: no pmutop_info there (is it `pmutop serve`?)")
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
        if len({h.name for h in self.hosts}) < len(self.hosts):  # same hostname twice: tell them by address
            for h in self.hosts:
                h.name = urlsplit(h.url).netloc
                for cpu in h.cpus:
                    self.labels[h.index * HOST_STRIDE + cpu] = f"{h.name}:{cpu}"
        self._thread = threading.Thread(target=self._poll_loop, name="pmutop-remote", daemon=True)

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

    def wait_for_samples(self, counts, timeout, on_wait=None, stop=None) -> bool:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout
        while True:
            # Any CPU: a poll publishes all reachable hosts at once, and a lost host must not hold the others.
            if any(self.rings[c].count > n for c, n in counts.items()):
                return True
            if time.monotonic() >= deadline or (stop is not None and stop.is_set()):
                return False
            self._new.wait(0.05)
            self._new.clear()
            if on_wait:
                on_wait()

    def wake_waiters(self) -> None:
        self._new.set()

    # -- polling

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S + 1)

    def lost(self) -> list[str]:
        """One line per host that cannot be reached now."""
        return [f"{h.name} ({h.url}): connection lost: {h.why}; retrying" for h in self.hosts if h.down_since]

    def _poll_loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.poll()

    def poll(self) -> None:
        for host in self.hosts:
            try:
                scrape = parse(self._fetch(host.url))
            except Exception as e:
                if host.down_since is None:
                    host.down_since, host.why = time.monotonic(), _why(e)
                    self._push_errors(host, f"{host.name}: connection lost ({host.why})")
                continue
            if host.down_since is not None:
                host.down_since, host.why = None, ""
            self._push_deltas(host, host.last, scrape)
            host.last = scrape
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

    def _push_deltas(self, host: Host, old: Scrape | None, new: Scrape) -> None:
        for cpu in host.cpus:
            now_s = new.special.get(cpu, {}).get("sampled_seconds", 0.0)
            was_s = old.special.get(cpu, {}).get("sampled_seconds", 0.0) if old else 0.0
            if cpu not in new.totals or now_s <= was_s:
                continue  # nothing new from this CPU yet, or the exporter restarted (its totals began again)
            if new.down.get(cpu):
                self._push(host, cpu, error=f"{host.name}: cpu {cpu} stopped on the remote side")
                continue
            span = now_s - was_s
            counts: dict[str, int] = {}
            estimated: dict[str, float] = {}
            for k, v in new.totals[cpu].items():
                before = old.totals.get(cpu, {}).get(k, 0.0) if old else 0.0
                counts[k] = round(v - before)
                counted = new.counted.get(cpu, {}).get(k, 0.0) - (old.counted.get(cpu, {}).get(k, 0.0) if old else 0.0)
                if counted < span * 0.999:
                    estimated[k] = max(0.0, counted / span)
            overflows = {
                k: round(v - (old.overflows.get(cpu, {}).get(k, 0.0) if old else 0.0))
                for k, v in new.overflows.get(cpu, {}).items()
            }
            tsc_now = new.special.get(cpu, {}).get("tsc")
            tsc_was = old.special.get(cpu, {}).get("tsc", 0.0) if old else 0.0
            gauges = new.gauges.get(cpu, {})
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
            )


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
        simulated=any((h.last.info if h.last else {}).get("simulated") == "true" for h in feed.hosts),
        hypervisor=False,
        cpus=feed.cpus,
        core_types=feed.core_types,
    )
