"""Everything pmutop reads or writes for hardware facts, over a sysroot directory of plain files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers.cpuid_dumps import load_shared_dump
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers, read_msr

from pmutop.app.main import main

WATCHDOG = "proc/sys/kernel/nmi_watchdog"


def info_json(capsys: pytest.CaptureFixture[str], root: Path) -> dict:
    assert main(["info", "--sysroot", str(root), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_info_on_a_transcribed_skylake_x(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers(), settings={WATCHDOG: "1"})
    f = info_json(capsys, tmp_path)
    assert (f["vendor"], f["family"], f["model"], f["stepping"]) == ("GenuineIntel", 6, 0x55, 4)
    assert "Skylake" in f["microarchitecture"]
    assert (f["version"], f["gp_counters"], f["gp_width"], f["fixed_counters"], f["fixed_width"]) == (4, 4, 48, 3, 48)
    assert f["online_cpus"] == "0-1" and f["nmi_watchdog"] == 1 and f["perf_event_paranoid"] == 2
    assert f["msr"] == {"present": True, "writable": True, "problem": None}
    assert f["counters_in_use"] == {"checked": True, "busy": []}
    assert f["rdpmc_probe"]["ran"] is False  # never executed for another machine's CPUs
    v = f["verdict"]
    assert v["backend"] == "msr" and v["read_method"] == "msr"
    assert any("NMI watchdog" in r for r in v["reasons"])


def test_info_text_names_the_in_use_register(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    regs = idle_pmu_registers() | {0x187: 0x43412E}
    build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES, msrs=regs)
    assert main(["info", "--sysroot", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "cpu 0: IA32_PERFEVTSEL1 in use (0x43412e: enabled, event 0x2e umask 0x41)" in out
    assert "no backend can run here" in out and "--force" in out


def test_info_without_msr_device_says_how_to_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES)
    f = info_json(capsys, tmp_path)
    assert f["verdict"]["backend"] is None
    assert any("msr" in r and "does not exist" in r for r in f["verdict"]["reasons"])


def test_info_falls_back_to_proc_cpuinfo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0\n")
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\nmodel\t\t: 143\n"
        "model name\t: Intel(R) Xeon(R) Platinum 8480+\nstepping\t: 8\nflags\t\t: fpu hypervisor arch_perfmon\n\n"
    )
    f = info_json(capsys, tmp_path)
    assert (f["vendor"], f["model"], f["hypervisor"]) == ("GenuineIntel", 143, True)
    assert f["microarchitecture"] == "Sapphire Rapids"
    assert "no dev/cpu/0/cpuid under sysroot" in f["cpuid_error"]
    assert f["verdict"]["backend"] is None


def _dump_sysroot(tmp_path: Path, fragment: str) -> tuple[Path, list[int]]:
    dump = load_shared_dump(fragment)
    if dump is None:
        pytest.skip("../shared/cpuid is not available")
    cpus = sorted(dump)
    build_sysroot(tmp_path, cpus, dump, msrs=idle_pmu_registers(gp=8, fixed=4))
    return tmp_path, cpus


def test_info_on_the_real_alder_lake_dump_groups_p_and_e_cores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root, _cpus = _dump_sysroot(tmp_path, "AlderLake")
    f = info_json(capsys, root)
    assert f["online_cpus"] == "0-23" and f["hybrid"] is True
    groups = [(g["cpus"], g["core_type"], g["gp_counters"], g["fixed_counters"]) for g in f["cpu_groups"]]
    assert groups == [("0-15", "P", 6, 3), ("16-23", "E", 6, 3)]
    assert f["cpu_groups"][0]["notes"] and not f["cpu_groups"][1]["notes"]


def test_info_on_the_real_zen4_dump_explains_why_not(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, _ = _dump_sysroot(tmp_path, "Raphael")
    f = info_json(capsys, root)
    assert f["vendor"] == "AuthenticAMD" and f["version"] == 0 and "Zen 4" in f["microarchitecture"]
    assert f["verdict"]["backend"] is None
    assert any("AuthenticAMD" in r for r in f["verdict"]["reasons"])


def test_batch_run_programs_the_files_and_restores_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    regs = idle_pmu_registers() | {0x38F: 0}
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=regs, settings={WATCHDOG: "1"})
    before = {cpu: (tmp_path / f"dev/cpu/{cpu}/msr").read_bytes() for cpu in (0, 1)}
    code = main(["--sysroot", str(tmp_path), "--batch", "--count", "2", "--interval", "0.05", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 4 and all(r["mode"] == "msr" for r in records)
    # Static files: no counter moves, so there is nothing to derive and nothing is invented.
    assert all(r["instructions"] == 0 and r["ipc"] is None and r["util"] is None for r in records)
    assert "NMI watchdog paused" in err
    assert (tmp_path / WATCHDOG).read_text().strip() == "1"
    for cpu in (0, 1):
        # Every register is back; only the status-reset register (write-only on hardware) shows our clear.
        for address in (0x186, 0x187, 0x188, 0x189, 0x38D, 0x38F, 0x309, 0x30A, 0x30B):
            assert read_msr(tmp_path, cpu, address) == regs[address], hex(address)
        # GP counters go back through the full-width alias (PERF_CAPABILITIES[13] is set here);
        # a plain file does not alias 0x4C1+i onto 0xC1+i the way the CPU does.
        for i in range(4):
            assert read_msr(tmp_path, cpu, 0x4C1 + i) == regs[0xC1 + i]
        assert len((tmp_path / f"dev/cpu/{cpu}/msr").read_bytes()) == len(before[cpu])


def test_busy_pmu_on_a_sysroot_exits_3_with_files_untouched(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [0, 1, 2], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers(), settings={WATCHDOG: "1"})
    from helpers.sysroot_builder import write_msrs

    write_msrs(tmp_path / "dev/cpu/2/msr", {0x38D: 0x3})  # fixed counter 0 enabled by someone else
    before = {cpu: (tmp_path / f"dev/cpu/{cpu}/msr").read_bytes() for cpu in (0, 1, 2)}
    code = main(["--sysroot", str(tmp_path), "--batch", "--count", "1"])
    out, err = capsys.readouterr()
    assert code == 3 and out == ""
    assert err == (
        "pmutop: cpu 2: IA32_FIXED_CTR_CTRL is in use (0x3: fixed counter 0 enabled); another tool or perf owns "
        "the counters: stop it, use --backend perf, or pass --force to take over\n"
    )
    assert {cpu: (tmp_path / f"dev/cpu/{cpu}/msr").read_bytes() for cpu in (0, 1, 2)} == before
    assert (tmp_path / WATCHDOG).read_text().strip() == "1"


def test_explicit_rdpmc_on_a_sysroot_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    code = main(["--sysroot", str(tmp_path), "--read", "rdpmc", "--batch", "--count", "1"])
    assert code == 2
    assert "--read rdpmc: rdpmc cannot be used for the CPUs of sysroot" in capsys.readouterr().err


# --- online CPUs whose CPUID cannot be read -------------------------------------------------------------


def _lines(text: str, word: str) -> list[str]:
    return [ln for ln in text.splitlines() if word in ln]


def test_info_reports_online_cpus_without_cpuid_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [0, 1, 2, 3], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-7\n")  # CPUs 4-7 have no dev/cpu/N files
    problem = f"cpu 4-7: no dev/cpu/N/cpuid under sysroot {tmp_path} (CPUID of another machine cannot be executed here)"
    assert main(["info", "--sysroot", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert [ln for ln in out.splitlines() if ln.startswith("CPUID  ")] == [f"CPUID          {problem}"]
    assert "               CPUID of cpu 4-7 cannot be read: pass --cores 0-3" in out.splitlines()
    assert "PMU cpu 0-3    version 4, 4 general" in out
    f = info_json(capsys, tmp_path)
    assert f["online_cpus"] == "0-7" and f["vendor"] == "GenuineIntel"
    assert f["cpuid_problems"] == [problem]
    assert [g["cpus"] for g in f["cpu_groups"]] == ["0-3"]
    assert f["counters_in_use"] == {"checked": True, "busy": []}
    assert f["verdict"]["reasons"][-1] == "CPUID of cpu 4-7 cannot be read: pass --cores 0-3"


def test_info_when_the_first_online_cpu_has_no_cpuid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [2, 3], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-3\n")
    f = info_json(capsys, tmp_path)
    assert (f["vendor"], f["model"], f["cpuid_source"]) == ("GenuineIntel", 0x55, "cpuid device")
    assert f["cpuid_problems"] == [
        f"cpu 0-1: no dev/cpu/N/cpuid under sysroot {tmp_path} (CPUID of another machine cannot be executed here)"
    ]
    assert [g["cpus"] for g in f["cpu_groups"]] == ["2-3"]


def test_an_empty_cpuid_file_is_named_not_taken_for_a_vendor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    empty = tmp_path / "dev/cpu/1/cpuid"
    empty.write_bytes(b"")
    assert main(["info", "--sysroot", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "this CPU is  " not in out
    assert _lines(out, "CPUID is") == [f"CPUID          cpu 1: CPUID is empty in {empty} (leaf 0 reads as zeros)"]
    assert _lines(out, "PMU cpu") == ["PMU cpu 0      version 4, 4 general × 48 bit, 3 fixed × 48 bit (mask 0x7)"]


def test_all_cpuid_files_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    for cpu in (0, 1):
        (tmp_path / f"dev/cpu/{cpu}/cpuid").write_bytes(b"\0" * 64)  # zeros read as well as nothing
    assert main(["info", "--sysroot", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert err == "" and "this CPU is" not in out
    first = f"cpu 0: CPUID is empty in {tmp_path / 'dev/cpu/0/cpuid'} (leaf 0 reads as zeros)"
    assert _lines(out, "CPU   ") == [f"CPU            unknown ({first})"]
    assert "Verdict        no backend can run here" in out
    assert f"CPUID could not be read: {first}" in out


def test_a_run_on_an_empty_cpuid_file_fails_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES, msrs=idle_pmu_registers())
    (tmp_path / "dev/cpu/0/cpuid").write_bytes(b"")
    code = main(["--sysroot", str(tmp_path), "--batch", "--count", "1"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err == f"pmutop: cpu 0: CPUID is empty in {tmp_path / 'dev/cpu/0/cpuid'} (leaf 0 reads as zeros)\n"


def test_events_lists_the_cpus_it_can_read_and_names_the_others(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-3\n")
    (tmp_path / "dev/cpu/1/cpuid").write_bytes(b"")
    assert main(["events", "--sysroot", str(tmp_path), "--search", "branches"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[0] == "CPUs 0: GenuineIntel family 0x6 model 0x55 stepping 4, Skylake-SP/X"
    assert _lines(out, "note: cpu") == [
        f"note: cpu 1: CPUID is empty in {tmp_path / 'dev/cpu/1/cpuid'} (leaf 0 reads as zeros); not listed",
        f"note: cpu 2-3: no dev/cpu/N/cpuid under sysroot {tmp_path} (CPUID of another machine cannot be executed "
        "here); not listed",
    ]
