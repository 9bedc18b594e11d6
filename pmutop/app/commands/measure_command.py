"""`pmutop [options] -- COMMAND [ARGS]`: start COMMAND, count it, its threads and children exactly, end with it.

As `perf stat -- COMMAND`: the command is forked and held before exec while its counters (perf, `inherit`) are
opened on its pid, so counting covers it from its first instruction; it stays in pmutop's process group (a
terminal's Ctrl-C reaches it as it would from a shell); when it ends, the run ends: the live view closes or
the batch stops, the counters are read one last time, the PMU is restored as always, the summary goes to
stderr and pmutop exits with the command's status (128+N when signal N killed it). The live view holds the
terminal in raw mode, so there its Ctrl-C is a key: it is passed on to the command as SIGINT.

Signals while the command runs: one the terminal sent to its foreground process group (Ctrl-C, Ctrl-\\,
hangup) has reached the command already and is not sent again; any other signal pmutop receives (kill) is
passed on to the command. Either way pmutop goes on counting until the command ends, as perf stat waits for
its command. When the measurement ends first (`q` in the live view, --count reached) the command gets SIGTERM,
and SIGKILL if it is still there after KILL_AFTER_S.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import IO, Any, NoReturn

from pmutop.app.console import isatty, say
from pmutop.core.errors import PmutopError, UsageError
from pmutop.core.task_reading import TaskCounterSource, TaskSnapshot
from pmutop.probes.process_scan import ProcessScan
from pmutop.probes.task_counters import COMMAND_SOFTWARE_EVENTS, TaskCounters, task_events, user_space_note
from pmutop.safety.exit_guard import EXIT_NOT_RESTORED, TERMINATING, ExitGuard
from pmutop.sinks.summary import CommandTotals, exit_code, format_summary

# A shell's statuses for a command it could not start (POSIX, "Command Search and Execution").
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
KILL_AFTER_S = 5.0  # how long a command has to end after SIGTERM once the measurement ended without it
# The signals a terminal sends to its whole foreground process group (the command's too): never sent twice.
_TERMINAL_SIGNALS = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)


def check_command(args: argparse.Namespace, command: list[str]) -> str:
    """Refuse what cannot measure a command, before anything is touched; the executable's path. A command
    that cannot be started is one line and the shell's status (127 not found, 126 not executable)."""
    if getattr(args, "connect", None):
        raise UsageError("-- COMMAND runs and counts the command on this machine: not with --connect")
    if args.demo or args.backend == "sim":
        # The simulated PMU cannot count a real program, and software counts beside simulated machine views
        # would mix real and made-up numbers on one screen.
        raise UsageError("-- COMMAND counts a real command with the kernel's counters: not with --demo")
    if getattr(args, "pid", None) is not None:
        raise UsageError("-- COMMAND counts the command it starts: not with --pid")
    if args.record:
        raise UsageError("-- COMMAND: recordings do not carry the command's counts yet: not with --record")
    if args.sysroot not in (None, "/"):
        raise UsageError("-- COMMAND runs the command on this machine: not with --sysroot")
    return resolve_executable(command[0])


def resolve_executable(name: str) -> str:
    """The file a shell would run for `name`: a path as given, else the first match on $PATH."""
    if "/" not in name:
        found = shutil.which(name)
        if found is None:
            raise PmutopError(f"{name}: command not found", exit_code=EXIT_NOT_FOUND)
        return found
    if not os.path.exists(name):
        raise PmutopError(f"{name}: no such file or directory", exit_code=EXIT_NOT_FOUND)
    if os.path.isdir(name) or not os.access(name, os.X_OK):
        why = "is a directory" if os.path.isdir(name) else "permission denied"
        raise PmutopError(f"{name}: {why}", exit_code=EXIT_NOT_EXECUTABLE)
    return name


