"""DRAM bandwidth per package and channel from the kernel's memory-controller (uncore) PMUs.

The plan: pmutop's own event table for the CPU model (pmu/dram_events.py), encoded with each PMU's sysfs
`format/`, opened on the CPU of its `cpumask` (pid -1, no exclude bits, no sampling: uncore PMUs refuse
both). The reader turns counts into bytes (× 64, never × sysfs `.scale` as well) and rates over the measured
interval. These are separate hardware units: they work beside either core backend. Counting them is a
CPU-wide event, so it needs root, CAP_PERFMON or perf_event_paranoid ≤ 0. Where nothing can count, the
source is "none" with the reason; nothing is made up.
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pmutop.core.dram_reading import (
    BYTES_PER_LINE,
    SOURCE_NONE,
    SOURCE_UNCORE,
    DramReading,
    PackageDram,
    package_totals,
)
from pmutop.core.errors import PmutopError
from pmutop.core.sysroot import Sysroot
from pmutop.hw.perf_event import (
    PERF_FLAG_FD_CLOEXEC,
    PERF_FORMAT_TOTAL_TIME_ENABLED,
    PERF_FORMAT_TOTAL_TIME_RUNNING,
    PerfOpenError,
    encode_with_format,
    explain_open_error,
    list_pmus,
    make_attr,
    perf_event_open,
    read_paranoid,
)
from pmutop.hw.perf_event.uncore import UncoreInstance, event_scale, event_terms, uncore_instances
from pmutop.pmu.dram_events import DramEvent, DramSpec, dram_spec
from pmutop.probes.memory_speed import MemorySpeed, package_peak, read_memory_speed

_UNCORE_PREFIXES = ("uncore_", "amd_umc", "amd_df")
_NO_UNCORE = (
    "no memory-controller PMU in sysfs (sys/bus/event_source/devices): a VM exposes none, "
    "or the kernel lacks the uncore driver for this CPU"
)
Config = tuple[int, int, int]  # perf_event_attr (config, config1, config2)
Opener = Callable[..., int]  # perf_event_open's signature (tests give a fake kernel)
_READ_FORMAT = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
_U64 = 1 << 64
_MIB = 1 << 20


@dataclass(frozen=True)
class ChannelPlan:
    """One memory channel to count: an uncore PMU on one CPU of its cpumask, and its events per direction."""

    pmu: str
    type: int
    cpu: int
    package: int
    channel: int  # index within the package
    read: tuple[Config, ...]
    write: tuple[Config, ...]


@dataclass
class DramPlan:
    """What `pmutop info` reports and the reader opens: the source, why (or why not), the channels, notes."""

    source: str
    why: str
    table: str | None = None
    channels: list[ChannelPlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    saturating_bits: int | None = None

    @property
    def packages(self) -> list[int]:
        return sorted({c.package for c in self.channels})

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "why": self.why,
            "table": self.table,
            "channels": [
                {
                    "pmu": c.pmu,
                    "package": c.package,
                    "cpu": c.cpu,
                    "type": c.type,
                    "read": [cfg[0] for cfg in c.read],
                    "write": [cfg[0] for cfg in c.write],
                    "bytes_per_count": BYTES_PER_LINE,
                }
                for c in self.channels
            ],
            "notes": list(self.notes),
        }


def unavailable(why: str) -> DramPlan:
    return DramPlan(SOURCE_NONE, why)


def plan_dram(sysroot: Sysroot, vendor: str | None, family: int | None, model: int | None) -> DramPlan:
    """Which memory-controller counters measure DRAM traffic on this machine, or why none can."""
    if vendor is None or family is None or model is None:
        return unavailable("the CPU model is unknown (CPUID unreadable), so pmutop cannot pick its memory events")
    spec = dram_spec(vendor, family, model)
    if spec is None and not any(name.startswith(_UNCORE_PREFIXES) for name in list_pmus(sysroot)):
        return unavailable(_NO_UNCORE)
    if spec is None:
        return unavailable(
            f"pmutop has no memory-controller events for {vendor} family {family:#x} model {model:#x}"
            " (no uncore DRAM table for this CPU)"
        )
    instances = uncore_instances(sysroot, spec.pmu_regex())
    if not instances:
        return unavailable(f"{_NO_UNCORE} (looked for {spec.name} PMUs matching {spec.pmu_pattern!r})")
    notes: list[str] = []
    channels: list[ChannelPlan] = []
    per_package: dict[int, int] = {}
    problems: list[str] = []
    for inst in instances:
        if inst.package is None:
            problems.append(f"{inst.pmu}: the package of cpu {inst.cpu} is unreadable")
            continue
        try:
            read = tuple(_encode(inst, ev) for ev in spec.read)
            write = tuple(_encode(inst, ev) for ev in spec.write)
        except ValueError as e:
            problems.append(f"{inst.pmu}: {e}")
            continue
        channel = per_package.get(inst.package, 0)
        per_package[inst.package] = channel + 1
        channels.append(ChannelPlan(inst.pmu, inst.type, inst.cpu, inst.package, channel, read, write))
    if not channels:
        return DramPlan(SOURCE_NONE, "the memory-controller PMUs cannot be used: " + "; ".join(problems[:3]))
    notes.extend(problems[:3])
    notes.extend(_kernel_disagreements(sysroot, spec, instances[0].pmu))
    packages = len(per_package)
    why = (
        f"{len(channels)} memory channel{'s' * (len(channels) != 1)} on {packages} "
        f"package{'s' * (packages != 1)}: {spec.name} table ({instances[0].pmu} ...), 64 bytes a count"
    )
    if spec.saturating_bits:
        why += f"; the counters saturate at 2^{spec.saturating_bits}: pmutop flags and reopens them"
    return DramPlan(SOURCE_UNCORE, why, spec.key, channels, notes, spec.saturating_bits)


def _encode(inst: UncoreInstance, event: DramEvent) -> Config:
    return encode_with_format(event.terms, inst.formats)


def _kernel_disagreements(sysroot: Sysroot, spec: DramSpec, pmu: str) -> list[str]:
    """One line when the kernel's sysfs events/ names these events differently from the table (pmutop uses its
    table), and one when a sysfs `.scale` is not the 64 bytes a count pmutop applies (read, never applied)."""
    known = event_terms(sysroot, pmu)
    wrong: list[str] = []
    missing: list[str] = []
    for event in (*spec.read, *spec.write):
        if event.sysfs_name is None:
            continue
        terms = known.get(event.sysfs_name)
        if terms is None:
            if known:  # a PMU listing no events at all is not a disagreement
                missing.append(event.sysfs_name)
        elif {k: v for k, v in terms.items() if v} != {k: v for k, v in event.terms.items() if v}:
            wrong.append(f"{event.sysfs_name} is {_terms_text(terms)} in sysfs, {_terms_text(event.terms)} here")
    notes: list[str] = []
    if wrong or missing:
        parts = wrong + ([f"sysfs lacks {', '.join(missing)}"] if missing else [])
        line = f"{pmu}: the kernel's events/ disagree with pmutop's table ({'; '.join(parts)}); pmutop uses its table"
        if spec.kernel_note:
            line += f" ({spec.kernel_note})"
        notes.append(line)
    for event in (*spec.read, *spec.write):
        if event.sysfs_name is None:
            continue
        scale, unit = event_scale(sysroot, pmu, event.sysfs_name)
        if scale is not None and unit == "MiB" and abs(scale * _MIB - BYTES_PER_LINE) > 1e-6:
            notes.append(
                f"{pmu}: sysfs {event.sysfs_name}.scale is {scale:g} MiB, not 64 bytes; pmutop counts 64 bytes a "
                "count (the scale is never applied on top)"
            )
            break
    return notes


def _terms_text(terms: Mapping[str, int]) -> str:
    return ",".join(f"{k}={v:#x}" for k, v in terms.items() if v)


# --- reading -------------------------------------------------------------------------------------------------


class _Counter:
    """One event of one channel: its fd and the last (value, enabled, running) read from it."""

    def __init__(self, attr_type: int, config: Config, cpu: int) -> None:
        self.attr_type = attr_type
        self.config = config
        self.cpu = cpu
        self.fd = -1
        self.prev = (0, 0, 0)


class DramCounters:
    """Opens a plan's counters and reads them once per interval: `read()` gives one PackageDram per package
    (bytes and bytes/s over the measured interval, per channel and summed).

    Deltas are taken modulo 2^64: the kernel widens every uncore counter (32-bit client free-running ones too,
    with its hrtimer: Linux uncore.c uncore_perf_event_update) to a 64-bit count. A saturating counter (AMD UMC,
    `plan.saturating_bits`) that sticks at its ceiling marks its channel saturated (the bytes are then a lower
    bound); such a counter is reopened (which zeroes it) before it can get there, losing only the traffic of
    the microseconds between a read and the reopen."""

    def __init__(
        self,
        plan: DramPlan,
        *,
        sysroot: Sysroot | None = None,
        mem_peak_gbs: float | None = None,
        memory_speed: MemorySpeed | None = None,
        opener: Opener = perf_event_open,
        read_fd: Callable[[int, int], bytes] = os.read,
        close_fd: Callable[[int], None] = os.close,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if plan.source != SOURCE_UNCORE:
            raise PmutopError(f"DRAM bandwidth: {plan.why}")
        self.plan = plan
        self._opener = opener
        self._read_fd = read_fd
        self._close_fd = close_fd
        self._clock = clock
        self._sysroot = sysroot or Sysroot("/")
        self._counters: list[tuple[list[_Counter], list[_Counter]]] = []
        self._at = 0.0
        speed = memory_speed
        if speed is None and mem_peak_gbs is None:
            speed = read_memory_speed(self._sysroot)
        speed = speed or MemorySpeed(None, 0, "--mem-peak given")
        packages = plan.packages
        self.peaks = {
            pkg: package_peak(sum(c.package == pkg for c in plan.channels), len(packages), speed, mem_peak_gbs)
            for pkg in packages
        }
        self.memory_speed = speed
        self._ceiling = (1 << plan.saturating_bits) - 1 if plan.saturating_bits else None

    @property
    def source(self) -> str:
        return self.plan.source

    @property
    def why(self) -> str:
        return self.plan.why

    def open(self) -> None:
        """Open every counter; one clear line (PmutopError) when the kernel refuses, with nothing left open."""
        try:
            for ch in self.plan.channels:
                reads = [self._open(ch, cfg) for cfg in ch.read]
                writes = [self._open(ch, cfg) for cfg in ch.write]
                self._counters.append((reads, writes))
        except BaseException:
            self.close()
            raise
        for reads, writes in self._counters:
            for counter in (*reads, *writes):
                counter.prev = self._value(counter)
        self._at = self._clock()

    def _open(self, ch: ChannelPlan, config: Config) -> _Counter:
        counter = _Counter(ch.type, config, ch.cpu)
        self._open_fd(counter, ch.pmu)
        return counter

    def _open_fd(self, counter: _Counter, pmu: str) -> None:
        config, config1, config2 = counter.config
        # Uncore PMUs count everything on their unit: no exclude bits (exclude_hv is make_attr's default).
        attr = make_attr(
            counter.attr_type, config, config1=config1, config2=config2, read_format=_READ_FORMAT, exclude_hv=False
        )
        try:
            counter.fd = self._opener(attr, -1, counter.cpu, -1, PERF_FLAG_FD_CLOEXEC)
        except PerfOpenError as e:
            line = explain_open_error(
                e.errno,
                event=f"{pmu} config {config:#x}",
                cpu=counter.cpu,
                paranoid=read_paranoid(self._sysroot),
                root=os.geteuid() == 0,
            )
            raise PmutopError(f"DRAM bandwidth: {line}") from None

    def _value(self, counter: _Counter) -> tuple[int, int, int]:
        try:
            data = self._read_fd(counter.fd, 24)
        except OSError as e:
            raise PmutopError(f"DRAM bandwidth: reading cpu {counter.cpu}'s counter failed: {e.strerror}") from None
        if len(data) != 24:
            raise PmutopError(f"DRAM bandwidth: a counter read returned {len(data)} bytes, expected 24")
        value, enabled, running = struct.unpack("=3Q", data)
        return value, enabled, running

    def read(self) -> list[PackageDram]:
        """Every channel since the previous read (or the open), summed per package."""
        now = self._clock()
        interval = now - self._at
        self._at = now
        by_package: dict[int, list[DramReading]] = {}
        for ch, (reads, writes) in zip(self.plan.channels, self._counters, strict=True):
            read_lines, read_sat = self._lines(reads, ch.pmu)
            write_lines, write_sat = self._lines(writes, ch.pmu)
            by_package.setdefault(ch.package, []).append(
                DramReading(
                    ch.pmu,
                    ch.package,
                    ch.channel,
                    None if read_lines is None else read_lines * BYTES_PER_LINE,
                    None if write_lines is None else write_lines * BYTES_PER_LINE,
                    interval,
                    read_sat or write_sat,
                )
            )
        return [
            package_totals(pkg, tuple(channels), interval, self.peaks.get(pkg))
            for pkg, channels in sorted(by_package.items())
        ]

    def _lines(self, counters: Sequence[_Counter], pmu: str) -> tuple[float | None, bool]:
        """Cache lines counted by a direction's events (summed), scaled for multiplexing; None when one of them
        did not run in the interval. And whether one saturated."""
        total = 0.0
        saturated = False
        counted = True
        for counter in counters:
            value, enabled, running = self._value(counter)
            prev_value, prev_enabled, prev_running = counter.prev
            delta = (value - prev_value) % _U64
            d_enabled, d_running = enabled - prev_enabled, running - prev_running
            counter.prev = (value, enabled, running)
            if self._ceiling is not None:
                # Kernels before the fix pass a saturated UMC counter on stuck at its ceiling.
                saturated = saturated or value >= self._ceiling
                if value >= (self._ceiling + 1) // 2:
                    self._reopen(counter, pmu)
            if d_running <= 0:
                counted = False
                continue
            total += delta * (d_enabled / d_running if d_enabled > d_running else 1.0)
        return (total if counted else None), saturated

    def _reopen(self, counter: _Counter, pmu: str) -> None:
        """Close and reopen a saturating counter: the kernel starts a new event's hardware count at zero."""
        self._close_fd(counter.fd)
        counter.fd = -1
        self._open_fd(counter, pmu)
        counter.prev = self._value(counter)

    def close(self) -> None:
        counters, self._counters = self._counters, []
        for reads, writes in counters:
            for counter in (*reads, *writes):
                if counter.fd >= 0:
                    self._close_fd(counter.fd)
                    counter.fd = -1

    def __enter__(self) -> DramCounters:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- pmutop info ---------------------------------------------------------------------------------------------


