"""Which backend a run uses: the candidates in order, the first that can run here (`pmutop info` states it).

--backend auto tries msr (root, the msr device writable, an Intel PMU present, the counters free), then perf
with hardware events, then perf with the kernel's software events only (IPC and cache columns unavailable).
Nothing falls back to simulated numbers. --backend perf tries the two perf candidates only. A run that counts
processes (--tasks, --pid, -- COMMAND) may also use perf with no CPU-wide counters at all, where a user may
count their own processes but nothing CPU-wide (perf_event_paranoid >= 1, not root).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from pmutop.backends.facts import HostFacts
from pmutop.core.cpulist import format_cpu_list
from pmutop.core.errors import HardwareError, PmuInUseError, PmutopError, UsageError

DEMO_FIX = "`pmutop --demo` runs on the simulated PMU anywhere"
RESTORE_FIX = "`pmutop restore` puts back what a killed pmutop left (any run does it first)"


@dataclass
class BackendRequest:
    """What the user asked for (the command line's backend options)."""

    backend: str = "auto"  # auto, msr, perf or sim
    events: list[str] | None = None  # --events, as given
    perfmon_dir: str | None = None
    read: str | None = None  # rdpmc or msr (msr backend)
    user: bool = True
    kernel: bool = True
    force: bool = False  # take over counters another agent is using
    keep_nmi_watchdog: bool = False
    topdown: bool | None = None  # None: where it is free
    # The run counts processes (--tasks, --pid, -- COMMAND): perf's per-task counters are worth a run even
    # where its CPU-wide ones are refused (a user at perf_event_paranoid >= 1).
    per_task: bool = False


@dataclass
class BackendChoice:
    """A backend that can run (name set), or none (name None) with the reasons and the fixes."""

    name: str | None
    events: str | None = "hardware"  # hardware, or software (perf: the kernel's events only)
    read_method: str | None = None
    reasons: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    hardware_problem: str | None = None  # perf: why hardware events do not open
    counters_busy: bool = False  # no backend because another agent holds the counters
    failure: PmutopError | None = None  # a backend asked for by name that cannot run: the error as it is
    cpu_wide_problem: str | None = None  # perf: why no CPU-wide event opens (then per-task counters only)

    @property
    def software_only(self) -> bool:
        return self.events == "software"

    def to_dict(self) -> dict[str, object]:
        return {
            "backend": self.name,
            "events": self.events,
            "read_method": self.read_method,
            "reasons": self.reasons,
            "fixes": self.fixes,
        }

    def after_leftovers(self, leftovers: list[str]) -> BackendChoice:
        """This choice, saying first what runs that ended without restoring left behind (one line each)."""
        if not leftovers:
            return self
        return replace(self, reasons=[*leftovers, *self.reasons], fixes=[RESTORE_FIX, *self.fixes])

    def require(self) -> BackendChoice:
        """This choice when a backend can run; else the error the run stops with."""
        if self.name is not None:
            return self
        if self.failure is not None:
            raise self.failure
        fix = self.fixes[0] if self.fixes else ""
        message = "no backend can run here: " + "; ".join(self.reasons) + (f" (fix: {fix})" if fix else "")
        raise PmuInUseError(message) if self.counters_busy else HardwareError(message)


def msr_problems(facts: HostFacts, force: bool = False) -> tuple[list[str], list[str]]:
    """Why the msr backend cannot run (empty when it can), and the fixes."""
    reasons: list[str] = []
    fixes: list[str] = []
    vendor, version = facts.vendor, facts.pmu_version
    if vendor is None or version is None:
        reasons.append("CPUID could not be read" + (f": {facts.cpuid_error}" if facts.cpuid_error else ""))
        fixes.append("load the cpuid module (`modprobe cpuid`) or run on the host itself")
    elif vendor != "GenuineIntel":
        reasons.append(f"the msr backend programs Intel PMUs; this CPU is {vendor}")
        fixes.append("use `pmutop --demo` to see the interface")
    elif version == 0:
        if facts.hypervisor:
            reasons.append("this is a VM whose hypervisor exposes no PMU (CPUID.0AH version 0)")
            fixes.append("enable the virtual PMU in the hypervisor (e.g. QEMU/KVM `-cpu host,pmu=on`)")
        else:
            reasons.append("the CPU reports no architectural PMU (CPUID.0AH version 0)")
    elif version < 2:
        reasons.append(f"perfmon v{version} has no global control registers; pmutop needs v2+")
    msr = facts.msr
    if not msr.writable and not reasons:  # the msr device matters only where the msr backend could run
        reasons.append(f"msr device: {msr.problem}")
        if not msr.present:
            fixes.append("`sudo modprobe msr`")
        elif not facts.root:
            fixes.append("run as root: `sudo pmutop`")
    busy = _busy(facts, force)
    if busy and not reasons:
        reasons.append(f"counters in use: {busy[0]}")
        fixes.append("stop the other tool, or pass --force to take over")
    return reasons, fixes


def _busy(facts: HostFacts, force: bool) -> list[str]:
    return [] if force else facts.counters_in_use.busy  # --force: take the counters over with msr


def _msr(facts: HostFacts) -> BackendChoice:
    """The msr backend, and how it reads the counters."""
    notes: list[str] = []
    sysfs = facts.rdpmc_sysfs
    probe = facts.rdpmc_probe
    if facts.sysroot != "/":
        method = "msr"
        notes.append("CPUs of a sysroot are read through their msr files")
    elif probe is not None and probe.ok:
        method = "rdpmc"
    elif "0" in sysfs.values():
        method = "msr"
        notes.append("user-space rdpmc is disabled (rdpmc sysfs = 0); counters are read through the msr files")
    elif "1" in sysfs.values():
        method = "rdpmc"
        notes.append("rdpmc sysfs is 1: pmutop sets it to 2 for the run and back to 1 on exit")
    else:
        method = "msr"
        detail = probe.detail if probe is not None else "not run"
        notes.append(f"rdpmc probe failed ({detail}); counters are read through msr files")
    if facts.nmi_watchdog == 1:
        notes.append("the NMI watchdog owns a counter: pmutop pauses it for the run and restores it")
    return BackendChoice("msr", "hardware", method, notes, hardware_problem=facts.perf.hardware_problem)


def _perf_hardware(facts: HostFacts, msr_reason: str) -> BackendChoice | None:
    if not facts.perf.hardware_ok:
        return None
    reasons = [f"msr backend unavailable: {msr_reason}", "perf hardware events open"]
    return BackendChoice("perf", "hardware", "read()", reasons, hardware_problem=facts.perf.hardware_problem)


def _perf_software(facts: HostFacts, msr_reason: str) -> BackendChoice | None:
    if not facts.perf.software_ok:
        return None
    reasons = [
        f"msr backend unavailable: {msr_reason}",
        f"hardware events unavailable: {facts.perf.hardware_problem}",
        "IPC and cache columns are unavailable: pmutop shows kernel software events "
        "(context switches, migrations, page faults) and utilisation from the kernel's CPU times",
    ]
    fixes = [
        "for IPC and cache metrics give the VM a virtual PMU (e.g. QEMU/KVM `-cpu host,pmu=on`)"
        if facts.hypervisor
        else "the CPU exposes no hardware events to perf here",
        DEMO_FIX,
    ]
    return BackendChoice("perf", "software", "read()", reasons, fixes, hardware_problem=facts.perf.hardware_problem)


def _perf_per_task(facts: HostFacts, msr_reason: str) -> BackendChoice | None:
    """perf without CPU-wide counters (a user perf_event_paranoid keeps from them): the processes the user may
    count, with the CPU table's utilisation from the kernel's per-CPU times."""
    perf = facts.perf
    if not perf.checked or perf.software_ok or not perf.task_ok:
        return None
    problem = str(perf.software_problem)
    why = problem.partition(": ")[2] or problem  # not the probe's own event and CPU ("context-switches on cpu 0")
    reasons = [
        f"msr backend unavailable: {msr_reason}",
        f"CPU-wide counters unavailable: {why}",
        "per-task counters open: the processes this user may count are counted",
    ]
    return BackendChoice("perf", "none", "read()", reasons, cpu_wide_problem=why)


def _auto(facts: HostFacts, force: bool, per_task: bool = False) -> BackendChoice:
    reasons, fixes = msr_problems(facts, force)
    if not reasons:
        return _msr(facts)
    for candidate in (_perf_hardware, _perf_software, *((_perf_per_task,) if per_task else ())):
        choice = candidate(facts, reasons[0])
        if choice is not None:
            return choice
    if facts.perf.checked:
        reasons.append(f"perf: {facts.perf.software_problem or facts.perf.hardware_problem}")
    return BackendChoice(None, None, None, reasons, [*fixes, DEMO_FIX], counters_busy=bool(_busy(facts, force)))


def _perf(facts: HostFacts, per_task: bool = False) -> BackendChoice:
    perf = facts.perf
    if not perf.checked:
        failure: PmutopError = UsageError(
            "--backend perf counts this host's CPUs; it cannot be combined with --sysroot"
        )
        return BackendChoice(None, None, failure=failure)
    for candidate in (_perf_hardware, _perf_software, *((_perf_per_task,) if per_task else ())):
        choice = candidate(facts, "not asked for (--backend perf)")
        if choice is not None:
            return choice
    return BackendChoice(None, None, failure=HardwareError(str(perf.software_problem)))


def choose(facts: HostFacts, request: BackendRequest) -> BackendChoice:
    """The backend `request` gets on a machine with these facts (--backend auto or perf; msr and sim are
    taken as asked and need no facts)."""
    if request.backend in ("msr", "sim"):
        return BackendChoice(request.backend)
    if request.backend == "perf":
        return _perf(facts, request.per_task)
    choice = _auto(facts, request.force, request.per_task)
    unreadable, readable = facts.unreadable_cpus, facts.readable_cpus
    if choice.name and unreadable and readable:
        # A plain run selects every online CPU and would stop at the first of these.
        choice.reasons.append(
            f"CPUID of cpu {format_cpu_list(unreadable)} cannot be read: pass --cores {format_cpu_list(readable)}"
        )
    return choice
