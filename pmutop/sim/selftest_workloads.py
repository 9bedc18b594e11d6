"""The self-test's workloads on the simulated PMU: what each C workload of the shim would make a core count.

`pmutop selftest --demo` runs the same checks as on hardware; instead of executing the shim's loops, the
`SimWorkloadRunner` scripts the simulated CPU: for the run of one workload it appends a segment whose counts
follow that workload's per-unit profile (below) to the CPU's `ScriptedWorkload`, and advances the manual clock
by the segment's duration. The numbers are synthetic (labelled SIMULATED like every simulated number) but
shaped like a real core's, so each check passes on a working model and fails when the model miscounts.
"""

from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass

from pmutop.core.clock import ManualClock
from pmutop.sim.hashing import hash_unit
from pmutop.sim.platform import SimPlatform
from pmutop.sim.workload import Amounts, Counts

LINE = 64
_GHZ = 3.0  # the core clock while a self-test workload runs (any value; the checks do not depend on it)
_ZERO = Amounts(*([0] * len(Amounts._fields)))
# Each simulated core runs the workloads a little differently, as real cores do (its clock, how many cycles a
# loop takes, how many loads miss, branches mispredict, slots go where): a few percent per core, a fixed hash
# of (seed, cpu), never enough to change a check's verdict.
_VARIATION_KEY = 0x7374  # "st"
_SPREAD_CYCLES = 0.06  # cycles per unit: x 1.00 .. 1.06 (never fewer than the profile's)
_SPREAD_GHZ = 0.1  # the clock: x 0.95 .. 1.05
_SPREAD_MISSES = 0.04  # LLC misses short of the references: x 0.96 .. 1.00
_SPREAD_SHARE = 0.1  # branch misses and the top-down shares: x 0.95 .. 1.05


@dataclass(frozen=True)
class Profile:
    """Per unit of work (one loop iteration, one load, one pass): counts and the top-down split of the slots."""

    instructions: float
    cycles: float
    branches: float
    branch_misses: float
    llc_references: float
    llc_misses: float
    retiring: float  # level-1 shares of the slots; backend bound is the rest
    bad_spec: float
    fe_bound: float
    writebacks: float = 0.0  # dirty lines leaving the LLC (the simulated memory's writes: pmutop.sim.dram)


# One profile per shim workload (pmutop/hw/workloads.py documents the real loops).
WORKLOADS: dict[str, Profile] = {
    # `dec; jnz`: 2 instructions, 1 cycle per iteration; retires at full speed.
    "instructions": Profile(2, 1, 1, 0, 0, 0, 0.33, 0.01, 0.05),
    # One dependent load per step from a buffer far larger than the LLC: nearly every load misses.
    "chase": Profile(4, 280, 1, 0, 1.0, 0.97, 0.01, 0.0, 0.02),
    # xorshift and one branch taken at random: half of those branches mispredict.
    "branches_random": Profile(9, 10, 2, 0.5, 0, 0, 0.2, 0.55, 0.1),
    "branches_predictable": Profile(9, 3, 2, 0.0005, 0, 0, 0.5, 0.01, 0.1),
    # One pass through 4096 jumps on 64-byte lines plus the loop's `dec; jnz`: instruction-cache bound.
    "jumps": Profile(4098, 4096 * 5, 4097, 1, 64, 1, 0.04, 0.01, 0.85),
    # The DRAM check's stream, per 64-byte line: the write pass (memset: whole lines written without a read for
    # ownership, each dirty line written back once) and the read pass (memchr: each line missed once).
    "stream_write": Profile(0.5, 4, 0.1, 0, 0, 0, 0.05, 0.0, 0.02, writebacks=1.0),
    "stream_read": Profile(2, 6, 0.5, 0, 1.0, 1.0, 0.1, 0.0, 0.02),
    # The Python between two counter reads and around the call: a fixed cost the empty run measures.
    "overhead": Profile(40_000, 50_000, 8_000, 300, 200, 20, 0.25, 0.1, 0.35),
}


