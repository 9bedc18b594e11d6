"""Issue 24, a key within 50 ms at 256 CPUs: while the live view answers a key, pmutop's background Python
threads (the simulator's round of every CPU, the native drain, the top-task lookup) pause between steps, and an
interval's update waits until the key's answer is on screen (pmutop.core.user_turn). The figure itself is in
`python -m benchmarks` (key latency); these pin the behaviour behind it."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator

import pytest
from textual.widgets import Input

from pmutop.app.screenshots import demo_app
from pmutop.core import user_turn
from pmutop.core.clock import ManualClock
from pmutop.core.user_turn import USER_TURN, UserTurn
from tests.test_engine_one_thread import make, wait_until
from tests.test_tui import WIDE, next_update


@pytest.fixture(autouse=True)
def no_turn_left() -> Iterator[None]:
    yield
    USER_TURN.end()  # process-wide: never leave a turn on for the next test
    gc.enable()  # nor collection off, when a test of a turn of its own failed midway


def test_a_background_step_waits_while_a_key_is_answered_and_goes_on_when_it_is_on_screen() -> None:
    turn = UserTurn()
    turn.wait()  # no key: no wait
    assert turn.waits == 0 and not turn.active
    turn.begin()
    assert turn.active
    waiter = threading.Thread(target=turn.wait)
    waiter.start()
    time.sleep(0.05)
    assert waiter.is_alive()
    turn.end()
    waiter.join(timeout=5)
    assert not waiter.is_alive() and turn.waits == 1 and not turn.active


def test_a_turn_the_view_never_ends_holds_a_step_back_only_briefly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(user_turn, "MAX_TURN_S", 0.05)
    turn = UserTurn()
    turn.begin()  # and the view failed before its end()
    started = time.monotonic()
    turn.wait()
    assert 0.03 <= time.monotonic() - started < 2.0
    assert not turn.active
    started = time.monotonic()
    turn.wait()  # the turn is over: no second wait
    assert time.monotonic() - started < 0.02 and turn.waits == 1


def test_no_collection_pauses_a_keys_answer_it_runs_after() -> None:
    """A young collection in the demo at 256 CPUs walks some 15,000 young objects: 5-12 ms, and when one began
    inside a key's answer the key took that much longer (2 of the 4 slowest of 80 presses)."""
    turn = UserTurn()
    assert gc.isenabled()
    turn.begin()
    assert not gc.isenabled()
    turn.begin()  # the same key's second event (from the driver, then bubbled back)
    turn.end()
    assert gc.isenabled()


def test_a_turn_the_view_never_ends_turns_collection_back_on_when_it_lapses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(user_turn, "MAX_TURN_S", 0.05)
    turn = UserTurn()
    turn.begin()  # and the view failed before its end()
    assert not gc.isenabled()
    turn.wait()  # a background loop's step, after the turn lapsed
    assert gc.isenabled()
    turn.begin()
    time.sleep(0.06)
    assert not turn.active and gc.isenabled()  # the interval's update asking, after it lapsed


def test_collection_someone_else_turned_off_stays_off() -> None:
    gc.disable()
    try:
        turn = UserTurn()
        turn.begin()
        turn.end()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_simulators_round_reads_no_further_cpu_while_a_key_is_answered() -> None:
    clock = ManualClock(1_000_000_000)
    _, engine = make(cpus=3, clock=clock)
    try:
        engine.start()
        USER_TURN.begin()
        waits = USER_TURN.waits
        clock.advance(0.05)
        wait_until(lambda: USER_TURN.waits > waits)  # the round reached its first CPU
        time.sleep(0.05)
        assert [engine.rings[cpu].count for cpu in engine.cpus] == [0, 0, 0]
        USER_TURN.end()
        assert engine.wait_for_samples(dict.fromkeys(engine.cpus, 0), timeout=10)
        assert all(engine.rings[cpu].latest().error is None for cpu in engine.cpus)  # type: ignore[union-attr]
    finally:
        engine.stop()


async def test_an_intervals_update_waits_for_a_keys_answer_once_only() -> None:
    # Once only: a key held down (auto-repeat, every refresh brings the next) must not hold the numbers back.
    app, engine, _, clock = demo_app(intervals=1)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        clock.advance(1.0)
        engine.tick()
        before = app.updates
        USER_TURN.begin()  # as a key does
        USER_TURN.end = lambda: None  # type: ignore[method-assign]  # held down: the turn goes on
        try:
            app.apply_update(None)
            assert app.updates == before  # not yet: the key's answer is drawn first
            await next_update(app, pilot, before)  # after that refresh, although the turn is still on
            assert USER_TURN.active
        finally:
            del USER_TURN.end


async def test_a_key_starts_the_users_turn_and_its_answer_on_screen_ends_it() -> None:
    app, _, _, _ = demo_app(intervals=2)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        began: list[float] = []
        begin = USER_TURN.begin

        def recorded_begin() -> None:
            began.append(time.monotonic())
            begin()

        USER_TURN.begin = recorded_begin  # type: ignore[method-assign]
        try:
            await pilot.press("r")
            assert began
            await pilot.pause()
            assert not USER_TURN.active and gc.isenabled()
        finally:
            del USER_TURN.begin


@pytest.mark.parametrize("key", ["r", "s", "greater_than_sign", "less_than_sign", "p", "space"])
async def test_a_table_key_acts_when_the_app_first_gets_it_not_after_a_pending_frame(key: str) -> None:
    # A key the app handles only after forwarding it to the focused table comes back to the app after the frame
    # already due (at 256 CPUs an interval's update, ~10 ms): the table's own keys are the app's at once.
    app, engine, _, _ = demo_app(intervals=2)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        table = app.query_one("#cores")
        forwarded: list[str] = []
        forward = table._forward_event

        def recorded_forward(event: object) -> None:
            forwarded.append(getattr(event, "key", ""))
            forward(event)  # type: ignore[arg-type]

        table._forward_event = recorded_forward  # type: ignore[method-assign]
        before = (app.core_table.sort_key, app.core_table.reverse, app.paused)
        await pilot.press(key)
        await pilot.pause()
        assert forwarded == []
        assert (app.core_table.sort_key, app.core_table.reverse, app.paused) != before
    engine.stop()


async def test_the_filter_line_still_types_every_table_key() -> None:
    app, engine, _, _ = demo_app(intervals=2)
    async with app.run_test(size=WIDE) as pilot:
        await pilot.pause()
        before = (app.core_table.sort_key, app.core_table.reverse, app.paused, app.feed.interval)
        await pilot.press("slash", *"0-2 rs<>p+=")
        await pilot.pause()
        assert app.query_one("#filter", Input).value == "0-2 rs<>p+="
        assert (app.core_table.sort_key, app.core_table.reverse, app.paused, app.feed.interval) == before
    engine.stop()
