"""Intel event names from Intel's perfmon tables (github.com/intel/perfmon, BSD-3-Clause).

A perfmon directory holds `mapfile.csv` (which event files describe which CPU) and per-model JSON event
lists. pmutop reads only the core event files (EventType `core` / `hybridcore`) and only the fields a
PERFEVTSEL can express: event select, umask, cmask, inv, edge. Events that need anything more (an
offcore-response or load-latency MSR, extended umask bits, AnyThread, fixed counters pmutop does not
drive) are listed but refused with a one-line reason.

Formats seen in the real tables (all handled below):
- EventCode "0x2E", "0XB7" (capital X), "0xB7, 0xBB" / "0x2A,0x2B" (two codes: the offcore pair).
- UMask "0x1" / "0x01" / "0x01,0x02" (one umask per code of the pair); UMaskExt "0x00" (newer parts).
- Counter "0,1,2,3" or "Fixed counter N"; older tables add CounterHTOff (the counters with HT off).
  Nehalem/Westmere/Bonnell/Silvermont number fixed counters from 1 ("Fixed counter 1" = IA32_FIXED_CTR0).
- MSRIndex "0" / "0x00" for none, else "0x1a6,0x1a7", "0x1A6", "0x3F6", "0x3F7"; MSRValue likewise.
- CounterMask/Invert/EdgeDetect/AnyThread/Deprecated/Offcore are decimal strings.
- Files are either a bare JSON array of events or {"Header": {...}, "Events": [...]}.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import http.client
import io
import json
import os
import re
import secrets
import stat
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from pmutop.core.errors import PmutopError, UsageError
from pmutop.pmu.cpuid_decode import CORE_TYPE_ATOM, CORE_TYPE_CORE, CpuIdentity
from pmutop.pmu.events import EventSpec
from pmutop.pmu.registers import MAX_FIXED_COUNTERS, RawEvent

PERFMON_URL = "https://raw.githubusercontent.com/intel/perfmon/main"
PERFMON_ENV = "PMUTOP_PERFMON_DIR"
MAPFILE = "mapfile.csv"
LICENSE = "LICENSE"
DOWNLOAD_TIMEOUT = 30.0  # seconds per file
_MAX_TABLE = 64 << 20  # bytes: the largest core table is 2 MB; refuse anything absurd, on disk or on the wire
_MAX_COUNTERS = 64  # counter indexes 0-63: a counter mask is one 64-bit word (the tables go up to 9)
_MAX_NAME = 256  # characters of an event name (Intel's longest is under 100)
_MAX_DESCRIPTION = 1000  # characters kept of a description (Intel's BriefDescription is under 500)
# Control characters (C0, DEL, C1) never reach the terminal from a table: they could carry escape sequences.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

_CORE_EVENT_TYPES = ("core", "hybridcore")
_INTEL = "GenuineIntel"
_CORE_TYPE_NAMES = {CORE_TYPE_ATOM: "Atom (0x20)", CORE_TYPE_CORE: "Core (0x40)"}
_MSR_NAMES = {
    0x1A6: "MSR_OFFCORE_RSP_0",
    0x1A7: "MSR_OFFCORE_RSP_1",
    0x3F6: "MSR_PEBS_LD_LAT_THRESHOLD",
    0x3F7: "MSR_PEBS_FRONTEND",
}
_FIXED_LABEL = re.compile(r"fixed\s*counter\s*(\d+)", re.IGNORECASE)


def _short(n: int) -> str:
    """A number for a message, cut to 20 digits: a table may hold a 4000-digit one."""
    text = str(n)
    return text if len(text) <= 20 else text[:20] + "…"


def _hex(n: int, pad: int = 0) -> str:
    """0x-hex padded to `pad` digits, cut after 16 digits: a table may hold a 3000-digit one."""
    text = f"{n:#0{pad + 2}x}"
    return text if len(text) <= 18 else text[:18] + "…"


@dataclass(frozen=True)
class IntelEvent:
    name: str  # as in the table, e.g. "MEM_LOAD_RETIRED.L3_MISS"
    event_code: int  # the first code when the table gives two
    umask: int  # the first umask when the table gives one per code
    cmask: int = 0
    inv: bool = False
    edge: bool = False
    counters: int | None = None  # GP counters it may use; None = any the core has
    fixed_counter: int | None = None  # 0-based IA32_FIXED_CTRn; such events count on that fixed counter only
    needs_msr: bool = False  # offcore response, load latency, frontend...: an extra MSR must be programmed
    msr_index: tuple[int, ...] = ()
    msr_value: int = 0
    paired_code: int | None = None  # the second code of "0xB7, 0xBB" (offcore pair)
    any_thread: bool = False
    umask_ext: int = 0
    equal: bool = False
    deprecated: bool = False
    description: str = ""
    counter_text: str = ""  # the table's Counter field, for display
    bad_counter: int | None = None  # a counter index >= 64 in the table: the event is refused

    @property
    def problem(self) -> str | None:
        """Why pmutop cannot count this event as the table defines it, or None."""
        return self.problem_for()

    def problem_for(self, *, any_thread: bool = False, max_fixed: int = MAX_FIXED_COUNTERS) -> str | None:
        """`problem` for a caller that can set AnyThread or drive fixed counters up to max_fixed - 1.

        Only the top-down planner (pmutop.pmu.topdown_plan) passes anything but the defaults: the four-event
        formula needs AnyThread events with SMT on, and Skymont's top-down events live on fixed counters 4-6.
        """
        if self.bad_counter is not None:
            return f"lists counter {_short(self.bad_counter)}, and counters are numbered 0-{_MAX_COUNTERS - 1}"
        if self.needs_msr:
            return f"needs an extra MSR ({self._msr_text()}) that pmutop cannot program"
        if self.fixed_counter is not None and self.fixed_counter >= max_fixed:
            return (
                f"counts only on fixed counter {_short(self.fixed_counter)}, "
                f"and pmutop drives fixed counters 0-{max_fixed - 1}"
            )
        if self.umask_ext:
            return f"needs extended umask bits (UMaskExt {_hex(self.umask_ext, 2)}) that pmutop cannot program"
        if self.any_thread and not any_thread:
            return "needs the AnyThread bit, which pmutop never sets"
        if self.equal:
            return "needs the EQ bit, which pmutop cannot program"
        for what, value in (("event code", self.event_code), ("umask", self.umask), ("counter mask", self.cmask)):
            if not 0 <= value <= 0xFF:
                return f"has {what} {_hex(value)}, which does not fit the 8-bit PERFEVTSEL field"
        return None

    def _msr_text(self) -> str:
        if not self.msr_index:  # the generic OFFCORE_RESPONSE of older tables: code pair, no MSR listed
            return "offcore response MSR_OFFCORE_RSP_0/1, 0x1a6/0x1a7"
        shown = self.msr_index[:4]  # Intel lists at most four; a longer list is a broken table
        more = "/…" if len(self.msr_index) > len(shown) else ""
        names = "/".join(_MSR_NAMES.get(i, "MSR") for i in shown) + more
        addresses = "/".join(_hex(i) for i in shown) + more
        return f"{names} {addresses} = {_hex(self.msr_value)}"

    @property
    def encoding(self) -> str:
        """Short text form: `fixed 0` or `event=0x2e,umask=0x41[,cmask=1,inv,edge]`."""
        if self.fixed_counter is not None:
            return f"fixed {self.fixed_counter}"
        parts = [f"event={_hex(self.event_code, 2)}", f"umask={_hex(self.umask, 2)}"]
        if self.cmask:
            parts.append(f"cmask={_short(self.cmask)}")
        if self.inv:
            parts.append("inv")
        if self.edge:
            parts.append("edge")
        return ",".join(parts)


def cache_dir() -> Path:
    """Where `pmutop events --download` keeps the tables: $XDG_CACHE_HOME/pmutop/perfmon."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".cache"  # XDG: relative values are invalid
    return base / "pmutop" / "perfmon"


