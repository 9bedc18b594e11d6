"""Plausibility checks: numbers no CPU can produce mean the sample is wrong, not that the CPU is odd."""

from __future__ import annotations

MAX_GHZ = 10.0  # no shipping x86 core runs near this
MAX_IPC = 16.0  # well above any core's retire width
TSC_SLACK = 1.02  # ref cycles tick at the TSC rate while unhalted; allow read skew


# impossible() finds nothing wrong in counts with none of these keys (each of its checks needs one of them).
CHECKED_KEYS = frozenset(("ref_cycles", "cycles", "llc_misses"))


def impossible(counts: dict[str, int], tsc: int | None, tsc_hz: float | None) -> str | None:
    """Why this interval's counts cannot be real, or None."""
    ref = counts.get("ref_cycles")
    cycles = counts.get("cycles")
    instructions = counts.get("instructions")
    if ref is not None and tsc is not None and tsc > 0 and ref > tsc * TSC_SLACK + 10_000:
        return f"reference cycles ({ref}) exceed TSC ticks ({tsc})"
    if ref and cycles is not None and tsc_hz and cycles / ref * tsc_hz / 1e9 > MAX_GHZ:
        return f"cycles/ref-cycles imply {cycles / ref * tsc_hz / 1e9:.1f} GHz"
    if cycles and instructions is not None and cycles > 100_000 and instructions / cycles > MAX_IPC:
        return f"IPC of {instructions / cycles:.1f} is impossible"
    misses, refs = counts.get("llc_misses"), counts.get("llc_references")
    if misses is not None and refs is not None and misses > refs * 1.5 + 100_000:
        return f"LLC misses ({misses}) far exceed LLC references ({refs})"
    return None