class MeasuredCommand:
    """The command and its counters: a TaskCounterSource (one process, the command, with every thread and
    child it starts) that also starts, passes signals to, waits for and summarises the command.

    Made with the command forked and held; `begin()` (or `release()`) lets it exec; after the run `finish()`."""

    def __init__(
        self,
        command: list[str],
        path: str,
        guard: ExitGuard,
        requested_events: Sequence[str] | None,
        *,
        live: bool,
    ) -> None:
        self.command = command
        self.guard = guard
        self.totals = CommandTotals()
        self.wait_status: int | None = None
        self.usage: Any = None
        self.started_at = self.ended_at = 0.0
        self._lock = threading.Lock()  # a signal is passed on only while the command is not yet reaped
        self._ended = threading.Event()
        self._waiter: threading.Thread | None = None
        self._released = False
        self._comm = os.path.basename(command[0])[:15]
        self._output, redirect = _live_redirects() if live else (None, {})
        gate_r, self._gate_w = os.pipe()
        self._error_r, error_w = os.pipe()  # close-on-exec: EOF once exec worked, else the errno
        # Forked here, with one other thread alive: the exit guardian, waiting in sigwaitinfo and holding no
        # lock; the child runs only os calls before exec (_child).
        self.pid = os.fork()
        if self.pid == 0:
            _child(path, command, gate_r, error_w, redirect)
        kept = self._output.fileno() if self._output is not None else -1
        for fd in {gate_r, error_w, *redirect.values()} - {kept}:
            os.close(fd)
        try:
            # Quiet (no say): its notes name --pid; the command's own note follows.
            # Live, the process view shows where it ran (one /proc scan per interval); batch records need not.
            scan = ProcessScan() if live else None
            self._counters = TaskCounters([self.pid], requested_events, scan=scan, software=COMMAND_SOFTWARE_EVENTS)
        except PmutopError as e:
            self._abandon()
            raise type(e)(str(e).replace(f"--pid {self.pid}", "-- COMMAND"), e.exit_code) from None
        except BaseException:
            self._abandon()
            raise
        self.events = self._counters.events
        if self._counters.user_only:
            say(user_space_note("-- COMMAND"))
        wanted_hardware = [e.name for e in task_events(requested_events, ()) if e not in COMMAND_SOFTWARE_EVENTS]
        if wanted_hardware and not set(wanted_hardware) & set(self.events):
            names = ", ".join(name.replace("_", "-") for name in self.events)
            say(f"-- COMMAND: this PMU has no hardware events: counting the command's {names}")

    # -- TaskCounterSource

    def begin(self) -> None:
        """Counting starts now: let the command exec. Once: a later call (the batch loop's) changes nothing, so
        the first interval read starts before the command's first instruction, not after it."""
        self.release()

    def read(self, cpu_samples: Sequence[Any] = ()) -> TaskSnapshot:
        snapshot = self._counters.read(cpu_samples)
        tasks = []
        for reading in snapshot.tasks:
            if reading.pid == self.pid:
                self.totals.add(reading)
                # The counters were opened before exec, under pmutop's name: the command's name is the one now.
                self._comm = _comm(self.pid) or self._comm
                reading = replace(reading, comm=self._comm)
            tasks.append(reading)
        return replace(snapshot, tasks=tuple(tasks))

    def close(self) -> None:
        if not self._ended.is_set():
            self._abandon()
        self._counters.close()
        if self._output is not None:
            self._output.close()
            self._output = None

    # -- the command

    def release(self) -> None:
        """Let the command exec; raises the shell's one line and status when exec fails."""
        if self._released:
            return
        self._released = True
        self._counters.begin()
        self.guard.divert_signals(self._on_signal)
        self.started_at = time.monotonic()
        os.write(self._gate_w, b"go")
        os.close(self._gate_w)
        failure = os.read(self._error_r, 32)
        os.close(self._error_r)
        self._waiter = threading.Thread(target=self._wait, name="pmutop-command", daemon=True)
        self._waiter.start()
        if failure:
            self._waiter.join()
            code = int(failure)
            status = EXIT_NOT_EXECUTABLE if code in (errno.EACCES, errno.ENOEXEC, errno.EISDIR) else EXIT_NOT_FOUND
            raise PmutopError(f"{self.command[0]}: {os.strerror(code).lower()}", exit_code=status)

    def _wait(self) -> None:
        # Seen exited without reaping it first, so a signal passed on in between cannot reach a reused pid.
        os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOWAIT)
        with self._lock:
            self.ended_at = time.monotonic()
            _, self.wait_status, self.usage = os.wait4(self.pid, 0)
            self._ended.set()
        self.guard.divert_signals(None)
        self.guard.request_stop()  # the live view closes, the batch loop ends

    def _on_signal(self, signum: int, from_terminal: bool) -> bool:
        with self._lock:
            if self._ended.is_set():
                return False  # the command is gone: pmutop's own way out
            if not (from_terminal and signum in _TERMINAL_SIGNALS):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signum)
        return True

    def interrupt(self) -> bool:
        """The live view's Ctrl-C (its terminal is in raw mode, so the terminal sends no SIGINT): SIGINT to the
        command, as a shell's terminal would; False when the command has ended (then Ctrl-C ends pmutop)."""
        with self._lock:
            if not self._released or self._ended.is_set():
                return False
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGINT)
        return True

    def _abandon(self) -> None:
        """pmutop stops before the command ended (or started): SIGTERM, then SIGKILL after KILL_AFTER_S."""
        if not self._released:
            with contextlib.suppress(OSError):
                os.close(self._gate_w)  # EOF at the gate: the held child exits without running anything
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
            self._ended.set()
            return
        self._send(signal.SIGTERM)
        if not self._ended.wait(KILL_AFTER_S):
            self._send(signal.SIGKILL)
            self._ended.wait()

    def _send(self, signum: int) -> None:
        with self._lock:
            if not self._ended.is_set():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signum)

    def finish(self, code: int) -> int:
        """After the run (view closed or batch ended, PMU restored): wait for the command, read its counters
        one last time, print what it wrote under the live view, then the summary; the status pmutop exits
        with: the command's, unless the machine could not be put back (4) or a signal stopped pmutop."""
        if not self._released:
            return code
        if not self._ended.is_set():
            say(f"the measurement ended before the command: sending it SIGTERM (pid {self.pid})")
            self._abandon()
        if self._waiter is not None:
            self._waiter.join()
        self.read()
        self._replay_output()
        usage = self.usage
        text = format_summary(
            self.command,
            self.totals,
            elapsed=self.ended_at - self.started_at,
            user=usage.ru_utime if usage else 0.0,
            sys=usage.ru_stime if usage else 0.0,
            wait_status=self.wait_status,
        )
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(text)
            sys.stderr.flush()
        if code == EXIT_NOT_RESTORED or self.guard.signum is not None or self.wait_status is None:
            return code
        return exit_code(self.wait_status)

    def _replay_output(self) -> None:
        """The command's output that went to a file while the live view had the terminal, now after it."""
        if self._output is None:
            return
        self._output.seek(0)
        out = sys.stdout if isatty(sys.stdout) else sys.stderr
        with contextlib.suppress(OSError, ValueError):
            out.flush()
            shutil.copyfileobj(self._output, out.buffer)
            out.flush()


