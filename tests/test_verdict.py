"""The automatic backend choice (`pmutop info` states it; `--backend auto` follows it)."""

from __future__ import annotations

from typing import Any

from pmutop.app.commands.info import verdict

INTEL_OK: dict[str, Any] = {
    "sysroot": "/",
    "vendor": "GenuineIntel",
    "version": 4,
    "hypervisor": False,
    "root": True,
    "msr": {"present": True, "writable": True, "problem": None},
    "counters_in_use": {"checked": True, "busy": []},
    "rdpmc_sysfs": {"cpu": "2"},
    "rdpmc_probe": {"ran": True, "ok": True, "detail": "rdpmc works"},
    "nmi_watchdog": 0,
    "perf": {"checked": True, "hardware_ok": True, "hardware_problem": None, "software_ok": True},
}


def test_msr_when_root_writable_present_and_free() -> None:
    v = verdict(INTEL_OK)
    assert (v["backend"], v["events"], v["read_method"]) == ("msr", "hardware", "rdpmc")


def test_perf_when_not_root() -> None:
    f = INTEL_OK | {"root": False, "msr": {"present": True, "writable": False, "problem": "needs root"}}
    v = verdict(f)
    assert (v["backend"], v["events"]) == ("perf", "hardware")
    assert v["reasons"][0] == "msr backend unavailable: msr device: needs root"


def test_perf_when_the_counters_are_in_use() -> None:
    f = INTEL_OK | {"counters_in_use": {"checked": True, "busy": ["cpu 3: IA32_PERFEVTSEL0 in use (0x43412e)"]}}
    v = verdict(f)
    assert v["backend"] == "perf" and "counters in use: cpu 3" in v["reasons"][0]


def test_software_events_on_a_vm_without_pmu() -> None:
    f = INTEL_OK | {
        "version": 0,
        "hypervisor": True,
        "perf": {
            "checked": True,
            "hardware_ok": False,
            "hardware_problem": "cycles on cpu 0: hidden PMU",
            "software_ok": True,
        },
    }
    v = verdict(f)
    assert (v["backend"], v["events"], v["read_method"]) == ("perf", "software", "read()")
    assert any("IPC and cache columns are unavailable" in r for r in v["reasons"])
    assert "pmu=on" in v["fixes"][0]


def test_nothing_runs_and_nothing_falls_back_to_simulation() -> None:
    f = INTEL_OK | {
        "version": 0,
        "perf": {
            "checked": True,
            "hardware_ok": False,
            "hardware_problem": "x",
            "software_ok": False,
            "software_problem": "context-switches on cpu 0: permission denied",
        },
    }
    v = verdict(f)
    assert v["backend"] is None
    assert v["reasons"][-1] == "perf: context-switches on cpu 0: permission denied"
    assert any("--demo" in fix for fix in v["fixes"])


def test_a_sysroot_never_picks_perf() -> None:
    f = INTEL_OK | {"sysroot": "/snap", "version": 0, "perf": {"checked": False, "detail": "this host only"}}
    assert verdict(f)["backend"] is None


def test_cpus_without_readable_cpuid_are_named_with_the_cores_that_work() -> None:
    f = INTEL_OK | {"cpuid_unreadable_cpus": "4-7", "cpuid_readable_cpus": "0-3"}
    v = verdict(f)
    assert v["backend"] == "msr"
    assert v["reasons"][-1] == "CPUID of cpu 4-7 cannot be read: pass --cores 0-3"
    perf = verdict(f | {"root": False, "msr": {"present": True, "writable": False, "problem": "needs root"}})
    assert perf["backend"] == "perf" and perf["reasons"][-1] == "CPUID of cpu 4-7 cannot be read: pass --cores 0-3"
    assert verdict(INTEL_OK | {"cpuid_unreadable_cpus": "", "cpuid_readable_cpus": "0-7"})["reasons"] == []