def probe_dram(
    sysroot: Sysroot, vendor: str | None, family: int | None, model: int | None, *, opener: Opener = perf_event_open
) -> DramPlan:
    """The plan, tried: when the counters cannot be opened (permission, no such event) the source is "none"
    and the why is the kernel's answer explained."""
    plan = plan_dram(sysroot, vendor, family, model)
    if plan.source != SOURCE_UNCORE or not sysroot.is_host:
        return plan  # a captured sysroot describes another machine: nothing to open here
    counters = DramCounters(plan, sysroot=sysroot, opener=opener, memory_speed=MemorySpeed(None, 0, ""))
    try:
        counters.open()
    except PmutopError as e:
        return DramPlan(SOURCE_NONE, str(e).removeprefix("DRAM bandwidth: "), plan.table, [], plan.notes)
    finally:
        counters.close()
    return plan


def info_facts(sysroot: Sysroot, vendor: str | None, family: int | None, model: int | None) -> dict[str, Any]:
    """`pmutop info`'s memory_bandwidth: the plan as JSON, with the memory speed behind the peak."""
    facts = probe_dram(sysroot, vendor, family, model).to_dict()
    speed = read_memory_speed(sysroot)
    facts["memory_mts"] = speed.mts
    facts["memory_speed"] = speed.why
    return facts


def info_lines(facts: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The same as text, for `pmutop info`: a summary line, one line per channel, the notes."""
    if not facts:
        return []
    label = "DRAM traffic"  # no wider than the longest label info prints: the column stays put
    lines = [(label, f"{facts['source']}: {facts['why']}")]
    for ch in facts.get("channels") or []:
        if ch.get("simulated"):
            lines.append(("", f"{ch['pmu']} package {ch['package']} cpu {ch['cpu']}: SIMULATED memory channel"))
            continue
        read = ", ".join(f"{c:#x}" for c in ch["read"])
        write = ", ".join(f"{c:#x}" for c in ch["write"])
        lines.append(
            (
                "",
                f"{ch['pmu']} package {ch['package']} cpu {ch['cpu']}: type {ch['type']}, read config {read}, "
                f"write config {write}, {ch['bytes_per_count']} bytes a count",
            )
        )
    if facts.get("memory_speed") and facts["source"] != SOURCE_NONE:
        lines.append(("", f"peak: {facts['memory_speed']}"))
    lines.extend(("", note) for note in facts.get("notes") or [])
    return lines
