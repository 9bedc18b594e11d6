"""What `pmutop --prometheus URL` says when the URL or the server is not what it needs: the same URL rule as
--connect, and a hint for what usually causes a 404, a 401 and a TLS failure, in one line each."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers.fake_prometheus import FakePrometheus
from helpers.processes import self_signed_certificate
from helpers.serve import free_port, scrape, start_serve, stop

from pmutop.core.errors import PmutopError, UsageError
from pmutop.feeds.prometheus import PrometheusFeed
from pmutop.feeds.promql import DEFAULT_MATCH, parse_server
from pmutop.feeds.remote import normalise_url


@contextlib.contextmanager
def answering(status: int, body: bytes) -> Iterator[str]:
    """A local HTTP server answering every request with `status` and `body`: its URL."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def refused(url: str, **auth: str) -> str:
    with pytest.raises(PmutopError) as caught:
        PrometheusFeed(parse_server(url, **auth), 1.0, DEFAULT_MATCH)
    return str(caught.value)


def test_a_url_without_scheme_needs_a_port_for_both_options() -> None:
    for bad in ("notaurl", "localhost", "10.0.0.1"):
        with pytest.raises(UsageError, match=r"^--prometheus .*expected http\(s\)://HOST:PORT"):
            parse_server(bad)
        with pytest.raises(UsageError, match=r"^--connect .*expected http\(s\)://HOST:PORT"):
            normalise_url(bad)
    assert parse_server("127.0.0.1:9090").url == "http://127.0.0.1:9090"
    assert parse_server("https://prom.example").url == "https://prom.example"
    assert normalise_url("https://exporter.example") == "https://exporter.example/metrics"


def test_a_pmutop_exporter_given_to_prometheus_says_to_use_connect() -> None:
    port = free_port()
    proc = start_serve(port)
    try:
        scrape(port)
        said = refused(f"http://127.0.0.1:{port}")
    finally:
        stop(proc)
    assert "HTTP 404" in said and f"--connect 127.0.0.1:{port}" in said and "\n" not in said, said


def test_a_404_suggests_a_path_prefix() -> None:
    with answering(404, b"404 page not found\n") as url:
        said = refused(url)
    assert "HTTP 404" in said and "path prefix" in said, said


def test_a_401_names_the_credential_options() -> None:
    with answering(401, b"Unauthorized\n") as url:
        said = refused(url)
    assert "HTTP 401" in said and "--bearer-token-file" in said and "--basic-auth-file" in said, said


def test_a_401_with_credentials_given_says_they_were_refused(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("wrong\n")
    with answering(401, b"Unauthorized\n") as url:
        said = refused(url, bearer_file=str(token))
    assert "HTTP 401" in said and "refused" in said, said


def test_a_tls_failure_is_said_without_openssls_source_line(tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    with FakePrometheus(tls=(cert, key)) as fake:
        said = refused(fake.url)
    assert "certificate" in said.lower() and "_ssl.c" not in said and "--prometheus-ca" in said, said
