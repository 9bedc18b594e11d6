"""Opening, enabling, reading and closing counting groups with perf_event_open(2), and why an open failed.

It knows nothing about samplers or metrics: it hands back raw counts and enabled/running times.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from pmutop.core.errors import HardwareError
from pmutop.core.sysroot import Sysroot
from pmutop.hw.perf_event.abi import (
    PERF_EVENT_IOC_DISABLE,
    PERF_EVENT_IOC_ENABLE,
    PERF_EVENT_IOC_RESET,
    PERF_FLAG_FD_CLOEXEC,
    PERF_FORMAT_GROUP,
    PERF_FORMAT_ID,
    PERF_FORMAT_TOTAL_TIME_ENABLED,
    PERF_FORMAT_TOTAL_TIME_RUNNING,
    PERF_IOC_FLAG_GROUP,
    PerfEventAttr,
    make_attr,
    syscall_number,
)


class PerfOpenError(HardwareError):
    """perf_event_open (or an ioctl/read on its fd) failed; .errno is the kernel's answer."""

    def __init__(self, message: str, err: int, *, event: str = "", cpu: int = -1) -> None:
        super().__init__(message)
        self.errno = err
        self.event = event
        self.cpu = cpu


class PerfGroupError(HardwareError):
    """A group that opened fine cannot be read (error state, short read)."""


_libc: ctypes.CDLL | None = None


