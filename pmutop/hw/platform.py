"""The hardware-access layer the backends use: CPUs, CPUID, MSR devices, settings files, counter reads.

`HostPlatform` is a real machine (or a captured sysroot of one); `pmutop.sim.platform.SimPlatform`
implements the same interface over the simulated PMU.
"""

from __future__ import annotations

import errno
import os
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pmutop.core.clock import Clock, MonotonicClock
from pmutop.core.cpulist import parse_cpu_list
from pmutop.core.errors import HardwareError, PmutopError
from pmutop.core.sysroot import CHAR_DEVICE, REGULAR, Sysroot, UnsafePathError
from pmutop.hw import shim
from pmutop.hw.cpuid import CpuidSource
from pmutop.hw.msr import MsrDevice, MsrFile
from pmutop.pmu.cpuid_decode import CpuidFn, decode_identity
from pmutop.pmu.registers import IA32_TIME_STAMP_COUNTER, LEGACY_REGISTERS, MSR_PERF_METRICS, CounterRegisters

NMI_WATCHDOG = "proc/sys/kernel/nmi_watchdog"
PERF_EVENT_PARANOID = "proc/sys/kernel/perf_event_paranoid"
CPU_ONLINE = "sys/devices/system/cpu/online"
CPU_POSSIBLE = "sys/devices/system/cpu/possible"
# The real directories: sys/bus/event_source/devices/<pmu> are symlinks to these, and pmutop never
# writes through a symlink.
RDPMC_SYSFS = tuple(f"sys/devices/{pmu}/rdpmc" for pmu in ("cpu", "cpu_core", "cpu_atom"))
MSR_ALLOW_WRITES = "sys/module/msr/parameters/allow_writes"
LOCKDOWN = "sys/kernel/security/lockdown"


class CounterReader(Protocol):
    """Reads the TSC and the planned counters: (tsc, [fixed 0..n_fixed-1, gp 0..n_gp-1]), followed by
    PERF_METRICS when the reader was made with metrics=True."""

    method: str

    def read(self) -> tuple[int, list[int]]: ...


class MsrCounterReader:
    """The same read as rdpmc, through MSR reads (one IPI each): the fallback and the sysroot method."""

    method = "msr"

    def __init__(
        self,
        dev: MsrDevice,
        n_fixed: int,
        n_gp: int,
        *,
        regs: CounterRegisters = LEGACY_REGISTERS,
        metrics: bool = False,
    ) -> None:
        self._dev = dev
        self.addresses = (
            [IA32_TIME_STAMP_COUNTER] + [regs.fixed_ctr(i) for i in range(n_fixed)] + [regs.pmc(i) for i in range(n_gp)]
        )
        if metrics:  # read right after the counters, fixed counter 3 (slots) among them
            self.addresses.append(MSR_PERF_METRICS)

    def read(self) -> tuple[int, list[int]]:
        values = [self._dev.read(a) for a in self.addresses]
        return values[0], values[1:]


@dataclass(frozen=True)
class MsrDeviceState:
    present: bool
    writable: bool
    problem: str | None  # why it cannot be used, with the fix


@dataclass(frozen=True)
class RdpmcProbe:
    ok: bool
    detail: str


