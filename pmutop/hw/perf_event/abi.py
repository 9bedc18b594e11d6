"""The perf_event_open(2) ABI: struct perf_event_attr, its constants and the syscall number per architecture.

Layout and constants follow include/uapi/linux/perf_event.h (checked against the installed header by
tests/test_perf_event.py).
"""

from __future__ import annotations

import ctypes
import platform

from pmutop.core.errors import HardwareError

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

    flags: int  # the bitfield word (ctypes gives it at run time; declared for the type checker)

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
