"""Reading a recording, streamed: the header at once, the samples only as they are asked for, so printing
the first interval of a 400 MB file reads its first kilobytes and memory never holds the whole file.

A last line cut short (the recorder was killed) is skipped; anything else wrong is one clear line
(RecordingError), never a traceback. A damaged line in the middle is reported when a reader gets to it.
Seeking goes through pmutop.recording.index, built from the restart points the readers here offer.
"""

from __future__ import annotations

import json
import os
import zlib
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, overload

from pmutop.core.errors import PmutopError
from pmutop.core.sample import Sample
from pmutop.recording.format import (
    FORMAT_VERSION,
    MAGIC,
    Header,
    TaskNote,
    header_from_dict,
    sample_from_dict,
    task_note_from_line,
)
from pmutop.recording.package_format import PACKAGES_PREFIX, RecordedPackages, packages_from_dict
from pmutop.recording.snapshot_format import RecordedSnapshot, snapshot_from_dict

SNAPSHOT_PREFIX = b'{"snapshot":'  # a line of per-process/per-cgroup readings (format version 2)
SNAPSHOT_LAG = 16  # intervals held back for a snapshot the recorder wrote after later intervals' samples
CHUNK = 1 << 16  # compressed bytes read at a time from a .gz file
CHECKPOINT_SPAN = 1 << 21  # decoded bytes between two gzip checkpoints: what a seek decompresses at most
MAX_PENDING = 1000  # intervals held back waiting for a CPU that never writes again (a damaged recording)
_BAD_LINE = (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError)


class RecordingError(PmutopError):
    """Not a recording, a newer format, or damaged beyond its last line."""


@dataclass(frozen=True)
class Checkpoint:
    """Where a reader can start again: line number `line` (the header is line 1) begins at byte `offset` of a
    plain file; in a gzip file it begins after `offset` compressed bytes, with the inflater state `inflater`
    and the decoded bytes `pending` not yet split into lines (zran-style)."""

    line: int
    offset: int
    inflater: Any = None  # a zlib decompressobj copy; None: a fresh one (the file's start)
    pending: bytes = b""


class LineReader:
    """The lines of a recording from a checkpoint on, as (line number, byte offset in a plain file or -1,
    line). `consumed` is how far into the file it has read (for a progress line); for gzip, every
    CHECKPOINT_SPAN decoded bytes a Checkpoint goes to `on_checkpoint`."""

    def __init__(
        self,
        path: str,
        gz: bool,
        start: Checkpoint,
        on_checkpoint: Callable[[Checkpoint], None] | None = None,
    ) -> None:
        self.path, self.gz, self.start, self.on_checkpoint = path, gz, start, on_checkpoint
        self.consumed = start.offset

    def __iter__(self) -> Iterator[tuple[int, int, bytes]]:
        return self._gzip() if self.gz else self._plain()

    def _plain(self) -> Iterator[tuple[int, int, bytes]]:
        no, pos = self.start.line, self.start.offset
        with open(self.path, "rb") as f:
            f.seek(pos)
            for line in f:
                yield no, pos, line
                no += 1
                pos += len(line)
                self.consumed = pos

    def _gzip(self) -> Iterator[tuple[int, int, bytes]]:
        # Decompressed by hand: gzip.open raises on a stream without its end (a killed recorder), losing what
        # was flushed before; and only an inflater of our own can be copied for a checkpoint.
        start = self.start
        inflater = start.inflater.copy() if start.inflater is not None else zlib.decompressobj(wbits=31)
        pending, no, decoded = start.pending, start.line, 0
        with open(self.path, "rb") as f:
            f.seek(start.offset)
            while chunk := f.read(CHUNK):
                try:
                    data = inflater.decompress(chunk)
                except zlib.error:
                    raise RecordingError(f"{self.path}: corrupt gzip data") from None
                self.consumed += len(chunk)
                decoded += len(data)
                pending += data
                *full, pending = pending.split(b"\n")
                if self.on_checkpoint is not None and decoded >= CHECKPOINT_SPAN and not inflater.eof:
                    self.on_checkpoint(Checkpoint(no + len(full), f.tell(), inflater.copy(), pending))
                    decoded = 0
                for line in full:
                    yield no, -1, line + b"\n"
                    no += 1
                if inflater.eof:
                    break
        if pending:
            yield no, -1, pending  # no newline: possibly cut short


