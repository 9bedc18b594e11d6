"""The live view's row filter (`/`): which cores to show.

Terms are separated by spaces (or the word "and"); a core is shown when it matches every kind of term:
- a CPU list: `0-3,8` (several lists add up),
- a core type: `P`, `E`, `p-core`, `e-cores`, `type=E` (several add up),
- a condition on a column: `util>50`, `ipc<1`, `mpki>=2`, `llc>1M`, `brmiss>5`, `backend>40`, `ghz<2`,
  `busy>50`, `temp>80`, `bzymhz<2000`, `avgmhz>100`, `pkgw>10`, `c6>20` (percent columns are compared in
  percent; k/M/G suffixes are allowed). All conditions must hold.
The `all` row is always shown: it sums the whole selection, not just the rows shown (the status line says so).
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable
from dataclasses import dataclass

from pmutop.core.cpulist import parse_cpu_list
from pmutop.core.errors import UsageError
from pmutop.tui.model import CoreState

OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "!=": operator.ne,
    "==": operator.eq,
    "=": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}
SUFFIX = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9}


def _metric(name: str, scale: float = 1.0) -> Callable[[CoreState], float | None]:
    def value(core: CoreState) -> float | None:
        v = getattr(core.metrics, name, None) if core.metrics is not None else None
        return None if v is None else v * scale

    return value


def _tma(name: str) -> Callable[[CoreState], float | None]:
    def value(core: CoreState) -> float | None:
        v = (core.tma or {}).get(name)
        return None if v is None else v * 100

    return value


def _latest(key: str) -> Callable[[CoreState], float | None]:
    """The latest value of a power series (Busy% in percent, °C, MHz, W), as its column shows it."""

    def value(core: CoreState) -> float | None:
        h = core.history.get(key)
        return h[-1] if h else None

    return value


def _avg_mhz(core: CoreState) -> float | None:
    busy, mhz = _latest("busy")(core), _latest("bzy_mhz")(core)
    return None if busy is None or mhz is None else mhz * busy / 100


def _cstate(name: str) -> Callable[[CoreState], float | None]:
    def value(core: CoreState) -> float | None:
        return core.latest.cstates.get(name.upper()) if core.latest is not None else None

    return value


# Names a condition may use -> the value compared (percent columns in percent).
FIELDS: dict[str, Callable[[CoreState], float | None]] = {
    "util": _metric("util", 100),
    "ghz": _metric("ghz"),
    "ipc": _metric("ipc"),
    "llc": _metric("llc_misses_per_s"),
    "mpki": _metric("llc_mpki"),
    "llcmiss": _metric("llc_miss_ratio", 100),
    "brmiss": _metric("branch_miss_ratio", 100),
    "retiring": _tma("tma_retiring"),
    "bad": _tma("tma_bad_speculation"),
    "frontend": _tma("tma_frontend_bound"),
    "backend": _tma("tma_backend_bound"),
    # The turbostat-style columns (pmutop.probes.power), by their titles' names.
    "busy": _latest("busy"),
    "bzymhz": _latest("bzy_mhz"),
    "avgmhz": _avg_mhz,
    "temp": _latest("temp_c"),
    "pkgw": _latest("pkg_watts"),
}
ALIASES = {"fe": "frontend", "be": "backend", "ret": "retiring", "llc/s": "llc", "llc_misses": "llc"} | {
    "bzy_mhz": "bzymhz",
    "mhz": "bzymhz",
    "avg_mhz": "avgmhz",
    "°c": "temp",
    "temp_c": "temp",
    "pkg_watts": "pkgw",
    "watts": "pkgw",
}
_CSTATE = re.compile(r"^c[0-9]+[a-z]*$", re.I)  # an idle state's residency, in % (c1, c6, c1e)
_CONDITION = re.compile(r"^([a-z_/%°][a-z0-9_/%]*?)\s*(>=|<=|!=|==|=|>|<)\s*(-?[0-9]*\.?[0-9]+)\s*([kmg]?)%?$", re.I)
_CPU_LIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")
_CORE_TYPE = re.compile(r"^(?:type=)?([pe])(?:-?cores?)?$", re.I)


@dataclass(frozen=True)
class Condition:
    field: str
    op: str
    value: float

    def holds(self, core: CoreState) -> bool:
        v = (FIELDS.get(self.field) or _cstate(self.field))(core)
        return v is not None and OPS[self.op](v, self.value)


@dataclass(frozen=True)
class RowFilter:
    text: str
    cpus: frozenset[int] | None = None
    core_types: frozenset[str] | None = None
    conditions: tuple[Condition, ...] = ()

    def matches(self, core: CoreState) -> bool:
        if self.cpus is not None and core.cpu not in self.cpus:
            return False
        if self.core_types is not None and (core.core_type or "").upper() not in self.core_types:
            return False
        return all(c.holds(core) for c in self.conditions)


def _terms(text: str) -> list[str]:
    # "util > 50" is one term: glue operators to their operands first.
    glued = re.sub(r"\s*(>=|<=|!=|==|=|>|<)\s*", r"\1", text.strip())
    return [t for t in glued.split() if t.lower() != "and"]


def parse_filter(text: str, core_types: set[str] | None = None) -> RowFilter | None:
    """None for an empty filter; UsageError (one line, for the filter box) when a term makes no sense, or
    names a core type none of `core_types` (the machine's, when given) is."""
    terms = _terms(text)
    if not terms:
        return None
    cpus: set[int] = set()
    types: set[str] = set()
    conditions: list[Condition] = []
    for term in terms:
        if _CPU_LIST.match(term):
            cpus.update(parse_cpu_list(term))
            continue
        m = _CORE_TYPE.match(term)
        if m:
            types.add(m.group(1).upper())
            continue
        m = _CONDITION.match(term)
        if not m:
            raise UsageError(
                f"cannot filter by {term!r}: use a CPU list (0-3,8), a core type (P, E) or a condition (util>50)"
            )
        name = m.group(1).lower().rstrip("%")
        name = ALIASES.get(name, name)
        if name not in FIELDS and not _CSTATE.match(name):
            raise UsageError(f"no column {m.group(1)!r} to filter by (one of: {', '.join(FIELDS)}, c6 …)")
        value = float(m.group(3)) * SUFFIX[m.group(4).lower()]
        conditions.append(Condition(name, m.group(2), value))
    if types and core_types is not None and not types <= core_types:
        missing = ", ".join(sorted(types - core_types))
        raise UsageError(f"no {missing}-cores here: this CPU is not hybrid (use a CPU list, e.g. 0-3)")
    return RowFilter(
        text=" ".join(terms),
        cpus=frozenset(cpus) if cpus else None,
        core_types=frozenset(types) if types else None,
        conditions=tuple(conditions),
    )


# -- the process and cgroup views' filter

_TEXT_TERM = re.compile(r"^(pid|user|comm|name|cgroup)(=|~)(.+)$", re.I)
TASK_TEXT = {"comm": "name", "name": "name", "user": "user", "cgroup": "cgroup"}
PID_MAX_LIMIT = 4 * 1024 * 1024  # the largest pid_max (include/linux/threads.h, PID_MAX_LIMIT on 64-bit)
TASK_ALIASES = {"util": "cpu", "cpu%": "cpu", "llc/s": "llc", "llc_misses": "llc", "branch": "brmiss"}


@dataclass(frozen=True)
class TaskFilter:
    """Which process (or cgroup) rows to show: `pid=1,2`, `user=alice`, `comm~nginx` (part of the name),
    `comm=nginx` (all of it), `cgroup~docker`, and conditions on the values as shown (`ipc<1`, `cpu>50`)."""

    text: str
    pids: frozenset[int] | None = None
    texts: tuple[tuple[str, str, str], ...] = ()  # (field, "=" or "~", lower-case text)
    conditions: tuple[tuple[str, str, float], ...] = ()  # (value key, operator, number)

    def matches(self, fields: dict[str, str], pid: int | None, numbers: dict[str, float | None]) -> bool:
        if self.pids is not None and pid not in self.pids:
            return False
        for name, op, wanted in self.texts:
            have = fields.get(name, "").lower()
            if (op == "=" and have != wanted) or (op == "~" and wanted not in have):
                return False
        for key, op, value in self.conditions:
            v = numbers.get(key)
            if v is None or not OPS[op](v, value):
                return False
        return True


def parse_task_filter(text: str, numeric: set[str]) -> TaskFilter | None:
    """None for an empty filter; UsageError (one line) for a term that makes no sense. `numeric`: the value
    keys a condition may compare (the view's columns: cpu, ipc, mpki, ...)."""
    # "comm ~ nginx" is one term, like "util > 50".
    terms = _terms(re.sub(r"\s*~\s*", "~", text.strip()))
    if not terms:
        return None
    pids: set[int] = set()
    texts: list[tuple[str, str, str]] = []
    conditions: list[tuple[str, str, float]] = []
    for term in terms:
        m = _TEXT_TERM.match(term)
        if m and m.group(1).lower() == "pid":
            if m.group(2) != "=" or not _CPU_LIST.match(m.group(3)):
                raise UsageError(f"cannot filter by {term!r}: pid=PID or pid=1,2")
            for part in m.group(3).split(","):
                low, _, high = part.partition("-")
                if int(high or low) > PID_MAX_LIMIT:
                    raise UsageError(f"cannot filter by {term!r}: PIDs end at {PID_MAX_LIMIT}")
                pids.update(range(int(low), int(high or low) + 1))
            continue
        if m:
            texts.append((TASK_TEXT[m.group(1).lower()], m.group(2), m.group(3).lower()))
            continue
        m = _CONDITION.match(term)
        name = m.group(1).lower() if m else ""
        name = TASK_ALIASES.get(name, name)
        if not m or name not in numeric:
            raise UsageError(
                f"cannot filter by {term!r}: use pid=, user=, comm~TEXT, cgroup~TEXT or a condition on "
                f"{', '.join(sorted(numeric))} (ipc<1)"
            )
        conditions.append((name, m.group(2), float(m.group(3)) * SUFFIX[m.group(4).lower()]))
    return TaskFilter(" ".join(terms), frozenset(pids) if pids else None, tuple(texts), tuple(conditions))
