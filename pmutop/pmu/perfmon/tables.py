"""Locating Intel's perfmon tables: mapfile.csv, which event files describe which CPU, and the directory.

A perfmon directory holds `mapfile.csv` (which event files describe which CPU) and per-model JSON event
lists. pmutop reads only the core event files (EventType `core` / `hybridcore`).
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pmutop.core.errors import PmutopError, UsageError
from pmutop.pmu.cpuid_decode import CORE_TYPE_ATOM, CORE_TYPE_CORE, CpuIdentity
from pmutop.pmu.perfmon.intel_event import IntelEvent, load_events, table_int

PERFMON_ENV = "PMUTOP_PERFMON_DIR"
MAPFILE = "mapfile.csv"

INTEL_VENDOR = "GenuineIntel"  # the only vendor Intel's tables describe
_CORE_EVENT_TYPES = ("core", "hybridcore")
_CORE_TYPE_NAMES = {CORE_TYPE_ATOM: "Atom (0x20)", CORE_TYPE_CORE: "Core (0x40)"}


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


@dataclass(frozen=True)
class MapRow:
    key: str
    filename: str  # as in the mapfile: "/SKX/events/skylakex_core.json"
    event_type: str
    core_type: int | None
    native_model_id: int | None
    role: str


def safe_relative(filename: str) -> PurePosixPath:
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
            safe_relative(filename)
            core_type = table_int(rec.get("Core Type"), -1)
            native = table_int(rec.get("Native Model ID"), -1)
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
        return self.root.joinpath(*safe_relative(row.filename).parts)

    def files_for(self, identity: CpuIdentity, core_type: int | None, native_model_id: int | None = None) -> list[Path]:
        """The core event files that describe this CPU (one per table; a hybrid CPU gets its core type's)."""
        if identity.vendor != INTEL_VENDOR:
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
