"""`pmutop events`: the event names this machine's CPUs accept, optionally fetching Intel's tables first."""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pmutop.app.options import events_parser
from pmutop.app.platform_setup import build_platform, sysroot_dir
from pmutop.core.cpulist import format_cpu_list, group_by_cpu
from pmutop.core.errors import HardwareError, UsageError
from pmutop.hw.cpus import describe_cpus
from pmutop.hw.platform import HostPlatform, Platform
from pmutop.pmu import builtin_events, perfmon, topdown_plan, uarch
from pmutop.pmu.cpuid_decode import CoreType, CpuIdentity, PerfmonInfo, identity_to_dict
from pmutop.pmu.events import ARCH_EVENTS, SOFTWARE_EVENTS, EventSpec
from pmutop.pmu.perfmon import MAPFILE, NO_TABLES_HINT, PERFMON_ENV, PERFMON_URL, IntelEvent, PerfmonTables

_NAME_WIDTH_MAX = 60
_ENCODING_WIDTH_MAX = 40
_LINE_MAX = 300  # characters of one event line: whatever a table holds, a listing stays readable
SIMULATED_LINE = "SIMULATED PMU (--demo): the simulated machine's CPUs, not this machine's"
_AMD = "AuthenticAMD"
# The AMD event perf counts for each generic name on Zen (family 17h and later): Linux arch/x86/events/amd/core.c
# amd_zen2_perfmon_event_map / amd_zen4_perfmon_event_map (ref-cycles, PMCx120, only on Zen 4 and later).
_ZEN_GENERIC = {
    "instructions": 0xC0,
    "cycles": 0x76,
    "llc-references": 0xFF60,
    "llc-misses": 0x0964,
    "branches": 0xC2,
    "branch-misses": 0xC3,
    "ref-cycles": 0x100000120,
}
_GENERIC_TITLE = "Generic events (perf's hardware events: the kernel counts each as the AMD event shown)"


@dataclass
class CpuGroup:
    """Online CPUs that share model, stepping and core type: they read the same event table."""

    cpus: list[int]
    identity: CpuIdentity
    core: CoreType | None
    pmu: PerfmonInfo

    @property
    def core_code(self) -> int | None:
        return self.core.code if self.core else None

    @property
    def core_short(self) -> str | None:
        return self.core.short if self.core else None

    def label(self) -> str:
        kind = f" ({self.core.name})" if self.core else ""
        return f"CPUs {format_cpu_list(self.cpus)}{kind}"


def cpu_groups(platform: Platform, problems: dict[int, str] | None = None) -> list[CpuGroup]:
    """Online CPUs grouped by what they read; CPUs whose CPUID cannot be read go to `problems` (cpu -> why)."""
    survey = describe_cpus(platform, platform.online_cpus())
    if problems is None and survey.unreadable:
        raise HardwareError(next(iter(survey.unreadable.values())))
    if problems is not None:
        problems.update(survey.unreadable)
    groups: dict[tuple[Any, ...], CpuGroup] = {}
    for cpu, described in survey.described.items():
        ident, core = described.identity, described.core_type
        key = (
            ident.vendor,
            ident.family,
            ident.model,
            ident.stepping,
            core.code if core else None,
            core.native_model_id if core else None,
        )
        if key in groups:
            groups[key].cpus.append(cpu)
        else:
            groups[key] = CpuGroup([cpu], ident, core, described.perfmon)
    return list(groups.values())


def download_dir(perfmon_dir: str | None) -> Path:
    """Where --download writes: --perfmon-dir, else $PMUTOP_PERFMON_DIR, else the cache (the order locate reads)."""
    chosen = perfmon_dir or os.environ.get(PERFMON_ENV)
    return Path(chosen).expanduser() if chosen else perfmon.cache_dir()


