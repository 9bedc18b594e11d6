"""Hostile or broken perfmon tables: one clear line, bounded time, memory and output."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot

from pmutop.app.main import main
from pmutop.core.errors import PmutopError
from pmutop.pmu.perfmon import load_events

MAPFILE_HEADER = "Family-model,Version,Filename,EventType,Core Type,Native Model ID,Core Role Name\n"
_LINE_MAX = 1000  # no line pmutop prints about a table may be longer than this


def good_event(name: str = "LONGEST_LAT_CACHE.MISS", **fields: Any) -> dict[str, Any]:
    event = {
        "EventCode": "0x2E",
        "UMask": "0x41",
        "EventName": name,
        "BriefDescription": "Core-originated cacheable requests that missed L3",
        "Counter": "0,1,2,3",
        "MSRIndex": "0x00",
        "MSRValue": "0x00",
        "CounterMask": "0",
        "Invert": "0",
        "EdgeDetect": "0",
        "AnyThread": "0",
    }
    event.update(fields)
    return event


def perfmon_dir(root: Path, table: str | bytes | list[dict[str, Any]]) -> Path:
    """A perfmon directory whose one core table (for Skylake-X) holds `table`."""
    (root / "X/events").mkdir(parents=True)
    (root / "mapfile.csv").write_text(MAPFILE_HEADER + "GenuineIntel-6-55,V1,/X/events/x_core.json,core,,,\n")
    path = root / "X/events/x_core.json"
    if isinstance(table, list):
        path.write_text(json.dumps({"Header": {}, "Events": table}))
    elif isinstance(table, bytes):
        path.write_bytes(table)
    else:
        path.write_text(table)
    return root


@pytest.fixture
def skx(tmp_path: Path) -> Path:
    return build_sysroot(tmp_path / "sysroot", [0, 1], SKYLAKE_X_LEAVES)


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # an unbounded mask or line fails fast


def run_events(skx: Path, tables: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PMUTOP_PERFMON_DIR"}
    return subprocess.run(
        [sys.executable, "-m", "pmutop", "events", "--sysroot", str(skx), "--perfmon-dir", str(tables), *args],
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limit,
        env=env,
    )


def test_deeply_nested_brackets_are_one_line(tmp_path: Path, skx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tables = perfmon_dir(tmp_path / "t", "[" * 100_000 + "]" * 100_000)
    table = tables / "X/events/x_core.json"
    with pytest.raises(PmutopError) as e:
        load_events(table)
    assert str(e.value) == f"{table} is not a valid perfmon table: nested too deeply"
    assert main(["events", "--sysroot", str(skx), "--perfmon-dir", str(tables)]) == 1
    _out, err = capsys.readouterr()
    assert err == f"pmutop: {table} is not a valid perfmon table: nested too deeply\n"


def test_json_errors_say_not_a_valid_perfmon_table(tmp_path: Path) -> None:
    table = perfmon_dir(tmp_path, "<html>captive portal</html>") / "X/events/x_core.json"
    with pytest.raises(PmutopError, match=r"^.*x_core\.json is not a valid perfmon table: Expecting value"):
        load_events(table)


@pytest.mark.integration
def test_a_huge_counter_index_is_refused_not_turned_into_a_huge_mask(tmp_path: Path, skx: Path) -> None:
    # "Counter": "99999999" used to build a 100-million-bit mask: a 25 MB line and a hang.
    tables = perfmon_dir(tmp_path / "t", [good_event(), good_event("HUGE.COUNTER", Counter="99999999")])
    done = run_events(skx, tables, "--search", "counter")
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) < _LINE_MAX
    (line,) = [ln for ln in done.stdout.splitlines() if "HUGE.COUNTER" in ln]
    assert "[not usable: lists counter 99999999, and counters are numbered 0-63]" in line
    ev = load_events(tables / "X/events/x_core.json")["HUGE.COUNTER"]
    assert ev.counters is None and ev.problem == "lists counter 99999999, and counters are numbered 0-63"
    # The bad index does not widen what "every counter" means for the other events either.
    assert load_events(tables / "X/events/x_core.json")["LONGEST_LAT_CACHE.MISS"].counters is None


def test_counter_indexes_up_to_63_are_kept(tmp_path: Path) -> None:
    table = perfmon_dir(
        tmp_path,
        [good_event("A.B", Counter="0,1,2,3"), good_event("C.D", Counter="63"), good_event("E.F", Counter="0")],
    )
    events = load_events(table / "X/events/x_core.json")
    assert events["C.D"].counters == 1 << 63 and events["C.D"].problem is None
    assert events["E.F"].counters == 1


def test_unparsable_rows_are_skipped_not_fatal(tmp_path: Path, skx: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tables = perfmon_dir(
        tmp_path / "t",
        [
            good_event(),
            good_event("BAD.COUNTER", Counter="zz"),
            good_event("BAD.FIXED", Counter="Fixed counter " + "9" * 5000),
            good_event("BAD.TYPE", Counter=["0", ["1"]]),
            good_event("BAD.NAME", EventName={"x": 1}),
        ],
    )
    assert main(["events", "--sysroot", str(skx), "--perfmon-dir", str(tables), "--json"]) == 0
    out, err = capsys.readouterr()
    names = [e["name"] for e in json.loads(out)["events"] if e["kind"] == "intel"]
    assert names == ["LONGEST_LAT_CACHE.MISS"] and err == ""


@pytest.mark.integration
def test_printed_lines_stay_bounded(tmp_path: Path, skx: Path) -> None:
    tables = perfmon_dir(
        tmp_path / "t",
        [
            good_event("LONG.DESCRIPTION", BriefDescription="word " * 200_000),
            good_event("HUGE.CODE", EventCode="0x" + "f" * 3000),
            good_event("HUGE.MSR", MSRIndex="0x1a6", MSRValue="0x" + "f" * 3000),
            good_event("N" * 5000 + ".X"),
        ],
    )
    done = run_events(skx, tables)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) < _LINE_MAX
    assert any(ln.startswith("  LONG.DESCRIPTION") and ln.endswith("…") for ln in lines)
    assert any("HUGE.CODE" in ln and "[not usable: has event code 0xffffffffffffffff…" in ln for ln in lines)


def test_a_table_larger_than_the_cap_is_refused_without_reading_it(tmp_path: Path) -> None:
    table = perfmon_dir(tmp_path, "[]") / "X/events/x_core.json"
    os.truncate(table, (64 << 20) + 1)  # sparse: costs no disk
    with pytest.raises(PmutopError) as e:
        load_events(table)
    assert str(e.value) == f"{table} is not a valid perfmon table: larger than 64 MiB"
