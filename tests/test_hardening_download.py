"""`pmutop events --download`: https only, bounded sizes, tables checked field by field, atomic writes that
never follow a symbolic link. The https server here is local, with a certificate made for the test run and
trusted through SSL_CERT_FILE, so the real TLS path is exercised."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from helpers.flags import SHARED_PERFMON
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot

from pmutop.app.main import main
from pmutop.core.errors import PmutopError, UsageError
from pmutop.pmu.cpuid_decode import CpuIdentity
from pmutop.pmu.perfmon import PerfmonTables, download, table_problem

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "perfmon"
A_CORE = "A/events/a_core.json"
B_CORE = "B/events/b_core.json"


def ident(family: int, model: int, stepping: int) -> CpuIdentity:
    return CpuIdentity(
        vendor="GenuineIntel",
        family=family,
        model=model,
        stepping=stepping,
        brand=None,
        max_leaf=0x20,
        hypervisor=False,
        hypervisor_vendor=None,
        pdcm=True,
        hybrid=False,
        uarch=None,
    )


SKX = ident(6, 0x55, 4)  # A/events/a_core.json in the fixtures
CLX = ident(6, 0x55, 7)  # B/events/b_core.json


@pytest.fixture(autouse=True)
def _no_user_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PMUTOP_PERFMON_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


def valid_site(root: Path) -> Path:
    """A copy of the fixture tables without the rows that are wrong on purpose (for the loader's tests)."""
    shutil.copytree(FIXTURES, root)
    b = root / B_CORE
    doc = json.loads(b.read_text())
    doc["Events"] = [e for e in doc["Events"] if e["EventName"] not in ("FIXTURE.MALFORMED", "FIXTURE.WIDE_CMASK")]
    b.write_text(json.dumps(doc))
    return root


# --- a local https server ---------------------------------------------------------------------------


@pytest.fixture(scope="session")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a certificate for the local https server")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
            "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    return cert, key


Route = Callable[[http.server.BaseHTTPRequestHandler], None]


class _Handler(http.server.SimpleHTTPRequestHandler):
    routes: ClassVar[dict[str, Route]] = {}

    def log_message(self, format: str, *args: object) -> None:  # http.server's signature
        pass

    def do_GET(self) -> None:
        route = self.routes.get(self.path)
        if route is None:
            super().do_GET()
        else:
            route(self)


Serve = Callable[..., str]


@pytest.fixture(name="serve")
def serve_https(certificate: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[Serve]:
    """serve(directory, routes={path: handler}) -> https://127.0.0.1:PORT serving it, trusted by pmutop."""
    cert, key = certificate
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # OpenSSL's default verify paths read it
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(directory: Path, routes: dict[str, Route] | None = None) -> str:
        handler = type("Handler", (_Handler,), {"routes": routes or {}})
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(directory)))
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"https://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def endless(handler: http.server.BaseHTTPRequestHandler) -> None:
    """200 with no length, then bytes until the client hangs up (or 256 MiB, so a test cannot run away)."""
    handler.send_response(200)
    handler.end_headers()
    chunk = b"[" + b" " * 65535
    try:
        for _ in range(4096):
            handler.wfile.write(chunk)
    except OSError:
        pass


def huge_length(handler: http.server.BaseHTTPRequestHandler) -> None:
    """Announces 10 GiB, sends a little, then stalls: a client that waits for the body waits 20 s."""
    handler.send_response(200)
    handler.send_header("Content-Length", str(10 << 30))
    handler.end_headers()
    try:
        handler.wfile.write(b"Family-model,")
        handler.wfile.flush()
        time.sleep(20)
    except OSError:
        pass


def redirect_to(location: str) -> Route:
    def route(handler: http.server.BaseHTTPRequestHandler) -> None:
        handler.send_response(302)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return route


# --- where --download may fetch from ------------------------------------------------------------------


@pytest.fixture
def skx_root(tmp_path: Path) -> Path:
    return build_sysroot(tmp_path / "sysroot", [0, 1], SKYLAKE_X_LEAVES)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:1/perfmon",
        "HTTP://example.com/perfmon",
        "ftp://example.com/perfmon",
        "data:text/plain,Family-model",
        "gopher://example.com/perfmon",
        "file://example.com/perfmon",
    ],
)
def test_other_schemes_are_refused_in_one_line_with_exit_2(
    url: str, tmp_path: Path, skx_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest = tmp_path / "dest"
    args = ["events", "--sysroot", str(skx_root), "--download", "--perfmon-url", url, "--perfmon-dir", str(dest)]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""
    expected = (
        "a file:// URL names a local directory (file:///path)"
        if url.startswith("file:")
        else "only https:// URLs or a local directory are accepted"
    )
    assert err == f"pmutop: --perfmon-url {url}: {expected}\n"
    assert not dest.exists()
    with pytest.raises(UsageError):  # download() itself refuses too, whoever calls it
        download(url, dest, [(SKX, None)])
    assert not dest.exists()


def test_an_https_url_without_a_host_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=r"^--perfmon-url https:///perfmon: no host name$"):
        download("https:///perfmon", tmp_path / "dest", [(SKX, None)])


