"""--cores and --events syntax."""

from __future__ import annotations

import pytest

from pmutop.core.cpulist import MAX_CPUS, format_cpu_list, parse_cpu_list, select_cpus
from pmutop.core.errors import UsageError
from pmutop.pmu.events import parse_events
from pmutop.pmu.registers import RawEvent


@pytest.mark.parametrize(
    ("text", "cpus"),
    [("0-3", [0, 1, 2, 3]), ("0,2,4-7", [0, 2, 4, 5, 6, 7]), ("5", [5]), (" 1 , 3-3 ", [1, 3]), ("3,1,1", [1, 3])],
)
def test_cpu_lists(text: str, cpus: list[int]) -> None:
    assert parse_cpu_list(text) == cpus


@pytest.mark.parametrize(
    ("text", "message"),
    [("3-1", "reversed"), ("a", "not a number"), ("1-", "not a number"), ("", "empty"), ("0,,1", "not a number")],
)
def test_bad_cpu_lists(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_cpu_list(text, what="--cores value")


def test_format_cpu_list_collapses_ranges() -> None:
    assert format_cpu_list([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert format_cpu_list([]) == ""


def test_select_cpus() -> None:
    online = [0, 1, 2, 3]
    assert select_cpus(None, online) == online
    assert select_cpus("all", online) == online
    assert select_cpus("1-2", online) == [1, 2]
    with pytest.raises(UsageError, match="CPU 4-5 is offline or does not exist") as e:
        select_cpus("2-5", online)
    assert e.value.exit_code == 2


@pytest.mark.parametrize("text", ["0-1000000000", "8192", "0-8192", "1,99999999999999999999"])
def test_cpu_numbers_beyond_the_kernel_limit_are_refused_before_expanding(text: str) -> None:
    # 0-1000000000 used to build a billion-element set (24 GB) before any check.
    with pytest.raises(UsageError) as e:
        parse_cpu_list(text, what="--cores value")
    assert e.value.exit_code == 2
    message = str(e.value)
    assert "\n" not in message and len(message) < 200
    assert "is beyond the largest CPU number Linux supports (8191)" in message


def test_cpu_lists_up_to_the_kernel_limit_are_accepted() -> None:
    assert parse_cpu_list("8190-8191") == [8190, 8191]
    assert len(parse_cpu_list("0-8191")) == MAX_CPUS == 8192


def test_a_huge_cpu_list_is_echoed_shortened() -> None:
    with pytest.raises(UsageError) as e:
        parse_cpu_list("0," * 50_000 + "x", what="--cores value")
    assert len(str(e.value)) < 200 and "'x' is not a number or range" in str(e.value)


def test_select_cpus_tells_missing_from_offline_when_it_knows_the_possible_cpus() -> None:
    online, possible = [0, 1, 2, 3], list(range(8))
    assert select_cpus("0-1", online, possible) == [0, 1]
    assert select_cpus(None, online, possible=possible) == online
    with pytest.raises(UsageError) as e:
        select_cpus("2-5", online, possible=possible)
    assert str(e.value) == "--cores 2-5: CPU 4-5 is offline (online: 0-3)"
    with pytest.raises(UsageError) as e:
        select_cpus("9", online, possible=possible)
    assert str(e.value) == "--cores 9: CPU 9 does not exist (possible: 0-7)"
    with pytest.raises(UsageError) as e:
        select_cpus("3-9", online, possible=possible)
    assert str(e.value) == "--cores 3-9: CPU 8-9 does not exist (possible: 0-7); CPU 4-7 is offline (online: 0-3)"
    assert e.value.exit_code == 2
    with pytest.raises(UsageError, match=r"^bad --cores value '0-9000': CPU 9000 is beyond the largest CPU number"):
        select_cpus("0-9000", online, possible=possible)


def test_architectural_names_are_case_insensitive_and_deduplicated() -> None:
    specs = parse_events(["LLC-Misses,branches", "llc-misses"])
    assert [s.name for s in specs] == ["llc-misses", "branches"]
    assert [s.key for s in specs] == ["llc_misses", "branches"]
    assert specs[0].raw == RawEvent(0x2E, 0x41)


def test_raw_events_with_modifiers() -> None:
    specs = parse_events(["event=0x3c,umask=0x00,branches,event=0xc4,umask=1,cmask=4,inv"])
    assert [s.name for s in specs] == ["r003c", "branches", "r48001c4"]
    raw = specs[2].raw
    assert raw == RawEvent(0xC4, 0x01, cmask=4, inv=True)
    assert raw is not None and raw.config == 0xC4 | 0x100 | 1 << 23 | 4 << 24


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("cache-misses", "unknown event 'cache-misses'"),
        ("event=0x100", "'event=0x100': event is 8 bits"),
        ("event=0xc4,umask=0x1ff", "'umask=0x1ff': umask is 8 bits"),
        ("event=0xc4,cmask=256", "'cmask=256': cmask is 8 bits"),
        ("umask=0x01", "'umask=0x01': umask= must follow event="),
        ("inv", "'inv': inv must follow event="),
        ("event=zz", "'event=zz': event must be a number"),
        ("event=0", "event select 0 is not an event"),
        ("llc-misses,", "empty event name"),
        ("event=0xc4,inv=2", "'inv=2': inv takes no value"),
        ("event=0xc4,umask=1,umask=2", "umask given twice"),
    ],
)
def test_bad_events_name_the_token(value: str, message: str) -> None:
    with pytest.raises(UsageError, match=message) as e:
        parse_events([value])
    assert e.value.exit_code == 2


@pytest.mark.parametrize(
    ("perf_style", "long_form"),
    [
        ("r01d1", "event=0xd1,umask=0x01"),
        ("r1d1", "event=0xd1,umask=0x01"),
        ("r412e", "event=0x2e,umask=0x41"),
        ("R412E", "event=0x2e,umask=0x41"),
        ("r003c", "event=0x3c"),
        ("r48001c4", "event=0xc4,umask=1,cmask=4,inv"),
        ("r1c0400a3", "event=0xa3,umask=0x00,cmask=0x1c,edge"),
        ("rff84ffff", "event=0xff,umask=0xff,cmask=255,inv,edge"),
    ],
)
def test_perf_style_raw_events_are_the_same_spec_as_the_long_form(perf_style: str, long_form: str) -> None:
    assert parse_events([perf_style]) == parse_events([long_form])


def test_raw_names_pmutop_prints_parse_back_to_the_same_spec() -> None:
    for raw in (
        RawEvent(0xD1, 0x01),
        RawEvent(0x2E, 0x41),
        RawEvent(0xC4, 0x01, cmask=4, inv=True),
        RawEvent(0x0E, 0x01, cmask=1, inv=True, edge=True),
        RawEvent(0xFF, 0xFF, cmask=0xFF, inv=True, edge=True),
    ):
        long_form = f"event={raw.event:#x},umask={raw.umask:#x},cmask={raw.cmask},inv={raw.inv:d},edge={raw.edge:d}"
        (spec,) = parse_events([long_form])
        assert spec.raw == raw
        assert parse_events([spec.name]) == [spec]


def test_perf_style_raw_events_in_lists_deduplicate_with_the_long_form() -> None:
    specs = parse_events(["r412e,r1d1", "event=0x2e,umask=0x41,llc-misses"])
    assert [s.name for s in specs] == ["r412e", "r01d1", "llc-misses"]  # the long r412e is the same event
    specs = parse_events(["r412e,r1d1,branches"])
    assert [s.raw for s in specs] == [RawEvent(0x2E, 0x41), RawEvent(0xD1, 0x01), RawEvent(0xC4, 0x00)]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("r1412e", "'r1412e': bit 16 (USR) cannot be set: pmutop sets USR/OS/EN itself"),
        ("r2412e", "'r2412e': bit 17 (OS) cannot be set"),
        ("r8412e", "'r8412e': bit 19 (PC) cannot be set"),
        ("r10412e", "'r10412e': bit 20 (INT) cannot be set"),
        ("r20412e", "'r20412e': bit 21 (ANY) cannot be set"),
        ("r40412e", "'r40412e': bit 22 (EN) cannot be set"),
        ("r7f412e", "'r7f412e': bits 16 (USR), 17 (OS), 19 (PC), 20 (INT), 21 (ANY), 22 (EN) cannot be set"),
        ("r10000412e", "'r10000412e': bits above 31 cannot be set (a raw event is at most r<8 hex digits>)"),
        ("r4100", "'r4100': event select 0 is not an event"),
        ("r0", "'r0': event select 0 is not an event"),
    ],
)
def test_bad_perf_style_raw_events_are_one_line(value: str, message: str) -> None:
    with pytest.raises(UsageError) as e:
        parse_events([value])
    assert e.value.exit_code == 2
    assert str(e.value).startswith(f"bad --events token {message}")
    assert "\n" not in str(e.value)


def test_a_huge_perf_style_raw_event_is_echoed_shortened() -> None:
    with pytest.raises(UsageError) as e:
        parse_events(["r" + "f" * 100_000])
    assert len(str(e.value)) < 300 and "bits above 31 cannot be set" in str(e.value)
