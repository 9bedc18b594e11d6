"""A fake per-task counter source for the process and cgroup views' tests: the scripted made-up processes
the pictures use (pmutop.app.scripted_tasks), read through the real TaskSampler over a demo engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from pmutop.app.screenshots import SHOWN_MODEL, demo_app
from pmutop.app.scripted_tasks import ScriptedTasks
from pmutop.core.clock import ManualClock
from pmutop.core.sample import Sample
from pmutop.core.task_reading import EXACT, TaskSnapshot
from pmutop.engine.engine import Engine
from pmutop.engine.task_sampler import TaskSampler
from pmutop.tui.app import PmutopApp


class FakeTasks(ScriptedTasks):
    """ScriptedTasks that remembers what the sampler gave it (how many CPU samples, per read)."""

    def __init__(self, mode: str = EXACT, exit_at: int = 58, fail_at: int | None = None) -> None:
        super().__init__(mode, exit_at)
        self.cpu_samples_seen: list[int] = []
        self.begun = 0
        self.fail_at = fail_at
        self.cgroups_off = False  # a run that counts processes only (--tasks without --cgroups)

    def begin(self) -> None:
        self.begun += 1
        super().begin()

    def read(self, cpu_samples: Sequence[Sample] = ()) -> TaskSnapshot:
        self.cpu_samples_seen.append(len(cpu_samples))
        if self.fail_at is not None and self.intervals + 1 >= self.fail_at:
            raise OSError("perf_event read failed: No such device")
        snapshot = super().read(cpu_samples)
        return dataclasses.replace(snapshot, cgroups=()) if self.cgroups_off else snapshot


def task_app(
    mode: str = EXACT, intervals: int = 60, source: FakeTasks | None = None
) -> tuple[PmutopApp, Engine, TaskSampler, FakeTasks, ManualClock]:
    """The demo live view with the fake processes counted for `intervals` intervals."""
    source = source or FakeTasks(mode)
    app, engine, _, clock = demo_app(model=SHOWN_MODEL, intervals=intervals, task_source=source)
    sampler = app.task_feed
    assert isinstance(sampler, TaskSampler)
    return app, engine, sampler, source, clock
