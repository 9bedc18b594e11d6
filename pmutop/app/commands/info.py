"""`pmutop info`: what this machine (or sysroot) offers, and which backend a plain `pmutop` would use.

The facts the choice reads come from pmutop.backends.facts, the choice from pmutop.backends.choose; this
module adds what only `pmutop info` shows (the rdpmc probe, top-down per CPU, power sources, pmutop runs)
and renders it all as text or JSON.
"""

from __future__ import annotations

import json
import os
from typing import Any

from pmutop.app.commands.events import SIMULATED_LINE, described_platform
from pmutop.app.options import info_parser
from pmutop.backends.choose import BackendChoice, BackendRequest, choose
from pmutop.backends.facts import HostFacts, probe_host, probe_rdpmc
from pmutop.core.cpulist import format_cpu_list, group_by_cpu
from pmutop.core.errors import HardwareError, UsageError
from pmutop.core.task_reading import ESTIMATED, EXACT, SIMULATED
from pmutop.hw import perf_event
from pmutop.hw.cpus import CpuSurvey, describe_cpus
from pmutop.hw.platform import NMI_WATCHDOG, PERF_EVENT_PARANOID, HostPlatform, Platform
from pmutop.pmu import registers, topdown_plan
from pmutop.pmu.cpuid_decode import CpuIdentity, PerfmonInfo, identity_to_dict, perfmon_to_dict
from pmutop.pmu.perfmon import PerfmonTables
from pmutop.probes import dram
from pmutop.probes.cgroup_names import find_cgroup2
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.safety.state_files import describe_runs, leftover_lines


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def gather(platform: HostPlatform, *, probe: bool = True) -> dict[str, Any]:
    """Every fact `pmutop info` reports, as a JSON-ready dict (snake_case keys)."""
    host = probe_host(platform)
    if probe:
        host.rdpmc_probe = probe_rdpmc(platform, host)
    survey = host.cpus
    cpus, readable = host.online_cpus, host.readable_cpus
    first = readable[0] if readable else cpus[0]
    facts: dict[str, Any] = {"sysroot": host.sysroot}
    facts["online_cpus"] = format_cpu_list(cpus)
    facts["cpuid_problems"] = group_by_cpu(survey.unreadable)
    facts["cpuid_unreadable_cpus"] = format_cpu_list(host.unreadable_cpus)
    facts["cpuid_readable_cpus"] = format_cpu_list(readable)
    identity = survey.identity
    if identity is not None:
        facts.update(identity_to_dict(identity))
        facts["cpuid_source"] = platform.cpuid_method(first)
    else:
        facts.update(host.cpuinfo_identity or {"vendor": None})
        facts["cpuid_source"] = None
        facts["cpuid_error"] = host.cpuid_error
    # PMU facts of the first CPU at top level; every CPU (grouped when identical) under "cpu_groups", filled
    # in once the verdict says which backend would count (top-down depends on it).
    if readable:
        facts.update(perfmon_to_dict(survey.described[first].perfmon))
    else:
        facts["version"] = None
    facts["cpu_groups"] = []
    msr = host.msr
    facts["msr"] = {"present": msr.present, "writable": msr.writable, "problem": msr.problem}
    facts["rdpmc_sysfs"] = host.rdpmc_sysfs
    facts["nmi_watchdog"] = host.nmi_watchdog
    facts["pmutop_runs"] = describe_runs(platform.sysroot)
    facts["perf_event_paranoid"] = _int_or_none(platform.read_setting(PERF_EVENT_PARANOID))
    facts["root"] = host.root
    facts["rdpmc_probe"] = host.rdpmc_probe.to_dict() if host.rdpmc_probe is not None else None
    facts["counters_in_use"] = host.counters_in_use.to_dict()
    facts["perf"] = host.perf.to_dict()
    facts["power_sources"] = [
        {"source": x.name, "available": x.available, "detail": x.detail}
        for x in PowerMonitor.for_platform(platform, cpus).sources()
    ]
    facts["memory_bandwidth"] = dram.info_facts(
        platform.sysroot, facts.get("vendor"), facts.get("family"), facts.get("model")
    )
    choice = choose(host, BackendRequest()).after_leftovers(leftover_lines(facts["pmutop_runs"]))
    facts["verdict"] = choice.to_dict()
    facts["per_task"] = per_task_facts(
        host=platform.sysroot.is_host,
        backend=choice.name,
        perf=facts["perf"],
        root=host.root,
        paranoid=facts["perf_event_paranoid"],
        cgroup2=find_cgroup2(platform.sysroot),
    )
    topdowns = _topdown(platform, survey, choice)
    groups: list[dict[str, Any]] = []
    for cpu, described in survey.described.items():
        core_type = described.core_type
        entry = {
            "core_type": core_type.short if core_type else None,
            "core_type_name": core_type.name if core_type else None,
            **perfmon_to_dict(described.perfmon),
            "topdown": topdowns[cpu],
        }
        _add_to_groups(groups, cpu, entry)
    facts["cpu_groups"] = _cpu_lists(groups)
    return facts


