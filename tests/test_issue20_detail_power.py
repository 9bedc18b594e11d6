"""Issue 20, smaller items: the turbostat values the live view collects (C-state residency, Avg MHz, throttle
reasons) are shown in the detail view, of one core and of all CPUs."""

from __future__ import annotations

from helpers.pilot import screen_text

from pmutop.app.screenshots import demo_app
from pmutop.core.sample import Sample
from pmutop.tui.screens.detail import DetailScreen, power_rows


def sample(cpu: int, busy: float, mhz: float, cstates: dict[str, float], throttle: tuple[str, ...] = ()) -> Sample:
    return Sample(cpu, 1, 1.0, 1.0, 1000, 1e9, {}, busy=busy, bzy_mhz=mhz, cstates=cstates, temp_c=70.0 + cpu,
                  throttle=throttle, power_src={"busy": "msr", "throttle": "msr"})  # fmt: skip


def test_one_core_shows_busy_avg_mhz_cstates_and_throttle() -> None:
    rows = dict(power_rows([sample(0, 50.0, 3000.0, {"C1": 10.0, "C6": 40.0}, ("thermal",))]))
    assert rows["Busy %"] == "50.0%"
    assert rows["Avg MHz"] == "1500"  # turbostat's Avg_MHz: Busy% × Bzy_MHz
    assert rows["Bzy MHz"] == "3000"
    assert rows["C1"] == "10.0%" and rows["C6"] == "40.0%"
    assert rows["Temperature"] == "70 °C"
    assert rows["Throttled by"] == "thermal"


def test_all_cpus_are_averaged_and_throttling_counted() -> None:
    rows = dict(
        power_rows([sample(0, 50.0, 3000.0, {"C6": 40.0}, ("thermal",)), sample(1, 100.0, 2000.0, {"C6": 0.0})])
    )
    assert rows["Busy %"] == "75.0% (mean)"
    assert rows["Avg MHz"] == "1750 (mean)"  # (1500 + 2000) / 2
    assert rows["C6"] == "20.0% (mean)"
    assert rows["Temperature"] == "71 °C (hottest)"
    assert rows["Throttled by"] == "thermal (1 of 2 CPUs)"
    assert dict(power_rows([sample(0, 50.0, 3000.0, {})]))["Throttled by"] == "nothing"


def test_nothing_measured_shows_nothing_made_up() -> None:
    plain = Sample(0, 1, 1.0, 1.0, 1000, 1e9, {})
    assert power_rows([plain]) == []


async def test_the_detail_view_shows_them_for_a_core_and_for_all() -> None:
    app, engine, _, _ = demo_app(intervals=5, model="spr", cpus=4, e_cores=0)
    try:
        async with app.run_test(size=(160, 70)) as pilot:
            s = engine.rings[0].latest()
            assert s is not None and s.busy is not None and s.bzy_mhz is not None
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, DetailScreen) and app.screen.cpu == 0
            text = screen_text(app)
            assert f"Avg MHz {s.busy * s.bzy_mhz / 100:.0f}" in " ".join(text.split())
            for state, pct in s.cstates.items():
                assert f"{state} {pct:.1f}%" in " ".join(text.split())
            assert "Throttled by" in text
            await pilot.press("escape", "end", "enter")
            await pilot.pause()
            assert app.screen.cpu == -1  # type: ignore[attr-defined]
            assert "(mean)" in screen_text(app) and "Avg MHz" in screen_text(app)
    finally:
        engine.stop()
