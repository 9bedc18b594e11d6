"""The msr backend: program the core PMU through MSRs, read it with rdpmc (or MSRs), put it back.

Sequence per CPU (SDM vol. 3 "Architectural Performance Monitoring", reference section 8):
inspect and save every register we will write; refuse if someone else is using the PMU; then
GLOBAL_CTRL=0, zero our counters, clear their status bits (write-1-to-clear), write the event
selects and FIXED_CTR_CTRL, enable GLOBAL_CTRL. Restore in the reverse spirit, GLOBAL_CTRL last.

Top-down level 1/2 (reference pmu.md 2.8-2.9, topdown.md 1): where IA32_PERF_CAPABILITIES[15] says the CPU
has PERF_METRICS and fixed counter 3 exists, fixed counter 3 (TOPDOWN.SLOTS) is programmed too, with
GLOBAL_CTRL bits 35 and 48 (EN_PERF_METRICS). Every read (the rdpmc path: in the same shim call as the other
counters) takes slots and PERF_METRICS, then zeroes fixed counter 3 and PERF_METRICS, in that order, as
Linux's intel_update_topdown_event ("The fixed counter 3 has to be written before the PERF_METRICS") and PCM
do: the 8-bit fractions lose precision as the counted span grows, so each read covers only the slots since
the previous one. Category slots = byte x slots / (sum of the four level-1 bytes), as PCM and toplev scale
(Linux uses byte / 0xFF), so level 1 sums to the slots.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass

from pmutop.backends.base import Backend, CpuCounters, EventResolver, Reading, resolve_for_cpu
from pmutop.backends.msr.restore import CpuRecord, FixedRecord, GpRecord, restore_cpu
from pmutop.core.clock import Clock
from pmutop.core.cpulist import format_cpu_list
from pmutop.core.errors import HardwareError, PmuInUseError, UsageError
from pmutop.core.undo import RestoreResult, UndoLog, setting_undo
from pmutop.hw.msr import MsrDevice
from pmutop.hw.platform import NMI_WATCHDOG, RDPMC_SYSFS, CounterReader, MsrCounterReader, Platform
from pmutop.pmu import registers, topdown_plan
from pmutop.pmu.cpuid_decode import CORE_TYPE_CORE, PerfmonInfo, decode_core_type, decode_identity, decode_perfmon
from pmutop.pmu.events import ARCH_EVENTS, DEFAULT_EVENTS, EventSpec
from pmutop.pmu.perfmon import PerfmonTables
from pmutop.pmu.plan import CounterPlan, plan_counters
from pmutop.pmu.usage import find_foreign_use

U64 = (1 << 64) - 1
SLOTS_FIXED = 3  # fixed counter 3 counts TOPDOWN.SLOTS
# Sample keys of the slots per top-down category, in PERF_METRICS byte order (level 1, then level 2).
SLOTS_KEY = "slots"
TOPDOWN_KEYS = (
    "topdown_retiring",
    "topdown_bad_spec",
    "topdown_fe_bound",
    "topdown_be_bound",
    "topdown_heavy_ops",
    "topdown_br_mispredict",
    "topdown_fetch_lat",
    "topdown_mem_bound",
)
TOPDOWN_METHOD = "perf_metrics"
# No counter can tick faster than ~8 events per cycle at 6 GHz. An interval longer than
# 2^width / MAX_EVENTS_PER_S may hide a second wrap, which neither the value nor the status bit shows.
MAX_EVENTS_PER_S = 5e10


# How often a sampler checks that the control registers still hold what it programmed: a sample taken this
# long after another agent reprogrammed the PMU (or later) is marked suspect.
FOREIGN_CHECK_NS = 2_000_000_000


def shortest_wrap_s(width: int) -> float:
    return (1 << width) / MAX_EVENTS_PER_S


def _evtsel(event: EventSpec, *, user: bool, kernel: bool) -> int:
    """The event select for a planned event. AnyThread only for the top-down planner's per-core events (on
    the PMU versions 3-4 that have it): encode_evtsel never sets it for anything a user asks for."""
    value = registers.encode_evtsel(event.raw, user=user, kernel=kernel)  # type: ignore[arg-type]
    return value | registers.EVTSEL_ANY if getattr(event, "any_thread", False) else value


@dataclass
class CpuSetup:
    cpu: int
    perfmon: PerfmonInfo
    plan: CounterPlan
    dev: MsrDevice
    full_width_writes: bool
    saved: dict[int, int]
    topdown_fields: int = 0  # PERF_METRICS bytes used: 0 (no top-down here), 4 (level 1) or 8 (level 1 and 2)

    def counter_address(self, i: int) -> int:
        """Where GP counter i is zeroed, saved and restored: the full-width alias when the PMU has one."""
        return self.perfmon.registers.counter(i, full_width=self.full_width_writes)

    @property
    def fixed_indexes(self) -> list[int]:
        """Fixed counters this run programs: the plan's, plus counter 3 (slots) for top-down."""
        idx = {p.index for p in self.plan.fixed}
        if self.topdown_fields:
            idx.add(SLOTS_FIXED)
        return sorted(idx)

    @property
    def n_fixed_read(self) -> int:
        """Fixed counters 0..n-1 read every time (through counter 3 for top-down)."""
        return max(self.plan.n_fixed_read, SLOTS_FIXED + 1) if self.topdown_fields else self.plan.n_fixed_read


