"""issue 21: `pmutop serve --cgroups/--cgroup PATH` exports per-cgroup counters, never per-process series.

The cgroup readings come from a fake TaskCounterSource (tests/helpers/fake_task_source.py) with known counts;
the exporter, its folding thread and its HTTP server are pmutop's own."""

from __future__ import annotations

import time
import urllib.request

import pytest
from helpers.fake_task_source import FakeTaskSource, PushedFeed, counts_of
from helpers.serve import free_port, scrape, start_serve, stop, values
from prometheus_client import generate_latest

from pmutop.app.options import run_parser
from pmutop.core.run_description import RunInfo
from pmutop.core.task_reading import ESTIMATED, TaskSnapshot
from pmutop.sinks.exporter import CGROUP_STALE_S, Exporter

NGINX = (("cgroup", "/system.slice/nginx.service"), ("name", "nginx.service"))


def info() -> RunInfo:
    return RunInfo("h", "test", None, "PMU", "perf", "read", simulated=False, hypervisor=True, cpus=[0, 1])


def metrics(exporter: Exporter) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return values(generate_latest(exporter.registry).decode())


def test_cgroup_counters_are_summed_deltas_named_by_prometheus_rules() -> None:
    source = FakeTaskSource()
    exporter = Exporter(PushedFeed(), info(), tasks=source)
    assert not [name for name, _ in metrics(exporter) if name.startswith("pmutop_cgroup_")]  # nothing read yet
    for _ in range(3):
        exporter.read_tasks()
    served = metrics(exporter)
    nginx = [counts_of(p, 0.1) for p in source.processes if p.comm == "nginx"]
    instructions = 3 * sum(c["instructions"] for c in nginx)
    assert served[("pmutop_cgroup_instructions_total", NGINX)] == instructions
    assert served[("pmutop_cgroup_llc_misses_total", NGINX)] == 3 * sum(c["llc_misses"] for c in nginx)
    assert served[("pmutop_cgroup_context_switches_total", NGINX)] == 3 * sum(c["context_switches"] for c in nginx)
    # task-clock in seconds, as CPU time: 0.75 of a CPU for 3 × 0.1 s.
    assert served[("pmutop_cgroup_cpu_seconds_total", NGINX)] == pytest.approx(0.225)
    assert served[("pmutop_cgroup_sampled_seconds_total", NGINX)] == pytest.approx(0.3)
    assert served[("pmutop_cgroup_processes", NGINX)] == 2
    assert served[("pmutop_cgroup_counters_info", (("mode", "exact"),))] == 1
    # The parent counts its children too (hierarchical, as the kernel's cgroup events).
    system = (("cgroup", "/system.slice"), ("name", "system.slice"))
    assert served[("pmutop_cgroup_cpu_seconds_total", system)] == pytest.approx(3 * 0.1 * 1.75)
    text = generate_latest(exporter.registry).decode()
    assert "# TYPE pmutop_cgroup_instructions_total counter" in text
    assert "# TYPE pmutop_cgroup_cpu_seconds_total counter" in text
    assert "pmutop_cgroup_task_clock" not in text  # nanoseconds never served: seconds only


def test_no_series_is_per_process() -> None:
    exporter = Exporter(PushedFeed(), info(), tasks=FakeTaskSource())
    exporter.read_tasks()
    served = metrics(exporter)
    labels = {key for _, lab in served for key, _ in lab}
    assert labels <= {"cgroup", "name", "mode", "cpu", "event", "topdown_method", "package", *run_info_labels()}
    assert "pid" not in labels and "comm" not in labels
    text = generate_latest(exporter.registry).decode()
    assert 'postgres"' not in text and "www-data" not in text  # process names and users: nowhere


def run_info_labels() -> set[str]:
    return {"hostname", "backend", "read_method", "cpu_model", "microarchitecture", "pmu", "simulated"}


def test_an_estimate_is_labelled_and_a_removed_cgroup_leaves_the_output() -> None:
    exporter = Exporter(PushedFeed(), info(), tasks=FakeTaskSource(mode=ESTIMATED))
    exporter.read_tasks()
    assert metrics(exporter)[("pmutop_cgroup_counters_info", (("mode", "estimated"),))] == 1
    collector, now = exporter.collector, time.monotonic()
    for path, t in collector.cgroups.items():
        t.last_read = now - CGROUP_STALE_S - 1 if path != "/system.slice" else now - CGROUP_STALE_S / 2
    collector.fold_tasks(TaskSnapshot(mode=ESTIMATED), now=now)  # an interval that read none of them
    assert set(collector.cgroups) == {"/system.slice"}  # read within CGROUP_STALE_S: kept
    assert ("pmutop_cgroup_processes", NGINX) not in metrics(exporter)


def test_serve_reads_the_cgroups_every_interval_and_scrapes_only_grow() -> None:
    feed, source = PushedFeed(), FakeTaskSource()
    exporter = Exporter(feed, info(), tasks=source)
    port = free_port()
    exporter.start("127.0.0.1", port)
    try:
        seen: list[float] = []
        for n in range(1, 6):
            feed.push(n)
            deadline = time.monotonic() + 10
            while source.reads < n and time.monotonic() < deadline:
                time.sleep(0.01)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                served = values(r.read().decode())
            seen.append(served[("pmutop_cgroup_instructions_total", NGINX)])
        assert source.begun and source.reads == 5
        assert seen == sorted(seen) and seen[-1] == 5 * seen[0]
    finally:
        exporter.stop()


def test_serve_takes_cgroup_options_and_says_why_there_are_no_per_pid_series() -> None:
    args = run_parser(serve=True).parse_args(["--cgroups", "--cgroup", "system.slice", "--cgroup", "user.slice"])
    assert args.cgroups and args.cgroup == ["system.slice", "user.slice"]
    help_text = " ".join(run_parser(serve=True).format_help().split())
    assert "pmutop_cgroup_<event>_total{cgroup,name}" in help_text
    assert "Per-process series are never served" in help_text and "unbounded cardinality" in help_text
    assert not hasattr(run_parser(serve=True).parse_args([]), "pid")  # serve has no --pid, --tasks


def test_serve_with_the_demo_exports_the_simulated_cgroups_end_to_end() -> None:
    """`pmutop serve --demo --cgroups`: the simulator's cgroup tree reaches /metrics (it crashed before: serve
    had no --top)."""
    port = free_port()
    proc = start_serve(port, "--cgroups", "--top", "4", "--interval", "0.2")
    try:
        deadline = time.monotonic() + 30
        text = ""
        while "pmutop_cgroup_cpu_seconds_total" not in text and time.monotonic() < deadline:
            time.sleep(0.3)
            text = scrape(port)
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        got = values(text)
        cpu = {
            dict(labels)["cgroup"]: v for (name, labels), v in got.items() if name == "pmutop_cgroup_cpu_seconds_total"
        }
        assert cpu and all(v >= 0 for v in cpu.values())
        assert "/system.slice" in cpu or any(path.startswith("/system.slice/") for path in cpu)
        assert not [labels for (_, labels) in got if "pid" in dict(labels)]
    finally:
        stop(proc)
