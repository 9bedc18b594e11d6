"""sysfs trees of memory-controller (uncore) PMUs shaped like each platform, and a fake kernel for
perf_event_open that counts what the test says.

Shapes follow the kernel: Intel registers uncore_imc_N once per channel type with a cpumask of one CPU per
socket; AMD registers amd_umc_N per memory controller, each with the one CPU of its socket. `format/` files are
the kernel's (uncore_snbep.c, uncore_snb.c, amd/uncore.c); `events/` as each kernel version listed them.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path

from pmutop.core.cpulist import format_cpu_list
from pmutop.hw.perf_event import PerfEventAttr

DEVICES = "sys/bus/event_source/devices"
MIB_PER_LINE = "6.103515625e-5"  # the kernel's .scale: 64 bytes in MiB

# format/ files per PMU family
SNBEP_FORMAT = {"event": "config:0-7", "umask": "config:8-15", "edge": "config:18", "inv": "config:23"}
SPR_FORMAT = {**SNBEP_FORMAT, "umask": "config:8-15,32-55"}  # umask_ext4 (uncore_snbep.c spr_uncore_raw_format)
FREE_RUNNING_FORMAT = {"event": "config:0-7", "umask": "config:8-15"}
SNB_IMC_FORMAT = {"event": "config:0-7"}
AMD_UMC_FORMAT = {"event": "config:0-7", "rdwrmask": "config:8-9"}


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def add_packages(root: Path, packages: dict[int, list[int]]) -> None:
    for package, cpus in packages.items():
        for cpu in cpus:
            write(root, f"sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id", str(package))


def add_pmu(
    root: Path,
    name: str,
    pmu_type: int,
    cpumask: list[int],
    formats: dict[str, str],
    events: dict[str, str] | None = None,
    *,
    scale: str | None = MIB_PER_LINE,
) -> None:
    base = f"{DEVICES}/{name}"
    write(root, f"{base}/type", str(pmu_type))
    write(root, f"{base}/cpumask", format_cpu_list(cpumask))
    for field_name, spec in formats.items():
        write(root, f"{base}/format/{field_name}", spec)
    for event, terms in (events or {}).items():
        write(root, f"{base}/events/{event}", terms)
        if scale is not None:
            write(root, f"{base}/events/{event}.scale", scale)
            write(root, f"{base}/events/{event}.unit", "MiB")


def _imc_channels(
    root: Path, packages: dict[int, list[int]], channels: int, formats: dict[str, str], events: dict[str, str]
) -> None:
    add_packages(root, packages)
    first_cpus = [cpus[0] for _, cpus in sorted(packages.items())]
    for n in range(channels):
        add_pmu(root, f"uncore_imc_{n}", 20 + n, first_cpus, formats, events)


def skx_two_sockets(root: Path) -> None:
    """Skylake-SP, 2 sockets × 6 channels (uncore_imc_0..5, each cpumask "0,28")."""
    events = {"cas_count_read": "event=0x04,umask=0x03", "cas_count_write": "event=0x04,umask=0x0c"}
    _imc_channels(root, {0: list(range(28)), 1: list(range(28, 56))}, 6, SNBEP_FORMAT, events)


def icx_old_kernel(root: Path) -> None:
    """Ice Lake-SP, 1 socket × 8 channels, with a pre-5.16 kernel's Haswell-EP umasks in events/."""
    events = {"cas_count_read": "event=0x04,umask=0x03", "cas_count_write": "event=0x04,umask=0x0c"}
    _imc_channels(root, {0: list(range(4))}, 8, SNBEP_FORMAT, events)


def icx_fixed_kernel(root: Path) -> None:
    events = {"cas_count_read": "event=0x04,umask=0x0f", "cas_count_write": "event=0x04,umask=0x30"}
    _imc_channels(root, {0: list(range(4))}, 8, SNBEP_FORMAT, events)


def spr_two_sockets(root: Path) -> None:
    events = {"cas_count_read": "event=0x05,umask=0xcf", "cas_count_write": "event=0x05,umask=0xf0"}
    _imc_channels(root, {0: [0, 1], 1: [2, 3]}, 8, SPR_FORMAT, events)


def gnr_scheduler0_names(root: Path) -> None:
    """Granite Rapids on a kernel before gnr_uncore_imc_events: spr's names, scheduler 0 only."""
    events = {"cas_count_read": "event=0x05,umask=0xcf", "cas_count_write": "event=0x05,umask=0xf0"}
    _imc_channels(root, {0: [0, 1]}, 12, SPR_FORMAT, events)


