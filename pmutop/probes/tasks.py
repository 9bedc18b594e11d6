"""Which task used most CPU on each core in the last interval (the live view's "top task" column)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from pmutop.probes.process_scan import ProcessScan, ProcessUse, read_proc_file


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


class ProcTasks:
    """Per-thread CPU time deltas from one pass over /proc (pmutop.probes.process_scan, as the process view's
    tracker reads it), each on the CPU the thread last ran on. psutil builds a Process object and reads
    through it per process: about four times the CPU, and the live view asks every interval."""

    def __init__(self, cpus: Iterable[int], scan: ProcessScan | None = None) -> None:
        self._cpus = set(cpus)
        self._scan = scan or ProcessScan()
        self._root = self._scan.root
        self._names: dict[tuple[int, int], str] = {}

    def top_per_cpu(self) -> dict[int, TopTask]:
        scan = self._scan.scan()  # the first only primes: nothing used CPU "in the interval" yet
        best: dict[int, tuple[float, ProcessUse]] = {}
        for p in scan.processes.values():
            for cpu, seconds in p.cpus.items():
                if seconds > 0 and cpu in self._cpus and (cpu not in best or seconds > best[cpu][0]):
                    best[cpu] = (seconds, p)
        if len(self._names) > 2 * len(scan.processes) + 64:
            self._names = {k: v for k, v in self._names.items() if k[0] in scan.processes}
        return {cpu: TopTask(self._name(p), p.pid, seconds) for cpu, (seconds, p) in best.items()}

    def close(self) -> None:
        """Close the /proc files the scan keeps open."""
        self._scan.close()

    def _name(self, p: ProcessUse) -> str:
        """As psutil's name(): the kernel's comm, cut at 15 characters, completed from the command line."""
        if len(p.comm) < 15:
            return p.comm
        name = self._names.get(p.identity)
        if name is None:
            argv0 = (read_proc_file(f"{self._root}/{p.pid}/cmdline") or b"").split(b"\0", 1)[0]
            full = argv0.decode(errors="replace").rsplit("/", 1)[-1]
            name = self._names[p.identity] = full if full.startswith(p.comm) else p.comm
        return name


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


def close_tasks(source: TaskSource) -> None:
    """Close what a task source keeps open (a /proc scan's files), when it keeps anything."""
    if isinstance(source, ProcTasks):
        source.close()
