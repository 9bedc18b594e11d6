"""Small things a new user noticed: cut names say so, badges say what is true, ignored options are named."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pmutop.core.run_description import RunInfo
from pmutop.probes.tasks import TopTask
from pmutop.tui.columns import render_cell
from pmutop.tui.header import banner_text
from pmutop.tui.model import CoreState, ViewModel


def info(**kw: object) -> RunInfo:
    base = dict(
        hostname="h", cpu_model="m", uarch=None, pmu="PMU", backend="perf", read_method="read()",
        simulated=False, hypervisor=True, cpus=[0],
    )  # fmt: skip
    return RunInfo(**(base | kw))  # type: ignore[arg-type]


def test_a_cut_task_name_ends_in_an_ellipsis() -> None:
    core = CoreState(0, task=TopTask("a-very-long-process-name", 4242, 1.0))
    cell = render_cell("task", core, ViewModel([0]), 14).plain
    assert cell == "a-very-l… 4242"
    short = CoreState(0, task=TopTask("bash", 7, 1.0))
    assert render_cell("task", short, ViewModel([0]), 14).plain == "bash 7".ljust(14)


def test_a_vm_without_counters_is_not_said_to_virtualise_them() -> None:
    none = banner_text(info(hardware_problem="no PMU"), ViewModel([0]), False).plain
    assert "VM: no hardware counters" in none and "virtualised" not in none
    passed = banner_text(info(), ViewModel([0]), False).plain
    assert "VM: counters are virtualised" in passed


@pytest.mark.integration
def test_read_msr_with_the_perf_backend_is_named_as_ignored() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pmutop", "--backend", "perf", "--read", "msr", "--batch", "--count", "1",
         "--interval", "0.05", "--cores", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("--read msr is ignored: the perf backend reads its counters with read()") == 1


@pytest.mark.integration
def test_info_does_not_advise_the_msr_module_on_amd(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import struct

    from helpers.sysroot_builder import build_sysroot

    vendor = struct.unpack("<3I", b"AuthenticAMD")  # EBX, EDX, ECX
    leaves = {(0x0, 0): (0x10, vendor[0], vendor[2], vendor[1]), (0x1, 0): (0x00A60F12, 0, 0, 0)}
    build_sysroot(tmp_path, [0, 1], leaves)
    run = subprocess.run(
        [sys.executable, "-m", "pmutop", "info", "--sysroot", str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert "modprobe msr" not in run.stdout
    assert "family 0x19 model 0x61" in run.stdout


def test_a_run_without_cpu_wide_counters_says_why_and_how_to_allow_them() -> None:
    why = (
        "perf_event_paranoid=2 allows CPU-wide events only to root or CAP_PERFMON: run as root, or "
        "`sudo sysctl kernel.perf_event_paranoid=0` (CPU-wide events)"
    )
    wide = banner_text(info(cpu_wide_problem=why), ViewModel([0]), False, width=400).plain
    assert f"no CPU-wide counters: {why}" in wide
    narrow = banner_text(info(cpu_wide_problem=why), ViewModel([0]), False, width=80).plain
    assert narrow.index("sudo sysctl kernel.perf_event_paranoid=0") < 80 - len("=0")  # readable at 80 columns
    assert "no CPU-wide counters" in narrow
