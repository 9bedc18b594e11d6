"""`pmutop selftest`: known workloads through the real programming and reading path, checked against what
they must count.

On each selected CPU, in a thread pinned there, the backend's counters are started (CpuCounters.start) and
read (CpuCounters.read) right before and after each workload, exactly as a sampler reads them, so the check
covers the backend's programming, reading, wrap and top-down code. The workloads are the shim's C loops on
real hardware (pmutop.hw.workloads) and scripted counts on the simulated PMU (pmutop.sim.selftest_workloads).

Checks, each PASS / FAIL (or SKIP with the reason) with the measured numbers and the expected range:
* instructions: the `dec; jnz` loop of N iterations counts 2N instructions (its count minus an empty run's,
  which measures the reads and the Python around the call) within INSTR_TOLERANCE;
* ref-cycles: ref cycles / TSC ticks within REF_TSC_RANGE (the thread was busy all along, and the fixed
  reference counter ticks at the TSC rate);
* cycles: at least CYCLES_PER_ITERATION_MIN per iteration (the dec chain allows 1 per cycle at best), and the
  clock they imply (cycles / ref cycles x TSC rate) within GHZ_RANGE;
* llc-misses: misses per 1000 instructions of the pointer chase >= LLC_FACTOR x those of the loop (and >= 1);
* branch-misses: the random branches' miss ratio >= BRANCH_FACTOR x the predictable loop's and BRANCH_MARGIN more;
* top-down: backend-bound share higher for the pointer chase than for the jump chain, frontend-bound share
  higher for the jump chain than for the pointer chase (only where top-down is measured).
* memory (once, on the first CPU): a buffer 8x the LLC written and read whole; the memory controllers (all
  packages) must count its bytes read and written within STREAM_TOLERANCE each. Skipped, with the reason, where
  nothing measures DRAM traffic (pmutop.app.dram_setup); the machine should be otherwise idle.

Exit status: 0 all passed, 1 a check failed, EXIT_NO_PMU (5) when this machine has no usable PMU (one line says
why); the usual 2 (usage), 3 (PMU in use), 4 (not restored).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Protocol

from pmutop.app.backend_factory import build_backend, choose_backend
from pmutop.app.console import say
from pmutop.app.dram_setup import open_dram
from pmutop.app.options import selftest_parser
from pmutop.app.platform_setup import SIM_WITH_SYSROOT, sysroot_dir
from pmutop.app.session import MeasurementSession
from pmutop.backends.base import Backend, CpuCounters, Reading
from pmutop.backends.choose import BackendChoice, BackendRequest
from pmutop.core.clock import ManualClock
from pmutop.core.cpulist import format_cpu_list, select_cpus
from pmutop.core.dram_reading import SOURCE_SIMULATED, DramSource, PackageDram
from pmutop.core.errors import HardwareError, NoPmuError, PmuInUseError, PmutopError, UsageError
from pmutop.derive import topdown
from pmutop.hw.cpus import describe_cpus
from pmutop.hw.platform import HostPlatform, Platform
from pmutop.safety.exit_guard import ExitGuard

INSTRUCTIONS_PER_ITERATION = 2  # `dec; jnz` (shim/pmutop_shim.c pmutop_wl_instructions)
INSTR_TOLERANCE = 0.01  # +-1% of the expected count: interrupts and the reads themselves vary a little
REF_TSC_RANGE = (0.95, 1.02)
CYCLES_PER_ITERATION_MIN = 0.95
GHZ_RANGE = (0.2, 8.0)
LLC_FACTOR = 10.0
BRANCH_FACTOR = 3.0
BRANCH_MARGIN = 0.02  # 2 percentage points
STREAM_TOLERANCE = 0.15  # +-15% of the bytes streamed, each direction: other traffic, lines left in the LLC

# How much work each workload does (about 20-200 ms each on current hardware).
LOOP_ITERATIONS = 50_000_000
CHASE_STEPS = 2_000_000
BRANCH_ITERATIONS = 10_000_000
JUMP_PASSES = 5_000


class WorkloadRunner(Protocol):
    """Runs one workload on `cpu` from the calling thread (pinned there on real hardware)."""

    simulated: bool

    def describe(self) -> str: ...

    def instructions(self, cpu: int, iterations: int) -> int: ...

    def chase(self, cpu: int, steps: int) -> int: ...

    def branches(self, cpu: int, iterations: int, random: bool) -> int: ...

    def jumps(self, cpu: int, passes: int) -> int: ...

    def prepare_stream(self, cpu: int, nbytes: int) -> None: ...

    def stream(self, cpu: int) -> tuple[int, int]: ...

    def close(self) -> None: ...


@dataclass
class Check:
    cpu: int
    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str
    values: dict[str, float] = field(default_factory=dict)  # the measured numbers, for --json

    def line(self) -> str:
        return f"cpu {self.cpu:<3} {self.status:<4}  {self.name:<17} {self.detail}"


def _n(x: float) -> str:
    return f"{x:,.0f}"


def _pct(x: float) -> str:
    return f"{100 * x:.2f}%"


class CpuSelftest:
    """The workloads and checks of one CPU, run on the thread that owns its counters."""

    def __init__(self, cpu: int, counters: CpuCounters, runner: WorkloadRunner, method: str | None) -> None:
        self.cpu = cpu
        self.counters = counters
        self.runner = runner
        self.method = method
        self.checks: list[Check] = []
        self._seconds: dict[int, float] = {}  # id(reading) -> its interval (Reading keeps only the end time)

    def measure(self, work: Callable[[], object]) -> Reading:
        before = self.counters.read()  # the baseline: everything before this is someone else's
        work()
        after = self.counters.read()
        self._seconds[id(after)] = (after.at_ns - before.at_ns) / 1e9
        return after

    def add(self, name: str, ok: bool | None, detail: str, **values: float) -> None:
        status = "SKIP" if ok is None else "PASS" if ok else "FAIL"
        self.checks.append(Check(self.cpu, name, status, detail, values))

    def missing(self, readings: list[Reading], *keys: str) -> str | None:
        for key in keys:
            for r in readings:
                if key not in r.counts:
                    return f"{key.replace('_', '-')} not counted on this cpu"
                if key in r.estimated:
                    return f"{key.replace('_', '-')} multiplexed (estimated), not exact enough to check"
        return None

    def run(self) -> list[Check]:
        cpu, run = self.cpu, self.runner
        self.counters.start()
        empty = self.measure(lambda: run.instructions(cpu, 0))
        loop = self.measure(lambda: run.instructions(cpu, LOOP_ITERATIONS))
        chase = self.measure(lambda: run.chase(cpu, CHASE_STEPS))
        predictable = self.measure(lambda: run.branches(cpu, BRANCH_ITERATIONS, False))
        random = self.measure(lambda: run.branches(cpu, BRANCH_ITERATIONS, True))
        jumps = self.measure(lambda: run.jumps(cpu, JUMP_PASSES))
        self.check_instructions(empty, loop)
        self.check_ref_cycles(loop)
        self.check_cycles(loop)
        self.check_llc(loop, chase)
        self.check_branches(predictable, random)
        self.check_topdown(chase, jumps)
        return self.checks

    def check_instructions(self, empty: Reading, loop: Reading) -> None:
        why = self.missing([empty, loop], "instructions")
        if why:
            self.add("instructions", None, why)
            return
        expected = INSTRUCTIONS_PER_ITERATION * LOOP_ITERATIONS
        counted = loop.counts["instructions"] - empty.counts["instructions"]
        error = (counted - expected) / expected
        self.add(
            "instructions",
            abs(error) <= INSTR_TOLERANCE,
            f"{_n(counted)} counted (loop {_n(loop.counts['instructions'])} - empty run "
            f"{_n(empty.counts['instructions'])}), expected {_n(expected)} ±{_pct(INSTR_TOLERANCE)}: "
            f"{error:+.3%}",
            counted=counted,
            expected=expected,
            error=error,
        )

    def check_ref_cycles(self, loop: Reading) -> None:
        why = self.missing([loop], "ref_cycles")
        if why or not loop.tsc:
            self.add("ref-cycles", None, why or "no TSC reading with this backend")
            return
        ratio = loop.counts["ref_cycles"] / loop.tsc
        lo, hi = REF_TSC_RANGE
        self.add(
            "ref-cycles",
            lo <= ratio <= hi,
            f"{_n(loop.counts['ref_cycles'])} ref cycles / {_n(loop.tsc)} TSC ticks = {ratio:.4f}, "
            f"expected {lo}..{hi} (busy thread)",
            ref_cycles=loop.counts["ref_cycles"],
            tsc=loop.tsc,
            ratio=ratio,
        )

    def check_cycles(self, loop: Reading) -> None:
        why = self.missing([loop], "cycles")
        if why:
            self.add("cycles", None, why)
            return
        cycles = loop.counts["cycles"]
        per_iteration = cycles / LOOP_ITERATIONS
        ok = per_iteration >= CYCLES_PER_ITERATION_MIN
        values = {"cycles": float(cycles), "per_iteration": per_iteration}
        detail = (
            f"{_n(cycles)} cycles = {per_iteration:.3f} per iteration, expected >= {CYCLES_PER_ITERATION_MIN}"
            " (dec chain)"
        )
        ref, seconds = loop.counts.get("ref_cycles"), self._seconds.get(id(loop))
        if ref and loop.tsc and seconds:
            ghz = cycles / ref * loop.tsc / seconds / 1e9
            lo, hi = GHZ_RANGE
            ok = ok and lo <= ghz <= hi
            detail += f"; cycles / ref cycles x TSC rate = {ghz:.2f} GHz, expected {lo}..{hi}"
            values["ghz"] = ghz
        self.add("cycles", ok, detail, **values)

    def check_llc(self, loop: Reading, chase: Reading) -> None:
        why = self.missing([loop, chase], "llc_misses", "instructions")
        if why:
            self.add("llc-misses", None, why)
            return

        def mpki(r: Reading) -> float:
            return 1000 * r.counts["llc_misses"] / max(r.counts["instructions"], 1)

        a, b = mpki(chase), mpki(loop)
        self.add(
            "llc-misses",
            a >= max(LLC_FACTOR * b, 1.0),
            f"pointer chase {a:.2f} vs loop {b:.3f} misses per 1k instructions, expected >= {LLC_FACTOR:g}x and >= 1",
            chase_mpki=a,
            loop_mpki=b,
        )

    def check_branches(self, predictable: Reading, random: Reading) -> None:
        why = self.missing([predictable, random], "branches", "branch_misses")
        if why:
            self.add("branch-misses", None, why)
            return

        def ratio(r: Reading) -> float:
            return r.counts["branch_misses"] / max(r.counts["branches"], 1)

        a, b = ratio(random), ratio(predictable)
        self.add(
            "branch-misses",
            a >= BRANCH_FACTOR * b and a >= b + BRANCH_MARGIN,
            f"random {_pct(a)} vs predictable {_pct(b)} of branches missed, expected >= {BRANCH_FACTOR:g}x "
            f"and +{100 * BRANCH_MARGIN:g} points",
            random_miss_ratio=a,
            predictable_miss_ratio=b,
        )

    def check_topdown(self, chase: Reading, jumps: Reading) -> None:
        if self.method is None:
            for name in ("topdown-backend", "topdown-frontend"):
                self.add(name, None, "top-down is not measured on this cpu (see `pmutop info`)")
            return
        if any(chase.estimated.get(k) for k in topdown.required_keys(self.method)):
            for name in ("topdown-backend", "topdown-frontend"):
                self.add(name, None, "top-down events multiplexed (estimated), not exact enough to check")
            return
        c, j = topdown.compute(self.method, chase.counts), topdown.compute(self.method, jumps.counts)
        for name, key, high, low, hname, lname in (
            ("topdown-backend", "tma_backend_bound", c, j, "pointer chase", "jump chain"),
            ("topdown-frontend", "tma_frontend_bound", j, c, "jump chain", "pointer chase"),
        ):
            h, lo = high[key], low[key]
            if h is None or lo is None:
                self.add(name, None, f"top-down ({self.method}) gave no fractions")
                continue
            label = topdown.LABELS[key].lower()
            detail = f"{label} {hname} {_pct(h)} vs {lname} {_pct(lo)}, expected higher"
            self.add(name, h > lo, detail, **{hname.replace(" ", "_"): h, lname.replace(" ", "_"): lo})


# -- driving the CPUs -----------------------------------------------------------------------------------


def run_cpu(platform: Platform, backend: Backend, runner: WorkloadRunner, cpu: int) -> list[Check]:
    """One CPU's self-test, in a thread pinned to it (its counters are read there, as by a sampler)."""
    out: list[list[Check]] = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            platform.pin_current_thread(cpu)
            counters = backend.counters(cpu)
            method = counters.topdown_method or backend.topdown_method(cpu)
            test = CpuSelftest(cpu, counters, runner, method)
            out.append(test.run())
        except BaseException as e:  # reported by the caller as one line
            errors.append(e)

    t = threading.Thread(target=body, name=f"pmutop-selftest-cpu{cpu}", daemon=True)
    t.start()
    t.join()
    if errors:
        e = errors[0]
        if isinstance(e, PmutopError):
            raise e
        raise HardwareError(f"cpu {cpu}: self-test failed: {e}") from e
    return out[0]


