"""`pmutop restore`: put back what killed pmutops left programmed; running pmutops are left alone."""

from __future__ import annotations

from pmutop.app.console import say
from pmutop.app.options import restore_parser
from pmutop.app.platform_setup import lock_state_dir, recoverer, sysroot_dir
from pmutop.core.cpulist import format_cpu_list
from pmutop.hw.platform import HostPlatform
from pmutop.safety.exit_guard import EXIT_NOT_RESTORED
from pmutop.safety.state_files import StateDir


def run_restore(argv: list[str]) -> int:
    args = restore_parser().parse_args(argv)
    platform = HostPlatform(sysroot_dir(args.sysroot))
    state_dir = StateDir.existing(platform.sysroot)
    if state_dir is None:
        print(f"nothing to restore: no pmutop state under {platform.sysroot.path('run/pmutop')}")
        return 0
    try:
        lock_state_dir(state_dir)
        entries = state_dir.entries()
        for e in entries:
            if e.alive:
                print(f"pmutop pid {e.pid} is running (cpu {format_cpu_list(e.cpus)}): left alone")
        recovery = recoverer(platform)(state_dir)
    finally:
        state_dir.close()
    for line in recovery.lines:
        if line.startswith("warning: "):
            say(line)
        else:
            print(line)
    if not any(not e.alive for e in entries):
        print("nothing to restore")
    if recovery.result.failures:
        say("could not restore: " + "; ".join(recovery.result.failures[:5]))
        return EXIT_NOT_RESTORED
    return 0