class ScriptedWorkload:
    """A simulated CPU's counts as a list of scripted segments (idle in between), with Workload's interface
    (ticks, cumulative, e_core), for SimMachine.replace_workload."""

    def __init__(
        self, tsc_hz: int, width: int, base: Counts, e_core: bool = False, variation: tuple[float, ...] = ()
    ) -> None:
        """`variation`: this core's units in [0, 1) (clock, cycles, misses, branch misses, top-down shares) that
        set how far it runs from the profiles; none: exactly the profiles."""
        self.tsc_hz = tsc_hz
        self._variation = variation or (0.0, 0.5, 0.0, 0.5, 0.5, 0.5, 0.5)
        self.slots_per_cycle = width
        self.e_core = e_core
        self._base = base  # the replaced workload's counts at the moment of the swap: counting goes on from them
        self._lock = threading.Lock()
        self._starts: list[int] = []
        self._segments: list[tuple[int, int, Amounts, Amounts]] = []  # (t0, t1, before, added)
        self._writebacks: list[tuple[int, int]] = []  # per segment: (write-backs before, added)

    def ticks(self, t_ns: int) -> int:
        return t_ns * self.tsc_hz // 1_000_000_000

    def cumulative(self, t_ns: int) -> Counts:
        with self._lock:
            i = bisect.bisect_right(self._starts, t_ns) - 1
            if i < 0:
                user = self._base.user
            else:
                t0, t1, before, added = self._segments[i]
                done = min(t_ns, t1) - t0
                user = Amounts(*(b + a * done // (t1 - t0) for b, a in zip(before, added, strict=True)))
        return Counts(self.ticks(t_ns), user, self._base.kernel)

    def cumulative_writebacks(self, t_ns: int) -> int:
        """Lines written back to memory by the scripted segments up to t (the simulated memory's writes)."""
        with self._lock:
            i = bisect.bisect_right(self._starts, t_ns) - 1
            if i < 0:
                return 0
            t0, t1, _, _ = self._segments[i]
            before, added = self._writebacks[i]
            return before + added * (min(t_ns, t1) - t0) // (t1 - t0)

    def add(self, t0_ns: int, profile: Profile, units: int) -> int:
        """Script `units` of `profile` from t0 on (user mode, the core busy all along); returns its length (ns)."""
        v_cycles, v_ghz, v_misses, v_branch, *v_shares = self._variation
        cycles = max(1, round(profile.cycles * units * (1 + _SPREAD_CYCLES * v_cycles)))
        duration = max(1, math.ceil(cycles / (_GHZ * (1 + _SPREAD_GHZ * (v_ghz - 0.5)))))
        ref = duration * self.tsc_hz // 1_000_000_000
        slots = cycles * self.slots_per_cycle
        # A stream misses every line it references on any core; only a partial miss rate differs per core.
        miss_factor = 1 - _SPREAD_MISSES * v_misses if profile.llc_misses < profile.llc_references else 1.0
        shares = (profile.retiring, profile.bad_spec, profile.fe_bound)
        ret, bad, fe = (int(slots * x * (1 + _SPREAD_SHARE * (v - 0.5))) for x, v in zip(shares, v_shares, strict=True))
        be = slots - ret - bad - fe
        recovery = bad // (2 * self.slots_per_cycle)
        added = Amounts(
            cycles=cycles,
            instructions=round(profile.instructions * units),
            ref_cycles=ref,
            llc_references=round(profile.llc_references * units),
            llc_misses=round(profile.llc_misses * units * miss_factor),
            branches=round(profile.branches * units),
            branch_misses=round(profile.branch_misses * units * (1 + _SPREAD_SHARE * (v_branch - 0.5))),
            slots=slots,
            td_retiring=ret,
            td_bad_spec=bad,
            td_fe_bound=fe,
            td_be_bound=be,
            td_heavy_ops=ret // 10,
            td_br_mispredict=bad * 9 // 10,
            td_fetch_lat=fe * 8 // 10,
            td_mem_bound=be * 8 // 10,
            uops_issued=ret + bad - self.slots_per_cycle * recovery,
            recovery_cycles=recovery,
        )
        with self._lock:
            before = self._base.user if not self._segments else self._end(self._segments[-1])
            if self._segments and t0_ns < self._segments[-1][1]:
                raise ValueError("scripted segments must not overlap")
            self._starts.append(t0_ns)
            self._segments.append((t0_ns, t0_ns + duration, before, added))
            written = sum(self._writebacks[-1]) if self._writebacks else 0
            self._writebacks.append((written, round(profile.writebacks * units)))
        return duration

    @staticmethod
    def _end(segment: tuple[int, int, Amounts, Amounts]) -> Amounts:
        _, _, before, added = segment
        return Amounts(*(b + a for b, a in zip(before, added, strict=True)))


class SimWorkloadRunner:
    """Runs the self-test's workloads on a simulated CPU: scripts its counts and moves the manual clock."""

    simulated = True

    def __init__(self, platform: SimPlatform) -> None:
        if not isinstance(platform.clock, ManualClock):
            raise ValueError("the simulated self-test needs a SimPlatform on a ManualClock")
        self.platform = platform
        self.clock: ManualClock = platform.clock
        self._scripts: dict[int, ScriptedWorkload] = {}
        self._stream_lines = 0

    def describe(self) -> str:
        return "simulated workloads (pmutop/sim/selftest_workloads.py)"

    def _script(self, cpu: int) -> ScriptedWorkload:
        script = self._scripts.get(cpu)
        if script is None:
            machine = self.platform.machine
            old = machine.workload(cpu)
            now = machine.elapsed_ns()
            seed = machine.config.seed
            variation = tuple(hash_unit(seed, cpu, _VARIATION_KEY, i) for i in range(7))
            script = ScriptedWorkload(
                old.tsc_hz, old.slots_per_cycle, old.cumulative(now), e_core=old.e_core, variation=variation
            )
            machine.replace_workload(cpu, script)  # type: ignore[arg-type]
            self._scripts[cpu] = script
        return script

    def _run(self, cpu: int, name: str, units: int) -> None:
        script = self._script(cpu)
        for profile, n in ((WORKLOADS["overhead"], 1), (WORKLOADS[name], units)):
            if n:
                self.clock.advance(script.add(self.platform.machine.elapsed_ns(), profile, n) / 1e9)

    def instructions(self, cpu: int, iterations: int) -> int:
        self._run(cpu, "instructions", iterations)
        return iterations

    def chase(self, cpu: int, steps: int) -> int:
        self._run(cpu, "chase", steps)
        return steps

    def branches(self, cpu: int, iterations: int, random: bool) -> int:
        self._run(cpu, "branches_random" if random else "branches_predictable", iterations)
        return iterations

    def jumps(self, cpu: int, passes: int) -> int:
        self._run(cpu, "jumps", passes)
        return passes

    def prepare_stream(self, cpu: int, nbytes: int) -> None:
        """Quiet the whole machine (every CPU scripted, idle between its segments), as the check on hardware
        wants an idle machine: the memory controllers count every core's traffic."""
        for other in self.platform.machine.cpus:
            self._script(other)
        self._stream_lines = nbytes // LINE

    def stream(self, cpu: int) -> tuple[int, int]:
        """The DRAM check's stream on `cpu`: the prepared buffer written, then read; (bytes read, written)."""
        lines = self._stream_lines
        self._run(cpu, "stream_write", lines)
        self._run(cpu, "stream_read", lines)
        return lines * LINE, lines * LINE

    def close(self) -> None:
        pass