class Grouper:
    """Samples into intervals (sample n of every CPU), items in file order within an interval. The recorder
    writes each CPU's samples in order, but when it lags it writes several intervals of one CPU before the
    next CPU's: an interval is complete once every CPU still sampling has gone past it (a CPU whose sampler
    failed wrote an error sample and writes no more)."""

    def __init__(self, cpus: Sequence[int], done: frozenset[int] = frozenset()) -> None:
        self.done = set(done)
        self._latest = {cpu: 0 for cpu in cpus if cpu not in done}
        self._at = Counter(self._latest.values())  # latest seq -> how many CPUs are there: the floor is its min
        self.pending: dict[int, list[Any]] = {}

    def add(self, cpu: int, seq: int, failed: bool, item: Any) -> list[list[Any]]:
        """Add one sample; returns the intervals it completes, in order."""
        self.pending.setdefault(seq, []).append(item)
        old = self._latest.get(cpu)
        if old is not None:
            self._forget(old)
            if failed:
                del self._latest[cpu]
            else:
                self._latest[cpu] = seq
                self._at[seq] += 1
        if failed:
            self.done.add(cpu)
        floor = min(self._at) if self._at else None
        out = []
        while self.pending:
            first = min(self.pending)
            if floor is not None and first > floor and len(self.pending) <= MAX_PENDING:
                break
            out.append(self.pending.pop(first))
        return out

    def _forget(self, seq: int) -> None:
        self._at[seq] -= 1
        if not self._at[seq]:
            del self._at[seq]

    def flush(self) -> list[list[Any]]:
        """The intervals still held back (the end of the file)."""
        out = [self.pending[k] for k in sorted(self.pending)]
        self.pending.clear()
        return out


@dataclass(frozen=True)
class Restart:
    """Where interval `skip` intervals before the wanted one starts cleanly: read from `checkpoint`, drop
    the lines before `line`, group with the CPUs in `done` already finished."""

    checkpoint: Checkpoint
    line: int
    done: frozenset[int] = frozenset()
    skip: int = 0


