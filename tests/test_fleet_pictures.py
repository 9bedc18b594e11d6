"""The fleet pictures (python -m pmutop.app.screenshots) over the canned Prometheus: what they show must read
as a real fleet would."""

from __future__ import annotations

from pmutop.app.fleet_screenshots import LOST, fleet_app
from tests.helpers.pilot import screen_text


async def test_the_lost_host_is_lost_since_a_time_of_day_not_a_placeholder_midnight() -> None:
    app, feed = fleet_app()
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await pilot.pause()
            text = screen_text(app)
    finally:
        feed.stop()
    line = next(line for line in text.splitlines() if f"{LOST}: lost since" in line)
    assert "00:00:00" not in line and "14:32:" in line, line
