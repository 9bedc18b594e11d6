"""Per-CPU and per-package power readings, from the best source this machine offers, once per interval.

Order per value: MSRs (root; reads only) first; without them the kernel's perf PMUs msr, cstate_core and
power (perf_power.py); then the root-free files: cpuidle for idle-state residency, hwmon for temperatures,
powercap for energy. Every value carries its source name (`Sample.power_src`); a value no source measured is
absent, never guessed.

A CPU's MSRs are read once per interval, all in one list (`msr_registers`): by this module, or, on the
engine's native read path, by that CPU's native sampler thread right after its counters (which costs the
Python thread that makes the Samples no pread at all) and handed to `sample`. Either way the same arithmetic
turns the same register values into the same fields.
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from pmutop.core.errors import PmutopError
from pmutop.core.sysroot import Sysroot
from pmutop.hw.msr import MsrDevice
from pmutop.probes.power import regs
from pmutop.probes.power.perf_power import ENERGY_DOMAIN, PerfPower
from pmutop.probes.power.sysfs import CpuIdle, Hwmon, Powercap, core_of, package_of, perf_pmus

# Most registers PowerMonitor.msr_registers lists for one CPU: APERF, MPERF, TSC, the C-state residencies, the
# two thermal status registers and the energy domains.
MAX_MSR_REGISTERS = 3 + len(regs.CORE_CSTATE_MSRS) + 2 + max(len(regs.INTEL_ENERGY), len(regs.AMD_ENERGY))


def _percent(part: int, whole: int) -> float:
    """round(min(100.0, 100 * part / whole), 3), for whole > 0: a state not entered (0) or the whole interval
    (100) without round(), which costs ~0.2 µs a call (it rounds through the decimal digits)."""
    if not part:
        return 0.0
    share = 100 * part / whole
    return 100.0 if share >= 100.0 else round(share, 3)


@dataclass
class SourceStatus:
    name: str
    available: bool
    detail: str  # what it offers, or why it is missing


@dataclass
class _Cpu:
    package: int
    first: bool  # reads the package's values
    dev: MsrDevice | None = None
    core_regs: dict[str, int] = field(default_factory=dict)  # C-state name -> MSR still answering
    has_therm: bool = False
    tjmax: int | None = None
    # The MSRs read each interval, in this order: APERF, MPERF, TSC, the answering C-state residencies (the
    # "core" registers, whose deltas count), then THERM_STATUS, PACKAGE_THERM_STATUS and the RAPL energy
    # registers where this CPU reads them; where each of the last three is in the list (-1: not read).
    addresses: tuple[int, ...] = ()
    core_names: tuple[str, ...] = ()
    therm_at: int = -1
    pkg_therm_at: int = -1
    energy_at: tuple[tuple[str, int], ...] = ()  # (domain, position)
    prev_core: list[int | None] = field(default_factory=list)  # the last core registers read (None: failed)
    prev_gap: bool = False  # one of them failed
    deep_names: tuple[str, ...] = ()  # the C-state residencies among them
    idle_states: list[tuple[str, str]] = field(default_factory=list)
    prev_idle: dict[str, int] = field(default_factory=dict)
    hwmon_core: str | None = None
    energy_regs: dict[str, int] = field(default_factory=dict)  # domain -> MSR (first CPU of a package)
    energy_unit: float = 0.0
    prev_energy: dict[str, int] = field(default_factory=dict)
    prev_powercap: dict[str, int] = field(default_factory=dict)
    perf_groups: dict[str, Any] = field(default_factory=dict)  # perf PMU name -> PerfGroup
    prev_perf: dict[str, float] = field(default_factory=dict)


class PowerMonitor:
    """Build with `for_platform`; `start(cpu)` and `sample(cpu, ...)` run in that CPU's sampler thread."""

    def __init__(
        self,
        cpus: list[int],
        *,
        sysroot: Sysroot | None,
        open_msr: Callable[[int], MsrDevice] | None,
        msr_why: str = "",
        amd: bool = False,
        simulated: bool = False,
        perf: PerfPower | None = None,
    ) -> None:
        self.cpus = cpus
        self.sysroot = sysroot
        self.simulated = simulated
        self.amd = amd
        self._open_msr = open_msr
        self.msr_why = msr_why
        self.cpuidle = CpuIdle(sysroot) if sysroot else None
        self.read_idle_states = True  # False before start(): the run shows no idle-state shares (a batch table)
        self.hwmon = Hwmon(sysroot) if sysroot else None
        self.powercap = Powercap(sysroot) if sysroot else None
        self.perf = perf  # perf_event_open counts on this host only: None for a captured sysroot
        self._lock = threading.Lock()
        self._state: dict[int, _Cpu] = {}
        seen: set[int] = set()
        for cpu in cpus:
            pkg = package_of(sysroot, cpu) if sysroot else 0
            self._state[cpu] = _Cpu(pkg, pkg not in seen)
            seen.add(pkg)
        self._tag = "msr (SIMULATED)" if simulated else "msr"
        self.msr_ok = False
        if open_msr is not None:
            try:
                dev = open_msr(cpus[0])
                dev.read(regs.IA32_APERF)
                dev.close()
                self.msr_ok = True
            except (PmutopError, OSError) as e:
                self.msr_why = str(e)

    @classmethod
    def for_platform(cls, platform: Any, cpus: list[int]) -> PowerMonitor:
        """Simulated: the simulator's MSRs only. Host/sysroot: MSRs read-only where they open, and sysfs."""
        if platform.simulated:
            return cls(cpus, sysroot=None, open_msr=platform.open_msr, simulated=True)
        sysroot = platform.sysroot
        amd = False
        try:
            from pmutop.pmu.cpuid_decode import decode_identity

            amd = decode_identity(platform.cpuid_fn(cpus[0])).vendor == "AuthenticAMD"
        except (PmutopError, OSError, ImportError):
            pass
        perf = PerfPower(sysroot) if sysroot.is_host else None
        state = platform.msr_state(cpus[0])
        if not state.present:
            path = sysroot.path(f"dev/cpu/{cpus[0]}/msr")
            why = f"{path} does not exist" + (" (as root: `modprobe msr`)" if sysroot.is_host else "")
            return cls(cpus, sysroot=sysroot, open_msr=None, msr_why=why, amd=amd, perf=perf)
        return cls(cpus, sysroot=sysroot, open_msr=lambda c: platform.open_msr(c, writable=False), amd=amd, perf=perf)

    # -- what is there (pmutop info)

    def sources(self) -> list[SourceStatus]:
        out = [
            SourceStatus(
                "msr",
                self.msr_ok,
                "APERF/MPERF, THERM_STATUS, C-state residency, RAPL (read-only)"
                if self.msr_ok
                else self.msr_why or "not readable",
            )
        ]
        if self.simulated:
            out[0].detail = "SIMULATED: " + out[0].detail
            return out
        for src in (self.cpuidle, self.hwmon):
            if src is not None:
                ok, why = src.status(self.cpus) if isinstance(src, CpuIdle) else src.status()
                out.append(SourceStatus(src.name, ok, why))
        if self.powercap is not None:
            ok, why = self.powercap.status()
            out.append(SourceStatus("powercap", ok, why))
        if self.perf is not None:
            for pmu, ok, detail in self.perf.status():
                out.append(SourceStatus(f"perf:{pmu}", ok, detail))
        elif self.sysroot is not None:  # a captured sysroot: what its kernel offered, nothing opened
            pmus = perf_pmus(self.sysroot)
            for pmu in ("msr", "cstate_core", "cstate_pkg", "power"):
                detail = f"events {pmus[pmu]} (not opened: not this host)" if pmu in pmus else "not offered"
                out.append(SourceStatus(f"perf:{pmu}", False, detail))
        return out

    def measured_fields(self) -> set[str]:
        """Which of the table's power columns (pmutop.derive.power.SERIES) some source of this machine gives:
        known before the first interval, so a batch table prints its header at once."""
        given = {
            "msr": {"busy", "bzy_mhz", "temp_c", "pkg_watts"},  # APERF/MPERF, THERM_STATUS, RAPL
            "hwmon": {"temp_c"},
            "powercap": {"pkg_watts"},
            "perf:msr": {"busy", "bzy_mhz"},
            "perf:power": {"pkg_watts"},
        }
        fields: set[str] = set()
        for source in self.sources():
            if source.available:
                fields |= given.get(source.name, set())
        return fields

    # -- per interval, in the CPU's sampler thread

    def start(self, cpu: int) -> None:
        st = self._state[cpu]
        if self.msr_ok and self._open_msr is not None:
            try:
                st.dev = self._open_msr(cpu)
            except (PmutopError, OSError):
                st.dev = None
        if st.dev is not None:
            self._probe_msr(st)
        elif self.perf is not None:  # no MSR access: the kernel's perf PMUs, where it lets us open them
            st.perf_groups = self.perf.open(cpu, st.first)
            st.prev_perf = self.perf.read(st.perf_groups)
        if self.cpuidle is not None and self.read_idle_states:
            st.idle_states = self.cpuidle.states(cpu)
            st.prev_idle = self.cpuidle.read(st.idle_states)
        if self.hwmon is not None and self.sysroot is not None:
            core = core_of(self.sysroot, cpu)
            st.hwmon_core = self.hwmon.core.get((st.package, core)) if core is not None else None
        if st.first and self.powercap is not None:
            st.prev_powercap = self.powercap.read(st.package)

    def package_only(self, cpu: int) -> int | None:
        """After start(cpu): this CPU's package when sample() reads no source for it (its fields are then only
        `package` and an empty power_src, every interval), else None. The engine then skips sample()."""
        st = self._state[cpu]
        if st.dev is not None or st.perf_groups or st.hwmon_core or st.idle_states:
            return None
        if st.first and (
            (self.hwmon is not None and st.package in self.hwmon.package)
            or (self.powercap is not None and st.prev_powercap)
        ):
            return None
        return st.package

    def _try(self, st: _Cpu, address: int) -> int | None:
        assert st.dev is not None
        try:
            return st.dev.read(address)
        except (PmutopError, OSError):
            return None

    def _probe_msr(self, st: _Cpu) -> None:
        """Which registers answer (a missing one faults: EIO), and the first readings."""
        st.core_regs = {n: a for n, a in regs.CORE_CSTATE_MSRS.items() if self._try(st, a) is not None}
        st.has_therm = self._try(st, regs.IA32_THERM_STATUS) is not None
        target = self._try(st, regs.MSR_TEMPERATURE_TARGET)
        st.tjmax = regs.tjmax(target) if target is not None else regs.DEFAULT_TJMAX
        core = {"aperf": regs.IA32_APERF, "mperf": regs.IA32_MPERF, "tsc": regs.IA32_TIME_STAMP_COUNTER}
        core.update(st.core_regs)
        st.core_names = tuple(core)
        st.deep_names = st.core_names[3:]
        st.prev_core = [self._try(st, address) for address in core.values()]
        st.prev_gap = None in st.prev_core
        if st.first:
            unit_reg = regs.MSR_AMD_RAPL_POWER_UNIT if self.amd else regs.MSR_RAPL_POWER_UNIT
            unit = self._try(st, unit_reg)
            if unit is not None:
                st.energy_unit = regs.energy_unit_joules(unit)
                table = regs.AMD_ENERGY if self.amd else regs.INTEL_ENERGY
                for domain, address in table.items():
                    v = self._try(st, address)
                    if v is not None:
                        st.energy_regs[domain] = address
                        st.prev_energy[domain] = v & 0xFFFFFFFF
        addresses = list(core.values())
        if st.has_therm:
            st.therm_at = len(addresses)
            addresses.append(regs.IA32_THERM_STATUS)
        if st.first and not self.amd:  # AMD has no IA32_PACKAGE_THERM_STATUS (hwmon k10temp says)
            st.pkg_therm_at = len(addresses)
            addresses.append(regs.IA32_PACKAGE_THERM_STATUS)
        st.energy_at = tuple((domain, len(addresses) + k) for k, domain in enumerate(st.energy_regs))
        addresses += st.energy_regs.values()
        st.addresses = tuple(addresses)

    def msr_registers(self, cpu: int) -> tuple[MsrDevice, tuple[int, ...]] | None:
        """The msr device and the registers sample() reads for this CPU every interval (after start(cpu)),
        for whoever reads them for it (the native sampler thread of the CPU, pmutop.engine.native_samplers):
        sample() then takes their values. None where this CPU's values do not come from MSRs."""
        st = self._state[cpu]
        return (st.dev, st.addresses) if st.dev is not None and st.addresses else None

    def _read_msrs(self, st: _Cpu) -> tuple[list[int], int]:
        """One interval's msr_registers read here, in one read_many (a simulated CPU answers them at one instant):
        their values and which failed (bit j: register j)."""
        assert st.dev is not None
        values, failed = [], 0
        for j, v in enumerate(st.dev.read_many(st.addresses)):
            if v is None:
                failed |= 1 << j
            values.append(v or 0)
        return values, failed

    def sample(
        self, cpu: int, interval: float, tsc_hz: float | None, msr: tuple[list[int], int] | None = None
    ) -> dict[str, Any]:
        """Sample fields for this interval: busy, bzy_mhz, cstates, temp_c, throttle, package, and on the
        package's first CPU pkg_temp_c and energy_j; power_src names each value's source. `msr`: this
        interval's msr_registers(cpu) as another thread read them, with those that failed (bit j: register
        j); None: read here."""
        st = self._state[cpu]
        out: dict[str, Any] = {"package": st.package}
        src: dict[str, str] = {}
        if st.dev is not None:
            values, failed = msr if msr is not None else self._read_msrs(st)
            self._sample_msr(st, out, src, tsc_hz, values, failed)
        elif st.perf_groups and self.perf is not None:
            self._sample_perf(st, out, src, interval, tsc_hz)
        if "cstates" not in out and st.idle_states and self.cpuidle is not None and interval > 0:
            now = self.cpuidle.read(st.idle_states)
            out["cstates"] = {
                n: round(min(100.0, max(0.0, (now[n] - st.prev_idle[n]) / (interval * 1e4))), 3)
                for n in now
                if n in st.prev_idle
            }
            st.prev_idle = now
            src["cstates"] = "cpuidle"
        if "temp_c" not in out and st.hwmon_core and self.hwmon is not None:
            t = self.hwmon.read(st.hwmon_core)
            if t is not None:
                out["temp_c"], src["temp_c"] = t, "hwmon"
        if st.first:
            if "pkg_temp_c" not in out and self.hwmon is not None and st.package in self.hwmon.package:
                t = self.hwmon.read(self.hwmon.package[st.package])
                if t is not None:
                    out["pkg_temp_c"], src["pkg_temp_c"] = t, "hwmon"
            if "energy_j" not in out and self.powercap is not None and st.prev_powercap:
                now_uj = self.powercap.read(st.package)
                ranges = self.powercap.zones.get(st.package, {})
                out["energy_j"] = {
                    d: ((v - st.prev_powercap[d]) % ranges[d][1]) / 1e6
                    for d, v in now_uj.items()
                    if d in st.prev_powercap
                }
                st.prev_powercap = now_uj
                src["energy_j"] = "powercap"
        out["power_src"] = src
        return out

    def _sample_msr(
        self,
        st: _Cpu,
        out: dict[str, Any],
        src: dict[str, str],
        tsc_hz: float | None,
        values: list[int],
        failed: int,
    ) -> None:
        """The fields from one interval's msr_registers: `values`, of which those in `failed` did not answer
        (a core register then has no delta this interval or the next, as it has no reading to subtract)."""
        n = len(st.core_names)
        now: list[int | None]
        if failed or st.prev_gap:
            now = [None if failed >> j & 1 else values[j] for j in range(n)]
            d = [None if a is None or b is None else a - b for a, b in zip(now, st.prev_core, strict=True)]
            st.prev_gap = None in now
        else:  # every register answered, now and last time (the usual case)
            now = cast("list[int | None]", values[:n])
            d = list(map(operator.sub, now, st.prev_core))
        st.prev_core = now
        tag = self._tag
        aperf, mperf, tsc = d[0], d[1], d[2] or 0
        if aperf is not None and mperf is not None and tsc > 0:
            busy, mhz = regs.busy_and_mhz(aperf, mperf, tsc, tsc_hz)
            if busy is not None:
                out["busy"], src["busy"] = round(busy * 100, 3), tag
            if mhz is not None:
                out["bzy_mhz"], src["bzy_mhz"] = round(mhz, 1), tag
            if st.core_regs:
                names, deep = st.deep_names, d[3:]
                if None in deep:
                    names = tuple(name for name, v in zip(names, deep, strict=True) if v is not None)
                    deep = [v for v in deep if v is not None]
                shares = cast("list[int]", deep)  # none missing now
                # turbostat: C1 is what is left of the TSC after C0 (MPERF) and the deeper residencies.
                c1 = max(0, tsc - mperf - sum(shares))
                out["cstates"] = {name: _percent(v, tsc) for name, v in zip(("C1", *names), (c1, *shares), strict=True)}
                src["cstates"] = tag
        if st.therm_at >= 0 and not failed >> st.therm_at & 1 and st.tjmax is not None:
            raw = values[st.therm_at]
            t = regs.temperature_c(raw, st.tjmax)
            if t is not None:
                out["temp_c"], src["temp_c"] = t, tag
            out["throttle"], src["throttle"] = regs.THROTTLE[raw & regs.THROTTLE_BITS], tag
        if st.pkg_therm_at >= 0 and not failed >> st.pkg_therm_at & 1 and st.tjmax is not None:
            t = regs.temperature_c(values[st.pkg_therm_at], st.tjmax)
            if t is not None:
                out["pkg_temp_c"], src["pkg_temp_c"] = t, tag
        if st.energy_at:
            energy = {}
            for domain, j in st.energy_at:
                if failed >> j & 1:
                    continue
                v = values[j] & 0xFFFFFFFF
                energy[domain] = regs.energy_delta(st.prev_energy[domain], v) * st.energy_unit
                st.prev_energy[domain] = v
            out["energy_j"], src["energy_j"] = energy, tag

    def _sample_perf(
        self, st: _Cpu, out: dict[str, Any], src: dict[str, str], interval: float, tsc_hz: float | None
    ) -> None:
        assert self.perf is not None
        now = self.perf.read(st.perf_groups)
        d = {k: v - st.prev_perf[k] for k, v in now.items() if k in st.prev_perf}
        st.prev_perf = now
        tsc = d.get("tsc") or (tsc_hz * interval if tsc_hz else 0.0)
        hz = tsc_hz or (d["tsc"] / interval if d.get("tsc") and interval > 0 else None)
        if "aperf" in d and "mperf" in d and tsc > 0:
            busy, mhz = regs.busy_and_mhz(int(d["aperf"]), int(d["mperf"]), int(tsc), hz)
            if busy is not None:
                out["busy"], src["busy"] = round(busy * 100, 3), "perf:msr"
            if mhz is not None:
                out["bzy_mhz"], src["bzy_mhz"] = round(mhz, 1), "perf:msr"
        res = {f"C{k[1]}": v for k, v in d.items() if k.endswith("-residency")}
        if res and tsc > 0:
            if "C1" not in res and "mperf" in d:  # turbostat's C1: what C0 and the deeper states leave
                res = {"C1": max(0.0, tsc - d["mperf"] - sum(res.values())), **res}
            out["cstates"] = {n: round(min(100.0, 100 * v / tsc), 3) for n, v in res.items()}
            src["cstates"] = "perf:cstate_core"
        energy = {ENERGY_DOMAIN[k]: v for k, v in d.items() if k in ENERGY_DOMAIN}
        if energy:
            out["energy_j"], src["energy_j"] = energy, "perf:power"

    def close(self) -> None:
        if self.cpuidle is not None:
            self.cpuidle.close()
        for st in self._state.values():
            for group in st.perf_groups.values():
                group.close()
            st.perf_groups = {}
            if st.dev is not None and not self.simulated:
                st.dev.close()
            st.dev = None
