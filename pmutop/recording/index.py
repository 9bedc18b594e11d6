"""An index of a recording, built as it is read (the replay feed runs build() in a thread of its own while it
already shows the first intervals): each interval's recorded time and where a reader can start it, so a
seek reads a little of the file, never all of it.

A plain file's interval starts at a byte offset. A gzip stream cannot be entered in the middle, so every
CHECKPOINT_SPAN decoded bytes the index keeps a copy of the inflater (zran-style; ~40 kB each): a seek
decompresses at most that much before its interval. Reading only the few fields an index needs (cpu, seq,
time, error) from each line keeps building it several times faster than reading the samples.
"""

from __future__ import annotations

import bisect
import json
import re
import threading
from array import array

from pmutop.core.errors import PmutopError
from pmutop.recording.package_format import PACKAGES_PREFIX
from pmutop.recording.reader import SNAPSHOT_PREFIX, Checkpoint, Grouper, LineReader, Recording, Restart

# What the recorder writes first on every line (format.sample_to_dict keeps the Sample's field order).
_PREFIX = re.compile(rb'\{"sample":\{"cpu":(\d+),"seq":(\d+),"time":(-?[0-9][0-9.eE+-]*),')
Key = tuple[int, int, float, bool]  # cpu, seq, time, the sampler failed


def line_key(line: bytes) -> Key | None:
    """What grouping needs of a sample line; None when it is not one (damaged or cut short)."""
    m = _PREFIX.match(line)
    # A whole line ends with the sample's and the line's closing braces; "error" is a key only outside
    # strings (a quote inside a JSON string is escaped), so the substring tests cannot be fooled by text.
    if m is not None and line.rstrip().endswith(b"}}"):
        failed = False if b'"error":null' in line else True if b'"error":"' in line else None
        if failed is not None:
            try:
                return int(m[1]), int(m[2]), float(m[3]), failed
            except ValueError:
                pass
    try:  # another writer's layout: read it whole
        s = json.loads(line)["sample"]
        return int(s["cpu"]), int(s["seq"]), float(s["time"]), s.get("error") is not None
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
        return None


class RecordingIndex:
    """Intervals known so far (`count`), their times, and a Restart for any of them. Readable from any thread
    while build() runs in another."""

    def __init__(self, recording: Recording) -> None:
        self.recording = recording
        self.count = 0  # intervals indexed so far
        self.complete = False  # the whole file is indexed (or a damaged line stopped it: `error`)
        self.error: str | None = None
        self.consumed = 0  # bytes of the file read so far
        self._lines = array("q")  # per interval: the line a reader can start it at, or -1 (see restart())
        self._offsets = array("q")  # per interval: that line's byte offset (plain files)
        self._times = array("d")  # per interval: the recorded time of its last read
        self._done: list[frozenset[int]] = []  # per interval: the CPUs whose sampler had failed before it
        self._checkpoints = [Checkpoint(1, 0)]  # gzip: where decompression can start again
        self._checkpoint_lines = array("q", [1])
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- building

    def start(self) -> None:
        self._thread = threading.Thread(target=self.build, name="pmutop-replay-index", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    def _add_checkpoint(self, cp: Checkpoint) -> None:
        self._checkpoints.append(cp)
        self._checkpoint_lines.append(cp.line)

    def build(self) -> None:
        """Read the file once, to its end (or to stop()); any RecordingError ends up in `error`."""
        rec = self.recording
        reader = LineReader(rec.path, rec.gz, rec.body, self._add_checkpoint if rec.gz else None)
        grouper = Grouper(rec.header.cpus)
        start: tuple[int, int, frozenset[int]] | None = None  # where the next interval can be started
        bad_at: int | None = None
        last = b""
        try:
            for no, offset, line in reader:
                self.consumed = reader.consumed
                if self._stop.is_set():
                    return
                if no < 2:
                    continue
                if bad_at is not None:
                    self.error = f"{rec.path}: damaged recording at line {bad_at}"
                    break
                last = line
                if not line.strip():
                    continue
                if line.startswith((SNAPSHOT_PREFIX, PACKAGES_PREFIX)):
                    # Per-process or DRAM readings: no interval starts here (a restart reads from the next sample).
                    if not line.rstrip().endswith(b"}}"):
                        bad_at = no
                    continue
                if start is None and not grouper.pending:  # nothing held back: an interval can start here
                    start = (no, offset, frozenset(grouper.done))
                key = line_key(line)
                if key is None:
                    bad_at = no
                    continue
                cpu, seq, time, failed = key
                for group in grouper.add(cpu, seq, failed, time):
                    self._append(max(group), start)
                    start = None
            else:
                for group in grouper.flush():
                    self._append(max(group), start)
                    start = None
                rec.ended_with(last)
        except (PmutopError, OSError) as e:  # a damaged gzip stream, a file gone meanwhile
            self.error = str(e)
        finally:
            with self._changed:
                self.complete = not self._stop.is_set() or self.complete
                self._changed.notify_all()

    def _append(self, time: float, start: tuple[int, int, frozenset[int]] | None) -> None:
        line, offset, done = start if start is not None else (-1, -1, frozenset())
        self._lines.append(line)
        self._offsets.append(offset)
        self._times.append(time)
        self._done.append(done)
        self.count += 1  # last: a reader in another thread only looks below `count`
        if self.count % 512 == 0:
            with self._changed:
                self._changed.notify_all()

    # -- reading (any thread)

    @property
    def progress(self) -> float:
        """How much of the file is indexed, 0..1."""
        return 1.0 if self.complete else min(1.0, self.consumed / max(1, self.recording.size))

    def wait(self, count: int | None = None, timeout: float | None = None) -> bool:
        """Wait until `count` intervals are indexed (default: all of them); False on timeout."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self.complete or (count is not None and self.count >= count), timeout=timeout
            )

    def time(self, i: int) -> float:
        return self._times[i]

    @property
    def duration(self) -> float:
        """The recorded time of the last interval indexed so far."""
        n = self.count
        return self._times[n - 1] if n else 0.0

    def first_at(self, seconds: float) -> int | None:
        """The first interval indexed whose time is at or after `seconds`."""
        times, n = self._times, self.count
        return next((i for i in range(n) if times[i] >= seconds - 1e-9), None)

    def restart(self, i: int) -> Restart:
        """How to read from interval `i` (< count) on."""
        j = i
        while self._lines[j] < 0:  # interleaved with the one before (a lagging recorder): start earlier
            j -= 1
        line = self._lines[j]
        if self.recording.gz:
            checkpoint = self._checkpoints[bisect.bisect_right(self._checkpoint_lines, line) - 1]
        else:
            checkpoint = Checkpoint(line, self._offsets[j])
        return Restart(checkpoint, line, self._done[j], skip=i - j)
