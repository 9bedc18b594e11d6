"""Running the live view (Textual) over this machine's engine or over another feed."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from pmutop.app.console import say
from pmutop.app.dram_setup import DramSetup
from pmutop.core.errors import PmutopError
from pmutop.core.feed import SampleFeed
from pmutop.core.own_cost import ProcessCost
from pmutop.core.run_description import RunInfo
from pmutop.core.task_reading import TaskFeed, TaskStarter
from pmutop.core.user_turn import favour_user
from pmutop.engine.engine import Engine
from pmutop.hw.platform import Platform
from pmutop.probes.tasks import NoTasks, ProcTasks, SimTasks, TaskSource, TopTask, close_tasks
from pmutop.safety.exit_guard import ExitGuard, signal_name
from pmutop.tui.config import Settings, config_path

LIVE_VIEW_RAN = threading.Event()  # main() then skips the interpreter's teardown


def task_source(platform: Platform, cpus: list[int]) -> TaskSource:
    if platform.simulated:
        return SimTasks(platform, cpus)
    if platform.pins_threads:  # this host's CPUs: its processes are the ones running there
        return ProcTasks(cpus)
    return NoTasks()


class SharedTasks:
    """One task lookup per interval, whoever asks first (the live view's watcher or the recorder): both then
    show and record the same tasks, and a source that measures since its previous call (psutil's CPU time
    deltas) is called once per interval, not once per reader."""

    def __init__(self, source: TaskSource, feed: SampleFeed) -> None:
        self.source = source
        self.feed = feed
        self._lock = threading.Lock()
        self._interval: int | None = None
        self._tasks: dict[int, TopTask] = {}

    def close(self) -> None:
        close_tasks(self.source)

    def top_per_cpu(self) -> dict[int, TopTask]:
        failed = self.feed.failures()
        # The interval every live CPU has reached: the same number for both readers of one interval.
        counts = [ring.count for cpu, ring in self.feed.rings.items() if cpu not in failed]
        interval = min(counts, default=0)
        with self._lock:
            if interval != self._interval:
                self._interval = interval
                try:
                    self._tasks = self.source.top_per_cpu()
                except Exception:  # a vanished process or permissions: no task this interval, for both readers
                    self._tasks = {}
            return self._tasks


def run_live_view(
    engine: Engine,
    info: RunInfo,
    platform: Platform,
    cpus: list[int],
    guard: ExitGuard,
    settings: tuple[Settings, str | None],
    tasks: TaskSource | None = None,
    task_feed: TaskFeed | None = None,
    start_view: str | None = None,
    dram: DramSetup | None = None,
    interrupt: Callable[[], bool] | None = None,
    start_tasks: TaskStarter | None = None,
) -> None:
    """`tasks`: the run's task lookup when a recorder shares it (SharedTasks); else one of its own.
    `task_feed`: the per-process and per-cgroup counters (views 4 and 5); `start_view`: the view to open on;
    `dram`: the run's DRAM bandwidth (its started sampler is the live view's package feed; without one, why);
    `interrupt`: passes the view's Ctrl-C on to a measured command (-- COMMAND); `start_tasks`: starts the
    per-process or per-cgroup counters when view 4 or 5 is opened in a run that does not count them yet."""
    from pmutop.tui.app import PmutopApp

    LIVE_VIEW_RAN.set()
    favour_user()
    own_tasks = task_source(platform, cpus) if tasks is None else None
    app = PmutopApp(
        engine,
        info,
        tasks or own_tasks,
        settings=settings[0],
        settings_path=config_path(),
        settings_problem=settings[1],
        task_feed=task_feed,
        start_view=start_view,
        package_feed=dram.sampler if dram is not None else None,
        dram_note=dram.why if dram is not None and dram.sampler is None else None,
        own_cost=ProcessCost(),
        interrupt=interrupt,
        start_tasks=start_tasks,
    )
    guard.on_stop(app.exit_soon)  # a signal, or an error in another thread: close the UI, then restore
    try:
        app.run()
    finally:
        if own_tasks is not None:
            close_tasks(own_tasks)
    if app.failure:
        raise PmutopError(app.failure)


def run_feed_view(app: Any, start: Callable[[], None], stop: Callable[[], None], guard: ExitGuard) -> int:
    """The live view over a feed that is not this machine's PMU (a recording, remote exporters)."""
    LIVE_VIEW_RAN.set()
    guard.on_stop(app.exit_soon)
    start()
    try:
        app.run()
    finally:
        stop()
    if app.failure:
        raise PmutopError(app.failure)
    if guard.signum is not None:
        say(f"stopped by {signal_name(guard.signum)}")
        return 128 + guard.signum
    return 0
