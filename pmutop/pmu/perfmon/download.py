"""`pmutop events --download`: fetch Intel's perfmon tables over https:// (or copy a local directory).

Everything is fetched and checked (pmutop.pmu.perfmon.table_check) before anything is written
(pmutop.pmu.perfmon.safe_write).
"""

from __future__ import annotations

import http.client
import os
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any

from pmutop.core.errors import PmutopError, UsageError
from pmutop.pmu.cpuid_decode import CpuIdentity
from pmutop.pmu.perfmon.intel_event import MAX_TABLE_BYTES
from pmutop.pmu.perfmon.safe_write import Writer
from pmutop.pmu.perfmon.table_check import table_problem
from pmutop.pmu.perfmon.tables import INTEL_VENDOR, MAPFILE, core_rows, parse_mapfile, safe_relative

PERFMON_URL = "https://raw.githubusercontent.com/intel/perfmon/main"
LICENSE = "LICENSE"
DOWNLOAD_TIMEOUT = 30.0  # seconds per file

_MAX_MAPFILE = 1 << 20  # bytes: Intel's mapfile.csv is about 20 KB
_MAX_LICENSE = 1 << 20
_MAX_TABLES = 16  # core tables fetched for one machine (a hybrid model lists three at most)
_DOWNLOAD_DEADLINE = 300.0  # seconds for one file: a server that trickles bytes is given up on
_CHUNK = 1 << 16
_SHOWN_URL = 200  # characters of a URL echoed in a message


def _shown_url(url: str) -> str:
    return url if len(url) <= _SHOWN_URL else url[:_SHOWN_URL] + "…"