def _entry(
    name: str,
    kind: str,
    description: str,
    *,
    core_type: str | None = None,
    cpus: str,
    event: int | None = None,
    umask: int | None = None,
    cmask: int | None = None,
    inv: bool | None = None,
    edge: bool | None = None,
    counters: int | None = None,
    fixed_counter: int | None = None,
    deprecated: bool = False,
    why: str | None = None,
    encoding: str = "",
) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "description": description,
        "event": event,
        "umask": umask,
        "cmask": cmask,
        "inv": inv,
        "edge": edge,
        "counters": [i for i in range(counters.bit_length()) if counters >> i & 1] if counters is not None else None,
        "fixed_counter": fixed_counter,
        "deprecated": deprecated,
        "usable": why is None,
        "why": why,
        "core_type": core_type,
        "cpus": cpus,
        "encoding": encoding,
    }


def _spec_encoding(spec: EventSpec) -> str:
    parts = []
    if spec.fixed_index is not None:
        parts.append(f"fixed {spec.fixed_index}")
    if spec.raw is not None:
        parts.append(f"event={spec.raw.event:#04x},umask={spec.raw.umask:#04x}")
    return " or ".join(parts)


def _arch_entries(groups: list[CpuGroup], all_cpus: str) -> list[dict[str, Any]]:
    entries = []
    for spec in ARCH_EVENTS.values():
        why = None
        no_pmu = [g for g in groups if g.pmu.version == 0]
        missing = [g for g in groups if spec.name in g.pmu.unavailable_events]
        if no_pmu:
            why = no_pmu[0].pmu.notes[0] if no_pmu[0].pmu.notes else "no architectural PMU"
        elif missing:
            where = "" if len(missing) == len(groups) else f" on {', '.join(g.label() for g in missing)}"
            why = f"CPUID 0xA reports it unavailable{where}"
        raw = spec.raw
        entries.append(
            _entry(
                spec.name,
                "architectural",
                spec.description,
                cpus=all_cpus,
                event=raw.event if raw else None,
                umask=raw.umask if raw else None,
                cmask=raw.cmask if raw else None,
                inv=raw.inv if raw else None,
                edge=raw.edge if raw else None,
                fixed_counter=spec.fixed_index,
                why=why,
                encoding=_spec_encoding(spec),
            )
        )
    return entries


def _amd_config_text(config: int) -> str:
    """perf's raw config of an AMD core event as event/umask (event bits 11:8 live in config bits 35:32)."""
    event = (config >> 24 & 0xF00) | (config & 0xFF)
    return f"event={event:#04x},umask={config >> 8 & 0xFF:#04x}"


def _zen4_or_later(ident: CpuIdentity) -> bool:
    return ident.family >= 0x1A or (ident.uarch or "").startswith(("Zen 4", "Zen 5"))


def hardware_events_problem(platform: Platform) -> str | None:
    """Why perf cannot count hardware events on this host (as `info` says), or None: they open, or the machine
    described is not this host (a --sysroot or the simulator), whose perf cannot be asked."""
    if not isinstance(platform, HostPlatform) or not platform.sysroot.is_host:
        return None
    from pmutop.backends.perf import probe_hardware_events

    cpus = platform.online_cpus()
    return probe_hardware_events(cpus[0]) if cpus else None


def _generic_entries(group: CpuGroup, all_cpus: str, perf_problem: str | None) -> list[dict[str, Any]]:
    """The architectural names on an AMD CPU: perf's generic hardware events (the perf backend counts them,
    so none is usable where perf opens no hardware event: `perf_problem`)."""
    ident = group.identity
    zen = ident.family >= 0x17
    entries = []
    for spec in ARCH_EVENTS.values():
        why = f"perf has no hardware events here ({perf_problem})" if perf_problem else None
        config = _ZEN_GENERIC.get(spec.name) if zen else None
        if spec.name == "ref-cycles" and not (zen and _zen4_or_later(ident)):
            config = None
            why = why or "Linux maps ref-cycles on AMD from Zen 4 on only (PMCx120, Linux 6.10)"
        encoding = f"perf hw {spec.hardware}" + (f" = {_amd_config_text(config)}" if config is not None else "")
        entries.append(_entry(spec.name, "generic", spec.description, cpus=all_cpus, why=why, encoding=encoding))
    return entries


