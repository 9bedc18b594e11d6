"""The exporter's address (`pmutop serve --listen`), in a module of its own: the options and every command parse
it, and importing the exporter for that would load the Prometheus client and an HTTP server into every run."""

from __future__ import annotations

import re

from pmutop.core.errors import UsageError

DEFAULT_LISTEN = "127.0.0.1:9464"


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (IPv6 as [::1]:PORT) -> (host, port); a bad address is a usage error."""
    m = re.fullmatch(r"\[([0-9a-fA-F:.]+)\]:(\d+)|([^:\s\[\]]+):(\d+)", text.strip())
    if not m:
        raise UsageError(f"--listen {text!r}: expected HOST:PORT, e.g. {DEFAULT_LISTEN}")
    host = m.group(1) or m.group(3)
    port = int(m.group(2) or m.group(4))
    if not 0 < port < 65536:
        raise UsageError(f"--listen {text!r}: port must be 1..65535")
    return host, port