def cpuid_string(identity: CpuIdentity) -> str:
    """perf's x86 CPUID string: vendor-family(decimal)-model(hex)-stepping(hex), e.g. GenuineIntel-6-55-4."""
    return f"{identity.vendor}-{identity.family}-{identity.model:X}-{identity.stepping:X}"


def _key_matches(key: str, identity: CpuIdentity) -> bool:
    """Match a mapfile key the way perf does (tools/perf/arch/x86/util/header.c, strcmp_cpuid_str).

    The key is a regular expression that must match the whole string. A key with a stepping part
    (three '-') is matched against vendor-family-model-stepping, any other key against the string
    without the stepping. perf prints the model without padding (family 18 model 1 is "18-1");
    a two-digit form is tried too, in case a table spells small models "01".
    """
    try:
        pattern = re.compile(key, re.IGNORECASE)
    except re.error:
        return False
    with_stepping = key.count("-") >= 3
    for model in dict.fromkeys((f"{identity.model:X}", f"{identity.model:02X}")):
        text = f"{identity.vendor}-{identity.family}-{model}"
        if with_stepping:
            text += f"-{identity.stepping:X}"
        if pattern.fullmatch(text):
            return True
    return False


def _text(value: Any) -> str:
    """A table field as text. Intel writes every field as a JSON string; a list or object is a broken table."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"a {type(value).__name__} where text was expected")
    return str(value)


def _int(value: Any, default: int = 0) -> int:
    """Table numbers: hex "0x2E"/"0XB7" or decimal "16"; lists give their first element."""
    if value is None:
        return default
    text = _text(value).split(",")[0].strip()
    if not text:
        return default
    return int(text, 0) if text[:2].lower() == "0x" else int(text, 10)


def _ints(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    return tuple(_int(part) for part in _text(value).split(",") if part.strip())


def _flag(value: Any) -> bool:
    return _int(value) != 0


def _gp_set(text: str) -> set[int]:
    if not text or _FIXED_LABEL.search(text):
        return set()
    return {_int(part) for part in text.split(",") if part.strip()}


def _mask(counters: set[int]) -> int:
    mask = 0
    for c in counters:
        mask |= 1 << c
    return mask


def _fixed_label(value: Any) -> int | None:
    """N of "Fixed counter N", or None (also for a label whose number is absurd: that row is dropped later)."""
    m = _FIXED_LABEL.search(_text(value)) if value is not None else None
    return int(m.group(1)) if m else None


def _row_counters(e: dict[str, Any]) -> set[int]:
    return _gp_set(_text(e.get("Counter", ""))) | _gp_set(_text(e.get("CounterHTOff", "")))


def _parse_file(raw: list[dict[str, Any]]) -> dict[str, IntelEvent]:
    # The GP counters the file's core has: an event allowed on all of them is unrestricted (None).
    # CounterHTOff (older tables) lists the counters with Hyper-Threading off; it is always a superset of
    # Counter, and the planner intersects with the counters CPUID reports, so the union is right either way.
    # A row that cannot be read, or names a counter beyond 63, says nothing about the core's counters.
    full: set[int] = set()
    labels: list[int | None] = []
    for e in raw:
        try:
            counters = _row_counters(e)
            if all(c < _MAX_COUNTERS for c in counters):
                full |= counters
        except (ValueError, TypeError):
            pass
        try:
            labels.append(_fixed_label(e.get("Counter")))
        except (ValueError, TypeError):
            labels.append(None)
    # Nehalem/Westmere/Bonnell/Silvermont tables count fixed counters from 1; a file that never says
    # "Fixed counter 0" uses that numbering.
    one_based = 0 not in labels

    events: dict[str, IntelEvent] = {}
    for e, label in zip(raw, labels, strict=True):
        try:
            ev = _parse_event(e, label, one_based, full)
        except (ValueError, TypeError, KeyError, RecursionError):
            continue  # one odd row in a future table should not make the rest unusable
        events.setdefault(ev.name.upper(), ev)  # a repeated name: the first definition wins
    return events


def _parse_event(e: dict[str, Any], label: int | None, one_based: bool, full: set[int]) -> IntelEvent:
    name = e["EventName"]
    if not isinstance(name, str):
        raise TypeError("the name is not text")
    name = name.strip()
    if not name or len(name) > _MAX_NAME or _CONTROL.search(name) or " " in name:
        raise ValueError("no usable name")
    codes = _ints(e.get("EventCode"))
    if not codes:
        raise ValueError("no event code")
    umask = _int(e.get("UMask"))
    counter_text = _text(e.get("Counter", "")).strip()
    fixed: int | None = None
    if label is not None and codes[0] == 0 and umask > 0:
        # perf's pseudo-encoding event=0x00,umask=N means fixed counter N-1; it is right even where
        # the label is not (Jaketown's THREAD_ANY says "Fixed counter 2" with umask 0x02).
        fixed = umask - 1
    elif label is not None:
        fixed = label - (1 if one_based else 0)
    elif _FIXED_LABEL.search(counter_text):
        raise ValueError("a fixed counter label without a usable number")
    gp = _row_counters(e)
    bad_counter = max(gp) if gp and max(gp) >= _MAX_COUNTERS else None
    msr_index = tuple(i for i in _ints(e.get("MSRIndex")) if i != 0)
    msr_value = _int(e.get("MSRValue"))
    paired = codes[1] if len(codes) > 1 else None
    # Old tables list the generic OFFCORE_RESPONSE with MSRIndex 0 and Offcore 0: the code pair gives it away.
    needs_msr = bool(msr_index) or msr_value != 0 or _flag(e.get("Offcore")) or paired is not None
    description = " ".join(_CONTROL.sub(" ", _text(e.get("BriefDescription") or "")).split())
    if len(description) > _MAX_DESCRIPTION:
        description = description[: _MAX_DESCRIPTION - 1] + "…"
    return IntelEvent(
        name=name,
        event_code=codes[0],
        umask=umask,
        cmask=_int(e.get("CounterMask")),
        inv=_flag(e.get("Invert")),
        edge=_flag(e.get("EdgeDetect")),
        counters=None if fixed is not None or not gp or gp == full or bad_counter is not None else _mask(gp),
        fixed_counter=fixed,
        needs_msr=needs_msr,
        msr_index=msr_index,
        msr_value=msr_value,
        paired_code=paired,
        any_thread=_flag(e.get("AnyThread")),
        umask_ext=_int(e.get("UMaskExt")),
        equal=_flag(e.get("Equal")),
        deprecated=_flag(e.get("Deprecated")),
        description=description,
        counter_text=_CONTROL.sub(" ", counter_text)[:_MAX_NAME],
        bad_counter=bad_counter,
    )


_LOADED: dict[Path, tuple[tuple[int, int], dict[str, IntelEvent]]] = {}


def _event_list(data: Any) -> list[dict[str, Any]] | None:
    if isinstance(data, dict):
        data = data.get("Events")
    if isinstance(data, list) and all(isinstance(e, dict) for e in data):
        return data
    return None


def _decode_json(data: bytes) -> Any:
    """json.loads whose failures are ValueError with a one-line reason (deep nesting included)."""
    if len(data) > _MAX_TABLE:
        raise ValueError(f"larger than {_MAX_TABLE >> 20} MiB")
    try:
        return json.loads(data)
    except RecursionError:  # "[" * 100000: the decoder recurses once per bracket
        raise ValueError("nested too deeply") from None
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError
        raise ValueError(" ".join(str(e).split())[:200]) from None


def load_events(path: Path) -> dict[str, IntelEvent]:
    """Events of one perfmon JSON file (bare array or {"Header", "Events"}), by upper-case name.

    Parsed once per file version (cached on path, mtime and size).
    """
    path = Path(path)
    try:
        st = path.stat()
    except OSError as e:
        raise PmutopError(
            f"cannot read Intel event table {path}: {e.strerror} (fetch it with `pmutop events --download`)"
        ) from None
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _LOADED.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    if st.st_size > _MAX_TABLE:  # checked before reading: the file is never loaded whole
        raise PmutopError(f"{path} is not a valid perfmon table: larger than {_MAX_TABLE >> 20} MiB")
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_TABLE + 1)
    except OSError as e:
        raise PmutopError(f"cannot read Intel event table {path}: {e.strerror}") from None
    try:
        raw = _event_list(_decode_json(data))
    except ValueError as e:
        raise PmutopError(f"{path} is not a valid perfmon table: {e}") from None
    if raw is None:
        raise PmutopError(f"{path} is not a valid perfmon table: no event list")
    events = _parse_file(raw)
    _LOADED[path] = (stamp, events)
    return events


@dataclass(frozen=True)
class MapRow:
    key: str
    filename: str  # as in the mapfile: "/SKX/events/skylakex_core.json"
    event_type: str
    core_type: int | None
    native_model_id: int | None
    role: str


def _safe_relative(filename: str) -> PurePosixPath:
    """A mapfile path as a relative path that cannot leave the root (the mapfile may come from the network)."""
    rel = PurePosixPath(filename.strip().lstrip("/"))
    if not rel.parts or any(p in ("..", ".") for p in rel.parts) or "\\" in filename:
        raise ValueError(f"unsafe path {filename!r}")
    return rel


def parse_mapfile(text: str) -> list[MapRow]:
    rows: list[MapRow] = []
    for rec in csv.DictReader(io.StringIO(text)):
        key = (rec.get("Family-model") or "").strip()
        filename = (rec.get("Filename") or "").strip()
        if not key or not filename:
            continue
        try:
            _safe_relative(filename)
            core_type = _int(rec.get("Core Type"), -1)
            native = _int(rec.get("Native Model ID"), -1)
        except ValueError:
            continue
        rows.append(
            MapRow(
                key=key,
                filename=filename,
                event_type=(rec.get("EventType") or "").strip().lower(),
                core_type=None if core_type < 0 else core_type,
                native_model_id=None if native < 0 else native,
                role=(rec.get("Core Role Name") or "").strip(),
            )
        )
    return rows


def core_rows(rows: Iterable[MapRow], identity: CpuIdentity) -> list[MapRow]:
    """Every core/hybridcore row of the mapfile that describes this CPU model."""
    return [r for r in rows if r.event_type in _CORE_EVENT_TYPES and _key_matches(r.key, identity)]


def choose_rows(
    rows: list[MapRow], core_type: int | None, native_model_id: int | None = None
) -> tuple[list[MapRow], list[str]]:
    """The rows for one core type out of `core_rows`, and notes on any guess made."""
    notes: list[str] = []
    chosen = [r for r in rows if r.event_type == "core"]
    hybrid = [r for r in rows if r.event_type == "hybridcore"]
    if not hybrid:
        return chosen, notes
    want = core_type
    if want is None:
        want = CORE_TYPE_CORE
        notes.append("hybrid CPU model but no core type from CPUID 0x1A: using the Core (0x40) event table")
    matching = [r for r in hybrid if r.core_type == want]
    if len(matching) > 1 and native_model_id is not None:
        # Arrow Lake lists two Atom tables told apart by the native model ID (CPUID 0x1A EAX[23:0]).
        exact = [r for r in matching if r.native_model_id == native_model_id]
        matching = exact or matching
    if len(matching) > 1:
        notes.append(
            f"several {_CORE_TYPE_NAMES.get(want, hex(want))} event tables for this model: using "
            f"{PurePosixPath(matching[0].filename).name} ({matching[0].role})"
        )
        matching = matching[:1]
    return chosen + matching, notes


class PerfmonTables:
    """A perfmon directory: mapfile.csv plus the JSON event files it names."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.notes: list[str] = []
        self._rows: list[MapRow] | None = None
        self._merged: dict[tuple[str, int, int, int, int | None, int | None], dict[str, IntelEvent]] = {}

    def __repr__(self) -> str:
        return f"PerfmonTables({str(self.root)!r})"

    @classmethod
    def locate(cls, explicit: str | None) -> PerfmonTables | None:
        """--perfmon-dir, then $PMUTOP_PERFMON_DIR, then the download cache; None when none has a mapfile.

        A directory the user named but that holds no mapfile.csv is an error, not a silent fallback.
        """
        for value, what in ((explicit, "--perfmon-dir"), (os.environ.get(PERFMON_ENV), PERFMON_ENV)):
            if value:
                root = Path(value).expanduser()
                if not (root / MAPFILE).is_file():
                    raise UsageError(f"{what} {value}: no {MAPFILE} there (not a copy of Intel's perfmon tables)")
                return cls(root)
        root = cache_dir()
        return cls(root) if (root / MAPFILE).is_file() else None

    def rows(self) -> list[MapRow]:
        if self._rows is None:
            path = self.root / MAPFILE
            try:
                self._rows = parse_mapfile(path.read_text(encoding="utf-8", errors="replace"))
            except OSError as e:
                raise PmutopError(f"cannot read {path}: {e.strerror}") from None
        return self._rows

    def _note(self, notes: Iterable[str]) -> None:
        for n in notes:
            if n not in self.notes:
                self.notes.append(n)

    def path_of(self, row: MapRow) -> Path:
        return self.root.joinpath(*_safe_relative(row.filename).parts)

    def files_for(self, identity: CpuIdentity, core_type: int | None, native_model_id: int | None = None) -> list[Path]:
        """The core event files that describe this CPU (one per table; a hybrid CPU gets its core type's)."""
        if identity.vendor != _INTEL:
            return []
        chosen, notes = choose_rows(core_rows(self.rows(), identity), core_type, native_model_id)
        self._note(notes)
        return list(dict.fromkeys(self.path_of(r) for r in chosen))

    def load_events(self, path: Path) -> dict[str, IntelEvent]:
        return load_events(path)

    def events_for(
        self, identity: CpuIdentity, core_type: int | None, native_model_id: int | None = None
    ) -> dict[str, IntelEvent]:
        """Upper-case name -> event, merged over this CPU's core files (the first file wins a clash)."""
        key = (identity.vendor, identity.family, identity.model, identity.stepping, core_type, native_model_id)
        merged = self._merged.get(key)
        if merged is None:
            merged = {}
            for path in self.files_for(identity, core_type, native_model_id):
                for name, ev in load_events(path).items():
                    merged.setdefault(name, ev)
            self._merged[key] = merged
        return merged


