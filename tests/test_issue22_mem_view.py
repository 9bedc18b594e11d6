"""Issue 22, the live view's DRAM bandwidth: the header's line per socket, the package rows, the memory view
(6), a package row's detail, the heatmap's DRAM metrics, the estimate without a source; what is on screen."""

from __future__ import annotations

import asyncio

from pmutop.app.screenshots import demo_app, software_app
from pmutop.core.dram_reading import PackageDram
from pmutop.tui.app import PmutopApp
from pmutop.tui.dram_text import combined_line, dram_lines, estimate_line, package_line, rate_text
from pmutop.tui.screens.detail import DetailScreen
from pmutop.tui.screens.heatmap import HeatmapScreen
from pmutop.tui.screens.memory import MemoryScreen
from tests.helpers.dram_feed import FakePackageFeed, package
from tests.helpers.pilot import screen_text

WIDE, NARROW = (160, 50), (80, 24)


def two_sockets(saturated: bool = False) -> list[PackageDram]:
    """pkg0: 36 GB/s read, 16.2 written of 307.2 (17%); pkg1: no known peak."""
    return [package(0, 36.0, 16.2, saturated=saturated), package(1, 1.0, 0.5, peak_gbs=None)]


def app_with(feed: FakePackageFeed | None, **demo: object) -> tuple[PmutopApp, object]:
    """The demo's CPUs (60 intervals) beside a DRAM feed of given figures."""
    base, engine, _, _ = demo_app(**demo)  # type: ignore[arg-type]
    return PmutopApp(engine, base.info, base.tasks, package_feed=feed), engine


def feed_of(packages: list[PackageDram], intervals: int = 60) -> FakePackageFeed:
    return FakePackageFeed([packages] * intervals)


def row_order(app: PmutopApp) -> list[str]:
    return app.core_table.rows_in_order()


def run(coro) -> None:  # type: ignore[no-untyped-def]
    asyncio.run(coro)


def test_the_header_shows_read_write_and_the_share_of_the_peak_per_socket() -> None:
    app, engine = app_with(feed_of(two_sockets()))

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            lines = [line for line in screen_text(app).splitlines() if line.startswith("DRAM")]
            assert len(lines) == 2  # one per socket on a tall terminal
            assert "DRAM pkg0  R 36.0 GB/s  W 16.2 GB/s" in lines[0] and lines[0].endswith("17% of 307 GB/s")
            assert "█" in lines[0]  # the bar against the peak
            # No known peak: said, no bar, no share guessed.
            assert "DRAM pkg1  R 1.0 GB/s  W 500 MB/s" in lines[1] and "peak unknown" in lines[1]
            assert "%" not in lines[1] and "█" not in lines[1]

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_at_80x24_two_sockets_share_one_line_and_the_table_still_fits() -> None:
    app, engine = app_with(feed_of(two_sockets()))

    async def go() -> None:
        async with app.run_test(size=NARROW) as pilot:
            await pilot.pause()
            text = screen_text(app)
            lines = [line for line in text.splitlines() if line.startswith("DRAM")]
            assert len(lines) == 1
            assert lines[0].startswith("DRAM GB/s  pkg0 R 36.0 W 16.2 17%  ·  pkg1 R 1.0 W 0.5 peak ?")
            assert "all" in text and "pkg1" in text  # the table's last rows are on screen
            assert "Help" in text.splitlines()[-1]  # the footer too

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_a_saturated_counter_is_shown_as_a_lower_bound() -> None:
    app, engine = app_with(feed_of(two_sockets(saturated=True)))

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            line = next(line for line in screen_text(app).splitlines() if line.startswith("DRAM pkg0"))
            assert "R ≥36.0 GB/s  W ≥16.2 GB/s" in line and "≥17% of 307 GB/s" in line
            assert "lower bound" in line
            await pilot.press("6")
            await pilot.pause()
            assert "saturated" in screen_text(app)
            await pilot.press("1")
            await pilot.pause()
            assert "≥36.0G" in app.core_table._cells[("pkg0", "dram_read")]

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_without_a_dram_source_the_line_is_an_estimate_from_llc_misses() -> None:
    app, engine, _, _ = demo_app()

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            lines = [line for line in screen_text(app).splitlines() if line.startswith("DRAM")]
            assert len(lines) == 1
            latest = app.model.total.latest
            assert latest is not None
            expected = rate_text(latest.counts["llc_misses"] * 64 / latest.interval)
            assert lines[0].startswith(f"DRAM all  est. R {expected}")
            assert "est. from LLC misses" in lines[0]
            assert "dram_read" not in app.core_table.by_key  # no measured columns to offer
            assert not any(r.startswith("pkg") for r in row_order(app))  # one socket: its row would repeat all

    try:
        run(go())
    finally:
        engine.stop()


def test_without_llc_misses_or_a_source_there_is_no_dram_line() -> None:
    app, _ = software_app()

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert not any(line.startswith("DRAM") for line in screen_text(app).splitlines())
            assert app.dram_rows == 0

    run(go())


