"""SVG snapshots of every view and state (main, detail, top-down, heatmap, help, paused, failed core,
software-only, 256 cores) at 80x24 (narrow) and 160x50 (pytest-textual-snapshot).

After an intended change of the screen: `python -m pytest tests/test_snapshots.py --snapshot-update`,
look at the report, and regenerate screenshots/ with `python -m pmutop.app.screenshots`.
"""

from __future__ import annotations

import pytest

from pmutop.app.fleet_screenshots import FLEET_VIEWS, fleet_app
from pmutop.app.screenshots import SCENES, scene


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
@pytest.mark.parametrize("view", list(SCENES))
def test_view(snap_compare, view: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    app, engine, keys = scene(view)
    try:
        assert snap_compare(app, press=list(keys), terminal_size=size)
    finally:
        if engine is not None:
            engine.stop()


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
@pytest.mark.parametrize("view", list(FLEET_VIEWS))
def test_fleet_view(snap_compare, view: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    """The host table and the fleet heatmap (pmutop --prometheus) over a canned Prometheus API."""
    app, feed = fleet_app()
    try:
        assert snap_compare(app, press=list(FLEET_VIEWS[view]), terminal_size=size)
    finally:
        feed.stop()