class Recording:
    """A recording opened by read_recording: the header is read, the samples are read when iterated."""

    def __init__(self, path: str, header: Header, gz: bool, body: Checkpoint, size: int) -> None:
        self.path, self.header, self.gz, self.size = path, header, gz, size
        self.body = body  # where the first line after the header starts
        self._truncated: bool | None = None  # known once a reader got to the end
        self.samples: _Samples = _Samples(self)  # compatible with the list it used to be; streamed

    @property
    def truncated(self) -> bool:
        """The last line was cut short (the recorder was killed). Free for a plain file (its tail is read)
        or once a reader got to the end; otherwise a .gz file is decompressed to its end once to tell."""
        if self._truncated is None:
            self._truncated = self._last_line_cut((_gzip_tail_line if self.gz else _tail_line)(self.path, self.size))
        return self._truncated

    @property
    def truncated_if_known(self) -> bool | None:
        """`truncated` when knowing costs nothing more (a plain file, or the end already read), else None."""
        return self.truncated if self._truncated is not None or not self.gz else None

    def ended_with(self, line: bytes) -> None:
        """A reader (the index) got to the end: its last line tells whether the recording was cut short."""
        if self._truncated is None:
            self._truncated = self._last_line_cut(line)

    def _last_line_cut(self, line: bytes) -> bool:
        if not line.strip() or line.startswith(b'{"format":'):
            return False  # an empty last line, or the header's (no samples)
        try:
            obj = json.loads(line)
            if "snapshot" in obj:
                snapshot_from_dict(obj["snapshot"])
            elif "packages" in obj:
                packages_from_dict(obj["packages"])
            else:
                sample_from_dict(obj["sample"])
        except _BAD_LINE:
            return True
        return False

    def lines(self, start: Checkpoint | None = None, first: int = 2) -> Iterator[tuple[int, int, bytes]]:
        """The raw lines from line `first` on (the header is line 1), read from `start` (default: the body)."""
        reader = iter(LineReader(self.path, self.gz, start or self.body))
        if (start or self.body).line >= first:
            return reader
        return ((no, at, line) for no, at, line in reader if no >= first)

    def iter_samples(self, restart: Restart | None = None) -> Generator[tuple[int, Sample], None, None]:
        """(line number, sample) in file order. A damaged line is an error once another line follows it;
        as the very last line it was cut short (`truncated`)."""
        entries = self._entries(restart, with_tasks=False)
        try:
            for no, item, _ in entries:
                if isinstance(item, Sample):
                    yield no, item
        finally:
            entries.close()

    def _entries(
        self, restart: Restart | None, with_tasks: bool
    ) -> Generator[tuple[int, Sample | RecordedSnapshot | RecordedPackages, TaskNote | None], None, None]:
        """(line number, sample, snapshot or DRAM reading, the sample's task note when `with_tasks`) in file
        order."""
        lines = self.lines() if restart is None else self.lines(restart.checkpoint, restart.line)
        bad_at: int | None = None
        try:
            for no, _, line in lines:
                if bad_at is not None:  # a damaged line that was not the last one
                    raise RecordingError(f"{self.path}: damaged recording at line {bad_at}")
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                    if line.startswith(SNAPSHOT_PREFIX):
                        yield no, snapshot_from_dict(obj["snapshot"]), None
                        continue
                    if line.startswith(PACKAGES_PREFIX):
                        yield no, packages_from_dict(obj["packages"]), None
                        continue
                    sample = sample_from_dict(obj["sample"])
                except _BAD_LINE:
                    bad_at = no
                    continue
                yield no, sample, task_note_from_line(obj) if with_tasks else None
        except OSError as e:
            raise RecordingError(f"{self.path}: {e.strerror or e}") from None
        self._truncated = bad_at is not None

    def iter_intervals(self, restart: Restart | None = None) -> Generator[list[Sample], None, None]:
        """Samples grouped by interval (sample n of every CPU), in order, read as they are asked for."""
        for interval in self._grouped(restart, with_tasks=False):
            yield [s for s, _ in interval.samples]

    def iter_intervals_with_tasks(
        self, restart: Restart | None = None
    ) -> Generator[list[tuple[Sample, TaskNote | None]], None, None]:
        """iter_intervals with each sample's task note (what the live view showed as its top task)."""
        for interval in self._grouped(restart, with_tasks=True):
            yield interval.samples

    def iter_recorded_intervals(self, restart: Restart | None = None) -> Generator[RecordedInterval, None, None]:
        """Each interval's samples with their task notes and its per-process/per-cgroup snapshot (None: the
        recording has none for it)."""
        yield from self._grouped(restart, with_tasks=True)

    def _grouped(self, restart: Restart | None, with_tasks: bool) -> Generator[RecordedInterval, None, None]:
        grouper = Grouper(self.header.cpus, restart.done if restart else frozenset())
        h = self.header
        pairing = _SnapshotPairing(
            h.task_events is not None, restart.skip if restart else 0, h.dram is not None, restart is not None
        )
        entries = self._entries(restart, with_tasks)
        try:
            for _, item, note in entries:
                if isinstance(item, RecordedSnapshot):
                    yield from pairing.add_snapshot(item)
                    continue
                if isinstance(item, RecordedPackages):
                    yield from pairing.add_packages(item)
                    continue
                for group in grouper.add(item.cpu, item.seq, item.error is not None, (item, note)):
                    yield from pairing.add_group(group)
        finally:
            entries.close()
        for group in grouper.flush():
            yield from pairing.add_group(group)
        yield from pairing.flush()

    def intervals(self) -> list[list[Sample]]:
        """Every interval in a list: the whole file in memory (tests and small files; the commands stream)."""
        return list(self.iter_intervals())