@dataclass(frozen=True)
class AnyThreadSpec(EventSpec):
    """A table event counted with the AnyThread bit (PERFEVTSEL bit 21, or the fixed counter's AnyThread bit):
    it counts for both hyper-threads of the core. Only the top-down four-event formula on PMU v3-v4 with SMT
    on asks for one (pmutop.pmu.topdown_plan, via to_spec(any_thread=True)); `--events` never yields it."""

    any_thread: bool = True


def to_spec(ev: IntelEvent, *, any_thread: bool = False, max_fixed: int = MAX_FIXED_COUNTERS) -> EventSpec:
    """The EventSpec pmutop programs for a table event; UsageError when it cannot be counted as defined.

    any_thread=True lets an AnyThread event through as an AnyThreadSpec, and max_fixed raises the fixed
    counter limit: for the top-down planner only (see IntelEvent.problem_for).
    """
    why = ev.problem_for(any_thread=any_thread, max_fixed=max_fixed)
    if why is not None:
        raise UsageError(f"{ev.name} {why}; pick another event (see `pmutop events --search WORD`)")
    fixed_only = ev.fixed_counter is not None
    raw = None if fixed_only else RawEvent(ev.event_code, ev.umask, ev.cmask, ev.inv, ev.edge)
    cls = AnyThreadSpec if ev.any_thread else EventSpec
    return cls(
        name=ev.name,
        raw=raw,
        fixed_index=ev.fixed_counter,
        counters=ev.counters,
        from_tables=True,
        description=ev.description,
    )


