"""Repeated measurements summarised as min / median / max."""

from __future__ import annotations

import statistics
from typing import Any


def summary(values: list[float], unit: str, **extra: Any) -> dict[str, Any]:
    return {
        "unit": unit,
        "min": min(values),
        "median": statistics.median(values),
        "max": max(values),
        "runs": len(values),
        "values": values,
        **extra,
    }


def skipped(reason: str) -> dict[str, Any]:
    return {"skipped": reason}