# -- memory bandwidth ----------------------------------------------------------------------------------------


def stream_size(platform: Platform, cpu: int) -> int:
    """The DRAM check's buffer: 8x the LLC (the simulated model's, or this host's from sysfs)."""
    from pmutop.hw import workloads

    if platform.simulated:
        from pmutop.sim.dram import MEMORY
        from pmutop.sim.platform import SimPlatform

        assert isinstance(platform, SimPlatform)
        return workloads.stream_bytes(MEMORY[platform.machine.config.model].llc_bytes)
    assert isinstance(platform, HostPlatform)
    return workloads.stream_bytes(workloads.llc_bytes(platform.sysroot, cpu))


def memory_check(platform: Platform, runner: WorkloadRunner, cpu: int) -> Check:
    """Stream a known number of bytes on `cpu` and compare what the memory controllers count (SKIP where nothing
    measures DRAM traffic: never a made-up number)."""
    setup = open_dram(platform, [cpu])
    if setup.source is None:
        return Check(cpu, "memory", "SKIP", f"no DRAM bandwidth source: {setup.why}")
    try:
        return _stream_and_compare(platform, runner, cpu, setup.source)
    finally:
        setup.close()


def _stream_and_compare(platform: Platform, runner: WorkloadRunner, cpu: int, source: DramSource) -> Check:
    nbytes = stream_size(platform, cpu)
    out: list[tuple[tuple[int, int], list[PackageDram]]] = []
    errors: list[BaseException] = []

    def body() -> None:
        try:
            platform.pin_current_thread(cpu)
            runner.prepare_stream(cpu, nbytes)
            source.read()  # the baseline: the allocation and warm-up are not counted
            streamed = runner.stream(cpu)
            out.append((streamed, source.read()))
        except BaseException as e:  # reported as the check's reason
            errors.append(e)

    thread = threading.Thread(target=body, name=f"pmutop-selftest-memory{cpu}", daemon=True)
    thread.start()
    thread.join()
    if errors:
        e = errors[0]
        if not isinstance(e, PmutopError):
            raise HardwareError(f"cpu {cpu}: memory check failed: {e}") from e
        return Check(cpu, "memory", "SKIP", f"could not stream: {e}")
    (read_expected, write_expected), packages = out[0]
    reads = [p.read_bytes for p in packages]
    writes = [p.write_bytes for p in packages]
    if any(v is None for v in reads + writes):
        return Check(cpu, "memory", "SKIP", "a memory channel was not counted during the stream (multiplexed)")
    read = sum(v for v in reads if v is not None)
    write = sum(v for v in writes if v is not None)
    read_error = (read - read_expected) / read_expected
    write_error = (write - write_expected) / write_expected
    ok = abs(read_error) <= STREAM_TOLERANCE and abs(write_error) <= STREAM_TOLERANCE
    what = "SIMULATED memory controllers" if source.source == SOURCE_SIMULATED else f"{source.source} counters"
    detail = (
        f"{_n(nbytes)} bytes streamed: read {_n(read)} ({read_error:+.1%}), wrote {_n(write)} ({write_error:+.1%}), "
        f"expected ±{STREAM_TOLERANCE:.0%} each ({len(packages)} package{'s' * (len(packages) != 1)}, "
        f"{what})"
    )
    values = {"read_bytes": read, "write_bytes": write, "expected_read": read_expected}
    values |= {"expected_write": write_expected, "read_error": read_error, "write_error": write_error}
    return Check(cpu, "memory", "PASS" if ok else "FAIL", detail, values)