NO_TABLES_HINT = "run `pmutop events --download`, or give --perfmon-dir DIR (or set PMUTOP_PERFMON_DIR)"


class Resolver:
    """Turns Intel event names (EventSpec.from_tables) into encodings for one CPU."""

    def __init__(self, tables: PerfmonTables | None) -> None:
        self.tables = tables

    def resolve(
        self,
        spec: EventSpec,
        identity: CpuIdentity,
        core_type: int | None,
        native_model_id: int | None = None,
    ) -> EventSpec:
        if not spec.from_tables:
            return spec
        if identity.vendor != _INTEL:
            raise UsageError(
                f"unknown event {spec.name!r}: not an architectural or software event, and Intel's perfmon "
                f"tables do not describe {identity.vendor or 'this vendor'}'s CPUs"
            )
        if self.tables is None:
            # Said as "unknown event" first: a typo is likelier than an Intel name on a machine without tables.
            raise UsageError(
                f"unknown event {spec.name!r}: not an architectural or software event, and Intel event names "
                f"need Intel's perfmon tables: {NO_TABLES_HINT}"
            )
        files = self.tables.files_for(identity, core_type, native_model_id)
        if not files:
            raise UsageError(
                f"unknown event {spec.name!r}: {self.tables.root / MAPFILE} has no core event table for "
                f"{cpuid_string(identity)} (update the tables with `pmutop events --download`)"
            )
        ev = self.tables.events_for(identity, core_type, native_model_id).get(spec.name.upper())
        if ev is None:
            names = ", ".join(p.name for p in files)
            raise UsageError(
                f"unknown event {spec.name!r}: not an architectural or software event, "
                f"and not in Intel's tables for this CPU ({names})"
            )
        return to_spec(ev)  # named as Intel spells it, whatever case the user typed


