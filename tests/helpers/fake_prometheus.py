"""A fake Prometheus HTTP API (/api/v1/query, /api/v1/query_range) over a synthetic fleet of `pmutop serve`s,
for the --prometheus fault and scale tests. Every CPU runs at IPC 2.0, 50% busy, 2.0 GHz on a 2.4 GHz TSC.

`mode` makes it misbehave: "ok", "slow" (answers after `delay` s), "500", "malformed" (not JSON), "nan" (every
instructions rate NaN), "partial" (host 0's CPU 0 has no sampled_seconds). `gone` instances are not scraped
any more (no current samples); `starts` can be changed to make one look restarted; `first_sample` makes its
history begin then (query_range answers nothing before it). `families` adds what
exporters serve beside the events: "busy_seconds_total" (every CPU busy BUSY of the time) and "dram_bytes_total"
(package 0 of each host reads DRAM_READ and writes DRAM_WRITE bytes/s of DRAM_PEAK).

`spread=True` gives every host its own numbers (`per_cpu` says them; CPU 1 of each host runs at half its IPC:
the worst core) for the fleet views. It answers the host table's per-instance queries (pmutop.feeds.fleet_queries)
and honours an `instance="..."` matcher (a host's per-core table asks for that host's series only)."""

from __future__ import annotations

import contextlib
import json
import math
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BUSY = 0.5
RATES = {  # per second of every CPU
    "sampled_seconds": 1.0,
    "tsc": 2.4e9,
    "instructions": 2.0e9,
    "cycles": 1.0e9,
    "ref_cycles": 1.2e9,
    "llc_misses": 1.0e6,
    "busy_seconds": BUSY,
}
EVENTS = ("instructions", "cycles", "ref_cycles", "llc_misses")
DRAM_READ, DRAM_WRITE, DRAM_PEAK = 3.0e9, 1.0e9, 20.0e9


