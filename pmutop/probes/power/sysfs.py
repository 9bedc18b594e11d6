"""Root-free sources under the sysroot: cpuidle (per-state residency), hwmon (coretemp, k10temp) and
powercap (intel-rapl energy counters). Each says what it offers and, if nothing, why (for `pmutop info`)."""

from __future__ import annotations

import os
import re

from pmutop.core.sysroot import Sysroot

CPU_DIR = "sys/devices/system/cpu"
_KEEP_OPEN = 64  # cpuidle time files held open at most (16 CPUs of 4 idle states)
HWMON_DIR = "sys/class/hwmon"
POWERCAP_DIR = "sys/class/powercap"
HWMON_DRIVERS = ("coretemp", "k10temp")
POWERCAP_DOMAINS = {"core": "core", "dram": "dram"}  # RAPL subzone name -> pmutop domain


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def package_of(sysroot: Sysroot, cpu: int) -> int:
    return _int(sysroot.read_text(f"{CPU_DIR}/cpu{cpu}/topology/physical_package_id")) or 0


def core_of(sysroot: Sysroot, cpu: int) -> int | None:
    return _int(sysroot.read_text(f"{CPU_DIR}/cpu{cpu}/topology/core_id"))


class CpuIdle:
    """/sys/devices/system/cpu/cpuN/cpuidle/stateK/{name,time}: microseconds spent in each idle state
    (Documentation/admin-guide/pm/cpuidle.rst). Names are the kernel's (POLL, C1, C6, "haltpoll idle")."""

    name = "cpuidle"

    def __init__(self, sysroot: Sysroot) -> None:
        self.sysroot = sysroot
        self._open: dict[str, int] = {}  # time file (relative) -> its fd, kept open: read with one pread()

    def states(self, cpu: int) -> list[tuple[str, str]]:
        """(state name, path of its time file) in state order; [] without cpuidle."""
        base = self.sysroot.path(f"{CPU_DIR}/cpu{cpu}/cpuidle")
        try:
            dirs = sorted(
                (p for p in base.iterdir() if re.fullmatch(r"state\d+", p.name)), key=lambda p: int(p.name[5:])
            )
        except OSError:
            return []
        out = []
        for d in dirs:
            rel = f"{CPU_DIR}/cpu{cpu}/cpuidle/{d.name}"
            name = self.sysroot.read_text(f"{rel}/name")
            if name:
                out.append((name, f"{rel}/time"))
        return out

    def read(self, states: list[tuple[str, str]]) -> dict[str, int]:
        """State name -> cumulative microseconds (states whose file vanished are left out)."""
        out = {}
        for name, rel in states:
            v = self._read(rel)
            if v is not None:
                out[name] = v
        return out

    def _read(self, rel: str) -> int | None:
        # Read every interval for every CPU (batch mode's largest cost through pathlib and a text file): the
        # first _KEEP_OPEN files stay open and are re-read with pread() at offset 0, which makes sysfs show
        # the value anew (Documentation/filesystems/sysfs.rst); the rest are opened per read, as the default
        # limit of 1024 fds is shared with the perf events.
        fd = self._open.get(rel)
        try:
            if fd is None:
                fd = os.open(self.sysroot.path(rel), os.O_RDONLY | os.O_CLOEXEC)
                if len(self._open) < _KEEP_OPEN:
                    self._open[rel] = fd
                else:
                    try:
                        return int(os.read(fd, 64))
                    finally:
                        os.close(fd)
            return int(os.pread(fd, 64, 0))  # int() takes the bytes, newline and all
        except OSError:
            if self._open.pop(rel, None) is not None:
                assert fd is not None
                os.close(fd)  # a CPU gone offline: its new file, should it come back, is opened anew
            return None
        except ValueError:
            return None

    def close(self) -> None:
        fds, self._open = self._open, {}
        for fd in fds.values():
            os.close(fd)

    def status(self, cpus: list[int]) -> tuple[bool, str]:
        names = self.states(cpus[0]) if cpus else []
        if not names:
            return False, f"no {self.sysroot.path(CPU_DIR)}/cpu*/cpuidle (no cpuidle driver)"
        return True, "idle states " + ", ".join(n for n, _ in names)