# -- no usable PMU ----------------------------------------------------------------------------------------


def no_pmu_reason_msr(platform: Platform, cpus: list[int]) -> str | None:
    """Why the msr backend cannot count here because there is no PMU, or None."""
    survey = describe_cpus(platform, cpus)
    for cpu in cpus:
        described = survey.get(cpu)
        if described.identity.vendor == "GenuineIntel" and described.perfmon.version == 0:
            vm = " (a VM without a virtual PMU)" if described.identity.hypervisor else ""
            return f"cpu {cpu}: CPUID leaf 0xA reports no architectural PMU (version 0){vm}"
    return None


def _choose(request: BackendRequest, platform: HostPlatform) -> BackendChoice:
    """choose_backend, where "no backend can run" because the PMU is missing is NoPmuError."""
    try:
        choice = choose_backend(request, platform)
    except PmuInUseError:
        raise
    except HardwareError as e:
        raise NoPmuError(f"no usable PMU: {e}") from None
    if choice.software_only:
        raise NoPmuError(f"no usable PMU: perf_event_open fails for hardware events ({choice.hardware_problem})")
    return choice


# -- command line --------------------------------------------------------------------------------------------


def _sim_platform(args: argparse.Namespace) -> Platform:
    from pmutop.sim.model import SimConfig
    from pmutop.sim.platform import SimPlatform

    if args.sysroot != "/":
        raise UsageError(SIM_WITH_SYSROOT)
    if not 1 <= args.sim_cpus <= 1024:
        raise UsageError(f"--sim-cpus must be 1..1024 (got {args.sim_cpus})")
    return SimPlatform(SimConfig(cpus=args.sim_cpus, model=args.sim_model), clock=ManualClock())