class FakePrometheus:
    def __init__(
        self,
        hosts: int = 2,
        cpus: int = 2,
        tls: tuple[str, str] | None = None,
        spread: bool = False,
        families: tuple[str, ...] = (),
    ) -> None:
        """`tls`: (certificate, key) files: serve https."""
        self.spread = spread
        self.families = families
        self.instances = [f"host-{i:04d}:9464" for i in range(hosts)]
        self.cpus = cpus
        self.mode = "ok"
        self.delay = 3.0
        self.gone: set[str] = set()
        self.starts = {inst: 1_700_000_000.0 + i for i, inst in enumerate(self.instances)}
        self.ingest_lag: float | None = None
        self.first_sample: float | None = None  # Unix time of the oldest sample it holds (None: all of time)
        self.queries: list[str] = []  # every query asked, in order
        self.headers: list[dict[str, str]] = []  # every request's headers
        self._cache: dict[tuple[str, str], bytes] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                parts = urlsplit(self.path)
                params = {k: v[0] for k, v in parse_qs(parts.query).items()}
                fake.queries.append(params.get("query", ""))
                fake.headers.append(dict(self.headers))
                if fake.mode == "slow":
                    time.sleep(fake.delay)
                if fake.mode == "500":
                    self._send(500, b'{"status":"error","errorType":"internal","error":"boom"}')
                    return
                if fake.mode == "malformed":
                    self._send(200, b"<html>not json")
                    return
                self._send(200, fake.answer(parts.path, params))

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                with contextlib.suppress(OSError):  # the client gave up (the slow mode's timeout)
                    self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        if tls is not None:
            import ssl

            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*tls)
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        scheme = "https" if tls else "http"
        self.url = f"{scheme}://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakePrometheus:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    # -- answers

    def live(self) -> list[str]:
        return [i for i in self.instances if i not in self.gone]

    def answer(self, path: str, params: dict[str, str]) -> bytes:
        query = params.get("query", "")
        if path == "/api/v1/query_range":
            return self._range(query, float(params["start"]), float(params["end"]), float(params["step"]))
        if re.search(r"start_time_seconds\{instance=.*\}\[1m\]", query):
            at = float(params.get("time", time.time()))
            values = [[at - 4 + k, "1"] for k in range(5)]  # scraped every 1 s
            return _body("matrix", [{"metric": {"instance": self.instances[0]}, "values": values}])
        lag = self.ingest_lag
        if lag is not None and "rate(" in query and _scrapes_in_window(query, float(params["time"]), lag) < 2:
            return _body("vector", [])
        if "max by (instance) (pmutop_start_time_seconds" in query:
            return _body("vector", [_point({"instance": i}, self.starts[i]) for i in self._selected(query)])
        key = (query, self.mode + ",".join(sorted(self.gone)))
        if key not in self._cache:
            self._cache[key] = _body("vector", [_point(m, v) for m, v in self.series(query)])
        return self._cache[key]

    def _selected(self, query: str) -> list[str]:
        only = re.search(r'instance="([^"]+)"', query)
        return [i for i in self.live() if only is None or i == only.group(1)]

    def per_cpu(self, name: str, host: int, cpu: int) -> float:
        """The rate of counter `name` on CPU `cpu` of the `host`-th instance."""
        if not self.spread:
            return RATES[name]
        util = 0.2 + 0.15 * (host % 5)
        ipc = (0.5 + 0.25 * (host % 8)) * (0.5 if cpu == 1 else 1.0)
        cycles = util * 2.0e9  # 2.0 GHz while busy, on a 2.4 GHz TSC
        values = {"ref_cycles": util * 2.4e9, "cycles": cycles, "instructions": ipc * cycles}
        values["llc_misses"] = 1.0e6 * (1 + host % 3)
        return values.get(name, RATES[name])

    def series(self, query: str) -> list[tuple[dict[str, str], float | str]]:
        live = self._selected(query)
        index = {inst: k for k, inst in enumerate(self.instances)}
        if query.startswith("count by (__name__)"):
            return [({"__name__": "pmutop_" + f}, 1) for f in self.families]
        dram = "dram_bytes_total" in self.families and "rate(pmutop_dram_bytes_total" in query
        if dram:  # per host, or per package and direction
            if not query.startswith("sum by (instance) "):
                return [
                    ({"instance": i, "package": "0", "channel": "0", "direction": d}, v)
                    for i in live
                    for d, v in (("read", DRAM_READ), ("write", DRAM_WRITE))
                ]
            return [({"instance": i}, DRAM_READ + DRAM_WRITE) for i in live]
        if "dram_bytes_total" in self.families and "(pmutop_dram_peak_bytes_per_second" in query:
            return [({"instance": i, "package": "0"}, DRAM_PEAK) for i in live]
        if "rate(pmutop_busy_seconds_total" in query and "busy_seconds_total" not in self.families:
            return []
        if query.startswith("count by (instance) (pmutop_cpu_info)"):
            return [({"instance": i}, self.cpus) for i in live]
        if query.startswith("group by (instance, topdown_method)"):
            return [({"instance": i}, 1) for i in live]
        if query.startswith("bottomk by (instance)"):  # the worst core: the lowest IPC (every core is busy)
            out: list[tuple[dict[str, str], float | str]] = []
            for i in live:
                ipcs = {c: self.per_cpu("instructions", index[i], c) / self.per_cpu("cycles", index[i], c)
                        for c in range(self.cpus)}  # fmt: skip
                cpu = min(ipcs, key=lambda c: ipcs[c])
                out.append(({"instance": i, "cpu": str(cpu)}, ipcs[cpu]))
            return out
        if query.startswith("sum by (instance) ("):  # a host's CPUs summed
            m = re.search(r"rate\(pmutop_([a-z_]+)_total(?:\{[^}]*\})?\[", query)
            if m is None or m.group(1) not in RATES:
                return []
            name = m.group(1)
            return [
                ({"instance": i}, "NaN" if self.mode == "nan" and name == "instructions"
                 else sum(self.per_cpu(name, index[i], c) for c in range(self.cpus)))
                for i in live
            ]  # fmt: skip
        if query.startswith("count(pmutop_info"):
            return [({}, len(live))] if live else []
        if query.startswith("pmutop_info"):
            return [({"__name__": "pmutop_info", "instance": i, "hostname": i.split(":")[0]}, 1) for i in live]
        if "pmutop_cpu_info" in query:
            return [({"instance": i, "cpu": str(c), "package": "0"}, 1) for i in live for c in range(self.cpus)]
        if "group by (instance, event)" in query:
            return [({"instance": i, "event": e}, 1) for i in live for e in EVENTS]
        m = re.search(r"rate\(pmutop_([a-z_]+)_total(?:\{[^}]*\})?\[", query)
        if m is None or "event_counted" in query or m.group(1) not in RATES:
            return []
        name = m.group(1)
        out = []
        for i in live:
            for c in range(self.cpus):
                if self.mode == "partial" and name == "sampled_seconds" and i == self.instances[0] and c == 0:
                    continue
                nan = self.mode == "nan" and name == "instructions"
                out.append(({"instance": i, "cpu": str(c)}, "NaN" if nan else self.per_cpu(name, index[i], c)))
        return out

    def _range(self, query: str, start: float, end: float, step: float) -> bytes:
        if self.first_sample is not None and self.first_sample > start:  # nothing before its first sample
            start = start + math.ceil((self.first_sample - start) / step - 1e-6) * step
        steps = [round(start + k * step, 3) for k in range(int((end - start) / step + 1e-6) + 1)]
        result = [{"metric": m, "values": [[t, str(v)] for t in steps]} for m, v in self.series(query)]
        return _body("matrix", result)


def _scrapes_in_window(query: str, at: float, lag: float) -> int:
    """How many of the scrapes taken on whole seconds and stored `lag` s later lie in the query's window
    (at - window, at] at `at`."""
    window = int(re.findall(r"\[(\d+)ms\]", query)[0]) / 1000
    newest = math.floor(at) if at - math.floor(at) >= lag else math.floor(at) - 1
    return sum(1 for k in range(math.floor(at - window), newest + 1) if at - window < k)


def _point(metric: dict[str, str], value: float | str) -> dict[str, Any]:
    return {"metric": metric, "value": [time.time(), str(value)]}


def _body(kind: str, result: list[dict[str, Any]]) -> bytes:
    # Compact, as Prometheus writes it (the client's fast path reads that form).
    body = {"status": "success", "data": {"resultType": kind, "result": result}}
    return json.dumps(body, separators=(",", ":")).encode()


if __name__ == "__main__":  # a fake server in its own process (the scale test: it must not share our GIL)
    import sys

    with FakePrometheus(hosts=int(sys.argv[1]), cpus=int(sys.argv[2]), spread="spread" in sys.argv[3:]) as served:
        print(served.url, flush=True)
        sys.stdin.read()  # until the test closes our stdin
