"""SVG snapshots of the three views at 80x24 and 160x50 (pytest-textual-snapshot).

After an intended change of the screen: `python -m pytest tests/test_snapshots.py --snapshot-update`,
look at the report, and regenerate screenshots/ with `python -m pmutop.screenshots`.
"""

from __future__ import annotations

import pytest

from pmutop.screenshots import SHOWN_MODEL, VIEWS, demo_app


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
@pytest.mark.parametrize("view", list(VIEWS))
def test_view(snap_compare, view: str, size: tuple[int, int]) -> None:  # type: ignore[no-untyped-def]
    app, engine, _, _ = demo_app(model=SHOWN_MODEL)
    try:
        assert snap_compare(app, press=list(VIEWS[view]), terminal_size=size)
    finally:
        engine.stop()