def gather_simulated(platform: Platform) -> dict[str, Any]:
    """What `pmutop info --demo` reports: the simulated machine as the msr backend would find it (the same keys
    as `gather`, with "simulated": true)."""
    cpus = platform.online_cpus()
    survey = describe_cpus(platform, cpus)
    identity = survey.identity
    assert identity is not None  # the simulator answers every CPUID leaf
    first = cpus[0]
    facts: dict[str, Any] = {"simulated": True, "sysroot": None, "online_cpus": format_cpu_list(cpus)}
    facts |= {"cpuid_problems": [], "cpuid_unreadable_cpus": "", "cpuid_readable_cpus": format_cpu_list(cpus)}
    facts |= identity_to_dict(identity) | {"cpuid_source": "the simulator"}
    facts |= perfmon_to_dict(survey.described[first].perfmon)
    facts["msr"] = {"present": True, "writable": True, "problem": None}
    facts["rdpmc_sysfs"] = {}
    facts["nmi_watchdog"] = _int_or_none(platform.read_setting(NMI_WATCHDOG))
    facts["pmutop_runs"] = []
    facts["perf_event_paranoid"] = _int_or_none(platform.read_setting(PERF_EVENT_PARANOID))
    facts["root"] = False
    probe = platform.probe_rdpmc(first, 0, 0)
    facts["rdpmc_probe"] = {"ran": True, "ok": probe.ok, "detail": probe.detail}
    facts["counters_in_use"] = {"checked": True, "busy": []}
    facts["perf"] = {"checked": False, "detail": "the simulated PMU has no perf events"}
    facts["power_sources"] = [
        {"source": x.name, "available": x.available, "detail": x.detail}
        for x in PowerMonitor.for_platform(platform, cpus).sources()
    ]
    from pmutop.sim.dram import SimDramCounters

    facts["memory_bandwidth"] = SimDramCounters(platform.machine).info_facts()  # type: ignore[attr-defined]
    facts["verdict"] = {
        "backend": "msr",
        "events": "hardware",
        "read_method": "rdpmc",
        "reasons": ["--demo: the msr backend programs the simulated PMU as it would a real one"],
        "fixes": [],
    }
    facts["per_task"] = {
        "mode": SIMULATED,
        "why": "--demo: the simulated machine's process table (every number synthetic)",
        "cgroups": {
            "possible": True,
            "v2_root": None,
            "why": "--demo: the simulated machine's cgroups (--cgroups, or --cgroup PATH), every number synthetic",
        },
    }
    tables: PerfmonTables | None
    try:
        tables = PerfmonTables.locate(None)
    except UsageError:
        tables = None
    groups: list[dict[str, Any]] = []
    for cpu, described in survey.described.items():
        ct, pm = described.core_type, described.perfmon
        dev = platform.open_msr(cpu, writable=False)
        plan = topdown_plan.plan_topdown(
            identity,
            ct,
            pm,
            perf_capabilities=dev.read(registers.IA32_PERF_CAPABILITIES),
            smt=False,
            tables=tables,
            backend="msr",
        )
        entry = {
            "core_type": ct.short if ct else None,
            "core_type_name": ct.name if ct else None,
            **perfmon_to_dict(pm),
            "topdown": {"backend": "msr", **plan.to_dict()},
        }
        _add_to_groups(groups, cpu, entry)
    facts["cpu_groups"] = _cpu_lists(groups)
    return facts


