"""`pmutop info`: what this machine (or sysroot) offers, and which backend a plain `pmutop` would use."""

from __future__ import annotations

import json
import os
from typing import Any

from pmutop.core.cpulist import format_cpu_list, group_by_cpu
from pmutop.core.errors import HardwareError, UsageError
from pmutop.hw import perf_event, shim
from pmutop.hw.msr import MsrDevice
from pmutop.hw.platform import NMI_WATCHDOG, PERF_EVENT_PARANOID, RDPMC_SYSFS, HostPlatform, Platform
from pmutop.pmu import registers, topdown_plan
from pmutop.pmu.cpuid_decode import (
    CoreType,
    CpuIdentity,
    PerfmonInfo,
    decode_core_type,
    decode_identity,
    decode_perfmon,
    identity_to_dict,
    perfmon_to_dict,
)
from pmutop.pmu.perfmon import PerfmonTables
from pmutop.pmu.plan import plan_counters
from pmutop.pmu.uarch import microarchitecture
from pmutop.pmu.usage import find_foreign_use
from pmutop.probes.power.monitor import PowerMonitor
from pmutop.safety.state_files import describe_runs


def _int_or_none(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _cpuinfo_identity(platform: Platform) -> dict[str, Any] | None:
    """Vendor/family/model from proc/cpuinfo, for sysroots that carry no CPUID device."""
    text = platform.read_setting("proc/cpuinfo")
    if not text:
        return None
    first: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if first:
                break
            continue
        key, _, value = line.partition(":")
        first[key.strip()] = value.strip()
    try:
        family, model, stepping = int(first["cpu family"]), int(first["model"]), int(first.get("stepping", "0"))
    except (KeyError, ValueError):
        return None
    vendor = first.get("vendor_id", "unknown")
    flags = first.get("flags", "").split()
    return {
        "vendor": vendor,
        "family": family,
        "model": model,
        "stepping": stepping,
        "brand": first.get("model name"),
        "hypervisor": "hypervisor" in flags,
        "hypervisor_vendor": None,
        "pdcm": "pdcm" in flags,
        "hybrid": "hybrid_cpu" in flags,
        "microarchitecture": microarchitecture(vendor, family, model, stepping),
        "source": "proc/cpuinfo",
    }


def _read_pmu_registers(dev: MsrDevice, pm: PerfmonInfo) -> dict[int, int]:
    rmap = pm.registers
    regs = {rmap.evtsel(i): dev.read(rmap.evtsel(i)) for i in pm.gp_indexes}
    regs[registers.IA32_FIXED_CTR_CTRL] = dev.read(registers.IA32_FIXED_CTR_CTRL)
    if pm.version >= 4:
        regs[registers.IA32_PERF_GLOBAL_INUSE] = dev.read(registers.IA32_PERF_GLOBAL_INUSE)
    return regs


def _counters_in_use(
    platform: Platform, cpus: list[int], perfmons: dict[int, PerfmonInfo], watchdog_on: bool
) -> dict[str, Any]:
    """Read-only look at the control registers (needs a readable msr device)."""
    busy: list[str] = []
    for cpu in cpus:
        pm = perfmons[cpu]
        if pm.version < 2:
            continue
        try:
            dev = platform.open_msr(cpu, writable=False)
        except HardwareError as e:
            return {"checked": False, "detail": str(e)}
        try:
            regs = _read_pmu_registers(dev, pm)
        except HardwareError as e:
            return {"checked": False, "detail": str(e)}
        finally:
            dev.close()
        for address, detail in find_foreign_use(pm, regs, tolerate_watchdog=watchdog_on):
            busy.append(f"cpu {cpu}: {registers.msr_name(address)} in use ({detail})")
    return {"checked": True, "busy": busy}


def gather(platform: HostPlatform, *, probe: bool = True) -> dict[str, Any]:
    """Every fact `pmutop info` reports, as a JSON-ready dict (snake_case keys)."""
    facts: dict[str, Any] = {"sysroot": str(platform.sysroot)}
    cpus = platform.online_cpus()
    facts["online_cpus"] = format_cpu_list(cpus)
    identity: CpuIdentity | None = None
    perfmons: dict[int, PerfmonInfo] = {}
    core_types: dict[int, CoreType | None] = {}
    problems: dict[int, str] = {}  # online CPUs whose CPUID cannot be read (no file, empty file, read error)
    for cpu in cpus:
        try:
            fn = platform.cpuid_fn(cpu)
            ident = decode_identity(fn) if identity is None else identity
            perfmons[cpu] = decode_perfmon(fn)
            core_types[cpu] = decode_core_type(fn)
            identity = ident
        except HardwareError as e:
            problems[cpu] = str(e)
    # The rest is said about the CPUs whose CPUID reads; the others are listed once under cpuid_problems.
    readable = [c for c in cpus if c in perfmons]
    first = readable[0] if readable else cpus[0]
    facts["cpuid_problems"] = group_by_cpu(problems)
    facts["cpuid_unreadable_cpus"] = format_cpu_list(list(problems))
    facts["cpuid_readable_cpus"] = format_cpu_list(readable)
    if identity is not None:
        facts.update(identity_to_dict(identity))
        facts["cpuid_source"] = platform.cpuid_method(first)
    else:
        facts.update(_cpuinfo_identity(platform) or {"vendor": None})
        facts["cpuid_source"] = None
        facts["cpuid_error"] = problems.get(cpus[0])

    # PMU facts of the first CPU at top level; every CPU (grouped when identical) under "cpu_groups", filled
    # in once the verdict says which backend would count (top-down depends on it).
    if perfmons:
        facts.update(perfmon_to_dict(perfmons[first]))
    else:
        facts["version"] = None
    facts["cpu_groups"] = []

    msr = platform.msr_state(first)
    facts["msr"] = {"present": msr.present, "writable": msr.writable, "problem": msr.problem}
    facts["rdpmc_sysfs"] = {
        rel.split("/")[-2]: platform.read_setting(rel) for rel in RDPMC_SYSFS if platform.read_setting(rel) is not None
    }
    facts["nmi_watchdog"] = _int_or_none(platform.read_setting(NMI_WATCHDOG))
    facts["pmutop_runs"] = describe_runs(platform.sysroot)
    facts["perf_event_paranoid"] = _int_or_none(platform.read_setting(PERF_EVENT_PARANOID))
    facts["root"] = os.geteuid() == 0
    facts["rdpmc_probe"] = _probe(platform, readable, perfmons, core_types) if probe and readable else None
    if perfmons and msr.present and os.access(platform.sysroot.path(f"dev/cpu/{first}/msr"), os.R_OK):
        facts["counters_in_use"] = _counters_in_use(platform, readable, perfmons, facts["nmi_watchdog"] == 1)
    else:
        facts["counters_in_use"] = {"checked": False, "detail": "the msr device is not readable"}
    facts["perf"] = _perf_facts(platform, first)
    facts["power_sources"] = [
        {"source": x.name, "available": x.available, "detail": x.detail}
        for x in PowerMonitor.for_platform(platform, cpus).sources()
    ]
    facts["verdict"] = verdict(facts)
    topdowns = _topdown(platform, identity, readable, perfmons, core_types, facts["verdict"])
    groups: list[dict[str, Any]] = []
    for cpu in readable:
        pm, ct = perfmons[cpu], core_types[cpu]
        entry = {
            "core_type": ct.short if ct else None,
            "core_type_name": ct.name if ct else None,
            **perfmon_to_dict(pm),
            "topdown": topdowns[cpu],
        }
        if groups and {k: v for k, v in groups[-1].items() if k != "cpus"} == entry:
            groups[-1]["cpus"].append(cpu)
        else:
            groups.append({"cpus": [cpu], **entry})
    for g in groups:
        g["cpus"] = format_cpu_list(g["cpus"])
    facts["cpu_groups"] = groups
    return facts


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


def _topdown(
    platform: HostPlatform,
    identity: CpuIdentity | None,
    cpus: list[int],
    perfmons: dict[int, PerfmonInfo],
    core_types: dict[int, CoreType | None],
    chosen: dict[str, Any],
) -> dict[int, dict[str, Any]]:
    """How each CPU would measure top-down on the backend a plain run picks (pmutop.pmu.topdown_plan)."""
    if identity is None:
        return {}
    backend = chosen.get("backend") or ("msr" if identity.vendor == "GenuineIntel" else "perf")
    pmus = perf_event.list_pmus(platform.sysroot) if backend == "perf" else {}
    tables: list[PerfmonTables | None] = []  # located on first need (an E-core or older big core)
    plans: dict[int, dict[str, Any]] = {}
    caps: dict[object, int | None] = {}  # per core type: the MSR is the same on every CPU of a kind
    for cpu in cpus:
        pm, ct = perfmons[cpu], core_types[cpu]
        if chosen.get("events") == "software":
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


def _perf_facts(platform: HostPlatform, cpu: int) -> dict[str, Any]:
    """Can perf_event_open count hardware / software events CPU-wide here? (This host's CPUs only.)"""
    if not platform.sysroot.is_host:
        return {"checked": False, "detail": "perf counts this host's CPUs only"}
    from pmutop.backends.perf import probe_hardware_events, probe_software_events

    hw = probe_hardware_events(cpu)
    sw = probe_software_events(cpu)
    return {
        "checked": True,
        "hardware_ok": hw is None,
        "hardware_problem": hw,
        "software_ok": sw is None,
        "software_problem": sw,
    }


def _probe(
    platform: HostPlatform, cpus: list[int], perfmons: dict[int, PerfmonInfo], core_types: dict[int, CoreType | None]
) -> dict[str, Any]:
    """Fork-probe rdpmc on the first CPU of each core type with the reads a run would do."""
    if not platform.rdpmc_possible():
        why = (
            "not this host's CPUs"
            if not platform.sysroot.is_host
            else (shim.BUILD_HINT if shim.lib is None else "not an x86 CPU")
        )
        return {"ran": False, "ok": False, "detail": f"not run: {why}"}
    results = []
    seen: set[object] = set()
    for cpu in cpus:
        kind = core_types.get(cpu).code if core_types.get(cpu) else None  # type: ignore[union-attr]
        if kind in seen:
            continue
        seen.add(kind)
        pm = perfmons.get(cpu)
        if pm is not None and pm.version >= 2:
            plan = plan_counters(pm, None, cpu=cpu)
            r = platform.probe_rdpmc(cpu, plan.n_fixed_read, plan.n_gp_read)
            results.append((cpu, r.ok, r.detail))
        else:  # no PMU to read: still say whether the instruction itself is allowed
            r2 = shim.probe_rdpmc_ecx(cpu, 0)
            results.append((cpu, r2.ok, r2.detail))
    ok = all(r[1] for r in results)
    return {"ran": True, "ok": ok, "detail": "; ".join(r[2] for r in results)}


def _msr_problems(f: dict[str, Any]) -> tuple[list[str], list[str]]:
    """Why the msr backend cannot run (empty when it can), and the fixes."""
    reasons: list[str] = []
    fixes: list[str] = []
    vendor = f.get("vendor")
    version = f.get("version")
    if vendor is None or version is None:
        reasons.append("CPUID could not be read" + (f": {f.get('cpuid_error')}" if f.get("cpuid_error") else ""))
        fixes.append("load the cpuid module (`modprobe cpuid`) or run on the host itself")
    elif vendor != "GenuineIntel":
        reasons.append(f"the msr backend programs Intel PMUs; this CPU is {vendor}")
        fixes.append("use `pmutop --demo` to see the interface")
    elif version == 0:
        if f.get("hypervisor"):
            reasons.append("this is a VM whose hypervisor exposes no PMU (CPUID.0AH version 0)")
            fixes.append("enable the virtual PMU in the hypervisor (e.g. QEMU/KVM `-cpu host,pmu=on`)")
        else:
            reasons.append("the CPU reports no architectural PMU (CPUID.0AH version 0)")
    elif version < 2:
        reasons.append(f"perfmon v{version} has no global control registers; pmutop needs v2+")
    msr = f["msr"]
    if not msr["writable"] and not reasons:  # the msr device matters only where the msr backend could run
        reasons.append(f"msr device: {msr['problem']}")
        if not msr["present"]:
            fixes.append("`sudo modprobe msr`")
        elif not f.get("root"):
            fixes.append("run as root: `sudo pmutop`")
    busy = f.get("counters_in_use", {}).get("busy") or []
    if busy and not reasons:
        reasons.append(f"counters in use: {busy[0]}")
        fixes.append("stop the other tool, or pass --force to take over")
    return reasons, fixes


def verdict(f: dict[str, Any]) -> dict[str, Any]:
    """Which backend and read method a plain `pmutop` (--backend auto) uses, or why none can run and the fix.

    msr when root, the msr device is writable, the PMU is present and the counters are free; otherwise
    perf when hardware events open; otherwise perf with software events (IPC and cache columns
    unavailable). Nothing falls back to simulated numbers.
    """
    chosen = _verdict(f)
    unreadable, readable = f.get("cpuid_unreadable_cpus"), f.get("cpuid_readable_cpus")
    if chosen["backend"] and unreadable and readable:
        # A plain run selects every online CPU and would stop at the first of these.
        chosen["reasons"].append(f"CPUID of cpu {unreadable} cannot be read: pass --cores {readable}")
    return chosen


def _leftovers(f: dict[str, Any]) -> list[str]:
    """What pmutop runs that ended without restoring left behind, one line each."""
    lines = []
    for run in f.get("pmutop_runs") or []:
        if run["running"]:
            continue
        if run["problem"]:
            lines.append(run["problem"])
            continue
        parts = [f"cpu {run['programmed_cpus']} PMU registers"] if run["programmed_cpus"] else []
        parts += [f"/{rel} = {c['set']} (was {c['original']})" for rel, c in run["settings"].items()]
        lines.append(
            f"pmutop pid {run['pid']} (started {run['started']}) ended without restoring: "
            + (", ".join(parts) or "nothing recorded")
        )
    return lines


def _verdict(f: dict[str, Any]) -> dict[str, Any]:
    chosen = _verdict_backend(f)
    left = _leftovers(f)
    if left:
        chosen["reasons"] = [*left, *chosen["reasons"]]
        chosen["fixes"] = [
            "`pmutop restore` puts back what a killed pmutop left (any run does it first)",
            *chosen["fixes"],
        ]
    return chosen


def _verdict_backend(f: dict[str, Any]) -> dict[str, Any]:
    reasons, fixes = _msr_problems(f)
    if reasons:
        perf = f.get("perf") or {}
        demo = "`pmutop --demo` runs on the simulated PMU anywhere"
        if perf.get("hardware_ok"):
            return {
                "backend": "perf",
                "events": "hardware",
                "read_method": "read()",
                "reasons": [f"msr backend unavailable: {reasons[0]}", "perf hardware events open"],
                "fixes": [],
            }
        if perf.get("software_ok"):
            return {
                "backend": "perf",
                "events": "software",
                "read_method": "read()",
                "reasons": [
                    f"msr backend unavailable: {reasons[0]}",
                    f"hardware events unavailable: {perf.get('hardware_problem')}",
                    "IPC and cache columns are unavailable: pmutop shows kernel software events "
                    "(context switches, migrations, page faults) and utilisation from the kernel's CPU times",
                ],
                "fixes": [
                    "for IPC and cache metrics give the VM a virtual PMU (e.g. QEMU/KVM `-cpu host,pmu=on`)"
                    if f.get("hypervisor")
                    else "the CPU exposes no hardware events to perf here",
                    demo,
                ],
            }
        if perf.get("checked"):
            reasons.append(f"perf: {perf.get('software_problem') or perf.get('hardware_problem')}")
        return {"backend": None, "events": None, "read_method": None, "reasons": reasons, "fixes": [*fixes, demo]}

    notes: list[str] = []
    sysfs = f.get("rdpmc_sysfs") or {}
    probe = f.get("rdpmc_probe") or {}
    if f["sysroot"] != "/":
        method = "msr"
        notes.append("CPUs of a sysroot are read through their msr files")
    elif probe.get("ok"):
        method = "rdpmc"
    elif "0" in sysfs.values():
        method = "msr"
        notes.append("user-space rdpmc is disabled (rdpmc sysfs = 0); counters are read through the msr files")
    elif "1" in sysfs.values():
        method = "rdpmc"
        notes.append("rdpmc sysfs is 1: pmutop sets it to 2 for the run and back to 1 on exit")
    else:
        method = "msr"
        notes.append(f"rdpmc probe failed ({probe.get('detail', 'not run')}); counters are read through msr files")
    if f.get("nmi_watchdog") == 1:
        notes.append("the NMI watchdog owns a counter: pmutop pauses it for the run and restores it")
    return {"backend": "msr", "events": "hardware", "read_method": method, "reasons": notes, "fixes": []}


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
    lines.append(("rdpmc sysfs", ", ".join(f"{k}={v}" for k, v in sysfs.items()) or "absent (no core PMU registered)"))
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
    width = max(len(k) for k, _ in lines) + 2
    return "\n".join(f"{k:<{width}}{val}" for k, val in lines)


def run_info(platform: HostPlatform, as_json: bool) -> str:
    facts = gather(platform)
    return json.dumps(facts, indent=2) if as_json else render_text(facts)
