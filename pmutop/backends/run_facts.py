"""What the header of every view says about a run, read once after the backend is prepared."""

from __future__ import annotations

import socket

from pmutop.backends.base import Backend
from pmutop.core.run_description import RunInfo
from pmutop.hw.platform import Platform
from pmutop.pmu.cpuid_decode import decode_core_type, decode_identity


def collect(platform: Platform, backend: Backend, cpus: list[int], hostname: str | None = None) -> RunInfo:
    """After the backend is prepared: everything the header needs, read once."""
    cpuid = platform.cpuid_fn(cpus[0])
    ident = decode_identity(cpuid)
    facts = backend.describe()
    if "pmu_version" in facts:
        pmu = (
            f"PMU v{facts['pmu_version']}: {facts['gp_counters']} GP × {facts['gp_width']} bit"
            f" + {facts['fixed_counters']} fixed × {facts['fixed_width']} bit"
        )
    else:
        pmu = str(facts.get("pmu", "PMU"))
    core_types: dict[int, str] = {}
    if ident.hybrid:
        for cpu in cpus:
            ct = decode_core_type(platform.cpuid_fn(cpu))
            if ct is not None:
                core_types[cpu] = ct.short
    model = ident.brand or f"{ident.vendor} family {ident.family:#x} model {ident.model:#x}"
    return RunInfo(
        hostname=hostname or socket.gethostname(),
        cpu_model=model,
        uarch=ident.uarch,
        pmu=pmu,
        backend=backend.name,
        read_method=backend.read_method,
        simulated=platform.simulated,
        hypervisor=ident.hypervisor,
        cpus=list(cpus),
        core_types=core_types,
        notices=list(backend.notices),
        hardware_problem=getattr(backend, "hardware_problem", None)
        if getattr(backend, "software_only", False)
        else None,
    )
