"""What each kind of workload phase does (pmutop.sim.workload): the ranges its rates are drawn from, how
often each mix picks it, and how it spends its issue slots (its top-down profile). Values for a P-core."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple

MIXES = ("classic", "tma")


class PhaseKind(StrEnum):
    IDLE = "idle"
    BUSY = "busy"
    MEMORY = "memory"
    MIXED = "mixed"
    BRANCHY = "branchy"  # "tma" mix only: mispredicts a lot (bad speculation)
    FRONTEND = "frontend"  # "tma" mix only: a large code footprint starves the frontend


@dataclass(frozen=True)
class Rates:
    """What one segment of the workload does (P-core values scaled for E-cores)."""

    phase: PhaseKind  # the phase in force
    regime: PhaseKind  # the steady behaviour actually running (differs from phase only in MIXED)
    util: float  # unhalted fraction of wall time
    ghz: float  # core clock while unhalted
    ipc: float
    llc_mpki: float  # LLC misses per 1000 instructions
    llc_miss_ratio: float  # misses / references
    branches_per_instr: float
    branch_miss_ratio: float
    kernel_frac: float  # share of every quantity counted at CPL 0


# (low, high) per field of Rates, for a P-core.
RANGES: dict[PhaseKind, tuple[tuple[float, float], ...]] = {
    PhaseKind.IDLE: (
        (0.01, 0.05),
        (0.8, 1.6),
        (0.5, 1.0),
        (0.5, 3.0),
        (0.2, 0.5),
        (0.15, 0.22),
        (0.02, 0.06),
        (0.4, 0.8),
    ),
    PhaseKind.BUSY: (
        (0.9, 1.0),
        (3.4, 4.8),
        (2.0, 3.5),
        (0.05, 0.8),
        (0.05, 0.3),
        (0.12, 0.2),
        (0.003, 0.02),
        (0.01, 0.05),
    ),
    PhaseKind.MEMORY: (
        (0.93, 0.98),
        (2.4, 3.8),
        (0.2, 0.7),
        (10.0, 40.0),
        (0.4, 0.9),
        (0.08, 0.14),
        (0.005, 0.03),
        (0.02, 0.1),
    ),
    PhaseKind.BRANCHY: (
        (0.9, 1.0),
        (3.0, 4.4),
        (0.8, 1.5),
        (0.3, 2.0),
        (0.1, 0.4),
        (0.2, 0.28),
        (0.06, 0.15),
        (0.02, 0.08),
    ),
    PhaseKind.FRONTEND: (
        (0.85, 1.0),
        (3.0, 4.2),
        (0.7, 1.4),
        (0.5, 3.0),
        (0.1, 0.4),
        (0.15, 0.22),
        (0.01, 0.04),
        (0.1, 0.4),
    ),
}
# Per mix: phase weights (dict order matters: it is the RNG's choice order) and the regimes of a mixed phase.
PHASE_WEIGHTS: dict[str, dict[PhaseKind, int]] = {
    "classic": {PhaseKind.IDLE: 3, PhaseKind.BUSY: 3, PhaseKind.MEMORY: 2, PhaseKind.MIXED: 2},
    "tma": {
        PhaseKind.IDLE: 3,
        PhaseKind.BUSY: 3,
        PhaseKind.MEMORY: 2,
        PhaseKind.MIXED: 2,
        PhaseKind.BRANCHY: 2,
        PhaseKind.FRONTEND: 2,
    },
}
MIXED_WEIGHTS: dict[str, tuple[tuple[PhaseKind, float], ...]] = {
    "classic": ((PhaseKind.BUSY, 0.45), (PhaseKind.MEMORY, 0.2), (PhaseKind.IDLE, 0.35)),
    "tma": (
        (PhaseKind.BUSY, 0.3),
        (PhaseKind.MEMORY, 0.15),
        (PhaseKind.IDLE, 0.3),
        (PhaseKind.BRANCHY, 0.15),
        (PhaseKind.FRONTEND, 0.1),
    ),
}


class TmaProfile(NamedTuple):
    """How a regime spends its slots. Retiring = IPC x uops per instruction / width; the rest is split by
    the three weights; each level-2 child is a share of its parent."""

    uops_per_instr: float
    bad_spec: float  # weights of the non-retiring slots
    fe_bound: float
    be_bound: float
    heavy_ops: float  # of retiring
    br_mispredict: float  # of bad speculation
    fetch_lat: float  # of frontend bound
    mem_bound: float  # of backend bound
    recovery: float  # share of bad-speculation slots spent in recovery cycles (x width), the rest wasted uops


TMA: dict[PhaseKind, TmaProfile] = {
    PhaseKind.IDLE: TmaProfile(1.2, 0.12, 0.5, 0.38, 0.25, 0.6, 0.8, 0.5, 0.5),
    PhaseKind.BUSY: TmaProfile(1.25, 0.18, 0.4, 0.42, 0.12, 0.8, 0.45, 0.2, 0.5),
    PhaseKind.MEMORY: TmaProfile(1.05, 0.04, 0.08, 0.88, 0.1, 0.5, 0.6, 0.9, 0.5),
    PhaseKind.BRANCHY: TmaProfile(1.05, 0.6, 0.2, 0.2, 0.08, 0.95, 0.55, 0.3, 0.45),
    PhaseKind.FRONTEND: TmaProfile(1.25, 0.08, 0.72, 0.2, 0.35, 0.7, 0.8, 0.35, 0.5),
}


# The share of missed lines written back to memory, per regime (low, high): drawn per segment (pmutop.sim.dram).
WRITEBACK_SHARE: dict[PhaseKind, tuple[float, float]] = {
    PhaseKind.IDLE: (0.15, 0.3),
    PhaseKind.BUSY: (0.2, 0.4),
    PhaseKind.MEMORY: (0.6, 0.95),  # a streamer writes back most of what it reads
    PhaseKind.BRANCHY: (0.1, 0.25),
    PhaseKind.FRONTEND: (0.03, 0.1),  # instruction misses are clean
    PhaseKind.MIXED: (0.2, 0.4),  # never a regime (a mixed phase runs the others); here for completeness
}


def max_events_per_ns(width: int, tsc_hz: int) -> int:
    """More than any quantity of a workload (pmutop.sim.workload) grows in a nanosecond, whatever its phase: its
    slots (width x the fastest clock), instructions (the highest IPC x that clock) and reference cycles (the TSC
    rate) added up, plus one for the floors. Every other quantity, and every event (pmutop.sim.events), counts at
    most one of these."""
    ghz = max(ranges[1][1] for ranges in RANGES.values())
    ipc = max(ranges[2][1] for ranges in RANGES.values())
    return math.ceil(ghz * (width + ipc)) + math.ceil(tsc_hz / 1e9) + 1
