"""What a machine (or sysroot) offers the backends: the facts the backend choice reads, gathered cheaply.

`probe_host` reads only what pmutop.backends.choose needs (CPUID, the msr device, the counters' control
registers, whether perf events open, a few settings). The rdpmc fork-probe is heavier and only `pmutop info`
runs it (`probe_rdpmc`); the rest of what `pmutop info` shows is gathered there.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from pmutop.core.cpulist import parse_cpu_list
from pmutop.core.errors import HardwareError
from pmutop.hw import shim
from pmutop.hw.cpus import CpuSurvey, describe_cpus
from pmutop.hw.msr import MsrDevice
from pmutop.hw.platform import NMI_WATCHDOG, RDPMC_SYSFS, HostPlatform, MsrDeviceState, Platform
from pmutop.pmu import registers
from pmutop.pmu.cpuid_decode import PerfmonInfo
from pmutop.pmu.plan import plan_counters
from pmutop.pmu.uarch import microarchitecture
from pmutop.pmu.usage import find_foreign_use


@dataclass
class CounterUse:
    """Whether another agent has the PMU counters programmed (read-only look at the control registers)."""

    checked: bool
    busy: list[str] = field(default_factory=list)  # one line per register in use
    detail: str | None = None  # why not checked

    def to_dict(self) -> dict[str, Any]:
        return {"checked": True, "busy": self.busy} if self.checked else {"checked": False, "detail": self.detail}


@dataclass
class PerfFacts:
    """Can perf_event_open count hardware / software events CPU-wide here? (This host's CPUs only.)"""

    checked: bool
    detail: str | None = None  # why not checked
    hardware_ok: bool = False
    hardware_problem: str | None = None
    software_ok: bool = False
    software_problem: str | None = None
    task_ok: bool = False  # per-task counters open (this process, user space): checked where software fails

    def to_dict(self) -> dict[str, Any]:
        if not self.checked:
            return {"checked": False, "detail": self.detail}
        return {
            "checked": True,
            "hardware_ok": self.hardware_ok,
            "hardware_problem": self.hardware_problem,
            "software_ok": self.software_ok,
            "software_problem": self.software_problem,
        }


@dataclass
class RdpmcProbeResult:
    ran: bool
    ok: bool
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {"ran": self.ran, "ok": self.ok, "detail": self.detail}


@dataclass
class HostFacts:
    """The facts the backend choice reads."""

    sysroot: str
    online_cpus: list[int]
    vendor: str | None  # from CPUID, else proc/cpuinfo
    pmu_version: int | None  # CPUID.0AH of the first readable CPU; None when no CPUID reads
    hypervisor: bool
    cpuid_error: str | None  # why the first online CPU's CPUID cannot be read, when none can
    readable_cpus: list[int]
    unreadable_cpus: list[int]
    msr: MsrDeviceState
    root: bool
    counters_in_use: CounterUse
    perf: PerfFacts
    rdpmc_sysfs: dict[str, str]
    nmi_watchdog: int | None
    rdpmc_probe: RdpmcProbeResult | None = None  # only `pmutop info` runs it
    cpus: CpuSurvey = field(default_factory=CpuSurvey)  # the CPUID decodes behind these facts
    cpuinfo_identity: dict[str, Any] | None = None  # proc/cpuinfo's, when no CPUID reads

    @classmethod
    def from_dict(cls, facts: dict[str, Any]) -> HostFacts:
        """The facts of a `pmutop info --json` document (keys it lacks read as absent)."""
        use = facts.get("counters_in_use") or {}
        perf = facts.get("perf") or {}
        probe = facts.get("rdpmc_probe")
        msr = facts["msr"]
        return cls(
            sysroot=facts["sysroot"],
            online_cpus=_cpus(facts.get("online_cpus")),
            vendor=facts.get("vendor"),
            pmu_version=facts.get("version"),
            hypervisor=bool(facts.get("hypervisor")),
            cpuid_error=facts.get("cpuid_error"),
            readable_cpus=_cpus(facts.get("cpuid_readable_cpus")),
            unreadable_cpus=_cpus(facts.get("cpuid_unreadable_cpus")),
            msr=MsrDeviceState(msr["present"], msr["writable"], msr["problem"]),
            root=bool(facts.get("root")),
            counters_in_use=CounterUse(bool(use.get("checked")), use.get("busy") or [], use.get("detail")),
            perf=PerfFacts(
                bool(perf.get("checked")),
                perf.get("detail"),
                bool(perf.get("hardware_ok")),
                perf.get("hardware_problem"),
                bool(perf.get("software_ok")),
                perf.get("software_problem"),
            ),
            rdpmc_sysfs=facts.get("rdpmc_sysfs") or {},
            nmi_watchdog=facts.get("nmi_watchdog"),
            rdpmc_probe=RdpmcProbeResult(probe.get("ran", True), bool(probe.get("ok")), probe.get("detail", "not run"))
            if probe
            else None,
        )


def _cpus(text: str | None) -> list[int]:
    return parse_cpu_list(text) if text else []


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def cpuinfo_identity(platform: Platform) -> dict[str, Any] | None:
    """Vendor/family/model from proc/cpuinfo, for sysroots that carry no CPUID device."""
    text = platform.read_setting("proc/cpuinfo")
    if not text:
        return None
    first: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if first:
                break
            continue
        key, _, value = line.partition(":")
        first[key.strip()] = value.strip()
    try:
        family, model, stepping = int(first["cpu family"]), int(first["model"]), int(first.get("stepping", "0"))
    except (KeyError, ValueError):
        return None
    vendor = first.get("vendor_id", "unknown")
    flags = first.get("flags", "").split()
    return {
        "vendor": vendor,
        "family": family,
        "model": model,
        "stepping": stepping,
        "brand": first.get("model name"),
        "hypervisor": "hypervisor" in flags,
        "hypervisor_vendor": None,
        "pdcm": "pdcm" in flags,
        "hybrid": "hybrid_cpu" in flags,
        "microarchitecture": microarchitecture(vendor, family, model, stepping),
        "source": "proc/cpuinfo",
    }


def _read_pmu_registers(dev: MsrDevice, pm: PerfmonInfo) -> dict[int, int]:
    rmap = pm.registers
    regs = {rmap.evtsel(i): dev.read(rmap.evtsel(i)) for i in pm.gp_indexes}
    regs[registers.IA32_FIXED_CTR_CTRL] = dev.read(registers.IA32_FIXED_CTR_CTRL)
    if pm.version >= 4:
        regs[registers.IA32_PERF_GLOBAL_INUSE] = dev.read(registers.IA32_PERF_GLOBAL_INUSE)
    return regs


def _counters_in_use(platform: Platform, survey: CpuSurvey, watchdog_on: bool) -> CounterUse:
    """Read-only look at the control registers (needs a readable msr device)."""
    busy: list[str] = []
    for cpu, described in survey.described.items():
        pm = described.perfmon
        if pm.version < 2:
            continue
        try:
            dev = platform.open_msr(cpu, writable=False)
        except HardwareError as e:
            return CounterUse(False, detail=str(e))
        try:
            regs = _read_pmu_registers(dev, pm)
        except HardwareError as e:
            return CounterUse(False, detail=str(e))
        finally:
            dev.close()
        for address, detail in find_foreign_use(pm, regs, tolerate_watchdog=watchdog_on):
            busy.append(f"cpu {cpu}: {registers.msr_name(address)} in use ({detail})")
    return CounterUse(True, busy)


def _perf_facts(platform: HostPlatform, cpu: int) -> PerfFacts:
    if not platform.sysroot.is_host:
        return PerfFacts(False, "perf counts this host's CPUs only")
    from pmutop.backends.perf import probe_hardware_events, probe_software_events, probe_task_events

    hardware = probe_hardware_events(cpu)
    software = probe_software_events(cpu)
    task_ok = software is None or probe_task_events()
    return PerfFacts(True, None, hardware is None, hardware, software is None, software, task_ok)


def probe_host(platform: HostPlatform) -> HostFacts:
    """The facts the backend choice needs (no rdpmc probe: see probe_rdpmc)."""
    cpus = platform.online_cpus()
    survey = describe_cpus(platform, cpus, same_identity=True)
    readable = survey.readable
    # The rest is said about the CPUs whose CPUID reads; the others are listed once.
    first = readable[0] if readable else cpus[0]
    identity = survey.identity
    fallback = None if identity is not None else cpuinfo_identity(platform)
    msr = platform.msr_state(first)
    watchdog = _int_or_none(platform.read_setting(NMI_WATCHDOG))
    if readable and msr.present and os.access(platform.sysroot.path(f"dev/cpu/{first}/msr"), os.R_OK):
        use = _counters_in_use(platform, survey, watchdog == 1)
    else:
        use = CounterUse(False, detail="the msr device is not readable")
    return HostFacts(
        sysroot=str(platform.sysroot),
        online_cpus=cpus,
        vendor=identity.vendor if identity is not None else (fallback or {}).get("vendor"),
        pmu_version=survey.described[first].perfmon.version if readable else None,
        hypervisor=identity.hypervisor if identity is not None else bool((fallback or {}).get("hypervisor")),
        cpuid_error=survey.unreadable.get(cpus[0]) if identity is None else None,
        readable_cpus=readable,
        unreadable_cpus=list(survey.unreadable),
        msr=msr,
        root=os.geteuid() == 0,
        counters_in_use=use,
        perf=_perf_facts(platform, first),
        rdpmc_sysfs={
            rel.split("/")[-2]: value for rel in RDPMC_SYSFS if (value := platform.read_setting(rel)) is not None
        },
        nmi_watchdog=watchdog,
        cpus=survey,
        cpuinfo_identity=fallback,
    )


def probe_rdpmc(platform: HostPlatform, facts: HostFacts) -> RdpmcProbeResult | None:
    """Fork-probe rdpmc on the first CPU of each core type with the reads a run would do (None: no CPUID)."""
    if not facts.readable_cpus:
        return None
    if not platform.rdpmc_possible():
        why = (
            "not this host's CPUs"
            if not platform.sysroot.is_host
            else (shim.BUILD_HINT if shim.lib is None else "not an x86 CPU")
        )
        return RdpmcProbeResult(False, False, f"not run: {why}")
    results = []
    seen: set[object] = set()
    for cpu, described in facts.cpus.described.items():
        kind = described.core_type.code if described.core_type else None
        if kind in seen:
            continue
        seen.add(kind)
        pm = described.perfmon
        if pm.version >= 2:
            plan = plan_counters(pm, None, cpu=cpu)
            r = platform.probe_rdpmc(cpu, plan.n_fixed_read, plan.n_gp_read)
            results.append((cpu, r.ok, r.detail))
        else:  # no PMU to read: still say whether the instruction itself is allowed
            r2 = shim.probe_rdpmc_ecx(cpu, 0)
            results.append((cpu, r2.ok, r2.detail))
    ok = all(r[1] for r in results)
    return RdpmcProbeResult(True, ok, "; ".join(r[2] for r in results))