class Platform(ABC):
    kind: str  # "host", "sysroot" or "sim"
    clock: Clock
    simulated: bool = False
    pins_threads: bool = False  # True only when the CPUs are this machine's

    @abstractmethod
    def label(self) -> str: ...

    def possible_cpus(self) -> list[int] | None:
        return None

    @abstractmethod
    def online_cpus(self) -> list[int]: ...

    @abstractmethod
    def cpuid(self, cpu: int, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]: ...

    def cpuid_fn(self, cpu: int) -> CpuidFn:
        def cpuid(leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
            return self.cpuid(cpu, leaf, subleaf)

        return cpuid

    @abstractmethod
    def msr_state(self, cpu: int) -> MsrDeviceState: ...

    @abstractmethod
    def open_msr(self, cpu: int, *, writable: bool = True) -> MsrDevice: ...

    @abstractmethod
    def read_setting(self, rel: str) -> str | None: ...

    @abstractmethod
    def write_setting(self, rel: str, value: str) -> None: ...

    def is_root(self) -> bool:
        return os.geteuid() == 0

    def rdpmc_possible(self) -> bool:
        """Can rdpmc be executed at all for these CPUs (own host with the shim, or the simulator)?"""
        return False

    def shim_missing(self) -> bool:
        """This host's CPUs, but pmutop was installed without its C shim (no C compiler then)."""
        return False

    def probe_rdpmc(self, cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> RdpmcProbe:
        """Does the read rdpmc_reader(cpu, n_fixed, n_gp, metrics) will do work on that CPU?"""
        return RdpmcProbe(False, "rdpmc is not available for these CPUs")

    def rdpmc_reader(self, cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> CounterReader:
        """TSC, fixed 0..n_fixed-1, GP 0..n_gp-1 and (metrics) PERF_METRICS, all in one call."""
        raise HardwareError("rdpmc is not available for these CPUs")

    def pin_current_thread(self, cpu: int) -> None:  # noqa: B027 - no-op unless the CPUs are ours
        pass

    def release_files(self) -> None:  # noqa: B027 - no-op unless the platform keeps files open
        """Close the files the platform keeps open between reads (an engine's stop calls it); any later read
        opens what it needs again."""

    def one_instant(self, cpu: int) -> AbstractContextManager[None]:
        """Inside, `cpu`'s registers are all read and written at one instant where the platform can do that (the
        simulator's time stands still for that CPU; a real CPU's registers move on regardless)."""
        return nullcontext()


class HostPlatform(Platform):
    """A real machine seen through a sysroot ("/" is this host)."""

    simulated = False

    def __init__(self, sysroot: Sysroot) -> None:
        self.sysroot = sysroot
        self.kind = "host" if sysroot.is_host else "sysroot"
        self.pins_threads = sysroot.is_host
        self.clock = MonotonicClock()
        self._cpuid = CpuidSource(sysroot)

    def label(self) -> str:
        return "this host" if self.sysroot.is_host else f"sysroot {self.sysroot}"

    def online_cpus(self) -> list[int]:
        text = self.sysroot.read_text(CPU_ONLINE)
        if text is None:
            if self.sysroot.is_host:
                return sorted(os.sched_getaffinity(0))
            raise HardwareError(f"cannot read {self.sysroot.path(CPU_ONLINE)}")
        try:
            return parse_cpu_list(text, what=CPU_ONLINE)
        except PmutopError as e:
            raise HardwareError(str(e)) from None

    def possible_cpus(self) -> list[int] | None:
        """The CPUs the kernel could ever bring online (None when it does not say)."""
        text = self.sysroot.read_text(CPU_POSSIBLE)
        if text is None:
            return None
        try:
            return parse_cpu_list(text, what=CPU_POSSIBLE)
        except PmutopError:
            return None

    def cpuid(self, cpu: int, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        return self._cpuid(cpu, leaf, subleaf)

    def release_files(self) -> None:
        self._cpuid.close()

    def cpuid_method(self, cpu: int) -> str:
        return self._cpuid.method(cpu)

    def _msr_path(self, cpu: int) -> Path:
        return self.sysroot.path(f"dev/cpu/{cpu}/msr")

    def _intel(self, cpu: int) -> bool:
        try:
            return decode_identity(self.cpuid_fn(cpu)).vendor == "GenuineIntel"
        except PmutopError:
            return True  # cannot tell: keep the usual advice

    def msr_state(self, cpu: int) -> MsrDeviceState:
        path = self._msr_path(cpu)
        if not path.exists():
            if not self.sysroot.is_host:
                fix = "the sysroot has no msr file"
            elif self._intel(cpu):
                fix = "load the msr module: `modprobe msr`"
            else:  # the msr backend programs Intel PMUs: loading the module would not help
                fix = "not needed here: the msr backend is for Intel PMUs"
            return MsrDeviceState(False, False, f"{path} does not exist ({fix})")
        try:
            os.close(self._open_msr_fd(cpu, writable=True))
        except UnsafePathError as e:
            return MsrDeviceState(True, False, f"{path}: {e.strerror}")
        except OSError as e:
            if e.errno in (errno.EPERM, errno.EACCES):
                why = "run as root (opening it needs CAP_SYS_RAWIO)"
            else:
                why = e.strerror or str(e)
            return MsrDeviceState(True, False, f"{path} cannot be opened for writing: {why}")
        if (self.read_setting(MSR_ALLOW_WRITES) or "").lower() == "off":
            return MsrDeviceState(
                True, False, f"MSR writes are disabled (msr.allow_writes=off): `echo on > /{MSR_ALLOW_WRITES}`"
            )
        lockdown = self.read_setting(LOCKDOWN) or ""
        if "[integrity]" in lockdown or "[confidentiality]" in lockdown:
            return MsrDeviceState(True, False, "kernel lockdown forbids MSR writes (boot without lockdown)")
        return MsrDeviceState(True, True, None)

    def _open_msr_fd(self, cpu: int, *, writable: bool) -> int:
        # A snapshot (regular file) or the msr driver's character device; never through a symlink.
        flags = os.O_RDWR if writable else os.O_RDONLY
        return self.sysroot.open_nofollow(f"dev/cpu/{cpu}/msr", flags, [CHAR_DEVICE, REGULAR])

    def open_msr(self, cpu: int, *, writable: bool = True) -> MsrDevice:
        path = self._msr_path(cpu)
        try:
            fd = self._open_msr_fd(cpu, writable=writable)
        except UnsafePathError as e:
            raise HardwareError(f"cpu {cpu}: refusing {path}: {e.strerror}") from None
        except OSError as e:
            raise HardwareError(f"cpu {cpu}: cannot open {path}: {e.strerror or e}") from None
        return MsrFile(path, cpu, writable=writable, fd=fd)

    def read_setting(self, rel: str) -> str | None:
        return self.sysroot.read_text(rel)

    def write_setting(self, rel: str, value: str) -> None:
        self.sysroot.write_text(rel, value)

    def rdpmc_possible(self) -> bool:
        return self.sysroot.is_host and shim.available()

    def shim_missing(self) -> bool:
        return self.sysroot.is_host and shim.lib is None

    def probe_rdpmc(self, cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> RdpmcProbe:
        if not self.rdpmc_possible():
            return RdpmcProbe(False, "rdpmc is only used on this host's own CPUs (not under --sysroot)")
        r = shim.probe_rdpmc(cpu, n_fixed, n_gp, metrics)
        return RdpmcProbe(r.ok, r.detail)

    def rdpmc_reader(self, cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> CounterReader:
        return shim.RdpmcReader(n_fixed, n_gp, metrics)

    def pin_current_thread(self, cpu: int) -> None:
        if self.pins_threads:
            try:
                os.sched_setaffinity(0, {cpu})
            except OSError as e:
                raise HardwareError(f"cannot pin a thread to cpu {cpu}: {e.strerror}") from e
