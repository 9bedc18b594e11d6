"""Native sampler threads (shim/pmutop_sampler.c): one pthread per core that, on every deadline of one shared
schedule, reads the TSC and the counters (rdpmc, or one pread per register of the core's msr file), then
GLOBAL_STATUS, then the core's extra registers (the power monitor's, pmutop.probes.power: set before the
schedule; one that fails is flagged in the reading, the thread goes on) into its slot. One Python thread
drains all the slots once per interval.

Why: a Python thread per core wakes once per interval and hands the GIL over at every pread; at 256 cores
those wake-ups and hand-offs cost about 8x the reads themselves (benchmarks/sampler.py). The native threads
only read: every register write (programming, clearing GLOBAL_STATUS bits, restoring) stays in Python
behind MsrDevice.write's allowlist.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

from pmutop.hw import shim

# Per core in pmutop_group_read's output: readings published, clock ns, GLOBAL_STATUS, errno, failed address,
# whether the foreign-use check ran, the checks that differed, the extra registers that failed.
HEADER = 8
# Extra registers a core's thread can read per reading (MAX_EXTRA in pmutop_sampler.c).
MAX_EXTRA = 16
# The errno a reading reports when the msr file returned less than 8 bytes (pmutop_sampler.c): no such register.
SHORT_READ = 0x10000
# The failed address a reading reports when its thread could not be pinned to its CPU (pmutop_sampler.c).
PIN_FAILED = 0xFFFFFFFF


def available() -> bool:
    """The shim is built with the native samplers as this module drives them (an older build has no
    pmutop_group_extra, or no pmutop_group_new at all)."""
    return shim.lib is not None and hasattr(shim.lib, "pmutop_group_extra")


@dataclass(frozen=True)
class NativeCore:
    """What one native thread reads: with `rdpmc`, TSC + fixed 0..n_fixed-1 + GP 0..n_gp-1 (+ PERF_METRICS)
    by rdpmc on `cpu` (pinned there); otherwise `addresses` (TSC first) from the msr file `fd`, register A at
    offset A * stride. GLOBAL_STATUS (`status_address`) always from the msr file."""

    cpu: int
    pin: bool
    fd: int
    stride: int
    status_address: int
    addresses: tuple[int, ...] = ()
    rdpmc: bool = False
    n_fixed: int = 0
    n_gp: int = 0
    metrics: bool = False

    @property
    def n_values(self) -> int:
        return 1 + self.n_fixed + self.n_gp + int(self.metrics) if self.rdpmc else len(self.addresses)


class NativeReading(NamedTuple):
    """One core's latest reading: published = 0 nothing yet, 1 the baseline, 1 + k sample k; `checked` when
    the foreign-use check ran with it, `foreign` its checks that differed (bit j: check j); `extra` the
    extra registers (set_extra) and `extra_failed` those that could not be read (bit j: extra j, its value 0)."""

    published: int
    at_ns: int
    status: int
    errno: int
    failed_address: int
    checked: int  # 1 or 0
    foreign: int
    extra_failed: int
    tsc: int
    values: list[int]
    extra: list[int]


class NativeSamplerGroup:
    """The native threads of one engine. Not thread-safe itself: one Python thread drives it (plus stop())."""

    def __init__(self, cores: list[NativeCore], n_extra: int = 0) -> None:
        """`n_extra`: room for that many extra registers per core (set_extra), at most MAX_EXTRA."""
        if not 0 <= n_extra <= MAX_EXTRA:
            raise ValueError(f"room for {n_extra} extra registers per core: at most {MAX_EXTRA}")
        ffi, lib = shim.ffi, shim.lib
        self.cores = cores
        self._n_values = max((c.n_values for c in cores), default=1)
        group = lib.pmutop_group_new(len(cores), self._n_values, n_extra)
        if group == ffi.NULL:
            raise OSError("cannot allocate the native sampler group")
        self._group = group
        self._lib = lib
        self._n_extra = n_extra
        self._stride = HEADER + self._n_values + n_extra
        self._out = ffi.new("uint64_t[]", len(cores) * self._stride)
        self._buffer = ffi.buffer(self._out)
        self._need = ffi.new("uint64_t[]", max(len(cores), 1))
        # Where each core's row, values and extra registers are in read()'s output, worked out once rather
        # than at every read: (row, first value, end of values, end of extras).
        self._rows = [self._row(i, c.n_values, 0) for i, c in enumerate(cores)]
        for i, core in enumerate(cores):
            addresses = ffi.new("uint32_t[]", list(core.addresses) or [0])
            rc = lib.pmutop_group_core(
                group,
                i,
                core.cpu,
                int(core.pin),
                core.fd,
                core.stride,
                int(core.rdpmc),
                core.n_fixed,
                core.n_gp,
                int(core.metrics),
                addresses,
                len(core.addresses),
                core.status_address,
            )
            if rc != 0:
                lib.pmutop_group_free(group)
                raise OSError(-rc, f"cannot set up the native sampler of cpu {core.cpu}")
        self._started = False
        self._stopped = False

    def _row(self, i: int, n_values: int, n_extra: int) -> tuple[int, int, int, int]:
        base = i * self._stride
        first = base + HEADER + 1
        return base, first, base + HEADER + n_values, base + HEADER + self._n_values + n_extra

    def set_checks(self, index: int, checks: list[tuple[int, int, int]], every_ns: int) -> None:
        """The foreign-use check of core `index`: (address, mask, expected) each, at most every every_ns
        (and at every reading while one differs). Before start()."""
        ffi = shim.ffi
        addresses = ffi.new("uint32_t[]", [a for a, _, _ in checks] or [0])
        masks = ffi.new("uint64_t[]", [m for _, m, _ in checks] or [0])
        expected = ffi.new("uint64_t[]", [e for _, _, e in checks] or [0])
        rc = self._lib.pmutop_group_checks(self._group, index, addresses, masks, expected, len(checks), every_ns)
        if rc != 0:
            raise OSError(-rc, f"cannot set up the foreign-use check of cpu {self.cores[index].cpu}")

    def set_extra(self, index: int, addresses: list[int]) -> None:
        """The extra registers core `index` reads after GLOBAL_STATUS at every scheduled reading (only read;
        from the same msr file as its counters). After start(), before the first schedule()."""
        if len(addresses) > self._n_extra:
            raise OSError(f"cpu {self.cores[index].cpu}: {len(addresses)} extra registers, room for {self._n_extra}")
        ffi = shim.ffi
        rc = self._lib.pmutop_group_extra(self._group, index, ffi.new("uint32_t[]", addresses or [0]), len(addresses))
        if rc != 0:
            raise OSError(-rc, f"cannot set the extra registers of cpu {self.cores[index].cpu}")
        self._rows[index] = self._row(index, self.cores[index].n_values, len(addresses))

    def start(self) -> None:
        """Start the threads: each pins itself, takes its baseline reading, then waits for a schedule."""
        rc = self._lib.pmutop_group_start(self._group)
        self._started = True
        if rc != 0:
            raise OSError(-rc, "cannot start the native sampler threads")

    def schedule(self, epoch_ns: int, interval_ns: int) -> None:
        """Deadlines epoch + k * interval from now on (k from 1); wakes every thread and the drain."""
        if self._stopped:  # a late set_interval: the group may be freed
            return
        self._lib.pmutop_group_schedule(self._group, epoch_ns, interval_ns)

    def total(self) -> int:
        """Readings published so far, all cores together (baselines included)."""
        return int(self._lib.pmutop_group_total(self._group))

    def wait(self, need: list[int], deadline_ns: int) -> int:
        """Until every core i with need[i] > 0 has published need[i] readings (0), the CLOCK_MONOTONIC
        deadline (1), or a kick or stop (2). The GIL is released meanwhile (cffi)."""
        self._need[0 : len(need)] = need
        return int(self._lib.pmutop_group_wait(self._group, self._need, deadline_ns))

    def kick(self) -> None:
        """End a wait() now."""
        if self._stopped:
            return
        self._lib.pmutop_group_kick(self._group)

    def read(self) -> list[NativeReading]:
        """Every core's latest reading (each consistent in itself)."""
        self._lib.pmutop_group_read(self._group, self._out)
        flat = memoryview(self._buffer).cast("Q").tolist()
        n_values = self._n_values
        return [
            NativeReading._make(
                (*flat[base : base + HEADER], flat[first - 1], flat[first:end], flat[first - 1 + n_values : extra_end])
            )
            for base, first, end, extra_end in self._rows
        ]

    def stop_core(self, index: int) -> None:
        self._lib.pmutop_group_stop_core(self._group, index)

    def stop(self, timeout_s: float, *, free: bool = True) -> bool:
        """Stop every thread and join them (at most timeout_s); True when all ended. Once only. `free`: nobody
        calls this group any more (else it is left allocated: a few kB, never a use after free)."""
        if self._stopped:
            return True
        self._stopped = True
        running = self._lib.pmutop_group_stop(self._group, time.monotonic_ns() + round(timeout_s * 1e9))
        if free:  # pmutop_group_free itself keeps what a thread stuck in a read still uses
            self._lib.pmutop_group_free(self._group)
        return running == 0
