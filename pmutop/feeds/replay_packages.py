"""The memory views of a replay: a PackageFeed (pmutop.core.dram_reading) over the DRAM readings a recording
holds, filled by the replay feed as it pushes each interval (get it as `ReplayFeed.package_feed`: None for a
recording made without a DRAM source). `source_name` and `why` are the recording's, so a replay of the
simulated machine still says SIMULATED."""

from __future__ import annotations

from pmutop.core.dram_reading import PackageDram
from pmutop.core.timeline import KEEP, Timeline


class ReplayPackageFeed(Timeline[list[PackageDram]]):
    """`push` is the replay feed's (its pacing thread or a seek); the rest is for the view (any thread). A seek
    clears it (the intervals pushed next are the history; the view redraws: seq moves on)."""

    def __init__(self, source_name: str, why: str, keep: int = KEEP) -> None:
        super().__init__(keep)
        self._source_name = source_name
        self._why = why

    @property
    def source_name(self) -> str:
        return self._source_name

    @property
    def why(self) -> str:
        return self._why

    def history(self, package: int) -> list[PackageDram]:
        return [p for packages in self.readings() for p in packages if p.package == package]

    def push(self, time: float, packages: list[PackageDram]) -> None:
        """One recorded reading, stamped with the run time of the CPU samples it was read after."""
        self.append(time, packages)
