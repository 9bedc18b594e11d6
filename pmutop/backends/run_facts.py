"""What the header of every view says about a run, read once after the backend is prepared."""

from __future__ import annotations

import socket

from pmutop.backends.base import Backend
from pmutop.core.run_description import RunInfo
from pmutop.hw.cpus import describe_cpus
from pmutop.hw.platform import Platform


def collect(platform: Platform, backend: Backend, cpus: list[int], hostname: str | None = None) -> RunInfo:
    """After the backend is prepared: everything the header needs, read once."""
    survey = describe_cpus(platform, cpus, same_identity=True)
    ident = survey.get(cpus[0]).identity
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
            core_type = survey.get(cpu).core_type
            if core_type is not None:
                core_types[cpu] = core_type.short
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
        watchdog_paused=backend.watchdog_paused,
        topdown_off=backend.topdown_off,
        hardware_problem=backend.hardware_problem if backend.software_only else None,
        cpu_wide_problem=getattr(backend, "cpu_wide_problem", None),
    )
