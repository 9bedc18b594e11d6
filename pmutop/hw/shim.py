"""The compiled cffi shim (pmutop.hw._shim): rdtsc, cpuid and rdpmc on the calling CPU.

rdpmc faults (SIGSEGV) when CR4.PCE is clear, so nothing here executes it in this process until
`probe_rdpmc` has shown, in a forked child pinned to the same CPU, that the exact reads work.
"""

from __future__ import annotations

import faulthandler
import os
import resource
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pmutop.core.errors import HardwareError

try:
    from pmutop.hw._shim import ffi, lib
except ImportError:  # running from a source tree that was never built
    ffi = lib = None

BUILD_HINT = (
    "the pmutop C shim is not built (there was no C compiler when pmutop was installed): rdpmc and the"
    " self-test's workloads are unavailable; install gcc and the Python headers, then reinstall pmutop"
)


def available() -> bool:
    return lib is not None and bool(lib.pmutop_is_x86())


def _require() -> None:
    if lib is None:
        raise HardwareError(BUILD_HINT)
    if not lib.pmutop_is_x86():
        raise HardwareError("rdtsc/rdpmc/cpuid need an x86 CPU; use --demo or --backend perf here")


def rdtsc() -> int:
    _require()
    return int(lib.pmutop_rdtsc())


def rdtsc_fn() -> Callable[[], int]:
    """rdtsc without rdtsc()'s checks on every call, for code that reads it every interval."""
    _require()
    return lib.pmutop_rdtsc  # cffi returns the uint64_t as an int


def cpuid_here(leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
    """CPUID on whatever CPU the calling thread runs on."""
    _require()
    out = ffi.new("uint32_t[4]")
    lib.pmutop_cpuid(leaf, subleaf, out)
    return (int(out[0]), int(out[1]), int(out[2]), int(out[3]))


def cpuid_on(cpu: int, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
    """CPUID executed on `cpu`, from a short-lived thread pinned there (the caller's affinity is untouched)."""
    _require()
    result: list[tuple[int, int, int, int]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            os.sched_setaffinity(0, {cpu})
            result.append(cpuid_here(leaf, subleaf))
        except BaseException as e:  # reported to the caller below
            errors.append(e)

    t = threading.Thread(target=run, name=f"cpuid-{cpu}")
    t.start()
    t.join()
    if errors:
        raise HardwareError(f"cpu {cpu}: cannot run CPUID there: {errors[0]}")
    return result[0]


class RdpmcReader:
    """TSC + fixed counters 0..n_fixed-1 + GP counters 0..n_gp-1 (+ PERF_METRICS with `metrics`) in one C call
    (GIL released by cffi), so the top-down fractions belong to the slots read with them.

    Must be used only from a thread pinned to the CPU that passed `probe_rdpmc`.
    """

    method = "rdpmc"

    def __init__(self, n_fixed: int, n_gp: int, metrics: bool = False) -> None:
        _require()
        self.n_fixed = n_fixed
        self.n_gp = n_gp
        self.metrics = metrics
        self._buf = ffi.new("uint64_t[]", 1 + n_fixed + n_gp + int(metrics))
        self._call = lib.pmutop_read_counters_metrics if metrics else lib.pmutop_read_counters

    def read(self) -> tuple[int, list[int]]:
        self._call(self.n_fixed, self.n_gp, self._buf)
        values = list(self._buf)
        return values[0], values[1:]


@dataclass(frozen=True)
class ProbeResult:
    ok: bool
    detail: str


def _probe(cpu: int, action: Callable[[], None]) -> ProbeResult:
    """Run `action` in a forked child pinned to `cpu`; a SIGSEGV there means rdpmc is not usable."""
    if not available():
        return ProbeResult(False, BUILD_HINT if lib is None else "not an x86 CPU")
    pid = os.fork()
    if pid == 0:  # child: only this thread exists; keep it minimal and never return
        code = 0
        try:
            faulthandler.disable()  # a fault here is the expected answer, not a crash to report
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.signal(signal.SIGSEGV, signal.SIG_DFL)
            os.sched_setaffinity(0, {cpu})
            action()
        except BaseException:
            code = 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        return ProbeResult(False, f"rdpmc faults on cpu {cpu} ({name}): CR4.PCE is clear or the counter does not exist")
    if os.WEXITSTATUS(status) != 0:
        return ProbeResult(False, f"rdpmc probe on cpu {cpu} could not run (cannot pin to that CPU?)")
    return ProbeResult(True, f"rdpmc works on cpu {cpu}")


def probe_rdpmc(cpu: int, n_fixed: int, n_gp: int, metrics: bool = False) -> ProbeResult:
    """Does exactly the read pmutop will do (RdpmcReader(n_fixed, n_gp, metrics)) work on `cpu`?"""

    def action() -> None:
        RdpmcReader(n_fixed, n_gp, metrics).read()

    return _probe(cpu, action)


def probe_rdpmc_ecx(cpu: int, ecx: int) -> ProbeResult:
    """Probe one raw rdpmc encoding (used by `pmutop info` and tests)."""

    def action() -> None:
        out = ffi.new("uint64_t *")
        lib.pmutop_rdpmc(ecx, out)

    return _probe(cpu, action)
