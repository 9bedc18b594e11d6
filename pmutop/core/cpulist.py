"""CPU list syntax shared by the kernel's sysfs files and `--cores`: "0-3", "0,2,4-7"."""

from __future__ import annotations

from pmutop.core.errors import UsageError

# The largest NR_CPUS an x86 kernel can be built with (CONFIG_MAXSMP sets NR_CPUS=8192), so CPU numbers are
# 0..8191. Checked before a range is expanded: "0-1000000000" must not build a billion-element list.
MAX_CPUS = 8192
_SHOWN = 60  # characters of a bad list echoed in a message: the line stays short whatever was typed


def _shown(text: str) -> str:
    return repr(text) if len(text) <= _SHOWN else repr(text[:_SHOWN]) + f"... ({len(text)} characters)"


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
        except ValueError:  # also a number too long for int() (over 4300 digits)
            raise UsageError(f"bad {what} {_shown(text)}: {_shown(part)} is not a number or range") from None
        if lo < 0 or hi < 0:
            raise UsageError(f"bad {what} {_shown(text)}: {_shown(part)} is negative")
        if hi < lo:
            raise UsageError(f"bad {what} {_shown(text)}: range {_shown(part)} is reversed")
        if hi >= MAX_CPUS:
            big = str(hi) if len(str(hi)) <= 20 else f"{str(hi)[:20]}..."
            raise UsageError(
                f"bad {what} {_shown(text)}: CPU {big} is beyond the largest CPU number Linux supports ({MAX_CPUS - 1})"
            )
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


def select_cpus(spec: str | None, online: list[int], possible: list[int] | None = None) -> list[int]:
    """`--cores` value -> CPUs to monitor. None or "all" means every online CPU.

    With `possible` (sysfs `possible`), a CPU that is not there is told apart from one that is offline.
    """
    if spec is None or spec.strip().lower() == "all":
        return list(online)
    wanted = parse_cpu_list(spec, what="--cores value")
    on = set(online)
    missing = [c for c in wanted if c not in on]
    if not missing:
        return wanted
    if possible is None:
        raise UsageError(
            f"--cores {spec}: CPU {format_cpu_list(missing)} is offline or does not exist "
            f"(online: {format_cpu_list(online) or 'none'})"
        )
    there = set(possible)
    absent = [c for c in missing if c not in there]
    offline = [c for c in missing if c in there]
    problems = []
    if absent:
        problems.append(
            f"CPU {format_cpu_list(absent)} does not exist (possible: {format_cpu_list(possible) or 'none'})"
        )
    if offline:
        problems.append(f"CPU {format_cpu_list(offline)} is offline (online: {format_cpu_list(online) or 'none'})")
    raise UsageError(f"--cores {spec}: {'; '.join(problems)}")


def group_by_cpu(problems: dict[int, str]) -> list[str]:
    """Per-CPU messages ("cpu 5: no dev/cpu/5/cpuid ...") merged when they differ only in the CPU number.

    One line per distinct problem ("cpu 4-7: no dev/cpu/N/cpuid ..."), however many CPUs share it.
    """
    groups: dict[str, list[int]] = {}
    for cpu, message in sorted(problems.items()):
        template = message.removeprefix(f"cpu {cpu}: ").replace(f"dev/cpu/{cpu}/", "dev/cpu/N/")
        groups.setdefault(template, []).append(cpu)
    return [
        problems[cpus[0]] if len(cpus) == 1 else f"cpu {format_cpu_list(cpus)}: {template}"
        for template, cpus in groups.items()
    ]
