"""The floor under any Python batch monitor here: `python benchmarks/batch_python_floor.py INTERVAL`.

What batch mode's system calls cost from a bare Python loop: the same perf groups as the batch benchmark's
(cpu-clock and context-switches, one group per online CPU, opened through pmutop's own perf_event code), read
with one read() each at every deadline of the same schedule, the kernel's CPU times (/proc/stat) read once per
interval as batch mode's Util% reads them, and one write of a line per CPU and an `all` line. Between the
calls it only subtracts and formats: no samples, no metrics. The batch benchmark measures it beside pmutop and
`perf stat`, so the figures say how much of pmutop's cost any Python program doing this work would pay (the
interpreter waking every interval, and these calls made from a cold cache), and how much is pmutop's own.
A measurement, not a mode of pmutop.
"""

from __future__ import annotations

import os
import struct
import sys
import time

from pmutop.hw import perf_event

EVENTS = [
    ("cpu_clock", perf_event.PERF_TYPE_SOFTWARE, perf_event.PERF_COUNT_SW_CPU_CLOCK),
    ("context_switches", perf_event.PERF_TYPE_SOFTWARE, perf_event.PERF_COUNT_SW_CONTEXT_SWITCHES),
]


def run(interval: float) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    groups = [perf_event.PerfGroup(cpu, EVENTS) for cpu in cpus]
    for group in groups:
        group.enable()
    size = 8 * (3 + len(EVENTS))
    unpack = struct.Struct(f"={size // 8}Q").unpack
    fds = [group.fds[0] for group in groups]
    stat = os.open("/proc/stat", os.O_RDONLY | os.O_CLOEXEC)
    prev = [unpack(os.read(fd, size)) for fd in fds]
    os.pread(stat, 65536, 0)
    out = sys.stdout
    step = round(interval * 1e9)
    epoch = time.monotonic_ns()
    k = 1
    while True:
        remaining = epoch + k * step - time.monotonic_ns()
        if remaining > 0:
            time.sleep(remaining / 1e9)
        at = k * interval  # this deadline's time, as batch mode's time column
        k += 1
        now = [unpack(os.read(fd, size)) for fd in fds]
        os.pread(stat, 65536, 0)
        lines = []
        total = 0
        for cpu, a, b in zip(cpus, prev, now, strict=True):
            switches = b[4] - a[4]
            total += switches
            lines.append(f"{at:8.2f} {cpu:4} {(b[3] - a[3]) / 1e9:8.3f} {switches:9}\n")
        lines.append(f"{at:8.2f}  all {total:18}\n")
        out.write("".join(lines))
        out.flush()
        prev = now


if __name__ == "__main__":
    try:
        run(float(sys.argv[1]) if len(sys.argv) > 1 else 0.5)
    except (BrokenPipeError, KeyboardInterrupt):  # its reader went away, or Ctrl+C: the end, quietly
        os._exit(0)  # not sys.exit: flushing the closed pipe at exit would fail again
