"""The recorder: a sink with its own thread that copies every new sample from the rings into the file.

It never runs in the sampler's path: it reads the rings like the live view does. The file is flushed after
every interval (for gzip with Z_SYNC_FLUSH, so everything written so far can be decompressed), so a crash
or SIGKILL loses at most the interval being written.

With a task source, each interval's lines carry the top task of their CPU (what the live view shows in its
Top task column; recording.format says how): the replay shows it again.

With a DRAM bandwidth source, each of its readings (record_packages, a listener of the package sampler) is a
line of its own after its interval's samples.

With per-process or per-cgroup counters (--pid, --tasks, --cgroups, --cgroup), whoever reads them each interval
(batch's loop, the live view's task sampler) hands the snapshot to record_tasks(), from any thread: it writes the
samples not yet written, then the snapshot line, so a snapshot follows its interval's samples in the file.

A write that fails (a full disk, /dev/full) ends the recording for good: `error` says so in one line naming
--record and the file, and `on_failure` asks the run to stop (a recording with a hole is not a recording of
the run; the caller exits 1).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import threading
import time
import zlib
from collections.abc import Callable
from typing import IO, Any

from pmutop import __version__
from pmutop.core.dram_reading import PackageDram, PackageFeed
from pmutop.core.errors import PmutopError, UsageError
from pmutop.core.feed import SampleFeed
from pmutop.core.run_description import RunInfo
from pmutop.core.task_reading import TaskSnapshot
from pmutop.probes.tasks import TaskSource, TopTask
from pmutop.recording.format import (
    FORMAT_VERSION,
    TASKS_VERSION,
    Header,
    RecordedTask,
    event_encodings,
    header_to_dict,
    sample_to_dict,
    task_to_dict,
)
from pmutop.recording.package_format import packages_to_dict
from pmutop.recording.snapshot_format import snapshot_to_dict


def make_header(
    feed: SampleFeed,
    info: RunInfo,
    mode: str,
    backend_facts: dict[str, Any],
    events: list[Any] | None,
    start: float | None = None,
    task_events: list[str] | None = None,
    packages: PackageFeed | None = None,
) -> Header:
    """`task_events`: the per-process/per-cgroup readings' events when the run counts processes or cgroups
    (TaskCounterSource.events); None: no snapshot will be recorded. `packages`: the run's DRAM bandwidth
    (the package sampler, whose readings go to record_packages); None: none is recorded."""
    keys = {cpu: list(feed.keys(cpu)) for cpu in feed.cpus}
    all_keys: list[str] = []
    for ks in keys.values():
        all_keys += [k for k in ks if k not in all_keys]
    return Header(
        version=FORMAT_VERSION if packages is not None else TASKS_VERSION,
        pmutop_version=__version__,
        host=info.hostname,
        start=time.time() - feed.elapsed() if start is None else start,
        interval=feed.interval,
        mode=mode,
        cpus=list(feed.cpus),
        keys=keys,
        topdown={cpu: feed.topdown_method(cpu) for cpu in feed.cpus},
        core_types=dict(info.core_types),
        backend=dict(backend_facts),
        events=event_encodings(events, all_keys),
        runinfo=dataclasses.asdict(info),
        task_events=None if task_events is None else list(task_events),
        dram=None if packages is None else {"source": packages.source_name, "why": packages.why},
    )


def open_for_writing(path: str) -> IO[bytes]:
    try:
        raw = open(path, "wb")  # noqa: SIM115 - closed by Recorder.close
    except OSError as e:
        raise UsageError(f"--record {path}: {e.strerror or e}") from None
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6)  # type: ignore[return-value]
    return raw


class Recorder:
    """Writes the header at once, then every sample as it arrives, until close() (idempotent, any thread).

    Raises PmutopError (status 1) when not even the header can be written."""

    def __init__(
        self,
        path: str,
        feed: SampleFeed,
        header: Header,
        on_failure: Callable[[], None] | None = None,
        tasks: TaskSource | None = None,
        limit: int | None = None,
    ) -> None:
        """`tasks`: where the top task of each CPU comes from (the live view's own source, shared so both
        show the same lookup: pmutop.app.live_view.SharedTasks); None: no task is recorded. `limit`: record
        at most this many intervals (--batch --count N: the engine may sample once more before it stops, and
        the recording holds what the run printed)."""
        self.path = path
        self.feed = feed
        self.on_failure = on_failure
        self.tasks = tasks
        self._task_events = header.task_events is not None
        self._packages = header.dram is not None
        self._out = open_for_writing(path)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._seen = {cpu: 0 for cpu in feed.cpus}
        self._limit = limit
        self._thread: threading.Thread | None = None
        self.error: str | None = None
        self._closed = False
        self._saved_until: float | None = None  # run time of the last sample known to be in the file
        self._pending_until: float | None = None  # ... of the last sample written, flushed or not
        try:
            self._write_line(header_to_dict(header))
            self._flush()
        except OSError as e:
            self._failed(e)
            self.close()
            raise PmutopError(f"--record {path}: {e.strerror or e}") from None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pmutop-record", daemon=True)
        self._thread.start()

    def _write_line(self, obj: dict[str, Any]) -> None:
        self._out.write(json.dumps(obj, separators=(",", ":")).encode() + b"\n")

    def _flush(self) -> None:
        if isinstance(self._out, gzip.GzipFile):
            self._out.flush(zlib.Z_SYNC_FLUSH)  # a complete deflate block: readable up to here
        else:
            self._out.flush()
        raw = getattr(self._out, "fileobj", None) or self._out
        if isinstance(raw, io.BufferedWriter):
            raw.flush()
        self._saved_until = self._pending_until

    def _failed(self, e: OSError) -> None:
        """The first write that failed ends the recording (nothing after a hole); the run is asked to stop."""
        if self.error is not None:
            return
        kept = "no samples" if self._saved_until is None else f"the first {self._saved_until:.1f} s of the run"
        self.error = f"--record {self.path}: {e.strerror or e}: the recording is incomplete (it holds {kept})"
        if self.on_failure is not None:
            self.on_failure()

    def drain(self) -> int:
        """Write every sample not written yet; returns how many (none once a write failed)."""
        with self._lock:
            if self._closed or self.error is not None:
                return 0
            try:
                n = self._write_samples()
                if n:
                    self._flush()
            except OSError as e:
                self._failed(e)
                return 0
        return n

    def record_tasks(self, interval: int, time: float, snapshot: TaskSnapshot) -> None:
        """One interval's per-process and per-cgroup readings (any thread). `interval`: the seq of the CPU
        samples they were read with; `time`: those samples' run time. Nothing once the recording has failed
        or closed (the run is being stopped). The header must name the readings' events (make_header's
        `task_events`): a replay reads snapshots only from a recording that says it has them."""
        if not self._task_events:
            raise ValueError("record_tasks: the recording's header has no task_events (make_header(task_events=...))")
        with self._lock:
            if self._closed or self.error is not None:
                return
            try:
                self._write_samples()  # the interval's samples first: a reader meets them before their snapshot
                self._write_line({"snapshot": snapshot_to_dict(interval, time, snapshot)})
                self._flush()
            except OSError as e:
                self._failed(e)

    def record_packages(self, interval: int, time: float, packages: list[PackageDram]) -> None:
        """One DRAM bandwidth reading (a PackageSampler listener: its thread, or the batch loop's): `interval`
        is the reading's number, `time` the run time of the CPU samples it was read after. The interval's
        samples are written first, as for record_tasks. The header must say where the readings come from
        (make_header's `packages`)."""
        if not self._packages:
            raise ValueError("record_packages: the recording's header has no dram (make_header(packages=...))")
        with self._lock:
            if self._closed or self.error is not None:
                return
            try:
                self._write_samples()
                self._write_line({"packages": packages_to_dict(interval, time, packages)})
                self._flush()
            except OSError as e:
                self._failed(e)

    def _write_samples(self) -> int:
        """The samples not written yet, under the lock; raises OSError (the caller ends the recording)."""
        new = {cpu: self.feed.rings[cpu].since(self._seen[cpu]) for cpu in self.feed.cpus}
        if self._limit is not None:
            new = {cpu: [s for s in samples if s.seq <= self._limit] for cpu, samples in new.items()}
        if not any(new.values()):
            return 0
        tasks = self._lookup_tasks()
        n = 0
        for cpu, samples in new.items():
            for i, s in enumerate(samples):
                self._seen[cpu] = s.seq
                line: dict[str, Any] = {"sample": sample_to_dict(s)}
                # The lookup is of now: it belongs to each CPU's newest sample (older ones, written
                # late with it, carry none rather than one that is not theirs).
                if tasks is not None and i == len(samples) - 1 and s.error is None:
                    line["task"] = task_to_dict(_recorded(tasks.get(cpu)))
                self._write_line(line)
                # Known to be in the file once flushed; a failed flush reports what came before it.
                self._pending_until = s.time if self._pending_until is None else max(self._pending_until, s.time)
                n += 1
        return n

    def _lookup_tasks(self) -> dict[int, TopTask] | None:
        if self.tasks is None:
            return None
        try:
            return self.tasks.top_per_cpu()
        except Exception:  # a vanished process or permissions: this interval records no task, as the view shows
            return None

    def _run(self) -> None:
        while not self._stop.is_set() and self.error is None:
            self.feed.wait_for_samples(dict(self._seen), timeout=0.5, stop=self._stop)
            self.drain()

    def close(self) -> str | None:
        """Write what is left and close the file. Returns the one line when the recording is incomplete."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)
        self.drain()
        with self._lock:
            if not self._closed:
                self._closed = True
                raw = getattr(self._out, "fileobj", None)
                for f in (self._out, raw):  # gzip's trailer, then the file under it: both, whatever fails
                    if f is None:
                        continue
                    try:
                        f.close()
                    except OSError as e:
                        self._failed(e)
        return self.error


def _recorded(task: TopTask | None) -> RecordedTask | None:
    return None if task is None else RecordedTask(task.name, task.pid, task.cpu_seconds)