# --- download -------------------------------------------------------------------------------------

_MAX_MAPFILE = 1 << 20  # bytes: Intel's mapfile.csv is about 20 KB
_MAX_LICENSE = 1 << 20
_MAX_TABLES = 16  # core tables fetched for one machine (a hybrid model lists three at most)
_DOWNLOAD_DEADLINE = 300.0  # seconds for one file: a server that trickles bytes is given up on
_CHUNK = 1 << 16
_SHOWN_URL = 200  # characters of a URL echoed in a message


def _shown_url(url: str) -> str:
    return url if len(url) <= _SHOWN_URL else url[:_SHOWN_URL] + "…"


def check_source(source: str) -> tuple[str | None, Path | None]:
    """`--perfmon-url` as (https base URL, None) or (None, local directory); UsageError for anything else.

    Only https:// crosses the network (the tables decide which counters get programmed, so they must not
    be open to tampering on the way); a local copy is named by a plain path or a file:// URL.
    """
    shown = _shown_url(source)
    parsed = urllib.parse.urlsplit(source)
    scheme = parsed.scheme.lower()
    if scheme == "https":
        if not parsed.hostname:
            raise UsageError(f"--perfmon-url {shown}: no host name")
        return source, None
    if scheme == "file":
        if parsed.netloc not in ("", "localhost"):
            raise UsageError(f"--perfmon-url {shown}: a file:// URL names a local directory (file:///path)")
        path = Path(urllib.parse.unquote(parsed.path))
    elif scheme:  # http, ftp, data, gopher, ...
        raise UsageError(f"--perfmon-url {shown}: only https:// URLs or a local directory are accepted")
    else:
        path = Path(source).expanduser()
    if not path.is_dir():
        raise UsageError(f"--perfmon-url {shown}: no such directory (give an https:// URL or a local directory)")
    return None, path.resolve()


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects to https:// only: a redirect must not downgrade the download to plain http."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> urllib.request.Request | None:
        if urllib.parse.urlsplit(newurl).scheme.lower() != "https":
            raise PmutopError(
                f"cannot download {_shown_url(req.full_url)}: redirected to {_shown_url(newurl)}, "
                "and only https:// is accepted"
            )
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _read_capped(stream: Any, limit: int, what: str, deadline: float) -> bytes:
    """At most `limit` bytes of `stream`, read in chunks; more than that is refused without reading it all."""
    data = bytearray()
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            return bytes(data)
        data += chunk
        if len(data) > limit:
            raise PmutopError(f"cannot download {what}: larger than {_size(limit)}")
        if time.monotonic() > deadline:
            raise PmutopError(f"cannot download {what}: not complete after {_DOWNLOAD_DEADLINE:g} s")


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


