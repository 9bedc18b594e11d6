"""`pmutop replay --batch`: a recording straight into the batch printers (what `pmutop --batch` printed live,
recomputed from the raw deltas)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO

from pmutop.recording.reader import Recording
from pmutop.sinks.batch import PRINTERS, print_interval


def replay_batch(
    recording: Recording,
    fmt: str,
    out: IO[str] | None = None,
    count: int | None = None,
    timestamps: bool = False,
    warn: Callable[[str], None] | None = None,
) -> int:
    """Print the recording as `pmutop --batch --format fmt` printed it live (the same loop: a CPU whose
    sampler failed is dropped; each interval's records share its last read's time). Returns intervals printed."""
    out = out or sys.stdout
    h = recording.header
    keys = h.keys[h.cpus[0]]
    tma = any(h.topdown.get(cpu) for cpu in h.cpus)
    printer = PRINTERS[fmt](out, keys, h.mode, tma, timestamps)
    failed: set[int] = set()
    warned: set[tuple[int, str]] = set()
    done = 0
    intervals = recording.iter_intervals()  # streamed: --count N reads the first N intervals and no more
    for group in intervals if count is None or count > 0 else ():
        by_cpu = {s.cpu: s for s in group}
        for cpu, s in by_cpu.items():
            if s.error and cpu not in failed and not h.remote:  # a remote host that was lost comes back
                failed.add(cpu)
                if warn:
                    warn(f"cpu {cpu} dropped: {s.error}")
        live = [cpu for cpu in h.cpus if cpu not in failed]
        if not live or any(cpu not in by_cpu for cpu in live):
            break  # every CPU failed, or the recording ends inside this interval
        batch = [by_cpu[cpu] for cpu in live]
        print_interval(printer, batch, done + 1, h.start if timestamps else None, warn, warned)
        done += 1
        if count is not None and done >= count:
            break
    intervals.close()  # its file
    out.flush()
    return done
