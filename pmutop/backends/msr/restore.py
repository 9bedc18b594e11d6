"""Putting one CPU's PMU registers back: the record of what was there and what we wrote, and the undo.

The same record and the same `restore_cpu` serve the normal way out and the recovery of a run that
was killed (the record is kept in the run's state file), so both put back exactly the same things.

Rules (reference sections 2.2-2.6):
* A counter another agent reprogrammed during the run (its event select, or its FIXED_CTR_CTRL nibble,
  no longer holds a value we wrote) is left as that agent left it, and so is its GLOBAL_CTRL bit.
* GLOBAL_CTRL and FIXED_CTR_CTRL are shared: only our counters' bits are changed, read-modify-write.
* Every step is tried even when an earlier one failed, and a write is tried even when the read that
  would have checked it failed (an MSR read can fail where the write still works).
* Our GLOBAL_CTRL bits go off first and come back last.
* Top-down (PERF_METRICS): fixed counter 3 is one of the fixed records; PERF_METRICS is written back right
  after it (Linux writes fixed counter 3 before PERF_METRICS, whose fractions refer to it), and GLOBAL_CTRL
  bit 48 is ours with it. Both stay as found when another agent took fixed counter 3 over.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pmutop.core.errors import HardwareError
from pmutop.core.undo import RestoreResult
from pmutop.hw.msr import MsrDevice
from pmutop.pmu import registers

STATUS_RESET = registers.IA32_PERF_GLOBAL_STATUS_RESET


@dataclass(frozen=True)
class GpRecord:
    index: int
    evtsel: int  # address of its event select
    counter: int  # address its saved value is written back to (legacy IA32_PMCx or full-width)
    sign_extends: bool  # the counter address is legacy IA32_PMCx: writes sign-extend bit 31
    width: int
    saved_evtsel: int
    saved_count: int
    ours: tuple[int, ...]  # every event select value this run may have written (rotation groups, 0)


@dataclass(frozen=True)
class FixedRecord:
    index: int
    counter: int
    width: int
    saved_count: int
    nibble: int  # our FIXED_CTR_CTRL field for this counter


@dataclass(frozen=True)
class CpuRecord:
    cpu: int
    gp: tuple[GpRecord, ...]
    fixed: tuple[FixedRecord, ...]
    saved_fixed_ctrl: int
    saved_global_ctrl: int
    status_writable: int  # bits of 0x390 that exist on this PMU
    # PERF_METRICS before the run, when the run enabled it (GLOBAL_CTRL bit 48); None otherwise and in state
    # files of runs that predate top-down.
    saved_perf_metrics: int | None = None

    @property
    def global_bits(self) -> int:
        bits = registers.global_ctrl_mask([g.index for g in self.gp], [f.index for f in self.fixed])
        return bits | (registers.GLOBAL_CTRL_EN_PERF_METRICS if self.saved_perf_metrics is not None else 0)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CpuRecord:
        return cls(
            cpu=int(data["cpu"]),
            gp=tuple(GpRecord(**{**g, "ours": tuple(g["ours"])}) for g in data["gp"]),
            fixed=tuple(FixedRecord(**f) for f in data["fixed"]),
            saved_fixed_ctrl=int(data["saved_fixed_ctrl"]),
            saved_global_ctrl=int(data["saved_global_ctrl"]),
            status_writable=int(data["status_writable"]),
            saved_perf_metrics=None if data.get("saved_perf_metrics") is None else int(data["saved_perf_metrics"]),
        )


def _read(dev: MsrDevice, address: int) -> int | None:
    try:
        return dev.read(address)
    except HardwareError:
        return None


def restore_cpu(dev: MsrDevice, rec: CpuRecord) -> RestoreResult:
    out = _restore_cpu(dev, rec)
    if out.failures:
        out.failed_cpus.add(rec.cpu)
    return out


def _restore_cpu(dev: MsrDevice, rec: CpuRecord) -> RestoreResult:
    out = RestoreResult()
    fixed_nibbles = {f.index: (0xF << 4 * f.index) for f in rec.fixed}

    def put(address: int, value: int) -> None:
        try:
            dev.write(address, value)
        except HardwareError as e:
            out.failures.append(str(e))

    # Which of our counters another agent has taken over since (left as that agent set them).
    taken: list[str] = []
    gp = []
    for g in rec.gp:
        now = _read(dev, g.evtsel)
        if now is not None and now not in g.ours:
            taken.append(registers.msr_name(g.evtsel))
        else:
            gp.append(g)
    fixed_ctrl_now = _read(dev, registers.IA32_FIXED_CTR_CTRL)
    fixed = []
    for f in rec.fixed:
        if fixed_ctrl_now is not None and registers.fixed_ctrl_nibble(fixed_ctrl_now, f.index) not in (f.nibble, 0):
            taken.append(f"IA32_FIXED_CTR{f.index} (in IA32_FIXED_CTR_CTRL)")
        else:
            fixed.append(f)
    if taken:
        out.notes.append(
            f"cpu {rec.cpu}: {', '.join(taken)} reprogrammed by another agent during the run; left as found"
        )
    ours = registers.global_ctrl_mask([g.index for g in gp], [f.index for f in fixed])
    # PERF_METRICS goes with fixed counter 3: ours only while that counter still is.
    metrics = rec.saved_perf_metrics is not None and any(f.index == 3 for f in fixed)
    if metrics:
        ours |= registers.GLOBAL_CTRL_EN_PERF_METRICS
    if not ours:
        return out

    glob = _read(dev, registers.IA32_PERF_GLOBAL_CTRL)
    put(registers.IA32_PERF_GLOBAL_CTRL, (rec.saved_global_ctrl if glob is None else glob) & ~ours)
    for g in gp:
        put(g.evtsel, 0)  # EN off before the counter is written (SDM)
        value = g.saved_count & ((1 << g.width) - 1)
        if g.sign_extends and registers.sign_extend_legacy_pmc_write(value, g.width) != value:
            out.notes.append(
                f"cpu {rec.cpu}: {registers.msr_name(g.counter)} left at 0"
                f" (its old value {value:#x} needs full-width writes)"
            )
            value = 0
        put(g.counter, value)
    for f in fixed:
        put(f.counter, f.saved_count & ((1 << f.width) - 1))
    if metrics:
        assert rec.saved_perf_metrics is not None
        put(registers.MSR_PERF_METRICS, rec.saved_perf_metrics)  # after fixed counter 3 (its fractions refer to it)
    for g in gp:
        put(g.evtsel, g.saved_evtsel)
    if fixed:
        mask = sum(fixed_nibbles[f.index] for f in fixed)
        base = rec.saved_fixed_ctrl if fixed_ctrl_now is None else _read(dev, registers.IA32_FIXED_CTR_CTRL)
        base = rec.saved_fixed_ctrl if base is None else base
        put(registers.IA32_FIXED_CTR_CTRL, (base & ~mask) | (rec.saved_fixed_ctrl & mask))
    status = _read(dev, registers.IA32_PERF_GLOBAL_STATUS)
    clear = (ours if status is None else status & ours) & rec.status_writable
    if clear:
        put(STATUS_RESET, clear)  # write-1-to-clear: only our counters' overflow bits
    glob = _read(dev, registers.IA32_PERF_GLOBAL_CTRL)
    base = rec.saved_global_ctrl if glob is None else glob
    put(registers.IA32_PERF_GLOBAL_CTRL, (base & ~ours) | (rec.saved_global_ctrl & ours))
    return out
