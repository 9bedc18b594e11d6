"""`pmutop --prometheus URL`: the server's HTTP API and the PromQL the fleet feed asks it.

The API is Prometheus' (https://prometheus.io/docs/prometheus/latest/querying/api/), which Thanos, Mimir and
VictoriaMetrics also answer: /api/v1/query (an instant vector at one time) and /api/v1/query_range (a matrix
at steps). Every failure is a PromError, one line, with the server's URL shown without its credentials.
"""

from __future__ import annotations

import json
import math
import re
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pmutop.core.errors import PmutopError, UsageError
from pmutop.derive.prometheus_names import PREFIX
from pmutop.feeds.urls import redact, split_url

DEFAULT_MATCH = PREFIX + "info"
Labels = dict[str, str]
# A query's answer, cut to what the feed reads: label values of `by` -> value (NaN and infinities left out).
Vector = dict[tuple[str, ...], float]


class PromError(PmutopError):
    """The server did not answer, answered an error, or answered something that is not the API's JSON."""


@dataclass
class Server:
    """Where the API is and how to authenticate; `url` holds no credentials (they are in `auth`)."""

    url: str  # scheme://host:port[/prefix], no user:password, no trailing slash
    auth: httpx.Auth | None = None
    headers: dict[str, str] = field(default_factory=dict)
    verify: ssl.SSLContext | bool = True

    @property
    def shown(self) -> str:
        """The URL as errors and banners show it (credentials never: they were taken out of `url`)."""
        return self.url


