"""`pmutop serve`: what /metrics serves, where it listens, how it fails and stops."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers.serve import ROOT, free_port, scrape, start_serve, stop, values
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot, read_msr
from test_signals import ORIGINAL, WATCHDOG, assert_restored

from pmutop.app.options import run_parser
from pmutop.core.errors import UsageError
from pmutop.sinks.exporter import parse_listen

CPU_COUNTERS = (
    "pmutop_instructions_total",
    "pmutop_cycles_total",
    "pmutop_ref_cycles_total",
    "pmutop_llc_references_total",
    "pmutop_llc_misses_total",
    "pmutop_branches_total",
    "pmutop_branch_misses_total",
    "pmutop_tsc_total",
    "pmutop_topdown_slots_total",
)


@pytest.fixture
def served():  # type: ignore[no-untyped-def]
    port = free_port()
    proc = start_serve(port, "--sim-cpus", "2", "--interval", "0.1")
    yield port, proc
    stop(proc)


def test_metrics_are_node_exporter_style_counters_that_only_grow(served) -> None:  # type: ignore[no-untyped-def]
    port, _ = served
    first = values(scrape(port))
    time.sleep(0.5)
    second = values(scrape(port))
    names = {name for name, _ in second}
    assert not [n for n in names if n.startswith(("process_", "python_"))]
    for name in CPU_COUNTERS:
        for cpu in ("0", "1"):
            key = (name, (("cpu", cpu),))
            assert key in second, key
            assert second[key] > first[key] > 0, key
    info = [labels for name, labels in second if name == "pmutop_info"]
    assert dict(info[0])["simulated"] == "true" and dict(info[0])["backend"] == "sim"
    cats = {dict(lab)["category"] for n, lab in second if n == "pmutop_topdown_category_slots_total"}
    assert {"retiring", "bad_speculation", "frontend_bound", "backend_bound"} <= cats
    counted = second[("pmutop_event_counted_seconds_total", (("cpu", "0"), ("event", "instructions")))]
    assert counted == pytest.approx(second[("pmutop_sampled_seconds_total", (("cpu", "0"),))])
    ipc = second[("pmutop_ipc", (("cpu", "0"),))]
    assert 0 < ipc < 8
    tma = sum(
        v
        for (n, lab), v in second.items()
        if n == "pmutop_tma_ratio"
        and dict(lab)["cpu"] == "0"
        and dict(lab)["category"] in ("retiring", "bad_speculation", "frontend_bound", "backend_bound")
    )
    assert tma == pytest.approx(1.0)


def test_sigterm_stops_the_server_with_status_143(served) -> None:  # type: ignore[no-untyped-def]
    port, proc = served
    scrape(port)
    code, err = stop(proc)
    assert code == 143
    assert "SIMULATED" in err and "stopped by SIGTERM" in err and "Traceback" not in err
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2)


def test_listens_on_loopback_unless_told_otherwise() -> None:
    args = run_parser(serve=True).parse_args([])
    assert parse_listen(args.listen) == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:9000") == ("::1", 9000)
    assert parse_listen("0.0.0.0:80") == ("0.0.0.0", 80)


@pytest.mark.integration
@pytest.mark.parametrize("bad", ["nonsense", "127.0.0.1", "host:99999", ":80"])
def test_a_bad_listen_address_is_one_line_and_status_2(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_listen(bad)
    r = subprocess.run(
        [sys.executable, "-m", "pmutop", "serve", "--demo", "--listen", bad],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "--listen" in r.stderr


@pytest.mark.integration
def test_a_port_in_use_is_one_line_and_status_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-m", "pmutop", "serve", "--demo", "--sim-cpus", "1", "--listen", f"127.0.0.1:{port}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 1
    lines = [ln for ln in r.stderr.splitlines() if "SIMULATED" not in ln]
    assert lines == [f"pmutop: cannot listen on 127.0.0.1:{port}: Address already in use"]


@pytest.mark.integration
def test_serve_on_the_msr_backend_restores_the_pmu_on_sigterm(tmp_path: Path) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES, msrs=ORIGINAL, settings={WATCHDOG: "1"})
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pmutop",
            "serve",
            "--sysroot",
            str(tmp_path),
            "--interval",
            "0.05",
            "--listen",
            f"127.0.0.1:{port}",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        text = scrape(port)
        assert 'backend="msr"' in text and 'simulated="false"' in text
        assert read_msr(tmp_path, 0, 0x186) == 0x434F2E  # programmed while serving
        assert (tmp_path / WATCHDOG).read_text().strip() == "0"
    finally:
        code, err = stop(proc)
    assert code == 143 and "Traceback" not in err
    assert_restored(tmp_path, [0, 1])


@pytest.mark.integration
def test_hybrid_parts_label_each_cpu_with_its_core_type_and_the_remote_view_reads_it() -> None:
    from pmutop.feeds.remote import parse

    port = free_port()
    proc = start_serve(port, "--sim-model", "adl", "--sim-cpus", "2", "--interval", "0.1")
    try:
        text = scrape(port)
    finally:
        stop(proc)
    got = values(text)
    assert got[("pmutop_instructions_total", (("core_type", "P"), ("cpu", "0")))] > 0
    assert got[("pmutop_instructions_total", (("core_type", "E"), ("cpu", "1")))] > 0
    remote = parse(text)
    assert remote.core_types == {0: "P", 1: "E"}
    assert remote.totals[1]["instructions"] == got[("pmutop_instructions_total", (("core_type", "E"), ("cpu", "1")))]


class FakeFeed:
    """Two CPUs whose rings the test fills by hand."""

    def __init__(self) -> None:
        from pmutop.core.ring import SampleRing

        self.cpus = [0, 1]
        self.rings = {0: SampleRing(), 1: SampleRing()}

    def topdown_method(self, cpu: int) -> str | None:
        return None

    def failures(self) -> dict[int, str]:
        return {1: "offline"}


def test_totals_add_every_sample_scale_counted_time_and_leave_suspect_samples_out() -> None:
    from prometheus_client import generate_latest

    from pmutop.core.run_description import RunInfo
    from pmutop.core.sample import Sample
    from pmutop.sinks.exporter import Exporter

    feed = FakeFeed()
    info = RunInfo("h", "cpu", None, "PMU", "msr", "msr", simulated=False, hypervisor=False, cpus=[0, 1])
    exporter = Exporter(feed, info)  # type: ignore[arg-type]

    def push(seq: int, **kw: object) -> None:
        base = dict(cpu=0, seq=seq, time=seq, interval=0.5, tsc=1000, tsc_hz=2e3, counts={"instructions": 100})
        feed.rings[0].push(Sample(**(base | kw)))  # type: ignore[arg-type]

    push(
        1, counts={"instructions": 100, "llc_misses": 8}, estimated={"llc_misses": 0.25}, overflows={"instructions": 1}
    )
    first = values(generate_latest(exporter.registry).decode())
    push(
        2,
        counts={"instructions": 300, "llc_misses": 4},
        energy_j={"package": 2.5},
        temp_c=61.0,
        package=0,
        cstates={"C1": 20.0, "C6": 50.0},
    )
    push(3, counts={"instructions": 10**9}, suspect="sampler fell behind")
    got = values(generate_latest(exporter.registry).decode())
    cpu0 = (("cpu", "0"),)
    assert first[("pmutop_instructions_total", cpu0)] == 100
    assert got[("pmutop_instructions_total", cpu0)] == 400  # the suspect sample is not added
    assert got[("pmutop_suspect_samples_total", cpu0)] == 1
    assert got[("pmutop_tsc_total", cpu0)] == 2000
    assert got[("pmutop_sampled_seconds_total", cpu0)] == 1.0
    assert got[("pmutop_event_counted_seconds_total", (*cpu0, ("event", "llc_misses")))] == 0.125 + 0.5
    assert got[("pmutop_event_counted_seconds_total", (*cpu0, ("event", "instructions")))] == 1.0
    assert got[("pmutop_counter_overflows_total", (("counter", "instructions"), *cpu0))] == 1
    assert got[("pmutop_cpu_up", (("cpu", "1"),))] == 0
    assert ("pmutop_ipc", cpu0) not in got
    assert got[("pmutop_energy_joules_total", (("domain", "package"), ("package", "0")))] == 2.5
    assert got[("pmutop_cstate_residency_seconds_total", (*cpu0, ("state", "C6")))] == 0.25  # 50% of 0.5 s
    assert got[("pmutop_cstate_residency_seconds_total", (*cpu0, ("state", "C1")))] == 0.1
    assert got[("pmutop_temperature_celsius", cpu0)] == 61.0  # no cycles counted: no IPC gauge, never a made-up one


def test_software_only_utilisation_is_a_counter_of_busy_seconds() -> None:
    """Without reference cycles (software events only) the kernel's busy fraction is exported as the busy
    seconds it adds up to, so rate() gives the utilisation over any window, not only the last interval's."""
    from prometheus_client import generate_latest

    from pmutop.core.run_description import RunInfo
    from pmutop.core.sample import Sample
    from pmutop.sinks.exporter import Exporter

    feed = FakeFeed()
    info = RunInfo("h", "cpu", None, "PMU", "perf", "perf", simulated=False, hypervisor=False, cpus=[0, 1])
    exporter = Exporter(feed, info)  # type: ignore[arg-type]
    for seq, util in enumerate((0.2, 0.6, 1.0), start=1):
        software = {"context_switches": 10, "cpu_migrations": 1}
        feed.rings[0].push(
            Sample(cpu=0, seq=seq, time=seq, interval=0.5, tsc=None, tsc_hz=None, counts=software, util=util)
        )
    got = values(generate_latest(exporter.registry).decode())
    cpu0 = (("cpu", "0"),)
    assert got[("pmutop_busy_seconds_total", cpu0)] == pytest.approx(0.1 + 0.3 + 0.5)
    assert got[("pmutop_sampled_seconds_total", cpu0)] == 1.5
    assert got[("pmutop_utilization", cpu0)] == 1.0  # the last interval's, as before
