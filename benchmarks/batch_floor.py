"""pmutop's batch mode without its Util% source: `python benchmarks/batch_floor.py PMUTOP-ARGUMENTS...`.

Where the perf backend has no hardware events (a VM without a virtual PMU, as on CI), batch mode's Util% column
comes from the kernel's per-CPU times: one read of /proc/stat per interval, which the kernel builds afresh
each time (every CPU's times, every interrupt's count). `perf stat` shows no utilisation and reads no such
file. This runs the real batch mode with that one read replaced by "unknown" (the column then shows `-`), so
the batch benchmark can show, side by side with perf stat, what the rest of batch mode costs. A measurement,
not a mode: pmutop itself always shows Util%.
"""

from __future__ import annotations

import sys

from pmutop.__main__ import entry
from pmutop.probes import cputimes


def _unknown(self: cputimes.CpuBusy, cpu: int) -> float | None:
    return None


if __name__ == "__main__":
    cputimes.CpuBusy.busy = _unknown  # type: ignore[method-assign]
    sys.argv = ["pmutop", *sys.argv[1:]]
    raise SystemExit(entry())
