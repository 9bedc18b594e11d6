"""One measurement's lifecycle, written once for the live view, batch, serve and the self-test:
recover what killed runs left -> state file -> undo log -> engine -> exit guard -> restore (and report it).

    session = MeasurementSession(platform, cpus, guard)
    session.recover_leftovers()          # before the backend is chosen: a killed run's counters look busy
    backend = build_backend(...)
    with session.open(backend, argv, interval=...) as engine:
        engine.start(guard.stop_requested)
        session.started()
        ...                              # the sink
    session.result                       # what the restore did (already reported on stderr)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pmutop.app.console import say, warn
from pmutop.app.dram_setup import DramSetup
from pmutop.app.platform_setup import recover_leftovers, recoverer
from pmutop.backends.base import Backend
from pmutop.backends.msr.backend import MsrBackend
from pmutop.core.errors import HardwareError
from pmutop.core.undo import RestoreResult, UndoLog
from pmutop.engine.engine import Engine
from pmutop.hw.platform import HostPlatform, Platform
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.safety.exit_guard import ExitGuard
from pmutop.safety.state_files import RunState
from pmutop.sinks.recorder import Recorder


class RunEnd:
    """The restore of one run, shared by the main thread and the exit guardian: exactly once."""

    def __init__(self, engine: Engine, state: RunState | None) -> None:
        self.engine = engine
        self.state = state
        self.recorder: Recorder | None = None
        self._lock = threading.Lock()
        self._result: RestoreResult | None = None

    def __call__(self) -> RestoreResult:
        if not self._lock.acquire(timeout=10.0):
            return RestoreResult(failures=["the restore did not finish within 10 s"])
        try:
            if self._result is None:
                if self.state is not None:
                    self.state.lock_for_restore()
                result = self.engine.stop()
                if self.recorder is not None:  # after the samplers stopped: the last samples are in the rings
                    self.recorder.close()  # an incomplete recording is the run's failure: see recording_error
                if self.state is not None:
                    try:
                        self.state.finish(result, result.failed_cpus)
                    except OSError as e:
                        result.notes.append(f"could not remove the state file: {e.strerror or e}")
                self._result = result
            return self._result
        finally:
            self._lock.release()


def report_restore(result: RestoreResult) -> None:
    for note in result.notes:
        warn(note)
    if result.failures:
        say(
            f"could not restore everything ({len(result.failures)} problems): "
            + "; ".join(result.failures[:3])
            + " (`pmutop restore` retries)"
        )


class MeasurementSession:
    """A run on `cpus` of `platform` whose way out (signal, error, normal end) restores the machine once."""

    def __init__(self, platform: Platform, cpus: list[int], guard: ExitGuard) -> None:
        self.platform = platform
        self.cpus = cpus
        self.guard = guard
        self.state: RunState | None = None
        self.engine: Engine | None = None
        self.end: RunEnd | None = None
        self.result = RestoreResult()
        self.dram: DramSetup | None = None  # the run's DRAM bandwidth source and sampler (app/dram_setup.py)

    def recover_leftovers(self, retry_hint: str = " (`pmutop restore` retries)") -> None:
        """Put back what killed pmutops left on this host (a sysroot's or the simulator's: nothing to do)."""
        if not isinstance(self.platform, HostPlatform):
            return
        leftovers = recover_leftovers(self.platform, self.guard.stop_requested)
        if leftovers.failures:
            raise HardwareError(
                "could not restore what a killed pmutop left: " + "; ".join(leftovers.failures[:3]) + retry_hint
            )

    @contextmanager
    def open(
        self,
        backend: Backend,
        argv: list[str],
        *,
        interval: float,
        power: PowerMonitor | None = None,
        threaded: bool = True,
    ) -> Iterator[Engine]:
        """The state file (msr backend on a real machine: what `pmutop restore` puts back after a kill), the
        undo log and the engine, with the exit guard set to restore; on leaving, the restore, reported."""
        platform = self.platform
        if isinstance(platform, HostPlatform) and isinstance(backend, MsrBackend):
            self.state = RunState.begin(
                platform.sysroot,
                self.cpus,
                argv,
                recover=recoverer(platform),
                say=say,
                stop=self.guard.stop_requested.is_set,
            )
        self.engine = Engine(
            backend,
            platform,
            platform.clock,
            self.cpus,
            interval,
            undo=UndoLog(self.state),
            power=power,
            threaded=threaded,
        )
        self.end = RunEnd(self.engine, self.state)
        self.guard.set_restore(self.end, report_restore)
        try:
            yield self.engine
        finally:
            self.result = self.guard.restore()
            report_restore(self.result)

    def started(self) -> None:
        """Counting has started on every CPU: other runs may start or restore now."""
        if self.state is not None:
            self.state.started()

    def record_to(self, recorder: Recorder) -> None:
        """`recorder` is closed by the restore, after the samplers stopped."""
        assert self.end is not None
        self.end.recorder = recorder

    @property
    def recording_error(self) -> str | None:
        """The one line when the recording could not be written whole (the run then exits 1)."""
        recorder = self.end.recorder if self.end is not None else None
        return recorder.error if recorder is not None else None
