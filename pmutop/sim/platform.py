"""The simulated machine behind the Platform interface, so the msr backend runs on it unchanged."""

from __future__ import annotations

from contextlib import AbstractContextManager

from pmutop.core.clock import Clock
from pmutop.hw.msr import MsrDevice
from pmutop.hw.platform import NMI_WATCHDOG, PERF_EVENT_PARANOID, RDPMC_SYSFS, MsrDeviceState, Platform, RdpmcProbe
from pmutop.pmu import registers
from pmutop.sim.config import SimConfig
from pmutop.sim.cpu import SimRdpmcFault
from pmutop.sim.model import SimMachine


class SimRdpmcReader:
    """What pmutop.hw.shim.RdpmcReader does, on the simulated PMU: one atomic read of everything."""

    method = "rdpmc"

    def __init__(self, platform: SimPlatform, cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> None:
        self._platform, self._cpu, self._n_fixed, self._n_gp = platform, cpu, n_fixed, n_gp
        self._metrics = metrics

    def read(self) -> tuple[int, list[int]]:
        self._platform.check_pce()
        return self._platform.machine.read_counters(self._cpu, self._n_fixed, self._n_gp, self._metrics)


class SimPlatform(Platform):
    kind = "sim"
    simulated = True
    pins_threads = False  # simulated CPUs are not this host's

    def __init__(self, config: SimConfig, clock: Clock | None = None, settings: dict[str, str] | None = None) -> None:
        self.machine = SimMachine(config, clock)
        self.clock = self.machine.clock
        self.settings = {NMI_WATCHDOG: "0", PERF_EVENT_PARANOID: "2", **(settings or {})}
        self._pce_fault = self._pce()
        if self.settings[NMI_WATCHDOG] == "1":
            self._watchdog(True)

    def _watchdog(self, on: bool) -> None:
        """Model the kernel's hard-lockup detector: a pinned cycles event on fixed counter 1 with PMI."""
        if self.machine.config.fixed_counters < 2:
            return
        for cpu in self.machine.cpus:
            dev = self.machine.msr(cpu)
            ctrl = dev.read(registers.IA32_FIXED_CTR_CTRL) & ~(0xF << 4)
            glob = dev.read(registers.IA32_PERF_GLOBAL_CTRL) & ~registers.fixed_bit(1)
            if on:
                ctrl |= (registers.FIXED_EN_OS | registers.FIXED_EN_USR | registers.FIXED_PMI) << 4
                glob |= registers.fixed_bit(1)
            self.machine.foreign_write(cpu, registers.IA32_FIXED_CTR_CTRL, ctrl)
            self.machine.foreign_write(cpu, registers.IA32_PERF_GLOBAL_CTRL, glob)

    def label(self) -> str:
        return "SIMULATED PMU"

    def one_instant(self, cpu: int) -> AbstractContextManager[None]:
        return self.machine.instant(cpu)

    def online_cpus(self) -> list[int]:
        return self.machine.cpus

    def cpuid(self, cpu: int, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        return self.machine.cpuid(cpu, leaf, subleaf)

    def msr_state(self, cpu: int) -> MsrDeviceState:
        return MsrDeviceState(True, True, None)

    def open_msr(self, cpu: int, *, writable: bool = True) -> MsrDevice:
        return self.machine.msr(cpu)

    def read_setting(self, rel: str) -> str | None:
        return self.settings.get(rel)

    def write_setting(self, rel: str, value: str) -> None:
        old, new = self.settings.get(rel), value.strip()
        self.settings[rel] = new
        self._pce_fault = self._pce()
        if rel == NMI_WATCHDOG and old != new:
            self._watchdog(new == "1")

    def is_root(self) -> bool:
        return True

    def rdpmc_possible(self) -> bool:
        return True

    def check_pce(self) -> None:
        """Like the kernel's CR4.PCE: with an rdpmc sysfs file present, only the value 2 lets a process
        without mmapped perf events execute rdpmc (the simulator has no perf events)."""
        if self._pce_fault is not None:
            raise SimRdpmcFault(self._pce_fault)

    def _pce(self) -> str | None:
        """Why rdpmc faults with the settings as they are (None: it works); kept, as they change only through
        write_setting (checked on every counter read)."""
        values = {self.settings[rel] for rel in RDPMC_SYSFS if rel in self.settings}
        return f"CR4.PCE clear (rdpmc sysfs = {min(values)})" if values and values != {"2"} else None

    def probe_rdpmc(self, cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> RdpmcProbe:
        try:
            self.check_pce()
            self.machine.read_counters(cpu, n_fixed, n_gp, metrics)
        except SimRdpmcFault as e:
            return RdpmcProbe(False, f"rdpmc faults on simulated cpu {cpu}: {e}")
        return RdpmcProbe(True, f"rdpmc works on simulated cpu {cpu}")

    def rdpmc_reader(self, cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> SimRdpmcReader:
        return SimRdpmcReader(self, cpu, n_fixed, n_gp, metrics)
