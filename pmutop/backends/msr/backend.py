"""The msr backend: program the core PMU through MSRs, read it with rdpmc (or MSRs), put it back.

This module is the Backend: per CPU, check the PMU, save every register the run will write and refuse if
someone else is using it (SDM vol. 3 "Architectural Performance Monitoring", reference section 8); plan the
counters (and top-down); choose the read method; pause the NMI watchdog. The per-CPU programming and reading
the samplers do is pmutop.backends.msr.counters; the way back, pmutop.backends.msr.restore.
"""

from __future__ import annotations

import contextlib

from pmutop.backends.base import Backend, EventResolver, resolve_for_cpu
from pmutop.backends.msr.counters import SLOTS_FIXED, CpuSetup, MsrCpuCounters
from pmutop.core.clock import Clock
from pmutop.core.cpulist import format_cpu_list
from pmutop.core.errors import HardwareError, PmuInUseError, UsageError
from pmutop.core.undo import UndoLog, setting_undo
from pmutop.hw import shim
from pmutop.hw.platform import NMI_WATCHDOG, RDPMC_SYSFS, Platform
from pmutop.pmu import registers, topdown_plan
from pmutop.pmu.cpuid_decode import CORE_TYPE_CORE, PerfmonInfo, decode_core_type, decode_identity, decode_perfmon
from pmutop.pmu.events import ARCH_EVENTS, DEFAULT_EVENTS, EventSpec
from pmutop.pmu.perfmon import PerfmonTables
from pmutop.pmu.plan import plan_counters
from pmutop.pmu.usage import find_foreign_use


