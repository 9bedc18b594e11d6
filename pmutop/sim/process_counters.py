"""Per-process and per-cgroup counters of the simulated machine (`--demo` with --tasks, --pid, --cgroups, --cgroup).

The counts are the process table's (pmutop.sim.processes): what each process ran on each core, cut at the same
instants as the CPU samples of the interval, so that per event the processes' counts on a core add up to the
core's sample exactly. A sample says how many TSC ticks its interval lasted; the simulated PMU remembers the TSC of
its recent rdpmc reads (counters and TSC of one instant), so the first interval's ends are found among those reads
and every later end is the previous end plus the sample's ticks. Without samples (or when the reads are not found,
e.g. `--read msr`, whose TSC and counters are read at different instants) each core is cut at the machine's
present instead: the counts are still exactly what the processes ran, over slightly different ends.

task_clock is each slice's unhalted time (reference cycles at the TSC rate, in ns); context switches come from each
program's rate per second of running. Both are cut at the same instants, so they too add up per core.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pmutop.core.errors import UsageError
from pmutop.core.task_reading import SIMULATED, CgroupReading, TaskReading, TaskSnapshot
from pmutop.probes.cgroup_names import path_under_root
from pmutop.probes.task_counters import task_events
from pmutop.sim.processes import ProcessTable, SimProcess, Slice, cgroup_ancestors, cgroup_name

NOTE = "SIMULATED: the simulator's processes; on each core they add up exactly to the core's counts"
SIM_CGROUP_ROOT = "sys/fs/cgroup"  # where the simulated machine's cgroup v2 tree would be mounted
# Amounts5 positions of the hardware events a process row shows.
_HARDWARE = {"cycles": 0, "instructions": 1, "llc_misses": 2, "branch_misses": 3}
_REF = 4


class _Totals:
    """One process's (or thread's, or cgroup's) counts in one interval."""

    __slots__ = ("clock", "cpus", "hw", "switches")

    def __init__(self) -> None:
        self.clock = 0
        self.switches = 0
        self.hw = [0, 0, 0, 0]
        self.cpus: set[int] = set()

    def add(self, other: _Totals) -> None:
        self.clock += other.clock
        self.switches += other.switches
        self.hw = [a + b for a, b in zip(self.hw, other.hw, strict=True)]
        self.cpus |= other.cpus


