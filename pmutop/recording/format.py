"""The recording format: a header line, then one line per Sample, JSON lines (gzip when the name ends in .gz).

Samples are stored whole (every field of pmutop.core.sample.Sample), so a replayed Sample gives exactly
the record, metrics and view the live run showed. FORMAT_VERSION goes up whenever a reader of the old
version could not read the new one correctly.

A sample line may carry more than the sample, beside its "sample" key: readers take the keys they know and
skip the others, so an optional key needs no new version. "task" (added in format version 1, no bump): the
task the live view showed on that CPU, looked up once per interval when the line was written, as
{"name", "pid", "cpu_seconds"}; null when the lookup found none there; absent when no lookup was made (an
older recording, or an interval written late with the next one). An old reader ignores it: its replay shows
no task, as before.

Format version 2 adds lines of their own beside the sample lines: {"snapshot": {...}}, one interval's
per-process and per-cgroup readings (pmutop.core.task_reading.TaskSnapshot) with "interval" (the seq of the
CPU samples it was read with) and "time" (their run time). A version 1 reader would take such a line for a
damaged sample, hence the bump; this reader reads versions 1 and 2 alike (a version 1 recording has no
snapshots). The header's "task_events" lists what the readings' counts may hold; null: the run counted no
processes or cgroups. A snapshot follows its samples in the file (the recorder writes the samples first), but
not necessarily before the next interval's samples: readers pair them by "interval", not by position.

Format version 3 adds {"packages": {...}} lines: one DRAM bandwidth reading per interval (every package's and
memory channel's bytes: pmutop.recording.package_format), with "time", the run time of the CPU samples it was
read after; readers pair it with the interval of that time (the first interval at or after it). The header's
"dram" is {"source", "why"} of the run's DRAM source; null: none was read (no package lines). Only a recording
with package lines says version 3: one without stays version 2, readable by the pmutop before (this reader
reads versions 1 to 3 alike).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pmutop.core.run_description import RunInfo
from pmutop.core.sample import Sample

FORMAT_VERSION = 3
TASKS_VERSION = 2  # what a recording without package lines says (recording.format's note)
MAGIC = "pmutop-recording"  # the header's "format" value: what tells a recording from any other JSON lines
SAMPLE_FIELDS = tuple(f.name for f in dataclasses.fields(Sample))


@dataclass
class Header:
    version: int
    pmutop_version: str
    host: str
    start: float  # wall clock (Unix seconds) when counting started
    interval: float
    mode: str  # "SIMULATED" or the backend name: the batch records' "mode"
    cpus: list[int]
    keys: dict[int, list[str]]  # cpu -> event keys in display order
    topdown: dict[int, str | None]  # cpu -> top-down method
    core_types: dict[int, str] = field(default_factory=dict)
    backend: dict[str, Any] = field(default_factory=dict)  # Backend.describe()
    events: list[dict[str, Any]] = field(default_factory=list)  # key, name and encoding of each event
    runinfo: dict[str, Any] = field(default_factory=dict)  # pmutop.core.run_description.RunInfo as a dict
    task_events: list[str] | None = None  # the task and cgroup readings' events; None: no snapshots recorded
    dram: dict[str, str] | None = None  # {"source", "why"} of the DRAM readings; None: no package lines

    @property
    def remote(self) -> bool:
        """A recording of `--connect`: a lost host comes back, so an error sample does not end its rows."""
        return "hosts" in self.backend

    @property
    def start_text(self) -> str:
        return datetime.fromtimestamp(self.start, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def run_info(self) -> RunInfo:
        """The RunInfo the live view shows, rebuilt from the header and labelled as a replay."""
        known = {f.name for f in dataclasses.fields(RunInfo)}
        data = {k: v for k, v in self.runinfo.items() if k in known}
        data["core_types"] = {int(k): v for k, v in data.get("core_types", {}).items()}
        data.setdefault("hostname", self.host)
        for name, default in (("cpu_model", "?"), ("uarch", None), ("pmu", "PMU"), ("backend", self.mode)):
            data.setdefault(name, default)
        data.setdefault("read_method", "?")
        data.setdefault("simulated", self.mode == "SIMULATED")
        data.setdefault("hypervisor", False)
        data.setdefault("cpus", list(self.cpus))
        # Recordings made before the flag was a field said it only in a notice.
        data.setdefault("watchdog_paused", any("NMI watchdog paused" in n for n in data.get("notices", [])))
        info = RunInfo(**data)
        info.replay = f"{self.host} {self.start_text}"
        return info


def header_to_dict(h: Header) -> dict[str, Any]:
    d = dataclasses.asdict(h)
    d.pop("version")
    # JSON keys are strings; the reader turns them back into CPU numbers.
    return {"format": MAGIC, "version": h.version} | d


def header_from_dict(d: dict[str, Any]) -> Header:
    """Raises KeyError/TypeError/ValueError on a malformed header (the reader turns that into one line)."""
    return Header(
        version=int(d["version"]),
        pmutop_version=str(d.get("pmutop_version", "?")),
        host=str(d["host"]),
        start=float(d["start"]),
        interval=float(d["interval"]),
        mode=str(d["mode"]),
        cpus=[int(c) for c in d["cpus"]],
        keys={int(k): list(v) for k, v in d["keys"].items()},
        topdown={int(k): v for k, v in d.get("topdown", {}).items()},
        core_types={int(k): v for k, v in d.get("core_types", {}).items()},
        backend=dict(d.get("backend", {})),
        events=list(d.get("events", [])),
        runinfo=dict(d.get("runinfo", {})),
        task_events=None if d.get("task_events") is None else [str(e) for e in d["task_events"]],
        dram=None if d.get("dram") is None else {str(k): str(v) for k, v in d["dram"].items()},
    )


@dataclass(frozen=True)
class RecordedTask:
    """The top task of one CPU in one interval (pmutop.probes.tasks.TopTask as recorded)."""

    name: str
    pid: int
    cpu_seconds: float  # CPU time it used in the interval


@dataclass(frozen=True)
class TaskNote:
    """A lookup was made for this sample: `task` is what it found on the CPU (None: no task ran there)."""

    task: RecordedTask | None


def task_to_dict(task: RecordedTask | None) -> dict[str, Any] | None:
    return None if task is None else {"name": task.name, "pid": task.pid, "cpu_seconds": task.cpu_seconds}


def task_note_from_line(line: dict[str, Any]) -> TaskNote | None:
    """The task note of a sample line; None when it has none. A malformed note is no note: the task column is
    a help, never a reason to refuse a recording."""
    if "task" not in line:
        return None
    d = line["task"]
    if d is None:
        return TaskNote(None)
    try:
        return TaskNote(RecordedTask(str(d["name"]), int(d["pid"]), float(d["cpu_seconds"])))
    except (KeyError, TypeError, ValueError):
        return None


def sample_to_dict(s: Sample) -> dict[str, Any]:
    return {f: getattr(s, f) for f in SAMPLE_FIELDS}


def _opt(convert, value):  # type: ignore[no-untyped-def]
    return None if value is None else convert(value)


def sample_from_dict(d: dict[str, Any]) -> Sample:
    """Raises KeyError/TypeError/ValueError on a malformed sample. Fields a recording lacks (an older
    pmutop's) take the Sample's defaults."""

    def floats(name: str) -> dict[str, float]:
        return {str(k): float(v) for k, v in (d.get(name) or {}).items()}

    return Sample(
        cpu=int(d["cpu"]),
        seq=int(d["seq"]),
        time=float(d["time"]),
        interval=float(d["interval"]),
        tsc=_opt(int, d.get("tsc")),
        tsc_hz=_opt(float, d.get("tsc_hz")),
        counts={str(k): int(v) for k, v in d["counts"].items()},
        overflows={str(k): int(v) for k, v in (d.get("overflows") or {}).items()},
        suspect=_opt(str, d.get("suspect")),
        error=_opt(str, d.get("error")),
        estimated=floats("estimated"),
        util=_opt(float, d.get("util")),
        topdown=_opt(str, d.get("topdown")),
        busy=_opt(float, d.get("busy")),
        bzy_mhz=_opt(float, d.get("bzy_mhz")),
        cstates=floats("cstates"),
        temp_c=_opt(float, d.get("temp_c")),
        throttle=tuple(str(t) for t in d.get("throttle") or ()),
        package=_opt(int, d.get("package")),
        pkg_temp_c=_opt(float, d.get("pkg_temp_c")),
        energy_j=floats("energy_j"),
        power_src={str(k): str(v) for k, v in (d.get("power_src") or {}).items()},
    )


def event_encodings(events: list[Any] | None, keys: list[str]) -> list[dict[str, Any]]:
    """Key, name and register encoding of every counted event (the defaults are the architectural ones)."""
    from pmutop.pmu.events import ARCH_EVENTS

    specs = {e.key: e for e in ARCH_EVENTS.values()} | {e.key: e for e in events or []}
    out = []
    for key in keys:
        spec = specs.get(key)
        entry: dict[str, Any] = {"key": key}
        if spec is not None:
            raw = spec.raw
            entry |= {
                "name": spec.name,
                "raw": dataclasses.asdict(raw) if raw is not None else None,
                "fixed_index": spec.fixed_index,
                "perf_hardware": spec.hardware,
                "perf_software": spec.software,
            }
        out.append(entry)
    return out
