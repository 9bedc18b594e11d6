"""`pmutop replay --batch`: a recording straight into the batch printers (what `pmutop --batch` printed live,
recomputed from the raw deltas)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO

from pmutop.core.errors import UsageError
from pmutop.recording.reader import Recording
from pmutop.sinks.batch import PRINTERS, print_interval, print_packages, print_snapshot
from pmutop.sinks.batch_packages import PACKAGE_PRINTERS
from pmutop.sinks.batch_tasks import SnapshotPrinter


def check_records(recording: Recording, records: str | None) -> None:
    """--records task, cgroup or package of a recording made without them is a usage error, said in one line."""
    if records in ("task", "cgroup") and recording.header.task_events is None:
        raise UsageError(f"--records {records}: {recording.path} holds no {records} records (recorded without them)")
    if records == "package" and recording.header.dram is None:
        raise UsageError(
            f"--records package: {recording.path} holds no package records (recorded without a DRAM bandwidth source)"
        )


def replay_batch(
    recording: Recording,
    fmt: str,
    out: IO[str] | None = None,
    count: int | None = None,
    timestamps: bool = False,
    warn: Callable[[str], None] | None = None,
    records: str | None = None,
) -> int:
    """Print the recording as `pmutop --batch --format fmt` printed it live (the same loop: a CPU whose
    sampler failed is dropped; each interval's records share its last read's time). Returns intervals printed.

    `records`: the kinds to print, as the live run's --records: "cpu", "task", "cgroup", "package" or "all"; None: every
    kind in JSON, the CPU records in CSV and the table (one kind each)."""
    out = out or sys.stdout
    h = recording.header
    keys = h.keys[h.cpus[0]]
    tma = any(h.topdown.get(cpu) for cpu in h.cpus)
    records = records or ("all" if fmt == "json" else "cpu")
    check_records(recording, records)
    # A fleet's recording (--prometheus) names each CPU id's host: its records say it, as the live run's did.
    hosts = {int(gid): (str(where[0]), int(where[1])) for gid, where in h.backend.get("cpu_hosts", {}).items()}
    printer = PRINTERS[fmt](out, keys, h.mode, tma, timestamps, hosts or None) if records in ("cpu", "all") else None
    snapshots = None
    if h.task_events is not None and records != "cpu":
        snapshots = SnapshotPrinter(out, fmt, h.task_events, h.mode, records, timestamps, warn)
    packages = None
    if h.dram is not None and records in ("package", "all"):
        packages = PACKAGE_PRINTERS[fmt](out, h.dram.get("source", "?"), h.mode, timestamps)
    failed: set[int] = set()
    warned: set[tuple[int, str]] = set()
    done = 0
    # Streamed: --count N reads the first N intervals and no more.
    intervals = recording.iter_recorded_intervals()
    for interval in intervals if count is None or count > 0 else ():
        by_cpu = {s.cpu: s for s, _ in interval.samples}
        for cpu, s in by_cpu.items():
            if s.error and cpu not in failed and not h.remote:  # a remote host that was lost comes back
                failed.add(cpu)
                if warn:
                    warn(f"cpu {cpu} dropped: {s.error}")
        live = [cpu for cpu in h.cpus if cpu not in failed]
        if not live or any(cpu not in by_cpu for cpu in live):
            break  # every CPU failed, or the recording ends inside this interval
        batch = [by_cpu[cpu] for cpu in live]
        wall0 = h.start if timestamps else None
        if printer is not None:
            print_interval(printer, batch, done + 1, wall0, warn, warned)
        if snapshots is not None and interval.snapshot is not None:
            print_snapshot(snapshots, interval.snapshot.snapshot, batch, done + 1, wall0)
        if packages is not None:
            for recorded in interval.packages:
                print_packages(packages, recorded.packages, batch, done + 1, wall0)
        done += 1
        if count is not None and done >= count:
            break
    intervals.close()  # its file
    out.flush()
    return done
