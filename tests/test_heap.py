"""After start-up, pmutop's long-lived heap is moved out of the cyclic collector's way (pmutop.core.heap_freeze):
once the first interval is shown, not before (start-up garbage is collected first), in the live view and in batch."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from pmutop.app.main import main
from pmutop.app.screenshots import demo_app
from pmutop.core import heap_freeze as heap
from tests.test_tui import WIDE, tick


@pytest.fixture
def fresh_process_heap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As in a new process: nothing frozen yet; what the test freezes is unfrozen after it."""
    gc.unfreeze()
    monkeypatch.setattr(heap, "_frozen", False)
    yield
    gc.unfreeze()


@pytest.mark.usefixtures("fresh_process_heap")
async def test_the_live_view_freezes_the_start_up_heap_once_the_first_interval_is_on_screen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    freezes: list[int] = []
    real_freeze = gc.freeze
    monkeypatch.setattr(gc, "freeze", lambda: freezes.append(1) or real_freeze())
    app, engine, _, clock = demo_app(intervals=0)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        assert gc.get_freeze_count() == 0  # up, but no interval shown yet
        await tick(app, pilot, engine, clock)
        await pilot.pause()
        assert gc.get_freeze_count() > 0
        await tick(app, pilot, engine, clock)
        await pilot.pause()
        assert len(freezes) == 1  # once, not every interval
    engine.stop()


@pytest.mark.usefixtures("fresh_process_heap")
def test_batch_freezes_the_start_up_heap_after_its_first_interval(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--demo", "--batch", "--count", "1", "--interval", "0.05", "--cores", "0"]) == 0
    assert gc.get_freeze_count() > 0
    assert "SIMULATED" in capsys.readouterr().out
