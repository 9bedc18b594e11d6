"""What a downloaded perfmon table may hold: every event checked field by field before it is written."""

from __future__ import annotations

import re
from typing import Any

from pmutop.pmu.perfmon.intel_event import CONTROL_CHARS, MAX_COUNTERS, decode_json

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
        if int(label.group(1)) >= MAX_COUNTERS:
            raise ValueError(f"{key} {value[:40]!r} is out of range (fixed counters 0-{MAX_COUNTERS - 1})")
        return
    _numbers(value, key, 0, MAX_COUNTERS - 1, MAX_COUNTERS)


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
        decoded = decode_json(data)
    except ValueError as e:
        return str(e)
    if isinstance(decoded, dict) and not isinstance(decoded.get("Header", {}), dict):
        return "Header is not an object"
    events = decoded.get("Events") if isinstance(decoded, dict) else decoded
    if not isinstance(events, list):
        return "no event list"
    if not events:
        return "no events"
    for i, event in enumerate(events, 1):
        if not isinstance(event, dict):
            return f"event {i} is not an object"
        why = _event_problem(event)
        if why is not None:
            name = event.get("EventName")
            named = f" ({name[:60]})" if isinstance(name, str) and not CONTROL_CHARS.search(name) else ""
            return f"event {i}{named}: {why}"
    return None
