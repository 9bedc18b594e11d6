"""`pmutop --batch` end to end on the simulated PMU, and one-line errors for bad input."""

from __future__ import annotations

import csv
import io
import json

import pytest

from pmutop.app.main import main
from pmutop.derive.metrics import compute

RAW_KEYS = ("instructions", "cycles", "ref_cycles", "tsc", "llc_references", "llc_misses", "branches", "branch_misses")
METRIC_KEYS = ("util", "ghz", "ipc", "llc_misses_per_s", "llc_mpki", "llc_miss_ratio", "branch_miss_ratio")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def one_record(capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict, str]:
    """One interval of cpu 0 on the simulated PMU, as a JSON record."""
    args = (
        "--demo",
        "--batch",
        "--count",
        "1",
        "--interval",
        "0.05",
        "--cores",
        "0",
        "--format",
        "json",
        "--records",
        "cpu",
    )
    code, out, err = run(capsys, *args, *extra)
    return code, json.loads(out) if code == 0 else {}, err


def test_json_lines_carry_deltas_and_the_metrics_of_those_deltas(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "--demo", "--batch", "--count", "3", "--interval", "0.1", "--cores", "0-2", "--format", "json"
    )
    assert code == 0, err
    records = [r for line in out.splitlines() if (r := json.loads(line))["kind"] == "cpu"]  # package: issue 22
    assert [r["cpu"] for r in records] == [0, 1, 2] * 3
    for n, r in enumerate(records):
        k = n // 3 + 1
        assert r["mode"] == "SIMULATED"
        assert set(RAW_KEYS) <= r.keys() and set(METRIC_KEYS) <= r.keys()
        assert r["suspect"] is None and r["overflows"] == {}
        assert r["interval"] == pytest.approx(0.1, abs=0.09)
        assert r["time"] == pytest.approx(0.1 * k, abs=0.09)  # deadline schedule: no drift
        tsc_hz = r["tsc"] / r["interval"]
        m = compute({k2: r[k2] for k2 in RAW_KEYS if k2 != "tsc"}, r["tsc"], tsc_hz, r["interval"])
        assert r["ipc"] == pytest.approx(m.ipc, rel=1e-5, abs=1e-6)  # 6 decimals
        assert r["llc_mpki"] == pytest.approx(m.llc_mpki, rel=1e-5, abs=1e-6)  # 6 decimals
        assert r["llc_miss_ratio"] == pytest.approx(m.llc_miss_ratio, rel=1e-5, abs=1e-6)  # 6 decimals
        assert r["util"] == pytest.approx(m.util, rel=1e-5, abs=1e-6)  # 6 decimals
        assert r["ghz"] == pytest.approx(m.ghz, rel=0.05)  # TSC Hz is measured since the start, not per interval
        assert 0 <= r["util"] <= 1
    assert "SIMULATED" in err


def test_events_not_counted_are_absent(capsys: pytest.CaptureFixture[str]) -> None:
    code, rec, err = one_record(capsys, "--sim-gp", "2")
    assert code == 0, err
    assert "llc_misses" in rec and "branches" not in rec and "branch_misses" not in rec
    assert rec["branch_miss_ratio"] is None
    assert "not counting branches on cpu 0: only 2 general-purpose counters" in err


def test_csv_has_a_header_and_the_json_columns(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "--demo", "--batch", "--count", "2", "--interval", "0.05", "--cores", "0,3", "--format", "csv"
    )
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 4 and [r["cpu"] for r in rows] == ["0", "3", "0", "3"]
    assert list(rows[0])[:5] == ["kind", "time", "interval_index", "cpu", "interval"] and rows[0]["kind"] == "cpu"
    assert set(RAW_KEYS + METRIC_KEYS + ("overflows", "suspect", "mode")) <= set(rows[0])
    assert all(r["mode"] == "SIMULATED" for r in rows)
    assert float(rows[0]["ipc"]) == pytest.approx(
        int(rows[0]["instructions"]) / int(rows[0]["cycles"]), rel=1e-5, abs=1e-6
    )


def test_table_marks_every_line_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "--demo", "--batch", "--count", "2", "--interval", "0.05", "--cores", "1")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 3 and lines[0].split()[:5] == ["time", "CPU", "Util%", "GHz", "IPC"]
    assert all("SIMULATED" in line for line in lines)


