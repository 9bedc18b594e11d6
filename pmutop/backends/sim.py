"""`--backend sim` / `--demo`: the msr backend, unchanged, on the simulated PMU."""

from __future__ import annotations

from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.undo import UndoLog
from pmutop.sim.segment import python_only_reason


class SimBackend(MsrBackend):
    name = "sim"
    simulated = True

    def prepare(self, cpus: list[int], undo: UndoLog) -> None:
        super().prepare(cpus, undo)
        why = python_only_reason()
        if why is not None:  # said once, with the other notices (stderr; the live view's header)
            self.notices.append(f"the simulated PMU's arithmetic runs in Python, at more CPU: {why}")
