"""The fleet views' pictures (`pmutop --prometheus`): the host table and the fleet heatmap, over a canned
Prometheus API: no server and nothing measured. Its 17 hosts are made up (numbers from fixed formulas, every
instance labelled simulated, so the views say SIMULATED), at a fixed clock, so the pictures and the snapshot
tests are the same on every run. One host is lost and one restarted, as a real fleet shows them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from pmutop.derive.prometheus_names import PREFIX, TOPDOWN_CATEGORIES
from pmutop.feeds.fleet import FleetFeed
from pmutop.feeds.promql import DEFAULT_MATCH, Client, Labels, Server, Vector
from pmutop.tui.fleet_app import FleetApp

NOW = 1_767_277_930.0  # 2026-01-01T14:32:10Z: the pictures' fixed clock (a time of day, not a placeholder midnight)
ROLES = (("web", 8, 32), ("db", 3, 64), ("batch", 4, 96), ("cache", 2, 16))  # (role, hosts, CPUs each)
LOST, RESTARTED = "db-03:9464", "cache-02:9464"
EVENTS = ("instructions", "cycles", "ref_cycles", "llc_misses", "slots", *list(TOPDOWN_CATEGORIES)[:4])
FLEET_VIEWS: dict[str, tuple[str, ...]] = {"fleet-hosts": (), "fleet-heatmap": ("3",)}


class CannedPrometheus(Client):
    """Answers the fleet feed's queries (pmutop.feeds.fleet) from formulas: a made-up fleet, no HTTP."""

    def __init__(self) -> None:  # no connection pool: nothing is asked over the network
        self.server = Server("http://prometheus.example:9090")
        self.timeout = 2.0
        self.hosts = [(f"{role}-{n:02d}:9464", role, cpus) for role, count, cpus in ROLES for n in range(1, count + 1)]
        self.rounds = 0  # start-time answers given: the first is discovery's, later ones the live rounds'

    def close(self) -> None:
        pass

    def _live(self) -> list[tuple[int, str, str, int]]:
        return [(k, name, role, cpus) for k, (name, role, cpus) in enumerate(self.hosts)]

    def labels(self, expr: str, at: float) -> list[Labels]:
        hosts = self._live()
        if expr.startswith(DEFAULT_MATCH):
            return [
                {"instance": name, "hostname": name.split(":")[0], "simulated": "true", "backend": "sim",
                 "cpu_model": "pmutop simulated CPU", "pmu": "simulated PMU"}
                for _, name, _, _ in hosts
            ]  # fmt: skip
        if "count by (__name__)" in expr:
            return [{"__name__": PREFIX + "energy_joules_total"}, {"__name__": PREFIX + "dram_bytes_total"}]
        if "topdown_method" in expr:
            return [{"instance": name, "topdown_method": "perf_metrics"} for _, name, _, _ in hosts]
        if "group by (instance, event)" in expr:
            return [{"instance": name, "event": e} for _, name, _, _ in hosts for e in EVENTS]
        return []

    def stamps(self, selector: str, at: float) -> list[float]:
        return [at - 4 + k for k in range(5)]  # scraped every 1 s

    def instant(self, expr: str, at: float, by: tuple[str, ...]) -> Vector:
        if "start_time_seconds" in expr:
            self.rounds += 1
            later = self.rounds > 1
            return {
                (name,): NOW - 86400 + k + (3000 if later and name == RESTARTED else 0)
                for k, name, _, _ in self._live()
                if not (later and name == LOST)
            }
        if expr.startswith("count by (instance)"):
            return {(name,): float(cpus) for _, name, _, cpus in self._live()}
        if expr.startswith("bottomk"):
            return {
                (name, str((k * 7) % cpus)): 0.55 * self._shape(k, role, at)["ipc"]
                for k, name, role, cpus in self._live()
            }
        return self._at(expr, at)

    def matrix(
        self, expr: str, start: float, end: float, step: float, by: tuple[str, ...], timeout: float | None = None
    ) -> dict[float, Vector]:
        steps = round((end - start) / step) + 1
        return {round(start + n * step, 3): self._at(expr, round(start + n * step, 3)) for n in range(steps)}

    @staticmethod
    def _shape(k: int, role: str, at: float) -> dict[str, float]:
        """Host k's made-up figures at time `at`: slow waves, each host its own phase."""
        t = at - NOW
        base = {"web": (0.55, 1.6, 1.2), "db": (0.7, 0.8, 6.0), "batch": (0.92, 2.4, 0.6), "cache": (0.3, 0.6, 14.0)}
        util0, ipc0, mpki = base[role]
        return {
            "util": min(0.99, max(0.02, util0 + 0.18 * math.sin(t / 9 + k) + 0.03 * (k % 3))),
            "ipc": max(0.2, ipc0 + 0.35 * math.sin(t / 13 + 2 * k) - 0.05 * (k % 4)),
            "ghz": 2.2 + 0.15 * (k % 5),
            "mpki": mpki * (1 + 0.3 * math.sin(t / 17 + k)),
        }

    def _at(self, expr: str, at: float) -> Vector:
        out: Vector = {}
        for k, name, role, cpus in self._live():
            s = self._shape(k, role, at)
            tsc = cpus * 2.4e9
            ref = s["util"] * tsc
            cycles = ref * s["ghz"] / 2.4
            instructions = s["ipc"] * cycles
            llc = s["mpki"] * instructions / 1000
            retiring = min(0.8, s["ipc"] / 6 * 1.1)
            frontend = 0.22 if role == "web" else 0.08
            shares = {"retiring": retiring, "bad_speculation": 0.05, "frontend_bound": frontend}
            shares["backend_bound"] = max(0.0, 1 - sum(shares.values()))
            rates = {
                "sampled_seconds": float(cpus),
                "tsc": tsc,
                "ref_cycles": ref,
                "cycles": cycles,
                "instructions": instructions,
                "llc_misses": llc,
                "topdown_slots": 6 * cycles,
            }
            if "energy_joules" in expr:
                out[(name,)] = 25 + 4.5 * cpus * s["util"]
            elif "dram_bytes" in expr:
                out[(name,)] = llc * 64 * 1.4  # a line per miss, plus prefetches and writebacks
            elif "category" in expr:
                for category, share in shares.items():
                    out[(name, category)] = share * 6 * cycles
            else:
                m = re.search(r"rate\(" + PREFIX + r"([a-z_]+)_total", expr)
                if m is not None and m.group(1) in rates:
                    out[(name,)] = rates[m.group(1)]
        return out


def fleet_app() -> tuple[FleetApp, FleetFeed]:
    """The host table over the canned fleet: its history (query_range), then one live round (where the lost
    and the restarted host show)."""
    canned = CannedPrometheus()
    now = [NOW - 1.0]  # the history ends an interval before the live round
    feed = FleetFeed(canned.server, 1.0, DEFAULT_MATCH, clock=lambda: now[0], client=canned)
    feed.prefill()
    now[0] = NOW
    feed.poll()
    return FleetApp(feed, feed.run_info()), feed


async def save_fleet(out: Path, name: str, size: tuple[int, int]) -> Path:
    app, feed = fleet_app()
    try:
        async with app.run_test(size=size) as pilot:
            for key in FLEET_VIEWS[name]:
                await pilot.press(key)
            await pilot.pause()
            return Path(app.save_screenshot(filename=f"{name}.svg", path=str(out)))
    finally:
        feed.stop()
