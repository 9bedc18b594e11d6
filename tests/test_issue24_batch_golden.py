"""`pmutop --batch` prints exactly what it printed before its per-interval cost was cut (issue 24): the table, CSV
and JSON records of fixed recordings (a perf run with software events, a simulated run with top-down, power
and idle states) and of hand-made intervals that hit every flag (suspect, overflows, estimated, a fleet's
hosts, power, a missing value) are compared byte for byte with files the printers wrote before the change.

The golden files in tests/fixtures/batch_golden/ were written by the code before issue 24's batch work
(`python tests/test_issue24_batch_golden.py DIR` with that code writes them anew)."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

from pmutop.app.main import main
from pmutop.core.sample import Sample
from pmutop.sinks.batch import PRINTERS, print_interval

GOLDEN = Path(__file__).parent / "fixtures" / "batch_golden"
RECORDINGS = ("perf2", "demo2")
FORMATS = ("table", "csv", "json")
WALL0 = 1795579413.5516126  # a fixed start for the timestamped variants

SOFTWARE_KEYS = ["cpu_clock", "context_switches"]
HARDWARE_KEYS = ["instructions", "cycles", "ref_cycles", "llc_references", "llc_misses", "branches", "branch_misses"]
HOSTS = {0: ("alpha", 0), 1: ("alpha", 1), 2: ("a-much-longer-host-name", 0)}


def _sample(cpu: int, seq: int, t: float, counts: dict[str, int], **extra: object) -> Sample:
    fields: dict[str, object] = {"interval": 0.5, "tsc": None, "tsc_hz": None} | extra
    return Sample(cpu=cpu, seq=seq, time=t, counts=counts, **fields)  # type: ignore[arg-type]


def software_intervals() -> list[list[Sample]]:
    """A perf software-event run's shape: util from the kernel's times, idle states from cpuidle."""
    src = {"cstates": "cpuidle"}
    return [
        [
            _sample(
                0,
                1,
                0.5012,
                {"cpu_clock": 500_112_345, "context_switches": 32_301},
                util=0.99,
                cstates={"C1": 0.5},
                power_src=src,
            ),
            _sample(
                1,
                1,
                0.5031,
                {"cpu_clock": 499_998_001, "context_switches": 712},
                util=0.0312,
                cstates={"C1": 96.8},
                power_src=src,
            ),
        ],
        [
            _sample(0, 2, 1.0009, {"cpu_clock": 499_700_000, "context_switches": 0}, util=None),
            _sample(1, 2, 1.0020, {"cpu_clock": 0, "context_switches": 5}, util=1.0, suspect="cpu_clock ran backwards"),
        ],
        [  # one CPU left (the other failed): no `all` row
            _sample(0, 3, 1.5003, {"cpu_clock": 500_000_000, "context_switches": 1_234_567_890}, util=0.5),
        ],
    ]


def hardware_intervals() -> list[list[Sample]]:
    """Counters with multiplexing, overflows, power, package energy and temperatures, on three CPUs."""
    counts = {
        "instructions": 1_654_064_017,
        "cycles": 796_825_356,
        "ref_cycles": 465_361_571,
        "llc_references": 2_426_879,
        "llc_misses": 480_080,
        "branches": 235_941_393,
        "branch_misses": 3_369_341,
    }
    power = {"busy": 95.0, "bzy_mhz": 4109.5, "temp_c": 87.0, "throttle": ("thermal",), "package": 0}
    src = {"busy": "msr", "bzy_mhz": "msr", "temp_c": "msr", "throttle": "msr", "energy_j": "msr"}
    first = {
        "pkg_temp_c": 88.0,
        "energy_j": {"package": 8.5, "core": 8.25, "dram": 0.875},
        "cstates": {"C1": 2.9, "C6": 6.766},
    }
    tsc = {"tsc": 1_000_000_000, "tsc_hz": 2.0e9}
    return [
        [
            _sample(0, 1, 0.5, counts, **tsc, **power, **first, power_src=src),
            _sample(
                1,
                1,
                0.5,
                {k: v // 3 for k, v in counts.items()},
                **tsc,
                estimated={"llc_misses": 0.5, "llc_references": 0.5},
                **power,
                power_src=src,
            ),
            _sample(2, 1, 0.501, {k: v // 7 for k, v in counts.items()}, **tsc, overflows={"cycles": 1}, package=1),
        ],
        [
            _sample(0, 2, 1.0, {k: v * 2 for k, v in counts.items()}, **tsc, **power, power_src=src),
            _sample(1, 2, 1.0, counts, **tsc, suspect="instructions over 10 per cycle", **power),
            _sample(
                2, 2, 1.0, {**counts, "branches": 0, "branch_misses": 0}, **tsc, estimated={"cycles": 0.0}, package=1
            ),
        ],
    ]


CASES = {
    "software": (SOFTWARE_KEYS, software_intervals, None),
    "hardware": (HARDWARE_KEYS, hardware_intervals, None),
    "hardware-hosts": (HARDWARE_KEYS, hardware_intervals, HOSTS),
}


def print_case(case: str, fmt: str, timestamps: bool) -> str:
    keys, intervals, hosts = CASES[case]
    out = io.StringIO()
    printer = PRINTERS[fmt](out, keys, "perf", False, timestamps, hosts)
    warnings: list[str] = []
    warned: set[tuple[int, str]] = set()
    for index, batch in enumerate(intervals(), 1):
        print_interval(printer, batch, index, WALL0 if timestamps else None, warnings.append, warned)
    return out.getvalue() + "".join(f"warning: {w}\n" for w in warnings)


def _name(what: str, fmt: str, timestamps: bool) -> str:
    return f"{what}.{fmt}{'.ts' if timestamps else ''}.txt"


@pytest.mark.parametrize("timestamps", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("case", CASES)
def test_printers_write_what_they_wrote_before(case: str, fmt: str, timestamps: bool) -> None:
    assert print_case(case, fmt, timestamps) == (GOLDEN / _name(case, fmt, timestamps)).read_text()


def replay(recording: str, fmt: str, timestamps: bool, capsys: pytest.CaptureFixture[str]) -> str:
    argv = ["replay", "--batch", "--format", fmt, str(GOLDEN / f"{recording}.jsonl")]
    code = main(argv + (["--timestamps"] if timestamps else []))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out


@pytest.mark.parametrize("timestamps", [False, True])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("recording", RECORDINGS)
def test_replayed_recordings_print_what_they_printed_before(
    recording: str, fmt: str, timestamps: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = (GOLDEN / _name(recording, fmt, timestamps)).read_text()
    assert replay(recording, fmt, timestamps, capsys) == expected


def _write_golden(folder: Path) -> None:
    """Write every expected output with the code imported now (run before changing the printers)."""

    buffer = io.StringIO()

    class Capture:  # what pytest's capsys gives the replay helper
        def readouterr(self) -> tuple[str, str]:
            return buffer.getvalue(), ""

    for case in CASES:
        for fmt in FORMATS:
            for ts in (False, True):
                (folder / _name(case, fmt, ts)).write_text(print_case(case, fmt, ts))
    real = sys.stdout
    for recording in RECORDINGS:
        for fmt in FORMATS:
            for ts in (False, True):
                buffer.seek(0)
                buffer.truncate()
                sys.stdout = buffer
                try:
                    text = replay(recording, fmt, ts, Capture())  # type: ignore[arg-type]
                finally:
                    sys.stdout = real
                (folder / _name(recording, fmt, ts)).write_text(text)


if __name__ == "__main__":
    _write_golden(Path(sys.argv[1]))