@dataclass(frozen=True)
class RecordedInterval:
    """One interval of a recording: each CPU's sample with its task note, the snapshot read with them, and the
    DRAM readings paired with it (normally one; none where the run read none for it; two where a reading came
    late, each with its own measured interval)."""

    samples: list[tuple[Sample, TaskNote | None]]
    snapshot: RecordedSnapshot | None = None
    packages: tuple[RecordedPackages, ...] = ()


class _SnapshotPairing:
    """Pairs each complete interval with its snapshot (same interval number) and its DRAM readings (by time:
    those stamped after the previous interval's time, up to its own). The recorder writes both after their
    interval's samples, but maybe after later intervals' too (their reader lagged): while they are expected, an
    interval waits for its own until a later one is read (they are written in order: this one will not come),
    SNAPSHOT_LAG intervals wait, or the file ends. `skip`: the intervals a restart reads only to drop;
    `restarted`: the first interval read takes no DRAM reading from before its own samples (that one belongs
    to the interval before the restart)."""

    def __init__(self, expected: bool, skip: int, packages_expected: bool = False, restarted: bool = False) -> None:
        self.expected = expected
        self.skip = skip
        self.packages_expected = packages_expected
        self.packages: deque[RecordedPackages] = deque()
        self.newest_packages = float("-inf")  # the time of the latest DRAM reading read
        self.floor: float | None = None if restarted else float("-inf")  # readings at or before: given out
        self.waiting: deque[tuple[int, list[tuple[Sample, TaskNote | None]]]] = deque()
        self.snapshots: dict[int, RecordedSnapshot] = {}
        self.latest = 0  # the highest interval a snapshot was read for
        self.released = 0  # the highest interval given out (or skipped)

    def add_group(self, group: list[tuple[Sample, TaskNote | None]]) -> Iterator[RecordedInterval]:
        self.waiting.append((group[0][0].seq, group))
        return self._release(final=False)

    def add_snapshot(self, recorded: RecordedSnapshot) -> Iterator[RecordedInterval]:
        self.expected = True  # a recording whose header did not say so still pairs what it has
        if recorded.interval > self.released:  # else: its interval is gone by (a restart began after it)
            self.snapshots[recorded.interval] = recorded
            self.latest = max(self.latest, recorded.interval)
        return self._release(final=False)

    def add_packages(self, recorded: RecordedPackages) -> Iterator[RecordedInterval]:
        self.packages_expected = True
        self.packages.append(recorded)
        self.newest_packages = max(self.newest_packages, recorded.time)
        return self._release(final=False)

    def flush(self) -> Iterator[RecordedInterval]:
        return self._release(final=True)

    def _paired_packages(self, group: list[tuple[Sample, TaskNote | None]]) -> tuple[RecordedPackages, ...]:
        at = max(s.time for s, _ in group)
        if self.floor is None:  # the first interval after a restart: nothing from before its samples
            self.floor = min(s.time for s, _ in group) - 1e-9
        out = []
        while self.packages and self.packages[0].time <= at:
            recorded = self.packages.popleft()
            if recorded.time > self.floor:
                out.append(recorded)
        self.floor = max(self.floor, at)
        return tuple(out)

    def _release(self, final: bool) -> Iterator[RecordedInterval]:
        while self.waiting:
            seq, group = self.waiting[0]
            still_coming = self.expected and not final and seq not in self.snapshots and seq > self.latest
            if self.packages_expected and not final and self.newest_packages < max(s.time for s, _ in group):
                still_coming = True
            if still_coming and len(self.waiting) <= SNAPSHOT_LAG:
                return
            self.waiting.popleft()
            self.released = max(self.released, seq)
            for old in [k for k in self.snapshots if k < seq]:
                del self.snapshots[old]  # its interval was never read (a restart, a damaged recording)
            snapshot = self.snapshots.pop(seq, None)
            packages = self._paired_packages(group)
            if self.skip:
                self.skip -= 1
            else:
                yield RecordedInterval(group, snapshot, packages)


