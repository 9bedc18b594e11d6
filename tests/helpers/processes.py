"""Helpers for tests that run pmutop as a process."""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def wait_for_output(proc: subprocess.Popen[str], timeout: float = 30.0) -> str:
    """The next line pmutop prints, failing the test when none comes within `timeout` seconds."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "pmutop printed nothing"
    return proc.stdout.readline()


def run_pmutop(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """`python -m pmutop ARGS` to its end: its exit status, stdout and stderr."""
    return subprocess.run(
        [sys.executable, "-m", "pmutop", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def start_pmutop(*args: str) -> subprocess.Popen[str]:
    """`python -m pmutop ARGS` started from the repository root, unbuffered, its stdout and stderr piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "pmutop", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def self_signed_certificate(directory: Path) -> tuple[str, str]:
    """(certificate, key) files for 127.0.0.1 that no known CA signed; skips the test without openssl."""
    if not shutil.which("openssl"):
        pytest.skip("no openssl to make a certificate")
    cert, key = directory / "cert.pem", directory / "key.pem"
    made = subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    if made.returncode != 0:
        pytest.skip(f"openssl could not make a certificate: {made.stderr.strip()[-200:]}")
    return str(cert), str(key)
