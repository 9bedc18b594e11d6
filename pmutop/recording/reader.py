"""Reading a recording: the header, then the samples. A last line cut short (the recorder was killed) is
skipped; anything else wrong is one clear line (RecordingError), never a traceback."""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from pmutop.core.errors import PmutopError
from pmutop.core.sample import Sample
from pmutop.recording.format import FORMAT_VERSION, MAGIC, Header, header_from_dict, sample_from_dict


class RecordingError(PmutopError):
    """Not a recording, a newer format, or damaged beyond its last line."""


@dataclass
class Recording:
    path: str
    header: Header
    samples: list[Sample]
    truncated: bool = False  # the last line was cut short (the recorder was killed)

    def intervals(self) -> list[list[Sample]]:
        """Samples grouped by interval (sample n of every CPU), in order."""
        by_seq: dict[int, list[Sample]] = {}
        for s in self.samples:
            by_seq.setdefault(s.seq, []).append(s)
        return [by_seq[k] for k in sorted(by_seq)]


def _lines(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    if not gz:
        with open(path, "rb") as f:
            yield from f
        return
    # Decompress by hand: gzip.open raises on a stream without its end (a killed recorder), losing what
    # was flushed before.
    d = zlib.decompressobj(wbits=31)
    pending = b""
    with open(path, "rb") as f:
        while chunk := f.read(1 << 16):
            try:
                data = d.decompress(chunk)
            except zlib.error:
                raise RecordingError(f"{path}: corrupt gzip data") from None
            pending += data
            *full, pending = pending.split(b"\n")
            for line in full:
                yield line + b"\n"
            if d.eof:
                break
    if pending:
        yield pending  # no newline: the reader treats it as possibly cut short


def read_recording(path: str) -> Recording:
    try:
        lines = _lines(path)
        first = next(lines, None)
    except FileNotFoundError:
        raise RecordingError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise RecordingError(f"{path}: is a directory") from None
    except OSError as e:
        raise RecordingError(f"{path}: {e.strerror or e}") from None
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
        header = header_from_dict(head)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RecordingError(f"{path}: damaged recording header") from None
    samples: list[Sample] = []
    truncated = False
    bad_at: int | None = None
    n = 1
    try:
        for line in lines:
            n += 1
            if bad_at is not None:  # a damaged line that was not the last one
                raise RecordingError(f"{path}: damaged recording at line {bad_at}")
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                samples.append(sample_from_dict(obj["sample"]))
            except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
                bad_at = n
    except OSError as e:
        raise RecordingError(f"{path}: {e.strerror or e}") from None
    except EOFError:
        truncated = True
    if bad_at is not None:
        truncated = True  # only the last line: cut short by a kill
    return Recording(path, header, samples, truncated)
