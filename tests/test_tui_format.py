from __future__ import annotations

from pmutop.tui import format as fmt


def test_colour_thresholds_find_the_sick_core() -> None:
    assert [fmt.ipc_style(v) for v in (None, 0.3, 0.7, 1.5, 2.5)] == [None, "bold red", "yellow", None, "green"]
    assert [fmt.mpki_style(v) for v in (None, 1.9, 2.0, 9.9, 10.0)] == [None, None, "yellow", "yellow", "bold red"]
    assert [fmt.miss_ratio_style(v) for v in (0.29, 0.3, 0.6)] == [None, "yellow", "bold red"]
    assert [fmt.branch_style(v) for v in (0.019, 0.02, 0.05)] == [None, "yellow", "bold red"]


def test_numbers_keep_their_width() -> None:
    assert [fmt.si(v, 6) for v in (None, 999, 1_234, 12_345_678, 123_000_000_000)] == [
        "     -",
        "   999",
        "  1.2k",
        " 12.3M",
        "  123G",
    ]
    assert fmt.fixed(None, ".2f", 5) == "    -" and fmt.fixed(0.5, ".1f", 6, 100) == "  50.0"
    assert fmt.sparkline([0, 1, 2, 4, None], 6, 4.0) == "  ▂▄█ "
    # Any value above 0 shows (at least the lowest block, also on a zero scale), beyond the top is the top, 0
    # and below are blank.
    assert fmt.sparkline([0.001, 9.0, -1.0, 3.0], 4, 4.0) == "▁█ ▆"
    assert fmt.sparkline([0.0, 2.0, None], 3, 0.0) == " ▁ "
    assert fmt.sparkline([1.0] * 200, 3, 4.0) == "▂▂▂"  # the last values only


def test_one_unit_style_at_unit_boundaries() -> None:
    # 999.96 M rounds to the next unit: never "1000M" beside "1.0G" in one column.
    assert [fmt.si(v, 0) for v in (999.4, 999.6, 99_949, 99_960, 999_960, 999_960_000)] == [
        "999",
        "1.0k",
        "99.9k",
        "100k",
        "1.0M",
        "1.0G",
    ]


def test_batch_table_and_live_view_share_the_formatter() -> None:
    import io

    from pmutop.core.sample import Sample
    from pmutop.sinks.batch import TablePrinter

    out = io.StringIO()
    printer = TablePrinter(out, ["instructions", "cycles", "llc_misses"], "msr")
    s = Sample(
        cpu=0,
        seq=1,
        time=1.0,
        interval=1.0,
        tsc=None,
        tsc_hz=None,
        counts={"instructions": 10**9, "cycles": 10**9, "llc_misses": 999_960_000},
    )
    printer.write(s, time=1.0, index=1)
    row = out.getvalue().splitlines()[1]
    assert fmt.si(999_960_000, 0) in row.split() and "1000M" not in row