class _Fetcher:
    """Reads perfmon files from an https:// base URL or from a local directory."""

    def __init__(self, source: str, timeout: float = DOWNLOAD_TIMEOUT) -> None:
        self.base_url, self.local = check_source(source)
        self.timeout = timeout
        self._opener = urllib.request.build_opener(_HttpsOnlyRedirects())

    def url(self, rel: str) -> str:
        if self.local is not None:
            return str(self.local.joinpath(*_safe_relative(rel).parts))
        assert self.base_url is not None
        return f"{self.base_url.rstrip('/')}/{urllib.parse.quote(rel.lstrip('/'))}"

    def get(self, rel: str, limit: int) -> bytes:
        data = self.get_optional(rel, limit, missing_ok=False)
        assert data is not None  # missing_ok=False raises instead
        return data

    def get_optional(self, rel: str, limit: int, *, missing_ok: bool = True) -> bytes | None:
        """The file's bytes (at most `limit`); None for a missing file when missing_ok (HTTP 404, no such file)."""
        if self.local is not None:
            return self._read_local(rel, limit, missing_ok)
        url = self.url(rel)
        shown = _shown_url(url)
        try:
            request = urllib.request.Request(url, headers={"User-Agent": "pmutop"})
            with self._opener.open(request, timeout=self.timeout) as response:
                length = response.headers.get("Content-Length", "")
                if length.strip().isdigit() and int(length) > limit:  # refused before reading a byte of it
                    raise PmutopError(f"cannot download {shown}: larger than {_size(limit)}")
                return _read_capped(response, limit, shown, time.monotonic() + _DOWNLOAD_DEADLINE)
        except urllib.error.HTTPError as e:
            if missing_ok and e.code == 404:
                return None
            raise PmutopError(
                f"cannot download {shown}: HTTP {e.code} {' '.join(str(e.reason).split())[:80]}"
            ) from None
        except urllib.error.URLError as e:
            reason = e.reason
            text = reason.strerror if isinstance(reason, OSError) and reason.strerror else str(reason)
            raise PmutopError(f"cannot download {shown}: {' '.join(text.split())[:200]}") from None
        except TimeoutError:
            raise PmutopError(f"cannot download {shown}: no answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException, ValueError) as e:
            text = " ".join(str(e).split())[:200] or e.__class__.__name__
            raise PmutopError(f"cannot download {shown}: {text}") from None

    def _read_local(self, rel: str, limit: int, missing_ok: bool) -> bytes | None:
        path = self.url(rel)
        try:
            # O_NONBLOCK: a FIFO planted in the copy must not hang the open; only regular files are read.
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            if missing_ok:
                return None
            raise PmutopError(f"cannot copy {path}: No such file or directory") from None
        except OSError as e:
            raise PmutopError(f"cannot copy {path}: {e.strerror}") from None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise PmutopError(f"cannot copy {path}: not a regular file")
            if st.st_size > limit:
                raise PmutopError(f"cannot copy {path}: larger than {_size(limit)}")
            os.set_blocking(fd, True)
            with os.fdopen(os.dup(fd), "rb") as f:
                return _read_capped(f, limit, path, time.monotonic() + _DOWNLOAD_DEADLINE)
        except OSError as e:
            raise PmutopError(f"cannot copy {path}: {e.strerror or e}") from None
        finally:
            os.close(fd)


# --- what a downloaded table may hold ---------------------------------------------------------------

_FIELD_MAX = 1 << 16  # characters of any one field (Intel's longest PublicDescription is about 2,300)
_EVENT_NAME = re.compile(r"[A-Za-z0-9_.:=\-]{1,256}")  # Intel's names use letters, digits and _ . : =
_FLAGS = ("Invert", "EdgeDetect", "AnyThread", "Offcore", "Deprecated", "Equal")
_NUMBER = re.compile(r"(0[xX][0-9a-fA-F]{1,16}|[0-9]{1,20})")


def _numbers(value: str, key: str, low: int, high: int, most: int) -> list[int]:
    """A comma-separated list of 1..most numbers, each within low..high; ValueError naming the field."""
    parts = [p.strip() for p in value.split(",")]
    if not 1 <= len(parts) <= most or not all(_NUMBER.fullmatch(p) for p in parts):
        raise ValueError(f"{key} {value[:40]!r} is not {'a number' if most == 1 else 'a list of numbers'}")
    numbers = [int(p, 0) if p[:2].lower() == "0x" else int(p, 10) for p in parts]
    for n in numbers:
        if not low <= n <= high:
            limit = (
                f"{low:#x}-{high:#x}" if high > 255 or key in ("EventCode", "UMask", "UMaskExt") else f"{low}-{high}"
            )
            raise ValueError(f"{key} {value[:40]!r} is out of range ({limit})")
    return numbers


def _counter_field(value: str, key: str) -> None:
    """ "Fixed counter N" or a list of GP counter indexes, all below 64."""
    label = re.fullmatch(r"\s*fixed\s*counter\s*(\d{1,2})\s*", value, re.IGNORECASE)
    if label is not None:
        if int(label.group(1)) >= _MAX_COUNTERS:
            raise ValueError(f"{key} {value[:40]!r} is out of range (fixed counters 0-{_MAX_COUNTERS - 1})")
        return
    _numbers(value, key, 0, _MAX_COUNTERS - 1, _MAX_COUNTERS)


def _event_problem(e: dict[str, Any]) -> str | None:
    """Why one event of a downloaded table is not what Intel's tables hold, or None."""
    if len(e) > 100:
        return f"{len(e)} fields"
    for key, value in e.items():
        if not isinstance(value, str):
            return f"{key[:40]} is {type(value).__name__}, not text"
        if len(value) > _FIELD_MAX:
            return f"{key[:40]} is longer than {_FIELD_MAX} characters"
    try:
        name = e.get("EventName")
        if name is None or not _EVENT_NAME.fullmatch(name):
            return "EventName is missing or not a name" if name is None else f"EventName {name[:40]!r} is not a name"
        for key in ("EventCode", "UMask"):
            if key not in e:
                return f"no {key}"
            _numbers(e[key], key, 0, 0xFF, 4)  # "0xB7, 0xBB" / "0x01,0x02": one per code of an offcore pair
        if "UMaskExt" in e:
            _numbers(e["UMaskExt"], "UMaskExt", 0, 0xFF, 1)
        if "CounterMask" in e:
            _numbers(e["CounterMask"], "CounterMask", 0, 255, 1)
        for key in _FLAGS:
            if key in e and e[key].strip() not in ("0", "1"):
                return f"{key} {e[key][:40]!r} is not 0 or 1"
        if "Counter" not in e:
            return "no Counter"
        for key in ("Counter", "CounterHTOff"):
            if key in e:
                _counter_field(e[key], key)
        if "MSRIndex" in e:
            _numbers(e["MSRIndex"], "MSRIndex", 0, 0xFFFF_FFFF, 8)
        if "MSRValue" in e:
            _numbers(e["MSRValue"], "MSRValue", 0, 0xFFFF_FFFF_FFFF_FFFF, 1)
    except ValueError as err:
        return str(err)
    return None


def table_problem(data: bytes) -> str | None:
    """Why downloaded bytes are not a perfmon core event table, field by field, or None when they are."""
    try:
        decoded = _decode_json(data)
    except ValueError as e:
        return str(e)
    if isinstance(decoded, dict) and not isinstance(decoded.get("Header", {}), dict):
        return "Header is not an object"
    events = decoded.get("Events") if isinstance(decoded, dict) else decoded
    if not isinstance(events, list):
        return "no event list"
    if not events:
        return "no events"
    for i, e in enumerate(events, 1):
        if not isinstance(e, dict):
            return f"event {i} is not an object"
        why = _event_problem(e)
        if why is not None:
            name = e.get("EventName")
            named = f" ({name[:60]})" if isinstance(name, str) and not _CONTROL.search(name) else ""
            return f"event {i}{named}: {why}"
    return None


# --- writing ----------------------------------------------------------------------------------------

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class _Writer:
    """Writes files under one destination directory without ever following a symbolic link.

    Directories are walked with O_NOFOLLOW relative to their parent's descriptor, so a link planted
    anywhere in the path (by another user of a shared cache, say) is refused, not written through.
    Files go to a fresh O_EXCL temporary name, are fsynced and renamed over the old one: readers see
    the old file or the new one, never half of one. Created directories are 0755 and files 0644 whatever
    the umask (the tables are public data other users may read).
    """

    def __init__(self, dest: Path) -> None:
        self.dest = dest

    def _refuse_link(self, path: Path) -> PmutopError:
        return PmutopError(
            f"cannot write into {path}: it is a symbolic link (pmutop does not follow links where it writes; "
            "remove it or pick another --perfmon-dir)"
        )

    def preflight(self, rels: list[PurePosixPath]) -> None:
        """Refuse before anything is written when the destination or a directory inside it is a link."""
        paths = [self.dest] + [self.dest.joinpath(*rel.parts[:i]) for rel in rels for i in range(1, len(rel.parts))]
        for path in dict.fromkeys(paths):
            if path.is_symlink():
                raise self._refuse_link(path)
            if path.exists() and not path.is_dir():
                raise PmutopError(f"cannot write into {path}: not a directory")

    def _mkdir_open(self, parent_fd: int | None, path: Path, name: str) -> int:
        """Open directory `name` (under parent_fd, or the absolute `path`), creating it 0755 if missing."""
        created = False
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
            created = True
        except FileExistsError:
            pass
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise self._refuse_link(path) from None
            if e.errno == errno.ENOTDIR:
                raise PmutopError(f"cannot write into {path}: not a directory") from None
            raise
        if created:
            os.fchmod(fd, 0o755)  # the umask narrowed mkdir's mode
        return fd

    def _open_dest(self) -> int:
        """The destination directory's descriptor; missing parents above it are created (0755) as well."""
        missing = []
        path = self.dest
        while not os.path.lexists(path) and path != path.parent:
            missing.append(path)
            path = path.parent
        for p in reversed(missing[1:]):  # parents above dest: ordinary directories, not checked for links
            try:
                os.mkdir(p, 0o755)
                os.chmod(p, 0o755)
            except FileExistsError:
                pass
        return self._mkdir_open(None, self.dest, str(self.dest))

    def write_all(self, blobs: list[tuple[PurePosixPath, bytes]]) -> list[Path]:
        self.preflight([rel for rel, _ in blobs])
        written: list[Path] = []
        try:
            dest_fd = self._open_dest()
        except OSError as e:
            raise PmutopError(f"cannot write into {self.dest}: {e.strerror or e}") from None
        try:
            for rel, data in blobs:
                path = self.dest.joinpath(*rel.parts)
                try:
                    self._write_one(dest_fd, rel, data)
                except OSError as e:
                    raise PmutopError(f"cannot write {path}: {e.strerror or e}") from None
                written.append(path)
        finally:
            os.close(dest_fd)
        return written

    def _write_one(self, dest_fd: int, rel: PurePosixPath, data: bytes) -> None:
        fds: list[int] = []
        try:
            dir_fd, path = dest_fd, self.dest
            for part in rel.parts[:-1]:
                path = path / part
                dir_fd = self._mkdir_open(dir_fd, path, part)
                fds.append(dir_fd)
            _write_atomic(dir_fd, rel.parts[-1], data)
        finally:
            for fd in fds:
                os.close(fd)


def _write_atomic(dir_fd: int, name: str, data: bytes) -> None:
    """Write `name` in the directory dir_fd via an O_EXCL temporary file, fsync, and rename over it."""
    tmp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        try:
            os.fchmod(fd, 0o644)  # whatever the umask: the tables are public data other users may read
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)  # replaces a link at `name`, never follows it
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)  # the rename itself survives a crash


