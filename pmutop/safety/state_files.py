"""The run's state on the machine: run/pmutop/ under the sysroot (/run/pmutop on a real host).

* `lock`: a machine-wide flock, held while a run starts (checks, recovery, saving, programming) and while
  it restores, so two runs never interleave those steps.
* `<pid>.lock`: flocked by each running pmutop for its whole life. The kernel drops a flock when its
  process dies, however it dies, so "can this lock be taken?" tells a dead run from a live one with no
  PID-reuse race.
* `<pid>.json`: what that run changed and how to undo it (per CPU the saved registers and every value
  it may have written; the NMI watchdog and rdpmc settings it changed, with their old values), written
  atomically and fsynced before the change is made, removed after a complete restore.

A run that finds the state of a dead run restores what that run left (only registers that still hold
what it wrote) before anything else; `pmutop restore` does the same on demand.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pmutop.backends.msr.restore import CpuRecord, restore_cpu
from pmutop.core.cpulist import format_cpu_list
from pmutop.core.errors import HardwareError, PmuInUseError, PmutopError
from pmutop.core.sysroot import Sysroot
from pmutop.core.undo import RestoreResult

STATE_DIR = "run/pmutop"
GLOBAL_LOCK = "lock"
FORMAT_VERSION = 1
LOCK_TIMEOUT_S = 10.0


@dataclass
class Entry:
    """One run's state file."""

    pid: int
    alive: bool
    data: dict[str, Any] | None  # None: unreadable
    problem: str | None = None

    @property
    def cpus(self) -> list[int]:
        return [int(c) for c in (self.data or {}).get("cpus", [])]

    @property
    def settings(self) -> dict[str, dict[str, str]]:
        return dict((self.data or {}).get("settings", {}))

    @property
    def records(self) -> list[CpuRecord]:
        return [CpuRecord.from_json(r) for r in (self.data or {}).get("cpu_records", [])]

    def started_text(self) -> str:
        started = (self.data or {}).get("started")
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)) if started else "an unknown time"


@dataclass
class Recovery:
    """What restoring dead runs' leftovers did."""

    lines: list[str] = field(default_factory=list)  # one per dead run, for the user
    result: RestoreResult = field(default_factory=RestoreResult)


