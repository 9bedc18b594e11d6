"""The backend of a run: the request from the command line, the choice (pmutop.backends.choose), the object."""

from __future__ import annotations

import argparse

from pmutop.app.console import say
from pmutop.backends.base import Backend, EventResolver
from pmutop.backends.choose import BackendChoice, BackendRequest, choose
from pmutop.backends.facts import probe_host
from pmutop.backends.msr.backend import MsrBackend
from pmutop.backends.perf import PerfBackend
from pmutop.backends.sim import SimBackend
from pmutop.hw.platform import HostPlatform, Platform
from pmutop.pmu.events import parse_events
from pmutop.safety.state_files import describe_runs, leftover_lines


def request_from_args(args: argparse.Namespace) -> BackendRequest:
    """What `pmutop [options]` asks of the backend."""
    return BackendRequest(
        backend=args.backend,
        events=args.events,
        perfmon_dir=args.perfmon_dir,
        read=args.read,
        user=not args.kernel_only,
        kernel=not args.user_only,
        force=args.force,
        keep_nmi_watchdog=args.keep_nmi_watchdog,
        topdown=args.topdown,
    )


def topdown_tables(request: BackendRequest):  # type: ignore[no-untyped-def]
    """Intel's tables (--perfmon-dir, else the usual places) to cross-check the top-down encodings pmutop ships
    (pmutop.pmu.builtin_events), unless top-down is off. Top-down works without them."""
    if request.topdown is False:
        return None
    from pmutop.pmu.perfmon import PerfmonTables

    return PerfmonTables.locate(request.perfmon_dir)


def event_resolver(perfmon_dir: str | None) -> EventResolver:
    """Intel event names, resolved lazily: the tables are read only when such a name is used."""
    from pmutop.pmu.perfmon import PerfmonTables, Resolver

    resolver = Resolver(PerfmonTables.locate(perfmon_dir))
    return resolver.resolve


def choose_backend(request: BackendRequest, platform: Platform) -> BackendChoice:
    """The backend `request` runs with here; raises the error a run stops with when none can run."""
    if request.backend in ("sim", "msr"):
        return BackendChoice(request.backend)
    assert isinstance(platform, HostPlatform)
    if request.backend == "auto" and not platform.sysroot.is_host:
        return BackendChoice("msr")  # perf counts this host's CPUs only: the msr backend says what is wrong
    choice = choose(probe_host(platform), request)
    if choice.name is None:  # the refusal says what killed runs left too (read only then: it costs)
        choice = choice.after_leftovers(leftover_lines(describe_runs(platform.sysroot)))
    return choice.require()


def build_backend(request: BackendRequest, platform: Platform, choice: BackendChoice | None = None) -> Backend:
    """The backend object of `choice` (by default: choose_backend's)."""
    events = parse_events(request.events) if request.events else None
    resolver = event_resolver(request.perfmon_dir) if events and any(not e.resolved for e in events) else None
    if choice is None:
        choice = choose_backend(request, platform)
    if choice.name == "perf" and request.read:
        say(
            f"--read {request.read} is ignored: the perf backend reads its counters with read() on perf's file "
            "descriptors"
        )
    if choice.name == "perf":
        assert isinstance(platform, HostPlatform)
        return PerfBackend(
            platform,
            platform.clock,
            events,
            user=request.user,
            kernel=request.kernel,
            resolver=resolver,
            software_only=choice.software_only,
            hardware_problem=choice.hardware_problem,
            topdown=request.topdown,
            tables=topdown_tables(request),
            cpu_wide_problem=choice.cpu_wide_problem,
        )
    backend_class = SimBackend if choice.name == "sim" else MsrBackend
    return backend_class(
        platform,
        platform.clock,
        events,
        read_method=request.read,
        user=request.user,
        kernel=request.kernel,
        force=request.force,
        keep_nmi_watchdog=request.keep_nmi_watchdog,
        resolver=resolver,
        topdown=request.topdown,
        tables=topdown_tables(request),
    )
