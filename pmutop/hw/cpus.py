"""What CPUID says about each CPU (identity, PMU, core type), read once for a list of CPUs.

One CPU whose CPUID cannot be read (no cpuid file, an empty one, a read error) does not stop the others:
it is listed with the reason, and each caller decides whether that is fatal.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pmutop.core.errors import HardwareError
from pmutop.hw.platform import Platform
from pmutop.pmu.cpuid_decode import (
    CoreType,
    CpuIdentity,
    PerfmonInfo,
    decode_core_type,
    decode_identity,
    decode_perfmon,
)


@dataclass(frozen=True)
class CpuDescription:
    cpu: int
    identity: CpuIdentity
    perfmon: PerfmonInfo
    core_type: CoreType | None


@dataclass
class CpuSurvey:
    """The CPUs whose CPUID reads (in the order asked) and, for the others, why not."""

    described: dict[int, CpuDescription] = field(default_factory=dict)
    unreadable: dict[int, str] = field(default_factory=dict)

    @property
    def readable(self) -> list[int]:
        return list(self.described)

    @property
    def identity(self) -> CpuIdentity | None:
        """The first readable CPU's identity (vendor, family and model are one per machine)."""
        first = next(iter(self.described.values()), None)
        return first.identity if first else None

    def get(self, cpu: int) -> CpuDescription:
        """The CPU's description, or the HardwareError that reading its CPUID gave."""
        if cpu in self.unreadable:
            raise HardwareError(self.unreadable[cpu])
        return self.described[cpu]


def describe_cpus(platform: Platform, cpus: list[int], *, same_identity: bool = False) -> CpuSurvey:
    """Decode every CPU of `cpus`. With same_identity the identity is decoded on the first readable CPU only
    and shared (it saves the CPUID reads of the identity leaves on every other CPU of a big host)."""
    survey = CpuSurvey()
    for cpu in cpus:
        try:
            cpuid = platform.cpuid_fn(cpu)
            shared = survey.identity if same_identity else None
            identity = shared if shared is not None else decode_identity(cpuid)
            survey.described[cpu] = CpuDescription(cpu, identity, decode_perfmon(cpuid), decode_core_type(cpuid))
        except HardwareError as e:
            survey.unreadable[cpu] = str(e)
    return survey
