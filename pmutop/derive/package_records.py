"""One flat record per package (socket) per interval (`"kind": "package"`): the memory bandwidth the DRAM source
measured, for JSON lines, CSV and a replay alike.

Bytes are the memory controllers' counts × 64 over the reading's own measured `interval`; rates are over that
interval (never the nominal one). A direction a channel did not count is null (not zero); a saturated
channel's bytes are a lower bound (`saturated`). `dram_peak_bytes_per_s` is null where the memory speed is
unknown, and so is `dram_peak_share` ((read + write) / peak, a fraction 0..1 like every share).

JSON keeps the channels as a list of objects (`channels`); CSV has one column per channel value instead:
ch<N>_read_bytes, ch<N>_write_bytes, ch<N>_read_bytes_per_s, ch<N>_write_bytes_per_s, ch<N>_saturated, for
the channels of the first interval (N is the channel's index within its package)."""

from __future__ import annotations

from typing import Any

from pmutop.core.dram_reading import DramReading, PackageDram
from pmutop.derive.records import rounded

CHANNEL_FIELDS = ("read_bytes", "write_bytes", "read_bytes_per_s", "write_bytes_per_s", "saturated")


def package_columns(*, timestamps: bool = False) -> list[str]:
    """The package record's keys in order (JSON); CSV replaces `channels` (csv_package_columns)."""
    return [
        "kind",
        "time",
        *(["timestamp"] if timestamps else []),
        "interval_index",
        "package",
        "interval",
        "dram_read_bytes",
        "dram_write_bytes",
        "dram_read_bytes_per_s",
        "dram_write_bytes_per_s",
        "dram_peak_bytes_per_s",
        "dram_peak_share",
        "dram_channels",
        "channels",
        "saturated",
        "source",
        "mode",
    ]


def csv_package_columns(channels: int, *, timestamps: bool = False) -> list[str]:
    """CSV's header: `channels` becomes ch<N>_<field> for N in 0..channels-1."""
    cols = package_columns(timestamps=timestamps)
    i = cols.index("channels")
    flat = [f"ch{n}_{f}" for n in range(channels) for f in CHANNEL_FIELDS]
    return cols[:i] + flat + cols[i + 1 :]


def _r(value: float | None) -> float | None:
    return None if value is None else rounded(value)


def _bytes(value: float | None) -> float | int | None:
    """Counts × 64 are whole bytes: printed as integers (a source that scales may give a float)."""
    if value is None:
        return None
    return int(value) if float(value).is_integer() else rounded(value)


def channel_values(c: DramReading) -> dict[str, Any]:
    return {
        "channel": c.channel,
        "pmu": c.pmu,
        "read_bytes": _bytes(c.read_bytes),
        "write_bytes": _bytes(c.write_bytes),
        "read_bytes_per_s": _r(c.read_bytes_per_s),
        "write_bytes_per_s": _r(c.write_bytes_per_s),
        "saturated": c.saturated,
    }


def package_record(
    p: PackageDram,
    source: str,
    mode: str,
    *,
    time: float,
    index: int,
    timestamp: str | None = None,
) -> dict[str, Any]:
    """`source`: where the numbers come from ("uncore", "simulated"); `mode`: the run's (the CPU records')."""
    rec: dict[str, Any] = {"kind": "package", "time": round(time, 3)}
    if timestamp is not None:
        rec["timestamp"] = timestamp
    share = p.peak_share
    rec |= {
        "interval_index": index,
        "package": p.package,
        "interval": round(p.interval, 6),
        "dram_read_bytes": _bytes(p.read_bytes),
        "dram_write_bytes": _bytes(p.write_bytes),
        "dram_read_bytes_per_s": _r(p.read_bytes_per_s),
        "dram_write_bytes_per_s": _r(p.write_bytes_per_s),
        "dram_peak_bytes_per_s": _r(p.peak_bytes_per_s),
        "dram_peak_share": _r(share),
        "dram_channels": len(p.channels),
        "channels": [channel_values(c) for c in p.channels],
        "saturated": p.saturated,
        "source": source,
        "mode": mode,
    }
    return rec


def csv_package_cells(rec: dict[str, Any]) -> dict[str, Any]:
    """A package record's values as CSV cells: the channels flattened, booleans as true/false."""
    out = {k: v for k, v in rec.items() if k != "channels"}
    for ch in rec["channels"]:
        for f in CHANNEL_FIELDS:
            out[f"ch{ch['channel']}_{f}"] = ch[f]
    for key, value in list(out.items()):
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
    return out