def check_source(source: str) -> tuple[str | None, Path | None]:
    """`--perfmon-url` as (https base URL, None) or (None, local directory); UsageError for anything else.

    Only https:// crosses the network (the tables decide which counters get programmed, so they must not
    be open to tampering on the way); a local copy is named by a plain path or a file:// URL.
    """
    shown = _shown_url(source)
    parsed = urllib.parse.urlsplit(source)
    scheme = parsed.scheme.lower()
    if scheme == "https":
        if not parsed.hostname:
            raise UsageError(f"--perfmon-url {shown}: no host name")
        return source, None
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"--perfmon-url {shown}: a file:// URL names a local directory (file:///path)")
        path = Path(urllib.parse.unquote(parsed.path))
    elif scheme:  # http, ftp, data, gopher, ...
        raise UsageError(f"--perfmon-url {shown}: only https:// URLs or a local directory are accepted")
    else:
        path = Path(source).expanduser()
    if not path.is_dir():
        raise UsageError(f"--perfmon-url {shown}: no such directory (give an https:// URL or a local directory)")
    return None, path.resolve()


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects to https:// only: a redirect must not downgrade the download to plain http."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme.lower() != "https":
            raise PmutopError(
                f"cannot download {_shown_url(req.full_url)}: redirected to {_shown_url(newurl)}, "
                "and only https:// is accepted"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _read_capped(stream: Any, limit: int, what: str, deadline: float) -> bytes:
    """At most `limit` bytes of `stream`, read in chunks; more than that is refused without reading it all."""
    data = bytearray()
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise PmutopError(f"cannot download {what}: larger than {_size(limit)}")
        if time.monotonic() > deadline:
            raise PmutopError(f"cannot download {what}: not complete after {_DOWNLOAD_DEADLINE:g} s")


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


class _Fetcher:
    """Reads perfmon files from an https:// base URL or from a local directory."""

    def __init__(self, source: str, timeout: float = DOWNLOAD_TIMEOUT) -> None:
        self.base_url, self.local = check_source(source)
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_HttpsOnlyRedirects())

    def url(self, rel: str) -> str:
        if self.local is not None:
            return str(self.local.joinpath(*safe_relative(rel).parts))
        assert self.base_url is not None
        return f"{self.base_url.rstrip('/')}/{urllib.parse.quote(rel.lstrip('/'))}"

    def get(self, rel: str, limit: int) -> bytes:
        data = self.get_optional(rel, limit, missing_ok=False)
        assert data is not None  # missing_ok=False raises instead
        return data

    def get_optional(self, rel: str, limit: int, *, missing_ok: bool = True) -> bytes | None:
        """The file's bytes (at most `limit`); None for a missing file when missing_ok (HTTP 404, no such file)."""
        if self.local is not None:
            return self._read_local(rel, limit, missing_ok)
        url = self.url(rel)
        shown = _shown_url(url)
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "pmutop"})
            with self._opener.open(request, timeout=self.timeout) as response:
                length = response.headers.get("Content-Length", "")
                if length.strip().isdigit() and int(length) > limit:  # refused before reading a byte of it
                    raise PmutopError(f"cannot download {shown}: larger than {_size(limit)}")
                return _read_capped(response, limit, shown, time.monotonic() + _DOWNLOAD_DEADLINE)
        except urllib.error.HTTPError as e:
            if missing_ok and e.code == 404:
                return None
            raise PmutopError(
                f"cannot download {shown}: HTTP {e.code} {' '.join(str(e.reason).split())[:80]}"
            ) from None
        except urllib.error.URLError as e:
            reason = e.reason
            text = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
            raise PmutopError(f"cannot download {shown}: {' '.join(text.split())[:200]}") from None
        except TimeoutError:
            raise PmutopError(f"cannot download {shown}: no answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException, ValueError) as e:
            text = " ".join(str(e).split())[:200] or e.__class__.__name__
            raise PmutopError(f"cannot download {shown}: {text}") from None

    def _read_local(self, rel: str, limit: int, missing_ok: bool) -> bytes | None:
        path = self.url(rel)
        try:
            # O_NONBLOCK: a FIFO planted in the copy must not hang the open; only regular files are read.
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            if missing_ok:
                return None
            raise PmutopError(f"cannot copy {path}: No such file or directory") from None
        except OSError as e:
            raise PmutopError(f"cannot copy {path}: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise PmutopError(f"cannot copy {path}: not a regular file")
            if st.st_size > limit:
                raise PmutopError(f"cannot copy {path}: larger than {_size(limit)}")
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb") as f:
                return _read_capped(f, limit, path, time.monotonic() + _DOWNLOAD_DEADLINE)
        except OSError as e:
            raise PmutopError(f"cannot copy {path}: {e.strerror or e}") from None
        finally:
            os.close(fd)


def download(base_url: str, dest: Path, wanted: list[tuple[CpuIdentity, int | None]]) -> list[Path]:
    """Fetch mapfile.csv, Intel's LICENSE and the core event files of the wanted CPUs into `dest`.

    `base_url` is an https:// URL or a local directory (plain path or file://). For each CPU model every
    core table is fetched (both halves of a hybrid part), so CPUs that are offline now still find theirs
    later. Everything is fetched and checked before anything is written. Returns the files written,
    mapfile first.
    """
    dest = Path(dest)
    fetcher = _Fetcher(base_url)
    mapfile = fetcher.get(MAPFILE, _MAX_MAPFILE)
    text = mapfile.decode("utf-8", errors="replace")
    if not text.lstrip("\ufeff").startswith("Family-model"):
        raise PmutopError(
            f"cannot download {_shown_url(fetcher.url(MAPFILE))}: the answer is not a perfmon mapfile.csv"
        )
    rows = parse_mapfile(text)
    needed: list[PurePosixPath] = []
    for identity, _core_type in wanted:
        if identity.vendor != INTEL_VENDOR:
            continue
        for row in core_rows(rows, identity):
            rel = safe_relative(row.filename)
            if rel not in needed:
                needed.append(rel)
    if len(needed) > _MAX_TABLES:
        raise PmutopError(
            f"cannot download {_shown_url(fetcher.url(MAPFILE))}: it names {len(needed)} core tables for this "
            f"machine (at most {_MAX_TABLES} make sense)"
        )
    blobs: list[tuple[PurePosixPath, bytes]] = [(PurePosixPath(MAPFILE), mapfile)]
    for rel in needed:
        data = fetcher.get(str(rel), MAX_TABLE_BYTES)
        why = table_problem(data)
        if why is not None:
            raise PmutopError(f"cannot download {_shown_url(fetcher.url(str(rel)))}: not a valid perfmon table: {why}")
        blobs.append((rel, data))
    license_text = fetcher.get_optional(LICENSE, _MAX_LICENSE)
    if license_text is not None:
        blobs.append((PurePosixPath(LICENSE), license_text))
    return Writer(dest).write_all(blobs)