def selftest_main(argv: list[str], guard: ExitGuard) -> int:
    args = selftest_parser().parse_args(argv)
    if args.demo:
        args.backend = "sim"
    platform = _sim_platform(args) if args.backend == "sim" else HostPlatform(sysroot_dir(args.sysroot))
    cpus = select_cpus(args.cores, platform.online_cpus(), platform.possible_cpus())
    # The default events, both rings, top-down where it is free.
    request = BackendRequest(backend=args.backend, read=args.read, force=args.force)
    session = MeasurementSession(platform, cpus, guard)
    choice = None
    if isinstance(platform, HostPlatform):
        choice = _choose(request, platform)
        if choice.name == "msr":
            why = no_pmu_reason_msr(platform, cpus)
            if why:
                raise NoPmuError(f"no usable PMU: {why}")
        session.recover_leftovers(retry_hint="")
    runner = _runner(platform, cpus)
    backend = build_backend(request, platform, choice)
    checks: list[Check] = []
    header = _header(platform, backend, runner, cpus)
    # The engine only for its way out: Engine.stop runs the undo log once, shared with the exit guard.
    with session.open(backend, ["selftest", *argv], interval=1.0, threaded=False) as engine:
        try:
            backend.prepare(cpus, engine.undo)
            # Each CPU is programmed when its turn comes; the state file already names them all, so other
            # runs keep off them and the machine-wide lock can go now (as after a normal run's start).
            session.started()
            if not args.json:
                print(header, flush=True)
                for notice in backend.notices:
                    say(notice)
            for cpu in cpus:
                if guard.stop_requested.is_set():
                    break
                cpu_checks = run_cpu(platform, backend, runner, cpu)
                checks += cpu_checks
                if not args.json:
                    for c in cpu_checks:
                        print(c.line(), flush=True)
            if cpus and not guard.stop_requested.is_set():
                check = memory_check(platform, runner, cpus[0])
                checks.append(check)
                if not args.json:
                    print(check.line(), flush=True)
        finally:
            runner.close()
    failed = sum(c.status == "FAIL" for c in checks)
    counts = {s: sum(c.status == s for c in checks) for s in ("PASS", "FAIL", "SKIP")}
    if args.json:
        data = {"header": header, "simulated": platform.simulated, "checks": [asdict(c) for c in checks]}
        print(json.dumps({**data, "summary": counts}), flush=True)
    else:
        label = " (SIMULATED PMU: synthetic numbers)" if platform.simulated else ""
        print(
            f"selftest: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped{label}", flush=True
        )
    sys.stdout.flush()
    return guard.exit_code(session.result, 1 if failed else 0)


def _runner(platform: Platform, cpus: list[int]) -> WorkloadRunner:
    if platform.simulated:
        from pmutop.sim.platform import SimPlatform
        from pmutop.sim.selftest_workloads import SimWorkloadRunner

        assert isinstance(platform, SimPlatform)
        return SimWorkloadRunner(platform)
    from pmutop.hw import workloads

    assert isinstance(platform, HostPlatform)
    if not platform.sysroot.is_host:
        raise UsageError("the self-test runs its workloads on this host's CPUs; --sysroot must be /")
    return workloads.HostWorkloadRunner(workloads.chase_bytes(workloads.llc_bytes(platform.sysroot, cpus[0])))


def _header(platform: Platform, backend: Backend, runner: WorkloadRunner, cpus: list[int]) -> str:
    what = "SIMULATED PMU" if platform.simulated else f"{backend.name} backend"
    return f"pmutop selftest: {what}, cpu {format_cpu_list(cpus)}; {runner.describe()}"
