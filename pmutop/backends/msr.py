"""The msr backend: program the core PMU through MSRs, read it with rdpmc (or MSRs), put it back.

Sequence per CPU (SDM vol. 3 "Architectural Performance Monitoring", reference section 8):
inspect and save every register we will write; refuse if someone else is using the PMU; then
GLOBAL_CTRL=0, zero our counters, clear their status bits (write-1-to-clear), write the event
selects and FIXED_CTR_CTRL, enable GLOBAL_CTRL. Restore in the reverse spirit, GLOBAL_CTRL last.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from pmutop.backends.base import Backend, CpuCounters, EventResolver, Reading, resolve_for_cpu
from pmutop.backends.msr_restore import CpuRecord, FixedRecord, GpRecord, RestoreResult, restore_cpu
from pmutop.clock import Clock
from pmutop.cpulist import format_cpu_list
from pmutop.errors import HardwareError, PmuInUseError, UsageError
from pmutop.hw.msr import MsrDevice
from pmutop.hw.platform import NMI_WATCHDOG, RDPMC_SYSFS, CounterReader, MsrCounterReader, Platform
from pmutop.pmu import registers as R
from pmutop.pmu.cpuid_decode import PerfmonInfo, decode_identity, decode_perfmon
from pmutop.pmu.events import EventSpec
from pmutop.pmu.plan import CounterPlan, plan_counters
from pmutop.pmu.usage import find_foreign_use
from pmutop.restore import UndoLog, setting_undo

U64 = (1 << 64) - 1
# No counter can tick faster than ~8 events per cycle at 6 GHz. An interval longer than
# 2^width / MAX_EVENTS_PER_S may hide a second wrap, which neither the value nor the status bit shows.
MAX_EVENTS_PER_S = 5e10


def shortest_wrap_s(width: int) -> float:
    return (1 << width) / MAX_EVENTS_PER_S


@dataclass
class CpuSetup:
    cpu: int
    perfmon: PerfmonInfo
    plan: CounterPlan
    dev: MsrDevice
    full_width_writes: bool
    saved: dict[int, int]

    def counter_address(self, i: int) -> int:
        """Where GP counter i is zeroed, saved and restored: the full-width alias when the PMU has one."""
        return self.perfmon.registers.counter(i, full_width=self.full_width_writes)


class MsrCpuCounters(CpuCounters):
    """One CPU programmed through its MSR device; used by that CPU's sampler thread.

    With more programmable events than counters, the plan's GP groups take turns: one group per
    interval. An event's value in an interval where its group was not programmed is its rate over the
    last interval it was counted, times this interval: an estimate, reported with the fraction of the
    last rotation's time it was counted.
    """

    def __init__(
        self,
        setup: CpuSetup,
        *,
        platform: Platform,
        clock: Clock,
        read_method: str,
        user: bool,
        kernel: bool,
    ) -> None:
        self.cpu = setup.cpu
        self.setup = setup
        self._platform = platform
        self._clock = clock
        self._read_method = read_method
        plan, pm = setup.plan, setup.perfmon
        fixed_idx = sorted({p.index for p in plan.fixed})
        gp_idx = sorted({p.index for g in plan.gp_groups for p in g})
        self._fixed_ctrl_ours = R.encode_fixed_ctrl(fixed_idx, user=user, kernel=kernel)
        regs = pm.registers
        self._group_evtsels = [
            {regs.evtsel(p.index): R.encode_evtsel(p.event.raw, user=user, kernel=kernel) for p in g}  # type: ignore[arg-type]
            for g in plan.gp_groups
        ] or [{}]
        self._ours_mask = R.global_ctrl_mask(gp_idx, fixed_idx)
        self._status_writable = R.status_reset_writable_mask(
            pm.version, pm.gp_counters, [i for i in range(R.MAX_FIXED_COUNTERS) if pm.fixed_mask >> i & 1]
        )
        all_widths = [pm.fixed_width] * bool(plan.fixed) + [pm.gp_width] * bool(gp_idx)
        self._wrap_ns = min(shortest_wrap_s(w) for w in all_widths) * 1e9 if all_widths else float("inf")
        self._min_width = min(all_widths, default=64)
        # Counters that can wrap within an interval are also read between the deadlines (accumulate).
        self.accumulate_period_ns = self.period_for_wrap(self._wrap_ns)
        self._active = 0
        self._rates: dict[str, float] = {}  # rotating event -> count per ns when last counted
        self._counted: dict[str, list[bool]] = {}  # rotating event -> counted? in each recent interval
        self.programmed: dict[int, int] = {}  # control register -> the value we wrote
        # FIXED_CTR_CTRL and GLOBAL_CTRL are shared with other agents: only these bits are ours.
        self._fixed_nibbles = sum(0xF << (4 * i) for i in fixed_idx)
        self._shared_masks = {R.IA32_FIXED_CTR_CTRL: self._fixed_nibbles, R.IA32_PERF_GLOBAL_CTRL: self._ours_mask}
        self.touched = False  # anything written at all: restore needed
        self.closed = False  # restored: the sampler must not write any more
        self._lock = threading.Lock()  # the sampler's writes vs. the restore (from another thread)
        self._reader: CounterReader | None = None
        self._prev: list[int] = []
        self._prev_tsc = 0
        self._prev_at = 0  # clock time of the last read()
        self._last_at = 0  # clock time of the last counter read (read or accumulate): for the wrap check
        self._acc: list[int] = []  # per placement: counts since the last read(), added up by accumulate()
        self._acc_ovf: dict[str, int] = {}  # event -> overflow bits seen since the last read()
        self._acc_suspect: str | None = None  # the first reason found since the last read()
        self._select_group(0)

    @property
    def keys(self) -> list[str]:
        return self.setup.plan.keys

    def _select_group(self, g: int) -> None:
        """Which placements the next reads cover (the fixed counters plus GP group g)."""
        plan, pm = self.setup.plan, self.setup.perfmon
        self._active = g
        self._placements = plan.fixed + (plan.gp_groups[g] if plan.gp_groups else ())
        self._widths = [pm.fixed_width if p.kind == "fixed" else pm.gp_width for p in self._placements]
        self._bits = [R.fixed_bit(p.index) if p.kind == "fixed" else R.gp_bit(p.index) for p in self._placements]
        self._positions = [plan.value_index(p) for p in self._placements]
        self._pending_ovf = [False] * len(self._placements)
        self._acc = [0] * len(self._placements)

    def _write(self, address: int, value: int) -> None:
        with self._lock:
            if self.closed:
                raise HardwareError(f"cpu {self.cpu}: the PMU was already restored")
            self.touched = True
            self.setup.dev.write(address, value)

    def program(self) -> None:
        s, dev = self.setup, self.setup.dev
        plan = s.plan
        gp_idx = sorted({p.index for g in plan.gp_groups for p in g})
        # Counters we do not use keep their FIXED_CTR_CTRL fields and GLOBAL_CTRL bits (they are free,
        # or --force kept them): only our own bits change.
        other_fixed = s.saved[R.IA32_FIXED_CTR_CTRL] & ~self._fixed_nibbles
        other_global = s.saved[R.IA32_PERF_GLOBAL_CTRL] & ~self._ours_mask
        self._write(R.IA32_PERF_GLOBAL_CTRL, other_global)
        regs = s.perfmon.registers
        for i in gp_idx:  # EN must be clear before the counter is written (SDM)
            self._write(regs.evtsel(i), 0)
            self._write(s.counter_address(i), 0)
        self._write(R.IA32_FIXED_CTR_CTRL, other_fixed)
        for i in sorted({p.index for p in plan.fixed}):
            self._write(regs.fixed_ctr(i), 0)
        status = dev.read(R.IA32_PERF_GLOBAL_STATUS)
        self._clear_status((status & self._ours_mask) | self._ours_mask)
        for address, value in self._group_evtsels[0].items():
            self._write(address, value)
        fixed_ctrl = other_fixed | self._fixed_ctrl_ours
        self._write(R.IA32_FIXED_CTR_CTRL, fixed_ctrl)
        self._write(R.IA32_PERF_GLOBAL_CTRL, other_global | self._ours_mask)
        self.programmed = {
            **self._group_evtsels[0],
            R.IA32_FIXED_CTR_CTRL: fixed_ctrl,
            R.IA32_PERF_GLOBAL_CTRL: other_global | self._ours_mask,
        }

    def record(self) -> CpuRecord:
        """What restore needs: saved values, and every value this run may write (kept in the state file)."""
        s, pm = self.setup, self.setup.perfmon
        gp = []
        regs = pm.registers
        for i in sorted({p.index for g in s.plan.gp_groups for p in g}):
            ours = {0} | {g[regs.evtsel(i)] for g in self._group_evtsels if regs.evtsel(i) in g}
            gp.append(
                GpRecord(
                    index=i,
                    evtsel=regs.evtsel(i),
                    counter=s.counter_address(i),
                    sign_extends=not s.full_width_writes,
                    width=pm.gp_width,
                    saved_evtsel=s.saved[regs.evtsel(i)],
                    saved_count=s.saved[s.counter_address(i)],
                    ours=tuple(sorted(ours)),
                )
            )
        fixed = [
            FixedRecord(
                index=i,
                counter=regs.fixed_ctr(i),
                width=pm.fixed_width,
                saved_count=s.saved[regs.fixed_ctr(i)],
                nibble=R.fixed_ctrl_nibble(self._fixed_ctrl_ours, i),
            )
            for i in sorted({p.index for p in s.plan.fixed})
        ]
        return CpuRecord(
            cpu=self.cpu,
            gp=tuple(gp),
            fixed=tuple(fixed),
            saved_fixed_ctrl=s.saved[R.IA32_FIXED_CTR_CTRL],
            saved_global_ctrl=s.saved[R.IA32_PERF_GLOBAL_CTRL],
            status_writable=self._status_writable,
        )

    def _clear_status(self, bits: int) -> None:
        # 0x390 is write-1-to-clear: write the bits to clear (writing 0 would clear nothing),
        # never a reserved bit (that faults).
        bits &= self._status_writable
        if bits:
            self._write(R.IA32_PERF_GLOBAL_STATUS_RESET, bits)

    def start(self) -> int:
        self.program()
        plan = self.setup.plan
        if self._read_method == "rdpmc":
            self._reader = self._platform.rdpmc_reader(self.cpu, plan.n_fixed_read, plan.n_gp_read)
        else:
            self._reader = MsrCounterReader(
                self.setup.dev, plan.n_fixed_read, plan.n_gp_read, regs=self.setup.perfmon.registers
            )
        self._prev_at = self._last_at = self._clock.now_ns()
        self._prev_tsc, values = self._reader.read()
        self._prev = [values[i] for i in self._positions]
        return self._prev_at

    def foreign_changes(self) -> list[str]:
        """Control registers that no longer hold what we programmed."""
        changed = []
        for address, ours in self.programmed.items():
            now = self.setup.dev.read(address)
            mask = self._shared_masks.get(address, -1)
            if now & mask != ours & mask:
                changed.append(f"{R.msr_name(address)} {ours & mask:#x} -> {now & mask:#x}")
        return changed

    def _collect(self) -> tuple[int, int]:
        """Read the active counters and GLOBAL_STATUS and add the deltas since the last read to the running
        totals (64-bit in effect, however narrow the counters). Returns the clock time and TSC of the read."""
        assert self._reader is not None, "start() first"
        at = self._clock.now_ns()
        tsc, values = self._reader.read()
        status = self.setup.dev.read(R.IA32_PERF_GLOBAL_STATUS)
        suspect: str | None = None
        acc, prev, pending = self._acc, self._prev, self._pending_ovf
        for n, p in enumerate(self._placements):
            new, old = values[self._positions[n]], prev[n]
            acc[n] += (new - old) & ((1 << self._widths[n]) - 1)
            prev[n] = new
            flagged = bool(status & self._bits[n])
            if flagged:
                self._acc_ovf[p.event.key] = self._acc_ovf.get(p.event.key, 0) + 1
            if new < old:
                if not (flagged or pending[n]) and suspect is None:
                    suspect = f"{p.event.key} counter went backwards without an overflow bit (reset by someone else?)"
                pending[n] = False
            elif flagged:
                # The counter wrapped after we read it: the next read shows the wrap.
                pending[n] = True
        if status & R.STATUS_CTR_FRZ:
            suspect = suspect or "counters were frozen (GLOBAL_STATUS bit 59 was set)"
        self._clear_status(status)
        if at - self._last_at > self._wrap_ns:  # two wraps could hide in there: the best explanation of all
            suspect = (
                f"the counters went unread for {(at - self._last_at) / 1e9:.3g} s, longer than the "
                f"{self._min_width}-bit counters' shortest wrap time ({self._wrap_ns / 1e9:.3g} s)"
                + ("; use a shorter --interval" if self.accumulate_period_ns is None else " (the sampler fell behind)")
            )
        self._last_at = at
        self._acc_suspect = self._acc_suspect or suspect
        return at, tsc

    def accumulate(self) -> int:
        """Add up the counts so far, so that narrow counters never wrap twice between two reads."""
        return self._collect()[0]

    def read(self) -> Reading:
        at, tsc = self._collect()
        counts = {p.event.key: self._acc[n] for n, p in enumerate(self._placements)}
        overflows, suspect = self._acc_ovf, self._acc_suspect
        self._acc = [0] * len(self._placements)
        self._acc_ovf, self._acc_suspect = {}, None
        changes = self.foreign_changes()  # once per interval, not per accumulate: it reads every control register
        if changes:
            suspect = f"PMU reprogrammed by another agent: {', '.join(changes)}"
        tsc_delta = (tsc - self._prev_tsc) & U64
        interval_ns = at - self._prev_at
        self._prev_tsc, self._prev_at = tsc, at
        estimated: dict[str, float] = {}
        if self.setup.plan.rotating:
            estimated = self._rotate(counts, interval_ns)
        return Reading(
            at_ns=at, tsc=tsc_delta, counts=counts, overflows=overflows, suspect=suspect, estimated=estimated
        )

    def _rotate(self, counts: dict[str, int], interval_ns: int) -> dict[str, float]:
        """Fill in the resting groups' estimates, then program the next group for the next interval."""
        groups = self.setup.plan.gp_groups
        active = {p.event.key for p in groups[self._active]}
        estimated: dict[str, float] = {}
        for g in groups:
            for p in g:
                key = p.event.key
                seen = self._counted.setdefault(key, [])
                seen.append(key in active)
                del seen[: -len(groups)]
                if key in active:
                    self._rates[key] = counts[key] / interval_ns if interval_ns > 0 else 0.0
                elif key in self._rates:
                    counts[key] = round(self._rates[key] * interval_ns)
                estimated[key] = sum(seen) / len(groups)
        nxt = (self._active + 1) % len(groups)
        for address, value in self._group_evtsels[nxt].items():
            if self.programmed.get(address) != value:
                self._write(address, 0)  # EN off before the event changes (SDM)
                self._write(address, value)
                self.programmed[address] = value
        # The fixed counters count on: they keep the baseline of the read (nothing they count meanwhile is
        # lost) and an overflow bit seen before their value wrapped.
        n_fixed = len(self.setup.plan.fixed)
        fixed_prev, fixed_pending = self._prev[:n_fixed], self._pending_ovf[:n_fixed]
        self._select_group(nxt)
        # New baselines for the GP counters, which now count other events. This read follows the status read,
        # so any wrap that set a bit there is already in these values: nothing to carry.
        assert self._reader is not None
        _, values = self._reader.read()
        self._prev = fixed_prev + [values[i] for i in self._positions[n_fixed:]]
        self._pending_ovf[:n_fixed] = fixed_pending
        return estimated

    def restore(self) -> RestoreResult:
        """Put back every register saved before programming (pmutop.backends.msr_restore), once. After
        this the sampler cannot write any more, whatever it is doing."""
        with self._lock:
            if self.closed:
                return RestoreResult()
            self.closed = True
            if not self.touched:
                return RestoreResult()
        return restore_cpu(self.setup.dev, self.record())


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
    ) -> None:
        super().__init__(platform, clock, events, user=user, kernel=kernel, resolver=resolver)
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
        for cpu in cpus:
            plan = plan_counters(
                perfmons[cpu], resolve_for_cpu(self.platform, cpu, self.events, self.resolver), cpu=cpu
            )
            dev = self.platform.open_msr(cpu, writable=True)
            self.setups[cpu] = CpuSetup(cpu, perfmons[cpu], plan, dev, False, {})
            self.setups[cpu].full_width_writes = self._full_width_writes(self.setups[cpu])
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
        # Saved in the state file before the first register is written (at start).
        undo.journal.record_cpus([c.record() for c in self._counters.values()])
        for cpu, counters in self._counters.items():
            undo.push(f"cpu {cpu} PMU registers", counters.restore)

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
        for cpu, s in self.setups.items():
            for name, reason in s.plan.dropped:
                dropped.setdefault((name, reason), []).append(cpu)
        for (name, reason), cpus in dropped.items():
            self.notices.append(f"not counting {name} on cpu {format_cpu_list(cpus)}: {reason}")

    def _inspect(self, cpu: int, *, tolerate_watchdog: bool) -> None:
        """Read and keep every register we will write; refuse (unless --force) if another agent uses the PMU."""
        s = self.setups[cpu]
        pm, dev = s.perfmon, s.dev
        rmap = pm.registers
        regs = {rmap.evtsel(i): dev.read(rmap.evtsel(i)) for i in pm.gp_indexes}
        regs[R.IA32_FIXED_CTR_CTRL] = dev.read(R.IA32_FIXED_CTR_CTRL)
        if pm.version >= 4:
            regs[R.IA32_PERF_GLOBAL_INUSE] = dev.read(R.IA32_PERF_GLOBAL_INUSE)
        saved = {
            R.IA32_PERF_GLOBAL_CTRL: dev.read(R.IA32_PERF_GLOBAL_CTRL),
            R.IA32_FIXED_CTR_CTRL: regs[R.IA32_FIXED_CTR_CTRL],
        }
        for i in sorted({p.index for g in s.plan.gp_groups for p in g}):
            saved[rmap.evtsel(i)] = regs[rmap.evtsel(i)]
            # Read and written at one address (the same counter on hardware; one cell in a snapshot).
            saved[s.counter_address(i)] = dev.read(s.counter_address(i))
        for i in sorted({p.index for p in s.plan.fixed}):
            saved[rmap.fixed_ctr(i)] = dev.read(rmap.fixed_ctr(i))
        s.saved = saved
        found = find_foreign_use(pm, regs, tolerate_watchdog=tolerate_watchdog)
        if found:
            address, detail = found[0]
            if not self.force:
                raise PmuInUseError(
                    f"cpu {cpu}: {R.msr_name(address)} is in use ({detail}); another tool or perf owns "
                    "the counters: stop it, use --backend perf, or pass --force to take over"
                )
            self.notices.append(f"cpu {cpu}: taking over {R.msr_name(address)} ({detail}) because of --force")

    def _disable_watchdog(self, original: str, undo: UndoLog) -> None:
        try:
            self._change_setting(NMI_WATCHDOG, original, "0", undo)
        except OSError as e:
            raise HardwareError(
                f"the NMI watchdog is on and owns a PMU counter, and pausing it failed "
                f"(/{NMI_WATCHDOG}: {e.strerror or e}); use --backend perf"
            ) from None
        self.notices.append(
            f"NMI watchdog paused for this run (it owns a PMU counter); /{NMI_WATCHDOG} is set back to "
            f"{original} on exit"
        )

    def _full_width_writes(self, s: CpuSetup) -> bool:
        ident = decode_identity(self.platform.cpuid_fn(s.cpu))
        if not ident.pdcm:
            return False
        try:
            return bool(s.dev.read(R.IA32_PERF_CAPABILITIES) & R.PERF_CAP_FW_WRITE)
        except HardwareError:
            return False

    def _choose_read_method(self, cpus: list[int], undo: UndoLog) -> str:
        if self.requested_read == "msr" or not self.platform.rdpmc_possible():
            return "msr"
        explicit = self.requested_read == "rdpmc"
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
            plan = self.setups[cpu].plan
            probe = self.platform.probe_rdpmc(cpu, plan.n_fixed_read, plan.n_gp_read)
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