class MsrBackend(Backend):
    """Intel core PMU through MSR files (real, a sysroot snapshot, or the simulator)."""

    name = "msr"

    def __init__(
        self,
        platform: Platform,
        clock: Clock,
        events: list[EventSpec] | None = None,
        *,
        read_method: str | None = None,
        user: bool = True,
        kernel: bool = True,
        force: bool = False,
        keep_nmi_watchdog: bool = False,
        resolver: EventResolver | None = None,
        topdown: bool | None = None,
        tables: PerfmonTables | None = None,
    ) -> None:
        """`topdown`: False: no top-down; None: where it costs no general counter (PERF_METRICS); True: also
        the formula and E-core methods (pmutop.pmu.topdown_plan), whose events rotate with the others.
        `tables`: Intel's perfmon tables for those methods' events."""
        super().__init__(platform, clock, events, user=user, kernel=kernel, resolver=resolver)
        self.topdown = topdown
        self.tables = tables
        self._td_plans: dict[int, topdown_plan.TopdownPlan] = {}
        self.requested_read = read_method
        self.force = force
        self.keep_nmi_watchdog = keep_nmi_watchdog
        self.setups: dict[int, CpuSetup] = {}
        self._counters: dict[int, MsrCpuCounters] = {}
        self.read_method = read_method or ("rdpmc" if platform.rdpmc_possible() else "msr")

    # -- preparation: everything here reads, except the watchdog and rdpmc settings (undo recorded first)

    def prepare(self, cpus: list[int], undo: UndoLog) -> None:
        if self.requested_read == "rdpmc" and not self.platform.rdpmc_possible():
            raise UsageError(
                f"--read rdpmc: rdpmc cannot be used for the CPUs of {self.platform.label()}; use --read msr"
            )
        perfmons = {cpu: self._check_cpu(cpu) for cpu in cpus}
        # First in, so it runs last: after every CPU's restore, which writes through these files.
        undo.push("msr files", self._close_devices)
        for cpu in cpus:
            dev = self.platform.open_msr(cpu, writable=True)
            requested = resolve_for_cpu(self.platform, cpu, self.events, self.resolver)
            setup = CpuSetup(cpu, perfmons[cpu], plan_counters(perfmons[cpu], requested, cpu=cpu), dev, False, {})
            self.setups[cpu] = setup
            setup.full_width_writes = self._full_width_writes(setup)
            if self.topdown is not False:
                setup.topdown_fields = self._perf_metrics_fields(setup)
                if not setup.topdown_fields:
                    extra = self._topdown_events(setup, requested)
                    if extra:
                        setup.plan = plan_counters(
                            perfmons[cpu], self._with_defaults(setup, requested) + extra, cpu=cpu
                        )
        self._note_dropped()

        watchdog = self.platform.read_setting(NMI_WATCHDOG) or "0"
        watchdog_on = watchdog != "0"
        if watchdog_on and self.keep_nmi_watchdog:
            raise PmuInUseError(
                f"the NMI watchdog is on (/{NMI_WATCHDOG} = {watchdog}) and owns a PMU counter; "
                "drop --keep-nmi-watchdog to let pmutop pause it for the run"
            )
        for cpu in cpus:
            self._inspect(cpu, tolerate_watchdog=watchdog_on)
        if watchdog_on:
            self._disable_watchdog(watchdog, undo)
            for cpu in cpus:  # the baseline to restore is the PMU without the watchdog's counter
                self._inspect(cpu, tolerate_watchdog=True)
        else:
            self._keep_inherited(NMI_WATCHDOG, watchdog, undo)
        self.read_method = self._choose_read_method(cpus, undo)
        for cpu in cpus:
            counters = MsrCpuCounters(
                self.setups[cpu],
                platform=self.platform,
                clock=self.clock,
                read_method=self.read_method,
                user=self.user,
                kernel=self.kernel,
            )
            self._counters[cpu] = counters
            td = self._td_plans.get(cpu)
            if td is not None and not counters.topdown_method:
                counters.topdown_method = td.method
        # Saved in the state file before the first register is written (at start).
        undo.journal.record_cpus([c.record() for c in self._counters.values()])
        for cpu, counters in self._counters.items():
            undo.push(f"cpu {cpu} PMU registers", counters.restore)

    def _close_devices(self) -> None:
        """Close every CPU's msr file (the engine stopped its samplers before the undo runs)."""
        for setup in self.setups.values():
            setup.dev.close()

    def _change_setting(self, rel: str, original: str, new: str, undo: UndoLog) -> None:
        """Write a machine-wide setting, with its undo recorded (in memory and in the state file) first."""
        undo.journal.record_setting(rel, original, new)
        undo.push(
            f"/{rel}",
            setting_undo(self.platform.read_setting, self.platform.write_setting, undo.journal, rel, original, new),
        )
        self.platform.write_setting(rel, new)

    def _keep_inherited(self, rel: str, now: str, undo: UndoLog) -> None:
        """Another running pmutop changed this setting and will put it back when it ends; if it ends
        before us, we are the one to do it (so it is not put back while we still count)."""
        original = undo.journal.inherited_setting(rel)
        if original is not None and original != now:
            undo.journal.record_setting(rel, original, now)
            undo.push(
                f"/{rel}",
                setting_undo(self.platform.read_setting, self.platform.write_setting, undo.journal, rel, original, now),
            )

    def counters(self, cpu: int) -> MsrCpuCounters:
        return self._counters[cpu]

    def topdown_method(self, cpu: int) -> str | None:
        """The method "perf_metrics" where this backend reads PERF_METRICS on `cpu` (the formula and E-core methods are
        plain events: whoever planned them sets the counters' topdown_method)."""
        counters = self._counters.get(cpu)
        return None if counters is None else counters.topdown_method

    def _check_cpu(self, cpu: int) -> PerfmonInfo:
        cpuid = self.platform.cpuid_fn(cpu)
        ident = decode_identity(cpuid)
        if ident.vendor != "GenuineIntel":
            raise HardwareError(
                f"cpu {cpu}: the msr backend programs Intel PMUs; this CPU is {ident.vendor} (use --backend perf)"
            )
        pm = decode_perfmon(cpuid)
        if pm.version == 0:
            vm = " (a VM whose hypervisor exposes no PMU: enable its virtual PMU)" if ident.hypervisor else ""
            raise HardwareError(f"cpu {cpu}: no architectural PMU (CPUID.0AH version 0){vm}")
        if pm.version < 2:
            raise HardwareError(
                f"cpu {cpu}: architectural perfmon v{pm.version} has no global control registers; pmutop needs v2+"
            )
        state = self.platform.msr_state(cpu)
        if not state.writable:
            raise HardwareError(f"cpu {cpu}: msr backend unavailable: {state.problem}")
        return pm

    def _note_dropped(self) -> None:
        dropped: dict[tuple[str, str], list[int]] = {}
        for cpu, setup in self.setups.items():
            for name, reason in setup.plan.dropped:
                dropped.setdefault((name, reason), []).append(cpu)
        for (name, reason), cpus in dropped.items():
            self.notices.append(f"not counting {name} on cpu {format_cpu_list(cpus)}: {reason}")

    def _inspect(self, cpu: int, *, tolerate_watchdog: bool) -> None:
        """Read and keep every register we will write; refuse (unless --force) if another agent uses the PMU."""
        setup = self.setups[cpu]
        pm, dev = setup.perfmon, setup.dev
        rmap = pm.registers
        regs = {rmap.evtsel(i): dev.read(rmap.evtsel(i)) for i in pm.gp_indexes}
        regs[registers.IA32_FIXED_CTR_CTRL] = dev.read(registers.IA32_FIXED_CTR_CTRL)
        if pm.version >= 4:
            regs[registers.IA32_PERF_GLOBAL_INUSE] = dev.read(registers.IA32_PERF_GLOBAL_INUSE)
        saved = {
            registers.IA32_PERF_GLOBAL_CTRL: dev.read(registers.IA32_PERF_GLOBAL_CTRL),
            registers.IA32_FIXED_CTR_CTRL: regs[registers.IA32_FIXED_CTR_CTRL],
        }
        for i in sorted({p.index for g in setup.plan.gp_groups for p in g}):
            saved[rmap.evtsel(i)] = regs[rmap.evtsel(i)]
            # Read and written at one address (the same counter on hardware; one cell in a snapshot).
            saved[setup.counter_address(i)] = dev.read(setup.counter_address(i))
        for i in setup.fixed_indexes:
            saved[rmap.fixed_ctr(i)] = dev.read(rmap.fixed_ctr(i))
        if setup.topdown_fields:
            saved[registers.MSR_PERF_METRICS] = dev.read(registers.MSR_PERF_METRICS)
        setup.saved = saved
        found = find_foreign_use(pm, regs, tolerate_watchdog=tolerate_watchdog)
        if found:
            address, detail = found[0]
            if not self.force:
                raise PmuInUseError(
                    f"cpu {cpu}: {registers.msr_name(address)} is in use ({detail}); another tool or perf owns "
                    "the counters: stop it, use --backend perf, or pass --force to take over"
                )
            self.notices.append(f"cpu {cpu}: taking over {registers.msr_name(address)} ({detail}) because of --force")

    def _disable_watchdog(self, original: str, undo: UndoLog) -> None:
        try:
            self._change_setting(NMI_WATCHDOG, original, "0", undo)
        except OSError as e:
            raise HardwareError(
                f"the NMI watchdog is on and owns a PMU counter, and pausing it failed "
                f"(/{NMI_WATCHDOG}: {e.strerror or e}); use --backend perf"
            ) from None
        self.watchdog_paused = True
        self.notices.append(
            f"NMI watchdog paused for this run (it owns a PMU counter); /{NMI_WATCHDOG} is set back to "
            f"{original} on exit"
        )

    def _full_width_writes(self, setup: CpuSetup) -> bool:
        ident = decode_identity(self.platform.cpuid_fn(setup.cpu))
        if not ident.pdcm:
            return False
        try:
            return bool(setup.dev.read(registers.IA32_PERF_CAPABILITIES) & registers.PERF_CAP_FW_WRITE)
        except HardwareError:
            return False

    def _topdown_events(self, setup: CpuSetup, requested: list[EventSpec] | None) -> list[EventSpec]:
        """Where there is no PERF_METRICS: the events of the formula or E-core method for this core type, if
        it is on (--topdown: they cost general counters). Notes why not, once per reason."""
        cpuid = self.platform.cpuid_fn(setup.cpu)
        ident = decode_identity(cpuid)
        caps = None
        if ident.pdcm:
            with contextlib.suppress(HardwareError):
                caps = setup.dev.read(registers.IA32_PERF_CAPABILITIES)
        plan = topdown_plan.plan_topdown(
            ident,
            decode_core_type(cpuid),
            setup.perfmon,
            perf_capabilities=caps,
            smt=topdown_plan.smt_from_sysfs(self.platform.read_setting, setup.cpu),
            tables=self.tables,
            backend="msr",
        )
        if not plan.available or not plan.enabled(self.topdown):
            self.topdown_off = self.topdown_off or plan.off_unless_asked(self.topdown)
            if self.topdown and plan.detail:
                self._note_once(f"top-down not measured on cpu {setup.cpu}: {plan.detail}")
            return []
        self._td_plans[setup.cpu] = plan
        if plan.approximate:
            self._note_once(f"top-down on cpu {setup.cpu}: {plan.detail}")
        counted = {e.key for e in requested or []} | {"instructions", "cycles", "ref_cycles"}
        return [e for e in plan.events if e.key not in counted]

    def _with_defaults(self, setup: CpuSetup, requested: list[EventSpec] | None) -> list[EventSpec]:
        """What the user asked for, or the default events this CPU can count (so adding top-down's events to
        them keeps the usual columns; they all take turns on the general counters)."""
        if requested is not None:
            return list(requested)
        return [ARCH_EVENTS[n] for n in DEFAULT_EVENTS if n not in setup.perfmon.unavailable_events]

    def _note_once(self, message: str) -> None:
        if message not in self.notices:
            self.notices.append(message)

    def _perf_metrics_fields(self, setup: CpuSetup) -> int:
        """PERF_METRICS bytes this CPU fills (4 or 8), or 0: it needs IA32_PERF_CAPABILITIES[15] (read only when
        CPUID.1:ECX[15] PDCM says the MSR exists, as Linux and PCM check), fixed counters 0-3 (readers sweep
        0..3) and a big core (Linux adl_update_topdown_event counts nothing on hybrid E-cores)."""
        cpuid = self.platform.cpuid_fn(setup.cpu)
        ident = decode_identity(cpuid)
        core = decode_core_type(cpuid)
        if not ident.pdcm or (core is not None and core.code != CORE_TYPE_CORE):
            return 0
        pm, regs = setup.perfmon, setup.perfmon.registers
        # Hybrid P-cores without CPUID 0x23 report the counters common to both core types in leaf 0xA; Linux
        # gives them fixed counter 3 anyway (intel_pmu_init, Alder Lake: num_counters_fixed + 1 for cpu_core),
        # as pmutop.pmu.topdown_plan does.
        hybrid_p = core is not None and pm.leaf23 is None and pm.version >= 5
        fixed = pm.fixed_mask | ((1 << (SLOTS_FIXED + 1)) - 1 if hybrid_p and pm.fixed_mask & 0x7 == 0x7 else 0)
        if fixed & 0xF != 0xF or regs.max_fixed <= SLOTS_FIXED:
            return 0
        try:
            caps = setup.dev.read(registers.IA32_PERF_CAPABILITIES)
        except HardwareError:
            return 0
        if not caps & registers.PERF_CAP_PERF_METRICS:
            return 0
        return registers.perf_metrics_fields(ident.family, ident.model)

    def _choose_read_method(self, cpus: list[int], undo: UndoLog) -> str:
        explicit = self.requested_read == "rdpmc"
        if self.requested_read != "msr" and self.platform.shim_missing():
            if explicit:
                raise HardwareError(f"--read rdpmc: {shim.BUILD_HINT}")
            self.notices.append(f"reading counters through the MSR files: {shim.BUILD_HINT}")  # said once, here
            return "msr"
        if self.requested_read == "msr" or not self.platform.rdpmc_possible():
            return "msr"
        settings = {rel: self.platform.read_setting(rel) for rel in RDPMC_SYSFS}
        settings = {rel: v for rel, v in settings.items() if v is not None}

        def fall_back(why: str) -> str:
            if explicit:
                raise HardwareError(f"--read rdpmc: {why}")
            self.notices.append(f"reading counters through the MSR files: {why}")
            return "msr"

        if any(v == "0" for v in settings.values()):
            return fall_back("user-space rdpmc is disabled (rdpmc sysfs = 0)")
        to_change = [rel for rel, v in settings.items() if v == "1"]
        for rel, v in settings.items():
            if v == "2":
                self._keep_inherited(rel, v, undo)
        if to_change:
            if not self.platform.is_root():
                return fall_back("the rdpmc sysfs setting is 1 and only root can set it to 2")
            try:
                for rel in to_change:
                    self._change_setting(rel, "1", "2", undo)
            except OSError as e:
                return fall_back(f"cannot set /{to_change[0]} to 2: {e.strerror or e}")
            self.notices.append(f"set /{to_change[0]} to 2 for this run (was 1; restored on exit)")
        for cpu in cpus:
            setup = self.setups[cpu]
            # Exactly the read the sampler will do (with PERF_METRICS where it reads it: that rdpmc faults
            # where the CPU has none).
            if setup.topdown_fields:
                probe = self.platform.probe_rdpmc(cpu, setup.n_fixed_read, setup.plan.n_gp_read, metrics=True)
            else:
                probe = self.platform.probe_rdpmc(cpu, setup.n_fixed_read, setup.plan.n_gp_read)
            if not probe.ok:
                if to_change:  # not needed after all: put it back now rather than at exit
                    self.notices.pop()
                    for rel in to_change:
                        with contextlib.suppress(OSError):  # else the undo tries again at exit
                            self.platform.write_setting(rel, "1")
                return fall_back(probe.detail)
        return "rdpmc"

    def describe(self) -> dict[str, object]:
        any_setup = next(iter(self.setups.values()), None)
        facts: dict[str, object] = {"backend": self.name, "read_method": self.read_method}
        if any_setup is not None:
            pm = any_setup.perfmon
            facts.update(
                pmu_version=pm.version,
                gp_counters=pm.gp_counters,
                gp_width=pm.gp_width,
                fixed_counters=pm.fixed_counters,
                fixed_width=pm.fixed_width,
            )
        return facts