class StateDir:
    """run/pmutop under a sysroot, reached without following symlinks."""

    def __init__(self, sysroot: Sysroot, *, create: bool) -> None:
        self.sysroot = sysroot
        try:
            self.fd = sysroot.open_dir(STATE_DIR, create=create)
        except OSError as e:
            if e.errno == errno.ENOENT and not create:
                raise
            raise HardwareError(f"cannot use {sysroot.path(STATE_DIR)}: {e.strerror or e}") from None
        self._global: int | None = None

    @classmethod
    def existing(cls, sysroot: Sysroot) -> StateDir | None:
        """The directory if it exists and is usable, else None (nothing to recover)."""
        try:
            return cls(sysroot, create=False)
        except (OSError, PmutopError):
            return None

    def close(self) -> None:
        self.unlock()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def path(self, name: str) -> str:
        return str(self.sysroot.path(f"{STATE_DIR}/{name}"))

    # -- the machine-wide lock

    def lock(self, timeout: float = LOCK_TIMEOUT_S, stop: Callable[[], bool] | None = None) -> bool:
        if self._global is not None:
            return True
        fd = os.open(GLOBAL_LOCK, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=self.fd)
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self._global = fd
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline or (stop and stop()):
                    os.close(fd)
                    return False
                time.sleep(0.02)

    def unlock(self) -> None:
        if self._global is not None:
            os.close(self._global)  # closing drops the flock
            self._global = None

    # -- entries

    def entries(self, *, skip_pid: int | None = None) -> list[Entry]:
        out = []
        for name in sorted(os.listdir(self.fd)):
            stem, _, ext = name.partition(".")
            if ext != "json" or not stem.isdigit() or int(stem) == skip_pid:
                continue
            pid = int(stem)
            data, problem = self._load(name)
            out.append(Entry(pid, self._alive(pid), data, problem))
        return out

    def _alive(self, pid: int) -> bool:
        try:
            fd = os.open(f"{pid}.lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return False
        except BlockingIOError:
            return True
        finally:
            os.close(fd)

    def _load(self, name: str) -> tuple[dict[str, Any] | None, str | None]:
        try:
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.fd)
            with os.fdopen(fd, "rb") as f:
                data = json.loads(f.read(16 << 20))
            if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
                return None, f"{self.path(name)} is not a pmutop {FORMAT_VERSION} state file"
            return data, None
        except (OSError, ValueError, RecursionError) as e:
            return None, f"cannot read {self.path(name)}: {getattr(e, 'strerror', None) or e}"

    def write_json(self, name: str, data: dict[str, Any]) -> None:
        """Atomically replace `name` (temp file, fsync, rename, fsync the directory), mode 0644."""
        tmp = f".{name}.tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=self.fd)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=self.fd)
        try:
            os.fchmod(fd, 0o644)
            os.write(fd, json.dumps(data, indent=1).encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        os.fsync(self.fd)

    def remove(self, pid: int) -> None:
        for name in (f"{pid}.json", f"{pid}.lock"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self.fd)
        os.fsync(self.fd)


class RunState:
    """This run's entry; also the undo log's journal (pmutop.core.undo.Journal)."""

    def __init__(self, state_dir: StateDir, cpus: list[int], argv: list[str]) -> None:
        self.dir = state_dir
        self.pid = os.getpid()
        self._data: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "program": "pmutop",
            "pid": self.pid,
            "host": socket.gethostname(),
            "started": time.time(),
            "argv": argv,
            "cpus": cpus,
            "settings": {},
            "cpu_records": [],
        }
        self._lock_fd = os.open(
            f"{self.pid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=state_dir.fd
        )
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)  # held until this process ends
        os.fchmod(self._lock_fd, 0o644)
        self._save()

    @classmethod
    def begin(
        cls,
        sysroot: Sysroot,
        cpus: list[int],
        argv: list[str],
        *,
        recover: Callable[[StateDir], Recovery],
        say: Callable[[str], None],
        stop: Callable[[], bool] | None = None,
    ) -> RunState:
        """Take the machine-wide lock (kept until `started()`), refuse if a live run watches one of `cpus`,
        restore what dead runs left, and write this run's entry before anything is changed."""
        state_dir = StateDir(sysroot, create=True)
        try:
            if not state_dir.lock(stop=stop):
                raise PmuInUseError(f"another pmutop holds {state_dir.path(GLOBAL_LOCK)} (starting or restoring)")
            for e in state_dir.entries():
                overlap = sorted(set(e.cpus) & set(cpus))
                if e.alive and overlap:
                    raise PmuInUseError(
                        f"pmutop (pid {e.pid}, started {e.started_text()}) is already monitoring cpu "
                        f"{format_cpu_list(overlap)}; stop it or choose other --cores"
                    )
            recovery = recover(state_dir)
            for line in recovery.lines:
                say(line)
            if recovery.result.failures:
                raise HardwareError(
                    "could not restore what a killed pmutop left: "
                    + "; ".join(recovery.result.failures[:3])
                    + " (`pmutop restore` retries)"
                )
            return cls(state_dir, cpus, argv)
        except BaseException:
            state_dir.close()
            raise

    def started(self) -> None:
        """Counting has started everywhere: let other runs start or restore."""
        self.dir.unlock()

    def _save(self) -> None:
        self.dir.write_json(f"{self.pid}.json", self._data)

    def _live_others(self) -> list[Entry]:
        return [e for e in self.dir.entries(skip_pid=self.pid) if e.alive]

    # -- Journal

    def record_setting(self, rel: str, original: str, new: str) -> None:
        self._data["settings"][rel] = {"original": original, "set": new}
        self._save()

    def inherited_setting(self, rel: str) -> str | None:
        for e in self._live_others():
            if rel in e.settings:
                return str(e.settings[rel]["original"])
        return None

    def shared_setting(self, rel: str) -> bool:
        return any(rel in e.settings for e in self._live_others())

    def record_cpus(self, records: list[CpuRecord]) -> None:
        self._data["cpu_records"] = [r.to_json() for r in records]
        self._save()

    # -- the end

    def lock_for_restore(self) -> None:
        # The restore goes ahead even if the lock cannot be had: putting the PMU back comes first.
        self.dir.lock(timeout=2.0)

    def finish(self, result: RestoreResult, failed_cpus: set[int]) -> None:
        """After the restore: remove the entry if everything was put back, else keep what is left to do."""
        try:
            if not result.failures:
                self.dir.remove(self.pid)
            else:
                # Keep it for `pmutop restore`: the records of CPUs that failed, and the settings.
                self._data["cpu_records"] = [r for r in self._data["cpu_records"] if r["cpu"] in failed_cpus]
                self._save()
        finally:
            os.close(self._lock_fd)
            self.dir.close()


