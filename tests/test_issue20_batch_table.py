"""Issue 20: the batch table (`--batch --format table`) names its columns as the live view does, has the `all`
row (the machine total, as the live `all` row computes it), the power columns where measured, and a rate for
every counted event that no other column shows."""

from __future__ import annotations

import io

import pytest

from pmutop.app.main import main
from pmutop.core.sample import Sample
from pmutop.derive.records import rate_title
from pmutop.sinks.batch import TablePrinter, print_interval


def run_table(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    code = main(["--demo", "--batch", "--format", "table", "--interval", "0.05", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    return out.splitlines()


def sample(cpu: int, **kw: object) -> Sample:
    base: dict = {"seq": 1, "time": 1.0, "interval": 1.0, "tsc": 2_000_000_000, "tsc_hz": 2e9}
    return Sample(cpu=cpu, **(base | kw))  # type: ignore[arg-type]


def table(batch: list[Sample], keys: list[str], tma: bool = False) -> list[str]:
    out = io.StringIO()
    printer = TablePrinter(out, keys, "msr", tma)
    print_interval(printer, batch, 1, None, None, set())
    return out.getvalue().splitlines()


def cells(header: str, row: str, title: str) -> str:
    """The text of a row under a column title (right-aligned: from the end of the title before it)."""
    at = header.index(" " + title) + 1
    end = at + len(title)
    start = len(header[:at].rstrip())
    return row[start:end].strip()


def test_the_header_uses_the_live_views_titles(capsys: pytest.CaptureFixture[str]) -> None:
    header = run_table(capsys, "--count", "1", "--cores", "0-1")[0]
    for title in ("CPU", "Util%", "GHz", "IPC", "LLC miss/s", "MPKI", "LLC miss%", "Br miss%"):
        assert f" {title}" in header, title
    for old in ("util%", "brmiss%", "LLCmiss/s", "LLCmiss%"):
        assert old not in header


def test_every_interval_ends_with_the_all_row(capsys: pytest.CaptureFixture[str]) -> None:
    lines = run_table(capsys, "--count", "2", "--cores", "0-3")
    rows = [line.split() for line in lines[1:]]
    assert [r[1] for r in rows] == ["0", "1", "2", "3", "all"] * 2
    assert all(line.rstrip().endswith("SIMULATED") for line in lines)


def test_one_cpu_needs_no_all_row(capsys: pytest.CaptureFixture[str]) -> None:
    lines = run_table(capsys, "--count", "2", "--cores", "1")
    assert [line.split()[1] for line in lines[1:]] == ["1", "1"]


def test_the_all_row_is_the_machine_total_not_an_average_of_ratios() -> None:
    keys = ["instructions", "cycles", "ref_cycles", "llc_misses", "branches"]
    a = sample(
        0,
        counts={
            "instructions": 1_000_000_000,
            "cycles": 1_000_000_000,
            "ref_cycles": 1_000_000_000,
            "llc_misses": 1_000_000,
            "branches": 100_000_000,
        },
    )
    b = sample(
        1,
        counts={
            "instructions": 3_000_000_000,
            "cycles": 2_000_000_000,
            "ref_cycles": 2_000_000_000,
            "llc_misses": 3_000_000,
            "branches": 300_000_000,
        },
    )
    header, row_a, row_b, total = table([a, b], keys)
    assert cells(header, row_a, "IPC") == "1.00" and cells(header, row_b, "IPC") == "1.50"
    assert cells(header, total, "CPU") == "all"
    assert cells(header, total, "IPC") == "1.33"  # Σinstructions / Σcycles, not the mean 1.25
    assert cells(header, total, "LLC miss/s") == "4.0M"  # the cores' rates added up
    assert cells(header, total, "branches/s") == "400M"


def test_the_all_rows_top_down_weights_each_cpu_by_its_slots() -> None:
    keys = ["instructions", "cycles", "ref_cycles", "slots", "topdown_retiring", "topdown_bad_spec",
            "topdown_fe_bound", "topdown_be_bound"]  # fmt: skip

    def td(slots: int, retiring: float) -> dict[str, int]:  # the rest is backend bound
        return {"instructions": 10**9, "cycles": 10**9, "ref_cycles": 10**9, "slots": slots,
                "topdown_retiring": int(slots * retiring), "topdown_bad_spec": 0, "topdown_fe_bound": 0,
                "topdown_be_bound": slots - int(slots * retiring)}  # fmt: skip

    a = sample(0, counts=td(1_000_000, 0.8), topdown="perf_metrics")
    b = sample(1, counts=td(3_000_000, 0.4), topdown="perf_metrics")
    header, _, _, total = table([a, b], keys, tma=True)
    assert cells(header, total, "Ret%") == "50.0"  # (0.8 × 1 + 0.4 × 3) / 4


def test_power_columns_appear_where_measured_and_watts_add_up() -> None:
    keys = ["instructions", "cycles", "ref_cycles"]
    counts = {"instructions": 10**9, "cycles": 10**9, "ref_cycles": 10**9}
    a = sample(0, counts=counts, busy=50.0, bzy_mhz=3000.0, temp_c=60.0, package=0, energy_j={"package": 40.0})
    b = sample(1, counts=counts, busy=100.0, bzy_mhz=4000.0, temp_c=70.0, package=1, energy_j={"package": 30.0})
    header, row_a, row_b, total = table([a, b], keys)
    for title in ("Busy%", "BzyMHz", "°C", "PkgW"):
        assert f" {title}" in header
    assert cells(header, row_a, "PkgW") == "40.0" and cells(header, row_b, "°C") == "70"
    assert cells(header, total, "PkgW") == "70.0"  # the packages added up
    assert cells(header, total, "°C") == "70"  # the hottest
    assert cells(header, total, "Busy%") == "75"


def test_no_power_columns_when_nothing_measures_power() -> None:
    counts = {"instructions": 10**9, "cycles": 10**9}
    header = table([sample(0, counts=counts)], ["instructions", "cycles"])[0]
    assert "PkgW" not in header and "Busy%" not in header


def test_the_demo_table_shows_power(capsys: pytest.CaptureFixture[str]) -> None:
    lines = run_table(capsys, "--count", "1", "--cores", "0-1", "--interval", "0.2")
    header = lines[0]
    for title in ("Busy%", "BzyMHz", "°C", "PkgW"):
        assert f" {title}" in header
    assert cells(header, lines[1], "PkgW") not in ("", "-")  # cpu 0 carries the package


def test_a_live_table_names_the_power_columns_it_is_given_before_the_first_interval() -> None:
    from pmutop.sinks.batch import run_batch

    class NoSamples:  # a feed whose first interval never comes: the header is out all the same
        cpus = (0,)
        interval = 600.0

        def keys(self, cpu: int) -> list[str]:
            return ["instructions", "cycles"]

        def topdown_method(self, cpu: int) -> None:
            return None

        def elapsed(self) -> float:
            return 0.0

    out = io.StringIO()
    run_batch(NoSamples(), "table", 0, "msr", out=out, power_fields=("busy", "pkg_watts"))  # type: ignore[arg-type]
    header = out.getvalue().splitlines()[0]
    assert " Busy%" in header and " PkgW" in header and "BzyMHz" not in header


@pytest.mark.parametrize("event", ["branches", "llc-references", "branch-misses"])
def test_a_counted_event_with_no_derived_column_gets_its_rate(capsys: pytest.CaptureFixture[str], event: str) -> None:
    lines = run_table(capsys, "--count", "1", "--cores", "0", "--events", f"instructions,cycles,{event}")
    title = rate_title(event.replace("-", "_"))
    assert f" {title}" in lines[0]
    assert cells(lines[0], lines[1], title) not in ("", "-")
