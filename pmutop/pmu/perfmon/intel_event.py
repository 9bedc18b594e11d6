"""One perfmon JSON event table: its events as IntelEvent, read once per file version.

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

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pmutop.core.errors import PmutopError
from pmutop.pmu.registers import MAX_FIXED_COUNTERS

MAX_TABLE_BYTES = 64 << 20  # the largest core table is 2 MB; refuse anything absurd, on disk or on the wire
MAX_COUNTERS = 64  # counter indexes 0-63: a counter mask is one 64-bit word (the tables go up to 9)
_MAX_NAME = 256  # characters of an event name (Intel's longest is under 100)
_MAX_DESCRIPTION = 1000  # characters kept of a description (Intel's BriefDescription is under 500)
# Control characters (C0, DEL, C1) never reach the terminal from a table: they could carry escape sequences.
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")

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
            return f"lists counter {_short(self.bad_counter)}, and counters are numbered 0-{MAX_COUNTERS - 1}"
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


def _text(value: Any) -> str:
    """A table field as text. Intel writes every field as a JSON string; a list or object is a broken table."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(f"a {type(value).__name__} where text was expected")
    return str(value)


def table_int(value: Any, default: int = 0) -> int:
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
    return tuple(table_int(part) for part in _text(value).split(",") if part.strip())


def _flag(value: Any) -> bool:
    return table_int(value) != 0


def _gp_set(text: str) -> set[int]:
    if not text or _FIXED_LABEL.search(text):
        return set()
    return {table_int(part) for part in text.split(",") if part.strip()}


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
            if all(c < MAX_COUNTERS for c in counters):
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
    if not name or len(name) > _MAX_NAME or CONTROL_CHARS.search(name) or " " in name:
        raise ValueError("no usable name")
    codes = _ints(e.get("EventCode"))
    if not codes:
        raise ValueError("no event code")
    umask = table_int(e.get("UMask"))
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
    bad_counter = max(gp) if gp and max(gp) >= MAX_COUNTERS else None
    msr_index = tuple(i for i in _ints(e.get("MSRIndex")) if i != 0)
    msr_value = table_int(e.get("MSRValue"))
    paired = codes[1] if len(codes) > 1 else None
    # Old tables list the generic OFFCORE_RESPONSE with MSRIndex 0 and Offcore 0: the code pair gives it away.
    needs_msr = bool(msr_index) or msr_value != 0 or _flag(e.get("Offcore")) or paired is not None
    description = " ".join(CONTROL_CHARS.sub(" ", _text(e.get("BriefDescription") or "")).split())
    if len(description) > _MAX_DESCRIPTION:
        description = description[: _MAX_DESCRIPTION - 1] + "…"
    return IntelEvent(
        name=name,
        event_code=codes[0],
        umask=umask,
        cmask=table_int(e.get("CounterMask")),
        inv=_flag(e.get("Invert")),
        edge=_flag(e.get("EdgeDetect")),
        counters=None if fixed is not None or not gp or gp == full or bad_counter is not None else _mask(gp),
        fixed_counter=fixed,
        needs_msr=needs_msr,
        msr_index=msr_index,
        msr_value=msr_value,
        paired_code=paired,
        any_thread=_flag(e.get("AnyThread")),
        umask_ext=table_int(e.get("UMaskExt")),
        equal=_flag(e.get("Equal")),
        deprecated=_flag(e.get("Deprecated")),
        description=description,
        counter_text=CONTROL_CHARS.sub(" ", counter_text)[:_MAX_NAME],
        bad_counter=bad_counter,
    )


_LOADED: dict[Path, tuple[tuple[int, int], dict[str, IntelEvent]]] = {}


def _event_list(data: Any) -> list[dict[str, Any]] | None:
    if isinstance(data, dict):
        data = data.get("Events")
    if isinstance(data, list) and all(isinstance(e, dict) for e in data):
        return data
    return None


def decode_json(data: bytes) -> Any:
    """json.loads whose failures are ValueError with a one-line reason (deep nesting included)."""
    if len(data) > MAX_TABLE_BYTES:
        raise ValueError(f"larger than {MAX_TABLE_BYTES >> 20} MiB")
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
    if st.st_size > MAX_TABLE_BYTES:  # checked before reading: the file is never loaded whole
        raise PmutopError(f"{path} is not a valid perfmon table: larger than {MAX_TABLE_BYTES >> 20} MiB")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TABLE_BYTES + 1)
    except OSError as e:
        raise PmutopError(f"cannot read Intel event table {path}: {e.strerror}") from None
    try:
        raw = _event_list(decode_json(data))
    except ValueError as e:
        raise PmutopError(f"{path} is not a valid perfmon table: {e}") from None
    if raw is None:
        raise PmutopError(f"{path} is not a valid perfmon table: no event list")
    events = _parse_file(raw)
    _LOADED[path] = (stamp, events)
    return events