def download(base_url: str, dest: Path, wanted: list[tuple[CpuIdentity, int | None]]) -> list[Path]:
    """Fetch mapfile.csv, Intel's LICENSE and the core event files of the wanted CPUs into `dest`.

    `base_url` is an https:// URL or a local directory (plain path or file://). For each CPU model every
    core table is fetched (both halves of a hybrid part), so CPUs that are offline now still find theirs
    later. Everything is fetched and checked before anything is written. Returns the files written,
    mapfile first.
    """
    dest = Path(dest)
    fetcher = _Fetcher(base_url)
    mapfile = fetcher.get(MAPFILE, _MAX_MAPFILE)
    text = mapfile.decode("utf-8", errors="replace")
    if not text.lstrip("\ufeff").startswith("Family-model"):
        raise PmutopError(
            f"cannot download {_shown_url(fetcher.url(MAPFILE))}: the answer is not a perfmon mapfile.csv"
        )
    rows = parse_mapfile(text)
    needed: list[PurePosixPath] = []
    for identity, _core_type in wanted:
        if identity.vendor != _INTEL:
            continue
        for row in core_rows(rows, identity):
            rel = _safe_relative(row.filename)
            if rel not in needed:
                needed.append(rel)
    if len(needed) > _MAX_TABLES:
        raise PmutopError(
            f"cannot download {_shown_url(fetcher.url(MAPFILE))}: it names {len(needed)} core tables for this "
            f"machine (at most {_MAX_TABLES} make sense)"
        )
    blobs: list[tuple[PurePosixPath, bytes]] = [(PurePosixPath(MAPFILE), mapfile)]
    for rel in needed:
        data = fetcher.get(str(rel), _MAX_TABLE)
        why = table_problem(data)
        if why is not None:
            raise PmutopError(f"cannot download {_shown_url(fetcher.url(str(rel)))}: not a valid perfmon table: {why}")
        blobs.append((rel, data))
    license_text = fetcher.get_optional(LICENSE, _MAX_LICENSE)
    if license_text is not None:
        blobs.append((PurePosixPath(LICENSE), license_text))
    return _Writer(dest).write_all(blobs)