def _read_secret(path: str, option: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as e:
        raise UsageError(f"{option} {path}: {e.strerror or e}") from None
    if not text:
        raise UsageError(f"{option} {path}: the file is empty")
    return text


def parse_server(
    text: str, ca_file: str | None = None, bearer_file: str | None = None, basic_file: str | None = None
) -> Server:
    """--prometheus URL and its auth options -> a Server; a bad URL or unreadable file is a usage error.
    Basic auth comes from the URL (http://user:pass@host:9090) or --basic-auth-file (user:password)."""
    parts = split_url(text, "--prometheus", "http://127.0.0.1:9090")
    if parts.query or parts.fragment:
        raise UsageError(f"--prometheus {redact(text)!r}: no ?query or #fragment (a path prefix is fine)")
    host = parts.hostname or ""  # split_url made sure there is one
    netloc = host if ":" not in host else f"[{host}]"
    if parts.port is not None:
        netloc += f":{parts.port}"
    server = Server(urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", "")))
    if parts.username is not None or parts.password is not None:
        if basic_file:
            raise UsageError("--basic-auth-file: the URL already has user:password")
        from urllib.parse import unquote

        server.auth = httpx.BasicAuth(unquote(parts.username or ""), unquote(parts.password or ""))
    if basic_file:
        user, sep, password = _read_secret(basic_file, "--basic-auth-file").partition(":")
        if not sep:
            raise UsageError(f"--basic-auth-file {basic_file}: expected one line user:password")
        server.auth = httpx.BasicAuth(user, password)
    if bearer_file:
        if server.auth is not None:
            raise UsageError("--bearer-token-file and basic auth: choose one")
        server.headers["Authorization"] = "Bearer " + _read_secret(bearer_file, "--bearer-token-file")
    if ca_file:
        if parts.scheme != "https":
            raise UsageError("--prometheus-ca is for an https:// server")
        try:
            server.verify = ssl.create_default_context(cafile=ca_file)
        except (OSError, ssl.SSLError) as e:
            raise UsageError(f"--prometheus-ca {ca_file}: {getattr(e, 'strerror', None) or e}") from None
    return server


def match_selector(text: str | None) -> str:
    """--match -> the pmutop_info selector that picks the instances: `{job="pmutop"}` or `pmutop_info{...}`."""
    if text is None or not text.strip():
        return DEFAULT_MATCH
    text = text.strip()
    if text.startswith("{"):
        return DEFAULT_MATCH + text
    if re.match(rf"{DEFAULT_MATCH}\b", text):
        return text
    raise UsageError(f'--match {text!r}: expected label matchers, e.g. \'{{job="pmutop",env="prod"}}\'')


def duration(seconds: float) -> str:
    """A PromQL duration: whole milliseconds (`2000ms`), which every version parses."""
    return f"{max(1, round(seconds * 1000))}ms"


def restrict(expr: str, match: str) -> str:
    """Keep `expr`'s series of the instances `match` selects (nothing to add for the default: every
    pmutop exporter serves pmutop_info)."""
    return expr if match == DEFAULT_MATCH else f"({expr}) and on (instance) {match}"


def rate_expr(family: str, window: float, by: tuple[str, ...], match: str) -> str:
    """The rate of a raw counter over `window`, one series per `by` (max: an exporter scraped by two jobs is
    counted once, not twice)."""
    return restrict(f"max by ({', '.join(by)}) (rate({family}[{duration(window)}]))", match)


def multiplexed_expr(window: float, match: str) -> str:
    """The share of the time each event was on a counter, only where it was not on one all the time (on most
    machines nothing: the answer stays small)."""
    counted = f"rate({PREFIX}event_counted_seconds_total[{duration(window)}])"
    sampled = f"rate({PREFIX}sampled_seconds_total[{duration(window)}])"
    share = f"min by (instance, cpu, event) ({counted} / ignoring (event) group_left {sampled})"
    return restrict(f"{share} < 0.999", match)


def gauge_expr(name: str, window: float, by: tuple[str, ...], match: str) -> str:
    """A gauge (temperatures) averaged over the window."""
    return restrict(f"max by ({', '.join(by)}) (avg_over_time({name}[{duration(window)}]))", match)


FIRST_ANSWER_S = 3.0  # the first request's bound: a server that accepts but never answers is said in seconds


class Client:
    """The HTTP API over one keep-alive connection pool (httpx; thread-safe, so a round's queries run side by
    side). Every request is bounded by `timeout`; until the server has answered once, by FIRST_ANSWER_S at most
    (the first question, pmutop_info, is a small one: a server that takes longer is not answering)."""

    def __init__(self, server: Server, timeout: float) -> None:
        self.server = server
        self.timeout = timeout
        self.answered = False
        self._http = httpx.Client(
            base_url=server.url,
            auth=server.auth,
            headers=server.headers,
            verify=server.verify,
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def _fetch(self, path: str, params: dict[str, str], timeout: float | None = None) -> httpx.Response:
        bound = timeout or self.timeout
        if not self.answered:
            bound = min(bound, FIRST_ANSWER_S)
        try:
            # Per request: the feed lowers `timeout` after discovery (httpx fixed the client's at construction).
            answer = self._http.get(path, params=params, timeout=bound)
        except httpx.TimeoutException:
            raise PromError(f"prometheus {self.server.shown}: no answer within {bound:g} s") from None
        except httpx.HTTPError as e:
            raise PromError(f"prometheus {self.server.shown}: {redact(_why(e))}") from None
        self.answered = True
        return answer

    def _get(
        self, path: str, params: dict[str, str], answer: httpx.Response | None = None, timeout: float | None = None
    ) -> Any:
        """The `data` of a successful answer; anything else a PromError naming what went wrong."""
        where = f"prometheus {self.server.shown}"
        r = answer if answer is not None else self._fetch(path, params, timeout)
        try:
            body = json.loads(r.content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            if r.status_code >= 400:
                said = f"{where}: HTTP {r.status_code} {r.reason_phrase}".rstrip()
                raise PromError(said + self._hint(r.status_code, r.content))
            raise PromError(f"{where}: the answer is not the query API's JSON (HTTP {r.status_code})")
        if body.get("status") != "success":
            said = str(body.get("error") or body.get("errorType") or "error")[:200]
            raise PromError(f"{where}: HTTP {r.status_code}: {redact(said)}")
        data = body.get("data")
        if not isinstance(data, dict) or not isinstance(data.get("result"), list):
            raise PromError(f"{where}: the answer has no data.result")
        return data

    def _hint(self, status: int, content: bytes) -> str:
        """What usually causes an HTTP failure without the API's JSON, said after it."""
        if status == 404 and b"pmutop serves /metrics" in content:
            where = urlsplit(self.server.url).netloc
            return f": a pmutop exporter, not a Prometheus server (show it with --connect {where})"
        if status == 404:
            return ": no query API here (if it sits under a path prefix, give it: http://HOST:PORT/PREFIX)"
        if status in (401, 403):
            if self.server.auth is not None or "Authorization" in self.server.headers:
                return ": the credentials given were refused"
            options = "--bearer-token-file FILE, --basic-auth-file FILE, or user:password@ in the URL"
            return f": the server wants credentials ({options})"
        return ""

    def instant(self, expr: str, at: float, by: tuple[str, ...]) -> Vector:
        """`expr` at Unix time `at`: label values of `by` -> value. A series without a `by` label, or whose value
        is not a finite number, is left out (partial answers are the norm: a host between scrapes)."""
        answer = self._fetch("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})
        if answer.status_code == 200:
            fast = compact_vector(answer.content, by)
            if fast is not None:
                return fast
        data = self._get("/api/v1/query", {}, answer)
        out: Vector = {}
        for r in data["result"]:
            try:
                metric = r["metric"]
                value = float(r["value"][1])
                key = tuple(metric[label] for label in by)
            except (KeyError, TypeError, ValueError, IndexError):
                continue
            if math.isfinite(value):
                out[key] = value
        return out

    def matrix(
        self, expr: str, start: float, end: float, step: float, by: tuple[str, ...], timeout: float | None = None
    ) -> dict[float, Vector]:
        """`expr` at every step from `start` to `end`: time -> Vector, as `instant` cuts it. `timeout`: this
        request's bound, when not the client's (a history's answers are larger than a round's)."""
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:.3f}"}
        data = self._get("/api/v1/query_range", params, timeout=timeout)
        out: dict[float, Vector] = {}
        for r in data["result"]:
            try:
                key = tuple(r["metric"][label] for label in by)
                points = r["values"]
            except (KeyError, TypeError):
                continue
            for point in points:
                try:
                    at, value = round(float(point[0]), 3), float(point[1])
                except (TypeError, ValueError, IndexError):
                    continue
                if math.isfinite(value):
                    out.setdefault(at, {})[key] = value
        return out

    def stamps(self, selector: str, at: float) -> list[float]:
        """The times of the first series' points of a range vector selector (`x[1m]`) at `at`, oldest first."""
        data = self._get("/api/v1/query", {"query": selector, "time": f"{at:.3f}"})
        try:
            return sorted(float(p[0]) for p in data["result"][0]["values"])
        except (KeyError, IndexError, TypeError, ValueError):
            return []

    def labels(self, expr: str, at: float) -> list[Labels]:
        """Every series' labels of `expr` at `at` (discovery: hosts, their CPUs and events)."""
        data = self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})
        return [dict(r["metric"]) for r in data["result"] if isinstance(r, dict) and isinstance(r.get("metric"), dict)]


# Prometheus' own answer to an instant query, compact JSON: read with two regular expressions, a few times
# faster than json.loads at 64,000 series. Anything else (spaces, escapes in a label) goes to json.loads.
_VECTOR_HEAD = b'{"status":"success","data":{"resultType":"vector","result":['
_SERIES = re.compile(rb'\{"metric":\{([^{}\\]*)\},"value":\[[^\],]*,"([^"\\]*)"\]\}')
_LABEL = re.compile(r'"([^"]*)":"([^"]*)"')


def compact_vector(content: bytes, by: tuple[str, ...]) -> Vector | None:
    """A successful vector answer in Prometheus' compact form -> Vector (as Client.instant cuts it); None when the
    answer is anything else, or any series is not in the plain form (the full JSON parser reads it)."""
    if not content.startswith(_VECTOR_HEAD):
        return None
    found = _SERIES.findall(content)
    if len(found) != content.count(b'"metric":'):
        return None
    out: Vector = {}
    for labels, text in found:
        metric = dict(_LABEL.findall(labels.decode("utf-8", "replace")))
        try:
            key = tuple(metric[label] for label in by)
            value = float(text)
        except (KeyError, ValueError):
            continue
        if math.isfinite(value):
            out[key] = value
    return out


def _why(e: BaseException) -> str:
    """httpx's exception, said briefly (the cause's strerror where there is one; never OpenSSL's source line),
    with the option that helps when the server's certificate is not one the system's CAs signed."""
    text = ""
    cause: BaseException | None = e
    while cause is not None and not text:
        text = str(getattr(cause, "strerror", None) or "")
        cause = cause.__cause__ or cause.__context__
    text = re.sub(r"\s*\(_ssl\.c:\d+\)", "", text or str(e)) or type(e).__name__
    if "CERTIFICATE_VERIFY_FAILED" in text:
        text += " (a private CA: --prometheus-ca FILE)"
    return text
