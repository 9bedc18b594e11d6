"""perf_event_open layer: attr layout vs the kernel header, real software-event groups, errors, sysfs PMUs."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from pmutop.core.errors import HardwareError
from pmutop.core.sysroot import Sysroot
from pmutop.hw import perf_event

HEADER = Path("/usr/include/linux/perf_event.h")

# C field name -> PerfEventAttr field name (C's leading-underscore names would be mangled in Python).
ATTR_FIELDS = {
    "type": "type",
    "size": "size",
    "config": "config",
    "sample_period": "sample_period",
    "sample_type": "sample_type",
    "read_format": "read_format",
    "wakeup_events": "wakeup_events",
    "bp_type": "bp_type",
    "config1": "config1",
    "config2": "config2",
    "branch_sample_type": "branch_sample_type",
    "sample_regs_user": "sample_regs_user",
    "sample_stack_user": "sample_stack_user",
    "clockid": "clockid",
    "sample_regs_intr": "sample_regs_intr",
    "aux_watermark": "aux_watermark",
    "sample_max_stack": "sample_max_stack",
    "__reserved_2": "reserved_2",
    "aux_sample_size": "aux_sample_size",
    "__reserved_3": "aux_action",  # headers before 6.13
    "aux_action": "aux_action",  # 6.13+
    "sig_data": "sig_data",
    "config3": "config3",
}
HEADER_VALUES = [
    *(f"PERF_ATTR_SIZE_VER{i}" for i in (0, 5, 6, 7, 8)),
    "PERF_TYPE_HARDWARE",
    "PERF_TYPE_SOFTWARE",
    "PERF_TYPE_TRACEPOINT",
    "PERF_TYPE_HW_CACHE",
    "PERF_TYPE_RAW",
    "PERF_TYPE_BREAKPOINT",
    "PERF_FORMAT_TOTAL_TIME_ENABLED",
    "PERF_FORMAT_TOTAL_TIME_RUNNING",
    "PERF_FORMAT_ID",
    "PERF_FORMAT_GROUP",
    "PERF_FORMAT_LOST",
    "PERF_EVENT_IOC_ENABLE",
    "PERF_EVENT_IOC_DISABLE",
    "PERF_EVENT_IOC_RESET",
    "PERF_IOC_FLAG_GROUP",
    "PERF_FLAG_FD_NO_GROUP",
    "PERF_FLAG_FD_OUTPUT",
    "PERF_FLAG_PID_CGROUP",
    "PERF_FLAG_FD_CLOEXEC",
    "PERF_COUNT_HW_CPU_CYCLES",
    "PERF_COUNT_HW_INSTRUCTIONS",
    "PERF_COUNT_HW_REF_CPU_CYCLES",
    "PERF_COUNT_SW_CPU_CLOCK",
    "PERF_COUNT_SW_PAGE_FAULTS",
    "PERF_COUNT_SW_CONTEXT_SWITCHES",
    "PERF_COUNT_SW_CPU_MIGRATIONS",
    "PERF_COUNT_SW_DUMMY",
]
# Same value under another name on our side.
HEADER_ALIASES = {"PERF_PMU_TYPE_SHIFT": "PERF_TYPE_EXTENDED_SHIFT", "PERF_HW_EVENT_MASK": "PERF_HW_EVENT_MASK"}


def _c_program(omit: set[str]) -> str:
    lines = []
    for cname in ATTR_FIELDS:
        lines.append((cname, f'printf("off {cname} %zu\\n", offsetof(struct perf_event_attr, {cname}));'))
    for flag in perf_event.ATTR_FLAG_BITS:
        # Set one bitfield in a zeroed struct and dump the 64-bit word at offset 40: shows the bit position.
        lines.append(
            (
                flag,
                f"{{ struct perf_event_attr a; unsigned long long w; memset(&a, 0, sizeof a); a.{flag} = 1;"
                f' memcpy(&w, (char *)&a + 40, 8); printf("flag {flag} %llu\\n", w); }}',
            )
        )
    values = [*HEADER_VALUES, *HEADER_ALIASES, "SYS_perf_event_open"]
    for name in values:
        lines.append((name, f'printf("val {name} %llu\\n", (unsigned long long)({name}));'))
    body = "\n".join(code for name, code in lines if name not in omit)
    return (
        "#include <stdio.h>\n#include <stddef.h>\n#include <string.h>\n#include <sys/syscall.h>\n"
        "#include <linux/perf_event.h>\n"
        f'int main(void) {{\nprintf("sizeof %zu\\n", sizeof(struct perf_event_attr));\n{body}\nreturn 0;\n}}\n'
    )


@pytest.fixture(scope="module")
def header_layout(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    """What the installed uapi header says: {"off": {field: offset}, "flag": {...}, "val": {...}, "sizeof": ...}."""
    gcc = shutil.which("gcc")
    if gcc is None or not HEADER.exists():
        pytest.skip("gcc or linux/perf_event.h is not installed")
    tmp = tmp_path_factory.mktemp("perfhdr")
    omit: set[str] = set()
    # Older/newer headers lack some fields and constants: drop whatever the compiler says is missing, retry.
    for _ in range(10):
        (tmp / "layout.c").write_text(_c_program(omit))
        proc = subprocess.run(
            [gcc, "-o", str(tmp / "layout"), str(tmp / "layout.c")],
            capture_output=True,
            text=True,
            env={**os.environ, "LC_ALL": "C"},
        )
        if proc.returncode == 0:
            break
        missing = set(re.findall(r"has no member named '(\w+)'", proc.stderr))
        missing |= set(re.findall(r"'(\w+)' undeclared", proc.stderr))
        if not missing - omit:
            pytest.fail(f"layout probe does not compile:\n{proc.stderr}")
        omit |= missing
    else:
        pytest.fail("layout probe never compiled")
    out = subprocess.run([str(tmp / "layout")], capture_output=True, text=True, check=True).stdout
    layout: dict[str, dict[str, int]] = {"off": {}, "flag": {}, "val": {}, "sizeof": {}}
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "sizeof":
            layout["sizeof"]["attr"] = int(rest[0])
        else:
            layout[kind][rest[0]] = int(rest[1])
    return layout


def test_attr_offsets_match_the_kernel_header(header_layout: dict[str, dict[str, int]]) -> None:
    offsets = header_layout["off"]
    # Fields every supported header has (VER5, Linux 4.1+), so the comparison cannot pass vacuously.
    assert {"config", "config2", "sample_regs_intr", "aux_watermark", "sample_max_stack"} <= offsets.keys()
    for cname, offset in offsets.items():
        assert getattr(perf_event.PerfEventAttr, ATTR_FIELDS[cname]).offset == offset, cname
    assert perf_event.PerfEventAttr.config.offset == 8
    assert perf_event.PerfEventAttr.config3.offset == 128


def test_attr_size_is_ver8_and_the_header_is_a_prefix_of_it(header_layout: dict[str, dict[str, int]]) -> None:
    assert ctypes.sizeof(perf_event.PerfEventAttr) == perf_event.PERF_ATTR_SIZE_VER8 == 136
    assert perf_event.PerfEventAttr().size == 136
    header_size = header_layout["sizeof"]["attr"]
    if "config3" in header_layout["off"]:
        assert header_size == 136
        assert header_layout["val"]["PERF_ATTR_SIZE_VER8"] == 136
    else:
        # An older header (Debian's 6.1 stops at VER7): its struct ends where our first newer field starts.
        assert header_size == perf_event.PerfEventAttr.config3.offset == perf_event.PERF_ATTR_SIZE_VER7
    for ver in (0, 5, 6, 7, 8):
        name = f"PERF_ATTR_SIZE_VER{ver}"
        if name in header_layout["val"]:
            assert getattr(perf_event, name) == header_layout["val"][name]


def test_flag_bits_match_the_kernel_bitfields(header_layout: dict[str, dict[str, int]]) -> None:
    flags = header_layout["flag"]
    assert {"disabled", "pinned", "exclude_user", "exclude_kernel", "exclude_hv", "precise_ip"} <= flags.keys()
    for name, word in flags.items():
        assert word == 1 << perf_event.ATTR_FLAG_BITS[name], name


def test_constants_match_the_kernel_header(header_layout: dict[str, dict[str, int]]) -> None:
    values = header_layout["val"]
    assert {"PERF_EVENT_IOC_ENABLE", "PERF_FORMAT_GROUP", "PERF_FLAG_FD_CLOEXEC"} <= values.keys()
    for name, value in values.items():
        if name == "SYS_perf_event_open":
            assert perf_event.syscall_number() == value
        elif name.startswith("PERF_ATTR_SIZE_VER"):
            continue  # checked with the size
        else:
            assert getattr(perf_event, HEADER_ALIASES.get(name, name)) == value, name


def test_make_attr_sets_only_the_requested_flags() -> None:
    attr = perf_event.make_attr(
        perf_event.PERF_TYPE_RAW,
        0x412E,
        read_format=perf_event.PERF_FORMAT_GROUP,
        disabled=True,
        exclude_kernel=True,
        pinned=True,
        config1=7,
    )
    assert (attr.type, attr.config, attr.config1, attr.size, attr.read_format) == (4, 0x412E, 7, 136, 8)
    assert (
        attr.flags
        == perf_event.ATTR_DISABLED
        | perf_event.ATTR_EXCLUDE_KERNEL
        | perf_event.ATTR_PINNED
        | perf_event.ATTR_EXCLUDE_HV
    )
    plain = perf_event.make_attr(perf_event.PERF_TYPE_SOFTWARE, 3, read_format=0, exclude_hv=False)
    assert plain.flags == 0
    assert not plain.flag("disabled")
    plain.set_flag("exclude_user")
    assert plain.flags == 1 << 4


def test_extended_hw_config_puts_the_pmu_type_in_the_high_word() -> None:
    assert perf_event.extended_hw_config(10, perf_event.PERF_COUNT_HW_INSTRUCTIONS) == 0x0000_000A_0000_0001
    assert (
        perf_event.extended_hw_config(4, perf_event.PERF_COUNT_HW_CPU_CYCLES) >> perf_event.PERF_TYPE_EXTENDED_SHIFT
        == 4
    )


@pytest.mark.parametrize(
    ("machine", "is32", "nr"),
    [
        ("x86_64", False, 298),
        ("x86_64", True, 336),
        ("i686", True, 336),
        ("aarch64", False, 241),
        ("aarch64", True, 364),
        ("armv7l", True, 364),
        ("riscv64", False, 241),
        ("ppc64le", False, 319),
        ("s390x", False, 331),
    ],
)
def test_syscall_number_per_architecture(machine: str, is32: bool, nr: int) -> None:
    assert perf_event.syscall_number(machine, userland_32bit=is32) == nr


def test_syscall_number_refuses_an_unknown_machine() -> None:
    with pytest.raises(HardwareError, match="'vax'"):
        perf_event.syscall_number("vax", userland_32bit=False)


# --- real syscalls ------------------------------------------------------------------------------------------

SW_EVENTS = [
    ("context-switches", perf_event.PERF_TYPE_SOFTWARE, perf_event.PERF_COUNT_SW_CONTEXT_SWITCHES),
    ("cpu-clock", perf_event.PERF_TYPE_SOFTWARE, perf_event.PERF_COUNT_SW_CPU_CLOCK),
    ("page-faults", perf_event.PERF_TYPE_SOFTWARE, perf_event.PERF_COUNT_SW_PAGE_FAULTS),
]


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _open_or_skip(events: list[tuple[str, int, int]], **kw: bool) -> perf_event.PerfGroup:
    try:
        return perf_event.PerfGroup(0, events, **kw)
    except perf_event.PerfOpenError as e:
        if e.errno in (errno.EACCES, errno.EPERM):
            pytest.skip(f"CPU-wide perf events are not allowed here: {e}")
        raise


def _pingpong_on_cpu0(seconds: float) -> int:
    """Two processes pinned to cpu 0 bouncing a byte over pipes; returns the round trips (each >= 2 switches)."""
    old = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {0})  # before fork, so the child starts on cpu 0 as well
    except OSError:
        pytest.skip("cannot pin to cpu 0")
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(to_child_w)
            os.close(to_parent_r)
            while byte := os.read(to_child_r, 1):
                os.write(to_parent_w, byte)
        finally:
            os._exit(0)
    os.close(to_child_r)
    os.close(to_parent_w)
    trips = 0
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            os.write(to_child_w, b"x")
            assert os.read(to_parent_r, 1) == b"x"
            trips += 1
    finally:
        os.close(to_child_w)  # EOF ends the child
        os.close(to_parent_r)
        os.waitpid(pid, 0)
        os.sched_setaffinity(0, old)
    return trips


def test_software_group_counts_context_switches_and_cpu_clock() -> None:
    with _open_or_skip(SW_EVENTS) as group:
        assert group.names == ["context-switches", "cpu-clock", "page-faults"]
        assert len(group.fds) == 3
        # Disabled leader: nothing counts until enable().
        assert group.read() == perf_event.GroupReading(0, 0, [0, 0, 0])
        group.enable()
        t0 = time.monotonic_ns()
        first = group.read()
        trips = _pingpong_on_cpu0(0.2)
        second = group.read()
        t1 = time.monotonic_ns()
    assert group.fds == []
    assert trips > 50
    switches = second.values[0] - first.values[0]
    assert switches >= 2 * trips
    assert second.time_enabled > first.time_enabled
    wall = t1 - t0
    # A CPU-wide cpu-clock ticks for the whole interval, idle included: about the wall time.
    assert second.values[1] - first.values[1] == pytest.approx(wall, rel=0.2)
    assert second.time_enabled - first.time_enabled == pytest.approx(wall, rel=0.2)
    values, fraction = perf_event.scaled_delta(first, second)
    assert fraction == 1.0  # software events are never multiplexed
    assert values[0] == switches


def test_group_with_ids_reads_distinct_ids() -> None:
    with _open_or_skip(SW_EVENTS[:2], with_ids=True) as group:
        group.enable()
        reading = group.read()
        group.disable()
        group.reset()
        after_reset = group.read()
    assert len(reading.ids) == 2
    assert len(set(reading.ids)) == 2
    assert reading.time_running > 0
    assert after_reset.values == [0, 0]
    assert after_reset.ids == reading.ids


def test_read_of_a_closed_group_is_an_error() -> None:
    group = _open_or_skip(SW_EVENTS[:1])
    group.close()
    group.close()  # idempotent
    with pytest.raises(perf_event.PerfGroupError, match="closed"):
        group.read()
    with pytest.raises(perf_event.PerfGroupError, match="closed"):
        group.enable()


def test_no_fd_leak_on_success_or_when_a_member_fails() -> None:
    before = _open_fds()
    for _ in range(3):
        with _open_or_skip(SW_EVENTS) as group:
            group.enable()
            group.read()
    assert _open_fds() == before
    # Member 2 fails (no such software event): the leader and member 1 must be closed again.
    bogus = ("bogus-event", perf_event.PERF_TYPE_SOFTWARE, 9999)
    with pytest.raises(perf_event.PerfOpenError) as info:
        perf_event.PerfGroup(0, [*SW_EVENTS[:2], bogus])
    assert _open_fds() == before
    assert info.value.errno == errno.ENOENT
    assert (info.value.event, info.value.cpu) == ("bogus-event", 0)
    assert str(info.value).startswith("bogus-event on cpu 0: ")


def test_hardware_cycles_is_refused_without_a_pmu() -> None:
    try:
        group = perf_event.PerfGroup(
            0, [("cycles", perf_event.PERF_TYPE_HARDWARE, perf_event.PERF_COUNT_HW_CPU_CYCLES)]
        )
    except perf_event.PerfOpenError as e:
        if e.errno in (errno.EACCES, errno.EPERM):
            pytest.skip(f"CPU-wide perf events are not allowed here: {e}")
        # This KVM guest exposes no PMU: the kernel answers ENOENT (EOPNOTSUPP on some architectures).
        assert e.errno in (errno.ENOENT, errno.EOPNOTSUPP)
        assert str(e).startswith("cycles on cpu 0: the kernel has no such event here")
        assert "hidden PMU" in str(e)
    else:
        group.close()
        pytest.skip("this machine has a hardware PMU: cycles opened")


def test_unprivileged_cpu_wide_open_gets_eacces_and_the_paranoid_advice() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to an unprivileged user")
    paranoid = perf_event.read_paranoid(Sysroot("/"))
    if paranoid is None or paranoid < 1:
        pytest.skip(f"perf_event_paranoid={paranoid} lets unprivileged users open CPU-wide events")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        report: dict[str, object] = {}
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)  # drops every capability, CAP_PERFMON included
            try:
                perf_event.PerfGroup(0, SW_EVENTS[:1]).close()
                report = {"errno": 0}
            except perf_event.PerfOpenError as e:
                report = {"errno": e.errno, "line": str(e)}
        except BaseException as e:
            report = {"errno": -1, "line": repr(e)}
        finally:
            os.write(w, json.dumps(report).encode())
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        report = json.loads(f.read())
    os.waitpid(pid, 0)
    assert report["errno"] == errno.EACCES, report
    line = report["line"]
    assert line.startswith("context-switches on cpu 0: ")
    assert f"perf_event_paranoid={paranoid}" in line
    assert "run as root" in line
    assert "`sudo sysctl kernel.perf_event_paranoid=0`" in line
    assert "--user-only" not in line  # it would not help: CPU-wide events need the capability anyway


# --- error lines ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("err", "kw", "expected"),
    [
        (errno.EACCES, {"paranoid": 2, "root": False}, "perf_event_paranoid=2 allows CPU-wide events only to root"),
        (errno.EPERM, {"paranoid": 1, "root": False}, "`sudo sysctl kernel.perf_event_paranoid=0` (CPU-wide"),
        (
            errno.EACCES,
            {"paranoid": 2, "root": False, "pid": 1234},
            "count user space only with --user-only",
        ),
        (
            errno.EACCES,
            {"paranoid": 2, "root": False, "pid": 1234, "exclude_kernel": True},
            "seccomp filter",
        ),
        (errno.EACCES, {"paranoid": 3, "root": False}, "perf_event_paranoid=3 forbids perf_event_open"),
        (errno.EACCES, {"paranoid": None, "root": False}, "perf_event_paranoid unreadable"),
        (errno.EPERM, {"paranoid": 2, "root": True}, "denied even as root: a container"),
        (errno.ENOENT, {"paranoid": 2, "root": True}, "does not expose this hardware event (hidden PMU"),
        (errno.EOPNOTSUPP, {"paranoid": 2, "root": True}, "cannot count in this mode"),
        (
            errno.EMFILE,
            {"paranoid": 2, "root": True},
            "too many open files (one fd per event per CPU): raise `ulimit -n`",
        ),
        (errno.ENODEV, {"paranoid": 2, "root": True}, "cpu 3 is offline or not one of this PMU's cpus"),
        (errno.EINVAL, {"paranoid": 2, "root": True}, "bad config for this PMU"),
        (errno.EBUSY, {"paranoid": 2, "root": True}, "in use by an exclusive user"),
        (errno.E2BIG, {"paranoid": 2, "root": True}, "retry with a smaller attr.size"),
        (errno.EIO, {"paranoid": 2, "root": True}, "perf_event_open failed: Input/output error"),
    ],
)
def test_explain_open_error_lines(err: int, kw: dict[str, Any], expected: str) -> None:
    line = perf_event.explain_open_error(err, event="instructions", cpu=3, **kw)
    assert line.startswith("instructions on cpu 3: ")
    assert expected in line
    assert "\n" not in line


# --- group reads and scaling --------------------------------------------------------------------------------


def test_parse_group_read_layouts_and_failures() -> None:
    data = b"".join(v.to_bytes(8, "little") for v in (2, 1000, 900, 11, 22))
    assert perf_event.parse_group_read(data, 2) == perf_event.GroupReading(1000, 900, [11, 22])
    with_ids = b"".join(v.to_bytes(8, "little") for v in (2, 1000, 900, 11, 501, 22, 502))
    assert perf_event.parse_group_read(with_ids, 2, with_ids=True) == perf_event.GroupReading(
        1000, 900, [11, 22], [501, 502]
    )
    with pytest.raises(perf_event.PerfGroupError, match="cpu 5: the perf group is in error state"):
        perf_event.parse_group_read(b"", 2, cpu=5)
    with pytest.raises(perf_event.PerfGroupError, match="returned 32 bytes, expected 40"):
        perf_event.parse_group_read(data[:32], 2)
    with pytest.raises(perf_event.PerfGroupError, match="reports 2 events, expected 3"):
        perf_event.parse_group_read(data + data[:8], 3)


def test_read_words_gives_the_kernel_words_and_fails_as_read_does(monkeypatch: pytest.MonkeyPatch) -> None:
    write_ends: list[int] = []

    def fake_open(attr: object, pid: int, cpu: int, group_fd: int = -1, flags: int = 0) -> int:
        r, w = os.pipe()  # the leader's read end answers read(); members are never read
        write_ends.append(w)
        return r

    monkeypatch.setattr(perf_event.groups, "perf_event_open", fake_open)
    group = perf_event.PerfGroup(5, [("a", 1, 0), ("b", 1, 3)])

    def kernel_says(*words: int) -> None:
        os.write(write_ends[0], b"".join(w.to_bytes(8, "little") for w in words))

    try:
        kernel_says(2, 1000, 900, 11, 22)
        assert group.read_words() == (2, 1000, 900, 11, 22)
        kernel_says(2, 1000, 900, 11, 22)
        assert group.read() == perf_event.GroupReading(1000, 900, [11, 22])
        kernel_says(3, 1000, 900, 11, 22)
        with pytest.raises(perf_event.PerfGroupError, match="cpu 5: perf group read reports 3 events, expected 2"):
            group.read_words()
        kernel_says(2, 1000, 900, 11)
        with pytest.raises(perf_event.PerfGroupError, match="returned 32 bytes, expected 40"):
            group.read_words()
        os.close(write_ends.pop(0))  # EOF: what the kernel answers for a group in error state
        with pytest.raises(perf_event.PerfGroupError, match="cpu 5: the perf group is in error state"):
            group.read_words()
    finally:
        group.close()
        for w in write_ends:
            os.close(w)
    with pytest.raises(perf_event.PerfGroupError, match="closed"):
        group.read_words()


def test_scaled_delta_multiplexed_scales_by_enabled_over_running() -> None:
    prev = perf_event.GroupReading(5000, 3000, [100, 10])
    cur = perf_event.GroupReading(6000, 3250, [200, 17])
    values, fraction = perf_event.scaled_delta(prev, cur)
    assert values == [400.0, 28.0]
    assert fraction == 0.25


def test_scaled_delta_unmultiplexed_is_the_plain_delta() -> None:
    values, fraction = perf_event.scaled_delta(
        perf_event.GroupReading(0, 0, [0]), perf_event.GroupReading(1000, 1000, [123])
    )
    assert (values, fraction) == ([123.0], 1.0)


def test_scaled_delta_not_counted_gives_zero_fraction() -> None:
    prev = perf_event.GroupReading(1000, 250, [100, 7])
    values, fraction = perf_event.scaled_delta(prev, perf_event.GroupReading(1500, 250, [100, 7]))
    assert (values, fraction) == ([0.0, 0.0], 0.0)
    # Nothing elapsed at all (two reads in a row of a disabled group): also "not counted".
    assert perf_event.scaled_delta(prev, prev) == ([0.0, 0.0], 0.0)


def test_scaled_delta_rejects_mismatched_or_backward_readings() -> None:
    with pytest.raises(ValueError, match="different groups"):
        perf_event.scaled_delta(perf_event.GroupReading(0, 0, [1]), perf_event.GroupReading(1, 1, [1, 2]))
    with pytest.raises(ValueError, match="out of order"):
        perf_event.scaled_delta(perf_event.GroupReading(10, 10, [5]), perf_event.GroupReading(20, 20, [4]))


# --- sysfs formats and PMUs ---------------------------------------------------------------------------------


def test_parse_format_variants() -> None:
    assert perf_event.parse_format("config:0-7") == perf_event.FormatField("config", ((0, 7),))
    assert perf_event.parse_format("config:18\n") == perf_event.FormatField("config", ((18, 18),))
    assert perf_event.parse_format("config1:0-63").width == 64
    split = perf_event.parse_format("config:0-7,32-35")
    assert split.ranges == ((0, 7), (32, 35))
    assert split.bits == [*range(8), *range(32, 36)]
    for bad in ("config:7-0", "config:0-64", "umask:0-7", "config", "config:a-b"):
        with pytest.raises(ValueError, match="bad PMU format"):
            perf_event.parse_format(bad)


FORMATS = {
    "event": perf_event.parse_format("config:0-7,32-35"),
    "umask": perf_event.parse_format("config:8-15"),
    "edge": perf_event.parse_format("config:18"),
    "offcore_rsp": perf_event.parse_format("config1:0-63"),
    "ldlat": perf_event.parse_format("config2:0-15"),
    "tail_first": perf_event.parse_format("config:40-41,20-21"),
}


def test_encode_with_format_places_split_fields() -> None:
    config, config1, config2 = perf_event.encode_with_format(
        {"event": 0xABC, "umask": 0x41, "edge": 1, "offcore_rsp": 2**64 - 1, "ldlat": 3}, FORMATS
    )
    # event 0xABC: low 8 bits (0xBC) at 0-7, the next 4 bits (0xA) at 32-35.
    assert config == 0xA_0000_0000 | 1 << 18 | 0x41 << 8 | 0xBC
    assert config1 == 2**64 - 1
    assert config2 == 3
    # The value's low bits go to the lowest format bits, whatever order the ranges are listed in.
    assert perf_event.encode_with_format({"tail_first": 0b1101}, FORMATS) == (0b01 << 20 | 0b11 << 40, 0, 0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"event": 0x1000}, "does not fit in 12 bits"),
        ({"edge": 2}, "does not fit in 1 bits"),
        ({"umask": -1}, "does not fit"),
        ({"cmask": 1}, "unknown PMU format field 'cmask'"),
    ],
)
def test_encode_with_format_rejects_values_that_do_not_fit(fields: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        perf_event.encode_with_format(fields, FORMATS)


def _write(root: Path, rel: str, text: str) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


@pytest.fixture
def hybrid_sysroot(tmp_path: Path) -> Sysroot:
    base = "sys/bus/event_source/devices"
    _write(tmp_path, f"{base}/cpu_core/type", "4")
    _write(tmp_path, f"{base}/cpu_core/cpus", "0-15")
    _write(tmp_path, f"{base}/cpu_core/format/event", "config:0-7")
    _write(tmp_path, f"{base}/cpu_core/format/umask", "config:8-15")
    _write(tmp_path, f"{base}/cpu_core/format/offcore_rsp", "config1:0-63")
    _write(tmp_path, f"{base}/cpu_atom/type", "10")
    _write(tmp_path, f"{base}/cpu_atom/cpus", "16-23")
    _write(tmp_path, f"{base}/cpu_atom/format/event", "config:0-7")
    _write(tmp_path, f"{base}/cpu_atom/format/weird", "config:zero")  # unparsable: dropped, the PMU stays
    _write(tmp_path, f"{base}/software/type", "1")
    _write(tmp_path, f"{base}/uncore_imc_0/type", "15")
    _write(tmp_path, f"{base}/uncore_imc_0/cpumask", "0,12")
    (tmp_path / f"{base}/half_registered").mkdir()  # no type file: not a usable PMU
    return Sysroot(tmp_path)


def test_list_pmus_reads_types_cpus_and_formats(hybrid_sysroot: Sysroot) -> None:
    pmus = perf_event.list_pmus(hybrid_sysroot)
    assert sorted(pmus) == ["cpu_atom", "cpu_core", "software", "uncore_imc_0"]
    core = pmus["cpu_core"]
    assert (core.type, core.cpus, core.cpumask) == (4, list(range(16)), None)
    assert core.formats["umask"] == perf_event.FormatField("config", ((8, 15),))
    assert core.formats["offcore_rsp"].register == "config1"
    atom = pmus["cpu_atom"]
    assert (atom.type, atom.cpus, sorted(atom.formats)) == (10, list(range(16, 24)), ["event"])
    assert pmus["software"] == perf_event.PmuInfo("software", 1, None, None, {})
    assert pmus["uncore_imc_0"].cpumask == [0, 12]
    assert perf_event.encode_with_format({"event": 0xC0, "umask": 1}, core.formats) == (0x01C0, 0, 0)


def test_core_pmu_for_cpu_picks_by_cpus(hybrid_sysroot: Sysroot) -> None:
    pmus = perf_event.list_pmus(hybrid_sysroot)
    assert perf_event.core_pmu_for_cpu(pmus, 0).name == "cpu_core"  # type: ignore[union-attr]
    assert perf_event.core_pmu_for_cpu(pmus, 15).name == "cpu_core"  # type: ignore[union-attr]
    assert perf_event.core_pmu_for_cpu(pmus, 16).name == "cpu_atom"  # type: ignore[union-attr]
    assert perf_event.core_pmu_for_cpu(pmus, 24) is None
    plain = {"cpu": perf_event.PmuInfo("cpu", 4, None, None, {}), **pmus}
    assert perf_event.core_pmu_for_cpu(plain, 20).name == "cpu"  # type: ignore[union-attr]
    assert perf_event.core_pmu_for_cpu({}, 0) is None


def test_list_pmus_of_a_missing_directory_is_empty(tmp_path: Path) -> None:
    assert perf_event.list_pmus(Sysroot(tmp_path)) == {}


def test_list_pmus_of_this_machine() -> None:
    root = Sysroot("/")
    if not root.exists(perf_event.EVENT_SOURCE_DIR):
        pytest.skip("no /sys/bus/event_source here")
    pmus = perf_event.list_pmus(root)
    assert pmus["software"].type == perf_event.PERF_TYPE_SOFTWARE
    if "tracepoint" in pmus:
        assert pmus["tracepoint"].type == perf_event.PERF_TYPE_TRACEPOINT
    if "breakpoint" in pmus:
        assert pmus["breakpoint"].type == perf_event.PERF_TYPE_BREAKPOINT
    for name, info in pmus.items():
        assert info.name == name
        assert isinstance(info.type, int)
        assert info.type >= 0
        for fmt in info.formats.values():
            assert fmt.register.startswith("config")


def test_read_paranoid(tmp_path: Path) -> None:
    assert perf_event.read_paranoid(Sysroot(tmp_path)) is None
    _write(tmp_path, "proc/sys/kernel/perf_event_paranoid", "-1")
    assert perf_event.read_paranoid(Sysroot(tmp_path)) == -1
    _write(tmp_path, "proc/sys/kernel/perf_event_paranoid", "lots")
    assert perf_event.read_paranoid(Sysroot(tmp_path)) is None
    real = Sysroot("/").read_text("proc/sys/kernel/perf_event_paranoid")
    if real is not None:
        assert perf_event.read_paranoid(Sysroot("/")) == int(real)
