"""What a sampler publishes once per interval for one CPU."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

T = TypeVar("T")


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"  # as dataclasses shows such a default


def _slot_init(cls: type[T]) -> type[T]:
    """Give a frozen, slotted dataclass an __init__ that stores each field through its slot's descriptor. The
    dataclass's own stores each through object.__setattr__ (its class refuses setattr): about 2 µs for
    Sample's 24 fields against about 1 µs, and pmutop makes a Sample per CPU and interval. Same parameters,
    defaults and default factories; the instance is as frozen afterwards."""
    scope: dict[str, Any] = {"_FACTORY": _Factory()}  # "not given": call the field's default factory
    params, body = [], []
    for f in fields(cls):  # type: ignore[arg-type]
        if not f.init or f.kw_only is True:
            raise TypeError(f"{cls.__name__}.{f.name}: init=False and kw_only fields are not supported here")
        scope[f"_set_{f.name}"] = getattr(cls, f.name).__set__  # the slot's member descriptor
        value = f.name
        if f.default is not MISSING:
            scope[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not MISSING:
            scope[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            value = f"_factory_{f.name}() if {f.name} is _FACTORY else {f.name}"
        else:
            params.append(f.name)
        body.append(f"    _set_{f.name}(self, {value})\n")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__}: __post_init__ is not supported here")
    exec(f"def __init__(self, {', '.join(params)}):\n{''.join(body)}", scope)  # as dataclasses makes its own
    init = scope["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__annotations__ = {f.name: f.type for f in fields(cls)} | {"return": None}  # type: ignore[arg-type]
    cls.__init__ = init  # type: ignore[method-assign]
    return cls


@_slot_init
@dataclass(frozen=True, slots=True)
class Sample:
    cpu: int
    seq: int  # 1, 2, ... per CPU; sample n covers the n-th interval since counting started
    time: float  # seconds since the engine started, at the read
    interval: float  # wall seconds this sample covers
    tsc: int | None  # TSC ticks in the interval (None when the backend has no TSC)
    tsc_hz: float | None  # TSC frequency measured over wall time since the start
    counts: dict[str, int]  # event key -> delta in this interval
    overflows: dict[str, int] = field(default_factory=dict)  # event key -> wraps seen in this interval
    suspect: str | None = None  # why these numbers must not be shown as truth
    error: str | None = None  # the CPU's sampler stopped (offline, read failure)
    estimated: dict[str, float] = field(default_factory=dict)  # event key -> fraction of time it was counted
    util: float | None = None  # busy fraction from the kernel's per-CPU times (when there are no ref cycles)
    topdown: str | None = None  # how top-down is measured on this CPU (pmutop.derive.topdown method), None: not
    # Beside the counters (pmutop.probes.power): None/empty where no source measured it.
    busy: float | None = None  # Busy% = 100 x MPERF / TSC (turbostat)
    bzy_mhz: float | None = None  # TSC MHz x APERF / MPERF: the average clock while not idle
    cstates: dict[str, float] = field(default_factory=dict)  # idle state name -> % of the interval
    temp_c: float | None = None  # core temperature
    throttle: tuple[str, ...] = ()  # "thermal", "critical", "power": what limits the clock now
    package: int | None = None  # physical package of this CPU
    pkg_temp_c: float | None = None  # package temperature (the package's first CPU only)
    energy_j: dict[str, float] = field(default_factory=dict)  # domain -> joules this interval (first CPU only)
    power_src: dict[str, str] = field(default_factory=dict)  # field -> source it came from