def split_slots(slots: int, metrics: int, fields: int) -> list[int]:
    """Slots per top-down category from one PERF_METRICS value: byte x slots / (sum of the level-1 bytes),
    rounded so that level 1 adds up to `slots` exactly; level 2 on the same scale, at most its parent."""
    b = [registers.perf_metrics_byte(metrics, k) for k in range(fields)]
    total = b[0] + b[1] + b[2] + b[3]
    if not total or not slots:
        return [0] * fields
    out: list[int] = []
    edge = cum = 0
    for k in range(4):  # round the running sum, not each part: the parts then add up to slots
        cum += b[k]
        nxt = (2 * slots * cum + total) // (2 * total)
        out.append(nxt - edge)
        edge = nxt
    for k in range(4, fields):
        out.append(min(out[k - 4], (2 * slots * b[k] + total) // (2 * total)))
    return out


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
        fixed_idx = setup.fixed_indexes
        gp_idx = sorted({p.index for g in plan.gp_groups for p in g})
        # Top-down through PERF_METRICS: "perf_metrics", or None (no work at all per read then).
        self._td_fields = setup.topdown_fields
        self.topdown_method: str | None = TOPDOWN_METHOD if self._td_fields else None
        self._n_fixed_read = setup.n_fixed_read
        self._fixed_ctrl_ours = registers.encode_fixed_ctrl(fixed_idx, user=user, kernel=kernel)
        regs = pm.registers
        self._group_evtsels = [
            {regs.evtsel(p.index): _evtsel(p.event, user=user, kernel=kernel) for p in g} for g in plan.gp_groups
        ] or [{}]
        self._ours_mask = registers.global_ctrl_mask(gp_idx, fixed_idx)
        if self._td_fields:
            self._ours_mask |= registers.GLOBAL_CTRL_EN_PERF_METRICS
        self._status_writable = registers.status_reset_writable_mask(
            pm.version,
            pm.gp_counters,
            # Fixed counter 3 also where CPUID leaf 0xA left it out (hybrid P-cores, see _perf_metrics_fields).
            sorted({i for i in range(registers.MAX_FIXED_COUNTERS) if pm.fixed_mask >> i & 1} | set(fixed_idx)),
            perf_metrics=bool(self._td_fields),
        )
        all_widths = [pm.fixed_width] * bool(fixed_idx) + [pm.gp_width] * bool(gp_idx)
        self._wrap_ns = min(shortest_wrap_s(w) for w in all_widths) * 1e9 if all_widths else float("inf")
        self._min_width = min(all_widths, default=64)
        # Counters that can wrap within an interval are also read between the deadlines (accumulate).
        self.accumulate_period_ns = self.period_for_wrap(self._wrap_ns)
        self._active = 0
        self._rates: dict[str, tuple[float, str]] = {}  # rotating event -> (count per cycle or ns, "cycles"/"ns")
        self._counted: dict[str, list[bool]] = {}  # rotating event -> counted? in each recent interval
        self.programmed: dict[int, int] = {}  # control register -> the value we wrote
        # FIXED_CTR_CTRL and GLOBAL_CTRL are shared with other agents: only these bits are ours.
        self._fixed_nibbles = sum(0xF << (4 * i) for i in fixed_idx)
        self._shared_masks = {
            registers.IA32_FIXED_CTR_CTRL: self._fixed_nibbles,
            registers.IA32_PERF_GLOBAL_CTRL: self._ours_mask,
        }
        self.touched = False  # anything written at all: restore needed
        self.closed = False  # restored: the sampler must not write any more
        self._lock = threading.Lock()  # the sampler's writes vs. the restore (from another thread)
        self._reader: CounterReader | None = None
        self._prev: list[int] = []
        self._prev_tsc = 0
        self._prev_at = 0  # clock time of the last read()
        self._last_at = 0  # clock time of the last counter read (read or accumulate): for the wrap check
        self._checked_at = 0  # clock time of the last check for foreign reprogramming
        self._foreign_seen = False  # the last check found some: check every sample until it is gone
        self._acc: list[int] = []  # per placement: counts since the last read(), added up by accumulate()
        self._acc_ovf: dict[str, int] = {}  # event -> overflow bits seen since the last read()
        self._acc_suspect: str | None = None  # the first reason found since the last read()
        # Top-down: where slots and PERF_METRICS are in a reader's output, and the slots (per category) counted
        # since the last read(), folded in at every collect because both registers are zeroed each time.
        self._td_slots_pos = SLOTS_FIXED
        self._td_metrics_pos = self._n_fixed_read + plan.n_gp_read
        self._td_keys = TOPDOWN_KEYS[: self._td_fields]
        self._td_slots = 0
        self._td_acc = [0] * self._td_fields
        self._td_slots_bit = registers.fixed_bit(SLOTS_FIXED)
        self._td_ctr = pm.registers.fixed_ctr(SLOTS_FIXED) if self._td_fields else 0
        # A requested event placed on fixed counter 3 reports the same slots.
        self._td_plan_keys = [p.event.key for p in plan.fixed if p.index == SLOTS_FIXED and self._td_fields]
        self._select_group(0)

    @property
    def keys(self) -> list[str]:
        keys = self.setup.plan.keys
        if self._td_fields:
            keys = keys + [k for k in (SLOTS_KEY, *self._td_keys) if k not in keys]
        return keys

    def _select_group(self, g: int) -> None:
        """Which placements the next reads cover (the fixed counters plus GP group g)."""
        plan, pm = self.setup.plan, self.setup.perfmon
        self._active = g
        self._placements = plan.fixed + (plan.gp_groups[g] if plan.gp_groups else ())
        self._widths = [pm.fixed_width if p.kind == "fixed" else pm.gp_width for p in self._placements]
        self._bits = [
            registers.fixed_bit(p.index) if p.kind == "fixed" else registers.gp_bit(p.index) for p in self._placements
        ]
        # Position in a reader's output: fixed 0..n_fixed_read-1, then GP (then PERF_METRICS).
        self._positions = [p.index if p.kind == "fixed" else self._n_fixed_read + p.index for p in self._placements]
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
        other_fixed = s.saved[registers.IA32_FIXED_CTR_CTRL] & ~self._fixed_nibbles
        other_global = s.saved[registers.IA32_PERF_GLOBAL_CTRL] & ~self._ours_mask
        self._write(registers.IA32_PERF_GLOBAL_CTRL, other_global)
        regs = s.perfmon.registers
        for i in gp_idx:  # EN must be clear before the counter is written (SDM)
            self._write(regs.evtsel(i), 0)
            self._write(s.counter_address(i), 0)
        self._write(registers.IA32_FIXED_CTR_CTRL, other_fixed)
        for i in s.fixed_indexes:
            self._write(regs.fixed_ctr(i), 0)
        if self._td_fields:
            # Both start from zero, fixed counter 3 first (Linux icl_set_topdown_event_period, PCM).
            self._write(registers.MSR_PERF_METRICS, 0)
        status = dev.read(registers.IA32_PERF_GLOBAL_STATUS)
        self._clear_status((status & self._ours_mask) | self._ours_mask)
        for address, value in self._group_evtsels[0].items():
            self._write(address, value)
        fixed_ctrl = other_fixed | self._fixed_ctrl_ours
        self._write(registers.IA32_FIXED_CTR_CTRL, fixed_ctrl)
        self._write(registers.IA32_PERF_GLOBAL_CTRL, other_global | self._ours_mask)
        self.programmed = {
            **self._group_evtsels[0],
            registers.IA32_FIXED_CTR_CTRL: fixed_ctrl,
            registers.IA32_PERF_GLOBAL_CTRL: other_global | self._ours_mask,
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
                nibble=registers.fixed_ctrl_nibble(self._fixed_ctrl_ours, i),
            )
            for i in s.fixed_indexes
        ]
        return CpuRecord(
            cpu=self.cpu,
            gp=tuple(gp),
            fixed=tuple(fixed),
            saved_fixed_ctrl=s.saved[registers.IA32_FIXED_CTR_CTRL],
            saved_global_ctrl=s.saved[registers.IA32_PERF_GLOBAL_CTRL],
            status_writable=self._status_writable,
            saved_perf_metrics=s.saved[registers.MSR_PERF_METRICS] if self._td_fields else None,
        )

    def _clear_status(self, bits: int) -> None:
        # 0x390 is write-1-to-clear: write the bits to clear (writing 0 would clear nothing),
        # never a reserved bit (that faults).
        bits &= self._status_writable
        if bits:
            self._write(registers.IA32_PERF_GLOBAL_STATUS_RESET, bits)

    def start(self) -> int:
        self.program()
        plan = self.setup.plan
        metrics = bool(self._td_fields)
        if self._read_method == "rdpmc":
            if metrics:  # slots and PERF_METRICS in the same shim call as the other counters
                self._reader = self._platform.rdpmc_reader(self.cpu, self._n_fixed_read, plan.n_gp_read, metrics=True)
            else:
                self._reader = self._platform.rdpmc_reader(self.cpu, self._n_fixed_read, plan.n_gp_read)
        else:
            self._reader = MsrCounterReader(
                self.setup.dev, self._n_fixed_read, plan.n_gp_read, regs=self.setup.perfmon.registers, metrics=metrics
            )
        self._prev_at = self._last_at = self._checked_at = self._clock.now_ns()
        self._prev_tsc, values = self._reader.read()
        self._prev = [values[i] for i in self._positions]
        if metrics:
            self._td_zero()  # the first interval's slots start at this baseline, like every other counter's
        return self._prev_at

    def _td_zero(self) -> None:
        """Zero fixed counter 3, then PERF_METRICS (Linux: "The fixed counter 3 has to be written before the
        PERF_METRICS"); a requested event on fixed counter 3 restarts from 0 with it."""
        self._write(self._td_ctr, 0)
        self._write(registers.MSR_PERF_METRICS, 0)
        for n, p in enumerate(self._placements):
            if p.kind == "fixed" and p.index == SLOTS_FIXED:
                self._prev[n] = 0
                self._pending_ovf[n] = False

    def _td_collect(self, values: list[int], status: int) -> None:
        """Fold the slots and PERF_METRICS just read into the interval's totals and zero both."""
        slots = values[self._td_slots_pos]
        metrics = values[self._td_metrics_pos]
        if status & self._td_slots_bit:
            width = self.setup.perfmon.fixed_width
            # Zeroed at every collect, at most half a wrap time ago: a small value with the bit set wrapped once.
            if slots < 1 << (width - 1):
                slots += 1 << width
            self._acc_ovf[SLOTS_KEY] = self._acc_ovf.get(SLOTS_KEY, 0) + 1
        if status & registers.STATUS_PERF_METRICS_OVF:
            # The metrics' own overflow (Linux handles it by reading and zeroing both, as every collect does).
            self._acc_ovf["perf_metrics"] = self._acc_ovf.get("perf_metrics", 0) + 1
        self._td_zero()
        self._td_slots += slots
        acc = self._td_acc
        for k, v in enumerate(split_slots(slots, metrics, self._td_fields)):
            acc[k] += v

    def foreign_changes(self) -> list[str]:
        """Control registers that no longer hold what we programmed."""
        changed = []
        for address, ours in self.programmed.items():
            now = self.setup.dev.read(address)
            mask = self._shared_masks.get(address, -1)
            if now & mask != ours & mask:
                changed.append(f"{registers.msr_name(address)} {ours & mask:#x} -> {now & mask:#x}")
        return changed

    def _foreign_check(self, at: int) -> list[str]:
        """foreign_changes() at most every FOREIGN_CHECK_NS (it reads every control register, 3-6 reads per
        sample otherwise), and at every sample while a change is still there. The restore reads them all
        again anyway before it puts anything back (msr_restore)."""
        if at - self._checked_at < FOREIGN_CHECK_NS and not self._foreign_seen:
            return []
        self._checked_at = at
        changes = self.foreign_changes()
        self._foreign_seen = bool(changes)
        return changes

    def _collect(self) -> tuple[int, int]:
        """Read the active counters and GLOBAL_STATUS and add the deltas since the last read to the running
        totals (64-bit in effect, however narrow the counters). Returns the clock time and TSC of the read."""
        assert self._reader is not None, "start() first"
        at = self._clock.now_ns()
        tsc, values = self._reader.read()
        status = self.setup.dev.read(registers.IA32_PERF_GLOBAL_STATUS)
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
        if status & registers.STATUS_CTR_FRZ:
            suspect = suspect or "counters were frozen (GLOBAL_STATUS bit 59 was set)"
        if self._td_fields:
            self._td_collect(values, status)
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
        if self._td_fields:
            counts[SLOTS_KEY] = self._td_slots
            for key in self._td_plan_keys:
                counts[key] = self._td_slots
            counts.update(zip(self._td_keys, self._td_acc, strict=True))
            self._td_slots, self._td_acc = 0, [0] * self._td_fields
        overflows, suspect = self._acc_ovf, self._acc_suspect
        self._acc = [0] * len(self._placements)
        self._acc_ovf, self._acc_suspect = {}, None
        changes = self._foreign_check(at)
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
        # A resting event is estimated per unhalted cycle (fixed counter 1 counts every interval): events
        # follow how busy the core was, so ratios to cycles (IPC-like, top-down) stay right when the load
        # changes; per nanosecond only where cycles are not counted.
        cycles = counts.get("cycles")
        basis, unit = (cycles, "cycles") if cycles is not None else (interval_ns, "ns")
        for g in groups:
            for p in g:
                key = p.event.key
                seen = self._counted.setdefault(key, [])
                seen.append(key in active)
                del seen[: -len(groups)]
                if key in active:
                    if basis > 0:
                        self._rates[key] = (counts[key] / basis, unit)
                elif key in self._rates:
                    rate, rate_unit = self._rates[key]
                    counts[key] = round(rate * (basis if rate_unit == unit else interval_ns))
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
        """Put back every register saved before programming (pmutop.backends.msr.restore), once. After
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
        regs[registers.IA32_FIXED_CTR_CTRL] = dev.read(registers.IA32_FIXED_CTR_CTRL)
        if pm.version >= 4:
            regs[registers.IA32_PERF_GLOBAL_INUSE] = dev.read(registers.IA32_PERF_GLOBAL_INUSE)
        saved = {
            registers.IA32_PERF_GLOBAL_CTRL: dev.read(registers.IA32_PERF_GLOBAL_CTRL),
            registers.IA32_FIXED_CTR_CTRL: regs[registers.IA32_FIXED_CTR_CTRL],
        }
        for i in sorted({p.index for g in s.plan.gp_groups for p in g}):
            saved[rmap.evtsel(i)] = regs[rmap.evtsel(i)]
            # Read and written at one address (the same counter on hardware; one cell in a snapshot).
            saved[s.counter_address(i)] = dev.read(s.counter_address(i))
        for i in s.fixed_indexes:
            saved[rmap.fixed_ctr(i)] = dev.read(rmap.fixed_ctr(i))
        if s.topdown_fields:
            saved[registers.MSR_PERF_METRICS] = dev.read(registers.MSR_PERF_METRICS)
        s.saved = saved
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
        self.notices.append(
            f"NMI watchdog paused for this run (it owns a PMU counter); /{NMI_WATCHDOG} is set back to "
            f"{original} on exit"
        )

    def _full_width_writes(self, s: CpuSetup) -> bool:
        ident = decode_identity(self.platform.cpuid_fn(s.cpu))
        if not ident.pdcm:
            return False
        try:
            return bool(s.dev.read(registers.IA32_PERF_CAPABILITIES) & registers.PERF_CAP_FW_WRITE)
        except HardwareError:
            return False

    def _topdown_events(self, s: CpuSetup, requested: list[EventSpec] | None) -> list[EventSpec]:
        """Where there is no PERF_METRICS: the events of the formula or E-core method for this core type, if
        it is on (--topdown: they cost general counters). Notes why not, once per reason."""
        cpuid = self.platform.cpuid_fn(s.cpu)
        ident = decode_identity(cpuid)
        caps = None
        if ident.pdcm:
            with contextlib.suppress(HardwareError):
                caps = s.dev.read(registers.IA32_PERF_CAPABILITIES)
        plan = topdown_plan.plan_topdown(
            ident,
            decode_core_type(cpuid),
            s.perfmon,
            perf_capabilities=caps,
            smt=topdown_plan.smt_from_sysfs(self.platform.read_setting, s.cpu),
            tables=self.tables,
            backend="msr",
        )
        if not plan.available or not plan.enabled(self.topdown):
            if self.topdown and plan.detail:
                self._note_once(f"top-down not measured on cpu {s.cpu}: {plan.detail}")
            return []
        self._td_plans[s.cpu] = plan
        if plan.approximate:
            self._note_once(f"top-down on cpu {s.cpu}: {plan.detail}")
        counted = {e.key for e in requested or []} | {"instructions", "cycles", "ref_cycles"}
        return [e for e in plan.events if e.key not in counted]

    def _with_defaults(self, s: CpuSetup, requested: list[EventSpec] | None) -> list[EventSpec]:
        """What the user asked for, or the default events this CPU can count (so adding top-down's events to
        them keeps the usual columns; they all take turns on the general counters)."""
        if requested is not None:
            return list(requested)
        return [ARCH_EVENTS[n] for n in DEFAULT_EVENTS if n not in s.perfmon.unavailable_events]

    def _note_once(self, message: str) -> None:
        if message not in self.notices:
            self.notices.append(message)

    def _perf_metrics_fields(self, s: CpuSetup) -> int:
        """PERF_METRICS bytes this CPU fills (4 or 8), or 0: it needs IA32_PERF_CAPABILITIES[15] (read only when
        CPUID.1:ECX[15] PDCM says the MSR exists, as Linux and PCM check), fixed counters 0-3 (readers sweep
        0..3) and a big core (Linux adl_update_topdown_event counts nothing on hybrid E-cores)."""
        cpuid = self.platform.cpuid_fn(s.cpu)
        ident = decode_identity(cpuid)
        core = decode_core_type(cpuid)
        if not ident.pdcm or (core is not None and core.code != CORE_TYPE_CORE):
            return 0
        pm, regs = s.perfmon, s.perfmon.registers
        # Hybrid P-cores without CPUID 0x23 report the counters common to both core types in leaf 0xA; Linux
        # gives them fixed counter 3 anyway (intel_pmu_init, Alder Lake: num_counters_fixed + 1 for cpu_core),
        # as pmutop.pmu.topdown_plan does.
        hybrid_p = core is not None and pm.leaf23 is None and pm.version >= 5
        fixed = pm.fixed_mask | ((1 << (SLOTS_FIXED + 1)) - 1 if hybrid_p and pm.fixed_mask & 0x7 == 0x7 else 0)
        if fixed & 0xF != 0xF or regs.max_fixed <= SLOTS_FIXED:
            return 0
        try:
            caps = s.dev.read(registers.IA32_PERF_CAPABILITIES)
        except HardwareError:
            return 0
        if not caps & registers.PERF_CAP_PERF_METRICS:
            return 0
        return registers.perf_metrics_fields(ident.family, ident.model)

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
            s = self.setups[cpu]
            # Exactly the read the sampler will do (with PERF_METRICS where it reads it: that rdpmc faults
            # where the CPU has none).
            if s.topdown_fields:
                probe = self.platform.probe_rdpmc(cpu, s.n_fixed_read, s.plan.n_gp_read, metrics=True)
            else:
                probe = self.platform.probe_rdpmc(cpu, s.n_fixed_read, s.plan.n_gp_read)
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