def test_raw_event_is_reported_under_its_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, rec, err = one_record(capsys, "--events", "llc-misses,event=0xc4,umask=0x00")
    assert code == 0, err
    assert rec["r00c4"] > 0 and rec["llc_misses"] >= 0 and "llc_references" not in rec
    assert rec["llc_miss_ratio"] is None and rec["ipc"] is not None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "0"], "--interval: must be 0.01 .. 3600 seconds"),
        (["--interval", "-1"], "--interval: must be 0.01 .. 3600 seconds"),
        (["--interval", "fast"], "'fast' is not a number"),
        (["--interval", "nan"], "must be 0.01 .. 3600 seconds"),
        # Used to end in ZeroDivisionError / OverflowError.
        (["--interval", "1e-10"], "must be 0.01 .. 3600 seconds (got 1e-10)"),
        (["--interval", "1e10"], "must be 0.01 .. 3600 seconds (got 1e10)"),
        (["--cores", "3-1"], "range '3-1' is reversed"),
        (["--cores", "0-9"], "CPU 8-9 is offline or does not exist"),
        (["--cores", "x"], "'x' is not a number or range"),
        (["--count", "0"], "must be >= 1"),
        (["--events", "bogus"], "unknown event 'BOGUS'"),
        (["--events", "cache-misses"], "unknown event 'cache-misses'"),
        (["--events", "event=0x1c4"], "'event=0x1c4': event is 8 bits"),
        (["--user-only", "--kernel-only"], "not allowed with argument"),
        (["--frobnicate"], "unrecognized arguments: --frobnicate"),
        (["--format", "xml"], "invalid choice: 'xml'"),
        (["--sim-e-cores", "9"], "--sim-e-cores 9 exceeds --sim-cpus 8"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, out, err = run(capsys, "--demo", "--batch", *args)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("pmutop: ") and message in err, err


def test_count_needs_batch(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--demo", "--count", "2")
    assert code == 2 and err == "pmutop: --count needs --batch\n"


def test_sysroot_must_be_a_directory(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "info", "--sysroot", "/nonexistent/dir")
    assert code == 2 and err == "pmutop: --sysroot /nonexistent/dir: not a directory\n"


def test_live_view_needs_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "--demo")  # pytest's stdin/stderr are not terminals
    assert code == 2
    assert err == "pmutop: the live view needs a terminal on stdin and stderr; use --batch for pipes and files\n"


def test_csv_and_json_have_exactly_the_same_columns_each_once(capsys: pytest.CaptureFixture[str]) -> None:
    args = ("--demo", "--batch", "--count", "1", "--interval", "0.05", "--cores", "0")
    code, csv_out, err = run(capsys, *args, "--format", "csv")
    assert code == 0, err
    header = next(csv.reader(io.StringIO(csv_out)))
    assert len(header) == len(set(header)), [c for c in header if header.count(c) > 1]  # llc_misses_per_s was twice
    code, json_out, err = run(capsys, *args, "--format", "json")
    rec = json.loads(json_out.splitlines()[0])
    # The documented flattening: JSON's `cstates` object is one cstate_<name> column per state in CSV.
    flat = [k for c in rec for k in ([f"cstate_{n}" for n in rec["cstates"]] if c == "cstates" else [c])]
    assert rec["cstates"] and flat == header


def test_every_record_of_an_interval_has_one_time_and_its_index(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "--demo", "--batch", "--count", "3", "--interval", "0.05", "--cores", "0-3", "--format", "json"
    )
    assert code == 0, err
    recs = [json.loads(line) for line in out.splitlines()]
    for index in (1, 2, 3):
        of_interval = [r for r in recs if r["interval_index"] == index]
        assert len(of_interval) == 4 + 1 and len({r["time"] for r in of_interval}) == 1  # 4 CPUs, 1 package


def test_numbers_are_rounded_to_sensible_precision(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "--demo", "--batch", "--count", "2", "--interval", "0.05", "--cores", "0-3", "--format", "json"
    )
    assert code == 0, err
    for line in out.splitlines():
        for key, value in json.loads(line).items():
            if isinstance(value, float) and "e" not in repr(value):
                if key in ("time", "interval"):  # seconds: milliseconds and microseconds
                    assert len(repr(value).split(".")[1]) <= (3 if key == "time" else 6), (key, value)
                    continue
                digits = repr(value).replace(".", "").lstrip("0").rstrip("0")
                assert len(digits) <= 6, (key, value)  # the README's 6 significant digits: no 0.38000000000016826


def test_timestamps_are_absolute_utc(capsys: pytest.CaptureFixture[str]) -> None:
    import datetime as dt

    before = dt.datetime.now(dt.UTC)
    code, out, err = run(
        capsys, "--demo", "--batch", "--count", "1", "--interval", "0.05", "--format", "json", "--timestamps"
    )
    assert code == 0, err
    stamp = json.loads(out.splitlines()[0])["timestamp"]
    assert stamp.endswith("Z")
    when = dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert before - dt.timedelta(seconds=1) <= when <= dt.datetime.now(dt.UTC)
    code, _, err = run(capsys, "--demo", "--timestamps")
    assert (code, err) == (2, "pmutop: --timestamps needs --batch\n")


def test_demo_says_once_that_it_runs_at_more_cpu_without_the_c_shim(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from pmutop.sim import segment

    argv = ("--demo", "--batch", "--count", "2", "--interval", "0.1", "--sim-cpus", "2", "--format", "json")
    if segment.native_available():  # built here: nothing to say
        code, _, err = run(capsys, *argv)
        assert code == 0 and "shim" not in err, err
    monkeypatch.setattr("pmutop.hw.shim.lib", None)  # as installed without a C compiler
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    said = [line for line in err.splitlines() if "shim" in line]
    assert len(said) == 1 and "more CPU" in said[0] and "install gcc" in said[0], err
    assert sum(json.loads(line)["kind"] == "cpu" for line in out.splitlines()) == 2 * 2  # the same run
