"""Issue 22, the run's DRAM source (pmutop.app.dram_setup) and the self-test's memory check: --mem-peak, the
simulated source with --demo, a refused open as one line with the run going on, the source closed on every way
out, nothing where this VM has no memory-controller PMU; `pmutop selftest --demo` streams and passes, and a
miscount fails it."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any

import pytest
from helpers.uncore_trees import skx_two_sockets

from pmutop.app import dram_setup
from pmutop.app.commands import run as run_command
from pmutop.app.commands import selftest
from pmutop.app.dram_setup import DramSetup, open_dram
from pmutop.app.main import main
from pmutop.core.sysroot import Sysroot
from pmutop.hw.perf_event import PerfOpenError, read_paranoid
from pmutop.hw.platform import HostPlatform
from pmutop.probes.dram import plan_dram
from pmutop.sim.selftest_workloads import SimWorkloadRunner


def has_uncore_imc() -> bool:
    devices = Path("/sys/bus/event_source/devices")
    return any(p.name.startswith(("uncore_imc", "amd_umc")) for p in devices.iterdir())


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[DramSetup]:
    """Every DramSetup a run opens (the run's own call, wrapped)."""
    setups: list[DramSetup] = []
    real = run_command.open_dram

    def recording(*args: Any, **kwargs: Any) -> DramSetup:
        setup = real(*args, **kwargs)
        setups.append(setup)
        return setup

    monkeypatch.setattr(run_command, "open_dram", recording)
    return setups


def test_demo_run_reads_the_simulated_memory_and_mem_peak_sets_the_peak(
    opened: list[DramSetup], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--demo", "--batch", "--count", "3", "--interval", "0.05", "--format", "json", "--mem-peak", "150"]
    assert main(args) == 0
    (setup,) = opened
    assert setup.source is not None and setup.source.source == "simulated"
    assert setup.sampler is not None and setup.sampler.seq >= 1  # read beside the CPU samples
    latest = setup.sampler.latest()
    assert latest is not None and latest[0].peak_bytes_per_s == 150e9
    assert setup._closed and setup.sampler._thread is None  # stopped and closed at the end
    out, err = capsys.readouterr()
    assert "DRAM" not in out + err  # nothing shown yet: the views come later


def test_without_mem_peak_the_simulated_models_peak(opened: list[DramSetup]) -> None:
    assert main(["--demo", "--batch", "--count", "1", "--interval", "0.05", "--sim-model", "adl"]) == 0
    (setup,) = opened
    assert setup.sampler is not None
    latest = setup.sampler.latest()
    assert latest is not None and latest[0].peak_bytes_per_s == pytest.approx(76.8e9)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("fast", "argument --mem-peak: 'fast' is not a number of GB/s"),
        ("0", "argument --mem-peak: must be a bandwidth in GB/s, > 0 and <= 100000 (got 0)"),
        ("-5", "argument --mem-peak: must be a bandwidth in GB/s, > 0 and <= 100000 (got -5)"),
        ("inf", "argument --mem-peak: must be a bandwidth in GB/s, > 0 and <= 100000 (got inf)"),
    ],
)
def test_bad_mem_peak_is_a_one_line_usage_error(value: str, why: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--demo", "--batch", "--mem-peak", value]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and why in err


def test_serve_takes_mem_peak_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--demo", "--mem-peak", "x"]) == 2
    assert "argument --mem-peak: 'x' is not a number of GB/s" in capsys.readouterr().err


def _refusing(*args: Any, **kwargs: Any) -> int:
    raise PerfOpenError("perf_event_open: Permission denied", errno.EACCES)


def test_a_refused_open_is_one_line_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    skx_two_sockets(tmp_path)
    plan = plan_dram(Sysroot(tmp_path), "GenuineIntel", 6, 0x55)
    monkeypatch.setattr(dram_setup, "plan_dram", lambda *args: plan)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    setup = open_dram(HostPlatform(Sysroot("/")), [0], opener=_refusing)
    paranoid = read_paranoid(Sysroot("/"))
    line = f"DRAM bandwidth: needs root or perf_event_paranoid <= 0 (now {paranoid})"
    assert setup.source is None and setup.refusal == line
    assert setup.why == line.removeprefix("DRAM bandwidth: ")
    assert capsys.readouterr().err == f"pmutop: {line}\n"
    setup.close()


def test_the_run_goes_on_after_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A host run (perf backend, software events on this VM) whose memory counters are refused: one line, the
    run's own output, exit 0."""
    skx_two_sockets(tmp_path)
    plan = plan_dram(Sysroot(tmp_path), "GenuineIntel", 6, 0x55)
    monkeypatch.setattr(dram_setup, "plan_dram", lambda *args: plan)
    monkeypatch.setattr(dram_setup, "perf_event_open", _refusing)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code = main(["--backend", "perf", "--batch", "--count", "1", "--interval", "0.05", "--cores", "0"])
    out, err = capsys.readouterr()
    if code != 0 and "perf" in err and "DRAM" not in err:
        pytest.skip(f"the perf backend cannot run here: {err.strip()}")
    assert code == 0 and out.strip()
    assert [line for line in err.splitlines() if "DRAM" in line] == [
        f"pmutop: DRAM bandwidth: needs root or perf_event_paranoid <= 0 (now {read_paranoid(Sysroot('/'))})"
    ]


def test_on_this_vm_there_is_no_source_and_nothing_is_said(capsys: pytest.CaptureFixture[str]) -> None:
    if has_uncore_imc():
        pytest.skip("this machine has memory-controller PMUs")
    setup = open_dram(HostPlatform(Sysroot("/")), [0])
    assert setup.source is None and setup.refusal is None
    assert "no memory-controller PMU in sysfs" in setup.why or "no memory-controller events for" in setup.why
    assert capsys.readouterr().err == ""
    assert setup.start(object()) is None  # type: ignore[arg-type]  # nothing to sample
    setup.close()


def test_a_sysroot_run_has_no_source(tmp_path: Path) -> None:
    skx_two_sockets(tmp_path)
    setup = open_dram(HostPlatform(Sysroot(tmp_path)), [0])
    assert setup.source is None and "another machine" in setup.why


def test_the_source_is_closed_when_the_run_fails(opened: list[DramSetup], monkeypatch: pytest.MonkeyPatch) -> None:
    from pmutop.core.errors import PmutopError

    def failing(*args: Any) -> int:
        raise PmutopError("the sink broke")

    monkeypatch.setattr(run_command, "_measure", failing)
    assert main(["--demo", "--batch", "--count", "1"]) != 0
    (setup,) = opened
    assert setup._closed


# --- the self-test's memory check ------------------------------------------------------------------------


def test_selftest_demo_streams_and_passes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--demo", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (check,) = [c for c in data["checks"] if c["name"] == "memory"]
    assert check["status"] == "PASS" and "SIMULATED memory controllers" in check["detail"]
    streamed = 8 * int(112.5 * 2**20) // 64 * 64  # 8x the simulated Sapphire Rapids' LLC
    assert check["values"]["expected_read"] == check["values"]["expected_write"] == streamed
    assert abs(check["values"]["read_error"]) < 0.01 and check["values"]["write_bytes"] == streamed
    assert main(["selftest", "--demo"]) == 0
    out = capsys.readouterr().out
    assert "cpu 0   PASS  memory            943,718,400 bytes streamed: read " in out


def test_selftest_memory_check_fails_on_a_miscount(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stream that moves half what it claims: the memory controllers' count is 50% short, which must fail."""
    real = SimWorkloadRunner.stream

    def claims_double(self: SimWorkloadRunner, cpu: int) -> tuple[int, int]:
        read, written = real(self, cpu)
        return 2 * read, 2 * written

    monkeypatch.setattr(SimWorkloadRunner, "stream", claims_double)
    assert main(["selftest", "--demo", "--cores", "0"]) == 1
    out = capsys.readouterr().out
    assert "cpu 0   FAIL  memory" in out and "(-50.0%)" in out


def test_selftest_memory_check_on_this_vm_is_skipped_with_the_reason() -> None:
    """This VM has no core PMU either (the self-test as a whole exits 5 here), so the check is run directly."""
    if has_uncore_imc():
        pytest.skip("this machine has memory-controller PMUs")

    class NeverRuns:
        def prepare_stream(self, cpu: int, nbytes: int) -> None:
            raise AssertionError("nothing may be streamed without a source")

    check = selftest.memory_check(HostPlatform(Sysroot("/")), NeverRuns(), 0)  # type: ignore[arg-type]
    assert check.status == "SKIP" and check.name == "memory"
    assert check.detail.startswith("no DRAM bandwidth source: ")
    assert "no memory-controller PMU in sysfs" in check.detail or "no memory-controller events for" in check.detail
    assert check.line().startswith("cpu 0   SKIP  memory            no DRAM bandwidth source: ")