class _Samples(Sequence[Sample]):
    """Recording.samples: iterating streams the file; `not rec.samples` reads only up to the first sample;
    len() and indexing read it all once (kept for callers that want a list)."""

    def __init__(self, recording: Recording) -> None:
        self._recording = recording
        self._all: list[Sample] | None = None

    def __iter__(self) -> Iterator[Sample]:
        if self._all is not None:
            return iter(self._all)
        return (s for _, s in self._recording.iter_samples())

    def __bool__(self) -> bool:
        if self._all is not None:
            return bool(self._all)
        samples = self._recording.iter_samples()
        try:
            return next(samples, None) is not None
        finally:
            samples.close()

    def _list(self) -> list[Sample]:
        if self._all is None:
            self._all = list(iter(self))  # list(self) would ask len(self) first
        return self._all

    def __len__(self) -> int:
        return len(self._list())

    @overload
    def __getitem__(self, i: int) -> Sample: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Sample]: ...
    def __getitem__(self, i: int | slice) -> Sample | Sequence[Sample]:
        return self._list()[i]


def _tail_line(path: str, size: int) -> bytes:
    """The last line of a plain file, read from its end."""
    with open(path, "rb") as f:
        want = 4096
        while True:
            start = max(0, size - want)
            f.seek(start)
            data = f.read(size - start)
            body = data[:-1] if data.endswith(b"\n") else data
            cut = body.rfind(b"\n")
            if cut >= 0 or start == 0:
                return data[cut + 1 :]
            want *= 4


def _gzip_tail_line(path: str, size: int) -> bytes:
    """The last line of a .gz file: decompressed to its end, keeping only the tail (zlib's speed, no lines
    split in Python)."""
    inflater = zlib.decompressobj(wbits=31)
    tail = b""
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            try:
                tail += inflater.decompress(chunk)
            except zlib.error:
                raise RecordingError(f"{path}: corrupt gzip data") from None
            cut = tail.rfind(b"\n", 0, len(tail) - 1)
            if cut >= 0:
                tail = tail[cut + 1 :]
            if inflater.eof:
                break
    return tail


def read_recording(path: str) -> Recording:
    """Open a recording: its header is read and checked now (one line on anything wrong), its samples
    when a caller iterates them."""
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        size = os.path.getsize(path)
        first = _first_line(path, gz)
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise RecordingError(f"{path}: is a directory") from None
    except OSError as e:
        raise RecordingError(f"{path}: {e.strerror or e}") from None
    header = _parse_header(path, first)
    body = Checkpoint(1, 0) if gz else Checkpoint(2, len(first or b""))
    return Recording(path, header, gz, body, size)


def _first_line(path: str, gz: bool) -> bytes | None:
    for _, _, line in LineReader(path, gz, Checkpoint(1, 0)):
        return line  # leaving the loop closes the reader's file
    return None


def _parse_header(path: str, first: bytes | None) -> Header:
    not_one = f"{path}: not a pmutop recording (record one with `pmutop --record FILE`)"
    if first is None or not first.strip():
        raise RecordingError(f"{path}: empty file, not a pmutop recording")
    try:
        head = json.loads(first)
    except (ValueError, UnicodeDecodeError):
        if first.startswith(b'{"format":"' + MAGIC.encode()) and not first.endswith(b"\n"):
            raise RecordingError(f"{path}: the recording was cut short inside its header") from None
        raise RecordingError(not_one) from None
    if not isinstance(head, dict) or head.get("format") != MAGIC:
        raise RecordingError(not_one)
    version = head.get("version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise RecordingError(
            f"{path}: recording format version {version} is newer than this pmutop reads "
            f"(version {FORMAT_VERSION}): upgrade pmutop"
        )
    try:
        return header_from_dict(head)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RecordingError(f"{path}: damaged recording header") from None
