"""The PMUs the kernel lists in sysfs (sys/bus/event_source/devices): perf `type`, CPUs, config formats, events."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pmutop.core.cpulist import parse_cpu_list
from pmutop.core.errors import PmutopError
from pmutop.core.sysroot import Sysroot

EVENT_SOURCE_DIR = "sys/bus/event_source/devices"
_FORMAT_RE = re.compile(r"^(config[0-9]*):(\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*)$")
_CONFIG_WORDS = ("config", "config1", "config2")


@dataclass(frozen=True)
class FormatField:
    """Where one named field of a PMU's config lives, e.g. umask = config:8-15."""

    register: str  # "config", "config1", "config2" (or "config3")
    ranges: tuple[tuple[int, int], ...]  # inclusive (lo, hi) bit ranges as written in sysfs

    @property
    def bits(self) -> list[int]:
        """Target bit positions, lowest first: the value's bit i goes to bits[i]."""
        return sorted({b for lo, hi in self.ranges for b in range(lo, hi + 1)})

    @property
    def width(self) -> int:
        return len(self.bits)


def parse_format(text: str) -> FormatField:
    """Parse a sysfs format file: "config:0-7", "config1:0-63", "config:18", "config:0-7,32-35"."""
    m = _FORMAT_RE.match(text.strip())
    if m is None:
        raise ValueError(f"bad PMU format {text!r} (expected e.g. config:0-7)")
    ranges: list[tuple[int, int]] = []
    for part in m.group(2).split(","):
        lo_s, _, hi_s = part.partition("-")
        lo, hi = int(lo_s), int(hi_s or lo_s)
        if hi < lo or hi > 63:
            raise ValueError(f"bad PMU format {text!r}: bit range {part!r}")
        ranges.append((lo, hi))
    return FormatField(m.group(1), tuple(ranges))


@dataclass(frozen=True)
class PmuInfo:
    """One PMU under sys/bus/event_source/devices/: its perf `type`, the CPUs it covers, its config fields."""

    name: str
    type: int
    cpus: list[int] | None  # from `cpus` (hybrid core PMUs, Arm PMUs); None when the file is absent
    cpumask: list[int] | None  # from `cpumask` (uncore PMUs: the CPU to open on); None when absent
    formats: dict[str, FormatField]


def list_pmus(sysroot: Sysroot) -> dict[str, PmuInfo]:
    """Every PMU with a readable integer `type`; unreadable or malformed optional files are left out."""
    base = sysroot.path(EVENT_SOURCE_DIR)
    try:
        names = sorted(p.name for p in base.iterdir())
    except OSError:
        return {}
    pmus: dict[str, PmuInfo] = {}
    for name in names:
        rel = f"{EVENT_SOURCE_DIR}/{name}"
        type_text = sysroot.read_text(f"{rel}/type")
        if type_text is None or not type_text.isdigit():
            continue
        formats: dict[str, FormatField] = {}
        try:
            fmt_files = sorted(p.name for p in sysroot.path(f"{rel}/format").iterdir())
        except OSError:
            fmt_files = []
        for fname in fmt_files:
            text = sysroot.read_text(f"{rel}/format/{fname}")
            try:
                formats[fname] = parse_format(text or "")
            except ValueError:
                continue  # a syntax this parser does not know: the field is unusable, the PMU is not
        pmus[name] = PmuInfo(
            name,
            int(type_text),
            _read_cpus(sysroot, f"{rel}/cpus"),
            _read_cpus(sysroot, f"{rel}/cpumask"),
            formats,
        )
    return pmus


def _read_cpus(sysroot: Sysroot, rel: str) -> list[int] | None:
    text = sysroot.read_text(rel)
    if not text:
        return None
    try:
        return parse_cpu_list(text, what=rel)
    except PmutopError:
        return None


def encode_with_format(fields: Mapping[str, int], fmt: Mapping[str, FormatField]) -> tuple[int, int, int]:
    """(config, config1, config2) with each named field's value spread over its format bits (low bits first)."""
    words = dict.fromkeys(_CONFIG_WORDS, 0)
    for name, value in fields.items():
        spec = fmt.get(name)
        if spec is None:
            raise ValueError(f"unknown PMU format field {name!r} (known: {', '.join(sorted(fmt)) or 'none'})")
        if spec.register not in words:
            raise ValueError(f"field {name!r} is in {spec.register}, which is not supported")
        bits = spec.bits
        if value < 0 or value >> len(bits):
            raise ValueError(f"{name}={value:#x} does not fit in {len(bits)} bits ({spec.register} bits {bits})")
        for i, bit in enumerate(bits):
            if value >> i & 1:
                words[spec.register] |= 1 << bit
    return words["config"], words["config1"], words["config2"]


_EVENT_TERM = re.compile(r"^([a-z][a-z0-9_]*)(?:=(0x[0-9a-f]+|[0-9]+))?$")
_EVENT_FILE_MAX = 4096  # bytes of one sysfs events/ file (the kernel's are one short line)


def parse_event_terms(text: str) -> dict[str, int]:
    """A sysfs events/ file ("event=0x00,umask=0x80", "event=0x3c,any=1", "edge") as {term: value}.

    A term without a value is 1 (a flag). ValueError for anything else, e.g. a term pmutop cannot encode.
    """
    terms: dict[str, int] = {}
    for part in text.strip().lower().split(","):
        m = _EVENT_TERM.match(part.strip())
        if m is None:
            raise ValueError(f"bad PMU event term {part.strip()[:40]!r} in {text.strip()[:80]!r}")
        name, value = m.group(1), m.group(2)
        terms[name] = 1 if value is None else int(value, 0)
    return terms


def pmu_events(sysroot: Sysroot, pmu: str) -> dict[str, str]:
    """The named events a PMU lists in sysfs (events/<name> -> "event=0x00,umask=0x80"); .scale/.unit and
    unreadable files are left out, a missing directory gives {}. Linux lists the topdown events here (slots,
    topdown-retiring, ...) only when it drives PERF_METRICS (arch/x86/events/intel/core.c)."""
    rel = f"{EVENT_SOURCE_DIR}/{pmu}/events"
    try:
        names = sorted(p.name for p in sysroot.path(rel).iterdir())
    except OSError:
        return {}
    events: dict[str, str] = {}
    for name in names:
        if "." in name:  # topdown-retiring.scale, cpu-cycles.unit: attributes of an event, not events
            continue
        text = sysroot.read_text(f"{rel}/{name}")
        if text and len(text) <= _EVENT_FILE_MAX:
            events[name] = text
    return events


_HYBRID_CORE_PMUS = ("cpu_core", "cpu_atom")


def core_pmu_for_cpu(pmus: Mapping[str, PmuInfo], cpu: int) -> PmuInfo | None:
    """The core PMU counting on `cpu`: "cpu" on non-hybrid systems, else the cpu_* PMU whose cpus lists it."""
    if "cpu" in pmus:
        return pmus["cpu"]
    hybrid: Iterable[str] = (*_HYBRID_CORE_PMUS, *sorted(n for n in pmus if n.startswith("cpu_")))
    for name in hybrid:
        info = pmus.get(name)
        if info is not None and info.cpus is not None and cpu in info.cpus:
            return info
    return None
