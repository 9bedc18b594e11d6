"""Small things a new user noticed: cut names say so, badges say what is true, ignored options are named."""

from __future__ import annotations

import subprocess
import sys

from pmutop.runinfo import RunInfo
from pmutop.sources.tasks import TopTask
from pmutop.tui.app import banner_text
from pmutop.tui.columns import render_cell
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


def test_read_msr_with_the_perf_backend_is_named_as_ignored() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "pmutop", "--backend", "perf", "--read", "msr", "--batch", "--count", "1",
         "--interval", "0.05", "--cores", "0"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert run.stderr.count("--read msr is ignored: the perf backend reads its counters with read()") == 1
