"""`pmutop --prometheus` against a fake Prometheus API: the numbers it builds, every way the server can fail
(slow, 500, not JSON, NaN, partial), hosts lost and restarted, history, credentials never shown, and a
fleet of 1,000 hosts x 64 CPUs (64,000 series a query)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.fake_prometheus import FakePrometheus
from helpers.processes import self_signed_certificate
from helpers.serve import ROOT

from pmutop.core.errors import PmutopError, UsageError
from pmutop.derive.metrics import for_sample
from pmutop.feeds.prometheus import PrometheusFeed
from pmutop.feeds.promql import DEFAULT_MATCH, match_selector, parse_server


def feed_of(fake: FakePrometheus, interval: float = 1.0, **kw: object) -> PrometheusFeed:
    return PrometheusFeed(parse_server(fake.url), interval, DEFAULT_MATCH, **kw)  # type: ignore[arg-type]


def latest(feed: PrometheusFeed) -> dict[str, object]:
    """host:cpu -> its newest sample."""
    return {feed.labels[gid]: feed.rings[gid].latest() for gid in feed.cpus}


def pmutop(*args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pmutop", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def test_every_host_and_cpu_becomes_a_sample_with_the_served_rates() -> None:
    with FakePrometheus(hosts=3, cpus=2) as fake:
        feed = feed_of(fake)
        try:
            assert [h.instance for h in feed.hosts] == fake.instances
            assert feed.scrape_s == 1.0 and feed.step == 1.0 and feed.window == 3.0
            fake.queries.clear()
            feed.poll()
            samples = latest(feed)
            assert set(samples) == {f"{i}:{c}" for i in fake.instances for c in range(2)}
            for s in samples.values():
                m = for_sample(s)  # type: ignore[arg-type]
                assert m.ipc == pytest.approx(2.0) and m.util == pytest.approx(0.5) and m.ghz == pytest.approx(2.0)
                assert s.interval == 3.0 and s.counts["instructions"] == 6_000_000_000  # type: ignore[attr-defined]
            # One query per metric for the whole fleet, never one per host; all at one evaluation time.
            assert len(fake.queries) == len(feed.queries()) <= 12
            assert not any("host-0001" in q for q in fake.queries)
            assert feed.hosts_of[feed.cpus[-1]] == (fake.instances[-1], 1)
            assert feed.lost() == []
        finally:
            feed.stop()


@pytest.mark.parametrize("after_scrape", [0.05, 0.2, 0.5, 0.95])
def test_a_round_while_the_newest_scrape_is_not_stored_yet_still_has_every_cpu(after_scrape: float) -> None:
    """Prometheus stores a scrape some ms after it was taken, and scrapes jitter: a round that lands in that
    gap must still find two scrapes in its window for every CPU, not show a hole ("no samples in the last 2 s",
    2% of rounds against a real Prometheus scraping every 1 s)."""
    with FakePrometheus(hosts=2, cpus=2) as fake:
        feed = feed_of(fake)
        try:
            fake.ingest_lag = 0.3
            feed.poll(float(int(time.time())) + after_scrape)
            for label, s in latest(feed).items():
                assert s.error is None, (label, s.error)  # type: ignore[attr-defined]
                assert for_sample(s).ipc == pytest.approx(2.0)  # type: ignore[arg-type]
        finally:
            feed.stop()


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("500", "HTTP 500: boom"),
        ("malformed", "the answer is not the query API's JSON (HTTP 200)"),
        ("slow", "no answer within 0.5 s"),
    ],
)
def test_a_failing_server_is_one_line_and_the_feed_goes_on(mode: str, said: str) -> None:
    with FakePrometheus() as fake:
        feed = feed_of(fake, timeout=0.5)
        notices: list[str] = []
        feed.on_notice = notices.append
        try:
            fake.mode, fake.delay = mode, 2.0
            began = time.monotonic()
            feed.poll()  # no exception: error samples and a status line
            assert time.monotonic() - began < 2.0  # bounded by the timeout, not by the server
            assert feed.lost() == [f"prometheus {fake.url}: {said}; retrying"]
            assert notices == [f"prometheus {fake.url}: {said}; retrying"]
            assert all(s.error == f"prometheus {fake.url}: {said}" for s in latest(feed).values())  # type: ignore[attr-defined]
            fake.mode = "ok"
            feed.poll()
            assert feed.lost() == [] and notices[-1] == f"prometheus {fake.url}: answering again"
            assert all(for_sample(s).ipc == pytest.approx(2.0) for s in latest(feed).values())  # type: ignore[arg-type]
        finally:
            feed.stop()


def test_nan_and_partial_answers_leave_values_unknown_not_made_up() -> None:
    with FakePrometheus() as fake:
        feed = feed_of(fake)
        try:
            fake.mode = "nan"
            feed.poll()
            for s in latest(feed).values():
                assert "instructions" not in s.counts and for_sample(s).ipc is None  # type: ignore[attr-defined,arg-type]
                assert for_sample(s).util == pytest.approx(0.5)  # type: ignore[arg-type]
            fake.mode = "partial"
            feed.poll()
            samples = latest(feed)
            assert samples["host-0000:9464:0"].error == "host-0000:9464: no samples from cpu 0 in the last 3 s"  # type: ignore[attr-defined]
            assert for_sample(samples["host-0000:9464:1"]).ipc == pytest.approx(2.0)  # type: ignore[arg-type]
            assert feed.lost() == []
        finally:
            feed.stop()


def test_a_host_gone_is_lost_the_others_go_on_and_a_restart_is_said() -> None:
    with FakePrometheus(hosts=3) as fake:
        feed = feed_of(fake)
        notices: list[str] = []
        feed.on_notice = notices.append
        try:
            fake.gone.add("host-0001:9464")
            feed.poll()
            samples = latest(feed)
            assert samples["host-0001:9464:0"].error.startswith("host-0001:9464: lost (not scraped since ")  # type: ignore[attr-defined]
            assert for_sample(samples["host-0002:9464:0"]).ipc == pytest.approx(2.0)  # type: ignore[arg-type]
            assert [line.split(" since ")[0] for line in feed.lost()] == ["host-0001:9464: lost"]
            assert notices == ["host-0001:9464: lost (Prometheus has no current samples of it); the others go on"]
            fake.gone.clear()
            fake.starts["host-0002:9464"] += 600  # its exporter began again: counters from zero
            feed.poll()
            assert notices[1] == "host-0001:9464: back"
            assert notices[2].startswith("host-0002:9464: restarted at ")
            assert [line.split(" at ")[0] for line in feed.lost()] == ["host-0002:9464: restarted"]
            assert all(s.error is None for s in latest(feed).values())  # type: ignore[attr-defined]
        finally:
            feed.stop()


def test_many_lost_hosts_are_one_banner_line() -> None:
    with FakePrometheus(hosts=6, cpus=1) as fake:
        feed = feed_of(fake)
        try:
            fake.gone.update(fake.instances[:5])
            feed.poll()
            assert feed.lost() == ["5 hosts lost: host-0000:9464, host-0001:9464, host-0002:9464, ..."]
        finally:
            feed.stop()


def test_history_fills_the_rings_from_query_range_at_once() -> None:
    with FakePrometheus() as fake:
        feed = feed_of(fake)
        try:
            assert feed.prefill(60) == 60
            assert all(len(feed.rings[gid]) == 60 for gid in feed.cpus)
            ring = list(feed.rings[feed.cpus[0]])
            assert [s.time for s in ring[:3]] == [1.0, 2.0, 3.0]
            assert all(for_sample(s).ipc == pytest.approx(2.0) for s in ring)
            assert any("query_range" not in q and "rate(" in q for q in fake.queries)
            feed.poll()  # the live rounds follow on
            assert feed.rings[feed.cpus[0]].latest().seq == 61  # type: ignore[union-attr]
        finally:
            feed.stop()


def test_a_fleet_of_64000_cpus_refreshes_well_within_the_interval() -> None:
    server = subprocess.Popen(  # its own process: serving 64,000 series must not take our time
        [sys.executable, str(ROOT / "tests" / "helpers" / "fake_prometheus.py"), "1000", "64"],
        cwd=ROOT / "tests",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "tests")},
    )
    assert server.stdout is not None and server.stdin is not None
    url = server.stdout.readline().strip()
    feed = PrometheusFeed(parse_server(url), 15.0, DEFAULT_MATCH, timeout=30.0)
    try:
        assert len(feed.cpus) == 64_000
        feed.poll()  # the server renders and caches its answers
        began = time.perf_counter()
        at = round(time.time(), 3)
        values = feed.ask_round(at)
        asked = time.perf_counter()
        feed.update_hosts(values["start"], at)
        built = feed.build(values, at)
        feed._push_round(at, built)
        done = time.perf_counter()
        print(
            f"\n64,000 CPUs, {len(values)} queries of up to 64,000 series: fetch + parse {asked - began:.2f} s, "
            f"build + push 64,000 samples {done - asked:.2f} s, refresh {done - began:.2f} s"
        )
        assert done - began < 15.0  # the interval; the figure is printed for the report, not asserted tightly
        s = feed.rings[feed.cpus[-1]].latest()
        assert s is not None and for_sample(s).ipc == pytest.approx(2.0)
    finally:
        feed.stop()
        server.stdin.close()
        server.wait(10)


def test_the_compact_reader_agrees_with_json_and_leaves_other_shapes_to_it() -> None:
    import json

    from pmutop.feeds.promql import compact_vector

    result = [
        {"metric": {"cpu": "0", "instance": "a:1"}, "value": [1.5, "2.5"]},
        {"metric": {"cpu": "1", "instance": "a:1"}, "value": [1.5, "NaN"]},
        {"metric": {"cpu": "2", "instance": "b:1"}, "value": [1.5, "+Inf"]},
        {"metric": {"instance": "b:1"}, "value": [1.5, "7"]},  # no cpu label: left out
    ]
    body = {"status": "success", "data": {"resultType": "vector", "result": result}}
    compact = json.dumps(body, separators=(",", ":")).encode()
    assert compact_vector(compact, ("instance", "cpu")) == {("a:1", "0"): 2.5}
    assert compact_vector(json.dumps(body).encode(), ("instance", "cpu")) is None  # spaces: json.loads reads it
    result[0]["metric"]["instance"] = 'a"quoted:1'  # an escape: json.loads reads it
    assert compact_vector(json.dumps(body, separators=(",", ":")).encode(), ("instance", "cpu")) is None


def test_credentials_are_sent_and_never_shown(tmp_path: Path) -> None:
    with FakePrometheus() as fake:
        secret_url = fake.url.replace("http://", "http://alice:s3cret-pw@")
        feed = PrometheusFeed(parse_server(secret_url), 1.0, DEFAULT_MATCH, timeout=0.5)
        try:
            assert fake.headers[-1]["Authorization"].startswith("Basic ")
            fake.mode = "500"
            feed.poll()
            assert "s3cret" not in " ".join(feed.lost()) and "alice" not in " ".join(feed.lost())
            assert "s3cret" not in str(feed.describe()) and "s3cret" not in feed.run_info().hostname
        finally:
            feed.stop()
        token = tmp_path / "token"
        token.write_text("tok-123\n")
        fake.mode = "ok"
        feed = PrometheusFeed(parse_server(fake.url, bearer_file=str(token)), 1.0, DEFAULT_MATCH)
        feed.stop()
        assert fake.headers[-1]["Authorization"] == "Bearer tok-123"
        # A server that does not answer: one line, exit 1, no secret, no traceback.
        down = pmutop("--prometheus", "http://bob:hunter2@127.0.0.1:9", "--batch", "--count", "1")
        assert down.returncode == 1 and "hunter2" not in down.stderr and "bob" not in down.stderr
        assert down.stderr.strip().count("\n") == 0 and "Traceback" not in down.stderr
        assert "prometheus http://127.0.0.1:9:" in down.stderr


def test_bad_options_are_one_line_usage_errors(tmp_path: Path) -> None:
    for extra, said in [
        (["--demo"], "not with --demo"),
        (["--connect", "127.0.0.1:9464"], "not with --connect"),
        (["--tasks"], "not with --tasks"),
        (["--pid", "1"], "not with --pid"),
        (["--since", "10m"], "--since/--until print a past window: they need --batch"),
        (["--batch", "--since", "yesterday"], "expected a time (2024-05-01T10:00:00Z) or a duration ago (10m)"),
        (["--batch", "--match", "up"], "--match 'up': expected label matchers"),
        (["--basic-auth-file", str(tmp_path / "nope")], "--basic-auth-file"),
    ]:
        r = pmutop("--prometheus", "http://127.0.0.1:9", *extra)
        assert r.returncode == 2, (extra, r.stderr)
        assert said in r.stderr and r.stderr.strip().count("\n") == 0, (extra, r.stderr)
    r = pmutop("--match", '{job="x"}', "--batch")
    assert r.returncode == 2 and "--match needs --prometheus URL" in r.stderr
    assert match_selector('{job="pmutop"}') == 'pmutop_info{job="pmutop"}'
    with pytest.raises(UsageError):
        parse_server("ftp://host:1")
    with pytest.raises(UsageError, match="https"):
        parse_server("http://host:1", ca_file="/etc/hostname")


def test_a_server_without_pmutop_is_one_line() -> None:
    said = r"no pmutop instances there \(pmutop_info selects none\)"
    with FakePrometheus(hosts=0) as fake, pytest.raises(PmutopError, match=said):
        feed_of(fake)


def test_batch_json_records_carry_the_host_and_its_own_cpu() -> None:
    import json

    with FakePrometheus(hosts=2, cpus=2) as fake:
        r = pmutop("--prometheus", fake.url, "--batch", "--format", "json", "--count", "2")
        assert r.returncode == 0, r.stderr
        records = [json.loads(line) for line in r.stdout.splitlines()]
        assert len(records) == 8
        assert [(x["host"], x["cpu"]) for x in records[:4]] == [(i, c) for i in fake.instances for c in (0, 1)]
        assert all(x["ipc"] == pytest.approx(2.0) and x["util"] == pytest.approx(0.5) for x in records)
        assert [x["interval_index"] for x in records] == [1, 1, 1, 1, 2, 2, 2, 2]
        window = pmutop("--prometheus", fake.url, "--batch", "--format", "csv", "--since", "1m", "--until", "50s")
        assert window.returncode == 0, window.stderr
        lines = window.stdout.splitlines()
        assert lines[0].startswith("kind,time,interval_index,host,cpu,interval,")
        assert len(lines) == 1 + 10 * 4  # 10 steps of 1 s (the fake scrapes every 1 s), 4 CPUs each


def test_a_cpu_without_samples_is_said_once_and_its_record_has_no_made_up_interval() -> None:
    """A round where a CPU has no rate: its batch record is empty (interval too: nothing was measured over
    any interval) and stderr says why, once while it lasts; said again after it comes back and goes."""
    import json

    with FakePrometheus(hosts=2, cpus=2) as fake:
        fake.mode = "partial"  # host 0's CPU 0 has no sampled_seconds, every round
        r = pmutop("--prometheus", fake.url, "--batch", "--format", "json", "--count", "3")
        assert r.returncode == 0, r.stderr
        said = "host-0000:9464: no samples from cpu 0 in the last 3 s"
        assert r.stderr.count(said) == 1, r.stderr
        records = [json.loads(line) for line in r.stdout.splitlines()]
        empty = [x for x in records if (x["host"], x["cpu"]) == ("host-0000:9464", 0)]
        assert len(records) == 12 and len(empty) == 3
        assert all(x["interval"] is None and x["ipc"] is None and x["util"] is None for x in empty)
        assert all(x["interval"] == 3.0 and x["ipc"] == pytest.approx(2.0) for x in records if x not in empty)
        feed = feed_of(fake)
        notices: list[str] = []
        feed.on_notice = notices.append
        try:
            for mode in ("partial", "partial", "ok", "partial"):
                fake.mode = mode
                feed.poll()
            assert notices == [said, "host-0000:9464: samples from cpu 0 again", said]
        finally:
            feed.stop()


async def test_the_live_view_shows_every_instance_and_a_lost_one_in_its_banner() -> None:
    from helpers.pilot import text_of
    from textual.widgets import DataTable, Static

    from pmutop.tui.app import PmutopApp

    with FakePrometheus(hosts=2, cpus=2) as fake:
        feed = feed_of(fake)
        try:
            assert feed.prefill(60) == 60  # as `pmutop --prometheus` does before the view opens
            app = PmutopApp(feed, feed.run_info())
            async with app.run_test(size=(200, 40)) as pilot:
                before = app.updates
                feed.poll()
                for _ in range(300):
                    if app.updates > before:
                        break
                    await pilot.pause(0.02)
                table = app.query_one(DataTable)
                rows = {gid: table.get_cell(str(gid), "cpu").plain.strip() for gid in feed.cpus}
                assert sorted(rows.values()) == [f"{i}:{c}" for i in fake.instances for c in (0, 1)]
                assert all(table.get_cell(str(gid), "ipc").plain.strip() == "2.00" for gid in feed.cpus)
                fake.gone.add(fake.instances[1])
                before = app.updates
                feed.poll()
                for _ in range(300):
                    if app.updates > before:
                        break
                    await pilot.pause(0.02)
                await pilot.pause(1.2)  # the header is redrawn every second
                banner = text_of(app.query_one("#banner", Static), width=300)
                assert f"{fake.instances[1]}: lost since" in banner
                lost_row = str(feed.hosts[1].gid(0))
                assert table.get_cell(lost_row, "util").plain.strip() == "failed"
                assert table.get_cell(str(feed.hosts[0].gid(0)), "ipc").plain.strip() == "2.00"
        finally:
            feed.stop()


def test_https_is_verified_against_the_given_ca(tmp_path: Path) -> None:
    cert, key = self_signed_certificate(tmp_path)
    with FakePrometheus(tls=(cert, key)) as fake:
        assert fake.url.startswith("https://")
        feed = PrometheusFeed(parse_server(fake.url, ca_file=cert), 1.0, DEFAULT_MATCH)
        try:
            feed.poll()
            assert all(for_sample(s).ipc == pytest.approx(2.0) for s in latest(feed).values())  # type: ignore[arg-type]
        finally:
            feed.stop()
        # Verified by default: a certificate no known CA signed is one line, not a connection.
        with pytest.raises(PmutopError, match=r"^prometheus https://127\.0\.0\.1:\d+: .*(certificate|CERTIFICATE)"):
            PrometheusFeed(parse_server(fake.url), 1.0, DEFAULT_MATCH)
        r = pmutop("--prometheus", fake.url, "--prometheus-ca", str(cert), "--batch", "--count", "1", "--format=json")
        assert r.returncode == 0 and '"host":"host-0000:9464"' in r.stdout, r.stderr


def test_the_rounds_timeout_is_the_lowered_one_not_the_clients_first() -> None:
    """After discovery the feed bounds each round by max(step, 2 s), not by the 10 s it connected with: a slow
    server holds a round back 2 s at most (the lowered value used to change only the message)."""
    with FakePrometheus() as fake:
        feed = feed_of(fake)  # no timeout given: 10 s for discovery
        try:
            fake.mode, fake.delay = "slow", 4.0
            began = time.monotonic()
            feed.poll()
            took = time.monotonic() - began
            assert feed.lost() == [f"prometheus {fake.url}: no answer within 2 s; retrying"]
            assert took < 3.5, took
        finally:
            feed.stop()
