"""What a simulated CPU's MSR addresses are, and the record of one enabled counter (pmutop.sim.cpu)."""

from __future__ import annotations

from dataclasses import dataclass

from pmutop.pmu import registers
from pmutop.sim.config import SimConfig
from pmutop.sim.events import CountFn, field_index
from pmutop.sim.regimes import max_events_per_ns
from pmutop.sim.workload import Counts, Workload

# What an MSR address is: (kind, counter index).
EVTSEL = "evtsel"
PMC_SIGN_EXTEND = "pmc"  # IA32_PMCx: WRMSR sign-extends EAX[31:0]
PMC_FULL = "a_pmc"  # IA32_A_PMCx: full width, only with PERF_CAPABILITIES[13]
PMC_V6 = "gp_ctr"  # IA32_PMC_GPn_CTR: full width with PERF_CAPABILITIES[13], else (assumed) sign-extending
FIXED = "fixed"


def register_table(cfg: SimConfig) -> dict[int, tuple[str, int]]:
    """Every counter and event-select address this PMU answers, built from pmutop's own register maps.

    v6 parts get the v6 range plus the legacy addresses as aliases of counters 0-7 (pmutop.sim.model's docstring).
    """
    maps = [registers.LEGACY_REGISTERS] + ([registers.V6_REGISTERS] if cfg.version >= 6 else [])
    table: dict[int, tuple[str, int]] = {}
    for regs in maps:
        for i in range(min(cfg.gp_counters, regs.max_gp)):
            table[regs.evtsel(i)] = (EVTSEL, i)
            if regs.kind == "v6":
                table[regs.pmc(i)] = (PMC_V6, i)
            else:
                table[regs.pmc(i)] = (PMC_SIGN_EXTEND, i)
                table[regs.counter(i, full_width=True)] = (PMC_FULL, i)
        for i in range(min(cfg.fixed_counters, regs.max_fixed)):
            table[regs.fixed_ctr(i)] = (FIXED, i)
    return table


@dataclass(slots=True)
class EnabledCounter:
    fn: CountFn
    user: bool
    kernel: bool
    pmi: bool
    width: int
    status_bit: int
    regs: list[int]  # the CPU's gp or fixed counter values (never replaced, only written by index)
    index: int
    field: int | None = None  # the Amounts position fn reads as it is (events.field_index), else None

    def __post_init__(self) -> None:
        self.field = field_index(self.fn)

    def read(self) -> int:
        return self.regs[self.index]

    def delta(self, old: Counts, new: Counts) -> int:
        counted = 0
        if self.user:
            counted += self.fn(new.user) - self.fn(old.user)
        if self.kernel:
            counted += self.fn(new.kernel) - self.fn(old.kernel)
        return counted


def rate_bound(workload: Workload) -> int | None:
    """Events per ns that no counter exceeds on this workload; None where unknown (the self-test's scripts)."""
    if type(workload) is Workload:
        return max_events_per_ns(workload.slots_per_cycle, workload.tsc_hz)
    return None
