"""The self-test's workloads on this host: the shim's C loops (shim/pmutop_shim.c), run on the calling thread.

What each one executes (x86-64):
* instructions(n): `1: dec r; jnz 1b`, exactly 2 instructions per iteration (plus a handful around the loop:
  the empty run measures those with the Python around the call). At most 1 iteration per cycle (the dec chain).
* chase(steps): `steps` dependent loads following one random cycle through the 64-byte lines of a buffer
  several times the last-level cache (LLC): nearly every load misses the LLC; memory (backend) bound.
* branches(n, random): n xorshift64 steps, each with one conditional jump taken when the low bit is set
  (random: mispredicted about half the time) or never (predictable); the same instructions either way.
* jumps(passes): passes through a chain of 4096 unconditional jumps, one per 64-byte line (256 KiB of code,
  far beyond the L1 instruction cache): frontend bound.
* MemoryStreamer: the DRAM check's buffer, written and read whole at C speed from Python (below).
"""

from __future__ import annotations

import ctypes
import os

from pmutop.core.errors import HardwareError
from pmutop.core.sysroot import Sysroot
from pmutop.hw import shim

MIB = 1 << 20
CHASE_LLC_FACTOR = 8  # the buffer is this many times the LLC ...
CHASE_MIN_BYTES = 64 * MIB  # ... at least this (when the LLC size is unknown or small) ...
CHASE_MAX_BYTES = 512 * MIB  # ... and at most this (memory use)
STREAM_LLC_FACTOR = 8  # the DRAM check streams a buffer this many times the LLC ...
STREAM_MAX_BYTES = 1024 * MIB  # ... at most this
_FILL, _ABSENT = 0x5A, b"\xa5"
LINE = 64


def llc_bytes(sysroot: Sysroot, cpu: int) -> int | None:
    """The size of the highest cache level `cpu` has (sysfs cache/index*/level and size), or None."""
    base = sysroot.path(f"sys/devices/system/cpu/cpu{cpu}/cache")
    best: tuple[int, int] | None = None
    try:
        names = os.listdir(base)
    except OSError:
        return None
    for name in names:
        if not name.startswith("index"):
            continue
        try:
            with open(os.path.join(base, name, "level")) as f:
                level = int(f.read().strip())
            with open(os.path.join(base, name, "size")) as f:
                text = f.read().strip().upper()
        except (OSError, ValueError):
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        try:
            size = int(text.rstrip("KMG")) * scale
        except ValueError:
            continue
        if best is None or (level, size) > best:
            best = (level, size)
    return None if best is None else best[1]


def chase_bytes(llc: int | None) -> int:
    """Buffer size for the pointer chase: CHASE_LLC_FACTOR x the LLC, within CHASE_MIN_BYTES..CHASE_MAX_BYTES."""
    wanted = CHASE_LLC_FACTOR * llc if llc else CHASE_MIN_BYTES
    return min(max(wanted, CHASE_MIN_BYTES), CHASE_MAX_BYTES)


def available() -> str | None:
    """None when the workloads can run here; else why not (one line)."""
    if shim.lib is None:
        return shim.BUILD_HINT
    if not shim.lib.pmutop_wl_instructions(1):
        return "the self-test workloads need an x86-64 CPU (the instruction loop is x86-64 assembly)"
    return None


def stream_bytes(llc: int | None) -> int:
    """The DRAM check's buffer: STREAM_LLC_FACTOR x the LLC, within CHASE_MIN_BYTES..STREAM_MAX_BYTES."""
    wanted = STREAM_LLC_FACTOR * llc if llc else CHASE_MIN_BYTES
    return min(max(wanted, CHASE_MIN_BYTES), STREAM_MAX_BYTES) // LINE * LINE


class MemoryStreamer:
    """A buffer many times the LLC, streamed through memory at C speed: a write pass (libc memset over all of
    it, through ctypes) then a read pass (bytearray.find of a byte that is not there: CPython calls memchr over
    all of it). Large memsets use `rep stosb` or non-temporal stores, which write whole lines without reading
    them first; the read pass pushes the dirty lines the write pass left in the LLC out to memory (the buffer
    is 8x the LLC). So one `stream()` after a warm-up reads the buffer once and writes it once."""

    def __init__(self, nbytes: int) -> None:
        try:
            self._buf: bytearray | None = bytearray(nbytes)
        except MemoryError:
            raise HardwareError(f"cannot allocate {nbytes // MIB} MiB for the memory stream") from None
        self.nbytes = nbytes
        self._view: ctypes.Array[ctypes.c_char] | None = (ctypes.c_char * nbytes).from_buffer(self._buf)
        self.stream()  # warm-up: every page mapped, the cache left holding clean lines only

    def stream(self) -> tuple[int, int]:
        """Write then read the whole buffer; (bytes read, bytes written)."""
        assert self._buf is not None and self._view is not None
        ctypes.memset(ctypes.addressof(self._view), _FILL, self.nbytes)
        if self._buf.find(_ABSENT) != -1:
            raise HardwareError("the memory stream read back what it never wrote (memory corruption?)")
        return self.nbytes, self.nbytes

    def close(self) -> None:
        self._view = None  # releases the export before the buffer goes
        self._buf = None


class HostWorkloadRunner:
    """Runs the C workloads on the calling thread (the caller pins it to the CPU under test)."""

    simulated = False

    def __init__(self, buffer_bytes: int, seed: int = 1) -> None:
        problem = available()
        if problem:
            raise HardwareError(problem)
        self.buffer_bytes = buffer_bytes
        self.lines = max(2, buffer_bytes // LINE)
        try:
            self._buf = shim.ffi.new("uint64_t[]", self.lines * (LINE // 8))
        except MemoryError:
            raise HardwareError(f"cannot allocate {buffer_bytes // MIB} MiB for the pointer chase") from None
        shim.lib.pmutop_wl_chase_init(self._buf, self.lines, seed)
        self.seed = seed
        self._streamer: MemoryStreamer | None = None

    def describe(self) -> str:
        return f"shim C workloads, pointer chase over {self.buffer_bytes // MIB} MiB"

    def instructions(self, cpu: int, iterations: int) -> int:
        return int(shim.lib.pmutop_wl_instructions(iterations))

    def chase(self, cpu: int, steps: int) -> int:
        return int(shim.lib.pmutop_wl_chase(self._buf, steps))

    def branches(self, cpu: int, iterations: int, random: bool) -> int:
        return int(shim.lib.pmutop_wl_branches(iterations, self.seed, 1 if random else 0))

    def jumps(self, cpu: int, passes: int) -> int:
        return int(shim.lib.pmutop_wl_jumps(passes))

    def prepare_stream(self, cpu: int, nbytes: int) -> None:
        """The DRAM check's buffer, allocated and warmed up (outside the measurement)."""
        if self._streamer is not None:
            self._streamer.close()
        self._streamer = MemoryStreamer(nbytes)

    def stream(self, cpu: int) -> tuple[int, int]:
        """The DRAM check's workload: the prepared buffer written and read once on the calling thread (pinned
        to `cpu`); (bytes read, bytes written)."""
        assert self._streamer is not None, "prepare_stream first"
        return self._streamer.stream()

    def close(self) -> None:
        self._buf = None
        if self._streamer is not None:
            self._streamer.close()
            self._streamer = None
