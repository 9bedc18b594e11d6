"""perf_event_open(2) access: the attr struct, the syscall, counting groups, and sysfs PMU discovery.

This is the hardware-access layer: it opens, enables, reads and closes kernel counters and explains
why an open failed. It knows nothing about samplers or metrics. Layout and constants follow
include/uapi/linux/perf_event.h (checked against the installed header by tests/test_perf_event.py).
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import os
import platform
import re
import struct
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from pmutop.core.cpulist import parse_cpu_list
from pmutop.core.errors import HardwareError, PmutopError
from pmutop.core.sysroot import Sysroot

# attr.type
PERF_TYPE_HARDWARE = 0
PERF_TYPE_SOFTWARE = 1
PERF_TYPE_TRACEPOINT = 2
PERF_TYPE_HW_CACHE = 3
PERF_TYPE_RAW = 4
PERF_TYPE_BREAKPOINT = 5

# Hybrid: for HARDWARE/HW_CACHE events config[63:32] selects the PMU (its sysfs `type`); 0 = the default core PMU.
PERF_TYPE_EXTENDED_SHIFT = 32
PERF_HW_EVENT_MASK = 0xFFFF_FFFF

# attr.config for PERF_TYPE_HARDWARE (enum perf_hw_id)
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_COUNT_HW_CACHE_REFERENCES = 2
PERF_COUNT_HW_CACHE_MISSES = 3
PERF_COUNT_HW_BRANCH_INSTRUCTIONS = 4
PERF_COUNT_HW_BRANCH_MISSES = 5
PERF_COUNT_HW_BUS_CYCLES = 6
PERF_COUNT_HW_STALLED_CYCLES_FRONTEND = 7
PERF_COUNT_HW_STALLED_CYCLES_BACKEND = 8
PERF_COUNT_HW_REF_CPU_CYCLES = 9

# attr.config for PERF_TYPE_SOFTWARE (enum perf_sw_ids)
PERF_COUNT_SW_CPU_CLOCK = 0
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_COUNT_SW_PAGE_FAULTS = 2
PERF_COUNT_SW_CONTEXT_SWITCHES = 3
PERF_COUNT_SW_CPU_MIGRATIONS = 4
PERF_COUNT_SW_PAGE_FAULTS_MIN = 5
PERF_COUNT_SW_PAGE_FAULTS_MAJ = 6
PERF_COUNT_SW_ALIGNMENT_FAULTS = 7
PERF_COUNT_SW_EMULATION_FAULTS = 8
PERF_COUNT_SW_DUMMY = 9

# attr.read_format
PERF_FORMAT_TOTAL_TIME_ENABLED = 1 << 0
PERF_FORMAT_TOTAL_TIME_RUNNING = 1 << 1
PERF_FORMAT_ID = 1 << 2
PERF_FORMAT_GROUP = 1 << 3
PERF_FORMAT_LOST = 1 << 4

# perf_event_open flags
PERF_FLAG_FD_NO_GROUP = 1 << 0
PERF_FLAG_FD_OUTPUT = 1 << 1
PERF_FLAG_PID_CGROUP = 1 << 2
PERF_FLAG_FD_CLOEXEC = 1 << 3

# Bit positions in the 64-bit flags word at offset 40 (the C bitfield list, in declaration order).
ATTR_FLAG_BITS: dict[str, int] = {
    "disabled": 0,
    "inherit": 1,
    "pinned": 2,
    "exclusive": 3,
    "exclude_user": 4,
    "exclude_kernel": 5,
    "exclude_hv": 6,
    "exclude_idle": 7,
    "mmap": 8,
    "comm": 9,
    "freq": 10,
    "inherit_stat": 11,
    "enable_on_exec": 12,
    "task": 13,
    "watermark": 14,
    "precise_ip": 15,  # 2 bits: 15-16
    "mmap_data": 17,
    "sample_id_all": 18,
    "exclude_host": 19,
    "exclude_guest": 20,
    "exclude_callchain_kernel": 21,
    "exclude_callchain_user": 22,
    "mmap2": 23,
    "comm_exec": 24,
    "use_clockid": 25,
    "context_switch": 26,
    "write_backward": 27,
    "namespaces": 28,
    "ksymbol": 29,
    "bpf_event": 30,
    "aux_output": 31,
    "cgroup": 32,
    "text_poke": 33,
    "build_id": 34,
    "inherit_thread": 35,
    "remove_on_exec": 36,
    "sigtrap": 37,
}
ATTR_DISABLED = 1 << ATTR_FLAG_BITS["disabled"]
ATTR_INHERIT = 1 << ATTR_FLAG_BITS["inherit"]
ATTR_PINNED = 1 << ATTR_FLAG_BITS["pinned"]
ATTR_EXCLUSIVE = 1 << ATTR_FLAG_BITS["exclusive"]
ATTR_EXCLUDE_USER = 1 << ATTR_FLAG_BITS["exclude_user"]
ATTR_EXCLUDE_KERNEL = 1 << ATTR_FLAG_BITS["exclude_kernel"]
ATTR_EXCLUDE_HV = 1 << ATTR_FLAG_BITS["exclude_hv"]
ATTR_EXCLUDE_IDLE = 1 << ATTR_FLAG_BITS["exclude_idle"]

PERF_ATTR_SIZE_VER0 = 64
PERF_ATTR_SIZE_VER5 = 112
PERF_ATTR_SIZE_VER6 = 120
PERF_ATTR_SIZE_VER7 = 128
PERF_ATTR_SIZE_VER8 = 136

PERF_IOC_FLAG_GROUP = 1 << 0

_MACHINE = platform.machine().lower()
_USERLAND_32BIT = ctypes.sizeof(ctypes.c_void_p) == 4


def _io(type_char: str, nr: int) -> int:
    """The _IO(type, nr) ioctl number: "no data" is direction 0 on most architectures, 1 (at bit 29) on a few."""
    none_dir = 1 << 29 if _MACHINE.startswith(("ppc", "powerpc", "mips", "sparc")) else 0
    return none_dir | ord(type_char) << 8 | nr


PERF_EVENT_IOC_ENABLE = _io("$", 0)
PERF_EVENT_IOC_DISABLE = _io("$", 1)
PERF_EVENT_IOC_RESET = _io("$", 3)


class PerfEventAttr(ctypes.Structure):
    """struct perf_event_attr, PERF_ATTR_SIZE_VER8 layout (136 bytes; all fields naturally aligned, no padding).

    Unions are flattened to their counting-side name (sample_period/sample_freq, wakeup_events/
    wakeup_watermark, config1/bp_addr, config2/bp_len). The bitfields are one `flags` word: see ATTR_FLAG_BITS.
    A kernel older than the struct accepts it as long as the fields it does not know are zero.
    """

    _fields_ = (
        ("type", ctypes.c_uint32),
        ("size", ctypes.c_uint32),
        ("config", ctypes.c_uint64),
        ("sample_period", ctypes.c_uint64),
        ("sample_type", ctypes.c_uint64),
        ("read_format", ctypes.c_uint64),
        ("flags", ctypes.c_uint64),
        ("wakeup_events", ctypes.c_uint32),
        ("bp_type", ctypes.c_uint32),
        ("config1", ctypes.c_uint64),
        ("config2", ctypes.c_uint64),
        ("branch_sample_type", ctypes.c_uint64),
        ("sample_regs_user", ctypes.c_uint64),
        ("sample_stack_user", ctypes.c_uint32),
        ("clockid", ctypes.c_int32),
        ("sample_regs_intr", ctypes.c_uint64),
        ("aux_watermark", ctypes.c_uint32),
        ("sample_max_stack", ctypes.c_uint16),
        ("reserved_2", ctypes.c_uint16),
        ("aux_sample_size", ctypes.c_uint32),
        ("aux_action", ctypes.c_uint32),  # __reserved_3 in headers before 6.13
        ("sig_data", ctypes.c_uint64),
        ("config3", ctypes.c_uint64),
    )

    def __init__(self) -> None:
        super().__init__()
        self.size = ctypes.sizeof(PerfEventAttr)

    def flag(self, name: str) -> bool:
        return bool(self.flags >> ATTR_FLAG_BITS[name] & 1)

    def set_flag(self, name: str, on: bool = True) -> None:
        bit = 1 << ATTR_FLAG_BITS[name]
        self.flags = self.flags | bit if on else self.flags & ~bit


def make_attr(
    type_: int,
    config: int,
    *,
    read_format: int,
    disabled: bool = False,
    exclude_user: bool = False,
    exclude_kernel: bool = False,
    exclude_hv: bool = True,
    pinned: bool = False,
    config1: int = 0,
    config2: int = 0,
) -> PerfEventAttr:
    """A counting (non-sampling) attr with the given flags; every other field is zero."""
    attr = PerfEventAttr()
    attr.type = type_
    attr.config = config
    attr.config1 = config1
    attr.config2 = config2
    attr.read_format = read_format
    for name, on in (
        ("disabled", disabled),
        ("exclude_user", exclude_user),
        ("exclude_kernel", exclude_kernel),
        ("exclude_hv", exclude_hv),
        ("pinned", pinned),
    ):
        attr.set_flag(name, on)
    return attr


def extended_hw_config(pmu_type: int, hw_id: int) -> int:
    """A PERF_TYPE_HARDWARE/HW_CACHE config aimed at one PMU of a hybrid CPU (cpu_core or cpu_atom's `type`)."""
    return pmu_type << PERF_TYPE_EXTENDED_SHIFT | hw_id & PERF_HW_EVENT_MASK


# __NR_perf_event_open per architecture (arch syscall tables; the asm-generic table for the newer ports).
_SYSCALL_NUMBERS = {
    "x86_64": 298,
    "amd64": 298,
    "i386": 336,
    "i486": 336,
    "i586": 336,
    "i686": 336,
    "aarch64": 241,
    "arm64": 241,
    "riscv64": 241,
    "loongarch64": 241,
    "ppc": 319,
    "ppc64": 319,
    "ppc64le": 319,
    "s390x": 331,
}


def syscall_number(machine: str | None = None, *, userland_32bit: bool | None = None) -> int:
    """__NR_perf_event_open for this process's ABI; raises HardwareError on an architecture not in the table."""
    m = (machine or _MACHINE).lower()
    is32 = _USERLAND_32BIT if userland_32bit is None else userland_32bit
    # A 32-bit userland on a 64-bit kernel uses the 32-bit table (uname still says x86_64/aarch64).
    if m in ("x86_64", "amd64") and is32:
        return 336
    if (m.startswith("arm") and m != "arm64") or (m in ("aarch64", "arm64") and is32):
        return 364
    nr = _SYSCALL_NUMBERS.get(m)
    if nr is None:
        raise HardwareError(
            f"perf_event_open: unknown syscall number for machine {m!r} (known: x86, arm, ppc, s390x, ...)"
        )
    return nr


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
        if not self.fds:
            raise PerfGroupError(f"cpu {self.cpu}: perf group is closed")
        try:
            data = os.read(self.fds[0], self._read_size)
        except OSError as e:
            raise PerfOpenError(f"cpu {self.cpu}: reading the perf group failed: {e.strerror}", e.errno or 0) from e
        return parse_group_read(data, len(self.events), with_ids=self.with_ids, cpu=self.cpu)

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in reversed(fds):  # members first, then the leader
            os.close(fd)

    def __enter__(self) -> PerfGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_group_read(data: bytes, n_events: int, *, with_ids: bool = False, cpu: int = -1) -> GroupReading:
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


# --- sysfs PMU discovery ---------------------------------------------------------------------------------

EVENT_SOURCE_DIR = "sys/bus/event_source/devices"
_FORMAT_RE = re.compile(r"^(config[0-9]*):(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)$")
_CONFIG_WORDS = ("config", "config1", "config2")


@dataclass(frozen=True)
class FormatField:
    """Where one named field of a PMU's config lives, e.g. umask = config:8-15."""

    register: str  # "config", "config1", "config2" (or "config3")
    ranges: tuple[tuple[int, int], ...]  # inclusive (lo, hi) bit ranges as written in sysfs

    @property
    def bits(self) -> list[int]:
        """Target bit positions, lowest first: the value's bit i goes to bits[i]."""
        return sorted({b for lo, hi in self.ranges for b in range(lo, hi + 1)})

    @property
    def width(self) -> int:
        return len(self.bits)


def parse_format(text: str) -> FormatField:
    """Parse a sysfs format file: "config:0-7", "config1:0-63", "config:18", "config:0-7,32-35"."""
    m = _FORMAT_RE.match(text.strip())
    if m is None:
        raise ValueError(f"bad PMU format {text!r} (expected e.g. config:0-7)")
    ranges: list[tuple[int, int]] = []
    for part in m.group(2).split(","):
        lo_s, _, hi_s = part.partition("-")
        lo, hi = int(lo_s), int(hi_s or lo_s)
        if hi < lo or hi > 63:
            raise ValueError(f"bad PMU format {text!r}: bit range {part!r}")
        ranges.append((lo, hi))
    return FormatField(m.group(1), tuple(ranges))


@dataclass(frozen=True)
class PmuInfo:
    """One PMU under sys/bus/event_source/devices/: its perf `type`, the CPUs it covers, its config fields."""

    name: str
    type: int
    cpus: list[int] | None  # from `cpus` (hybrid core PMUs, Arm PMUs); None when the file is absent
    cpumask: list[int] | None  # from `cpumask` (uncore PMUs: the CPU to open on); None when absent
    formats: dict[str, FormatField]


def list_pmus(sysroot: Sysroot) -> dict[str, PmuInfo]:
    """Every PMU with a readable integer `type`; unreadable or malformed optional files are left out."""
    base = sysroot.path(EVENT_SOURCE_DIR)
    try:
        names = sorted(p.name for p in base.iterdir())
    except OSError:
        return {}
    pmus: dict[str, PmuInfo] = {}
    for name in names:
        rel = f"{EVENT_SOURCE_DIR}/{name}"
        type_text = sysroot.read_text(f"{rel}/type")
        if type_text is None or not type_text.isdigit():
            continue
        formats: dict[str, FormatField] = {}
        try:
            fmt_files = sorted(p.name for p in sysroot.path(f"{rel}/format").iterdir())
        except OSError:
            fmt_files = []
        for fname in fmt_files:
            text = sysroot.read_text(f"{rel}/format/{fname}")
            try:
                formats[fname] = parse_format(text or "")
            except ValueError:
                continue  # a syntax this parser does not know: the field is unusable, the PMU is not
        pmus[name] = PmuInfo(
            name,
            int(type_text),
            _read_cpus(sysroot, f"{rel}/cpus"),
            _read_cpus(sysroot, f"{rel}/cpumask"),
            formats,
        )
    return pmus


def _read_cpus(sysroot: Sysroot, rel: str) -> list[int] | None:
    text = sysroot.read_text(rel)
    if not text:
        return None
    try:
        return parse_cpu_list(text, what=rel)
    except PmutopError:
        return None


def encode_with_format(fields: Mapping[str, int], fmt: Mapping[str, FormatField]) -> tuple[int, int, int]:
    """(config, config1, config2) with each named field's value spread over its format bits (low bits first)."""
    words = dict.fromkeys(_CONFIG_WORDS, 0)
    for name, value in fields.items():
        spec = fmt.get(name)
        if spec is None:
            raise ValueError(f"unknown PMU format field {name!r} (known: {', '.join(sorted(fmt)) or 'none'})")
        if spec.register not in words:
            raise ValueError(f"field {name!r} is in {spec.register}, which is not supported")
        bits = spec.bits
        if value < 0 or value >> len(bits):
            raise ValueError(f"{name}={value:#x} does not fit in {len(bits)} bits ({spec.register} bits {bits})")
        for i, bit in enumerate(bits):
            if value >> i & 1:
                words[spec.register] |= 1 << bit
    return words["config"], words["config1"], words["config2"]


_EVENT_TERM = re.compile(r"^([a-z][a-z0-9_]*)(?:=(0x[0-9a-f]+|[0-9]+))?$")
_EVENT_FILE_MAX = 4096  # bytes of one sysfs events/ file (the kernel's are one short line)


def parse_event_terms(text: str) -> dict[str, int]:
    """A sysfs events/ file ("event=0x00,umask=0x80", "event=0x3c,any=1", "edge") as {term: value}.

    A term without a value is 1 (a flag). ValueError for anything else, e.g. a term pmutop cannot encode.
    """
    terms: dict[str, int] = {}
    for part in text.strip().lower().split(","):
        m = _EVENT_TERM.match(part.strip())
        if m is None:
            raise ValueError(f"bad PMU event term {part.strip()[:40]!r} in {text.strip()[:80]!r}")
        name, value = m.group(1), m.group(2)
        terms[name] = 1 if value is None else int(value, 0)
    return terms


def pmu_events(sysroot: Sysroot, pmu: str) -> dict[str, str]:
    """The named events a PMU lists in sysfs (events/<name> -> "event=0x00,umask=0x80"); .scale/.unit and
    unreadable files are left out, a missing directory gives {}. Linux lists the topdown events here (slots,
    topdown-retiring, ...) only when it drives PERF_METRICS (arch/x86/events/intel/core.c)."""
    rel = f"{EVENT_SOURCE_DIR}/{pmu}/events"
    try:
        names = sorted(p.name for p in sysroot.path(rel).iterdir())
    except OSError:
        return {}
    events: dict[str, str] = {}
    for name in names:
        if "." in name:  # topdown-retiring.scale, cpu-cycles.unit: attributes of an event, not events
            continue
        text = sysroot.read_text(f"{rel}/{name}")
        if text and len(text) <= _EVENT_FILE_MAX:
            events[name] = text
    return events


_HYBRID_CORE_PMUS = ("cpu_core", "cpu_atom")


def core_pmu_for_cpu(pmus: Mapping[str, PmuInfo], cpu: int) -> PmuInfo | None:
    """The core PMU counting on `cpu`: "cpu" on non-hybrid systems, else the cpu_* PMU whose cpus lists it."""
    if "cpu" in pmus:
        return pmus["cpu"]
    hybrid: Iterable[str] = (*_HYBRID_CORE_PMUS, *sorted(n for n in pmus if n.startswith("cpu_")))
    for name in hybrid:
        info = pmus.get(name)
        if info is not None and info.cpus is not None and cpu in info.cpus:
            return info
    return None
