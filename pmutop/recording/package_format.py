"""How one interval's DRAM bandwidth reading is stored in a recording (format version 3: see
pmutop.recording.format): a line {"packages": {"interval", "time", "packages"}}. `interval` is the reading's
number (the package sampler's 1, 2, ...), `time` the run time of the CPU samples it was read after (what pairs
it with its interval: readers pair by time, not by position). Each package keeps its measured bytes, interval,
peak and channels; rates are recomputed (bytes / interval, as the source computed them). A channel's own
interval, package and saturation are written only where they differ from the package's and from false."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pmutop.core.dram_reading import DramReading, PackageDram

PACKAGES_PREFIX = b'{"packages":'


@dataclass(frozen=True)
class RecordedPackages:
    """One DRAM reading as recorded: every package, read after the CPU samples whose run time is `time`."""

    interval: int
    time: float
    packages: list[PackageDram]


def _channel_to_dict(c: DramReading, package: int, interval: float) -> dict[str, Any]:
    out: dict[str, Any] = {"pmu": c.pmu, "channel": c.channel, "read_bytes": c.read_bytes, "write_bytes": c.write_bytes}
    if c.interval != interval:
        out["interval"] = c.interval
    if c.saturated:
        out["saturated"] = True
    if c.package != package:
        out["package"] = c.package
    return out


def packages_to_dict(interval: int, time: float, packages: list[PackageDram]) -> dict[str, Any]:
    return {
        "interval": interval,
        "time": time,
        "packages": [
            {
                "package": p.package,
                "interval": p.interval,
                "read_bytes": p.read_bytes,
                "write_bytes": p.write_bytes,
                "peak_bytes_per_s": p.peak_bytes_per_s,
                "saturated": p.saturated,
                "channels": [_channel_to_dict(c, p.package, p.interval) for c in p.channels],
            }
            for p in packages
        ],
    }


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _number(value: Any) -> float | None:
    """Bytes as written: an integer stays one (printed as the live run printed it)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"not a number of bytes: {value!r}")
    return value


def _rate(value: float | None, interval: float) -> float | None:
    return None if value is None or interval <= 0 else value / interval


def package_from_dict(d: dict[str, Any]) -> PackageDram:
    """Raises KeyError/TypeError/ValueError on a malformed package."""
    package, interval = int(d["package"]), float(d["interval"])
    channels = tuple(
        DramReading(
            pmu=str(c["pmu"]),
            package=int(c.get("package", package)),
            channel=int(c["channel"]),
            read_bytes=_number(c.get("read_bytes")),
            write_bytes=_number(c.get("write_bytes")),
            interval=float(c.get("interval", interval)),
            saturated=bool(c.get("saturated", False)),
        )
        for c in d.get("channels") or ()
    )
    read, write = _number(d.get("read_bytes")), _number(d.get("write_bytes"))
    return PackageDram(
        package=package,
        read_bytes=read,
        write_bytes=write,
        read_bytes_per_s=_rate(read, interval),
        write_bytes_per_s=_rate(write, interval),
        interval=interval,
        peak_bytes_per_s=_opt_float(d.get("peak_bytes_per_s")),
        channels=channels,
        saturated=bool(d.get("saturated", False)),
    )


def packages_from_dict(d: dict[str, Any]) -> RecordedPackages:
    """Raises KeyError/TypeError/ValueError/AttributeError on a malformed reading (the reader says where)."""
    return RecordedPackages(int(d["interval"]), float(d["time"]), [package_from_dict(p) for p in d["packages"]])