def per_task_facts(
    *, host: bool, backend: str | None, perf: dict[str, Any], root: bool, paranoid: int | None, cgroup2: str | None
) -> dict[str, Any]:
    """Which per-process and per-cgroup counting a plain run gives here: "exact" (perf backend: the kernel's
    per-task and per-cgroup counters), "estimated" (msr backend: each core's counts split by each process's share
    of its busy time) or "none", with why; and whether cgroup counters can open (cgroup v2 found, and where)."""
    where = f"/{cgroup2}" if cgroup2 else None
    if not host:
        why = "--sysroot: per-task counters count this host's processes only"
        return {"mode": "none", "why": why, "cgroups": {"possible": False, "v2_root": where, "why": why}}
    if backend is None:
        mode, why = "none", "no backend can run here (see the verdict)"
    elif perf.get("checked") and not perf.get("software_ok"):
        mode, why = "none", f"perf_event_open does not open software events: {perf.get('software_problem')}"
    elif not root and paranoid is not None and paranoid >= 3:
        # Debian/Ubuntu's level 3 forbids perf_event_open to unprivileged users altogether.
        mode, why = "none", f"perf_event_paranoid={paranoid} forbids perf_event_open: run as root or CAP_PERFMON"
    elif backend == "perf":
        mode, why = EXACT, "perf backend: the kernel's per-task and per-cgroup counters"
        if not perf.get("hardware_ok"):
            why += " (software events only: task-clock, context switches; this PMU has no hardware events)"
        if not root:
            # Another user's process needs ptrace rights (kernel perf_check_permission): root or CAP_PERFMON.
            why += "; your own processes only (others': run as root or CAP_PERFMON)"
    else:
        mode = ESTIMATED
        why = (
            f"{backend} backend: per-task counters would fight the counters it programs, so each core's counts "
            "are split by each process's share of its busy time (exact numbers: --backend perf)"
        )
    if cgroup2 is None:
        cgroups = {"possible": False, "v2_root": None, "why": "no cgroup v2 hierarchy at /sys/fs/cgroup(/unified)"}
    elif mode == "none":
        cgroups = {"possible": False, "v2_root": where, "why": f"cgroup v2 at {where}, but {why}"}
    elif not root and (paranoid is None or paranoid > 0):
        # Cgroup events are CPU-wide: above level 0 those need CAP_PERFMON (include/linux/perf_event.h
        # perf_allow_cpu).
        cgroups = {
            "possible": False,
            "v2_root": where,
            "why": f"cgroup v2 at {where}, but cgroup counters are CPU-wide: perf_event_paranoid={paranoid} "
            "allows them to root or CAP_PERFMON only",
        }
    else:
        cgroups = {"possible": True, "v2_root": where, "why": f"cgroup v2 at {where}"}
    return {"mode": mode, "why": why, "cgroups": cgroups}


def verdict(facts: dict[str, Any]) -> dict[str, Any]:
    """The verdict of a `pmutop info --json` document's facts: which backend and read method a plain
    `pmutop` (--backend auto) uses, or why none can run and the fix (pmutop.backends.choose)."""
    choice = choose(HostFacts.from_dict(facts), BackendRequest())
    return choice.after_leftovers(leftover_lines(facts.get("pmutop_runs") or [])).to_dict()


def _perf_capabilities(platform: HostPlatform, cpu: int, identity: CpuIdentity, pm: PerfmonInfo) -> int | None:
    """IA32_PERF_CAPABILITIES of `cpu`, or None when it does not exist (CPUID.1:ECX.PDCM) or cannot be read."""
    if identity.vendor != "GenuineIntel" or not identity.pdcm or pm.version < 2:
        return None
    if not os.access(platform.sysroot.path(f"dev/cpu/{cpu}/msr"), os.R_OK):
        return None
    try:
        dev = platform.open_msr(cpu, writable=False)
    except HardwareError:
        return None
    try:
        return dev.read(registers.IA32_PERF_CAPABILITIES)
    except HardwareError:
        return None
    finally:
        dev.close()