def _amd_topdown_entries(group: CpuGroup) -> list[dict[str, Any]]:
    """The AMD events pmutop's top-down counts on this CPU (Zen 4 / Zen 5, perf backend); none elsewhere."""
    plan = topdown_plan.plan_topdown(
        group.identity, None, group.pmu, perf_capabilities=None, smt=None, tables=None, backend="perf"
    )
    if not plan.available:
        return []
    out = []
    for spec in plan.events:
        raw = spec.raw
        assert raw is not None  # AMD events are raw encodings
        text = f"top-down input on {plan.core} (perf backend); encoding from Linux perf pmu-events"
        out.append(
            _entry(
                spec.name,
                "amd",
                text,
                cpus=format_cpu_list(group.cpus),
                event=raw.event,
                umask=raw.umask,
                encoding=f"event={raw.event:#04x},umask={raw.umask:#04x}",
            )
        )
    return out


def _builtin_topdown_entries(group: CpuGroup) -> list[dict[str, Any]]:
    """The Intel events pmutop ships for top-down on this group's core (pmutop.pmu.builtin_events), if any."""
    ident, native = group.identity, group.core.native_model_id if group.core else None
    core = uarch.core_uarch(ident.vendor, ident.family, ident.model, group.core_code, native)
    shipped = builtin_events.TOPDOWN_EVENTS.get(core.name) if core else None
    if core is None or shipped is None:
        return []
    out = []
    for name, entry in shipped.items():
        ev = entry.event
        fixed_only = ev.fixed_counter is not None
        tables = "/".join(dict.fromkeys(source.split("/")[0] for source in entry.sources))
        out.append(
            _entry(
                name,
                "builtin",
                f"{core.name}: {ev.description} (Intel's {tables} tables)",
                core_type=group.core_short,
                cpus=format_cpu_list(group.cpus),
                event=None if fixed_only else ev.event_code,
                umask=None if fixed_only else ev.umask,
                cmask=None if fixed_only else ev.cmask,
                counters=ev.counters,
                fixed_counter=ev.fixed_counter,
                encoding=ev.encoding + (",any" if ev.any_thread else ""),
            )
        )
    return out


def _software_entries(all_cpus: str) -> list[dict[str, Any]]:
    return [
        _entry(spec.name, "software", spec.description, cpus=all_cpus, encoding="kernel")
        for spec in SOFTWARE_EVENTS.values()
    ]


def _intel_entry(ev: IntelEvent, group: CpuGroup) -> dict[str, Any]:
    fixed_only = ev.fixed_counter is not None
    return _entry(
        ev.name,
        "intel",
        ev.description,
        core_type=group.core_short,
        cpus=format_cpu_list(group.cpus),
        event=None if fixed_only else ev.event_code,
        umask=None if fixed_only else ev.umask,
        cmask=None if fixed_only else ev.cmask,
        inv=None if fixed_only else ev.inv,
        edge=None if fixed_only else ev.edge,
        counters=ev.counters,
        fixed_counter=ev.fixed_counter,
        deprecated=ev.deprecated,
        why=ev.problem,
        encoding=ev.encoding,
    )


def _table_section(tables: PerfmonTables | None, group: CpuGroup) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """What the tables say about one CPU group: a summary and its event entries."""
    info: dict[str, Any] = {
        "cpus": format_cpu_list(group.cpus),
        "core_type": group.core_short,
        "cpuid": perfmon.cpuid_string(group.identity),
        "files": [],
        "note": None,
    }
    if group.identity.vendor != "GenuineIntel":
        info["note"] = f"Intel's perfmon tables do not describe {group.identity.vendor or 'this vendor'}'s CPUs"
        return info, []
    if tables is None:
        info["note"] = f"Intel event names need Intel's perfmon tables: {NO_TABLES_HINT}"
        return info, []
    files = tables.files_for(group.identity, group.core_code, group.core.native_model_id if group.core else None)
    if not files:
        info["note"] = (
            f"{tables.root / MAPFILE} has no core event table for {info['cpuid']} "
            "(update the tables with `pmutop events --download`)"
        )
        return info, []
    info["files"] = [_relative(p, tables.root) for p in files]
    events = tables.events_for(group.identity, group.core_code, group.core.native_model_id if group.core else None)
    return info, [_intel_entry(ev, group) for ev in events.values()]


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _matches(entry: dict[str, Any], word: str) -> bool:
    word = word.lower()
    return word in entry["name"].lower() or word in (entry["description"] or "").lower()


