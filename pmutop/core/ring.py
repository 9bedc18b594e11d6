"""A bounded single-writer ring: the sampler appends, any number of readers copy without locks."""

from __future__ import annotations

from collections.abc import Iterator

from pmutop.core.sample import Sample


class SampleRing:
    def __init__(self, capacity: int = 600) -> None:
        if capacity < 1:
            raise ValueError("capacity must be >= 1")
        self.capacity = capacity
        self._slots: list[Sample | None] = [None] * capacity
        self._count = 0  # samples ever pushed; written only by the sampler thread

    def push(self, sample: Sample) -> None:
        # The slot is filled before the count moves, so a reader never sees a count without its sample.
        self._slots[self._count % self.capacity] = sample
        self._count += 1

    @property
    def count(self) -> int:
        return self._count

    def latest(self) -> Sample | None:
        n = self._count
        return self._slots[(n - 1) % self.capacity] if n else None

    def since(self, count: int) -> list[Sample]:
        """Samples pushed after the reader had seen `count` of them (oldest first, at most `capacity`)."""
        end = self._count
        if end == count + 1:  # one new sample, as each interval of a batch run: no list of slots to filter
            s = self._slots[count % self.capacity]
            return [s] if s is not None and s.seq > count else []
        start = max(count, end - self.capacity)
        out = [self._slots[i % self.capacity] for i in range(start, end)]
        # A slot overwritten while we copied holds a newer sample; drop anything out of order.
        return [s for s in out if s is not None and s.seq > count][: end - start]

    def __iter__(self) -> Iterator[Sample]:
        return iter(self.since(0))

    def __len__(self) -> int:
        return min(self._count, self.capacity)
