"""After start-up, pmutop's long-lived heap is moved out of the cyclic collector's way (pmutop.core.heap_freeze):
in the live view once the first interval is shown, not before; in batch once start-up is over, before the first
interval (start-up garbage is collected first)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

from pmutop.app.main import main
from pmutop.app.screenshots import demo_app
from pmutop.core import heap_freeze as heap
from tests.test_tui import WIDE, tick


@pytest.fixture
def fresh_process_heap(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """As in a new process: nothing frozen yet, Python's collection thresholds; what the test freezes is unfrozen
    after it, and the thresholds are put back."""
    thresholds = gc.get_threshold()
    gc.unfreeze()
    gc.set_threshold(700, 10, 10)
    monkeypatch.setattr(heap, "_frozen", False)
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


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
        assert gc.get_threshold()[0] == 700
        await tick(app, pilot, engine, clock)
        await pilot.pause()
        assert gc.get_freeze_count() > 0
        # From now on the young generation is collected every 10,000 allocations, not 700 (the other two as before).
        assert gc.get_threshold() == (heap.YOUNG_COLLECTION_EVERY, 10, 10)
        await tick(app, pilot, engine, clock)
        await pilot.pause()
        assert len(freezes) == 1  # once, not every interval
    engine.stop()


@pytest.mark.usefixtures("fresh_process_heap")
def test_batch_freezes_the_start_up_heap_once_before_its_first_interval(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Batch shows nothing that a collection could hold up: the start-up's one full collection (about 6 ms) is
    # made before the first interval's wait, as part of start-up, not in the middle of the steady state.
    printed_at_freeze: list[str] = []
    real_freeze = gc.freeze

    def freeze() -> None:
        printed_at_freeze.append(sys.stdout.getvalue())  # type: ignore[attr-defined]
        real_freeze()

    monkeypatch.setattr(gc, "freeze", freeze)
    assert main(["--demo", "--batch", "--count", "2", "--interval", "0.05", "--cores", "0"]) == 0
    assert gc.get_freeze_count() > 0
    out = capsys.readouterr().out
    assert out.count("SIMULATED") == 3  # the header and two intervals
    assert len(printed_at_freeze) == 1
    assert printed_at_freeze[0].count("SIMULATED") == 1  # the header only
