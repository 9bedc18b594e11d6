"""issue 21: `pmutop info` says which per-task mode this machine gives (exact, estimated, none) and why, and
whether cgroup counters can open (cgroup v2 found, and where)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers

from pmutop.app.commands.info import per_task_facts
from pmutop.app.main import main

PERF_OK = {"checked": True, "hardware_ok": True, "software_ok": True}
PERF_SOFTWARE = {"checked": True, "hardware_ok": False, "software_ok": True, "hardware_problem": "no PMU"}
UNIFIED = "sys/fs/cgroup/unified"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def facts(**kw: object) -> dict:
    base: dict = {"host": True, "backend": "perf", "perf": PERF_OK, "root": True, "paranoid": 2, "cgroup2": UNIFIED}
    return per_task_facts(**(base | kw))


def test_perf_backend_as_root_is_exact_with_cgroups() -> None:
    f = facts()
    assert f["mode"] == "exact" and "per-task and per-cgroup counters" in f["why"]
    assert f["cgroups"] == {
        "possible": True,
        "v2_root": "/sys/fs/cgroup/unified",
        "why": "cgroup v2 at /sys/fs/cgroup/unified",
    }


def test_a_vm_without_pmu_is_exact_for_the_software_events() -> None:
    f = facts(perf=PERF_SOFTWARE)
    assert f["mode"] == "exact" and "software events only" in f["why"]


def test_msr_backend_is_an_estimate_and_says_how_to_get_exact_numbers() -> None:
    f = facts(backend="msr")
    assert f["mode"] == "estimated" and f["why"].endswith("(exact numbers: --backend perf)")
    assert f["cgroups"]["possible"] is True


def test_as_a_user_cgroup_counters_need_paranoid_0_and_paranoid_3_forbids_all() -> None:
    user = facts(root=False, paranoid=2)
    assert user["mode"] == "exact" and "your own processes only" in user["why"]
    assert user["cgroups"]["possible"] is False and "perf_event_paranoid=2" in user["cgroups"]["why"]
    assert facts(root=False, paranoid=0)["cgroups"]["possible"] is True
    locked = facts(root=False, paranoid=3)
    assert locked["mode"] == "none" and "perf_event_paranoid=3" in locked["why"]
    assert locked["cgroups"]["possible"] is False


def test_no_backend_no_perf_or_no_cgroup2_say_why() -> None:
    assert facts(backend=None)["mode"] == "none"
    broken = facts(perf={"checked": True, "software_ok": False, "software_problem": "seccomp says no"})
    assert broken["mode"] == "none" and "seccomp says no" in broken["why"]
    assert facts(cgroup2=None)["cgroups"] == {
        "possible": False,
        "v2_root": None,
        "why": "no cgroup v2 hierarchy at /sys/fs/cgroup(/unified)",
    }


def test_info_with_a_sysroot_counts_nothing_and_says_where_cgroup2_is(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    (tmp_path / UNIFIED).mkdir(parents=True)
    (tmp_path / UNIFIED / "cgroup.controllers").write_text("\n")
    code, out, err = run(capsys, "info", "--sysroot", str(tmp_path), "--json")
    assert code == 0, err
    per_task = json.loads(out)["per_task"]
    assert per_task["mode"] == "none" and per_task["why"].startswith("--sysroot")
    assert per_task["cgroups"]["possible"] is False and per_task["cgroups"]["v2_root"] == "/sys/fs/cgroup/unified"
    code, out, err = run(capsys, "info", "--sysroot", str(tmp_path))
    assert "Per-task       none: --sysroot: per-task counters count this host's processes only" in out


def test_info_on_this_machine_agrees_with_its_own_facts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "info", "--json")
    assert code == 0, err
    f = json.loads(out)
    per_task, backend = f["per_task"], f["verdict"]["backend"]
    expected = {"perf": "exact", "msr": "estimated", None: "none"}[backend]
    if f["perf"].get("checked") and not f["perf"].get("software_ok"):
        expected = "none"
    assert per_task["mode"] == expected
    unified = Path("/sys/fs/cgroup/unified/cgroup.controllers").exists()
    pure = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    assert per_task["cgroups"]["v2_root"] == (
        "/sys/fs/cgroup" if pure else "/sys/fs/cgroup/unified" if unified else None
    )
    if os.geteuid() == 0 and (pure or unified) and expected != "none":
        assert per_task["cgroups"]["possible"] is True
    code, text, _ = run(capsys, "info")
    assert f"Per-task       {expected}: " in text and "Cgroups        " in text


def test_info_demo_says_simulated(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "info", "--demo", "--json")
    assert code == 0, err
    assert json.loads(out)["per_task"]["mode"] == "simulated"
