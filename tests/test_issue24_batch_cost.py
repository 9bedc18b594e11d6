"""What issue 24's batch cost work changed in behaviour: idle-state files are kept open and re-read (their new
value each interval, a vanished file left out, every fd closed at the end), and a batch table, which has no
idle-state column, does not read them at all while CSV and JSON still carry the shares."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.flags import needs_perf_events

from pmutop.app.main import main
from pmutop.core.sysroot import Sysroot
from pmutop.probes.power import sysfs
from pmutop.probes.power.sysfs import CpuIdle


def _cpuidle_root(tmp_path: Path, cpus: int, states: int) -> Sysroot:
    for cpu in range(cpus):
        for k in range(states):
            d = tmp_path / f"sys/devices/system/cpu/cpu{cpu}/cpuidle/state{k}"
            d.mkdir(parents=True)
            (d / "name").write_text(f"C{k}\n")
            (d / "time").write_text(f"{1000 * cpu + k}\n")
    return Sysroot(tmp_path)


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_idle_state_times_are_read_anew_each_time_and_every_fd_is_closed(tmp_path: Path) -> None:
    root = _cpuidle_root(tmp_path, cpus=1, states=2)
    before = _open_fds()
    idle = CpuIdle(root)
    states = idle.states(0)
    assert idle.read(states) == {"C0": 0, "C1": 1}
    # sysfs makes a value anew for every read at offset 0; a test file rewritten in place does the same
    with open(tmp_path / "sys/devices/system/cpu/cpu0/cpuidle/state1/time", "r+") as f:
        f.write("987654321\n")
    assert idle.read(states) == {"C0": 0, "C1": 987654321}
    assert _open_fds() == before + 2  # kept open between reads
    idle.close()
    assert _open_fds() == before


def test_a_state_file_that_is_missing_or_not_a_number_is_left_out(tmp_path: Path) -> None:
    root = _cpuidle_root(tmp_path, cpus=1, states=3)
    idle = CpuIdle(root)
    states = idle.states(0)
    (tmp_path / "sys/devices/system/cpu/cpu0/cpuidle/state0/time").unlink()
    (tmp_path / "sys/devices/system/cpu/cpu0/cpuidle/state2/time").write_text("n/a\n")
    assert idle.read(states) == {"C1": 1}
    idle.close()


def test_beyond_the_open_files_budget_states_are_still_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sysfs, "_KEEP_OPEN", 3)
    root = _cpuidle_root(tmp_path, cpus=2, states=2)
    before = _open_fds()
    idle = CpuIdle(root)
    assert [idle.read(idle.states(cpu)) for cpu in (0, 1)] == [{"C0": 0, "C1": 1}, {"C0": 1000, "C1": 1001}]
    assert _open_fds() == before + 3  # the fourth file is opened and closed for each read
    assert idle.read(idle.states(1)) == {"C0": 1000, "C1": 1001}
    idle.close()
    assert _open_fds() == before


needs_cpuidle = pytest.mark.skipif(not CpuIdle(Sysroot("/")).states(0), reason="no cpuidle on this host")
PERF_BATCH = ["--batch", "--backend", "perf", "--events", "cpu-clock,context-switches", "--interval", "0.1"]


@needs_perf_events
@needs_cpuidle
def test_a_perf_batch_table_reads_no_idle_state_files_while_json_carries_the_shares(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[str] = []
    real = CpuIdle._read

    def counted(self: CpuIdle, rel: str) -> int | None:
        reads.append(rel)
        return real(self, rel)

    monkeypatch.setattr(CpuIdle, "_read", counted)
    assert main([*PERF_BATCH, "--count", "2"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].split()[:3] == ["time", "CPU", "Util%"] and len(table) > 2
    assert reads == []
    assert main([*PERF_BATCH, "--count", "2", "--format", "json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert reads and records
    assert all(r["cstates"] and r["power_source"]["cstates"] == "cpuidle" for r in records if r["kind"] == "cpu")


def test_the_command_line_does_not_load_the_prometheus_exporter_until_a_command_serves() -> None:
    # Every run parses --listen's default; only `pmutop serve` needs the Prometheus client and an HTTP server.
    code = "import sys, pmutop.app.main; print(sorted(m for m in ('prometheus_client', 'wsgiref') if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "keys",
    [["context_switches"], ["ref_cycles", "context_switches"]],
)
def test_a_table_showing_util_alone_prints_the_util_of_the_full_metrics(keys: list[str]) -> None:
    # Such a table takes Util% without computing the other metrics: the same numbers, reference cycles or not.
    from pmutop.core.sample import Sample
    from pmutop.derive.metrics import combined, for_sample
    from pmutop.derive.titles import metric_columns
    from pmutop.sinks.batch import TablePrinter, print_interval

    assert metric_columns(keys) == ["util"]

    def sample(cpu: int, counts: dict[str, int], tsc: int | None, util: float | None) -> Sample:
        return Sample(cpu=cpu, seq=1, time=0.5, interval=0.5, tsc=tsc, tsc_hz=None, counts=counts, util=util)

    counted = "ref_cycles" in keys
    batches = [
        [sample(0, {"context_switches": 9}, None, 0.25), sample(1, {"context_switches": 5}, None, 0.5)],
        [sample(0, {"context_switches": 9}, None, None), sample(1, {"context_switches": 5}, None, 0.123)],
        [sample(0, {"context_switches": 9}, None, None), sample(1, {"context_switches": 5}, None, None)],
    ]
    if counted:  # ref cycles / TSC, capped at 1; without a TSC the kernel's fraction
        batches.append(
            [
                sample(0, {"ref_cycles": 400_000, "context_switches": 9}, 1_000_000, 0.9),
                sample(1, {"ref_cycles": 2_000_000, "context_switches": 5}, 1_000_000, 0.1),
                sample(2, {"ref_cycles": 7, "context_switches": 5}, None, 0.3),
            ]
        )
    for batch in batches:
        out = io.StringIO()
        print_interval(TablePrinter(out, keys, "perf"), batch, 1, None, None, set())
        lines = out.getvalue().splitlines()
        assert lines[0].split()[2] == "Util%"
        shown = [line.split()[2] for line in lines[1:]]
        values = [for_sample(s).util for s in batch] + [combined(batch).util]
        assert shown == ["-" if v is None else f"{v * 100:.1f}" for v in values]
