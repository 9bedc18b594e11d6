"""The top-down view's pieces: the stacked bar, the model's per-core and all-CPU fractions, batch output."""

from __future__ import annotations

from pmutop.app.screenshots import demo_app
from pmutop.core.ring import SampleRing
from pmutop.core.sample import Sample
from pmutop.derive.records import METRIC_ORDER, record
from pmutop.tui.model import ViewModel
from pmutop.tui.topdown_view import COLOURS, row_cells, stacked_bar
from tests.helpers.pilot import screen_text


def td_sample(cpu: int, seq: int, ret: int, bad: int, fe: int, be: int, method: str | None = "perf_metrics") -> Sample:
    counts = {"instructions": 1000, "cycles": 1000, "ref_cycles": 1000}
    if method:
        counts |= {
            "slots": ret + bad + fe + be,
            "topdown_retiring": ret,
            "topdown_bad_spec": bad,
            "topdown_fe_bound": fe,
            "topdown_be_bound": be,
        }
    return Sample(cpu, seq, seq * 1.0, 1.0, 2000, 2e9, counts, topdown=method)


def test_the_bar_fills_its_width_in_proportion_with_one_colour_per_category() -> None:
    bar = stacked_bar({"tma_retiring": 0.5, "tma_bad_speculation": 0.1, "tma_frontend_bound": 0.15,
                       "tma_backend_bound": 0.25}, 20)  # fmt: skip
    assert bar.plain == "█" * 20
    lengths = {str(span.style): span.end - span.start for span in bar.spans}
    assert lengths == {COLOURS["tma_retiring"]: 10, COLOURS["tma_bad_speculation"]: 2,
                       COLOURS["tma_frontend_bound"]: 3, COLOURS["tma_backend_bound"]: 5}  # fmt: skip
    assert len(set(COLOURS.values())) == 4


def test_rounding_never_changes_the_bar_width() -> None:
    thirds = {"tma_retiring": 1 / 3, "tma_bad_speculation": 1 / 3, "tma_frontend_bound": 1 / 3,
              "tma_backend_bound": 0.0}  # fmt: skip
    for width in range(8, 40):
        assert len(stacked_bar(thirds, width).plain) == width


def test_the_model_keeps_per_core_fractions_and_weights_the_all_row_by_slots() -> None:
    rings = {0: SampleRing(), 1: SampleRing()}
    rings[0].push(td_sample(0, 1, 600, 100, 100, 200))  # 1000 slots
    rings[1].push(td_sample(1, 1, 0, 0, 0, 3000))  # 3000 slots, all backend bound
    model = ViewModel([0, 1])
    assert model.ingest(rings)
    assert model.measures_topdown
    assert model.cores[0].tma is not None and abs(model.cores[0].tma["tma_retiring"] - 0.6) < 1e-9  # type: ignore[operator]
    total = model.total.tma
    assert total is not None
    assert abs(total["tma_retiring"] - 0.15) < 1e-9  # type: ignore[operator]
    assert abs(total["tma_backend_bound"] - 0.8) < 1e-9  # type: ignore[operator]
    cells = row_cells(model.cores[1], 20)
    assert cells[-1].plain == "Backend bound"
    assert [c.plain for c in cells[2:6]] == ["  0.0", "  0.0", "  0.0", "100.0"]


def test_a_core_without_top_down_says_so_and_invents_nothing() -> None:
    rings = {0: SampleRing()}
    rings[0].push(td_sample(0, 1, 0, 0, 0, 0, method=None))
    model = ViewModel([0])
    model.ingest(rings)
    assert not model.measures_topdown and model.cores[0].tma is None
    cells = row_cells(model.cores[0], 60)
    assert cells[1].plain == "not measured on this core (see `pmutop info`)"
    assert all(c.plain == "" for c in cells[2:])


def test_batch_records_carry_the_tma_fields_null_where_not_measured() -> None:
    rec = record(td_sample(0, 1, 500, 100, 100, 300), "msr")
    assert (rec["tma_retiring"], rec["tma_backend_bound"]) == (0.5, 0.3)
    assert rec["tma_heavy_operations"] is None  # level 2 not measured
    plain = record(td_sample(0, 1, 0, 0, 0, 0, method=None), "msr")
    assert all(plain[f] is None for f in METRIC_ORDER if f.startswith("tma_"))
    assert [f for f in METRIC_ORDER if f.startswith("tma_")][:4] == [
        "tma_retiring", "tma_bad_speculation", "tma_frontend_bound", "tma_backend_bound"]  # fmt: skip


async def test_top_down_that_costs_counters_says_which_option_turns_it_on() -> None:
    """On a core whose top-down takes general-purpose counters (Skylake's formula), a plain run does not measure
    it; the view says the option that would, not only where to read about it."""
    app, engine, _, _ = demo_app(model="skx", cpus=4, e_cores=0, intervals=3)
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            await pilot.press("2")
            await pilot.pause()
            title = screen_text(app).splitlines()[0]
    finally:
        engine.stop()
    assert "run with --topdown" in title, title


async def test_on_a_hybrid_part_the_all_bar_says_it_covers_only_the_cores_that_measure_top_down() -> None:
    """Alder Lake's P-cores measure top-down for free (PERF_METRICS), its E-cores only with --topdown: the all
    bar then sums the P-cores alone, and the view says so; the E-cores' rows say which option measures them."""
    app, engine, _, _ = demo_app(model="adl", cpus=12, e_cores=4, intervals=3)
    try:
        async with app.run_test(size=(160, 30)) as pilot:
            await pilot.press("2")
            await pilot.pause()
            lines = screen_text(app).splitlines()
    finally:
        engine.stop()
    assert "all = the 8 P-cores that measure top-down" in lines[0], lines[0]
    e_core = next(line for line in lines if line.startswith("8 E"))
    assert "run with --topdown" in e_core, e_core
