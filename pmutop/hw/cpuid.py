"""Per-CPU CPUID: `dev/cpu/N/cpuid` under the sysroot, else the shim on a thread pinned to N (host only)."""

from __future__ import annotations

import os
import stat
import struct
import threading

from pmutop.core.errors import HardwareError
from pmutop.core.sysroot import Sysroot
from pmutop.hw import shim

_REGS = struct.Struct("<4I")


class CpuidFile:
    """`dev/cpu/N/cpuid`: pread 16 bytes at offset leaf | subleaf << 32.

    A regular file in its place is a snapshot: the 16 bytes for (leaf, subleaf) are stored at offset
    16 * (leaf | subleaf << 32), since the device's one-byte-per-leaf offsets would overlap in a file.
    """

    def __init__(self, path: os.PathLike[str] | str) -> None:
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDONLY | os.O_CLOEXEC)
        self._stride = 1 if stat.S_ISCHR(os.fstat(self._fd).st_mode) else 16

    def __call__(self, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        data = os.pread(self._fd, 16, (leaf | subleaf << 32) * self._stride)
        if len(data) != 16:  # a snapshot without this leaf
            return (0, 0, 0, 0)
        a, b, c, d = _REGS.unpack(data)
        return (a, b, c, d)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class CpuidSource:
    """CPUID of any CPU of a sysroot, cached per (cpu, leaf, subleaf)."""

    def __init__(self, sysroot: Sysroot) -> None:
        self.sysroot = sysroot
        self._files: dict[int, CpuidFile | None] = {}
        self._empty: dict[int, str] = {}  # cpu -> why its CPUID file cannot be trusted
        self._cache: dict[tuple[int, int, int], tuple[int, int, int, int]] = {}
        # Reads vs close(): a file is never closed under a read (its number could be another file's by then).
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close every open CPUID file (what an engine's stop releases); a later uncached read opens it again."""
        with self._lock:
            files, self._files = self._files, {}
            for f in files.values():
                if f is not None:
                    f.close()

    def method(self, cpu: int) -> str:
        with self._lock:
            return "cpuid device" if self._file(cpu) else "cpuid instruction (pinned thread)"

    def _file(self, cpu: int) -> CpuidFile | None:
        if cpu not in self._files:
            path = self.sysroot.path(f"dev/cpu/{cpu}/cpuid")
            try:
                self._files[cpu] = CpuidFile(path)
            except OSError:
                self._files[cpu] = None
        return self._files[cpu]

    def _where(self, cpu: int) -> str:
        with self._lock:
            f = self._file(cpu)
        return f.path if f is not None else f"the cpuid instruction on cpu {cpu}"

    def _read(self, cpu: int, leaf: int, subleaf: int) -> tuple[int, int, int, int]:
        with self._lock:
            f = self._file(cpu)
            if f is not None:
                try:
                    return f(leaf, subleaf)
                except OSError as e:
                    raise HardwareError(f"cpu {cpu}: reading {f.path} failed: {e.strerror}") from e
        if self.sysroot.is_host:
            return shim.cpuid_on(cpu, leaf, subleaf)
        raise HardwareError(
            f"cpu {cpu}: no dev/cpu/{cpu}/cpuid under sysroot {self.sysroot}"
            " (CPUID of another machine cannot be executed here)"
        )

    def _check(self, cpu: int) -> None:
        """Leaf 0 (max leaf and vendor) is never all zeros on a real CPU: an empty or zeroed file is no CPUID.

        Without this check every decoder would read zeros and report a CPU of vendor "".
        """
        if cpu not in self._empty:
            leaf0 = self._cache[(cpu, 0, 0)] = self._read(cpu, 0, 0)
            zeros = leaf0 == (0, 0, 0, 0)
            self._empty[cpu] = (
                f"cpu {cpu}: CPUID is empty in {self._where(cpu)} (leaf 0 reads as zeros)" if zeros else ""
            )
        if self._empty[cpu]:
            raise HardwareError(self._empty[cpu])

    def __call__(self, cpu: int, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        key = (cpu, leaf, subleaf)
        if key not in self._cache:
            self._check(cpu)
            self._cache[key] = self._read(cpu, leaf, subleaf)
        return self._cache[key]