def adl_free_running(root: Path) -> None:
    """Alder Lake client: two free-running IMC PMUs (and the programmable uncore_imc_0/1 beside them)."""
    add_packages(root, {0: list(range(4))})
    events = {
        "data_total": "event=0xff,umask=0x10",
        "data_read": "event=0xff,umask=0x20",
        "data_write": "event=0xff,umask=0x30",
    }
    for n in range(2):
        add_pmu(root, f"uncore_imc_free_running_{n}", 30 + n, [0], FREE_RUNNING_FORMAT, events)
        add_pmu(root, f"uncore_imc_{n}", 40 + n, [0], SNBEP_FORMAT, {"clockticks": "event=0x01"}, scale=None)


def skl_client_imc(root: Path) -> None:
    add_packages(root, {0: list(range(4))})
    add_pmu(root, "uncore_imc", 15, [0], SNB_IMC_FORMAT, {"data_reads": "event=0x01", "data_writes": "event=0x02"})


def zen4_two_sockets(root: Path) -> None:
    """AMD Genoa, 2 sockets × 12 UMCs: amd_umc_0..11 on cpu 0, amd_umc_12..23 on cpu 96 (per-socket cpumask).
    The kernel lists no UMC events in sysfs (perf's JSON names them)."""
    add_packages(root, {0: list(range(96)), 1: list(range(96, 192))})
    for n in range(24):
        add_pmu(root, f"amd_umc_{n}", 50 + n, [0 if n < 12 else 96], AMD_UMC_FORMAT)


def smbios_memory_device(
    configured_mts: int, *, size_mb: int = 32768, extended_mts: int | None = None, length: int = 0x5C
) -> bytes:
    """A type-17 structure (DSP0134 3.x): Size at 0x0C, Configured Memory Speed at 0x20, Extended
    Configured Memory Speed at 0x58, then the empty string set."""
    raw = bytearray(length)
    raw[0], raw[1] = 17, length
    struct.pack_into("<H", raw, 0x0C, size_mb)
    struct.pack_into("<H", raw, 0x20, configured_mts)
    if extended_mts is not None and length >= 0x5C:
        struct.pack_into("<I", raw, 0x58, extended_mts)
    return bytes(raw) + b"\x00\x00"


def add_smbios(root: Path, devices: list[bytes]) -> None:
    for n, raw in enumerate(devices):
        path = root / f"sys/firmware/dmi/entries/17-{n}/raw"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(raw)


@dataclass
class Opened:
    type: int
    config: int
    config1: int
    config2: int
    pid: int
    cpu: int
    flags: int  # the attr's bitfield word (disabled, exclude_*, ...)
    sample_period: int
    read_format: int
    open_flags: int


@dataclass
class FakeKernel:
    """perf_event_open, read and close of uncore counters: each (type, config, cpu) has a count the test sets;
    every read advances enabled by `tick_ns` and running by `tick_ns * running_share`."""

    counts: dict[tuple[int, int, int], int] = field(default_factory=dict)
    tick_ns: int = 1_000_000_000
    running_share: float = 1.0
    opened: dict[int, Opened] = field(default_factory=dict)
    closed: list[int] = field(default_factory=list)
    times: dict[int, tuple[int, int]] = field(default_factory=dict)
    next_fd: int = 100
    refuse: int | None = None  # an errno every open fails with

    def open(self, attr: PerfEventAttr, pid: int, cpu: int, group_fd: int = -1, flags: int = 0) -> int:
        if self.refuse is not None:
            from pmutop.hw.perf_event import PerfOpenError

            raise PerfOpenError("perf_event_open: refused", self.refuse, cpu=cpu)
        fd = self.next_fd
        self.next_fd += 1
        self.opened[fd] = Opened(
            attr.type,
            attr.config,
            attr.config1,
            attr.config2,
            pid,
            cpu,
            attr.flags,
            attr.sample_period,
            attr.read_format,
            flags,
        )
        self.times[fd] = (0, 0)
        # A new event's count starts at zero (the kernel zeroes AMD UMC hardware counters on add).
        self.counts[self.key(fd)] = 0
        return fd

    def key(self, fd: int) -> tuple[int, int, int]:
        o = self.opened[fd]
        return (o.type, o.config, o.cpu)

    def read(self, fd: int, size: int) -> bytes:
        assert fd not in self.closed, "read of a closed fd"
        enabled, running = self.times[fd]
        enabled += self.tick_ns
        running += int(self.tick_ns * self.running_share)
        self.times[fd] = (enabled, running)
        return struct.pack("=3Q", self.counts[self.key(fd)] % (1 << 64), enabled, running)[:size]

    def close(self, fd: int) -> None:
        assert fd in self.opened and fd not in self.closed
        self.closed.append(fd)

    def add(self, pmu_type: int, config: int, cpu: int, lines: int) -> None:
        self.counts[(pmu_type, config, cpu)] += lines

    @property
    def live(self) -> list[int]:
        return [fd for fd in self.opened if fd not in self.closed]


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