def test_a_local_directory_works_as_a_plain_path_or_file_url(tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    for i, source in enumerate((str(site), f"file://{site}")):
        dest = tmp_path / f"dest{i}"
        written = download(source, dest, [(SKX, None)])
        assert [p.relative_to(dest).as_posix() for p in written] == ["mapfile.csv", A_CORE, "LICENSE"]
        assert (dest / A_CORE).read_bytes() == (site / A_CORE).read_bytes()


def test_a_missing_local_directory_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as e:
        download(str(tmp_path / "nope"), tmp_path / "dest", [(SKX, None)])
    assert str(e.value) == (
        f"--perfmon-url {tmp_path / 'nope'}: no such directory (give an https:// URL or a local directory)"
    )


def test_a_fifo_in_a_local_copy_is_refused_not_waited_on(tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    (site / A_CORE).unlink()
    os.mkfifo(site / A_CORE)
    with pytest.raises(PmutopError, match=r"^cannot copy .*a_core\.json: not a regular file$"):
        download(str(site), tmp_path / "dest", [(SKX, None)])


# --- https --------------------------------------------------------------------------------------------


def test_download_over_https(serve: Serve, tmp_path: Path) -> None:
    url = serve(valid_site(tmp_path / "site"))
    written = download(url, tmp_path / "dest", [(SKX, None), (CLX, None)])
    assert [p.relative_to(tmp_path / "dest").as_posix() for p in written] == ["mapfile.csv", A_CORE, B_CORE, "LICENSE"]


def test_a_redirect_to_plain_http_is_refused(serve: Serve, tmp_path: Path) -> None:
    url = serve(tmp_path, {"/mapfile.csv": redirect_to("http://127.0.0.1:1/mapfile.csv")})
    with pytest.raises(PmutopError) as e:
        download(url, tmp_path / "dest", [(SKX, None)])
    assert str(e.value) == (
        f"cannot download {url}/mapfile.csv: redirected to http://127.0.0.1:1/mapfile.csv, "
        "and only https:// is accepted"
    )


def test_a_redirect_to_https_is_followed(serve: Serve, tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    real = serve(site)
    url = serve(tmp_path, {"/mapfile.csv": redirect_to(f"{real}/mapfile.csv")})
    with pytest.raises(PmutopError, match=r"a_core\.json: HTTP 404"):  # the mapfile came through the redirect
        download(url, tmp_path / "dest", [(SKX, None)])


def test_an_endless_mapfile_stops_at_its_cap(serve: Serve, tmp_path: Path) -> None:
    url = serve(tmp_path, {"/mapfile.csv": endless})
    with pytest.raises(PmutopError) as e:
        download(url, tmp_path / "dest", [(SKX, None)])
    assert str(e.value) == f"cannot download {url}/mapfile.csv: larger than 1 MiB"


def test_an_endless_table_stops_at_64_mib(serve: Serve, tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    url = serve(site, {f"/{A_CORE}": endless})
    with pytest.raises(PmutopError) as e:
        download(url, tmp_path / "dest", [(SKX, None)])
    assert str(e.value) == f"cannot download {url}/{A_CORE}: larger than 64 MiB"
    assert not (tmp_path / "dest").exists()


def test_an_announced_huge_length_is_refused_before_reading(serve: Serve, tmp_path: Path) -> None:
    url = serve(tmp_path, {"/mapfile.csv": huge_length})
    started = time.monotonic()
    with pytest.raises(PmutopError) as e:
        download(url, tmp_path / "dest", [(SKX, None)])
    assert str(e.value) == f"cannot download {url}/mapfile.csv: larger than 1 MiB"
    assert time.monotonic() - started < 10


@pytest.mark.integration
def test_the_cli_downloads_over_https(serve: Serve, tmp_path: Path, skx_root: Path) -> None:
    url = serve(valid_site(tmp_path / "site"))
    dest = tmp_path / "dest"
    args = ["events", "--sysroot", str(skx_root), "--download", "--perfmon-url", url, "--perfmon-dir", str(dest)]
    done = subprocess.run(
        [sys.executable, "-m", "pmutop", *args], capture_output=True, text=True, timeout=60
    )  # the environment carries SSL_CERT_FILE
    assert done.returncode == 0, done.stderr
    assert f"downloaded 3 files into {dest}: mapfile.csv, {A_CORE}, LICENSE" in done.stdout


# --- tables are checked field by field before anything is written --------------------------------------


def _site_with(tmp_path: Path, **fields: Any) -> Path:
    site = valid_site(tmp_path / "site")
    events = json.loads((site / A_CORE).read_text())
    events[4].update(fields)  # LONGEST_LAT_CACHE.MISS, the fifth event
    (site / A_CORE).write_text(json.dumps(events))
    return site


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        ({"EventCode": "0x1ff"}, "EventCode '0x1ff' is out of range (0x0-0xff)"),
        ({"EventCode": "0x2E, 0x100"}, "EventCode '0x2E, 0x100' is out of range (0x0-0xff)"),
        ({"EventCode": "zz"}, "EventCode 'zz' is not a list of numbers"),
        ({"UMask": "0x100"}, "UMask '0x100' is out of range (0x0-0xff)"),
        ({"UMask": "-1"}, "UMask '-1' is not a list of numbers"),
        ({"CounterMask": "256"}, "CounterMask '256' is out of range (0-255)"),
        ({"CounterMask": "0x" + "f" * 40}, "is not a number"),
        ({"Invert": "2"}, "Invert '2' is not 0 or 1"),
        ({"EdgeDetect": "yes"}, "EdgeDetect 'yes' is not 0 or 1"),
        ({"AnyThread": "-1"}, "AnyThread '-1' is not 0 or 1"),
        ({"Counter": "99999999"}, "Counter '99999999' is out of range (0-63)"),
        ({"Counter": "0,1,64"}, "Counter '0,1,64' is out of range (0-63)"),
        ({"Counter": "Fixed counter 99"}, "Counter 'Fixed counter 99' is out of range (fixed counters 0-63)"),
        ({"Counter": "0,x"}, "Counter '0,x' is not a list of numbers"),
        ({"CounterHTOff": "0,1,2,3,4,5,6,7,300"}, "CounterHTOff '0,1,2,3,4,5,6,7,300' is out of range (0-63)"),
        ({"MSRIndex": "0x1a6,0x1a7,0x1a6,0x1a7,0x1a6,0x1a7,0x1a6,0x1a7,0x1a6"}, "is not a list of numbers"),
        ({"MSRValue": "0x1" + "0" * 16}, "MSRValue '0x10000000000000000' is not a number"),
        ({"EventCode": 46}, "EventCode is int, not text"),
        ({"Counter": ["0", "1"]}, "Counter is list, not text"),
        ({"BriefDescription": None}, "BriefDescription is NoneType, not text"),
        ({"BriefDescription": "x" * 70_000}, "BriefDescription is longer than 65536 characters"),
        ({"EventName": "LONGEST LAT\x1b[2J"}, "EventName 'LONGEST LAT\\x1b[2J' is not a name"),
    ],
)
def test_a_table_with_a_bad_field_is_refused_naming_the_file(
    fields: dict[str, Any], why: str, tmp_path: Path, skx_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = _site_with(tmp_path, **fields)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "mapfile.csv").write_text("old\n")
    url = f"file://{site}"
    args = ["events", "--sysroot", str(skx_root), "--download", "--perfmon-url", url, "--perfmon-dir", str(dest)]
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"pmutop: cannot download {site / A_CORE}: not a valid perfmon table: event 5")
    assert why in err
    assert len(err) < 400
    assert (dest / "mapfile.csv").read_text() == "old\n" and os.listdir(dest) == ["mapfile.csv"]  # nothing written


@pytest.mark.parametrize(
    ("content", "why"),
    [
        pytest.param("[" * 100_000 + "]" * 100_000, "nested too deeply", id="deep-nesting"),
        ("{}", "no event list"),
        ('{"Header": [], "Events": []}', "Header is not an object"),
        ('{"Header": {}, "Events": []}', "no events"),
        ('{"Events": [1, 2]}', "event 1 is not an object"),
        ('[{"EventName": "A.B"}]', "event 1 (A.B): no EventCode"),
        ('[{"EventName": "A.B", "EventCode": "0x2e", "UMask": "0x41"}]', "event 1 (A.B): no Counter"),
        ("<html>captive portal</html>", "Expecting value: line 1 column 1 (char 0)"),
    ],
)
def test_json_that_is_not_a_table_is_refused(content: str, why: str, tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    (site / A_CORE).write_text(content)
    with pytest.raises(PmutopError) as e:
        download(f"file://{site}", tmp_path / "dest", [(SKX, None)])
    assert str(e.value) == f"cannot download {site / A_CORE}: not a valid perfmon table: {why}"
    assert not (tmp_path / "dest").exists()


def test_the_fixture_table_with_wrong_rows_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PmutopError, match=r"event 10 \(FIXTURE\.WIDE_CMASK\): CounterMask '300' is out of range"):
        download(f"file://{FIXTURES}", tmp_path / "dest", [(CLX, None)])


def test_every_real_core_table_passes_the_checks() -> None:
    if not (SHARED_PERFMON / "mapfile.csv").is_file():
        pytest.skip("shared/perfmon (Intel's perfmon tables) is not present")
    tables = PerfmonTables(SHARED_PERFMON)
    files = {tables.path_of(r) for r in tables.rows() if r.event_type in ("core", "hybridcore")}
    assert len(files) >= 40
    for path in sorted(files):
        assert table_problem(path.read_bytes()) is None, path


# --- writing --------------------------------------------------------------------------------------------


def test_files_are_0644_and_created_directories_0755_whatever_the_umask(tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    dest = tmp_path / "new" / "perfmon"
    old = os.umask(0o077)
    try:
        written = download(f"file://{site}", dest, [(SKX, None)])
    finally:
        os.umask(old)
    assert {p.stat().st_mode & 0o777 for p in written} == {0o644}
    for d in (tmp_path / "new", dest, dest / "A", dest / "A/events"):
        assert d.stat().st_mode & 0o777 == 0o755, d
    assert not [p for p in dest.rglob(".*")]  # no temporary file left behind


def test_an_existing_file_is_replaced_not_written_through(tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    dest = tmp_path / "dest"
    (dest / "A/events").mkdir(parents=True)
    target = tmp_path / "elsewhere.json"
    target.write_text("precious")
    (dest / A_CORE).symlink_to(target)  # a link where a table goes: replaced by the file, the target untouched
    download(f"file://{site}", dest, [(SKX, None)])
    assert target.read_text() == "precious"
    assert not (dest / A_CORE).is_symlink()
    assert (dest / A_CORE).read_bytes() == (site / A_CORE).read_bytes()


@pytest.mark.parametrize("link", [".", "A", "A/events"])
def test_a_symlinked_directory_is_refused_and_nothing_is_written(link: str, tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    dest = tmp_path / "dest"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    linked = dest if link == "." else dest / link
    linked.parent.mkdir(parents=True, exist_ok=True)
    linked.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(PmutopError) as e:
        download(f"file://{site}", dest, [(SKX, None)])
    assert str(e.value) == (
        f"cannot write into {linked}: it is a symbolic link (pmutop does not follow links where it writes; "
        "remove it or pick another --perfmon-dir)"
    )
    assert list(elsewhere.iterdir()) == []
    assert not (dest / "mapfile.csv").exists()  # refused before anything was written


def test_a_symlinked_cache_is_refused_through_the_cli(
    tmp_path: Path, skx_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = valid_site(tmp_path / "site")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    cache = tmp_path / "xdg-cache" / "pmutop" / "perfmon"  # XDG_CACHE_HOME is tmp_path/xdg-cache here
    cache.parent.mkdir(parents=True)
    cache.symlink_to(elsewhere, target_is_directory=True)
    assert main(["events", "--sysroot", str(skx_root), "--download", "--perfmon-url", f"file://{site}"]) == 1
    _out, err = capsys.readouterr()
    assert err == (
        f"pmutop: cannot write into {cache}: it is a symbolic link (pmutop does not follow links where it writes; "
        "remove it or pick another --perfmon-dir)\n"
    )
    assert list(elsewhere.iterdir()) == []


def test_a_failed_download_leaves_the_old_copy_whole(serve: Serve, tmp_path: Path) -> None:
    site = valid_site(tmp_path / "site")
    dest = tmp_path / "dest"
    download(f"file://{site}", dest, [(SKX, None)])
    before = {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()}
    url = serve(site, {f"/{A_CORE}": endless})
    with pytest.raises(PmutopError):
        download(url, dest, [(SKX, None)])
    assert {p: p.read_bytes() for p in dest.rglob("*") if p.is_file()} == before
