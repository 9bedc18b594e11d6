"""What this machine offers the tests, declared once (psutil's habit): a test that needs a tool, the compiled
shim or ../shared skips with the reason when it is not there."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from pmutop.backends.perf import probe_software_events
from pmutop.hw import shim

SHARED = Path(__file__).resolve().parents[3] / "shared"  # beside the repository (the steering repo's shared/)
SHARED_PERFMON = SHARED / "perfmon"  # Intel's perfmon tables

HAS_TMUX = shutil.which("tmux") is not None
HAS_PERF = shutil.which("perf") is not None  # Debian's linux-perf
HAS_PROMETHEUS = shutil.which("prometheus") is not None
HAS_SHIM = shim.ffi is not None  # the compiled cffi shim (needs a C compiler at install)
HAS_SHARED_PERFMON = (SHARED_PERFMON / "mapfile.csv").is_file()

needs_tmux = pytest.mark.skipif(not HAS_TMUX, reason="tmux is not installed")
needs_perf = pytest.mark.skipif(not HAS_PERF, reason="perf (linux-perf) is not installed")
needs_shim = pytest.mark.skipif(not HAS_SHIM, reason="the cffi shim is not built")
needs_perf_events = pytest.mark.skipif(
    probe_software_events(0) is not None, reason="CPU-wide software perf events cannot be opened here"
)
