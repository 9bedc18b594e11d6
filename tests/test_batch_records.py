"""What a user's script reads from `pmutop --batch`: one convention for shares (fractions 0..1), rates to six
significant digits as the README says, and null (never "") for what was not measured."""

from __future__ import annotations

import csv
import io
import json

import pytest

from pmutop.app.main import main

DEMO = ("--demo", "--batch", "--interval", "0.05", "--count", "3", "--sim-cpus", "4")


def records(capsys: pytest.CaptureFixture[str], *extra: str) -> list[dict[str, object]]:
    code = main([*DEMO, "--format", "json", *extra])
    out, err = capsys.readouterr()
    assert code == 0, err
    return [r for line in out.splitlines() if (r := json.loads(line))["kind"] == "cpu"]  # not package (issue 22)


def significant_digits(value: float) -> int:
    digits = f"{value:.15g}".replace("-", "").replace(".", "").lstrip("0")
    mantissa = digits.split("e")[0]
    return len(mantissa.rstrip("0")) if value else 0


def test_rates_carry_six_significant_digits(capsys: pytest.CaptureFixture[str]) -> None:
    recs = records(capsys)
    rates = [v for r in recs for k, v in r.items() if k.endswith("_per_s") and isinstance(v, float)]
    assert rates and max(rates) > 1e6  # large rates are among them
    assert max(significant_digits(v) for v in rates) <= 6


def test_every_share_is_a_fraction_busy_and_idle_states_included(capsys: pytest.CaptureFixture[str]) -> None:
    recs = records(capsys)
    for r in recs:
        assert 0.0 <= r["busy"] <= 1.0  # type: ignore[operator]
        assert abs(r["busy"] - r["util"]) < 0.05  # type: ignore[operator]  # both measure the unhalted share
        assert r["cstates"] and all(0.0 <= v <= 1.0 for v in r["cstates"].values())  # type: ignore[union-attr]
        assert sum(r["cstates"].values()) + r["busy"] == pytest.approx(1.0, abs=0.02)  # type: ignore[union-attr,operator]


def test_csv_idle_state_columns_are_fractions_too(capsys: pytest.CaptureFixture[str]) -> None:
    code = main([*DEMO, "--format", "csv"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert "cstate_C6" in rows[0] and not any(c.endswith("_pct") for c in rows[0])
    assert all(0.0 <= float(r["cstate_C6"]) <= 1.0 for r in rows)


def test_throttle_is_a_list_of_reasons_or_null_never_an_empty_string(capsys: pytest.CaptureFixture[str]) -> None:
    recs = records(capsys)
    assert all(isinstance(r["throttle"], list) for r in recs)  # the simulator measures it: no reason now
    assert "" not in [r.get(k) for r in recs for k in r]
