"""How one interval's per-process and per-cgroup readings are stored in a recording (format version 2: see
pmutop.recording.format): a line {"snapshot": {"interval", "time", "mode", "notes", "tasks", "cgroups",
"cpu_shares"}}. Each reading is an object of its dataclass's fields, a field at its default left out (most
readings are exact, alive and permitted: the lines stay short)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from pmutop.core.task_reading import EXACT, CgroupReading, TaskReading, TaskSnapshot


@dataclass(frozen=True)
class RecordedSnapshot:
    """A snapshot as recorded: `interval` is the seq of the CPU samples it was read with, `time` their run time."""

    interval: int
    time: float
    snapshot: TaskSnapshot


def _defaults(cls: type) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


_TASK_DEFAULTS = _defaults(TaskReading)
_CGROUP_DEFAULTS = _defaults(CgroupReading)


def _compact(reading: TaskReading | CgroupReading, defaults: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(reading):
        value = getattr(reading, f.name)
        if f.name in defaults and value == defaults[f.name]:
            continue
        if f.name == "thread_readings":
            value = [_compact(t, _TASK_DEFAULTS) for t in value]
        elif isinstance(value, tuple):
            value = list(value)
        out[f.name] = value
    return out


def snapshot_to_dict(interval: int, time: float, snapshot: TaskSnapshot) -> dict[str, Any]:
    return {
        "interval": interval,
        "time": time,
        "mode": snapshot.mode,
        "notes": list(snapshot.notes),
        "tasks": [_compact(t, _TASK_DEFAULTS) for t in snapshot.tasks],
        "cgroups": [_compact(c, _CGROUP_DEFAULTS) for c in snapshot.cgroups],
        "cpu_shares": {str(cpu): [list(pair) for pair in shares] for cpu, shares in snapshot.cpu_shares.items()},
    }


def _ints(d: Any) -> dict[str, int]:
    return {str(k): int(v) for k, v in (d or {}).items()}


def _floats(d: Any) -> dict[str, float]:
    return {str(k): float(v) for k, v in (d or {}).items()}


def task_from_dict(d: dict[str, Any]) -> TaskReading:
    """Raises KeyError/TypeError/ValueError on a malformed reading."""
    return TaskReading(
        pid=int(d["pid"]),
        comm=str(d["comm"]),
        user=str(d["user"]),
        threads=int(d["threads"]),
        interval=float(d["interval"]),
        counts=_ints(d.get("counts")),
        counted=float(d["counted"]),
        estimated=_floats(d.get("estimated")),
        exited=bool(d.get("exited", False)),
        cgroup=str(d.get("cgroup", "")),
        cpus=tuple(int(c) for c in d.get("cpus") or ()),
        no_permission=bool(d.get("no_permission", False)),
        estimate=bool(d.get("estimate", False)),
        start_time=float(d.get("start_time", 0.0)),
        thread_readings=tuple(task_from_dict(t) for t in d.get("thread_readings") or ()),
    )


def cgroup_from_dict(d: dict[str, Any]) -> CgroupReading:
    return CgroupReading(
        path=str(d["path"]),
        name=str(d["name"]),
        interval=float(d["interval"]),
        counts=_ints(d.get("counts")),
        counted=float(d["counted"]),
        estimated=_floats(d.get("estimated")),
        processes=int(d.get("processes", 0)),
        no_permission=bool(d.get("no_permission", False)),
        estimate=bool(d.get("estimate", False)),
    )


def snapshot_from_dict(d: dict[str, Any]) -> RecordedSnapshot:
    """Raises KeyError/TypeError/ValueError/AttributeError on a malformed snapshot (the reader says where)."""
    snapshot = TaskSnapshot(
        tasks=tuple(task_from_dict(t) for t in d.get("tasks") or ()),
        cgroups=tuple(cgroup_from_dict(c) for c in d.get("cgroups") or ()),
        mode=str(d.get("mode", EXACT)),
        notes=tuple(str(n) for n in d.get("notes") or ()),
        cpu_shares={
            int(cpu): tuple((int(pid), float(share)) for pid, share in shares)
            for cpu, shares in (d.get("cpu_shares") or {}).items()
        },
    )
    return RecordedSnapshot(int(d["interval"]), float(d["time"]), snapshot)
