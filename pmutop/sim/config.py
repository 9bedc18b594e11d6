"""The simulated machine's configuration: the CPU models it can be (PMU shape and pipeline per core type) and
`SimConfig`, what a run asks for (see pmutop.sim.model for what the simulation covers)."""

from __future__ import annotations

from dataclasses import dataclass, field

from pmutop.pmu import registers
from pmutop.sim.events import BUS_HZ, GRACEMONT_EVENTS, SKX_EVENTS, CountFn
from pmutop.sim.regimes import MIXES


@dataclass(frozen=True)
class CoreShape:
    """One core type of a simulated model: its PMU and pipeline."""

    gp: int
    fixed: int
    width: int  # issue slots per cycle (TOPDOWN.SLOTS per cycle)
    metrics: int  # PERF_METRICS fields: 0 = none, 4 = level 1, 8 = level 1 and 2 (Linux num_topdown_events)
    events: dict[tuple[int, int], CountFn]


@dataclass(frozen=True)
class ModelShape:
    cpuid_model: int  # family 6 display model (Linux intel-family.h)
    stepping: int
    version: int
    p_core: CoreShape
    e_core: CoreShape
    hybrid: bool  # e_cores defaults to half the CPUs
    mix: str  # the workload mix (pmutop.sim.workload.MIXES)


# E-cores are Gracemont-like in every shape: 5 wide (topdown.md section 3), no PERF_METRICS (Linux
# adl_update_topdown_event counts nothing on non-big cores). Their counter numbers follow the P-cores' unless
# the model is hybrid (Gracemont: 6 GP, fixed 0-2).
_GRACEMONT = CoreShape(gp=6, fixed=3, width=5, metrics=0, events=GRACEMONT_EVENTS)
MODELS: dict[str, ModelShape] = {
    # "skx" is the simulator as it always was (PMU shape and workload), now 4 wide like Skylake.
    "skx": ModelShape(0x55, 4, 4, CoreShape(4, 3, 4, 0, SKX_EVENTS), _GRACEMONT, False, "classic"),
    # Linux intel_pmu_init: Ice Lake num_topdown_events = 4; Sapphire Rapids and Alder Lake = 8.
    "icx": ModelShape(0x6A, 6, 5, CoreShape(8, 4, 5, 4, {}), _GRACEMONT, False, "tma"),
    "spr": ModelShape(0x8F, 8, 5, CoreShape(8, 4, 6, 8, {}), _GRACEMONT, False, "tma"),
    "adl": ModelShape(0x97, 2, 5, CoreShape(8, 4, 6, 8, {}), _GRACEMONT, True, "tma"),
}


def _fixed_max(version: int) -> int:
    """Fixed counters a PMU of this version can have: 0-2 before v5, 0-3 (TOPDOWN.SLOTS) from v5 (pmu.md 1.1)."""
    return registers.MAX_FIXED_COUNTERS if version >= 5 else registers.MAX_FIXED_COUNTERS - 1


@dataclass(frozen=True)
class SimConfig:
    """The simulated machine. Fields left None take the model's value (`MODELS`)."""

    cpus: int = 8
    # None (the default) takes the model's value in __post_init__: after it these are never None, so they are
    # typed as what every reader sees.
    version: int = None  # type: ignore[assignment]  # 2..6 supported
    gp_counters: int = None  # type: ignore[assignment]  # 1..8, or 1..32 from v6 (what the version's register map can address)
    fixed_counters: int = None  # type: ignore[assignment]  # 0..4
    gp_width: int = 48
    fixed_width: int = 48
    tsc_hz: int = 2_400_000_000
    seed: int = 1
    e_cores: int = None  # type: ignore[assignment]  # the last e_cores CPUs are hybrid E-cores (model default: half on "adl", else 0)
    full_width_writes: bool = True  # IA32_PERF_CAPABILITIES[13]
    rdpmc_enabled: bool = True  # models CR4.PCE: when False every rdpmc faults
    model: str = "skx"  # one of MODELS
    mix: str = None  # type: ignore[assignment]  # workload mix: "classic" or "tma" (adds branchy and frontend-bound phases)
    # The fields given explicitly (they apply to E-cores too); the others took the model's values.
    explicit: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        shape = MODELS.get(self.model)
        if shape is None:
            raise ValueError(f"bad SimConfig: model must be one of {', '.join(MODELS)}")
        version = self.version if self.version is not None else shape.version
        defaults = {
            "version": shape.version,
            "gp_counters": shape.p_core.gp,
            # Fixed counter 3 (TOPDOWN.SLOTS) came with PMU version 5 (Ice Lake): an older PMU has at most three.
            "fixed_counters": min(shape.p_core.fixed, _fixed_max(version)),
            "e_cores": self.cpus // 2 if shape.hybrid else 0,
            "mix": shape.mix,
        }
        object.__setattr__(self, "explicit", frozenset(k for k in defaults if getattr(self, k) is not None))
        for name, value in defaults.items():
            if getattr(self, name) is None:
                object.__setattr__(self, name, value)
        max_gp = registers.register_map(self.version).max_gp if 2 <= self.version <= 6 else 0
        checks = [
            (self.cpus >= 1, "cpus must be >= 1"),
            (2 <= self.version <= 6, "version must be 2..6"),
            (all(1 <= s.gp <= max_gp for s in self.core_shapes()), f"gp_counters must be 1..{max_gp}"),
            (
                all(0 <= s.fixed <= _fixed_max(self.version) for s in self.core_shapes()),
                f"fixed_counters must be 0..{_fixed_max(self.version)}"
                + ("" if self.version >= 5 else " before PMU version 5 (fixed counter 3, TOPDOWN.SLOTS, came with it)"),
            ),
            (8 <= self.gp_width <= 64, "gp_width must be 8..64"),
            (8 <= self.fixed_width <= 64, "fixed_width must be 8..64"),
            (self.tsc_hz >= BUS_HZ // 10, "tsc_hz too small"),
            (0 <= self.e_cores <= self.cpus, "e_cores must be 0..cpus"),
            (self.mix in MIXES, f"mix must be one of {', '.join(MIXES)}"),
        ]
        for ok, why in checks:
            if not ok:
                raise ValueError(f"bad SimConfig: {why}")

    @property
    def shape(self) -> ModelShape:
        return MODELS[self.model]

    def core_shapes(self) -> tuple[CoreShape, CoreShape]:
        """(P-core, E-core) as simulated. P-cores take gp_counters/fixed_counters; E-cores too, except on a
        hybrid model where those were not given (then Gracemont's)."""
        shape = self.shape
        assert self.gp_counters is not None and self.fixed_counters is not None
        gp, fixed = self.gp_counters, self.fixed_counters
        e_gp = shape.e_core.gp if shape.hybrid and "gp_counters" not in self.explicit else gp
        e_fixed = shape.e_core.fixed if shape.hybrid and "fixed_counters" not in self.explicit else fixed

        # PERF_METRICS is derived from fixed counter 3 and exists from PMU version 5 (Ice Lake) on: a v2..v4 PMU
        # of any model offers what such a PMU really has (the four-event formula where the model has its events).
        metrics_possible = self.version >= 5

        def core(base: CoreShape, n_gp: int, n_fixed: int) -> CoreShape:
            metrics = base.metrics if n_fixed >= 4 and metrics_possible else 0
            return CoreShape(n_gp, n_fixed, base.width, metrics, base.events)

        return core(shape.p_core, gp, fixed), core(shape.e_core, e_gp, e_fixed)
