"""The summary `pmutop -- COMMAND` prints on stderr when the command ends, laid out as `perf stat`'s
"Performance counter stats for 'COMMAND':", with pmutop's derived values. Pure: totals in, text out."""

from __future__ import annotations

import os
import shlex
import signal
from dataclasses import dataclass, field

from pmutop.core.task_reading import TaskReading

# perf's names for the events, in perf stat's order; a line is printed only for an event that was counted.
_PERF_NAMES = {
    "task_clock": "task-clock",
    "context_switches": "context-switches",
    "cpu_migrations": "cpu-migrations",
    "page_faults": "page-faults",
    "cycles": "cycles",
    "instructions": "instructions",
    "llc_misses": "LLC-misses",
    "branch_misses": "branch-misses",
}


@dataclass
class CommandTotals:
    """One command's counts over its whole run: the sum of its per-interval readings (each already scaled by
    enabled/running), and per event the share of the command's running time a counter really covered.

    The share is weighted by task-clock: a per-task counter is enabled only while the task runs, so each
    interval's enabled time is its task-clock (the kernel's software clock, never multiplexed)."""

    counts: dict[str, int] = field(default_factory=dict)
    _covered: dict[str, float] = field(default_factory=dict)  # Σ share × task-clock per event
    _clock: float = 0.0  # Σ task-clock (ns) of the readings

    def add(self, reading: TaskReading) -> None:
        clock = float(reading.counts.get("task_clock", 0))
        self._clock += clock
        for name, value in reading.counts.items():
            self.counts[name] = self.counts.get(name, 0) + value
            self._covered[name] = self._covered.get(name, 0.0) + reading.estimated.get(name, 1.0) * clock

    def counted(self, name: str) -> float:
        """The share of the run `name` was counted (1.0: all of it; scaled values are marked below that)."""
        if self._clock <= 0 or name not in self._covered:
            return 1.0
        return min(1.0, self._covered[name] / self._clock)


def exit_code(wait_status: int) -> int:
    """The shell's status for a wait status: the exit code, or 128+N when signal N ended the process."""
    code = _waitstatus(wait_status)
    return 128 - code if code < 0 else code


def _waitstatus(wait_status: int) -> int:
    """The exit code, or -N when signal N ended the process."""
    return os.waitstatus_to_exitcode(wait_status)


def _number(value: float) -> str:
    return f"{round(value):,}"


def _line(value: str, name: str, comment: str = "", share: float = 1.0) -> str:
    text = f"{value:>18}      {name:<25}"
    if comment:
        text += f" #  {comment:<28}"
    if share < 0.99995:  # perf stat marks a scaled count with the share of time it was counted
        text = f"{text.rstrip():<82} ({share * 100:.2f}%)"
    return text.rstrip()


def _rate(per_s: float) -> str:
    for limit, unit in ((1e9, "G"), (1e6, "M"), (1e3, "K")):
        if per_s >= limit:
            return f"{per_s / limit:7.3f} {unit}/sec"
    return f"{per_s:7.3f} /sec"


def format_summary(
    command: list[str],
    totals: CommandTotals,
    *,
    elapsed: float,
    user: float,
    sys: float,
    wait_status: int | None,
    mode: str = "exact",
) -> str:
    """perf stat's layout: one line per counted event with its derived value (CPUs utilized, GHz, IPC, MPKI,
    rates), `(xx.xx%)` where the count was scaled, then elapsed, user and sys seconds and, when not 0, the
    command's exit status. `mode`: how the counts were obtained, said where it is not the kernel's exact
    per-task counters."""
    counts = totals.counts
    lines = [
        "",
        f" Performance counter stats for '{shlex.join(command)}'" + ("" if mode == "exact" else f" ({mode})") + ":",
        "",
    ]
    clock_ns = counts.get("task_clock")
    instructions, cycles = counts.get("instructions"), counts.get("cycles")
    for key, name in _PERF_NAMES.items():
        if key not in counts:
            continue
        value = counts[key]
        share = totals.counted(key)
        if key == "task_clock":
            cpus = f"{value / 1e9 / elapsed:8.3f} CPUs utilized" if elapsed > 0 else ""
            lines.append(_clock_line(value, cpus, share))
            continue
        if key == "cycles":
            comment = f"{value / clock_ns:8.3f} GHz" if clock_ns else ""
        elif key == "instructions":
            comment = f"{value / cycles:8.2f}  insn per cycle" if cycles else ""
        elif key == "llc_misses":
            comment = f"{1000 * value / instructions:8.2f}  MPKI" if instructions else ""
        else:
            comment = _rate(value / elapsed) if elapsed > 0 else ""
        lines.append(_line(_number(value), name, comment, share))
    lines += ["", f"{elapsed:18.9f} seconds time elapsed", "", f"{user:18.9f} seconds user", f"{sys:18.9f} seconds sys"]
    if wait_status is not None:
        code = _waitstatus(wait_status)
        if code < 0:
            lines += ["", f" the command was killed by {_signal_name(-code)} (status {128 - code})"]
        elif code:
            lines += ["", f" the command exited with status {code}"]
    return "\n".join(lines) + "\n"


def _clock_line(value_ns: int, cpus: str, share: float) -> str:
    """perf stat prints task-clock in msec with two decimals, the unit right after the number."""
    text = f"{value_ns / 1e6:18,.2f} msec {'task-clock':<25}"
    if cpus:
        text += f" #  {cpus:<28}"
    if share < 0.99995:
        text = f"{text.rstrip():<82} ({share * 100:.2f}%)"
    return text.rstrip()


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"
