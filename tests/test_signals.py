"""Every way out restores the PMU: killed real pmutop processes over a sysroot of plain files."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.processes import wait_for_output
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers, read_msr

pytestmark = pytest.mark.integration  # starts processes, terminals or servers

WATCHDOG = "proc/sys/kernel/nmi_watchdog"
ORIGINAL = idle_pmu_registers() | {0x38F: 0x3_0000_0001, 0x38D: 0}


def start(root: Path, *extra: str) -> subprocess.Popen[str]:
    def child_setup() -> None:  # a test runner may have SIGINT ignored; pmutop must see it as a user would
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pmutop",
            "--sysroot",
            str(root),
            "--batch",
            "--interval",
            "0.05",
            "--format",
            "json",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=child_setup,
    )


def assert_restored(root: Path, cpus: list[int]) -> None:
    assert (root / WATCHDOG).read_text().strip() == "1"
    for cpu in cpus:
        for address in (0x186, 0x187, 0x188, 0x189, 0x38D, 0x38F, 0x309, 0x30A, 0x30B):
            assert read_msr(root, cpu, address) == ORIGINAL[address], f"cpu {cpu} {address:#x}"


@pytest.mark.parametrize(
    ("sig", "code", "message"),
    [(signal.SIGINT, 130, ""), (signal.SIGTERM, 143, "stopped by SIGTERM"), (signal.SIGHUP, 129, "stopped by SIGHUP")],
)
def test_signal_restores_registers_and_watchdog(tmp_path: Path, sig: int, code: int, message: str) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=ORIGINAL, settings={WATCHDOG: "1"})
    proc = start(tmp_path)
    first = wait_for_output(proc)
    assert '"cpu":0' in first
    # While running: our programming is in place and the watchdog is paused.
    assert read_msr(tmp_path, 0, 0x186) == 0x434F2E
    assert read_msr(tmp_path, 1, 0x38F) == 0x7_0000_000F
    assert (tmp_path / WATCHDOG).read_text().strip() == "0"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == code
    assert "Traceback" not in err
    if message:
        assert err.splitlines()[-1] == f"pmutop: {message}"
    assert_restored(tmp_path, [0, 1])


def test_a_cpu_whose_reads_fail_is_dropped_the_others_go_on_and_all_are_restored(tmp_path: Path) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=ORIGINAL, settings={WATCHDOG: "1"})
    proc = start(tmp_path, "--count", "30")
    first = wait_for_output(proc)
    # cpu 1's reads start failing mid-run (like a CPU going offline); writes to it still work.
    os.truncate(tmp_path / "dev/cpu/1/msr", 0)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 1, err
    assert "Traceback" not in err
    assert "pmutop: warning: cpu 1 dropped: cpu 1: read of" in err and "no such register" in err
    assert err.splitlines()[-1] == "pmutop: cpu 1 failed during the run (see above)"
    # cpu 0 went on to the end: every one of its 30 intervals was printed.
    assert sum('"cpu":0,' in line for line in [first, *out.splitlines()]) == 30
    assert (tmp_path / WATCHDOG).read_text().strip() == "1"
    for cpu in (0, 1):  # restore did not give up on cpu 1: its writes work although its reads do not
        for address in (0x186, 0x38D, 0x38F):
            assert read_msr(tmp_path, cpu, address) == ORIGINAL[address], (cpu, hex(address))
    assert not list((tmp_path / "run/pmutop").glob("*.json"))


def test_normal_end_restores(tmp_path: Path) -> None:
    build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES, msrs=ORIGINAL, settings={WATCHDOG: "1"})
    proc = start(tmp_path, "--count", "3")
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert len(out.splitlines()) == 3
    assert_restored(tmp_path, [0])