def _syscall() -> Callable[..., int]:
    """libc's syscall(), bound once (errno saved for ctypes.get_errno)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def perf_event_open(
    attr: PerfEventAttr, pid: int, cpu: int, group_fd: int = -1, flags: int = PERF_FLAG_FD_CLOEXEC
) -> int:
    """The raw syscall; returns the new fd or raises PerfOpenError with errno (message = strerror only)."""
    nr = syscall_number()
    # syscall() is variadic: pass every argument as a C long, so each fills one full register.
    fd = _syscall()(
        ctypes.c_long(nr),
        ctypes.c_void_p(ctypes.addressof(attr)),
        ctypes.c_long(pid),
        ctypes.c_long(cpu),
        ctypes.c_long(group_fd),
        ctypes.c_ulong(flags),
    )
    if fd < 0:
        err = ctypes.get_errno()
        raise PerfOpenError(f"perf_event_open(cpu {cpu}): {os.strerror(err)}", err, cpu=cpu)
    return int(fd)


def explain_open_error(
    err: int,
    *,
    event: str,
    cpu: int,
    paranoid: int | None,
    root: bool,
    pid: int = -1,
    exclude_kernel: bool = False,
) -> str:
    """One line saying why opening `event` on `cpu` failed with `err`, and what to do about it.

    pid = -1 with cpu >= 0 is a CPU-wide event (what a per-core monitor opens); exclude_kernel is
    --user-only. Permission rules (kernel perf_allow_cpu / perf_allow_kernel): CPU-wide events need
    root or CAP_PERFMON when perf_event_paranoid > 0, kernel-mode counting when > 1.
    """
    where = f"{event} on cpu {cpu}" if cpu >= 0 else event
    cpu_wide = pid == -1 and cpu >= 0
    if err in (errno.EACCES, errno.EPERM):
        return f"{where}: {_explain_permission(paranoid, root, cpu_wide, exclude_kernel)}"
    if err in (errno.ENOENT, errno.EOPNOTSUPP):
        hidden = (
            f"{where}: the kernel has no such event here: the CPU or VM does not expose this hardware event "
            "(hidden PMU; in a VM enable the virtual PMU, e.g. QEMU `-cpu host,pmu=on`)"
        )
        if err == errno.ENOENT:
            return f"{hidden}, or on a hybrid CPU this event's PMU does not cover cpu {cpu}"
        return f"{hidden}, or its PMU cannot count in this mode (try without --user-only/--kernel-only)"
    if err == errno.EMFILE:
        return f"{where}: too many open files (one fd per event per CPU): raise `ulimit -n` or monitor fewer CPUs"
    if err == errno.ENFILE:
        return f"{where}: the system-wide file table is full: raise `sysctl fs.file-max` or close other programs"
    if err == errno.ENODEV:
        return f"{where}: cpu {cpu} is offline or not one of this PMU's cpus (see its sysfs `cpus`/`cpumask`)"
    if err == errno.EINVAL:
        return (
            f"{where}: the kernel rejected the event's attributes: bad config for this PMU "
            "(check it against the PMU's sysfs `format/`) or a modifier it does not support"
        )
    if err == errno.EBUSY:
        return (
            f"{where}: the PMU is in use by an exclusive user (another profiler or a pinned/exclusive group): "
            "stop it and retry"
        )
    if err == errno.E2BIG:
        return (
            f"{where}: the kernel is older than this perf_event_attr ({ctypes.sizeof(PerfEventAttr)} bytes) "
            "and a field it does not know is set: retry with a smaller attr.size and those fields zero"
        )
    if err == errno.ESRCH:
        return f"{where}: the process to count no longer exists"
    return f"{where}: perf_event_open failed: {os.strerror(err)}"


def _explain_permission(paranoid: int | None, root: bool, cpu_wide: bool, exclude_kernel: bool) -> str:
    if root:
        # Root and still denied: the check is not perf_event_paranoid.
        return (
            "permission denied even as root: a container (user namespace or seccomp profile) or a security "
            "module (SELinux, lockdown) blocks perf_event_open: run on the host or grant CAP_PERFMON"
        )
    if paranoid is None:
        return "permission denied (perf_event_paranoid unreadable): run as root or grant CAP_PERFMON"
    level = f"perf_event_paranoid={paranoid}"
    if paranoid >= 3:
        # Debian/Ubuntu patch: level 3 forbids perf_event_open to unprivileged users altogether.
        return (
            f"{level} forbids perf_event_open without CAP_PERFMON: run as root, "
            "or `sudo sysctl kernel.perf_event_paranoid=0`"
        )
    if cpu_wide and paranoid >= 1:
        # --user-only would not help: the CPU-wide check comes regardless of exclude_kernel.
        return (
            f"{level} allows CPU-wide events only to root or CAP_PERFMON: run as root, "
            "or `sudo sysctl kernel.perf_event_paranoid=0` (CPU-wide events)"
        )
    if not exclude_kernel and paranoid >= 2:
        return (
            f"{level} forbids counting kernel mode without CAP_PERFMON: run as root, "
            "or `sudo sysctl kernel.perf_event_paranoid=1`, or count user space only with --user-only"
        )
    return (
        f"permission denied although {level} allows this: a seccomp filter (container) or a security module "
        "(SELinux, AppArmor) blocks perf_event_open: run on the host or as root"
    )


class EventSpec(NamedTuple):
    """One event of a group: a display name and the attr fields that select it."""

    name: str
    type: int
    config: int
    config1: int = 0
    config2: int = 0


@dataclass(frozen=True)
class GroupReading:
    """One read() of a group: the shared enabled/running times (ns) and the raw counts in group order."""

    time_enabled: int
    time_running: int
    values: list[int]
    ids: list[int] = field(default_factory=list)  # only with PERF_FORMAT_ID


_GROUP_READ_FORMAT = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING


def read_paranoid(sysroot: Sysroot) -> int | None:
    """kernel.perf_event_paranoid, or None when missing or not a number."""
    text = sysroot.read_text("proc/sys/kernel/perf_event_paranoid")
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


class PerfGroup:
    """Events counted together on one CPU as one perf group (scheduled all-or-nothing, read with one read()).

    The leader is created disabled and the members enabled, so `enable()` on the leader starts them all at once.
    `pid` = -1 (default) counts everything that runs on `cpu`.
    """

    def __init__(
        self,
        cpu: int,
        events: Sequence[EventSpec | tuple[str, int, int]],
        *,
        exclude_user: bool = False,
        exclude_kernel: bool = False,
        pinned: bool = False,
        with_ids: bool = False,
        pid: int = -1,
    ) -> None:
        if not events:
            raise ValueError("a perf group needs at least one event")
        self.cpu = cpu
        self.events = [e if isinstance(e, EventSpec) else EventSpec(*e) for e in events]
        self.with_ids = with_ids
        self.read_format = _GROUP_READ_FORMAT | (PERF_FORMAT_ID if with_ids else 0)
        self.fds: list[int] = []
        self._exclude_kernel = exclude_kernel
        self._pid = pid
        try:
            for i, ev in enumerate(self.events):
                attr = make_attr(
                    ev.type,
                    ev.config,
                    config1=ev.config1,
                    config2=ev.config2,
                    read_format=self.read_format,
                    disabled=i == 0,
                    exclude_user=exclude_user,
                    exclude_kernel=exclude_kernel,
                    pinned=pinned and i == 0,  # pinning is a property of the whole group, set on the leader
                )
                self.fds.append(self._open(ev.name, attr, self.fds[0] if self.fds else -1))
        except BaseException:
            self.close()
            raise
        per_value = 2 if with_ids else 1
        self._read_size = 8 * (3 + per_value * len(self.events))
        self._unpack = struct.Struct(f"={self._read_size // 8}Q").unpack  # read() runs every interval

    def _open(self, name: str, attr: PerfEventAttr, group_fd: int) -> int:
        try:
            return perf_event_open(attr, self._pid, self.cpu, group_fd)
        except PerfOpenError as e:
            line = explain_open_error(
                e.errno,
                event=name,
                cpu=self.cpu,
                paranoid=read_paranoid(Sysroot("/")),
                root=os.geteuid() == 0,
                pid=self._pid,
                exclude_kernel=self._exclude_kernel,
            )
            raise PerfOpenError(line, e.errno, event=name, cpu=self.cpu) from None

    @property
    def names(self) -> list[str]:
        return [e.name for e in self.events]

    def __len__(self) -> int:
        return len(self.events)

    def _ioctl(self, request: int, what: str) -> None:
        if not self.fds:
            raise PerfGroupError(f"cpu {self.cpu}: perf group is closed")
        try:
            fcntl.ioctl(self.fds[0], request, PERF_IOC_FLAG_GROUP)
        except OSError as e:
            raise PerfOpenError(f"cpu {self.cpu}: {what} of the perf group failed: {e.strerror}", e.errno or 0) from e

    def enable(self) -> None:
        self._ioctl(PERF_EVENT_IOC_ENABLE, "enable")

    def disable(self) -> None:
        self._ioctl(PERF_EVENT_IOC_DISABLE, "disable")

    def reset(self) -> None:
        """Zero the counts (the enabled/running times keep going)."""
        self._ioctl(PERF_EVENT_IOC_RESET, "reset")

    def read(self) -> GroupReading:
        """All counts at one instant: one read() of the leader fd."""
        words = self.read_words()
        rest = words[3:]
        if self.with_ids:
            return GroupReading(words[1], words[2], list(rest[::2]), list(rest[1::2]))
        return GroupReading(words[1], words[2], list(rest))

    def read_words(self) -> tuple[int, ...]:
        """read() as the kernel's words, (nr, time_enabled, time_running, value, [id,] value, ...), checked
        as read() checks them: no GroupReading made (the perf backend reads every group every interval)."""
        if not self.fds:
            raise PerfGroupError(f"cpu {self.cpu}: perf group is closed")
        try:
            data = os.read(self.fds[0], self._read_size)
        except OSError as e:
            raise PerfOpenError(f"cpu {self.cpu}: reading the perf group failed: {e.strerror}", e.errno or 0) from e
        if len(data) != self._read_size:
            parse_group_read(data, len(self.events), with_ids=self.with_ids, cpu=self.cpu)  # raises: says why
        words = self._unpack(data)
        if words[0] != len(self.events):
            n = len(self.events)
            raise PerfGroupError(f"cpu {self.cpu}: perf group read reports {words[0]} events, expected {n}")
        return words

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in reversed(fds):  # members first, then the leader
            os.close(fd)

    def __enter__(self) -> PerfGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_group_read(
    data: bytes,
    n_events: int,
    *,
    with_ids: bool = False,
    cpu: int = -1,
) -> GroupReading:
    """Decode a PERF_FORMAT_GROUP|TOTAL_TIME_ENABLED|TOTAL_TIME_RUNNING[|ID] read() buffer."""
    if not data:
        # The kernel answers EOF for an event in error state, e.g. a pinned group that could not be scheduled.
        raise PerfGroupError(
            f"cpu {cpu}: the perf group is in error state (read returned 0 bytes): a pinned group could not get "
            "its counters (another user holds them, or the group has more events than the CPU has counters)"
        )
    per_value = 2 if with_ids else 1
    expected = 8 * (3 + per_value * n_events)
    if len(data) != expected:
        raise PerfGroupError(f"cpu {cpu}: perf group read returned {len(data)} bytes, expected {expected}")
    words = struct.unpack(f"={len(data) // 8}Q", data)
    nr, enabled, running = words[:3]
    if nr != n_events:
        raise PerfGroupError(f"cpu {cpu}: perf group read reports {nr} events, expected {n_events}")
    rest = words[3:]
    return GroupReading(enabled, running, list(rest[::per_value]), list(rest[1::2]) if with_ids else [])


def scaled_delta(prev: GroupReading, cur: GroupReading) -> tuple[list[float], float]:
    """Counts between two readings, scaled for multiplexing like `perf stat -I`, and the running fraction.

    Each delta is multiplied by Δenabled/Δrunning (the group counted only that part of the time); the
    fraction Δrunning/Δenabled is 1.0 when the group had its counters all the time. When Δrunning is 0
    the group never ran in the interval: the values are all 0.0 and the fraction is 0.0, which callers
    must show as "not counted" rather than as zero.
    """
    if len(prev.values) != len(cur.values):
        raise ValueError(f"readings of different groups: {len(prev.values)} vs {len(cur.values)} values")
    d_enabled = cur.time_enabled - prev.time_enabled
    d_running = cur.time_running - prev.time_running
    deltas = [c - p for p, c in zip(prev.values, cur.values, strict=True)]
    if d_enabled < 0 or d_running < 0 or any(d < 0 for d in deltas):
        raise ValueError("readings out of order (or the group was reset between them)")
    if d_running == 0:
        return [0.0] * len(deltas), 0.0
    scale = d_enabled / d_running
    return [d * scale for d in deltas], min(1.0, d_running / d_enabled)