class SimTaskCounters:
    """A TaskCounterSource over the simulated machine: the top `top` processes by CPU (or exactly `pids`), their
    threads, and the cgroup tree (`all_cgroups`) or exactly `cgroups`."""

    def __init__(
        self,
        machine: Any,  # pmutop.sim.model.SimMachine
        *,
        pids: Sequence[int] = (),
        top: int | None = None,
        cgroups: Sequence[str] = (),
        all_cgroups: bool = False,
        requested_events: Sequence[str] | None = None,
    ) -> None:
        self._machine = machine
        self._table: ProcessTable = machine.processes
        self._tsc_hz = machine.config.tsc_hz
        self.events = [e.name for e in task_events(requested_events)]
        self._hw = [(name, _HARDWARE[name]) for name in self.events if name in _HARDWARE]
        self._pids = list(pids)
        self._top = top
        now = self._now()
        for pid in self._pids:
            proc = self._table.process(pid)
            if proc is None or proc.start_tick > now:
                known = ", ".join(f"{p.pid} {p.comm}" for p in sorted(self._table.alive_at(now), key=lambda p: p.pid))
                raise UsageError(f"--pid {pid}: no such process in the simulated machine (running: {known})")
        self._cgroups = [self._cgroup_path(c) for c in cgroups]
        self._all_cgroups = all_cgroups
        self._ends: dict[int, tuple[int, int]] = {}  # cpu -> (seq, TSC) of its last interval's end
        self._start = now
        self._reported_exit: set[int] = set()

    def _now(self) -> int:
        return self._machine.workload(0).ticks(self._machine.elapsed_ns())

    def _cgroup_path(self, text: str) -> str:
        path = path_under_root(text, SIM_CGROUP_ROOT)
        known = {a for p in self._table.processes.values() for a in cgroup_ancestors(p.cgroup)}
        if path not in known:
            raise UsageError(
                f"--cgroup {text}: no such cgroup in the simulated machine (e.g. {', '.join(sorted(known)[:4])})"
            )
        return path

    def begin(self) -> None:
        self._ends.clear()
        self._start = self._now()

    def close(self) -> None:
        pass

    # -- the interval's ends per core ------------------------------------------------------------------

    def _bounds(self, cpu_samples: Sequence[Any]) -> dict[int, tuple[int, int]]:
        """Per core, the TSC values its interval starts and ends at."""
        if not cpu_samples:
            now = self._now()
            bounds = {cpu: (self._ends.get(cpu, (0, self._start))[1], now) for cpu in range(self._table.cpus)}
            self._ends = {cpu: (0, now) for cpu in bounds}
            return bounds
        bounds = {}
        states = self._machine.states()
        for s in cpu_samples:
            if s.error is not None or s.tsc is None:
                continue
            last = self._ends.get(s.cpu)
            chained = last is not None and last[0] == s.seq - 1
            start = last[1] if last is not None and chained else self._find_start(states[s.cpu], s.tsc)
            bounds[s.cpu] = (start, start + s.tsc)
            self._ends[s.cpu] = (s.seq, start + s.tsc)
        return bounds

    def _find_start(self, state: Any, ticks: int) -> int:
        """The read the interval started at: the latest pair of remembered reads `ticks` apart (else the CPU's
        present minus `ticks`)."""
        with state.lock:
            reads = list(state.counter_reads)
            present = state.tsc()
        seen = set(reads)
        starts = [x - ticks for x in reads if x - ticks in seen]
        return max(starts) if starts else max(0, present - ticks)

    # -- the readings -----------------------------------------------------------------------------------

    def read(self, cpu_samples: Sequence[Any] = ()) -> TaskSnapshot:
        bounds = self._bounds(cpu_samples)
        if not bounds:
            return TaskSnapshot(mode=SIMULATED, notes=(NOTE,))
        interval = max(b - a for a, b in bounds.values()) / self._tsc_hz
        end = max(b for _, b in bounds.values())
        per_process: dict[int, _Totals] = {}
        per_thread: dict[int, _Totals] = {}
        cpu_shares: dict[int, tuple[tuple[int, float], ...]] = {}
        for cpu, (a, b) in sorted(bounds.items()):
            busy: dict[int, int] = {}
            for sl in self._table.slices(cpu, a, b):
                run = sl[0]
                part = self._part(cpu, sl)
                per_process.setdefault(run.pid, _Totals()).add(part)
                per_thread.setdefault(run.tid, _Totals()).add(part)
                busy[run.pid] = busy.get(run.pid, 0) + part.clock
            total = sum(busy.values())
            if total:
                shares = sorted(((pid, ns / total) for pid, ns in busy.items()), key=lambda x: (-x[1], x[0]))
                cpu_shares[cpu] = tuple((pid, round(share, 4)) for pid, share in shares)
        procs = {pid: p for pid in per_process if (p := self._table.process(pid)) is not None}
        tasks = self._tasks(per_process, per_thread, procs, interval, end)
        cgroups = self._cgroup_readings(per_process, procs, interval, end)
        return TaskSnapshot(tasks=tasks, cgroups=cgroups, mode=SIMULATED, notes=(NOTE,), cpu_shares=cpu_shares)

    def _part(self, cpu: int, sl: Slice) -> _Totals:
        run, before, after = sl
        proc = self._table.process(run.pid)
        rate = proc.switches_per_s if proc is not None else 0
        part = _Totals()
        # Unhalted ns from the TSC-rate reference cycles, and switches from them: both cut at the same instants
        # as the other amounts, so they telescope along a core.
        ns0, ns1 = before[_REF] * 1_000_000_000 // self._tsc_hz, after[_REF] * 1_000_000_000 // self._tsc_hz
        part.clock = ns1 - ns0
        part.switches = ns1 * rate // 1_000_000_000 - ns0 * rate // 1_000_000_000
        part.hw = [y - x for x, y in zip(before[:_REF], after[:_REF], strict=True)]
        part.cpus.add(cpu)
        return part

    def _counts(self, t: _Totals) -> dict[str, int]:
        counts = {"task_clock": t.clock, "context_switches": t.switches}
        counts |= {name: t.hw[i] for name, i in self._hw}
        return counts

    def _reading(
        self, proc: SimProcess, t: _Totals, interval: float, end: int, threads: tuple[TaskReading, ...]
    ) -> TaskReading:
        exited = proc.end_tick is not None and proc.end_tick <= end
        return TaskReading(
            pid=proc.pid,
            comm=proc.comm,
            user=proc.user,
            threads=len(proc.tids),
            interval=interval,
            counts=self._counts(t),
            counted=1.0,
            exited=exited,
            cgroup=proc.cgroup,
            cpus=tuple(sorted(t.cpus)),
            start_time=proc.start_tick / self._tsc_hz,
            thread_readings=threads,
        )

    def _tasks(
        self,
        per_process: dict[int, _Totals],
        per_thread: dict[int, _Totals],
        procs: dict[int, SimProcess],
        interval: float,
        end: int,
    ) -> tuple[TaskReading, ...]:
        if self._pids:
            chosen = []
            for pid in list(self._pids):
                proc = procs.get(pid) or self._table.process(pid)
                if proc is None:  # exited long ago and forgotten: its exit was reported
                    self._pids.remove(pid)
                    continue
                chosen.append(proc)
        elif self._top:
            ranked = sorted(procs.values(), key=lambda p: (-per_process[p.pid].clock, p.pid))
            chosen = ranked[: self._top]
        else:
            return ()
        out = []
        for proc in chosen:
            totals = per_process.get(proc.pid, _Totals())
            threads: tuple[TaskReading, ...] = ()
            if proc.multithreaded:
                threads = tuple(
                    TaskReading(
                        pid=tid,
                        comm=proc.comm,
                        user=proc.user,
                        threads=1,
                        interval=interval,
                        counts=self._counts(per_thread[tid]),
                        counted=1.0,
                        cgroup=proc.cgroup,
                        cpus=tuple(sorted(per_thread[tid].cpus)),
                        start_time=proc.start_tick / self._tsc_hz,
                    )
                    for tid in proc.tids
                    if tid in per_thread
                )
            reading = self._reading(proc, totals, interval, end, threads)
            out.append(reading)
            if reading.exited and self._pids:
                self._pids.remove(proc.pid)  # read one last time, as the kernel's counters are
        return tuple(out)

    def _cgroup_readings(
        self, per_process: dict[int, _Totals], procs: dict[int, SimProcess], interval: float, end: int
    ) -> tuple[CgroupReading, ...]:
        if not (self._all_cgroups or self._cgroups):
            return ()
        totals: dict[str, _Totals] = {}
        members: dict[str, int] = {}
        for proc in self._table.alive_at(end):
            for path in cgroup_ancestors(proc.cgroup):
                members[path] = members.get(path, 0) + 1
                totals.setdefault(path, _Totals())
        for pid, t in per_process.items():
            ran = procs.get(pid)
            if ran is None:
                continue
            for path in cgroup_ancestors(ran.cgroup):  # a parent counts its children (cgroup v2 is hierarchical)
                totals.setdefault(path, _Totals()).add(t)
        paths = self._cgroups if self._cgroups else sorted(totals)
        return tuple(
            CgroupReading(
                path=path,
                name=cgroup_name(path),
                interval=interval,
                counts=self._counts(totals.get(path, _Totals())),
                counted=1.0,
                processes=members.get(path, 0),
            )
            for path in paths
        )
