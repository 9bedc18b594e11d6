"""The machine a command works on (this host, a sysroot, the simulator) and what killed runs left on it."""

from __future__ import annotations

import argparse
import os
import threading
from collections.abc import Callable

from pmutop.app.console import say
from pmutop.core.errors import PmuInUseError, UsageError
from pmutop.core.sysroot import Sysroot
from pmutop.core.undo import RestoreResult
from pmutop.hw.platform import HostPlatform, Platform
from pmutop.safety.state_files import Recovery, StateDir, recover_dead_runs

SIM_WITH_SYSROOT = "--sysroot describes real hardware; it cannot be combined with --demo/--backend sim"


def sysroot_dir(path: str) -> Sysroot:
    if not os.path.isdir(path):
        raise UsageError(f"--sysroot {path}: not a directory")
    return Sysroot(path)


def build_platform(args: argparse.Namespace) -> Platform:
    """The machine of `pmutop [options]`: the simulator for --backend sim (with its --sim-* shape), else
    this host or --sysroot."""
    if args.backend == "sim":
        from pmutop.sim.model import SimConfig
        from pmutop.sim.platform import SimPlatform

        if args.sysroot != "/":
            raise UsageError(SIM_WITH_SYSROOT)
        if args.sim_e_cores is not None and args.sim_e_cores > args.sim_cpus:
            raise UsageError(f"--sim-e-cores {args.sim_e_cores} exceeds --sim-cpus {args.sim_cpus}")
        if (args.sim_version or 5) < 6 and (args.sim_gp or 0) > 8:
            raise UsageError(f"--sim-gp {args.sim_gp} needs --sim-version 6 (the legacy registers hold 8 counters)")
        try:
            config = SimConfig(
                cpus=args.sim_cpus,
                version=args.sim_version,
                gp_counters=args.sim_gp,
                fixed_counters=args.sim_fixed,
                gp_width=args.sim_gp_width,
                fixed_width=args.sim_fixed_width,
                seed=args.seed,
                e_cores=args.sim_e_cores,
                model=args.sim_model,
                mix=args.sim_mix,
            )
        except ValueError as e:
            raise UsageError(str(e).removeprefix("bad SimConfig: ")) from None
        return SimPlatform(config)
    return HostPlatform(sysroot_dir(args.sysroot))


def recoverer(platform: HostPlatform) -> Callable[[StateDir], Recovery]:
    """Restores what every dead run recorded in a state directory left on `platform`."""

    def recover(state_dir: StateDir) -> Recovery:
        return recover_dead_runs(
            state_dir,
            lambda cpu: platform.open_msr(cpu, writable=True),
            platform.read_setting,
            platform.write_setting,
        )

    return recover


def lock_state_dir(state_dir: StateDir, stop: threading.Event | None = None) -> None:
    if not state_dir.lock(stop=stop.is_set if stop else None):
        raise PmuInUseError(f"another pmutop holds {state_dir.path('lock')} (starting or restoring)")


def recover_leftovers(platform: HostPlatform, stop: threading.Event | None = None) -> RestoreResult:
    """Restore what killed pmutops left on this machine; prints one line per run restored."""
    state_dir = StateDir.existing(platform.sysroot)
    if state_dir is None:
        return RestoreResult()
    try:
        lock_state_dir(state_dir, stop)
        recovery = recoverer(platform)(state_dir)
        for line in recovery.lines:
            say(line)
        return recovery.result
    finally:
        state_dir.close()