def _live_redirects() -> tuple[IO[bytes] | None, dict[int, int]]:
    """Under the live view the terminal is the view's: the command reads /dev/null instead, and what it
    writes to the terminal goes to an unlinked file shown after the screen closes (one file for stdout and
    stderr, so their order is kept)."""
    redirect: dict[int, int] = {}
    if isatty(sys.stdin):
        redirect[0] = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    output: IO[bytes] | None = None
    for fd, stream in ((1, sys.stdout), (2, sys.stderr)):
        if isatty(stream):
            output = output or tempfile.TemporaryFile()  # noqa: SIM115 (closed by MeasuredCommand.close)
            redirect[fd] = output.fileno()
    return output, redirect


def _child(path: str, argv: list[str], gate: int, error: int, redirect: dict[int, int]) -> NoReturn:
    """In the forked child: wait at the gate until the counters are open, then exec as a shell would (the
    terminating signals unblocked, SIGPIPE and SIGXFSZ back to default: Python ignores them). Only os calls
    here: the parent may have other threads."""
    try:
        if os.read(gate, 2) == b"go":
            for target, fd in redirect.items():
                os.dup2(fd, target)
            signal.signal(signal.SIGPIPE, signal.SIG_DFL)
            signal.signal(signal.SIGXFSZ, signal.SIG_DFL)
            # Python's Ctrl-C handler would turn a Ctrl-C before exec into an exception here (exec resets
            # handlers anyway); an ignored SIGINT (pmutop started by nohup, or in the background) stays ignored.
            if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
                signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, TERMINATING)
            os.execv(path, argv)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.write(error, str(e.errno).encode())
    finally:
        os._exit(EXIT_NOT_FOUND)


def _comm(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() or None
    except OSError:
        return None


def start_command(
    args: argparse.Namespace, command: list[str], path: str, guard: ExitGuard, events: list[str] | None
) -> MeasuredCommand:
    """The command forked and held, its counters open; it runs from `release_command`."""
    return MeasuredCommand(command, path, guard, events, live=not args.batch)


def release_command(source: TaskCounterSource | None) -> None:
    """The machine's counters run: the command may start (a no-op for other sources)."""
    if isinstance(source, MeasuredCommand):
        source.release()


def command_interrupt(source: TaskCounterSource | None) -> Callable[[], bool] | None:
    """The live view's way to pass Ctrl-C on to the measured command (None: no command)."""
    return source.interrupt if isinstance(source, MeasuredCommand) else None


def finish_command(source: TaskCounterSource | None, code: int) -> int:
    """The run is over: the command's summary and status (other sources: `code`)."""
    if isinstance(source, MeasuredCommand):
        return source.finish(code)
    return code
