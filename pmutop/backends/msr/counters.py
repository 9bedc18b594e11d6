"""The msr backend's per-CPU side: program one CPU's core PMU, read it on the sampler's schedule, put it back.

Sequence per CPU (SDM vol. 3 "Architectural Performance Monitoring", reference section 8): GLOBAL_CTRL=0,
zero our counters, clear their status bits (write-1-to-clear), write the event selects and FIXED_CTR_CTRL,
enable GLOBAL_CTRL. Restore in the reverse spirit, GLOBAL_CTRL last (pmutop.backends.msr.restore).

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

import operator
import threading
from dataclasses import dataclass

from pmutop.backends.base import CpuCounters, Reading
from pmutop.backends.msr.restore import CpuRecord, FixedRecord, GpRecord, restore_cpu
from pmutop.core import topdown_methods
from pmutop.core.clock import Clock
from pmutop.core.errors import HardwareError
from pmutop.core.undo import RestoreResult
from pmutop.hw.msr import MsrDevice, MsrFile
from pmutop.hw.native_sampler import NativeCore
from pmutop.hw.platform import CounterReader, MsrCounterReader, Platform
from pmutop.pmu import registers
from pmutop.pmu.cpuid_decode import PerfmonInfo
from pmutop.pmu.events import EventSpec
from pmutop.pmu.plan import CounterPlan

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
TOPDOWN_METHOD = topdown_methods.PERF_METRICS
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
    return value | registers.EVTSEL_ANY if event.any_thread else value


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


class MsrCpuCounters(CpuCounters):
    """One CPU programmed through its MSR device; used by that CPU's sampler thread.

    With more programmable events than counters, the plan's GP groups take turns: one group per
    interval. An event's value in an interval where its group was not programmed is its rate over the
    last interval it was counted, times this interval: an estimate, reported with the fraction of the
    last rotation's time it was counted.
    """

    # What every reading uses, as slots: an instance has over 30 attributes, so the rest live in a dict of its
    # own (CPython shares at most 30 keys), and at 256 CPUs the native drain finds each CPU's state cold
    # (slots: one cache line for several, no hash lookups).
    # fmt: off
    __slots__ = (
        "_acc", "_acc_ovf", "_acc_suspect", "_bits_all", "_clock", "_folding", "_keys", "_last_at", "_pending_ovf",
        "_placements", "_prev", "_prev_at", "_prev_tsc", "_rotating", "_status_cleared", "_status_cleared_at",
        "_status_writable", "_td_fields", "_wrap_ns",
    )
    # fmt: on

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
        self.topdown_method = TOPDOWN_METHOD if self._td_fields else None
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
        # The native path: GLOBAL_STATUS bits the last read_from cleared, and the clock time after it did.
        self._status_cleared = 0
        self._status_cleared_at = 0
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
        self._rotating = plan.rotating
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
        # What _fold needs per placement, worked out once per group rather than at every read.
        self._keys = [p.event.key for p in self._placements]
        self._folding = [
            (pos, (1 << width) - 1, bit)
            for pos, width, bit in zip(self._positions, self._widths, self._bits, strict=True)
        ]
        self._bits_all = sum(set(self._bits))
        # Placements on fixed counter 3 (a requested slots event), zeroed with it for top-down (_td_zero).
        self._slots_placed = [n for n, p in enumerate(self._placements) if p.kind == "fixed" and p.index == SLOTS_FIXED]
        self._pending_ovf = [False] * len(self._placements)
        self._acc = [0] * len(self._placements)

    def _write(self, address: int, value: int) -> None:
        with self._lock:
            if self.closed:
                raise HardwareError(f"cpu {self.cpu}: the PMU was already restored")
            self.touched = True
            self.setup.dev.write(address, value)

    def program(self) -> None:
        setup, dev = self.setup, self.setup.dev
        plan = setup.plan
        gp_idx = sorted({p.index for g in plan.gp_groups for p in g})
        # Counters we do not use keep their FIXED_CTR_CTRL fields and GLOBAL_CTRL bits (they are free,
        # or --force kept them): only our own bits change.
        other_fixed = setup.saved[registers.IA32_FIXED_CTR_CTRL] & ~self._fixed_nibbles
        other_global = setup.saved[registers.IA32_PERF_GLOBAL_CTRL] & ~self._ours_mask
        self._write(registers.IA32_PERF_GLOBAL_CTRL, other_global)
        regs = setup.perfmon.registers
        for i in gp_idx:  # EN must be clear before the counter is written (SDM)
            self._write(regs.evtsel(i), 0)
            self._write(setup.counter_address(i), 0)
        self._write(registers.IA32_FIXED_CTR_CTRL, other_fixed)
        for i in setup.fixed_indexes:
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
        setup, pm = self.setup, self.setup.perfmon
        gp = []
        regs = pm.registers
        for i in sorted({p.index for g in setup.plan.gp_groups for p in g}):
            ours = {0} | {g[regs.evtsel(i)] for g in self._group_evtsels if regs.evtsel(i) in g}
            gp.append(
                GpRecord(
                    index=i,
                    evtsel=regs.evtsel(i),
                    counter=setup.counter_address(i),
                    sign_extends=not setup.full_width_writes,
                    width=pm.gp_width,
                    saved_evtsel=setup.saved[regs.evtsel(i)],
                    saved_count=setup.saved[setup.counter_address(i)],
                    ours=tuple(sorted(ours)),
                )
            )
        fixed = [
            FixedRecord(
                index=i,
                counter=regs.fixed_ctr(i),
                width=pm.fixed_width,
                saved_count=setup.saved[regs.fixed_ctr(i)],
                nibble=registers.fixed_ctrl_nibble(self._fixed_ctrl_ours, i),
            )
            for i in setup.fixed_indexes
        ]
        return CpuRecord(
            cpu=self.cpu,
            gp=tuple(gp),
            fixed=tuple(fixed),
            saved_fixed_ctrl=setup.saved[registers.IA32_FIXED_CTR_CTRL],
            saved_global_ctrl=setup.saved[registers.IA32_PERF_GLOBAL_CTRL],
            status_writable=self._status_writable,
            saved_perf_metrics=setup.saved[registers.MSR_PERF_METRICS] if self._td_fields else None,
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
        for n in self._slots_placed:
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
            self._acc_ovf[TOPDOWN_METHOD] = self._acc_ovf.get(TOPDOWN_METHOD, 0) + 1
        self._td_zero()
        self._td_slots += slots
        self._td_acc = list(map(operator.add, self._td_acc, registers.split_slots(slots, metrics, self._td_fields)))

    def foreign_changes(self) -> list[str]:
        """Control registers that no longer hold what we programmed."""
        changed = []
        dev = self.setup.dev
        addresses = tuple(self.programmed)
        values = dev.read_many(addresses)  # at once where the device can (the simulator: one call)
        if None in values:
            values = [dev.read(address) for address in addresses]  # the failing read raises, as one by one
        for (address, ours), now in zip(self.programmed.items(), values, strict=True):
            assert now is not None
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
        return self._fold(at, tsc, values, status)

    def _fold(self, at: int, tsc: int, values: list[int], status: int) -> tuple[int, int]:
        """_collect's arithmetic on one reading: counters, then GLOBAL_STATUS read after them."""
        suspect: str | None = None
        acc, prev, pending = self._acc, self._prev, self._pending_ovf
        flags = status & self._bits_all
        for n, (position, mask, bit) in enumerate(self._folding):
            new, old = values[position], prev[n]
            acc[n] += (new - old) & mask
            prev[n] = new
            if new >= old and not flags & bit:
                continue  # the usual case: no wrap, no overflow bit
            flagged = bool(flags & bit)
            key = self._keys[n]
            if flagged:
                self._acc_ovf[key] = self._acc_ovf.get(key, 0) + 1
            if new < old:
                if not (flagged or pending[n]) and suspect is None:
                    suspect = f"{key} counter went backwards without an overflow bit (reset by someone else?)"
                pending[n] = False
            else:
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
        return self._reading(*self._collect())

    def read_from(self, at: int, tsc: int, values: list[int], status: int, foreign: int | None) -> Reading:
        """read() on a reading a native sampler thread took (pmutop.hw.native_sampler): the same arithmetic
        and overflow check; GLOBAL_STATUS bits it saw are cleared here, through the write gate (bits set after
        that read are not among them, so clearing later loses no overflow). `foreign`: None when the thread
        did not run the foreign-use check (native_checks) with this reading, else the checks that differed."""
        if at < self._status_cleared_at:
            # Taken before the last clear landed: the bits it cleared may still show here, but they are the
            # overflows already counted (a counter wide enough for the native path cannot wrap twice so soon).
            status &= ~self._status_cleared
        at, tsc = self._fold(at, tsc, values, status)
        cleared = status & self._status_writable
        if cleared:  # _fold just cleared them: a reading the thread took before now may still show them
            self._status_cleared, self._status_cleared_at = cleared, self._clock.now_ns()
        if foreign is None:
            return self._reading(at, tsc, [])
        # Named from fresh reads, as _foreign_check does (only when the thread saw a difference).
        return self._reading(at, tsc, self.foreign_changes() if foreign else [])

    def native_checks(self) -> list[tuple[int, int, int]]:
        """The foreign-use check for a native thread: (control register, our bits, what we wrote there)."""
        masks = {a: self._shared_masks.get(a, -1) & U64 for a in self.programmed}
        return [(a, masks[a], v & masks[a]) for a, v in self.programmed.items()]

    def python_only(self) -> str | None:
        """Why only a Python sampler can read this CPU (it writes or reads between two readings), or None."""
        if self._td_fields:
            return "top-down through PERF_METRICS zeroes fixed counter 3 and PERF_METRICS after every read"
        if self.setup.plan.rotating:
            return "more events than counters: the event groups take turns, reprogrammed every interval"
        if self.accumulate_period_ns is not None:
            return "its counters can wrap within the interval: they are read between the deadlines too"
        if not isinstance(self.setup.dev, MsrFile) or self.setup.dev.fd < 0:
            return "its MSRs are not a file a native thread can read"
        return None

    @property
    def reads_on_own_cpu(self) -> bool:
        return self._read_method == "rdpmc"

    def native_core(self, pin: bool) -> NativeCore | None:
        """What a native sampler thread reads for this CPU, or None where python_only() says why not."""
        dev = self.setup.dev
        if self.python_only() is not None or not isinstance(dev, MsrFile):
            return None
        plan, regs = self.setup.plan, self.setup.perfmon.registers
        rdpmc = self._read_method == "rdpmc"
        reader = MsrCounterReader(dev, self._n_fixed_read, plan.n_gp_read, regs=regs)
        return NativeCore(
            cpu=self.cpu,
            pin=pin,
            fd=dev.fd,
            stride=dev.stride,
            status_address=registers.IA32_PERF_GLOBAL_STATUS,
            addresses=() if rdpmc else tuple(reader.addresses),
            rdpmc=rdpmc,
            n_fixed=self._n_fixed_read,
            n_gp=plan.n_gp_read,
        )

    def start_native(self, at: int, tsc: int, values: list[int]) -> None:
        """start() for a native sampler: programmed already (program()), this is its baseline reading."""
        self._prev_at = self._last_at = self._checked_at = at
        self._prev_tsc = tsc
        self._prev = [values[i] for i in self._positions]

    def _reading(self, at: int, tsc: int, changes: list[str] | None = None) -> Reading:
        """The Reading after a fold; `changes`: the foreign-use check's findings (None: run it if due)."""
        counts = dict(zip(self._keys, self._acc, strict=True))
        if self._td_fields:
            counts[SLOTS_KEY] = self._td_slots
            for key in self._td_plan_keys:
                counts[key] = self._td_slots
            counts.update(zip(self._td_keys, self._td_acc, strict=True))
            self._td_slots, self._td_acc = 0, [0] * self._td_fields
        overflows, suspect = self._acc_ovf, self._acc_suspect
        self._acc = [0] * len(self._placements)
        self._acc_ovf, self._acc_suspect = {}, None
        if changes is None:
            changes = self._foreign_check(at)
        if changes:
            suspect = f"PMU reprogrammed by another agent: {', '.join(changes)}"
        tsc_delta = (tsc - self._prev_tsc) & U64
        interval_ns = at - self._prev_at
        self._prev_tsc, self._prev_at = tsc, at
        estimated: dict[str, float] = {}
        if self._rotating:
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
