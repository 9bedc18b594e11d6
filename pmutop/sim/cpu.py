"""One simulated CPU's PMU: its registers, counting from its workload, PERF_METRICS and rdpmc (the behaviour
and its approximations: pmutop.sim.model's docstring). Registers outside the PMU are the power model's
(pmutop.sim.power)."""

from __future__ import annotations

import dataclasses
import errno
import operator
import threading
from collections import deque
from collections.abc import Callable
from typing import Protocol

from pmutop.hw.msr import MsrAccessError
from pmutop.pmu import registers
from pmutop.sim import power
from pmutop.sim.config import CoreShape, SimConfig
from pmutop.sim.cpu_registers import (
    EVTSEL,
    FIXED,
    PMC_FULL,
    PMC_SIGN_EXTEND,
    PMC_V6,
    EnabledCounter,
    rate_bound,
    register_table,
)
from pmutop.sim.events import FIXED_FNS, event_fn
from pmutop.sim.workload import TOPDOWN_FIELDS, Amounts, Counts, Workload

_RDPMC_TYPE_GP = 0x0000
_RDPMC_TYPE_FIXED = 0x4000
_RDPMC_TYPE_METRICS = 0x2000  # ECX = 1 << 29 (Linux INTEL_PMC_FIXED_RDPMC_METRICS)
_TD_ATTRS = tuple(f"td_{f}" for f in TOPDOWN_FIELDS)  # Amounts fields in PERF_METRICS byte order
_TD_FIRST = Amounts._fields.index(_TD_ATTRS[0])
assert Amounts._fields[_TD_FIRST : _TD_FIRST + len(_TD_ATTRS)] == _TD_ATTRS  # contiguous, in byte order
_FIXED_ENABLE = registers.FIXED_EN_OS | registers.FIXED_EN_USR
_STATUS = registers.IA32_PERF_GLOBAL_STATUS
_TIMES_255 = (255).__mul__
_TIMES_MINUS_255 = (-255).__mul__


class SimRdpmcFault(Exception):
    """rdpmc raised #GP (the real instruction would kill the process with SIGSEGV)."""


class Machine(power.PowerMachine, Protocol):
    """What one CPU's PMU needs from the machine it belongs to (pmutop.sim.model.SimMachine): its config and
    clock, and what the power model reads there."""

    config: SimConfig


class _Instant:
    """SimCpu.instant's context (a class, not a generator: entered for every CPU's every sample)."""

    __slots__ = ("_cpu",)

    def __init__(self, cpu: SimCpu) -> None:
        self._cpu = cpu

    def __enter__(self) -> None:
        self._cpu._begin_instant()

    def __exit__(self, *exc: object) -> None:
        self._cpu._end_instant()


# -- one CPU ----------------------------------------------------------------------------------------------


