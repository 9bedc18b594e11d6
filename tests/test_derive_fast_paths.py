"""The live view's per-interval arithmetic (pmutop.derive) gives the same numbers, to the last bit, as the
straightforward loops it replaced: the all-CPU row's sums and the slot-weighted top-down fractions."""

from __future__ import annotations

import random

from pmutop.core.sample import Sample
from pmutop.derive import metrics, topdown


def plain_sums(counts: list[dict[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in counts:
        for k, v in c.items():
            out[k] = out.get(k, 0) + v
    return out


def plain_combine_weighed(parts: list[tuple[float | None, topdown.Fractions]]) -> topdown.Fractions:
    out: topdown.Fractions = dict.fromkeys(topdown.TMA_FIELDS)
    weighted = [(s, f) for s, f in parts if f[topdown.LEVEL1[0]] is not None and s is not None and s > 0]
    if not weighted:
        return out
    total = sum(s for s, _ in weighted)
    for name in topdown.TMA_FIELDS:
        values = [(s, f[name]) for s, f in weighted]
        if all(v is not None for _, v in values):
            out[name] = sum(s * v for s, v in values if v is not None) / total
    return out


def test_sums_of_counts_whatever_the_keys_and_their_order() -> None:
    rng = random.Random(1)
    keys = ["instructions", "cycles", "slots", "llc_misses"]
    same = [{k: rng.randrange(1 << 40) for k in keys} for _ in range(50)]
    assert metrics.sum_counts(same) == plain_sums(same)
    assert list(metrics.sum_counts(same)) == keys
    mixed = [dict(rng.sample(sorted(c.items()), len(c))) for c in same]  # the same keys, other orders
    mixed[7].pop("slots")
    mixed[9]["branches"] = 5
    assert metrics.sum_counts(mixed) == plain_sums(mixed)
    assert list(metrics.sum_counts(mixed)) == list(plain_sums(mixed))
    floats = [{"a": rng.random() * 1e9, "b": rng.random()} for _ in range(30)]  # a remote feed's
    assert metrics.sum_counts(floats) == plain_sums(floats)  # type: ignore[arg-type]


def test_combined_counts_every_core_that_is_neither_failed_nor_suspect() -> None:
    def sample(cpu: int, n: int, **kw: object) -> Sample:
        return Sample(cpu=cpu, seq=1, time=1.0, interval=1.0, tsc=10**9, tsc_hz=1e9, counts={"instructions": n}, **kw)  # type: ignore[arg-type]

    m = metrics.combined([sample(0, 5), sample(1, 7, suspect="x"), sample(2, 11), sample(3, 13, error="gone")])
    assert m == metrics.compute({"instructions": 16}, 2 * 10**9, 1e9, 0.0, None)


def test_slot_weighted_fractions_to_the_last_bit() -> None:
    rng = random.Random(2)
    for _ in range(200):
        parts: list[tuple[float | None, topdown.Fractions]] = []
        for _ in range(rng.randrange(0, 40)):
            fractions: topdown.Fractions = {name: rng.random() for name in topdown.TMA_FIELDS}
            if rng.random() < 0.1:
                fractions[rng.choice(topdown.TMA_FIELDS[4:])] = None
            if rng.random() < 0.05:
                fractions[topdown.LEVEL1[0]] = None
            slots = rng.choice([None, 0, rng.randrange(1 << 34), rng.random() * 1e9])
            parts.append((slots, fractions))
        assert topdown.combine_weighed(parts) == plain_combine_weighed(parts)


def test_fractions_of_one_core_clamp_as_min_and_max_do() -> None:
    for x in (-1.0, -0.0, 0.0, 0.3, 1.0, 1.5, float("inf")):
        for hi in (1.0, 0.25):
            got, want = topdown._clamp(x, hi), min(max(x, 0.0), hi)
            assert (got, str(got)) == (want, str(want))