def _render_section(title: str, entries: list[dict[str, Any]]) -> list[str]:
    if not entries:
        return []
    name_w = min(max(len(e["name"]) for e in entries), _NAME_WIDTH_MAX)
    enc = [_encoding_text(e) for e in entries]
    enc_w = min(max(len(t) for t in enc), _ENCODING_WIDTH_MAX)
    shared = {e["why"] for e in entries}
    common = next(iter(shared)) if len(entries) > 1 and len(shared) == 1 else None
    # One reason for every line is said once, under the title, not repeated on each line.
    lines = ["", title] + ([f"  (none usable here: {common})"] if common else [])
    for e, enc_text in zip(entries, enc, strict=True):
        tags = []
        if e["why"] and not common:
            tags.append(f"[not usable: {e['why']}]")
        if e["deprecated"]:
            tags.append("[deprecated]")
        text = " ".join([*tags, e["description"]]) if e["description"] else " ".join(tags)
        line = f"  {e['name']:<{name_w}}  {enc_text:<{enc_w}}  {text}".rstrip()
        lines.append(line if len(line) <= _LINE_MAX else line[: _LINE_MAX - 1] + "…")
    return lines


def _encoding_text(entry: dict[str, Any]) -> str:
    text = entry["encoding"]
    if entry["counters"] is not None:
        text += f" [counters {format_cpu_list(entry['counters'])}]"
    return text


def _identity_line(group: CpuGroup) -> str:
    ident = group.identity
    uarch = f", {ident.uarch}" if ident.uarch else ""
    return (
        f"{group.label()}: {ident.vendor or 'unknown vendor'} family {ident.family:#x} model {ident.model:#x} "
        f"stepping {ident.stepping}{uarch}"
    )