class Hwmon:
    """coretemp (temp*_label "Package id N", "Core K") and k10temp (Tctl/Tdie: package) in millidegrees."""

    name = "hwmon"

    def __init__(self, sysroot: Sysroot) -> None:
        self.sysroot = sysroot
        self.package: dict[int, str] = {}  # package -> temp*_input
        self.core: dict[tuple[int, int], str] = {}  # (package, core id) -> temp*_input
        self.drivers: list[str] = []
        base = sysroot.path(HWMON_DIR)
        try:
            hwmons = sorted(p.name for p in base.iterdir())
        except OSError:
            hwmons = []
        k10 = 0
        for h in hwmons:
            driver = sysroot.read_text(f"{HWMON_DIR}/{h}/name")
            if driver not in HWMON_DRIVERS:
                continue
            self.drivers.append(driver)
            labels: dict[str, str] = {}
            for p in sorted(sysroot.path(f"{HWMON_DIR}/{h}").glob("temp*_label")):
                label = sysroot.read_text(f"{HWMON_DIR}/{h}/{p.name}") or ""
                labels[label] = f"{HWMON_DIR}/{h}/{p.name.removesuffix('_label')}_input"
            if driver == "k10temp":  # one per node; Tdie is the real die temperature where both exist
                path = labels.get("Tdie") or labels.get("Tctl")
                if path:
                    self.package[k10] = path
                    k10 += 1
                continue
            pkg = next((int(m[1]) for lbl in labels if (m := re.fullmatch(r"Package id (\d+)", lbl))), 0)
            for lbl, path in labels.items():
                if lbl.startswith("Package id"):
                    self.package[pkg] = path
                elif m := re.fullmatch(r"Core (\d+)", lbl):
                    self.core[(pkg, int(m[1]))] = path

    def read(self, rel: str) -> float | None:
        v = _int(self.sysroot.read_text(rel))
        return None if v is None else v / 1000.0

    def status(self) -> tuple[bool, str]:
        if not self.package and not self.core:
            return False, f"no coretemp or k10temp under {self.sysroot.path(HWMON_DIR)} (module not loaded, or a VM)"
        return (
            True,
            f"{', '.join(sorted(set(self.drivers)))}: {len(self.package)} package, {len(self.core)} core sensors",
        )


class Powercap:
    """intel-rapl zones (also used for AMD RAPL): energy_uj wrapping at max_energy_range_uj. Reading
    energy_uj needs root on kernels since 5.10 (CVE-2020-8694), so it is probed, not assumed."""

    name = "powercap"

    def __init__(self, sysroot: Sysroot) -> None:
        self.sysroot = sysroot
        self.zones: dict[int, dict[str, tuple[str, int]]] = {}  # package -> domain -> (energy_uj, range)
        self.why = ""
        base = sysroot.path(POWERCAP_DIR)
        try:
            zones = sorted(p.name for p in base.iterdir() if re.fullmatch(r"intel-rapl:\d+(:\d+)?", p.name))
        except OSError:
            self.why = f"no {base} (no RAPL driver, or a VM)"
            return
        unreadable = False
        for z in zones:
            name = sysroot.read_text(f"{POWERCAP_DIR}/{z}/name") or ""
            top = z.split(":")[1]
            if m := re.fullmatch(r"package-(\d+)", name):
                pkg, domain = int(m[1]), "package"
            elif name in POWERCAP_DOMAINS:
                parent = sysroot.read_text(f"{POWERCAP_DIR}/intel-rapl:{top}/name") or ""
                m = re.fullmatch(r"package-(\d+)", parent)
                pkg, domain = (int(m[1]) if m else 0), POWERCAP_DOMAINS[name]
            else:
                continue
            energy = f"{POWERCAP_DIR}/{z}/energy_uj"
            if _int(sysroot.read_text(energy)) is None:
                unreadable = True
                continue
            rng = _int(sysroot.read_text(f"{POWERCAP_DIR}/{z}/max_energy_range_uj")) or (1 << 32)
            self.zones.setdefault(pkg, {})[domain] = (energy, rng)
        if not self.zones:
            self.why = "energy_uj is not readable (root only since Linux 5.10)" if unreadable else "no RAPL zones"

    def read(self, pkg: int) -> dict[str, int]:
        out = {}
        for domain, (rel, _) in self.zones.get(pkg, {}).items():
            v = _int(self.sysroot.read_text(rel))
            if v is not None:
                out[domain] = v
        return out

    def status(self) -> tuple[bool, str]:
        if not self.zones:
            return False, self.why
        doms = sorted({d for z in self.zones.values() for d in z})
        return True, f"{len(self.zones)} package(s): {', '.join(doms)}"


def perf_pmus(sysroot: Sysroot) -> dict[str, str]:
    """The power-related perf PMUs the kernel offers (msr, cstate_core, cstate_pkg, power) -> their events."""
    out = {}
    for pmu in ("msr", "cstate_core", "cstate_pkg", "power"):
        d = sysroot.path(f"sys/bus/event_source/devices/{pmu}/events")
        try:
            events = sorted(p.name for p in d.iterdir() if "." not in p.name)
        except OSError:
            continue
        out[pmu] = ", ".join(events)
    return out
