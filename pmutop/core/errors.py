"""User-facing failures: each carries the one line pmutop prints and its exit status."""


class PmutopError(Exception):
    """A failure the user can act on. str() is the one-line message; exit_code the process status."""

    exit_code = 1

    def __init__(self, message: str, exit_code: int | None = None) -> None:
        super().__init__(message)
        if exit_code is not None:
            self.exit_code = exit_code


class UsageError(PmutopError):
    """Bad command-line input (exit status 2, like argparse)."""

    exit_code = 2


class HardwareError(PmutopError):
    """A device, register or instruction failed or is missing."""


class PmuInUseError(PmutopError):
    """Another agent owns the counters; nothing was written."""

    exit_code = 3


class ForbiddenMsrWrite(PmutopError):
    """A write outside the PMU allowlist was attempted (a bug in pmutop, refused before reaching the MSR)."""


EXIT_NO_PMU = 5


class NoPmuError(PmutopError):
    """This machine has no usable PMU (no architectural PMU in CPUID, no hardware events in perf): `pmutop
    selftest` cannot test anything here (exit status 5, distinct from a failed check)."""

    exit_code = EXIT_NO_PMU
