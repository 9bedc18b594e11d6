"""The PMU is always given back: every terminating signal, two signals at once, SIGKILL and a rerun,
two instances at once, symlinks in the sysroot. Real pmutop processes over sysroots of plain files,
checked by what is left in the files afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.processes import wait_for_output
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, idle_pmu_registers, read_msr

pytestmark = pytest.mark.integration  # starts processes, terminals or servers

WATCHDOG = "proc/sys/kernel/nmi_watchdog"
ORIGINAL = idle_pmu_registers() | {0x38F: 0x3_0000_0001, 0x38D: 0}
OURS_EVTSEL0 = 0x434F2E  # LLC references, USR+OS+EN: what pmutop programs on GP counter 0
STATE = "run/pmutop"
TERMINATING = [
    signal.SIGINT,
    signal.SIGTERM,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGPIPE,
    signal.SIGALRM,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGXCPU,
    signal.SIGXFSZ,
    signal.SIGVTALRM,
    signal.SIGPROF,
]


def pmutop(*args: str) -> list[str]:
    return [sys.executable, "-m", "pmutop", *args]


def start(root: Path, *extra: str, cores: str = "0-1") -> subprocess.Popen[str]:
    def child_setup() -> None:  # a test runner may have signals ignored; pmutop must see them as a user would
        for s in TERMINATING:
            signal.signal(s, signal.SIG_DFL)

    return subprocess.Popen(
        pmutop("--sysroot", str(root), "--batch", "--interval", "0.05", "--format", "json", "--cores", cores, *extra),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=child_setup,
    )


def machine(root: Path, cpus: int = 2, watchdog: str = "1") -> Path:
    return build_sysroot(root, list(range(cpus)), SKYLAKE_X_LEAVES, msrs=ORIGINAL, settings={WATCHDOG: watchdog})


def assert_programmed(root: Path, cpus: list[int]) -> None:
    assert (root / WATCHDOG).read_text().strip() == "0"
    for cpu in cpus:
        assert read_msr(root, cpu, 0x186) == OURS_EVTSEL0


def assert_restored(root: Path, cpus: list[int], watchdog: str = "1") -> None:
    assert (root / WATCHDOG).read_text().strip() == watchdog
    for cpu in cpus:
        for address in (0x186, 0x187, 0x188, 0x189, 0x38D, 0x38F, 0x309, 0x30A, 0x30B, 0x4C1, 0x4C2):
            assert read_msr(root, cpu, address) == ORIGINAL[address], f"cpu {cpu} {address:#x}"
    assert not list((root / STATE).glob("*.json")), "the state file outlived a complete restore"


@pytest.mark.parametrize("sig", TERMINATING, ids=lambda s: signal.Signals(s).name)
def test_every_terminating_signal_restores_and_exits_128_plus_n(tmp_path: Path, sig: int) -> None:
    machine(tmp_path)
    proc = start(tmp_path)
    wait_for_output(proc)
    assert_programmed(tmp_path, [0, 1])
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + sig, err
    assert "Traceback" not in err
    assert err.splitlines()[-1] == f"pmutop: stopped by {signal.Signals(sig).name}"
    assert_restored(tmp_path, [0, 1])


@pytest.mark.parametrize(
    ("first", "second"),
    [(signal.SIGINT, signal.SIGTERM), (signal.SIGTERM, signal.SIGTERM), (signal.SIGHUP, signal.SIGTERM)],
    ids=["INT+TERM", "TERM+TERM", "HUP+TERM"],
)
def test_two_signals_back_to_back_still_restore_everything(tmp_path: Path, first: int, second: int) -> None:
    machine(tmp_path, cpus=4)
    proc = start(tmp_path, cores="0-3")
    wait_for_output(proc)
    proc.send_signal(first)
    proc.send_signal(second)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 128 + first, err
    assert "Traceback" not in err and "internal error" not in err
    assert_restored(tmp_path, [0, 1, 2, 3])


def kill_hard(root: Path) -> int:
    proc = start(root)
    wait_for_output(proc)
    proc.kill()
    proc.communicate(timeout=30)
    assert_programmed(root, [0, 1])  # SIGKILL: nothing could be restored
    (state,) = list((root / STATE).glob("*.json"))
    assert int(state.stem) == proc.pid
    data = json.loads(state.read_text())
    assert data["settings"][WATCHDOG] == {"original": "1", "set": "0"}
    assert {r["cpu"] for r in data["cpu_records"]} == {0, 1}
    return proc.pid


def test_after_sigkill_the_next_run_restores_the_leftovers_first(tmp_path: Path) -> None:
    machine(tmp_path)
    pid = kill_hard(tmp_path)
    run = subprocess.run(
        pmutop("--sysroot", str(tmp_path), "--batch", "--count", "2", "--interval", "0.05", "--cores", "0-1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    first = run.stderr.splitlines()[0]
    assert first.startswith(f"pmutop: pmutop pid {pid} (started ")
    assert "ended without restoring; restored: cpu 0-1 PMU registers, /proc/sys/kernel/nmi_watchdog = 1" in first
    assert "in use" not in run.stderr
    assert_restored(tmp_path, [0, 1])


def test_after_sigkill_force_restores_the_leftovers_instead_of_keeping_them(tmp_path: Path) -> None:
    machine(tmp_path)
    kill_hard(tmp_path)
    run = subprocess.run(
        pmutop("--sysroot", str(tmp_path), "--batch", "--count", "1", "--interval", "0.05", "--force"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "taking over" not in run.stderr
    assert_restored(tmp_path, [0, 1])


def test_pmutop_restore_puts_back_what_a_killed_run_left(tmp_path: Path) -> None:
    machine(tmp_path)
    pid = kill_hard(tmp_path)
    run = subprocess.run(pmutop("restore", "--sysroot", str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert f"pmutop pid {pid} (started " in run.stdout and "restored: cpu 0-1 PMU registers" in run.stdout
    assert_restored(tmp_path, [0, 1])
    again = subprocess.run(pmutop("restore", "--sysroot", str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert (again.returncode, again.stdout.strip()) == (0, "nothing to restore")


def test_leftovers_another_agent_reprogrammed_are_left_to_it(tmp_path: Path) -> None:
    from helpers.sysroot_builder import write_msrs

    machine(tmp_path)
    kill_hard(tmp_path)
    write_msrs(tmp_path / "dev/cpu/1/msr", {0x186: 0x4300C0})  # perf took GP counter 0 on cpu 1 since
    run = subprocess.run(pmutop("restore", "--sysroot", str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "cpu 1: IA32_PERFEVTSEL0 reprogrammed by another agent during the run; left as found" in run.stderr
    assert read_msr(tmp_path, 1, 0x186) == 0x4300C0
    assert read_msr(tmp_path, 1, 0x38F) & 1  # its GLOBAL_CTRL enable bit stays on
    assert read_msr(tmp_path, 0, 0x186) == ORIGINAL[0x186]
    assert (tmp_path / WATCHDOG).read_text().strip() == "1"


def test_two_instances_started_at_once_on_the_same_cpus_one_refuses(tmp_path: Path) -> None:
    for attempt in range(8):
        root = machine(tmp_path / str(attempt))
        # Long enough (1.5 s) that both overlap however unevenly a loaded machine starts them.
        a = start(root, "--count", "30")
        b = start(root, "--count", "30")
        (out_a, err_a), (out_b, err_b) = a.communicate(timeout=60), b.communicate(timeout=60)
        codes = sorted([a.returncode, b.returncode])
        assert codes == [0, 3], (err_a, err_b)
        winner, loser = (a, b) if a.returncode == 0 else (b, a)
        loser_err = err_b if loser is b else err_a
        assert f"pmutop: pmutop (pid {winner.pid}, started " in loser_err
        assert "is already monitoring cpu 0-1" in loser_err
        winner_out = out_a if winner is a else out_b
        assert all(json.loads(line)["suspect"] is None for line in winner_out.splitlines())
        assert_restored(root, [0, 1])


def test_instances_on_other_cpus_both_run_and_the_last_one_out_restores_the_watchdog(tmp_path: Path) -> None:
    machine(tmp_path, cpus=4)
    a = start(tmp_path, cores="0-1")
    wait_for_output(a)
    b = start(tmp_path, cores="2-3")
    wait_for_output(b)
    a.send_signal(signal.SIGTERM)
    a.communicate(timeout=30)
    # b still counts: the watchdog must stay paused, or it would take a counter from under b.
    assert (tmp_path / WATCHDOG).read_text().strip() == "0"
    assert read_msr(tmp_path, 0, 0x186) == ORIGINAL[0x186] and read_msr(tmp_path, 2, 0x186) == OURS_EVTSEL0
    b.send_signal(signal.SIGTERM)
    _, err = b.communicate(timeout=30)
    assert b.returncode == 143, err
    assert_restored(tmp_path, [0, 1, 2, 3])


def test_a_watchdog_value_of_2_is_restored_as_2(tmp_path: Path) -> None:
    machine(tmp_path, watchdog="2")
    proc = start(tmp_path, "--count", "2")
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "set back to 2 on exit" in err
    assert_restored(tmp_path, [0, 1], watchdog="2")


@pytest.mark.parametrize("link", [WATCHDOG, "dev/cpu/0/msr", "proc"])
def test_writes_never_follow_symlinks_out_of_the_sysroot(tmp_path: Path, link: str) -> None:
    root = machine(tmp_path / "root")
    victim = tmp_path / "victim"
    target = root / link
    if target.is_dir():
        os.rename(target, victim)
    else:
        victim.write_bytes(target.read_bytes())
        target.unlink()
    os.symlink(victim, target)
    before = victim.read_bytes() if victim.is_file() else (victim / "sys/kernel/nmi_watchdog").read_bytes()
    run = subprocess.run(
        pmutop("--sysroot", str(root), "--batch", "--count", "1", "--interval", "0.05"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1, run.stderr
    assert len(run.stderr.splitlines()) == 1 and "symlink" in run.stderr, run.stderr
    after = victim.read_bytes() if victim.is_file() else (victim / "sys/kernel/nmi_watchdog").read_bytes()
    assert after == before
    if link != "dev/cpu/0/msr":
        assert read_msr(root, 0, 0x186) == ORIGINAL[0x186]


def test_a_full_disk_on_stdout_is_one_line(tmp_path: Path) -> None:
    with open("/dev/full", "w") as full:
        run = subprocess.run(
            pmutop("--demo", "--batch", "--count", "1", "--interval", "0.05"),
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert run.returncode == 1
    assert run.stderr.splitlines()[-1] == "pmutop: cannot write the output: No space left on device"
    assert "Traceback" not in run.stderr and "OSError" not in run.stderr


def test_the_live_view_with_stdin_closed_is_one_line() -> None:
    run = subprocess.run(
        pmutop("--demo"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=lambda: os.close(0),
    )
    assert run.returncode == 2
    assert run.stderr == "pmutop: the live view needs a terminal on stdin and stderr; use --batch for pipes and files\n"


def test_a_stop_during_a_long_run_is_immediate(tmp_path: Path) -> None:
    machine(tmp_path)
    proc = start(tmp_path)
    wait_for_output(proc)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 1.5  # no grace period needed: the batch loop watches for the stop


def test_cores_beyond_the_possible_cpus_are_named_as_missing(tmp_path: Path) -> None:
    root = machine(tmp_path)
    (root / "sys/devices/system/cpu/possible").write_text("0-3\n")
    run = subprocess.run(
        pmutop("--sysroot", str(root), "--batch", "--count", "1", "--cores", "0,9"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "CPU 9 does not exist (possible: 0-3)" in run.stderr and len(run.stderr.splitlines()) == 1


def test_info_reports_leftovers_and_the_paused_watchdog_with_the_fix(tmp_path: Path) -> None:
    machine(tmp_path)
    pid = kill_hard(tmp_path)
    run = subprocess.run(pmutop("info", "--sysroot", str(tmp_path)), capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    watchdog = next(line for line in run.stdout.splitlines() if line.startswith("NMI watchdog"))
    assert f"0 (paused by pmutop pid {pid}, no longer running: `pmutop restore` sets it back; was 1)" in watchdog
    assert f"pmutop pid {pid} (started " in run.stdout
    assert "ended without restoring: cpu 0-1 PMU registers, /proc/sys/kernel/nmi_watchdog = 0 (was 1)" in run.stdout
    assert "Fix" in run.stdout and "`pmutop restore`" in run.stdout
    as_json = subprocess.run(pmutop("info", "--sysroot", str(tmp_path), "--json"), capture_output=True, text=True)
    (entry,) = json.loads(as_json.stdout)["pmutop_runs"]
    assert (entry["pid"], entry["running"], entry["programmed_cpus"]) == (pid, False, "0-1")