def _topdown(platform: HostPlatform, survey: CpuSurvey, chosen: BackendChoice) -> dict[int, dict[str, Any]]:
    """How each CPU would measure top-down on the backend a plain run picks (pmutop.pmu.topdown_plan)."""
    identity = survey.identity
    if identity is None:
        return {}
    backend = chosen.name or ("msr" if identity.vendor == "GenuineIntel" else "perf")
    pmus = perf_event.list_pmus(platform.sysroot) if backend == "perf" else {}
    tables: list[PerfmonTables | None] = []  # located on first need (an E-core or older big core)
    plans: dict[int, dict[str, Any]] = {}
    caps: dict[object, int | None] = {}  # per core type: the MSR is the same on every CPU of a kind
    for cpu, described in survey.described.items():
        pm, ct = described.perfmon, described.core_type
        if chosen.events == "software":
            plan = topdown_plan.unavailable("perf has no hardware events here")
        else:
            kind = (ct.code, ct.native_model_id) if ct else None
            if kind not in caps:
                caps[kind] = _perf_capabilities(platform, cpu, identity, pm) if backend == "msr" else None
            smt = topdown_plan.smt_from_sysfs(platform.read_setting, cpu)
            cpuid = platform.cpuid_fn(cpu)
            pmu = perf_event.core_pmu_for_cpu(pmus, cpu)
            if not tables:
                try:
                    tables.append(PerfmonTables.locate(None))
                except UsageError:
                    tables.append(None)
            plan = topdown_plan.plan_topdown(
                identity,
                ct,
                pm,
                perf_capabilities=caps[kind],
                smt=topdown_plan.smt_from_cpuid(cpuid) if smt is None else smt,
                tables=tables[0],
                backend=backend,
                perf_events=perf_event.pmu_events(platform.sysroot, pmu.name).keys() if pmu else None,
                any_thread_format=pmu is None or "any" in pmu.formats,
            )
        plans[cpu] = {"backend": backend, **plan.to_dict()}
    return plans


def _topdown_text(td: dict[str, Any]) -> str:
    """One line: how top-down is measured (or why not), and whether a plain run does it."""
    text = (
        f"({td['backend']} backend): "
        + (f"{td['core']}, " if td["available"] and td.get("core") else "")
        + td["detail"]
    )
    if td["available"] and not td["default_on"]:
        n = td["gp_counters"]
        text += f"; takes {n} general-purpose counter{'s' if n != 1 else ''}, so only when asked (--topdown)"
    return text


def _yes(b: object) -> str:
    return "yes" if b else "no"


