"""Which task used most CPU on each core in the last interval (the live view's "top task" column)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import psutil


@dataclass(frozen=True)
class TopTask:
    name: str
    pid: int
    cpu_seconds: float  # CPU time it used in the interval


class TaskSource(Protocol):
    def top_per_cpu(self) -> dict[int, TopTask]: ...


class NoTasks:
    """For CPUs that are not this host's (a sysroot): there is nothing true to show."""

    def top_per_cpu(self) -> dict[int, TopTask]:
        return {}


class PsutilTasks:
    """Per-process CPU time deltas from psutil, attributed to the CPU each process last ran on
    (the same attribution as top's "P" column: a process that migrated counts on its latest CPU)."""

    FIELDS = ("pid", "name", "cpu_num", "cpu_times", "create_time")

    def __init__(self, cpus: Iterable[int], process_iter: Callable[..., Iterable[Any]] | None = None) -> None:
        self._cpus = set(cpus)
        self._process_iter = process_iter or psutil.process_iter
        self._prev: dict[tuple[int, float], float] = {}
        self._primed = False

    def top_per_cpu(self) -> dict[int, TopTask]:
        seen: dict[tuple[int, float], float] = {}
        best: dict[int, TopTask] = {}
        for proc in self._process_iter(list(self.FIELDS)):
            info = proc.info
            times = info.get("cpu_times")
            if times is None or info.get("create_time") is None:
                continue  # vanished or not accessible
            key = (info["pid"], info["create_time"])
            total = times.user + times.system
            seen[key] = total
            # A process first seen after priming started during the interval: all its time is new.
            delta = total - self._prev.get(key, 0.0) if (key in self._prev or self._primed) else 0.0
            cpu = info.get("cpu_num")
            if cpu in self._cpus and delta > 0 and (cpu not in best or delta > best[cpu].cpu_seconds):
                best[cpu] = TopTask(info.get("name") or "?", info["pid"], delta)
        self._prev = seen
        self._primed = True
        return best


class SimTasks:
    """Each simulated core's top task: the process of the simulated machine's process table
    (pmutop.sim.processes) that ran longest on it since the previous lookup (shown only in SIMULATED mode)."""

    def __init__(self, platform: Any, cpus: Iterable[int]) -> None:
        self._machine = platform.machine
        self._cpus = list(cpus)
        self._last_tick = 0  # the previous lookup's TSC: CPU time counts from there, as psutil's deltas do
        self._last: tuple[int, dict[int, TopTask]] | None = None  # (time, tasks) of the last lookup

    def top_per_cpu(self) -> dict[int, TopTask]:
        now = self._machine.elapsed_ns()
        if self._last is not None and self._last[0] == now:
            return self._last[1]  # asked again at the same simulated instant: the same answer
        tick = self._machine.workload(0).ticks(now)
        tops = self._machine.processes.top_per_cpu(self._cpus, self._last_tick, tick)
        self._last_tick = tick
        out = {cpu: TopTask(name, pid, seconds) for cpu, (name, pid, seconds) in tops.items()}
        self._last = (now, out)
        return out
