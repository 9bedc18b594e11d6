"""A PackageFeed of given values (no uncore PMU, no simulator): deterministic DRAM figures for the live view's
tests."""

from __future__ import annotations

from pmutop.core.dram_reading import SOURCE_UNCORE, DramReading, PackageDram, package_totals


def package(
    number: int,
    read_gbs: float,
    write_gbs: float,
    *,
    channels: int = 8,
    peak_gbs: float | None = 307.2,
    saturated: bool = False,
    pmu: str = "uncore_imc",
) -> PackageDram:
    """A package whose `channels` carry its read and write traffic evenly over one second."""
    per_read, per_write = read_gbs * 1e9 / channels, write_gbs * 1e9 / channels
    readings = tuple(
        DramReading(f"{pmu}_{number * channels + ch}", number, ch, per_read, per_write, 1.0, saturated and ch == 0)
        for ch in range(channels)
    )
    return package_totals(number, readings, 1.0, None if peak_gbs is None else peak_gbs * 1e9)


class FakePackageFeed:
    """The latest packages and a history, given; `push()` adds an interval (seq moves on)."""

    def __init__(self, intervals: list[list[PackageDram]], start: float = 1.0, source: str = SOURCE_UNCORE) -> None:
        self._timeline = [(start + k, packages) for k, packages in enumerate(intervals)]
        self._source = source
        self.latest_calls = 0

    @property
    def seq(self) -> int:
        return len(self._timeline)

    @property
    def source_name(self) -> str:
        return self._source

    @property
    def why(self) -> str:
        return "uncore_imc_0..15: 16 memory channels on 2 packages (pmutop's table: SPR)"

    def latest(self) -> list[PackageDram] | None:
        self.latest_calls += 1
        return self._timeline[-1][1] if self._timeline else None

    def latest_time(self) -> float:
        return self._timeline[-1][0] if self._timeline else 0.0

    def history(self, number: int) -> list[PackageDram]:
        return [p for _, packages in self._timeline for p in packages if p.package == number]

    def timeline(self) -> list[tuple[float, list[PackageDram]]]:
        return list(self._timeline)

    def push(self, packages: list[PackageDram], at: float) -> None:
        self._timeline.append((at, packages))
