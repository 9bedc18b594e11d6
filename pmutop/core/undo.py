"""Putting the machine back: an undo log, run exactly once on every way out.

Every change pmutop makes outside its own process (MSRs, the rdpmc sysfs file, the NMI watchdog) is
recorded here *before* it is made, in memory and (through the journal) in the run's state file, so a
later run can finish the job if this process is killed. The log is undone newest-first exactly once,
whichever thread gets there first; a second caller waits for the first and gets the same result.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class RestoreResult:
    notes: list[str] = field(default_factory=list)  # expected outcomes the user should know of
    failures: list[str] = field(default_factory=list)  # registers that could not be put back
    failed_cpus: set[int] = field(default_factory=set)  # whose registers are not all back

    def extend(self, other: RestoreResult) -> None:
        self.notes += other.notes
        self.failures += other.failures
        self.failed_cpus |= other.failed_cpus


class Journal(Protocol):
    """Where the undo information is kept outside this process (pmutop.safety.state_files.RunState)."""

    def record_setting(self, rel: str, original: str, new: str) -> None: ...

    def inherited_setting(self, rel: str) -> str | None: ...

    def shared_setting(self, rel: str) -> bool: ...

    def record_cpus(self, records: list[Any]) -> None: ...


class NullJournal:
    """No state kept outside the process (the simulated PMU, tests)."""

    def record_setting(self, rel: str, original: str, new: str) -> None:
        pass

    def inherited_setting(self, rel: str) -> str | None:
        return None

    def shared_setting(self, rel: str) -> bool:
        return False

    def record_cpus(self, records: list[Any]) -> None:
        pass


@dataclass
class _Undo:
    what: str
    action: Callable[[], RestoreResult | None]


class UndoLog:
    def __init__(self, journal: Journal | None = None) -> None:
        self.journal: Journal = journal if journal is not None else NullJournal()
        self._items: list[_Undo] = []
        self._lock = threading.Lock()  # guards _items and _done
        self._run_lock = threading.Lock()  # held while the undo runs: later callers wait for it
        self._done = False
        self._result: RestoreResult | None = None

    def push(self, what: str, action: Callable[[], RestoreResult | None]) -> None:
        """Record how to undo a change. `action` returns what it could not put back."""
        with self._lock:
            if self._done:
                raise RuntimeError("undo log already ran")
            self._items.append(_Undo(what, action))

    def __len__(self) -> int:
        return len(self._items)

    @property
    def done(self) -> bool:
        return self._result is not None

    def run(self, timeout: float = -1) -> RestoreResult:
        """Undo everything, newest first; a failing step does not stop the others.

        Exactly once: a concurrent or later caller waits (up to `timeout` s, -1 for ever) for the first
        run to finish and gets its result."""
        if not self._run_lock.acquire(timeout=timeout):
            return RestoreResult(failures=["the restore started by another thread did not finish in time"])
        try:
            if self._result is not None:
                return self._result
            with self._lock:
                items, self._items = self._items, []
                self._done = True
            result = RestoreResult()
            for item in reversed(items):
                try:
                    result.extend(item.action() or RestoreResult())
                except Exception as e:  # keep going: the other registers still need restoring
                    result.failures.append(f"could not undo {item.what}: {e}")
            self._result = result
            return result
        finally:
            self._run_lock.release()


def setting_undo(
    read: Callable[[str], str | None],
    write: Callable[[str, str], None],
    journal: Journal,
    rel: str,
    original: str,
    new: str,
) -> Callable[[], RestoreResult]:
    """The undo of `write(rel, new)`: put `original` back unless someone else changed it since, or
    another running pmutop still relies on the change (the last one out puts it back)."""

    def undo() -> RestoreResult:
        out = RestoreResult()
        if journal.shared_setting(rel):
            return out
        now = read(rel)
        if now is not None and now != new:
            if now != original:
                out.notes.append(f"/{rel} was changed to {now} by someone else during the run; left as found")
            return out
        try:
            write(rel, original)
        except OSError as e:
            out.failures.append(f"cannot set /{rel} back to {original}: {e.strerror or e}")
        return out

    return undo