def render_text(f: dict[str, Any]) -> str:
    lines: list[tuple[str, str]] = []
    if f.get("simulated"):
        lines.append(("Mode", SIMULATED_LINE))
    if f.get("vendor"):
        fam = f"{f['vendor']} family {f['family']:#x} model {f['model']:#x} stepping {f['stepping']}"
        lines.append(("CPU", fam + (f" ({f['microarchitecture']})" if f.get("microarchitecture") else "")))
        if f.get("brand"):
            lines.append(("Model name", f["brand"]))
        hv = _yes(f.get("hypervisor"))
        if f.get("hypervisor_vendor"):
            hv += f" ({f['hypervisor_vendor']})"
        lines.append(("Hypervisor", hv))
        lines.append(("Hybrid", _yes(f.get("hybrid"))))
    else:
        lines.append(("CPU", "unknown (" + (f.get("cpuid_error") or "no CPUID") + ")"))
    lines.append(("Online CPUs", f["online_cpus"]))
    lines.append(("CPUID source", f.get("cpuid_source") or "none"))
    for problem in f.get("cpuid_problems") or []:
        lines.append(("CPUID", problem))
    for g in f.get("cpu_groups", []):
        label = f"PMU cpu {g['cpus']}"
        kind = f"{g['core_type_name']}: " if g.get("core_type_name") else ""
        if g["version"]:
            text = (
                f"{kind}version {g['version']}, {g['gp_counters']} general × {g['gp_width']} bit, "
                f"{g['fixed_counters']} fixed × {g['fixed_width']} bit"
                f" (mask {g['fixed_mask']:#x})"
            )
            if g["unavailable_events"]:
                text += "; unavailable: " + ", ".join(g["unavailable_events"])
        else:
            text = kind + "no architectural PMU (version 0)"
        lines.append((label, text))
        for note in g.get("notes", []):
            lines.append(("", note))
        td = g.get("topdown")
        if td:
            lines.append(("", "top-down " + _topdown_text(td)))
    msr = f["msr"]
    lines.append(("MSR device", "present, writable" if msr["writable"] else (msr["problem"] or "not usable")))
    sysfs = f.get("rdpmc_sysfs") or {}
    sysfs_text = ", ".join(f"{k}={v}" for k, v in sysfs.items()) or "absent (no core PMU registered)"
    lines.append(("rdpmc sysfs", "not modelled: the simulator allows rdpmc" if f.get("simulated") else sysfs_text))
    probe = f.get("rdpmc_probe")
    lines.append(("rdpmc probe", "not run" if probe is None else ("works: " if probe["ok"] else "") + probe["detail"]))
    watchdog = str(f.get("nmi_watchdog", "unknown"))
    for run in f.get("pmutop_runs") or []:
        change = run["settings"].get(NMI_WATCHDOG)
        if change and watchdog == change["set"]:
            state = "running" if run["running"] else "no longer running: `pmutop restore` sets it back"
            watchdog += f" (paused by pmutop pid {run['pid']}, {state}; was {change['original']})"
            break
    lines.append(("NMI watchdog", watchdog))
    for run in f.get("pmutop_runs") or []:
        if run["running"]:
            lines.append(("pmutop running", f"pid {run['pid']} on cpu {run['cpus']} since {run['started']}"))
    lines.append(("perf paranoid", str(f.get("perf_event_paranoid", "unknown"))))
    use = f.get("counters_in_use") or {}
    if use.get("checked"):
        lines.append(("Counters", "free" if not use["busy"] else "; ".join(use["busy"])))
    else:
        lines.append(("Counters", f"not checked ({use.get('detail', '')})"))
    perf = f.get("perf") or {}
    if perf.get("checked"):
        hw = "hardware events open" if perf["hardware_ok"] else f"hardware events: {perf['hardware_problem']}"
        sw = "software events open" if perf["software_ok"] else f"software events: {perf['software_problem']}"
        lines.append(("perf", f"{hw}; {sw}"))
    else:
        lines.append(("perf", f"not checked ({perf.get('detail', '')})"))
    for i, src in enumerate(f.get("power_sources") or []):
        state = "yes" if src["available"] else "no"
        lines.append(("Power sources" if i == 0 else "", f"{src['source']}: {state}: {src['detail']}"))
    lines.extend(dram.info_lines(f.get("memory_bandwidth")))
    v = f["verdict"]
    if v["backend"]:
        lines.append(
            (
                "Verdict",
                f"pmutop would use the {v['backend']} backend ({v['events']} events), reading with {v['read_method']}",
            )
        )
    else:
        lines.append(("Verdict", "no backend can run here"))
    for r in v["reasons"]:
        lines.append(("", r))
    for fix in v["fixes"]:
        lines.append(("Fix", fix))
    per_task = f.get("per_task")
    if per_task:
        lines.append(("Per-task", f"{per_task['mode']}: {per_task['why']}"))
        cgroups = per_task["cgroups"]
        lines.append(("Cgroups", ("yes: " if cgroups["possible"] else "no: ") + cgroups["why"]))
    width = max(len(k) for k, _ in lines) + 2
    return "\n".join(f"{k:<{width}}{val}" for k, val in lines)


def run_info(platform: Platform, as_json: bool) -> str:
    facts = gather_simulated(platform) if platform.simulated else gather(platform)  # type: ignore[arg-type]
    return json.dumps(facts, indent=2) if as_json else render_text(facts)


def info_main(argv: list[str]) -> int:
    """`pmutop info ARGS`: prints the description (of the simulated machine with --demo)."""
    args = info_parser().parse_args(argv)
    print(run_info(described_platform(args), args.json), flush=True)
    return 0


def _add_to_groups(groups: list[dict[str, Any]], cpu: int, entry: dict[str, Any]) -> None:
    """Consecutive CPUs with the same facts share one group (a hybrid part: the P-cores, then the E-cores)."""
    if groups and {k: v for k, v in groups[-1].items() if k != "cpus"} == entry:
        groups[-1]["cpus"].append(cpu)
    else:
        groups.append({"cpus": [cpu], **entry})


def _cpu_lists(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    for group in groups:
        group["cpus"] = format_cpu_list(group["cpus"])
    return groups
