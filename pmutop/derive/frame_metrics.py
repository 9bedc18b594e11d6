"""The per-core metrics of pmutop.derive.metrics (the same FORMULAS) as column formulas over an IntervalFrame:
one expression per metric for every CPU at once, NaN wherever the per-Sample function gives None (an input
missing or a divisor zero). The same IEEE operations in the same order, so each value equals the per-Sample
one to the last bit."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from pmutop.core.frame import NO_TSC, IntervalFrame
from pmutop.derive.metrics import FORMULAS, metrics_from

Floats = npt.NDArray[np.float64]
Flags = npt.NDArray[np.bool_]
METRICS = tuple(FORMULAS)


def _column(frame: IntervalFrame, event: str) -> tuple[Floats, Flags]:
    """An event's deltas as floats and where they were counted (nowhere when no CPU counts it)."""
    column = frame.layout.column_of.get(event)
    rows = len(frame.layout.cpus)
    if column is None:
        return np.zeros(rows), np.zeros(rows, np.bool_)
    return frame.counts[:, column].astype(np.float64), frame.counted[:, column].copy()


def _ratio(num: Floats, num_ok: Flags, den: Floats, den_ok: Flags) -> Floats:
    """num / den where both were counted and den is not 0, else NaN (the per-Sample `x / y if ... and y`)."""
    ok = num_ok & den_ok & (den != 0)
    return np.divide(num, den, out=np.full(num.shape, math.nan), where=ok)


def _thousand_times(frame: IntervalFrame, event: str) -> Floats:
    """1000 x an event's deltas, multiplied as integers (as `1000 * misses` on a Python int), then as floats."""
    column = frame.layout.column_of.get(event)
    if column is None:
        return np.zeros(len(frame.layout.cpus))
    return (frame.counts[:, column] * 1000).astype(np.float64)


def per_cpu(frame: IntervalFrame) -> dict[str, Floats]:
    """Each metric of each row ([cpu]; NaN: not known), as pmutop.derive.metrics.for_sample gives it per Sample.
    Rows without a sample this interval are NaN throughout."""
    instructions, has_instructions = _column(frame, "instructions")
    cycles, has_cycles = _column(frame, "cycles")
    ref, has_ref = _column(frame, "ref_cycles")
    misses, has_misses = _column(frame, "llc_misses")
    references, has_references = _column(frame, "llc_references")
    branch_misses, has_branch_misses = _column(frame, "branch_misses")
    branches, has_branches = _column(frame, "branches")
    sampled = frame.seq != 0
    tsc = frame.tsc.astype(np.float64)
    has_tsc = (frame.tsc != NO_TSC) & (frame.tsc != 0)
    util = np.where(has_ref & has_tsc, np.minimum(_ratio(ref, has_ref, tsc, has_tsc), 1.0), frame.util)
    speed = _ratio(cycles, has_cycles, ref, has_ref)
    has_hz = ~np.isnan(frame.tsc_hz) & (frame.tsc_hz != 0)
    ghz = np.where(~np.isnan(speed) & has_hz, speed * frame.tsc_hz / 1e9, math.nan)
    interval_ok = np.ones_like(sampled)
    metrics = {
        "util": util,
        "ghz": ghz,
        "ipc": _ratio(instructions, has_instructions, cycles, has_cycles),
        "llc_misses_per_s": _ratio(misses, has_misses, frame.interval, interval_ok),
        "llc_mpki": _ratio(_thousand_times(frame, "llc_misses"), has_misses, instructions, has_instructions),
        "llc_miss_ratio": _ratio(misses, has_misses, references, has_references),
        "branch_miss_ratio": _ratio(branch_misses, has_branch_misses, branches, has_branches),
    }
    return {name: np.where(sampled, values, math.nan) for name, values in metrics.items()}


def combined(frame: IntervalFrame) -> dict[str, float | None]:
    """The metrics of every CPU taken together (pmutop.derive.metrics.combined: sums of counts over the rows
    with a sample that is neither failed nor suspect; rates summed per CPU over its own interval; the clock
    weighted by each CPU's TSC ticks). Sums of floats run in row order, as the per-Sample loop adds them."""
    kept = frame.seq != 0
    for row in (*frame.suspect, *frame.error):
        kept[row] = False
    if not kept.any():
        return dict.fromkeys(METRICS)
    counts = frame.counts[kept]
    counted = frame.counted[kept]
    events = frame.layout.events
    sums = {event: int(counts[counted[:, c], c].sum()) for c, event in enumerate(events) if counted[:, c].any()}
    tsc_rows = frame.tsc[kept]
    has_tsc = (tsc_rows != NO_TSC) & (tsc_rows != 0)
    tsc = int(tsc_rows[has_tsc].sum())
    hz = np.nan_to_num(frame.tsc_hz[kept][has_tsc])  # a TSC without a measured rate weighs in at 0 Hz
    weighted_hz = _in_order(hz * tsc_rows[has_tsc])
    misses_per_s: float | None = None
    column = frame.layout.column_of.get("llc_misses")
    if column is not None:
        intervals = frame.interval[kept]
        per_s = counted[:, column] & (intervals > 0)
        if per_s.any():
            misses_per_s = _in_order(counts[per_s, column] / intervals[per_s])
    utils = frame.util[kept]
    utils = utils[~np.isnan(utils)]
    util = sum(utils.tolist()) / len(utils) if len(utils) else None  # sum() as the per-Sample code adds them
    return metrics_from(sums, tsc or None, weighted_hz / tsc if tsc else None, misses_per_s, util).as_dict()


def _in_order(values: Floats) -> float:
    """The sum of `values` added one after another (as a Python loop does; numpy's sum pairs them up)."""
    return float(np.add.accumulate(values)[-1]) if len(values) else 0.0
