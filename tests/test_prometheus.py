"""The Grafana dashboard and a real Prometheus server scraping `pmutop serve --backend sim`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from helpers.serve import ROOT, free_port, scrape, start_serve, stop, values

pytestmark = pytest.mark.integration  # starts processes, terminals or servers

DASHBOARD = ROOT / "dashboards" / "grafana" / "pmutop.json"
METRIC = re.compile(r"\bpmutop_[a-z0-9_]+\b")


def dashboard_exprs() -> list[str]:
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    return exprs


@pytest.fixture(scope="module")
def served():  # type: ignore[no-untyped-def]
    port = free_port()
    proc = start_serve(port, "--sim-cpus", "2", "--interval", "0.2")
    try:
        scrape(port)
        yield port
    finally:
        stop(proc)


def test_every_dashboard_expression_names_metrics_the_exporter_serves(served: int) -> None:
    dash = json.loads(DASHBOARD.read_text())
    titles = " ".join(p["title"] for p in dash["panels"])
    assert "IPC" in titles and "Top-down" in titles and "MPKI" in titles
    served_names = {name for name, _ in values(scrape(served))}
    used = {m for e in dashboard_exprs() for m in METRIC.findall(e)}
    assert len(used) >= 6
    assert used <= served_names, used - served_names


# -- a real Prometheus server


def query(base: str, expr: str, at: float | None = None) -> list[dict]:  # type: ignore[type-arg]
    params = {"query": expr} | ({"time": f"{at:.3f}"} if at else {})
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    return body["data"]["result"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def prometheus(served: int):  # type: ignore[no-untyped-def]
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("no prometheus binary (Debian package `prometheus`; .ci/run installs it when it can)")
    work = Path(tempfile.mkdtemp(prefix="pmutop-prom-"))
    port = free_port()
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: pmutop\n    static_configs:\n      - targets: ['127.0.0.1:{served}']\n"
    )
    proc = subprocess.Popen(
        [
            binary,
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # until rate() has points for both CPUs
            try:
                if len(query(base, "rate(pmutop_instructions_total[5s])")) == 2:
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"prometheus did not scrape pmutop: {proc.stderr.read() if proc.stderr else ''}"[-2000:])
            time.sleep(0.5)
        time.sleep(10)  # rate() divides by the whole window: let the series cover it (8 s) before querying
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


def raw(base: str, name: str, at: float) -> dict[str, list[tuple[float, float]]]:
    """What Prometheus stored per CPU over the last 8 s before `at`: (time, value) pairs."""
    return {r["metric"]["cpu"]: [(float(t), float(v)) for t, v in r["values"]] for r in query(base, f"{name}[8s]", at)}


def test_prometheus_rates_and_ipc_match_the_simulated_counts(prometheus: str) -> None:
    at = time.time() - 1  # a fixed evaluation time: the raw points and the rates see the same window
    rates = {
        r["metric"]["cpu"]: float(r["value"][1]) for r in query(prometheus, "rate(pmutop_instructions_total[8s])", at)
    }
    ipcs = {
        r["metric"]["cpu"]: float(r["value"][1])
        for r in query(prometheus, "rate(pmutop_instructions_total[8s]) / rate(pmutop_cycles_total[8s])", at)
    }
    instructions = raw(prometheus, "pmutop_instructions_total", at)
    cycles = raw(prometheus, "pmutop_cycles_total", at)
    sampled = raw(prometheus, "pmutop_sampled_seconds_total", at)
    assert set(rates) == set(ipcs) == {"0", "1"}
    for cpu in ("0", "1"):
        i0, i1 = instructions[cpu][0][1], instructions[cpu][-1][1]
        c0, c1 = cycles[cpu][0][1], cycles[cpu][-1][1]
        s0, s1 = sampled[cpu][0][1], sampled[cpu][-1][1]
        # The simulated PMU's own instruction rate over those scrapes (its counts over the seconds they cover).
        truth_rate = (i1 - i0) / (s1 - s0)
        assert rates[cpu] == pytest.approx(truth_rate, rel=0.15)  # wall vs sampled seconds, extrapolation
        assert ipcs[cpu] == pytest.approx((i1 - i0) / (c1 - c0), rel=0.02)
        assert 0.05 < ipcs[cpu] < 8


def test_every_dashboard_query_returns_data_from_prometheus(prometheus: str) -> None:
    for expr in dashboard_exprs():
        if expr.startswith("label_values("):
            continue
        concrete = expr.replace("$__rate_interval", "8s").replace("$instance", ".*").replace("$cpu", "0")
        assert query(prometheus, concrete), concrete


def readme_promql() -> list[str]:
    """The README's PromQL examples: one per line, continuation lines indented, comments skipped."""
    block = (ROOT / "README.md").read_text().split("```promql\n", 1)[1].split("```", 1)[0]
    exprs: list[str] = []
    for line in block.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        if line[0].isspace():
            exprs[-1] += " " + line.strip()
        else:
            exprs.append(line)
    return exprs


def test_the_readme_promql_examples_work(prometheus: str) -> None:
    exprs = readme_promql()
    assert len(exprs) >= 7
    for expr in exprs:
        result = query(prometheus, expr.replace("[5m]", "[8s]"))
        assert result, expr
        if "ignoring (category)" in expr:  # the four level-1 shares of one CPU add up to 1
            shares = [float(r["value"][1]) for r in result if r["metric"]["cpu"] == "0"]
            assert len(shares) == 4 and sum(shares) == pytest.approx(1.0)