def run_events(
    platform: Platform,
    *,
    search: str | None,
    as_json: bool,
    perfmon_dir: str | None,
    download: bool,
    url: str,
    simulated: bool = False,
    perf_problem: str | None = None,
) -> str:
    """The text (or JSON) `pmutop events` prints (`simulated`: the platform is the simulated machine;
    `perf_problem`: why perf opens no hardware event here, None when it does or was not asked)."""
    unreadable: dict[int, str] = {}
    groups = cpu_groups(platform, unreadable)
    if not groups and unreadable:  # nothing to describe: the first reason is the whole story
        raise HardwareError(unreadable[min(unreadable)])
    all_cpus = format_cpu_list([c for g in groups for c in g.cpus])
    fetched: list[Path] = []
    if download:
        wanted = [(g.identity, g.core_code) for g in groups if g.identity.vendor == "GenuineIntel"]
        if not wanted:
            vendor = groups[0].identity.vendor if groups else "unknown"
            raise UsageError(f"--download: Intel's perfmon tables do not describe {vendor or 'this vendor'}'s CPUs")
        dest = download_dir(perfmon_dir)
        fetched = perfmon.download(url, dest, wanted)
        tables: PerfmonTables | None = PerfmonTables(dest)
    else:
        tables = PerfmonTables.locate(perfmon_dir)

    amd = [g for g in groups if g.identity.vendor == _AMD]
    intel_like = [g for g in groups if g.identity.vendor != _AMD]
    if amd and not intel_like:
        entries = _generic_entries(amd[0], all_cpus, perf_problem)
    else:
        entries = _arch_entries(intel_like, all_cpus)
    entries += _software_entries(all_cpus)
    for group in amd:
        entries += _amd_topdown_entries(group)
    for group in intel_like:
        entries += _builtin_topdown_entries(group)
    sections: list[tuple[dict[str, Any], list[dict[str, Any]]]] = [_table_section(tables, g) for g in groups]
    for _, intel in sections:
        entries.extend(intel)
    if search is not None:
        entries = [e for e in entries if _matches(e, search)]
    notes = list(tables.notes) if tables is not None else []
    notes += [f"{problem}; not listed" for problem in group_by_cpu(unreadable)]

    if as_json:
        doc = {
            "simulated": simulated,
            "cpu": identity_to_dict(groups[0].identity) if groups else None,
            "cpu_groups": [info for info, _ in sections],
            "tables": str(tables.root) if tables is not None else None,
            "downloaded": [str(p) for p in fetched],
            "search": search,
            "notes": notes,
            "events": [{k: v for k, v in e.items() if k != "encoding"} for e in entries],
        }
        return json.dumps(doc, indent=2)

    lines = ([SIMULATED_LINE] if simulated else []) + [_identity_line(g) for g in groups]
    if fetched:
        root = tables.root if tables is not None else Path()
        lines.append(f"downloaded {len(fetched)} files into {root}: {', '.join(_relative(p, root) for p in fetched)}")
    lines.append(f"Intel event tables: {tables.root if tables is not None else 'none found'}")
    for info, _ in sections:
        label = f"CPUs {info['cpus']}" + (f" ({info['core_type']}-cores)" if info["core_type"] else "")
        detail = ", ".join(info["files"]) if info["files"] else info["note"]
        lines.append(f"  {label}: {detail}")
    lines.extend(f"note: {n}" for n in notes)

    def pick(kind: str, cpus: str | None = None) -> list[dict[str, Any]]:
        return [e for e in entries if e["kind"] == kind and (cpus is None or e["cpus"] == cpus)]

    lines += _render_section("Architectural events (CPUID 0xA)", pick("architectural"))
    lines += _render_section(_GENERIC_TITLE, pick("generic"))
    lines += _render_section("Software events (kernel counters)", pick("software"))
    for group in amd:
        title = f"AMD events pmutop counts for top-down on CPUs {format_cpu_list(group.cpus)}"
        lines += _render_section(title + " (not --events names)", pick("amd", format_cpu_list(group.cpus)))
    for group in intel_like:
        cpus = format_cpu_list(group.cpus)
        title = f"Intel events pmutop ships for top-down on CPUs {cpus}"
        lines += _render_section(title + " (no tables needed; not --events names)", pick("builtin", cpus))
    for info, _ in sections:
        files = ", ".join(Path(f).name for f in info["files"])
        title = f"Intel events for CPUs {info['cpus']}" + (f" ({info['core_type']}-cores)" if info["core_type"] else "")
        lines += _render_section(f"{title}, from {files}", pick("intel", info["cpus"]))
    if search is not None:
        usable = sum(1 for e in entries if e["usable"])
        lines += ["", f"{len(entries)} events match {search!r} ({usable} usable)"]
    return "\n".join(lines)


def described_platform(args: argparse.Namespace) -> Platform:
    """The machine `info` or `events` describes: the simulated one with --demo (its --sim-* shape), else this
    host or --sysroot."""
    if args.demo:
        args.backend = "sim"
        return build_platform(args)
    return HostPlatform(sysroot_dir(args.sysroot))


def events_main(argv: Sequence[str]) -> str:
    """`pmutop events ARGS`: parse, check, run; returns the text to print. Errors are PmutopError."""
    args = events_parser().parse_args(list(argv))
    if args.perfmon_url is not None:
        if not args.download:
            raise UsageError("--perfmon-url needs --download")
        perfmon.check_source(args.perfmon_url)  # a refused scheme is said before anything else is read
    platform = described_platform(args)
    return run_events(
        platform,
        search=args.search,
        as_json=args.json,
        perfmon_dir=args.perfmon_dir,
        download=args.download,
        url=args.perfmon_url or PERFMON_URL,
        simulated=platform.simulated,
        perf_problem=hardware_events_problem(platform),
    )
