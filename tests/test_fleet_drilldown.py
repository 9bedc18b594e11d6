"""A host's per-core table in the fleet view (`pmutop --prometheus`, Enter on a host): its rows named in full
once the power columns come, and the DRAM line showing what that host's exporter measured."""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

from helpers.fake_prometheus import DRAM_PEAK, DRAM_READ, DRAM_WRITE, FakePrometheus
from helpers.pilot import text_of
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from pmutop.feeds.fleet import FleetFeed
from pmutop.feeds.promql import DEFAULT_MATCH, parse_server
from pmutop.tui.fleet_app import FleetApp


async def until(pilot: Pilot[int], done: Callable[[], bool], seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.02)


def first_cells(app: FleetApp, column: str = "cpu") -> list[str]:
    table = app.query_one("#cores", DataTable)
    return [table.get_cell(row.key, column).plain.strip() for row in table.ordered_rows]


@contextlib.asynccontextmanager
async def opened_host(families: tuple[str, ...]) -> AsyncIterator[tuple[FakePrometheus, FleetApp, Pilot[int]]]:
    """The fleet view over two hosts of two CPUs, the first host's per-core table open and updated twice."""
    with FakePrometheus(hosts=2, cpus=2, families=families) as fake:
        feed = FleetFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH)
        try:
            app = FleetApp(feed, feed.run_info())
            async with app.run_test(size=(200, 40)) as pilot:
                await pilot.press("enter")
                await until(pilot, lambda: app.opened is not None)
                opened = app.opened
                assert opened is not None
                for _ in range(2):  # the power columns come with the first updates
                    before = app.updates
                    opened.poll()
                    await until(pilot, lambda: app.updates > before)  # noqa: B023
                await pilot.pause(1.2)  # the header is redrawn every second
                yield fake, app, pilot
        finally:
            feed.stop()


async def test_a_hosts_cpus_keep_their_full_names_when_power_columns_come() -> None:
    async with opened_host(("busy_seconds_total",)) as (fake, app, _pilot):
        assert "busy" in app.core_table.widths  # the power columns are there
        host = fake.instances[0]
        assert first_cells(app) == [f"{host}:0", f"{host}:1", "all"]
        assert first_cells(app, "busy") == ["50", "50", "50"]


async def test_a_hosts_dram_line_shows_what_its_exporter_measured() -> None:
    async with opened_host(("dram_bytes_total",)) as (_fake, app, _pilot):
        line = text_of(app.query_one("#dram", Static), width=200)
        assert "no memory-controller counters" not in line and "est." not in line
        # Read and write as the exporter served them, and their share of the peak it serves.
        assert (DRAM_READ, DRAM_WRITE, DRAM_PEAK) == (3.0e9, 1.0e9, 20.0e9)
        assert "R 3.0 GB/s" in line and "W 1.0 GB/s" in line and "20%" in line, line


async def test_a_fleet_of_one_host_is_said_in_the_singular() -> None:
    with FakePrometheus(hosts=1, cpus=2) as fake:
        feed = FleetFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH)
        try:
            app = FleetApp(feed, feed.run_info())
            async with app.run_test(size=(200, 40)) as pilot:
                await until(pilot, lambda: "host" in text_of(app.query_one("#status", Static), width=300))
                status = text_of(app.query_one("#status", Static), width=300)
                machine = text_of(app.query_one("#machine", Static), width=300)
        finally:
            feed.stop()
    assert " 1 host " in status and "1 hosts" not in status, status
    assert machine.startswith("1 host (2 CPUs) via"), machine


async def test_the_host_table_shows_busy_where_the_exporters_serve_it() -> None:
    with FakePrometheus(hosts=2, cpus=2, families=("busy_seconds_total",)) as fake:
        feed = FleetFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH)
        try:
            app = FleetApp(feed, feed.run_info())
            async with app.run_test(size=(250, 40)) as pilot:
                for _ in range(2):  # the power columns come with the first updates
                    before = app.updates
                    feed.poll()
                    await until(pilot, lambda: app.updates > before)  # noqa: B023
                assert first_cells(app, "busy") == ["50", "50", "50"]
                assert first_cells(app) == [*fake.instances, "all"]
        finally:
            feed.stop()
