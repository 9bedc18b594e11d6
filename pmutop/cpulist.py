"""CPU list syntax shared by the kernel's sysfs files and `--cores`: "0-3", "0,2,4-7"."""

from __future__ import annotations

from pmutop.errors import UsageError


def parse_cpu_list(text: str, *, what: str = "CPU list") -> list[int]:
    """Parse "0-3,6" into [0, 1, 2, 3, 6]; raises UsageError naming the bad part."""
    cpus: set[int] = set()
    text = text.strip()
    if not text:
        raise UsageError(f"empty {what}")
    for part in text.split(","):
        part = part.strip()
        lo_s, sep, hi_s = part.partition("-")
        try:
            lo = int(lo_s, 10)
            hi = int(hi_s, 10) if sep else lo
        except ValueError:
            raise UsageError(f"bad {what} {text!r}: {part!r} is not a number or range") from None
        if lo < 0 or hi < 0:
            raise UsageError(f"bad {what} {text!r}: {part!r} is negative")
        if hi < lo:
            raise UsageError(f"bad {what} {text!r}: range {part!r} is reversed")
        cpus.update(range(lo, hi + 1))
    return sorted(cpus)


def format_cpu_list(cpus: list[int] | set[int]) -> str:
    """The inverse of parse_cpu_list, with ranges collapsed: [0,1,2,5] -> "0-2,5"."""
    out: list[str] = []
    ordered = sorted(cpus)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        out.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(out)


def select_cpus(spec: str | None, online: list[int]) -> list[int]:
    """`--cores` value -> CPUs to monitor. None or "all" means every online CPU."""
    if spec is None or spec.strip().lower() == "all":
        return list(online)
    wanted = parse_cpu_list(spec, what="--cores value")
    missing = [c for c in wanted if c not in online]
    if missing:
        raise UsageError(
            f"--cores {spec}: CPU {format_cpu_list(missing)} is offline or does not exist "
            f"(online: {format_cpu_list(online) or 'none'})"
        )
    return wanted
