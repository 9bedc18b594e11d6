"""`--backend sim` / `--demo`: the msr backend, unchanged, on the simulated PMU."""

from __future__ import annotations

from pmutop.backends.msr.backend import MsrBackend


class SimBackend(MsrBackend):
    name = "sim"
    simulated = True
