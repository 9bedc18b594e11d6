"""The process view with the msr backend: an estimate, never exact.

Per-task perf hardware counters would take the very counters the msr backend programs, so none are opened:
each core's counts of the interval (the CPU samples) are split between the processes that ran on it by their
share of its busy time (pmutop.probes.process_scan). task_clock is the process's CPU time from
/proc/PID/stat (utime + stime, clock-tick resolution), not a perf software counter: no file descriptors, no
perf_event_paranoid question, and the same numbers the split uses. Context switches are not estimated.
Who is shown follows the top-N tracker's hysteresis (pmutop.probes.top_tasks.Membership).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pmutop.core.sample import Sample
from pmutop.core.task_reading import ESTIMATED, TaskReading, TaskSnapshot
from pmutop.probes.process_scan import Identity, ProcessScan, ProcessSource, ProcessUse
from pmutop.probes.top_tasks import EXITED_ROWS, Membership, empty_row

# The per-core counts a process row shows, in the task records' names (pmutop.probes.task_counters).
SPLIT_EVENTS = ("cycles", "instructions", "llc_misses", "branch_misses")


@dataclass
class _Shown:
    pid: int
    start_time: float
    user: str
    last: TaskReading | None = None
    exited_rows: int = -1  # after exit: rows still to show


class TaskEstimate:
    """A TaskCounterSource for the msr backend: readings have estimate=True, the snapshot mode ESTIMATED."""

    def __init__(self, top: int = 32, cpu_events: Sequence[str] = (), *, source: ProcessSource | None = None) -> None:
        """`cpu_events`: the CPU samples' event keys (the backend's); those in SPLIT_EVENTS are split."""
        self.events = ["task_clock", *(e for e in SPLIT_EVENTS if e in cpu_events)]
        self._source = source or ProcessScan()
        self._members = Membership(top)
        self._shown: dict[Identity, _Shown] = {}
        self._source.scan()

    def set_top(self, n: int) -> None:
        self._members.n = n

    def begin(self) -> None:
        self._source.scan()

    def read(self, cpu_samples: Sequence[Sample] = ()) -> TaskSnapshot:
        scan = self._source.scan()
        per_cpu = {s.cpu: s.counts for s in cpu_samples if s.error is None}
        rows: list[TaskReading] = []
        for key, shown in list(self._shown.items()):
            info = scan.processes.get(key[0])
            if shown.exited_rows < 0 and (info is None or info.start != key[1] or info.zombie):
                # Its CPU time after the previous scan is gone with it: its rows from now on say exited, no counts.
                shown.exited_rows = EXITED_ROWS + 1
                self._members.drop(key)
            if shown.exited_rows >= 0:
                if shown.last is not None:
                    rows.append(empty_row(shown.last, scan.interval, exited=True))
                shown.exited_rows -= 1
                if shown.exited_rows == 0:
                    del self._shown[key]
        ranked = scan.ranked()
        _, left = self._members.update([p.identity for p in ranked])
        for key in left:
            self._shown.pop(key, None)
        explained = 0.0
        for p in ranked:
            if p.identity not in self._members.outside:
                continue
            if p.identity not in self._shown:
                self._shown[p.identity] = _Shown(p.pid, p.start_time, self._source.user(p.pid, p.start))
            shown = self._shown[p.identity]
            shown.last = self._reading(p, shown, scan.cpu_busy, per_cpu, scan.interval)
            rows.append(shown.last)
            explained += p.cpu_seconds
        # Members that used no CPU this interval: a row with zero CPU (they are still shown).
        for key, shown in self._shown.items():
            info = scan.processes.get(key[0])
            if shown.exited_rows < 0 and info is not None and info.cpu_seconds == 0 and shown.last is not None:
                shown.last = self._reading(info, shown, scan.cpu_busy, per_cpu, scan.interval)
                rows.append(shown.last)
        busy = sum(seconds for cpu, seconds in scan.cpu_busy.items() if cpu in per_cpu)
        note = (
            f"est.: the processes shown explain {min(1.0, explained / busy):.0%} of the cores' busy time; "
            "exact numbers: --backend perf"
            if busy > 0
            else "est.: the cores were idle; exact numbers: --backend perf"
        )
        notes = (note, *self._members.note(sum(1 for r in rows if not r.exited)))
        return TaskSnapshot(tasks=tuple(rows), mode=ESTIMATED, notes=notes, cpu_shares=scan.cpu_shares())

    def _reading(
        self,
        p: ProcessUse,
        shown: _Shown,
        cpu_busy: dict[int, float],
        per_cpu: dict[int, dict[str, int]],
        interval: float,
    ) -> TaskReading:
        counts = {"task_clock": round(p.cpu_seconds * 1e9)}
        for event in self.events[1:]:
            total = 0.0
            for cpu, seconds in p.cpus.items():
                busy, core = cpu_busy.get(cpu), per_cpu.get(cpu)
                if busy and core is not None and event in core:
                    total += core[event] * min(1.0, seconds / busy)
            counts[event] = round(total)
        return TaskReading(
            p.pid,
            p.comm,
            shown.user,
            p.threads,
            interval,
            counts,
            0.0,  # no counter of its own covered it: the counts are its share of its cores'
            estimate=True,
            cgroup=self._source.cgroup(p.pid),
            cpus=tuple(sorted(p.cpus)),
            start_time=p.start_time,
        )

    def close(self) -> None:
        self._source.close()
