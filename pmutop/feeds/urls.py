"""The one rule for the URLs of --connect and --prometheus: [http(s)://]HOST:PORT[/path]. Without a scheme the
port is required (`notaurl` is a typo, not a host on port 80); with one, the scheme's default port is fine."""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from pmutop.core.errors import UsageError


def redact(text: str) -> str:
    """`text` with the password of any URL in it replaced (http://user:***@host): for messages that quote a URL."""
    return re.sub(r"(https?://[^/\s:@]*):[^/\s@]*@", r"\1:***@", text)


def split_url(text: str, option: str, example: str) -> SplitResult:
    """`text` as a URL (http:// added when it has no scheme); a usage error (one line) when it breaks the rule."""
    url = text if "://" in text else f"http://{text}"
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a number, or out of 0..65535
        raise UsageError(f"{option} {redact(text)!r}: bad port: expected http(s)://HOST:PORT, e.g. {example}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or (port is None and url != text):
        raise UsageError(f"{option} {redact(text)!r}: expected http(s)://HOST:PORT, e.g. {example}")
    return parts
