from __future__ import annotations

from pmutop.tui import format as F


def test_colour_thresholds_find_the_sick_core() -> None:
    assert [F.ipc_style(v) for v in (None, 0.3, 0.7, 1.5, 2.5)] == [None, "bold red", "yellow", None, "green"]
    assert [F.mpki_style(v) for v in (None, 1.9, 2.0, 9.9, 10.0)] == [None, None, "yellow", "yellow", "bold red"]
    assert [F.miss_ratio_style(v) for v in (0.29, 0.3, 0.6)] == [None, "yellow", "bold red"]
    assert [F.branch_style(v) for v in (0.019, 0.02, 0.05)] == [None, "yellow", "bold red"]


def test_numbers_keep_their_width() -> None:
    assert [F.si(v, 6) for v in (None, 999, 1_234, 12_345_678, 123_000_000_000)] == [
        "     -",
        "   999",
        "  1.2k",
        " 12.3M",
        "  123G",
    ]
    assert F.fixed(None, ".2f", 5) == "    -" and F.fixed(0.5, ".1f", 6, 100) == "  50.0"
    assert F.sparkline([0, 1, 2, 4, None], 6, 4.0) == "  ▂▄█ "
