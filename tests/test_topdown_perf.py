"""Top-down on the perf backend, against a fake kernel: the groups pmutop opens (attr type and config, the
group leader), and the values it publishes. The machine is a sysroot-like tree: CPUID snapshot files, a fake
sysfs core PMU (format/, events/slots, events/topdown-*) and the topology sibling lists. This VM's perf has no
hardware events, so perf_event_open, the group read() and the enable ioctl are faked; the rest is real."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers.sysroot_builder import SKYLAKE_X_LEAVES, build_sysroot

from pmutop.backends.base import Backend
from pmutop.backends.perf import PerfBackend, encode_for_perf
from pmutop.core.clock import ManualClock
from pmutop.core.sysroot import Sysroot
from pmutop.core.undo import UndoLog
from pmutop.derive import topdown as tma_formulas
from pmutop.hw import perf_event
from pmutop.hw.platform import HostPlatform
from pmutop.pmu.events import EventSpec
from pmutop.pmu.perfmon import PerfmonTables, Resolver

FIXTURE_TABLES = Path(__file__).resolve().parent / "fixtures" / "topdown"
Regs = tuple[int, int, int, int]

# CPUID transcribed from the dumps in ../shared/cpuid (leaves the decoders read).
SPR_LEAVES: dict[tuple[int, int], Regs] = {
    (0x0, 0): (0x20, 0x756E6547, 0x6C65746E, 0x49656E69),
    (0x1, 0): (0x806F8, 0x800800, 0x7FFEFBFF, 0xBFEBFBFF),
    (0x7, 0): (0x2, 0xF3BFBFFB, 0xBB417FEE, 0xFFDD4430 & ~(1 << 15)),
    (0xA, 0): (0x8300805, 0x0, 0xF, 0x8604),
    (0x80000000, 0): (0x80000008, 0, 0, 0),
}
ADL_P_LEAVES: dict[tuple[int, int], Regs] = {
    (0x0, 0): (0x20, 0x756E6547, 0x6C65746E, 0x49656E69),
    (0x1, 0): (0x90672, 0x800800, 0x7FFAFBFF, 0xBFEBFBFF),
    (0x7, 0): (0x1, 0x239CA7EB, 0x98C027AC, 0xFC1CC410),
    (0x7, 1): (0x400810, 0, 0, 0),
    (0xA, 0): (0x7300605, 0x0, 0x7, 0x8603),
    (0x1A, 0): (0x40000001, 0, 0, 0),
    (0x80000000, 0): (0x80000008, 0, 0, 0),
}
ADL_E_LEAVES = {**ADL_P_LEAVES, (0x1A, 0): (0x20000001, 0, 0, 0)}
ZEN4_LEAVES: dict[tuple[int, int], Regs] = {
    (0x0, 0): (0x10, 0x68747541, 0x444D4163, 0x69746E65),
    (0x1, 0): (0xA60F12, 0xC0800, 0x7EF8320B, 0x178BFBFF),
    (0x80000000, 0): (0x80000028, 0x68747541, 0x444D4163, 0x69746E65),
    (0x80000001, 0): (0xA60F12, 0x0, 0x75C237FF, 0x2FD3FBFF),
}

INTEL_FORMATS = {
    "event": "config:0-7",
    "umask": "config:8-15",
    "edge": "config:18",
    "any": "config:21",
    "inv": "config:23",
    "cmask": "config:24-31",
}
AMD_FORMATS = {"event": "config:0-7,32-35", "umask": "config:8-15", "edge": "config:18", "inv": "config:23"}
# What Linux lists for Sapphire Rapids (arch/x86/events/intel/core.c, td_* attributes).
TOPDOWN_EVENTS = {
    "slots": "event=0x00,umask=0x4",
    "topdown-retiring": "event=0x00,umask=0x80",
    "topdown-bad-spec": "event=0x00,umask=0x81",
    "topdown-fe-bound": "event=0x00,umask=0x82",
    "topdown-be-bound": "event=0x00,umask=0x83",
    "topdown-heavy-ops": "event=0x00,umask=0x84",
    "topdown-br-mispredict": "event=0x00,umask=0x85",
    "topdown-fetch-lat": "event=0x00,umask=0x86",
    "topdown-mem-bound": "event=0x00,umask=0x87",
}
L1_ONLY = {k: v for k, v in TOPDOWN_EVENTS.items() if k in ("slots", *[n for n in TOPDOWN_EVENTS][1:5])}
OTHER_EVENTS = {"cpu-cycles": "event=0x3c", "topdown-retiring.scale": "1", "mem-loads": "event=0xcd,umask=0x1,ldlat=3"}


def write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def add_pmu(
    root: Path,
    name: str,
    type_: int,
    formats: dict[str, str],
    events: dict[str, str],
    cpus: str | None = None,
) -> None:
    base = f"sys/bus/event_source/devices/{name}"
    write(root, f"{base}/type", str(type_))
    for field, text in formats.items():
        write(root, f"{base}/format/{field}", text)
    for event, text in events.items():
        write(root, f"{base}/events/{event}", text)
    if cpus is not None:
        write(root, f"{base}/cpus", cpus)


def add_siblings(root: Path, siblings: dict[int, str]) -> None:
    for cpu, text in siblings.items():
        write(root, f"sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list", text)


def platform_for(root: Path) -> HostPlatform:
    platform = HostPlatform(Sysroot(root))
    platform.sysroot.is_host = True  # the fake kernel stands in for this host's perf_event_open
    return platform


@pytest.fixture(autouse=True)
def _no_user_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("PMUTOP_PERFMON_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


# --- the fake kernel -----------------------------------------------------------------------------------


@dataclass
class Opened:
    cpu: int
    type: int
    config: int
    config1: int
    group_fd: int
    disabled: bool
    read_format: int
    fd: int
    write_fd: int


class FakeKernel:
    """perf_event_open hands out pipes; a group read() returns what the test queued for the leader."""

    def __init__(self) -> None:
        self.opened: list[Opened] = []
        self.refuse: dict[tuple[int, int], int] = {}  # (type, config) -> errno

    def perf_event_open(
        self, attr: perf_event.PerfEventAttr, pid: int, cpu: int, group_fd: int = -1, flags: int = 0
    ) -> int:
        err = self.refuse.get((attr.type, attr.config))
        if err is not None:
            raise perf_event.PerfOpenError(f"perf_event_open(cpu {cpu}): {os.strerror(err)}", err, cpu=cpu)
        r, w = os.pipe()
        self.opened.append(
            Opened(cpu, attr.type, attr.config, attr.config1, group_fd, attr.flag("disabled"), attr.read_format, r, w)
        )
        return r

    def ioctl(self, fd: int, request: int, arg: int = 0) -> int:
        assert any(o.fd == fd and o.group_fd == -1 for o in self.opened), "ioctl on a group leader only"
        return 0

    def leaders(self, cpu: int) -> list[Opened]:
        return [o for o in self.opened if o.cpu == cpu and o.group_fd == -1]

    def members(self, leader: Opened) -> list[Opened]:
        return [leader, *(o for o in self.opened if o.group_fd == leader.fd)]

    def queue(self, leader: Opened, enabled: int, running: int, values: list[int]) -> None:
        """The next read() of this group (PERF_FORMAT_GROUP | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING)."""
        assert len(values) == len(self.members(leader))
        os.write(leader.write_fd, struct.pack(f"={3 + len(values)}Q", len(values), enabled, running, *values))

    def close(self) -> None:
        for o in self.opened:
            os.close(o.write_fd)
            with contextlib.suppress(OSError):  # a group a test did not close
                os.close(o.fd)


@pytest.fixture
def kernel(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeKernel]:
    fake = FakeKernel()
    monkeypatch.setattr(perf_event.groups, "perf_event_open", fake.perf_event_open)  # PerfGroup looks it up there
    monkeypatch.setattr(fcntl, "ioctl", fake.ioctl)
    yield fake
    fake.close()


def is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def groups_of(kernel: FakeKernel, cpu: int) -> list[list[Opened]]:
    return [kernel.members(leader) for leader in kernel.leaders(cpu)]


def prepare(backend: PerfBackend, cpus: list[int]) -> UndoLog:
    undo = UndoLog()
    backend.prepare(cpus, undo)
    return undo


# --- tests ---------------------------------------------------------------------------------------------


def test_table_events_on_fixed_counter_0_encode_as_instructions() -> None:
    """INST_RETIRED.ANY from a table is fixed counter 0 without a GP encoding: perf counts it as the generic
    instructions event (fixed_index 0 used to be mistaken for "no fixed counter")."""
    spec = EventSpec("INST_RETIRED.ANY", None, fixed_index=0, from_tables=True)
    assert encode_for_perf(spec, None, 0)[1:3] == (perf_event.PERF_TYPE_HARDWARE, perf_event.PERF_COUNT_HW_INSTRUCTIONS)
    cycles = EventSpec("CPU_CLK_UNHALTED.THREAD", None, fixed_index=1, from_tables=True)
    assert encode_for_perf(cycles, None, 0)[1:3] == (perf_event.PERF_TYPE_HARDWARE, perf_event.PERF_COUNT_HW_CPU_CYCLES)


def test_parse_event_terms_and_pmu_events(tmp_path: Path) -> None:
    assert perf_event.parse_event_terms("event=0x00,umask=0x80") == {"event": 0, "umask": 0x80}
    assert perf_event.parse_event_terms("event=0x3c,any=1\n") == {"event": 0x3C, "any": 1}
    assert perf_event.parse_event_terms("event=0xc0,edge") == {"event": 0xC0, "edge": 1}
    with pytest.raises(ValueError, match="bad PMU event term"):
        perf_event.parse_event_terms("event=0x3c,period=?")
    add_pmu(tmp_path, "cpu", 4, INTEL_FORMATS, {**TOPDOWN_EVENTS, **OTHER_EVENTS})
    listed = perf_event.pmu_events(Sysroot(tmp_path), "cpu")
    assert "topdown-retiring.scale" not in listed and listed["topdown-mem-bound"] == "event=0x00,umask=0x87"
    assert perf_event.pmu_events(Sysroot(tmp_path), "cpu_atom") == {}


def test_backend_base_has_no_topdown() -> None:
    assert Backend.topdown_method(object.__new__(PerfBackend), 0) is None


def spr_machine(root: Path, events: dict[str, str] = TOPDOWN_EVENTS) -> HostPlatform:
    build_sysroot(root, [0, 1], SPR_LEAVES)
    add_pmu(root, "cpu", 4, INTEL_FORMATS, {**events, **OTHER_EVENTS})
    add_siblings(root, {0: "0-1", 1: "0-1"})
    return platform_for(root)


def test_sapphire_rapids_opens_one_topdown_group_led_by_slots_and_publishes_slot_counts(
    tmp_path: Path, kernel: FakeKernel
) -> None:
    backend = PerfBackend(spr_machine(tmp_path), ManualClock())
    undo = prepare(backend, [0, 1])
    assert [backend.topdown_method(c) for c in (0, 1)] == ["perf_metrics", "perf_metrics"]
    assert backend.counters(0).topdown_method == "perf_metrics"  # what the engine puts in each Sample
    main, topdown = groups_of(kernel, 0)
    assert [(o.type, o.config) for o in main[:3]] == [(0, 1), (0, 0), (0, 9)]  # the fixed trio leads as before
    # Leader slots (pseudo event 0x0400, disabled until enabled), then the eight metric events 0x8000-0x8700.
    assert [(o.type, o.config) for o in topdown] == [(4, 0x0400), *((4, 0x8000 + (i << 8)) for i in range(8))]
    assert topdown[0].disabled and not any(o.disabled for o in topdown[1:])
    assert all(o.group_fd == topdown[0].fd for o in topdown[1:])
    assert all(
        o.read_format & perf_event.PERF_FORMAT_GROUP for o in topdown
    )  # the metric events need PERF_FORMAT_GROUP
    counters = backend.counters(0)
    keys = [
        "slots",
        "topdown_retiring",
        "topdown_bad_spec",
        "topdown_fe_bound",
        "topdown_be_bound",
        "topdown_heavy_ops",
        "topdown_br_mispredict",
        "topdown_fetch_lat",
        "topdown_mem_bound",
    ]
    assert counters.keys[-9:] == keys
    # The kernel reports each metric as slots (cumulative): the interval's values are the differences.
    kernel.queue(main[0], 1_000, 1_000, [0] * len(main))
    kernel.queue(topdown[0], 1_000, 1_000, [1_000, 400, 100, 200, 300, 150, 60, 120, 180])
    kernel.queue(main[0], 2_000, 2_000, [10, 20, 30, 1, 2, 3, 4])
    kernel.queue(topdown[0], 2_000, 2_000, [9_000, 4_000, 900, 1_600, 2_500, 1_000, 500, 1_000, 1_400])
    counters.start()
    reading = counters.read()
    values = [reading.counts[k] for k in keys]
    assert values == [8_000, 3_600, 800, 1_400, 2_200, 850, 440, 880, 1_220]
    # What pmutop.derive.topdown makes of them: the published keys are exactly what its perf_metrics formula reads.
    tma = tma_formulas.compute(counters.topdown_method, reading.counts)
    assert tma["tma_retiring"] == pytest.approx(3_600 / 8_000) and tma["tma_memory_bound"] == pytest.approx(
        1_220 / 8_000
    )
    assert not reading.estimated
    assert undo.run().failures == []  # the undo log closes every group
    assert not any(is_open(o.fd) for o in kernel.opened)


def test_ice_lake_kernel_lists_level_1_only(tmp_path: Path, kernel: FakeKernel) -> None:
    backend = PerfBackend(spr_machine(tmp_path, L1_ONLY), ManualClock())
    prepare(backend, [0])
    _, topdown = groups_of(kernel, 0)
    assert [o.config for o in topdown] == [0x0400, 0x8000, 0x8100, 0x8200, 0x8300]
    plan = backend.topdown_plan(0)
    assert plan is not None and (plan.level2, plan.detail) == (False, "perf topdown events, level 1")
    assert backend.counters(0).keys[-5:] == [
        "slots",
        "topdown_retiring",
        "topdown_bad_spec",
        "topdown_fe_bound",
        "topdown_be_bound",
    ]


def test_topdown_false_opens_nothing_more(tmp_path: Path, kernel: FakeKernel) -> None:
    backend = PerfBackend(spr_machine(tmp_path), ManualClock(), topdown=False)
    prepare(backend, [0])
    assert len(groups_of(kernel, 0)) == 1
    assert backend.topdown_method(0) is None and backend.topdown_plan(0) is None
    assert backend.counters(0).topdown_method is None


def test_a_multiplexed_topdown_group_is_scaled_and_marked(tmp_path: Path, kernel: FakeKernel) -> None:
    backend = PerfBackend(spr_machine(tmp_path), ManualClock())
    prepare(backend, [0])
    main, topdown = groups_of(kernel, 0)
    kernel.queue(main[0], 0, 0, [0] * len(main))
    kernel.queue(topdown[0], 0, 0, [0] * len(topdown))
    kernel.queue(main[0], 1_000, 1_000, [1] * len(main))
    kernel.queue(topdown[0], 1_000, 500, [1_000, 400, 100, 200, 300, 0, 0, 0, 0])  # counted half the time
    counters = backend.counters(0)
    counters.start()
    reading = counters.read()
    assert (reading.counts["slots"], reading.counts["topdown_retiring"]) == (2_000, 800)
    assert reading.estimated["slots"] == 0.5 and "instructions" not in reading.estimated


def test_a_kernel_that_refuses_the_group_leaves_the_rest_counting(tmp_path: Path, kernel: FakeKernel) -> None:
    kernel.refuse[(4, 0x8400)] = errno.EINVAL
    backend = PerfBackend(spr_machine(tmp_path), ManualClock())
    prepare(backend, [0])
    assert backend.topdown_method(0) is None
    assert len(backend.counters(0).keys) == 7
    assert any(n.startswith("top-down not measured: topdown_heavy_ops on cpu 0:") for n in backend.notices)


def test_skylake_x_with_smt_formula_events_only_when_asked(tmp_path: Path, kernel: FakeKernel) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES)
    add_pmu(tmp_path, "cpu", 4, INTEL_FORMATS, OTHER_EVENTS)  # no slots: PERF_METRICS is Ice Lake and later
    add_siblings(tmp_path, {0: "0,1", 1: "0,1"})
    default = PerfBackend(platform_for(tmp_path), ManualClock())  # no perfmon tables: the encodings are built in
    prepare(default, [0])
    plan = default.topdown_plan(0)
    assert plan is not None and plan.method == "slots4_smt" and plan.costs_counters
    assert default.topdown_method(0) is None and len(groups_of(kernel, 0)) == 1  # costs counters: off by default

    asked = PerfBackend(platform_for(tmp_path), ManualClock(), topdown=True)
    prepare(asked, [1])
    main, topdown = groups_of(kernel, 1)
    assert asked.topdown_method(1) == "slots4_smt"
    any_bit = 1 << 21
    assert [(o.type, o.config) for o in topdown] == [
        (4, 0x010E),  # UOPS_ISSUED.ANY
        (4, 0x02C2),  # UOPS_RETIRED.RETIRE_SLOTS
        (4, 0x019C),  # IDQ_UOPS_NOT_DELIVERED.CORE
        (4, 0x010D | any_bit),  # INT_MISC.RECOVERY_CYCLES_ANY
        (4, 0x003C | any_bit),  # CPU_CLK_UNHALTED.THREAD_ANY (the kernel may put it on fixed counter 1)
    ]
    assert asked.counters(1).keys[-5:] == [
        "uops_issued_any",
        "uops_retired_retire_slots",
        "idq_uops_not_delivered_core",
        "int_misc_recovery_cycles_any",
        "cpu_clk_unhalted_thread_any",
    ]
    kernel.queue(main[0], 0, 0, [0] * len(main))
    kernel.queue(topdown[0], 0, 0, [0] * 5)
    kernel.queue(main[0], 1_000, 1_000, [5] * len(main))
    kernel.queue(topdown[0], 1_000, 250, [10, 20, 30, 40, 50])  # multiplexed with the default events
    counters = asked.counters(1)
    counters.start()
    reading = counters.read()
    assert [reading.counts[k] for k in counters.keys[-5:]] == [40, 80, 120, 160, 200]
    assert reading.estimated["cpu_clk_unhalted_thread_any"] == 0.25


def test_skylake_x_without_the_any_format_is_a_per_thread_approximation(tmp_path: Path, kernel: FakeKernel) -> None:
    build_sysroot(tmp_path, [0], SKYLAKE_X_LEAVES)
    add_pmu(tmp_path, "cpu", 4, {k: v for k, v in INTEL_FORMATS.items() if k != "any"}, {})
    add_siblings(tmp_path, {0: "0,20"})
    backend = PerfBackend(platform_for(tmp_path), ManualClock(), topdown=True)
    prepare(backend, [0])
    assert backend.topdown_method(0) == "slots4"
    _, topdown = groups_of(kernel, 0)
    assert [o.config for o in topdown] == [0x010E, 0x02C2, 0x019C, 0x010D]  # cycles is in the main group already
    assert any("per thread (approximation: SMT on and the kernel offers no AnyThread" in n for n in backend.notices)


def test_tables_given_only_cross_check(tmp_path: Path, kernel: FakeKernel) -> None:
    build_sysroot(tmp_path, [0, 1], SKYLAKE_X_LEAVES)
    add_pmu(tmp_path, "cpu", 4, INTEL_FORMATS, {})
    tables = PerfmonTables(FIXTURE_TABLES)
    backend = PerfBackend(platform_for(tmp_path), ManualClock(), topdown=True, resolver=Resolver(tables).resolve)
    prepare(backend, [0, 1])
    assert backend.topdown_method(0) == "slots4"
    plan = backend.topdown_plan(0)
    assert plan is not None and plan.encodings == "encodings built into pmutop, the perfmon table agrees"
    _, topdown = groups_of(kernel, 0)
    assert [o.config for o in topdown] == [0x010E, 0x02C2, 0x019C, 0x010D]


def test_alder_lake_p_core_gets_the_metrics_group_and_the_e_core_its_events(tmp_path: Path, kernel: FakeKernel) -> None:
    build_sysroot(tmp_path, [0, 16], {0: ADL_P_LEAVES, 16: ADL_E_LEAVES})
    add_pmu(tmp_path, "cpu_core", 4, INTEL_FORMATS, TOPDOWN_EVENTS, cpus="0-15")
    # Linux lists topdown-* on cpu_atom too, as general-counter events, but no slots.
    atom_events = {
        "topdown-retiring": "event=0xc2,umask=0x0",
        "topdown-bad-spec": "event=0x73,umask=0x0",
        "topdown-fe-bound": "event=0x71,umask=0x0",
        "topdown-be-bound": "event=0x74,umask=0x0",
    }
    add_pmu(tmp_path, "cpu_atom", 10, INTEL_FORMATS, atom_events, cpus="16-23")
    add_siblings(tmp_path, {0: "0-1", 16: "16"})
    default = PerfBackend(platform_for(tmp_path), ManualClock())  # no perfmon tables
    prepare(default, [0, 16])
    assert (default.topdown_method(0), default.topdown_method(16)) == ("perf_metrics", None)
    _, p_topdown = groups_of(kernel, 0)
    assert [(o.type, o.config) for o in p_topdown][:2] == [(4, 0x0400), (4, 0x8000)] and len(p_topdown) == 9
    assert len(groups_of(kernel, 16)) == 1

    kernel.opened.clear()
    asked = PerfBackend(platform_for(tmp_path), ManualClock(), topdown=True)
    prepare(asked, [16])
    assert asked.topdown_method(16) == "gracemont"
    _, e_topdown = groups_of(kernel, 16)
    assert [(o.type, o.config) for o in e_topdown] == [(10, 0x71), (10, 0x73), (10, 0x74), (10, 0xC2)]
    assert asked.counters(16).keys[-4:] == [
        "topdown_fe_bound_all",
        "topdown_bad_speculation_all",
        "topdown_be_bound_all",
        "topdown_retiring_all",
    ]


def test_zen4_pipeline_events_through_perf(tmp_path: Path, kernel: FakeKernel) -> None:
    build_sysroot(tmp_path, [0], ZEN4_LEAVES)
    add_pmu(tmp_path, "cpu", 4, AMD_FORMATS, {})
    default = PerfBackend(platform_for(tmp_path), ManualClock())
    prepare(default, [0])
    assert default.topdown_method(0) is None  # five general counters: only when asked
    kernel.opened.clear()
    backend = PerfBackend(platform_for(tmp_path), ManualClock(), topdown=True)
    prepare(backend, [0])
    assert backend.topdown_method(0) == "zen4"
    _, topdown = groups_of(kernel, 0)
    # Event 0x1A0 spreads over the format's event bits 0-7 and 32-35.
    assert [(o.type, o.config) for o in topdown] == [
        (4, 0x76),
        (4, 1 << 32 | 0x01 << 8 | 0xA0),
        (4, 1 << 32 | 0x1E << 8 | 0xA0),
        (4, 0x07 << 8 | 0xAA),
        (4, 0xC1),
    ]
    assert backend.counters(0).keys[-5:] == [
        "ls_not_halted_cyc",
        "de_no_dispatch_per_slot_no_ops_from_frontend",
        "de_no_dispatch_per_slot_backend_stalls",
        "de_src_op_disp_all",
        "ex_ret_ops",
    ]
