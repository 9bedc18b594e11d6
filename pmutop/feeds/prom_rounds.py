"""What the two feeds over a Prometheus server's HTTP API share (pmutop.feeds.prometheus: one row per CPU;
pmutop.feeds.fleet: one row per instance): the set-up (discovery, the scrape interval, step and window), the
polling thread, a round pushed into the rings, and hosts that are lost, come back, restart or are new."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from pmutop.core.feed import HostLabels, LostHosts, SampleFeed
from pmutop.core.ring import SampleRing
from pmutop.core.sample import Sample
from pmutop.derive.prometheus_names import PREFIX
from pmutop.feeds.promql import Client, PromError, Server, Vector
from pmutop.feeds.round_waits import RoundWaits

DEFAULT_SCRAPE_S = 15.0  # Prometheus' default scrape_interval, when the server's cannot be told
RESTART_SHOWN_S = 60.0  # how long "restarted" stays in the banner
MAX_LOST_NAMED = 3  # more lost hosts than this are one line with a count
STOP_WAIT_S = 0.3  # how long stop() waits for the polling thread to end


@dataclass(frozen=True)
class Query:
    name: str
    expr: str
    by: tuple[str, ...]


class Instance(Protocol):
    """One pmutop instance as Prometheus labels it (its rows' state)."""

    instance: str
    info: dict[str, str]
    started: float | None  # pmutop_start_time_seconds: another value means the exporter restarted
    lost_since: float | None  # Unix time it was first missing from the server's answer
    restarted_at: float | None


InstanceT = TypeVar("InstanceT", bound=Instance)


def clock_text(at: float) -> str:
    return datetime.fromtimestamp(at, tz=UTC).strftime("%H:%M:%S UTC")


class PromRounds(RoundWaits, SampleFeed, HostLabels, LostHosts, Generic[InstanceT]):
    """A SampleFeed over a Prometheus server. Construction discovers the instances (a server that cannot be
    asked, or selects none, is a PmutopError); start() polls every step in a thread. A subclass discovers
    (`_discover`: its hosts, rows and rings; returns the scrape interval) and builds a round (`build`)."""

    thread_name: ClassVar[str]  # the polling thread's
    pool_name: ClassVar[str]  # the query pool's threads'

    def __init__(
        self,
        server: Server,
        interval: float,
        match: str,
        timeout: float | None = None,
        on_notice: Callable[[str], None] | None = None,
        clock: Callable[[], float] = time.time,
        at: float | None = None,
        client: Client | None = None,
    ) -> None:
        """`at`: when to find the instances (Unix time; default now): a past window's end. `client`: what
        answers the queries (default: the server's HTTP API; the screenshots' canned one)."""
        self.server = server
        self.match = match
        self.on_notice = on_notice  # each change of state, one line (batch: stderr)
        self._clock = clock
        self._asked = interval
        self._timeout = timeout
        self.client = client or Client(server, timeout or 10.0)
        self.hosts: list[InstanceT] = []
        self.cpus: list[int] = []
        self.rings: dict[int, SampleRing] = {}
        self.labels: dict[int, str] = {}  # HostLabels: row id -> what the view shows
        self.notes: list[str] = []  # said once at start (stderr)
        self.problem: str | None = None  # the server's last failure, while it lasts
        self.newcomers: set[str] = set()  # instances that appeared after the start (not shown)
        self.last_round_s = 0.0  # how long the newest live round took (asked, built, pushed)
        self._families: set[str] = set()
        self._seq: dict[int, int] = {}
        self._new = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix=self.pool_name)
        try:
            self.scrape_s = self._discover(round(self._clock() if at is None else at, 3))
        except BaseException:
            self.close()
            raise
        self.step, self.window = self._pace(interval)
        self.history_timeout = self.client.timeout  # query_range's: the history is many rounds in one answer
        self.wall0 = self._clock()  # Unix time of a sample's time 0 (prefill moves it back: the history's start)
        self.live0 = self.wall0  # Unix time of elapsed() == 0: the live rounds' start, not the history's
        if self.client.timeout > max(self.step, 2.0):
            self.client.timeout = max(self.step, 2.0)  # a slow server must not hold rounds back for long

    # -- what a subclass provides

    def _discover(self, at: float) -> float:
        """Find the instances at `at` (hosts, rows, rings); returns the scrape interval."""
        raise NotImplementedError

    def queries(self) -> list[Query]:
        """One query per metric for the whole fleet, at the current window."""
        raise NotImplementedError

    def build(self, values: dict[str, Vector], at: float) -> list[tuple[int, dict[str, Any]]]:
        """One round's Sample fields per row id (seq, cpu and time are added when pushed)."""
        raise NotImplementedError

    # -- set-up

    def _scrape_interval(self, at: float) -> float:
        """How often the server scrapes: the spacing of one instance's points over the last minute."""
        first = json.dumps(self.hosts[0].instance)
        try:
            stamps = self.client.stamps(f"{PREFIX}start_time_seconds{{instance={first}}}[1m]", at)
        except PromError:
            return DEFAULT_SCRAPE_S
        gaps = sorted(b - a for a, b in itertools.pairwise(stamps) if b > a)
        if not gaps:
            return DEFAULT_SCRAPE_S
        # Scrape times jitter by milliseconds; scrape intervals are set in tenths of a second or coarser.
        return max(0.1, round(gaps[len(gaps) // 2], 1))

    def _step_and_window(self, interval: float) -> tuple[float, float]:
        """The step: at least one scrape (nothing new comes sooner). The window: at least three, because
        rate() needs two points and the newest scrape may be late, missed or not stored yet at the round's
        time; a window of exactly two left one round in 50 without a rate against a real Prometheus
        scraping every 1 s (each CPU's row a hole: "no samples ... in the last 2 s")."""
        step = max(interval, self.scrape_s)
        return step, max(step, 3 * self.scrape_s)

    def _pace(self, interval: float) -> tuple[float, float]:
        """The step and the window, said at start when they differ from the interval asked for."""
        step, window = self._step_and_window(interval)
        if step > interval or window > step:
            self.notes.append(
                f"Prometheus scrapes every {self.scrape_s:g} s: a new interval every {step:g} s, "
                f"each the rates over the last {window:g} s"
            )
        return step, window

    # -- a round

    def _push_round(self, at: float, built: list[tuple[int, dict[str, Any]]]) -> list[Sample]:
        now = round(at - self.wall0, 3)
        pushed = []
        for row, fields in built:
            self._seq[row] += 1
            base: dict[str, Any] = {"interval": 0.0, "tsc": None, "tsc_hz": None, "counts": {}}
            s = Sample(cpu=row, seq=self._seq[row], time=now, **(base | fields))
            self.rings[row].push(s)
            pushed.append(s)
        self._new.set()
        return pushed

    def poll(self, at: float | None = None) -> None:
        """One live round at `at` (now): every query, then one sample per row (error samples when the server
        failed: the rows say why, the feed goes on)."""
        began = time.perf_counter()
        at = round(self._clock() if at is None else at, 3)
        try:
            values = self.ask_round(at)
        except PromError as e:
            if self._stop.is_set():
                return  # stopped meanwhile (the client closed under the round): nothing more is pushed
            if self.problem != str(e):
                self._notice(f"{e}; retrying")
            self.problem = str(e)
            self._push_round(at, [(row, {"error": str(e)}) for row in self.cpus])
            return
        if self.problem is not None:
            self.problem = None
            self._notice(f"prometheus {self.server.shown}: answering again")
        if self._stop.is_set():
            return
        self.update_hosts(values["start"], at)
        self._push_round(at, self.build(values, at))
        self.last_round_s = time.perf_counter() - began

    def ask_round(self, at: float) -> dict[str, Vector]:
        """Every query at `at`, side by side; the first failure is raised (a round is whole or not at all)."""
        qs = self.queries()
        answers = list(self._pool.map(lambda q: self.client.instant(q.expr, at, q.by), qs))
        return {q.name: a for q, a in zip(qs, answers, strict=True)}

    # -- hosts coming, going, restarting

    def _notice(self, line: str) -> None:
        if self.on_notice is not None:
            self.on_notice(line)

    def update_hosts(self, starts: Vector, at: float) -> None:
        """Which instances the server still has (their start times), which restarted, which are new."""
        known = set()
        for h in self.hosts:
            known.add(h.instance)
            started = starts.get((h.instance,))
            if started is None:
                if h.lost_since is None:
                    h.lost_since = at
                    self._notice(f"{h.instance}: lost (Prometheus has no current samples of it); the others go on")
                continue
            if h.lost_since is not None:
                h.lost_since = None
                self._notice(f"{h.instance}: back")
            if h.started is not None and abs(started - h.started) > 1e-3:
                h.restarted_at = at
                self._notice(f"{h.instance}: restarted at {clock_text(started)} (its counters began again)")
            h.started = started
        for (instance,) in starts:
            if instance not in known and instance not in self.newcomers:
                self.newcomers.add(instance)
                self._notice(f"{instance}: new instance (not shown: start pmutop again to include it)")

    def restarted(self, h: InstanceT) -> bool:
        """Restarted lately (the views mark it for as long as the banner says it)."""
        return h.restarted_at is not None and self._clock() - h.restarted_at < RESTART_SHOWN_S

    def lost(self) -> list[str]:
        """LostHosts: one line each for the server's failure, lost hosts (a count past a few), restarts."""
        out = [f"{self.problem}; retrying"] if self.problem else []
        gone = [h for h in self.hosts if h.lost_since is not None]
        if len(gone) > MAX_LOST_NAMED:
            names = ", ".join(h.instance for h in gone[:MAX_LOST_NAMED])
            out.append(f"{len(gone)} hosts lost: {names}, ...")
        else:
            out += [f"{h.instance}: lost since {clock_text(h.lost_since or 0)}" for h in gone]
        out += [
            f"{h.instance}: restarted at {clock_text(h.restarted_at or 0)}"
            for h in self.hosts
            if self.restarted(h) and h.lost_since is None
        ]
        return out

    # -- SampleFeed (wait_for_samples, wake_waiters: RoundWaits)

    @property
    def interval(self) -> float:
        return self.step

    def elapsed(self) -> float:
        return self._clock() - self.live0

    def failures(self) -> dict[int, str]:
        return {}  # a lost host comes back: its rows show the error meanwhile

    def set_interval(self, seconds: float) -> None:
        self._asked = seconds
        self.step, self.window = self._step_and_window(seconds)

    # -- the polling thread

    def start(self) -> None:
        self.live0 = self._clock()
        self._thread = threading.Thread(target=self._poll_loop, name=self.thread_name, daemon=True)
        self._thread.start()

    def _poll_loop(self) -> None:
        next_at = time.monotonic() + self.step
        while not self._stop.wait(max(0.0, next_at - time.monotonic())):
            next_at += self.step
            try:
                self.poll()
            except Exception:
                if self._stop.is_set():
                    return  # stopped under a round in flight: its pool and client closed
                raise
            if next_at < time.monotonic():  # a slow round: the next one now, not a burst to catch up
                next_at = time.monotonic()

    def stop(self) -> None:
        if self._stop.is_set():
            return  # stopped already (the view's way out, then the command's): not a second wait
        self._stop.set()
        self._new.set()
        if self._thread is not None and self._thread.is_alive():
            # Not for a round in flight (its answers may take their timeout): the thread ends when they come or
            # fail, pushing nothing more (a daemon: it never holds the process).
            self._thread.join(STOP_WAIT_S)
        self.close()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()

    @property
    def simulated(self) -> bool:
        return any(h.info.get("simulated") == "true" for h in self.hosts)