def recover_dead_runs(
    state_dir: StateDir,
    open_msr: Callable[[int], Any],
    read_setting: Callable[[str], str | None],
    write_setting: Callable[[str, str], None],
) -> Recovery:
    """Restore what every dead run left behind (call with the machine-wide lock held)."""
    out = Recovery()
    entries = state_dir.entries(skip_pid=os.getpid())
    live = [e for e in entries if e.alive]
    for e in entries:
        if e.alive:
            continue
        if e.data is None:
            out.lines.append(f"warning: {e.problem}; remove it if no pmutop is running")
            continue
        result = RestoreResult()
        done: list[str] = []
        cpus_done = []
        for rec in e.records:
            try:
                dev = open_msr(rec.cpu)
            except PmutopError as err:
                result.failures.append(str(err))
                continue
            try:
                r = restore_cpu(dev, rec)
            finally:
                dev.close()
            result.extend(r)
            if not r.failures:
                cpus_done.append(rec.cpu)
        if cpus_done:
            done.append(f"cpu {format_cpu_list(cpus_done)} PMU registers")
        for rel, change in e.settings.items():
            if any(rel in other.settings for other in live):
                continue  # a running pmutop still relies on it and will put it back
            now = read_setting(rel)
            if now is None or now != change["set"]:
                continue  # never changed, or changed again by someone since
            try:
                write_setting(rel, change["original"])
                done.append(f"/{rel} = {change['original']}")
            except OSError as err:
                result.failures.append(f"cannot set /{rel} back to {change['original']}: {err.strerror or err}")
        what = ", ".join(done) or "nothing still needed restoring"
        out.lines.append(f"pmutop pid {e.pid} (started {e.started_text()}) ended without restoring; restored: {what}")
        out.lines += [f"warning: {n}" for n in result.notes]
        out.result.extend(result)
        if not result.failures:
            state_dir.remove(e.pid)
    return out


def describe_runs(sysroot: Sysroot) -> list[dict[str, Any]]:
    """Every pmutop run with state on this machine, for `pmutop info` (reads only)."""
    state_dir = StateDir.existing(sysroot)
    if state_dir is None:
        return []
    try:
        out = []
        for e in state_dir.entries():
            out.append(
                {
                    "pid": e.pid,
                    "running": e.alive,
                    "started": e.started_text(),
                    "cpus": format_cpu_list(e.cpus),
                    "programmed_cpus": format_cpu_list([r.cpu for r in e.records]) if e.data else "",
                    "settings": e.settings,
                    "problem": e.problem,
                }
            )
        return out
    except OSError:
        return []
    finally:
        state_dir.close()


def leftover_lines(runs: list[dict[str, Any]]) -> list[str]:
    """What the runs of describe_runs that ended without restoring left behind, one line each."""
    lines = []
    for run in runs:
        if run["running"]:
            continue
        if run["problem"]:
            lines.append(run["problem"])
            continue
        parts = [f"cpu {run['programmed_cpus']} PMU registers"] if run["programmed_cpus"] else []
        parts += [f"/{rel} = {c['set']} (was {c['original']})" for rel, c in run["settings"].items()]
        lines.append(
            f"pmutop pid {run['pid']} (started {run['started']}) ended without restoring: "
            + (", ".join(parts) or "nothing recorded")
        )
    return lines
