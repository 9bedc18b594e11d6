"""`pmutop selftest`: PASS/FAIL lines and exit codes on the simulated PMU, the one line and exit status 5 where
there is no PMU, and the shim's C workloads themselves."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers, read_msr

from pmutop.app.commands import selftest
from pmutop.app.main import main
from pmutop.core.clock import ManualClock
from pmutop.core.errors import EXIT_NO_PMU
from pmutop.core.sysroot import Sysroot
from pmutop.hw import shim, workloads
from pmutop.pmu import registers
from pmutop.sim import selftest_workloads
from pmutop.sim.model import SimConfig
from pmutop.sim.platform import SimPlatform

CHECKS = ("instructions", "ref-cycles", "cycles", "llc-misses", "branch-misses", "topdown-backend", "topdown-frontend")


def lines_of(text: str, cpu: int) -> dict[str, str]:
    """check name -> its status for one cpu, from the per-check lines."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if line.startswith("cpu ") and int(parts[1]) == cpu:
            out[parts[3]] = parts[2]
    return out


def test_sim_selftest_passes_every_check(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--demo", "--cores", "0,1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("pmutop selftest: SIMULATED PMU, cpu 0-1;")
    assert lines_of(out, 0) == dict.fromkeys((*CHECKS, "memory"), "PASS")  # memory: once, on the first cpu
    assert lines_of(out, 1) == dict.fromkeys(CHECKS, "PASS")
    # The measured numbers are shown: the loop's 2 x 50M instructions, found exactly by the model.
    assert "100,000,000 counted" in out and "expected 100,000,000" in out
    assert out.splitlines()[-1] == "selftest: 15 passed, 0 failed, 0 skipped (SIMULATED PMU: synthetic numbers)"


def test_sim_selftest_tests_every_simulated_cpu_each_counting_its_own_numbers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The same simulated machine as the live --demo (8 CPUs), every CPU of it unless --cores says otherwise.
    assert main(["selftest", "--demo", "--json"]) == 0
    checks = json.loads(capsys.readouterr().out)["checks"]
    assert sorted({c["cpu"] for c in checks}) == list(range(8))
    assert all(c["status"] == "PASS" for c in checks)
    for name in ("cycles", "llc-misses", "branch-misses", "topdown-backend"):
        values = [json.dumps(c["values"]) for c in checks if c["name"] == name]
        assert len(set(values)) == len(values), name  # each core its own numbers, as real cores
    assert main(["selftest", "--demo", "--sim-cpus", "3", "--json"]) == 0
    assert sorted({c["cpu"] for c in json.loads(capsys.readouterr().out)["checks"]}) == [0, 1, 2]
    assert main(["selftest", "--demo", "--cores", "5", "--json"]) == 0
    assert {c["cpu"] for c in json.loads(capsys.readouterr().out)["checks"]} == {5}


def test_sim_selftest_skips_topdown_where_it_is_not_measured(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--demo", "--sim-model", "skx", "--cores", "0"]) == 0
    out = capsys.readouterr().out
    statuses = lines_of(out, 0)
    assert statuses["topdown-backend"] == statuses["topdown-frontend"] == "SKIP"
    assert "top-down is not measured on this cpu" in out
    assert out.splitlines()[-1] == "selftest: 6 passed, 0 failed, 2 skipped (SIMULATED PMU: synthetic numbers)"


def test_undercounting_model_fails_the_instruction_check(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A broken PMU model: the loop's instructions counted at 1.8 per iteration instead of 2 (-10%).
    broken = dataclasses.replace(selftest_workloads.WORKLOADS["instructions"], instructions=1.8)
    monkeypatch.setitem(selftest_workloads.WORKLOADS, "instructions", broken)
    assert main(["selftest", "--demo", "--cores", "0"]) == 1
    out = capsys.readouterr().out
    statuses = lines_of(out, 0)
    assert statuses["instructions"] == "FAIL"
    assert statuses["llc-misses"] == "PASS"
    assert "90,000,000 counted" in out and "-10.000%" in out
    assert out.splitlines()[-1] == "selftest: 7 passed, 1 failed, 0 skipped (SIMULATED PMU: synthetic numbers)"


@pytest.mark.parametrize(
    ("workload", "field", "value", "check"),
    [
        ("branches_predictable", "branch_misses", 0.5, "branch-misses"),  # predictable loop mispredicts
        ("chase", "llc_misses", 0.0, "llc-misses"),  # the chase never misses
        ("jumps", "fe_bound", 0.0, "topdown-frontend"),  # the jump chain is not frontend bound
        ("chase", "fe_bound", 0.9, "topdown-backend"),  # the chase looks frontend, not backend bound
    ],
)
def test_each_broken_behaviour_fails_its_check(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workload: str,
    field: str,
    value: float,
    check: str,
) -> None:
    monkeypatch.setitem(
        selftest_workloads.WORKLOADS,
        workload,
        dataclasses.replace(selftest_workloads.WORKLOADS[workload], **{field: value}),
    )
    assert main(["selftest", "--demo", "--cores", "1"]) == 1
    assert lines_of(capsys.readouterr().out, 1)[check] == "FAIL"


def test_json_output_has_values_and_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--demo", "--cores", "2", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"] == {"PASS": 8, "FAIL": 0, "SKIP": 0}  # 7 core checks and the memory check
    assert "SIMULATED PMU" in data["header"] and data["simulated"] is True
    first = data["checks"][0]
    assert (first["cpu"], first["name"], first["status"]) == (2, "instructions", "PASS")
    assert first["values"] == {"counted": 100_000_000, "expected": 100_000_000, "error": 0.0}


def test_sim_pmu_is_put_back_after_the_selftest(monkeypatch: pytest.MonkeyPatch) -> None:
    platform = SimPlatform(SimConfig(cpus=2, model="spr"), clock=ManualClock())
    before = [platform.machine.msr(cpu).snapshot() for cpu in (0, 1)]
    monkeypatch.setattr(selftest, "_sim_platform", lambda args: platform)
    assert main(["selftest", "--demo"]) == 0
    after = [platform.machine.msr(cpu).snapshot() for cpu in (0, 1)]
    assert after == before
    assert platform.machine.msr(0).read(registers.IA32_PERF_GLOBAL_CTRL) == 0


@pytest.mark.parametrize("backend", ["perf", "auto"])
def test_perf_without_hardware_events_exits_5_with_one_line(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    from pmutop.backends.perf import probe_hardware_events, probe_software_events

    if probe_software_events(0) is not None:
        pytest.skip("perf_event_open does not work at all here")
    if probe_hardware_events(0) is None:
        pytest.skip("this machine has a PMU perf can use")
    if backend == "auto" and os.path.exists("/dev/cpu/0/msr"):
        pytest.skip("auto may pick the msr backend here")
    assert main(["selftest", "--backend", backend, "--cores", "0"]) == EXIT_NO_PMU
    captured = capsys.readouterr()
    assert captured.out == ""
    err = captured.err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("pmutop: no usable PMU: perf_event_open fails for hardware events (")


def test_msr_sysroot_without_pmu_exits_5(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    leaves = dict(SKYLAKE_X_LEAVES)
    leaves[(0xA, 0)] = (0, 0, 0, 0)  # CPUID leaf 0xA: no architectural PMU
    root = build_sysroot(tmp_path, [0, 1], leaves, msrs={})
    assert main(["selftest", "--backend", "msr", "--sysroot", str(root)]) == EXIT_NO_PMU
    err = capsys.readouterr().err.splitlines()
    assert err == ["pmutop: no usable PMU: cpu 0: CPUID leaf 0xA reports no architectural PMU (version 0)"]


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["selftest", "--demo", "--sysroot", "/tmp"]) == 2
    assert main(["selftest", "--backend", "bogus"]) == 2


# -- the workloads' sizes -------------------------------------------------------------------------------------


def test_llc_size_is_the_highest_cache_level(tmp_path: Path) -> None:
    for index, level, size in ((0, 1, "48K"), (2, 2, "2048K"), (3, 3, "32M")):
        d = tmp_path / f"sys/devices/system/cpu/cpu0/cache/index{index}"
        d.mkdir(parents=True)
        (d / "level").write_text(f"{level}\n")
        (d / "size").write_text(f"{size}\n")
    llc = workloads.llc_bytes(Sysroot(tmp_path), 0)
    assert llc == 32 << 20
    assert workloads.chase_bytes(llc) == 256 << 20
    assert workloads.chase_bytes(None) == workloads.CHASE_MIN_BYTES
    assert workloads.chase_bytes(1 << 30) == workloads.CHASE_MAX_BYTES
    assert workloads.llc_bytes(Sysroot(tmp_path), 1) is None


# -- the C workloads, run here (no counters needed) ----------------------------------------------------------

needs_x86_64 = pytest.mark.skipif(workloads.available() is not None, reason="needs the compiled shim on x86-64")
M64 = (1 << 64) - 1


def xorshift64(x: int) -> int:
    x ^= (x << 13) & M64
    x ^= x >> 7
    x ^= (x << 17) & M64
    return x


@needs_x86_64
def test_instruction_loop_runs_its_iterations() -> None:
    t0 = shim.rdtsc()
    assert shim.lib.pmutop_wl_instructions(3_000_000) == 3_000_000
    t1 = shim.rdtsc()
    # 3M iterations of a dependent dec chain take at least ~3M cycles: the TSC moved on, by a lot.
    assert t1 - t0 > 100_000
    assert shim.lib.pmutop_wl_instructions(0) == 0


@needs_x86_64
def test_pointer_chase_follows_one_cycle_through_every_line() -> None:
    runner = workloads.HostWorkloadRunner(1 << 20, seed=3)  # 16384 lines
    buf, lines = runner._buf, runner.lines
    seen, line = set(), 0
    for _ in range(lines):
        seen.add(line)
        line = buf[line * 8]
    assert len(seen) == lines and line == 0  # one cycle through all lines, back at the start
    walk = 0
    for _ in range(1000):
        walk = buf[walk * 8]
    assert runner.chase(0, 1000) == walk
    assert runner.chase(0, lines) == 0


@needs_x86_64
def test_branch_loops_return_their_checksums() -> None:
    runner = workloads.HostWorkloadRunner(1 << 20, seed=11)
    x, taken = 11 | 1, 0
    for _ in range(10_000):
        x = xorshift64(x)
        taken += x & 1
    assert runner.branches(0, 10_000, random=True) == (taken + x) & M64
    assert runner.branches(0, 10_000, random=False) == x  # never taken
    assert 4_000 < taken < 6_000  # the branch really is taken about half the time


@needs_x86_64
def test_jump_chain_runs_its_passes() -> None:
    assert shim.lib.PMUTOP_WL_JUMPS == 4096
    assert shim.lib.pmutop_wl_jumps(100) == 100
    assert shim.lib.pmutop_wl_jumps(0) == 0


# -- run safety on the msr backend ------------------------------------------------------------------------


class WatchingRunner:
    """Stands in for the C workloads on a sysroot (whose CPUs are not this host's): notes, at every workload,
    whether the PMU was programmed and the run registered in the state directory."""

    simulated = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self.seen: list[tuple[int, int, str, int]] = []

    def describe(self) -> str:
        return "watching runner"

    def _note(self, cpu: int) -> int:
        watchdog = (self.root / "proc/sys/kernel/nmi_watchdog").read_text().strip()
        states = len(list((self.root / "run/pmutop").glob("*.json")))
        self.seen.append((cpu, read_msr(self.root, cpu, 0x186), watchdog, states))
        return 0

    def instructions(self, cpu: int, iterations: int) -> int:
        return self._note(cpu)

    def chase(self, cpu: int, steps: int) -> int:
        return self._note(cpu)

    def branches(self, cpu: int, iterations: int, random: bool) -> int:
        return self._note(cpu)

    def jumps(self, cpu: int, passes: int) -> int:
        return self._note(cpu)

    def close(self) -> None:
        pass


def test_msr_selftest_programs_registers_and_restores_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    original = idle_pmu_registers() | {0x38F: 0x3_0000_0001, 0x38D: 0}
    root = build_sysroot(
        tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=original, settings={"proc/sys/kernel/nmi_watchdog": "1"}
    )
    runner = WatchingRunner(root)
    monkeypatch.setattr(selftest, "_runner", lambda platform, cpus: runner)
    # The snapshot's counters never move: the checks fail, but the run must still program and put back.
    assert main(["selftest", "--backend", "msr", "--sysroot", str(root)]) == 1
    out = capsys.readouterr().out
    assert lines_of(out, 0)["instructions"] == "FAIL" and lines_of(out, 1)["instructions"] == "FAIL"
    assert {cpu for cpu, *_ in runner.seen} == {0, 1}
    for _cpu, evtsel0, watchdog, states in runner.seen:
        assert evtsel0 == 0x434F2E  # LLC references, USR+OS+EN: programmed by the msr backend
        assert watchdog == "0"  # paused for the run, like a normal run
        assert states == 1  # the run's state file, for `pmutop restore` after a kill
    assert (root / "proc/sys/kernel/nmi_watchdog").read_text().strip() == "1"
    for cpu in (0, 1):
        for address in (0x186, 0x187, 0x188, 0x189, 0x38D, 0x38F):
            assert read_msr(root, cpu, address) == original[address], f"cpu {cpu} {address:#x}"
    assert not list((root / "run/pmutop").glob("*.json"))
