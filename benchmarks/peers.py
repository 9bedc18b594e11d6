"""The live view against the monitors a user would otherwise run, side by side in one run: htop, btop, s-tui,
bpytop and glances, each at a 1 s refresh in the same 120x40 tmux terminal, and pmutop's live view at 1 s on
2 CPUs, simulated (`--demo --sim-cpus 2`) and real (this machine's perf backend). CPU seconds per minute of
each program's process tree (the scheduler's ns run time), measured in rounds so the machine's load falls on
all of them alike. The target: pmutop costs at most 0.8x the cheaper of s-tui and bpytop.

The peers are not pmutop's dependencies: htop and btop come from the system's packages, s-tui, bpytop and
glances from PyPI into a venv of their own under the benchmarks' cache directory (never pmutop's venv).
`--install-peers` installs what is missing; without it a missing peer is skipped with the command to run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import procs
from benchmarks.stats import skipped, summary

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pmutop-benchmarks"
VENV = CACHE / "peers-venv"
HOME = CACHE / "peers-home"  # the peers' own config (1 s refresh), never the user's
APT_PEERS = ("htop", "btop")
PIP_PEERS = ("s-tui", "bpytop", "glances")
INSTALL_HINT = "python -m benchmarks --only live --install-peers"

# btop and bpytop take their refresh only from a config file (btop 1.2 has no option for it; bpytop's
# default is 2000 ms): one under HOME, which the command sets for them alone.
_CONFIGS = {
    ".config/btop/btop.conf": "update_ms = 1000\n",
    ".config/bpytop/bpytop.conf": "update_ms=1000\nupdate_check=False\n",
}


@dataclass(frozen=True)
class Program:
    name: str
    cmd: list[str]
    pmutop: bool = False


def _venv_tool(name: str) -> str:
    return str(VENV / "bin" / name)


def peers() -> list[Program]:
    env = ["env", f"HOME={HOME}"]
    return [
        Program("htop -d 10", ["htop", "-d", "10"]),
        Program("btop (1 s)", [*env, "btop"]),
        Program("s-tui -r 1", [_venv_tool("s-tui"), "-r", "1"]),
        Program("bpytop (1 s)", [*env, _venv_tool("bpytop")]),
        Program("glances -t 1", [_venv_tool("glances"), "-t", "1", "--disable-check-update"]),
    ]


def pmutop_programs() -> list[Program]:
    base = [*procs.pmutop_cmd(), "--interval", "1"]
    return [
        Program("pmutop --demo --sim-cpus 2", [*base, "--demo", "--sim-cpus", "2"], pmutop=True),
        Program("pmutop real mode (--backend perf)", [*base, "--backend", "perf"], pmutop=True),
    ]


def _missing(program: Program) -> str | None:
    """Why `program` cannot run here, with the command that would fix it; None when it can."""
    exe = next(word for word in program.cmd if not word.startswith(("env", "HOME=")))
    if shutil.which(exe) or os.access(exe, os.X_OK):
        return None
    tool = Path(exe).name
    where = "apt-get install -y" if tool in APT_PEERS else f"{VENV}/bin/pip install"
    return f"{tool} is not installed ({INSTALL_HINT}, or {where} {tool})"


def install() -> list[str]:
    """Install the missing peers: system packages with apt-get (as root), PyPI ones into their own venv.
    Returns one line per problem (an install that failed is a skipped peer, not a failed run)."""
    problems = []
    missing_apt = [tool for tool in APT_PEERS if not shutil.which(tool)]
    if missing_apt:
        if os.geteuid() != 0 or not shutil.which("apt-get"):
            problems.append(f"{' '.join(missing_apt)}: install with the system's packages (apt-get, as root)")
        else:
            cmd = ["apt-get", "install", "-y", "-qq", *missing_apt]
            if subprocess.run(cmd, capture_output=True).returncode != 0:
                subprocess.run(["apt-get", "update", "-qq"], capture_output=True)
                if subprocess.run(cmd, capture_output=True).returncode != 0:
                    problems.append(f"apt-get install {' '.join(missing_apt)} failed")
    missing_pip = [tool for tool in PIP_PEERS if not os.access(_venv_tool(tool), os.X_OK)]
    if missing_pip:
        if not (VENV / "bin" / "pip").exists():
            subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True, capture_output=True)
        done = subprocess.run([_venv_tool("pip"), "install", "-q", *missing_pip], capture_output=True, text=True)
        if done.returncode != 0:
            problems.append(f"pip install {' '.join(missing_pip)} failed: {done.stderr.strip().splitlines()[-1:]}")
    return problems


def _write_configs() -> None:
    for rel, text in _CONFIGS.items():
        path = HOME / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (HOME / ".config/bpytop/themes").mkdir(exist_ok=True)  # bpytop lists it at every theme refresh


def _measure(program: Program, session: str, seconds: float, warmup: float) -> float | str:
    """CPU s/min of one run, or why there is no figure."""
    with procs.tmux_session(session, program.cmd) as pid:
        if program.pmutop and procs.wait_for_screen(session, procs.has_all_row, timeout=120) is None:
            return "no complete frame within 120 s"
        time.sleep(warmup)  # past start-up: Python, the first frames, a peer's first full scan
        if not procs.tree_cpu_s(pid):
            return f"exited at start: {procs.capture(session).strip()[-200:]}"
        return procs.cpu_per_minute(pid, seconds)


def side_by_side(seconds: float, repeat: int, warmup: float = 3.0) -> dict[str, Any]:
    """CPU s/min of every peer and of pmutop's live view at 1 s, 2 CPUs, in rounds, with each program's
    cost as a multiple of htop's and the target (the cheaper of s-tui and bpytop)."""
    _write_configs()
    programs = [*peers(), *pmutop_programs()]
    runs: dict[str, list[float]] = {p.name: [] for p in programs}
    out: dict[str, Any] = {}
    for program in programs:
        reason = _missing(program)
        if reason:
            out[program.name] = skipped(reason)
    for k in range(repeat):
        for n, program in enumerate(programs):
            if program.name in out:
                continue
            got = _measure(program, f"peer{n}-{k}", seconds, warmup)
            if isinstance(got, str):
                out[program.name] = skipped(got)
            else:
                runs[program.name].append(got)
    # In the programs' order whichever were skipped (a skipped peer was noted before the others ran).
    out = {
        p.name: out.get(p.name) or summary(runs[p.name], "cpu-s/min", seconds=seconds, refresh_s=1.0) for p in programs
    }
    htop = out.get("htop -d 10", {}).get("median")
    if htop:
        for r in out.values():
            if "median" in r:
                r["x_htop"] = r["median"] / htop
    # (A figure of 0: the run was too short to see the peer's once-a-second work; it sets no target.)
    cheap = [out[name].get("median") or 0 for name in ("s-tui -r 1", "bpytop (1 s)") if name in out]
    cheap = [value for value in cheap if value > 0]
    for program in programs:
        r = out[program.name]
        if program.pmutop and "median" in r and cheap:
            r["target"] = f"<= 0.8x {min(cheap):.3g} (the cheaper of s-tui and bpytop)"
            r["ratio"] = r["median"] / min(cheap)
            r["met"] = r["ratio"] <= 0.8
        elif program.pmutop and "median" in r:
            r["target"] = "not measured: neither s-tui nor bpytop ran"
    return out
