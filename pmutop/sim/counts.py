"""What the simulated workload answers (pmutop.sim.workload): cumulative event counts per privilege mode, and
the top-down shares and slots behind them."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

# Level-1 then level-2 top-down categories, in PERF_METRICS byte order (reference pmu.md section 2.9).
TOPDOWN_FIELDS = (
    "retiring",
    "bad_spec",
    "fe_bound",
    "be_bound",
    "heavy_ops",
    "br_mispredict",
    "fetch_lat",
    "mem_bound",
)


class TmaShares(NamedTuple):
    """Fractions of the slots in each top-down category (level 2 children are parts of their parent)."""

    retiring: float
    bad_spec: float
    fe_bound: float
    be_bound: float
    heavy_ops: float
    br_mispredict: float
    fetch_lat: float
    mem_bound: float


@dataclass(frozen=True)
class TopdownSlots:
    """Slots and slots per top-down category over a span of time (exact integers from the workload)."""

    slots: int
    retiring: int
    bad_spec: int
    fe_bound: int
    be_bound: int
    heavy_ops: int
    br_mispredict: int
    fetch_lat: int
    mem_bound: int

    def fractions(self) -> dict[str, float]:
        """Each category's share of the slots (what PERF_METRICS approximates in 8-bit fields)."""
        return {f: getattr(self, f) / self.slots if self.slots else 0.0 for f in TOPDOWN_FIELDS}


class Amounts(NamedTuple):
    """Cumulative event counts in one privilege mode."""

    cycles: int  # unhalted core cycles
    instructions: int
    ref_cycles: int  # TSC-rate ticks while unhalted
    llc_references: int
    llc_misses: int
    branches: int
    branch_misses: int
    slots: int  # topdown slots = pipeline width x cycles
    # Slots per top-down category (level 1 sums to `slots` at segment boundaries; level 2 within its parent).
    td_retiring: int = 0
    td_bad_spec: int = 0
    td_fe_bound: int = 0
    td_be_bound: int = 0
    td_heavy_ops: int = 0
    td_br_mispredict: int = 0
    td_fetch_lat: int = 0
    td_mem_bound: int = 0
    # For the four-event formula: issued - retired + width x recovery = bad speculation slots.
    uops_issued: int = 0
    recovery_cycles: int = 0


@dataclass(frozen=True)
class Counts:
    tsc: int  # TSC ticks elapsed since t=0
    user: Amounts
    kernel: Amounts

    # Computed on first use and kept (readers such as the thermal model ask several times). cached_property
    # stores into the instance __dict__ directly, so it works on this frozen (not slotted) dataclass; two
    # threads racing on the first access compute the same value.
    @cached_property
    def total(self) -> Amounts:
        return Amounts._make(map(operator.add, self.user, self.kernel))