def test_package_rows_sit_above_the_all_row_whatever_the_sort_and_filter() -> None:
    app, engine = app_with(feed_of(two_sockets()))

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert row_order(app)[-3:] == ["pkg0", "pkg1", "total"]
            cells = app.core_table._cells
            assert cells[("pkg0", "dram_read")].strip() == "36.0G"
            assert cells[("pkg0", "dram_write")].strip() == "16.2G"
            assert cells[("total", "dram_read")].strip() == "37.0G"  # the packages added up
            assert cells[("3", "dram_read")].strip() == ""  # a CPU has no memory controller of its own
            assert cells[("pkg0", "pkg_watts")].strip() == cells[("total", "pkg_watts")].strip()  # one package
            assert cells[("pkg0", "cpu")].strip() == "pkg0"
            app.core_table.set_sort("ipc", True)
            await pilot.pause()
            assert row_order(app)[-3:] == ["pkg0", "pkg1", "total"]
            await pilot.press("slash", *"0-2", "enter")
            await pilot.pause()
            assert sorted(row_order(app)[:3]) == ["0", "1", "2"]
            assert row_order(app)[3:] == ["pkg0", "pkg1", "total"]  # never filtered out
            assert "filter 0-2: 3/12" in screen_text(app)  # the package rows are not counted as CPUs
            await pilot.press("c")
            await pilot.pause()
            assert "DRAM R" in screen_text(app)  # offered by `c` (and on by default)

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_one_socket_has_no_package_row_or_dram_columns_that_repeat_the_all_row_and_the_header() -> None:
    """On one socket a package row would repeat the all row, and the DRAM columns would be blank on every CPU
    row with the package's figures already on the header's DRAM line: neither is shown."""
    app, engine = app_with(feed_of([package(0, 36.0, 16.2)]))

    async def go() -> None:
        async with app.run_test(size=(120, 30)) as pilot:
            await pilot.pause()
            text = screen_text(app)
            assert row_order(app)[-1] == "total" and "pkg0" not in row_order(app)
            assert "DRAM pkg0  R 36.0 GB/s  W 16.2 GB/s" in text
            headings = next(line for line in text.splitlines() if line.startswith("CPU"))
            assert "DRAM" not in headings, headings

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_the_memory_view_shows_every_channel_and_the_history_per_package() -> None:
    app, engine = app_with(feed_of(two_sockets()))

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.press("6")
            await pilot.pause()
            assert isinstance(app.screen, MemoryScreen)
            text = screen_text(app)
            assert "Memory bandwidth per package and channel" in text
            for ch in range(8):
                assert f"uncore_imc_{ch}" in text  # pkg0's
            assert "uncore_imc_8" in text  # pkg1's first
            assert "4.5 GB/s" in text and "2.0 GB/s" in text  # 36 and 16.2 GB/s over 8 channels
            assert "pkg0 · DRAM read" in text and "pkg1 · DRAM write" in text
            assert "36.0 GB/s now" in text
            await pilot.press("escape")
            await pilot.pause()
            assert not isinstance(app.screen, MemoryScreen)

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_enter_on_a_package_row_opens_its_detail_with_its_channels() -> None:
    app, engine = app_with(feed_of(two_sockets()))

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            await pilot.press("end", "up", "up", "enter")
            await pilot.pause()
            assert isinstance(app.screen, DetailScreen) and app.screen.package == 0
            text = screen_text(app)
            assert "package 0 (12 CPUs)" in text
            assert "pkg0 channels" in text and "uncore_imc_7" in text

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_the_heatmap_offers_dram_read_and_write_per_package() -> None:
    app, engine = app_with(feed_of(two_sockets()))

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            assert {"dram_read", "dram_write"} <= {m.key for m in app.heatmap_metrics()}
            app.settings.heatmap_metric = "dram_read"
            await pilot.press("3")
            await pilot.pause()
            assert isinstance(app.screen, HeatmapScreen)
            text = screen_text(app)
            assert "Heatmap: DRAM read per package" in text
            labels = [line.split()[0] for line in text.splitlines()[2:5]]
            assert labels == ["pkg0", "pkg1", "all"]
            assert "DRAM read  0 GB/s" in text and "50 GB/s" in text  # the scale: a round ceiling of 37 GB/s

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_the_view_reads_the_feed_only_when_its_seq_moved() -> None:
    feed = feed_of(two_sockets())
    app, engine = app_with(feed)

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            reads = feed.latest_calls
            for _ in range(5):
                app.poll_dram()
            assert feed.latest_calls == reads  # nothing new: not even read
            feed.push([package(0, 50.0, 20.0), package(1, 1.0, 0.5, peak_gbs=None)], at=61.0)
            app.poll_dram()
            await pilot.pause()
            assert feed.latest_calls == reads + 1
            assert "DRAM pkg0  R 50.0 GB/s  W 20.0 GB/s" in screen_text(app)
            assert app.core_table._cells[("pkg0", "dram_read")].strip() == "50.0G"

    try:
        run(go())
    finally:
        engine.stop()  # type: ignore[attr-defined]


def test_demo_simulated_dram_is_shown_and_labelled() -> None:
    app, engine, _, _ = demo_app(dram=True)

    async def go() -> None:
        async with app.run_test(size=WIDE) as pilot:
            await pilot.pause()
            text = screen_text(app)
            assert "SIMULATED" in text
            line = next(line for line in text.splitlines() if line.startswith("DRAM pkg0"))
            assert "% of 128 GB/s" in line  # 6 channels x 2666 MT/s x 8 bytes (sim/dram.py MEMORY, skx)
            await pilot.press("6")
            await pilot.pause()
            assert "SIMULATED" in screen_text(app).splitlines()[0]

    try:
        run(go())
    finally:
        engine.stop()


def test_line_texts_fit_their_width() -> None:
    p = two_sockets()[0]
    for width in (80, 120, 200):
        assert len(package_line(p, width).plain) <= width - 2
    assert len(dram_lines(two_sockets(), 80, 24)) == 1
    assert len(dram_lines(two_sockets(), 160, 50)) == 2
    assert "pkg1" in combined_line(two_sockets()).plain
    assert estimate_line(None) is None