class SimCpu:
    """The PMU state of one logical CPU. Every public method takes the CPU's lock."""

    def __init__(self, machine: Machine, cpu: int, workload: Workload, core: CoreShape) -> None:
        # This CPU's config: the machine's with its core type's counter numbers (hybrid parts differ).
        cfg = dataclasses.replace(machine.config, gp_counters=core.gp, fixed_counters=core.fixed)
        self.machine = machine
        self.cfg = cfg
        self.core = core
        self.cpu = cpu
        self.workload = workload
        self.lock = threading.Lock()
        self.evtsel = [0] * cfg.gp_counters
        self.gp = [0] * cfg.gp_counters
        self.fixed = [0] * cfg.fixed_counters
        self.fixed_ctrl = 0
        self.global_ctrl = 0
        self.status = 0
        self._t = 0  # ns since machine start, never goes back
        self.thermal: tuple[int, float] = (-1, 0.0)  # (time step, temperature): see sim/power.py
        self.thermal_points: tuple[object, dict[int, tuple[int, int, int]]] = (None, {})  # sim/power.py
        self.unhalted: tuple[int, object, int, int, int] = (-1, None, 0, 0, 0)  # sim/power.py
        self._instant: int | None = None  # while a sample is taken at one instant (instant()): that time
        self._instant_scope = _Instant(self)
        self._cum = workload.cumulative(0)
        self._rate = rate_bound(workload)
        self._room: int | None = None  # the least any enabled counter can count before it wraps, at _t
        # The TSC of the latest rdpmc reads (counters and TSC of one instant): the simulated per-process counters
        # find the instants a sampler's intervals start and end at among them (pmutop.sim.process_counters).
        self.counter_reads: deque[int] = deque(maxlen=64)
        self._enabled: list[EnabledCounter] | None = None  # cache, dropped by a write to what decides it (_enabling)
        self._pmi: list[EnabledCounter] = []  # those of them with a PMI (freeze on overflow), built with them
        fixed = range(cfg.fixed_counters)
        self.metrics_fields = core.metrics
        self.global_ctrl_valid = registers.global_ctrl_mask(range(cfg.gp_counters), fixed)
        self.status_valid = registers.status_reset_writable_mask(
            cfg.version, cfg.gp_counters, fixed, perf_metrics=bool(self.metrics_fields)
        )
        if self.metrics_fields:
            self.global_ctrl_valid |= registers.GLOBAL_CTRL_EN_PERF_METRICS
        # PERF_METRICS: slots per category (x 255, so a loaded fraction of fixed counter 3 stays an integer)
        # since it was last written, and the value written while nothing has been counted since.
        self._metrics_acc = [0] * 8
        self._metrics_loaded: int | None = None
        self._metrics_src: EnabledCounter | None = None  # fixed counter 3 while it feeds PERF_METRICS
        self.gp_mask = (1 << cfg.gp_width) - 1
        self.fixed_mask = (1 << cfg.fixed_width) - 1
        self.regs = registers.register_map(cfg.version)
        self._registers = register_table(cfg)
        # The registers that decide which counters count (_enabled_counters): a write elsewhere (a counter value,
        # PERF_METRICS, a status bit: a sampler's every interval) keeps the counters built.
        self._enabling = frozenset(
            [a for a, (kind, _) in self._registers.items() if kind == EVTSEL]
            + [registers.IA32_FIXED_CTR_CTRL, registers.IA32_PERF_GLOBAL_CTRL]
        )
        # The other registers a read answers, built once (not per read).
        self._readers: dict[int, Callable[[], int]] = {
            registers.IA32_TIME_STAMP_COUNTER: self.tsc,
            registers.IA32_PERF_CAPABILITIES: lambda: (
                (registers.PERF_CAP_FW_WRITE if cfg.full_width_writes else 0)
                | (registers.PERF_CAP_PERF_METRICS if self.metrics_fields else 0)
            ),
            registers.IA32_FIXED_CTR_CTRL: lambda: self.fixed_ctrl,
            registers.IA32_PERF_GLOBAL_STATUS: lambda: self.status,
            registers.IA32_PERF_GLOBAL_CTRL: lambda: self.global_ctrl,
            registers.IA32_PERF_GLOBAL_STATUS_RESET: lambda: 0,
        }
        if cfg.version >= 4:
            self._readers[registers.IA32_PERF_GLOBAL_STATUS_SET] = lambda: 0  # write-only
            self._readers[registers.IA32_PERF_GLOBAL_INUSE] = self._inuse
        if self.metrics_fields:
            self._readers[registers.MSR_PERF_METRICS] = self._perf_metrics
        # Registers whose value does not move with time: reading them needs no advance. Counting is additive
        # (a counter adds fn(new) - fn(old)), so fewer, longer advances give exactly the same counts.
        self._static = frozenset(
            [a for a, (kind, _) in self._registers.items() if kind == EVTSEL]
            + [
                a
                for a in self._readers
                if a
                not in (
                    registers.IA32_TIME_STAMP_COUNTER,
                    registers.IA32_PERF_GLOBAL_STATUS,
                    registers.MSR_PERF_METRICS,
                )
            ]
        )

        self._values = frozenset(a for a, (kind, _) in self._registers.items() if kind != EVTSEL)  # counters
        # Registers whose value is the counters' state at the present: reading them counts up to now.
        self._counting = frozenset(
            [a for a, (kind, _) in self._registers.items() if kind != EVTSEL]
            + [registers.IA32_PERF_GLOBAL_STATUS, registers.MSR_PERF_METRICS]
        )

    # -- counting -----------------------------------------------------------------------------------

    def _now(self) -> int:
        """The present for this CPU's registers: the clock's, or the instant a sample is being taken at."""
        instant = self._instant
        return max(self.machine.elapsed_ns(), self._t) if instant is None else instant

    def instant(self) -> _Instant:
        """Every register read or written inside happens at the instant it starts (one evaluation of the
        workload serves them all): a sampler's reads of one CPU, which real hardware answers within a microsecond
        or two, and the simulator in some tens of microseconds of the clock."""
        return self._instant_scope

    def _begin_instant(self) -> None:
        with self.lock:
            self._instant = self._now()

    def _end_instant(self) -> None:
        self._instant = None

    def _frozen(self) -> bool:
        return self.cfg.version >= 4 and bool(self.status & registers.STATUS_CTR_FRZ)

    def _active(self) -> list[EnabledCounter]:
        """Counters that count right now (per-counter enable AND global enable AND not frozen)."""
        if self._frozen():
            return []
        if self._enabled is None:
            self._enabled = self._enabled_counters()
            self._pmi = [c for c in self._enabled if c.pmi]
        return self._enabled

    def _enabled_counters(self) -> list[EnabledCounter]:
        out: list[EnabledCounter] = []
        self._metrics_src = None
        freeze_on_pmi = self.cfg.version >= 4
        for i, sel in enumerate(self.evtsel):
            if (
                sel & registers.EVTSEL_EN
                and self.global_ctrl & registers.gp_bit(i)
                and sel & (registers.EVTSEL_USR | registers.EVTSEL_OS)
            ):
                out.append(
                    EnabledCounter(
                        event_fn(sel, self.cfg.tsc_hz, self.core.events),
                        bool(sel & registers.EVTSEL_USR),
                        bool(sel & registers.EVTSEL_OS),
                        freeze_on_pmi and bool(sel & registers.EVTSEL_INT),
                        self.cfg.gp_width,
                        registers.gp_bit(i),
                        self.gp,
                        i,
                    )
                )
        for i in range(self.cfg.fixed_counters):
            nib = registers.fixed_ctrl_nibble(self.fixed_ctrl, i)
            if nib & _FIXED_ENABLE and self.global_ctrl & registers.fixed_bit(i):
                out.append(
                    EnabledCounter(
                        FIXED_FNS[i],
                        bool(nib & registers.FIXED_EN_USR),
                        bool(nib & registers.FIXED_EN_OS),
                        freeze_on_pmi and bool(nib & registers.FIXED_PMI),
                        self.cfg.fixed_width,
                        registers.fixed_bit(i),
                        self.fixed,
                        i,
                    )
                )
                if i == 3 and self.metrics_fields and self.global_ctrl & registers.GLOBAL_CTRL_EN_PERF_METRICS:
                    self._metrics_src = out[-1]
        return out

    def _advance(self, now: int | None = None) -> None:
        """Bring counters and status up to the clock's present (`now`, when the caller has read it)."""
        if now is None:
            now = self._now()
        if now == self._t:
            return
        new = self.workload.cumulative(now)
        active = self._active()
        pmi = self._pmi if active else []
        if pmi and self._pmi_overflows(pmi, new):
            # Freeze where the overflow happened: count up to that instant, then nothing more.
            lo, hi = self._t, now
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if self._pmi_overflows(pmi, self.workload.cumulative(mid)):
                    hi = mid
                else:
                    lo = mid
            self._count(active, self.workload.cumulative(hi))
            active = []
        self._count(active, new)
        self._t = now
        self._cum = new
        self._room = None

    def _pmi_overflows(self, pmi: list[EnabledCounter], new: Counts) -> bool:
        return any((c.read() + c.delta(self._cum, new)) >> c.width for c in pmi)

    def _count(self, active: list[EnabledCounter], new: Counts) -> None:
        src = self._metrics_src
        old = self._cum
        # EnabledCounter.delta inlined: this runs for every enabled counter on every register access. What each quantity
        # grew by, per mode, once: an event counting one quantity as it is counts just that.
        old_user, old_kernel, new_user, new_kernel = old.user, old.kernel, new.user, new.kernel
        grown_user = list(map(operator.sub, new_user, old_user))
        grown_kernel = list(map(operator.sub, new_kernel, old_kernel))
        for c in active:
            f = c.field
            if f is not None:
                d = (grown_user[f] if c.user else 0) + (grown_kernel[f] if c.kernel else 0)
            else:
                fn = c.fn
                d = fn(new_user) - fn(old_user) if c.user else 0
                if c.kernel:
                    d += fn(new_kernel) - fn(old_kernel)
            value = c.regs[c.index] + d
            if value >> c.width:
                self.status |= c.status_bit
                if c.pmi:
                    self.status |= registers.STATUS_CTR_FRZ
                if c is src:
                    self.status |= registers.STATUS_PERF_METRICS_OVF
                value &= (1 << c.width) - 1
            c.regs[c.index] = value
            if c is src:
                self._count_metrics(c, grown_user, grown_kernel)
        self._cum = new

    def _metrics_added(self, counter: EnabledCounter, grown_user: list[int], grown_kernel: list[int]) -> list[int]:
        """Slots per top-down category since the last count, in the modes fixed counter 3 counts, from what each
        quantity grew by per mode."""
        tds = range(_TD_FIRST, _TD_FIRST + self.metrics_fields)  # td_* fields are adjacent in Amounts
        if counter.user and counter.kernel:
            return [grown_user[i] + grown_kernel[i] for i in tds]
        grown = grown_user if counter.user else grown_kernel
        return [grown[i] for i in tds]

    def _count_metrics(self, counter: EnabledCounter, grown_user: list[int], grown_kernel: list[int]) -> None:
        """PERF_METRICS follows fixed counter 3: the same slots, split by category (same USR/OS)."""
        added = self._metrics_added(counter, grown_user, grown_kernel)
        if any(added):  # every part is >= 0: a sum of 0 added nothing
            acc = self._metrics_acc
            acc[: len(added)] = map(operator.add, acc, map(_TIMES_255, added))
            self._metrics_loaded = None

    def _perf_metrics(self) -> int:
        if self._metrics_loaded is not None:
            return self._metrics_loaded
        acc = self._metrics_acc
        total = acc[0] + acc[1] + acc[2] + acc[3]
        if not total:
            return 0
        twice = 2 * total
        # min(255, round half up of 255 x acc / total) per byte, as the bytes of one little-endian integer.
        shares = [(510 * a + total) // twice for a in acc[: self.metrics_fields]]
        return int.from_bytes(bytes(x if x < 255 else 255 for x in shares), "little")

    def _write_perf_metrics(self, value: int) -> bool:
        if value >> 8 * self.metrics_fields:
            return False  # reserved bytes (level 2 on a level-1 part)
        if value == 0:
            self._metrics_acc = [0] * 8
            self._metrics_loaded = None
            return True
        # A loaded value is the fractions of the slots fixed counter 3 holds now (Linux restores a context by
        # writing fixed counter 3, then PERF_METRICS).
        weight = max(self.fixed[3], 1)
        self._metrics_acc = [(value >> 8 * k & 0xFF) * weight for k in range(8)]
        self._metrics_loaded = value
        return True

    # -- registers ----------------------------------------------------------------------------------

    def _inuse(self) -> int:
        value = 0
        pmi = False
        for i, sel in enumerate(self.evtsel):
            if sel & registers.EVTSEL_EVENT_MASK:
                value |= registers.gp_bit(i)
            pmi |= bool(sel & registers.EVTSEL_INT)
        for i in range(self.cfg.fixed_counters):
            nib = registers.fixed_ctrl_nibble(self.fixed_ctrl, i)
            if nib & _FIXED_ENABLE:
                value |= registers.fixed_bit(i)
            pmi |= bool(nib & registers.FIXED_PMI)
        return value | (registers.INUSE_PMI if pmi else 0)

    def tsc(self) -> int:
        return self.workload.ticks(self._t)

    @property
    def advanced(self) -> bool:
        """Whether anything has read or written this CPU's counting registers yet."""
        return self._t > 0

    @property
    def cum(self) -> Counts:
        """What this CPU has run up to its latest register access."""
        return self._cum

    @property
    def time_ns(self) -> int:
        """The time (ns since machine start) this CPU's counters have been brought up to."""
        return self._t

    def replace_workload(self, workload: Workload) -> None:
        """Count from `workload` from now on (pmutop.sim.model.SimMachine.replace_workload)."""
        with self.lock:
            self._advance()
            self.workload = workload
            self._cum = workload.cumulative(self._t)
            self._rate = rate_bound(workload)

    def _status_settled(self, now: int | None = None) -> bool:
        """Whether GLOBAL_STATUS reads now what it read at the last advance: only a counter's wrap changes it, and
        no enabled counter can reach its wrap before now (counting is additive: the next advance counts this
        stretch all the same). Saves counting up to the present for the overflow check of every sample."""
        rate = self._rate
        if rate is None:
            return False
        elapsed = (self._now() if now is None else now) - self._t
        if elapsed <= 0:
            return True  # counted up to now already (the rest of a sample taken at one instant)
        room = self._room
        if room is None:
            room = self._room = min(((1 << c.width) - c.regs[c.index] for c in self._active()), default=1 << 64)
        # + 2 ns and 16 events: the floors of interpolating within a segment and of the events' fractions.
        return rate * (elapsed + 2) + 16 < room

    def read(self, address: int) -> int:
        with self.lock:
            value = self._read(address) if address in self._static else self._read_at(address, self._now())
        if value is None:
            raise MsrAccessError(self.cpu, address, "read", errno.EIO)
        return value

    def read_many(self, addresses: tuple[int, ...]) -> list[int | None]:
        """Several registers at one instant (pmutop.hw.msr.MsrDevice.read_many), None for one that does not
        exist: the frequency and idle registers' one evaluation of the workload serves them all."""
        with self.lock:
            now = self._now()
            return [self._read(a) if a in self._static else self._read_at(a, now) for a in addresses]

    def _read_at(self, address: int, now: int) -> int | None:
        if address in self._counting:
            if address != _STATUS or not self._status_settled(now):
                self._advance(now)
            return self._read(address)
        # The TSC and the power model's registers are functions of the present alone: read there without bringing
        # the counters up to it (counting is additive: their next access counts the same).
        if address == registers.IA32_TIME_STAMP_COUNTER:
            return self.workload.ticks(now)
        return power.read(self, address, now)

    def _read(self, address: int) -> int | None:
        reg = self._registers.get(address)
        if reg is not None:
            kind, i = reg
            if kind == EVTSEL:
                return self.evtsel[i]
            return self.fixed[i] if kind == FIXED else self.gp[i]
        reader = self._readers.get(address)
        return power.read(self, address, self._t) if reader is None else reader()

    def write(self, address: int, value: int) -> None:
        with self.lock:
            now = self._now()
            # A counter's value, or PERF_METRICS zeroed (after every read on top-down parts), changes nothing else:
            # while no counter can wrap meanwhile, only what the write discards is taken out (_rebase), rather
            # than counting every counter up to now.
            rebase = (
                now != self._t
                and (address in self._values or (address == registers.MSR_PERF_METRICS and value == 0))
                and self._status_settled(now)
            )
            if not rebase:
                self._advance(now)  # count up to now under the old configuration
            if not self._write(address, value):
                raise MsrAccessError(self.cpu, address, "write", errno.EIO)
            if rebase:
                self._rebase(address, now)
            if address in self._enabling:
                self._enabled = None
            self._room = None  # a counter's value, its enable or the freeze may have changed

    def _rebase(self, address: int, now: int) -> None:
        """After writing a counter's value (or zeroing PERF_METRICS) at `now`, past the last advance: take out what
        the next advance will count for it between the last advance and now, which the write discarded."""
        new = self.workload.cumulative(now)
        active = self._active()
        if address == registers.MSR_PERF_METRICS:
            src = self._metrics_src if active else None  # frozen: PERF_METRICS counts nothing meanwhile
            if src is not None:
                old = self._cum
                grown_user = list(map(operator.sub, new.user, old.user))
                grown_kernel = list(map(operator.sub, new.kernel, old.kernel))
                added = self._metrics_added(src, grown_user, grown_kernel)
                self._metrics_acc[: len(added)] = map(_TIMES_MINUS_255, added)
            return
        kind, i = self._registers[address]
        regs = self.fixed if kind == FIXED else self.gp
        for c in active:
            if c.regs is regs and c.index == i:
                regs[i] -= c.delta(self._cum, new)

    def _write(self, address: int, value: int) -> bool:
        """Apply a WRMSR; False means #GP (nothing changed)."""
        cfg = self.cfg
        kind, i = self._registers.get(address, (None, 0))
        if kind == EVTSEL:
            if value >> 32 or (cfg.version >= 5 and value & registers.EVTSEL_ANY):
                return False
            self.evtsel[i] = value
            return True
        if kind == PMC_V6 and cfg.full_width_writes:
            kind = PMC_FULL
        if kind in (PMC_SIGN_EXTEND, PMC_V6):
            self.gp[i] = registers.sign_extend_legacy_pmc_write(value, cfg.gp_width)
            return True
        if kind == PMC_FULL:
            if not cfg.full_width_writes or value > self.gp_mask:
                return False
            self.gp[i] = value
            return True
        if kind == FIXED:
            if value > self.fixed_mask:
                return False
            self.fixed[i] = value
            return True
        if address == registers.IA32_FIXED_CTR_CTRL:
            any_bits = sum(registers.FIXED_ANY << 4 * i for i in range(cfg.fixed_counters))
            if value >> 4 * cfg.fixed_counters or (cfg.version >= 5 and value & any_bits):
                return False
            self.fixed_ctrl = value
            return True
        if address == registers.IA32_PERF_GLOBAL_CTRL:
            if value & ~self.global_ctrl_valid:
                return False
            self.global_ctrl = value
            return True
        if address == registers.IA32_PERF_GLOBAL_STATUS_RESET:
            if value & ~self.status_valid:
                return False
            self.status &= ~value  # write-1-to-clear
            return True
        if address == registers.MSR_PERF_METRICS and self.metrics_fields:
            return self._write_perf_metrics(value)
        if address == registers.IA32_PERF_GLOBAL_STATUS_SET and cfg.version >= 4:
            if value & ~self.status_valid:
                return False
            self.status |= value
            return True
        return False  # read-only (TSC, capabilities, status, INUSE) or not implemented

    def set_status_bits(self, bits: int) -> None:
        with self.lock:
            self._advance()
            if bits & ~self.status_valid:
                raise ValueError(f"status bits {bits & ~self.status_valid:#x} do not exist on this PMU")
            self.status |= bits
            self._room = None  # CTR_FRZ stops every counter

    def snapshot(self) -> dict[int, int]:
        with self.lock:
            self._advance()
            regs = {self.regs.evtsel(i): v for i, v in enumerate(self.evtsel)}
            regs[registers.IA32_FIXED_CTR_CTRL] = self.fixed_ctrl
            regs[registers.IA32_PERF_GLOBAL_CTRL] = self.global_ctrl
            regs[registers.IA32_PERF_GLOBAL_STATUS] = self.status
            return regs

    # -- rdpmc --------------------------------------------------------------------------------------

    def _rdpmc(self, ecx: int) -> int:
        if not self.cfg.rdpmc_enabled:
            raise SimRdpmcFault(f"cpu {self.cpu}: rdpmc with CR4.PCE clear")
        kind, index = ecx >> 16, ecx & 0xFFFF
        if kind == _RDPMC_TYPE_GP and index < self.cfg.gp_counters:
            return self.gp[index]
        if kind == _RDPMC_TYPE_FIXED and index < self.cfg.fixed_counters:
            return self.fixed[index]
        if kind == _RDPMC_TYPE_METRICS and index == 0 and self.metrics_fields:
            return self._perf_metrics()
        raise SimRdpmcFault(f"cpu {self.cpu}: rdpmc ecx={ecx:#x} is not a counter")

    def rdpmc(self, ecx: int) -> int:
        if not 0 <= ecx < 1 << 32:
            raise SimRdpmcFault(f"cpu {self.cpu}: rdpmc ecx={ecx:#x} out of range")
        with self.lock:
            self._advance()
            return self._rdpmc(ecx)

    def read_counters(self, n_fixed: int, n_gp: int, metrics: bool = False) -> tuple[int, list[int]]:
        cfg = self.cfg
        with self.lock:
            self._advance()
            if cfg.rdpmc_enabled and n_fixed <= cfg.fixed_counters and n_gp <= cfg.gp_counters:
                values = self.fixed[:n_fixed] + self.gp[:n_gp]  # what _rdpmc answers for each of them
            else:  # one of them faults: as rdpmc by rdpmc
                values = [self._rdpmc(_RDPMC_TYPE_FIXED << 16 | i) for i in range(n_fixed)]
                values += [self._rdpmc(_RDPMC_TYPE_GP << 16 | i) for i in range(n_gp)]
            if metrics:
                values.append(self._rdpmc(_RDPMC_TYPE_METRICS << 16))
            tsc = self.tsc()
            self.counter_reads.append(tsc)
            return tsc, values
