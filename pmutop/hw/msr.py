"""MSR access: the device seam (`MsrDevice`) and the /dev/cpu/N/msr file implementation.

Every MSR write in pmutop goes through `MsrDevice.write`, which refuses any address outside the PMU
allowlist before anything reaches the device.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from abc import ABC, abstractmethod

from pmutop.core.errors import ForbiddenMsrWrite, HardwareError, PmutopError
from pmutop.pmu.registers import PMU_WRITABLE_MSRS, msr_name

_U64 = struct.Struct("<Q")


class MsrAccessError(HardwareError):
    """A read or write of one MSR failed (the msr driver answers EIO for a faulting rdmsr/wrmsr)."""

    def __init__(self, cpu: int, address: int, op: str, err: int, detail: str = "") -> None:
        self.cpu = cpu
        self.address = address
        self.op = op
        self.errno = err
        what = detail or os.strerror(err)
        super().__init__(f"cpu {cpu}: {op} of {msr_name(address)} ({address:#x}) failed: {what}")


class MsrDevice(ABC):
    """One CPU's MSRs: 64-bit reads and (allowlisted) writes by address."""

    cpu: int

    def read(self, address: int) -> int:
        return self._read_raw(address)

    def read_many(self, addresses: tuple[int, ...]) -> list[int | None]:
        """Each register in turn, None where its read fails (a register the CPU does not have). A device may
        answer them all at one instant (the simulated one does: one evaluation of its model)."""
        out: list[int | None] = []
        for address in addresses:
            try:
                out.append(self.read(address))
            except (PmutopError, OSError):  # as the readers of optional registers treat a failed read
                out.append(None)
        return out

    def write(self, address: int, value: int) -> None:
        """The single gate for MSR writes: only PMU control and counter registers pass."""
        if address not in PMU_WRITABLE_MSRS:
            raise ForbiddenMsrWrite(
                f"refusing to write {msr_name(address)} ({address:#x}) on cpu {self.cpu}: not a PMU register"
            )
        if not 0 <= value < 1 << 64:
            raise ValueError(f"MSR value out of range: {value:#x}")
        self._write_raw(address, value)

    @abstractmethod
    def _read_raw(self, address: int) -> int: ...

    @abstractmethod
    def _write_raw(self, address: int, value: int) -> None: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class MsrFile(MsrDevice):
    """`dev/cpu/N/msr` under a sysroot.

    The character device takes the MSR address as the file offset. A regular file in its place is a
    snapshot (a sysroot captured for tests or bug reports): register A is stored at byte offset 8*A,
    because 8-byte values at consecutive byte offsets would overlap.
    """

    def __init__(self, path: str | os.PathLike[str], cpu: int, *, writable: bool, fd: int | None = None) -> None:
        """Opens `path`, or adopts `fd` (already opened safely, see Sysroot.open_nofollow)."""
        self.cpu = cpu
        self.path = os.fspath(path)
        if fd is None:
            flags = (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC
            try:
                fd = os.open(self.path, flags)
            except OSError as e:
                raise HardwareError(f"cpu {cpu}: cannot open {self.path}: {e.strerror}") from e
        self._fd = fd
        self._stride = 1 if stat.S_ISCHR(os.fstat(self._fd).st_mode) else 8

    @property
    def fd(self) -> int:
        """The open file (-1 once closed): native sampler threads read it (pmutop.hw.native_sampler)."""
        return self._fd

    @property
    def stride(self) -> int:
        """Bytes of file offset per MSR address: 1 for the driver's device, 8 for a snapshot."""
        return self._stride

    def _read_raw(self, address: int) -> int:
        try:
            data = os.pread(self._fd, 8, address * self._stride)
        except OSError as e:
            raise MsrAccessError(self.cpu, address, "read", e.errno or errno.EIO) from e
        if len(data) != 8:
            raise MsrAccessError(self.cpu, address, "read", errno.EIO, "no such register")
        return _U64.unpack(data)[0]

    def _write_raw(self, address: int, value: int) -> None:
        try:
            n = os.pwrite(self._fd, _U64.pack(value), address * self._stride)
        except OSError as e:
            raise MsrAccessError(self.cpu, address, "write", e.errno or errno.EIO) from e
        if n != 8:
            raise MsrAccessError(self.cpu, address, "write", errno.EIO, "short write")

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
