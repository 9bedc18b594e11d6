"""Issue 20: `pmutop events` and `pmutop info` take --demo (the simulated machine, labelled SIMULATED), and on an
AMD machine `events` lists the AMD events pmutop knows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cpuid_dumps import load_shared_dump
from helpers.sysroot_builder import build_sysroot

from pmutop.app.main import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_events_demo_lists_the_simulated_cpus_events(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "events", "--demo")
    assert code == 0, err
    assert out.splitlines()[0].startswith("SIMULATED")
    assert "pmutop simulated CPU" in out or "Sapphire Rapids" in out
    assert "instructions" in out and "none usable here" not in out.split("Software events")[0]


def test_events_demo_json_says_simulated_and_follows_the_model(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "events", "--demo", "--sim-model", "adl", "--sim-cpus", "4", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["simulated"] is True
    assert doc["cpu"]["vendor"] == "GenuineIntel" and doc["cpu"]["model"] == 0x97
    assert [g["core_type"] for g in doc["cpu_groups"]] == ["P", "E"]


def test_events_demo_with_a_sysroot_is_one_line_and_status_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "events", "--demo", "--sysroot", "/tmp")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--sysroot" in err


def test_info_demo_describes_the_simulated_machine(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "info", "--demo")
    assert code == 0, err
    assert out.splitlines()[0].split(None, 1)[1].startswith("SIMULATED")
    assert "PERF_METRICS" in out  # spr: top-down by PERF_METRICS on the msr backend
    assert "pmutop would use the msr backend" in out


def test_info_demo_json_follows_the_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "info", "--demo", "--sim-version", "4", "--sim-gp", "2", "--json")
    assert code == 0, err
    f = json.loads(out)
    assert f["simulated"] is True and f["version"] == 4 and f["gp_counters"] == 2 and f["fixed_counters"] == 3
    assert all(not g["topdown"]["available"] for g in f["cpu_groups"])  # no PERF_METRICS before v5
    assert f["verdict"]["backend"] == "msr"
    assert all(s["detail"].startswith("SIMULATED") for s in f["power_sources"])


def test_info_demo_bad_shape_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "info", "--demo", "--sim-version", "4", "--sim-fixed", "4")
    assert code == 2 and out == "" and err.count("\n") == 1


@pytest.fixture
def amd_root(tmp_path: Path) -> Path:
    dump = load_shared_dump("Raphael")
    if dump is None:
        pytest.skip("../shared/cpuid is not available")
    build_sysroot(tmp_path, sorted(dump), dump)
    return tmp_path


def test_events_on_amd_lists_the_generic_and_zen_top_down_events(
    capsys: pytest.CaptureFixture[str], amd_root: Path
) -> None:
    code, out, err = run(capsys, "events", "--sysroot", str(amd_root))
    assert code == 0, err
    generic = out.split("Generic events")[1].split("\n\n")[0]
    assert "none usable" not in generic
    for name, amd_event in (("instructions", "0xc0"), ("cycles", "0x76"), ("branch-misses", "0xc3")):
        line = next(x for x in generic.splitlines() if x.split() and x.split()[0] == name)
        assert "perf" in line and amd_event in line
    zen = out.split("AMD events")[1]
    for name in ("ls_not_halted_cyc", "ex_ret_ops", "de_src_op_disp.all", "de_no_dispatch_per_slot.backend_stalls"):
        assert name in zen


def test_events_on_amd_json(capsys: pytest.CaptureFixture[str], amd_root: Path) -> None:
    code, out, err = run(capsys, "events", "--sysroot", str(amd_root), "--json")
    assert code == 0, err
    events = {e["name"]: e for e in json.loads(out)["events"]}
    assert events["instructions"]["kind"] == "generic" and events["instructions"]["usable"]
    assert events["ref-cycles"]["usable"]  # Zen 4: Linux maps ref-cycles to PMCx120
    assert events["ex_ret_ops"]["kind"] == "amd" and events["ex_ret_ops"]["event"] == 0xC1
    assert events["de_no_dispatch_per_slot.backend_stalls"]["event"] == 0x1A0


def test_events_on_amd_search_finds_zen_events(capsys: pytest.CaptureFixture[str], amd_root: Path) -> None:
    code, out, err = run(capsys, "events", "--sysroot", str(amd_root), "--search", "dispatch")
    assert code == 0, err
    assert "de_no_dispatch_per_slot.no_ops_from_frontend" in out


def test_events_marks_generic_events_unusable_where_perf_cannot_count_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, amd_root: Path
) -> None:
    # A VM without a virtual PMU: perf_event_open refuses every hardware event, as `info` reports.
    why = "cycles on cpu 0: the kernel has no such event here"
    monkeypatch.setattr("pmutop.app.commands.events.hardware_events_problem", lambda platform: why)
    code, out, err = run(capsys, "events", "--sysroot", str(amd_root), "--json")
    assert code == 0, err
    events = {e["name"]: e for e in json.loads(out)["events"]}
    for name in ("instructions", "cycles", "ref-cycles", "llc-misses", "branch-misses"):
        assert not events[name]["usable"] and why in events[name]["why"], name
    assert events["context-switches"]["usable"]
    code, out, err = run(capsys, "events", "--sysroot", str(amd_root))
    assert code == 0, err
    generic = out.split("Generic events")[1].split("\n\n")[0]
    assert f"none usable here: perf has no hardware events here ({why})" in generic


def test_events_asks_perf_about_this_hosts_hardware_events_only(
    monkeypatch: pytest.MonkeyPatch, amd_root: Path
) -> None:
    from pmutop.app.commands.events import hardware_events_problem
    from pmutop.core.sysroot import Sysroot
    from pmutop.hw.platform import HostPlatform

    monkeypatch.setattr("pmutop.backends.perf.probe_hardware_events", lambda cpu: f"refused on cpu {cpu}")
    assert hardware_events_problem(HostPlatform(Sysroot("/"))) == "refused on cpu 0"
    assert hardware_events_problem(HostPlatform(Sysroot(str(amd_root)))) is None


def test_info_demo_says_the_simulated_cgroups_can_be_counted(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "info", "--demo")
    assert code == 0, err
    line = next(x for x in out.splitlines() if x.startswith("Cgroups"))
    assert line.split(None, 1)[1].startswith("yes: ") and "--cgroups" in line and "to come" not in line
    code, out, err = run(capsys, "info", "--demo", "--json")
    assert json.loads(out)["per_task"]["cgroups"]["possible"] is True
