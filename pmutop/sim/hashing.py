"""The simulator's deterministic hashes (splitmix64): every per-segment, per-burst and per-phase draw of the
simulated workload is a function of integer keys (seed, cpu, segment, ...), whenever and however often asked."""

from __future__ import annotations

_M64 = (1 << 64) - 1


def mix64(x: int) -> int:
    """splitmix64 finaliser: a cheap, well-spread 64-bit hash."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def hash64(*keys: int) -> int:
    """A deterministic 64-bit hash of integer keys."""
    x = 0
    for k in keys:
        x = _mix64_after(x, k)
    return x


def _mix64_after(x: int, k: int) -> int:
    """hash64(*keys, k) given x = hash64(*keys): the hash is a chain, so a fixed prefix of keys (seed, cpu) is
    hashed once per workload and each segment's hash costs one mix."""
    return mix64(x ^ (k & _M64))


def hash_unit(*keys: int) -> float:
    """A deterministic number in [0, 1) from integer keys."""
    return (hash64(*keys) >> 11) / float(1 << 53)


def _hash_units8(*keys: int) -> list[float]:
    """Eight numbers in (0, 1) from one hash (1/256 resolution is plenty for jitter)."""
    h = hash64(*keys)
    return [(((h >> (8 * i)) & 0xFF) + 0.5) / 256.0 for i in range(8)]
