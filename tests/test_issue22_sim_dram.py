"""Issue 22, the simulated memory (pmutop.sim.dram): DRAM reads are exactly the package's LLC misses x 64 over
the same interval (against the workload and against the core counters the engine reads), write-backs per
phase, channels and peak per model, sockets, determinism under --seed, SIMULATED labelling and `info --demo`."""

from __future__ import annotations

import json

import pytest

from pmutop.app.main import main
from pmutop.backends.sim import SimBackend
from pmutop.core.clock import ManualClock
from pmutop.core.dram_reading import PackageDram
from pmutop.engine.engine import Engine
from pmutop.sim.config import SimConfig
from pmutop.sim.dram import MEMORY, SimDramCounters
from pmutop.sim.model import SimMachine
from pmutop.sim.platform import SimPlatform
from pmutop.sim.regimes import PhaseKind

STEPS = (0.37, 1.0, 2.5, 0.05, 1.3, 4.0, 0.9, 3.3)  # irregular intervals, some inside one 100 ms segment


def machine(model: str = "spr", cpus: int = 8, seed: int = 1) -> tuple[SimMachine, ManualClock]:
    clock = ManualClock()
    return SimMachine(SimConfig(cpus=cpus, model=model, seed=seed), clock), clock


def misses(m: SimMachine, cpus: range | list[int]) -> int:
    now = m.elapsed_ns()
    return sum(m.workload(cpu).cumulative(now).total.llc_misses for cpu in cpus)


def run_reads(dram: SimDramCounters, clock: ManualClock, steps: tuple[float, ...] = STEPS) -> list[list[PackageDram]]:
    dram.open()
    out = []
    for step in steps:
        clock.advance(step)
        out.append(dram.read())
    return out


def test_reads_are_the_packages_llc_misses_times_64_exactly() -> None:
    m, clock = machine()
    dram = SimDramCounters(m)
    dram.open()
    before = misses(m, m.cpus)
    for step in STEPS:
        clock.advance(step)
        (pkg,) = dram.read()
        after = misses(m, m.cpus)
        assert pkg.read_bytes == (after - before) * 64
        assert pkg.interval == pytest.approx(step)
        assert pkg.read_bytes_per_s == pytest.approx(pkg.read_bytes / step)
        before = after


def test_reads_match_the_core_counters_the_engine_samples() -> None:
    """The llc-misses every CPU's sampler counted over an interval, summed, x 64 = the DRAM reads of the same
    interval (all CPUs selected, both rings)."""
    clock = ManualClock(start_ns=1_000_000_000)
    platform = SimPlatform(SimConfig(cpus=4, model="spr"), clock)
    engine = Engine(SimBackend(platform, clock, None), platform, clock, [0, 1, 2, 3], 1.0, threaded=False)
    engine.start()
    try:
        dram = SimDramCounters(platform.machine)
        dram.open()
        for step in (1.0, 0.5, 2.0, 1.7):
            clock.advance(step)
            samples = engine.tick()
            (pkg,) = dram.read()
            counted = sum(s.counts["llc_misses"] for s in samples)
            assert counted > 0 and pkg.read_bytes == counted * 64
    finally:
        engine.stop()


def test_write_backs_follow_the_phase_and_never_exceed_the_reads() -> None:
    m, clock = machine(cpus=1, seed=3)
    dram = SimDramCounters(m)
    dram.open()
    shares: dict[PhaseKind, list[float]] = {}
    for _ in range(600):  # 60 s in 100 ms steps: idle, busy, memory and the rest
        regime = m.workload(0).rates_at(m.elapsed_ns()).regime
        clock.advance(0.1)
        (pkg,) = dram.read()
        assert pkg.read_bytes is not None and pkg.write_bytes is not None
        assert 0 <= pkg.write_bytes <= pkg.read_bytes
        if pkg.read_bytes:
            shares.setdefault(regime, []).append(pkg.write_bytes / pkg.read_bytes)
    assert PhaseKind.MEMORY in shares and len(shares) >= 3
    memory = sum(shares[PhaseKind.MEMORY]) / len(shares[PhaseKind.MEMORY])
    others = [x for kind, xs in shares.items() if kind is not PhaseKind.MEMORY for x in xs]
    assert memory >= 0.6 and memory > max(others)  # the streamer writes back most of what it reads


@pytest.mark.parametrize(
    ("model", "channels", "peak"), [("spr", 8, 307.2e9), ("icx", 8, 204.8e9), ("skx", 6, 127.968e9), ("adl", 2, 76.8e9)]
)
def test_channels_and_peak_per_model(model: str, channels: int, peak: float) -> None:
    m, clock = machine(model)
    dram = SimDramCounters(m)
    assert dram.memory.channels == channels == MEMORY[model].channels
    (pkg,) = run_reads(dram, clock, (2.0,))[0]
    assert pkg.peak_bytes_per_s == pytest.approx(peak)  # channels x MT/s x 8 bytes
    assert [c.channel for c in pkg.channels] == list(range(channels))
    assert [c.pmu for c in pkg.channels] == [f"sim_imc_{i}" for i in range(channels)]
    assert sum(c.read_bytes or 0 for c in pkg.channels) == pkg.read_bytes
    assert sum(c.write_bytes or 0 for c in pkg.channels) == pkg.write_bytes
    assert pkg.read_bytes_per_s is not None and pkg.write_bytes_per_s is not None
    assert pkg.peak_share == pytest.approx((pkg.read_bytes_per_s + pkg.write_bytes_per_s) / peak)


def test_interleaving_is_near_even_with_a_fixed_skew() -> None:
    m, clock = machine()
    readings = run_reads(SimDramCounters(m), clock, (5.0, 5.0))
    first, second = ([c.read_bytes or 0 for c in pkgs[0].channels] for pkgs in readings)
    for per_channel in (first, second):
        mean = sum(per_channel) / len(per_channel)
        assert all(abs(x / mean - 1) <= 0.035 for x in per_channel)
        assert len(set(per_channel)) > 1  # not a plain even split
    # The skew is the channel's, not the interval's: the same channels lead both times.
    assert sorted(range(8), key=first.__getitem__) == sorted(range(8), key=second.__getitem__)


def test_mem_peak_replaces_the_models_peak() -> None:
    m, clock = machine()
    dram = SimDramCounters(m, mem_peak_gbs=150.0)
    (pkg,) = run_reads(dram, clock, (1.0,))[0]
    assert pkg.peak_bytes_per_s == 150e9
    assert dram.info_facts()["memory_speed"] == "--mem-peak: 150 GB/s per package"


def test_two_sockets_each_count_their_own_cores() -> None:
    m, clock = machine(cpus=8)
    dram = SimDramCounters(m, sockets=2)
    dram.open()
    before = [misses(m, range(0, 4)), misses(m, range(4, 8))]
    clock.advance(3.0)
    pkgs = dram.read()
    after = [misses(m, range(0, 4)), misses(m, range(4, 8))]
    assert [p.package for p in pkgs] == [0, 1]
    assert [p.read_bytes for p in pkgs] == [(a - b) * 64 for a, b in zip(after, before, strict=True)]
    assert all(len(p.channels) == 8 and p.peak_bytes_per_s == pytest.approx(307.2e9) for p in pkgs)
    assert [c["cpu"] for c in dram.info_facts()["channels"]] == [0] * 8 + [4] * 8


def test_deterministic_under_the_seed_and_independent_of_the_read_schedule() -> None:
    m1, c1 = machine(seed=7)
    m2, c2 = machine(seed=7)
    m3, c3 = machine(seed=8)
    r1, r2, r3 = (run_reads(SimDramCounters(m), c) for m, c in ((m1, c1), (m2, c2), (m3, c3)))
    assert r1 == r2
    assert r1 != r3
    # Reading once over the whole span gives what the many reads add up to (cumulative amounts are a pure
    # function of the seed and the time, however often they are read).
    m4, c4 = machine(seed=7)
    (whole,) = run_reads(SimDramCounters(m4), c4, (sum(STEPS),))[0]
    assert whole.read_bytes == sum(r[0].read_bytes or 0 for r in r1)
    assert whole.write_bytes == sum(r[0].write_bytes or 0 for r in r1)


def test_the_per_core_counts_are_unchanged_by_the_memory_model() -> None:
    m1, c1 = machine(seed=5)
    m2, c2 = machine(seed=5)
    run_reads(SimDramCounters(m1), c1)
    c2.advance(sum(STEPS))
    now = m1.elapsed_ns()
    assert all(m1.workload(cpu).cumulative(now) == m2.workload(cpu).cumulative(now) for cpu in m1.cpus)


def test_labelled_simulated() -> None:
    m, _ = machine()
    dram = SimDramCounters(m)
    assert dram.source == "simulated"
    assert dram.why.startswith("SIMULATED: 8 DDR5-4800 memory channels per package on 1 package")
    facts = dram.info_facts()
    assert facts["source"] == "simulated" and facts["why"] == dram.why
    assert all(c["simulated"] for c in facts["channels"])
    assert facts["memory_speed"].startswith("SIMULATED DDR5-4800: 8 channels x 4800 MT/s x 8 bytes = 307.2 GB/s")


def test_info_demo_describes_the_simulated_channels(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info", "--demo", "--sim-model", "skx", "--json"]) == 0
    mb = json.loads(capsys.readouterr().out)["memory_bandwidth"]
    assert mb["source"] == "simulated" and mb["why"].startswith("SIMULATED: 6 DDR4-2666")
    assert [c["pmu"] for c in mb["channels"]] == [f"sim_imc_{i}" for i in range(6)]
    assert mb["channels"][0] | {"read": None} == {
        "pmu": "sim_imc_0",
        "package": 0,
        "cpu": 0,
        "type": None,
        "read": None,
        "write": [],
        "bytes_per_count": 64,
        "simulated": True,
    }
    assert main(["info", "--demo", "--sim-model", "skx"]) == 0
    out = capsys.readouterr().out
    assert "DRAM traffic   simulated: SIMULATED: 6 DDR4-2666 memory channels per package on 1 package" in out
    assert "sim_imc_5 package 0 cpu 0: SIMULATED memory channel" in out
    assert "peak: SIMULATED DDR4-2666: 6 channels x 2666 MT/s x 8 bytes = 128.0 GB/s per package" in out


def test_a_replaced_workload_counts_on_from_the_swap() -> None:
    """The self-test swaps in scripted workloads: reads stay exactly the misses, write-backs are the script's."""
    from pmutop.sim.selftest_workloads import WORKLOADS, ScriptedWorkload

    m, clock = machine(cpus=1)
    dram = SimDramCounters(m)
    dram.open()
    clock.advance(1.0)
    dram.read()
    old = m.workload(0)
    script = ScriptedWorkload(old.tsc_hz, old.slots_per_cycle, old.cumulative(m.elapsed_ns()))
    m.replace_workload(0, script)  # type: ignore[arg-type]
    before = misses(m, [0])
    clock.advance(script.add(m.elapsed_ns(), WORKLOADS["stream_write"], 1000) / 1e9)
    clock.advance(script.add(m.elapsed_ns(), WORKLOADS["stream_read"], 1000) / 1e9)
    (pkg,) = dram.read()
    assert pkg.read_bytes == (misses(m, [0]) - before) * 64 == 1000 * 64
    assert pkg.write_bytes == 1000 * 64


@pytest.mark.parametrize(("model", "cpus", "sockets"), [("adl", 256, 1), ("adl", 400, 2)])
def test_traffic_never_exceeds_the_simulated_channels_peak(model: str, cpus: int, sockets: int) -> None:
    """More cores than the memory can feed: each package moves at most channels x MT/s x 8 bytes a second, every
    core's lines scaled alike (reads and writes keep their ratio; the channels add up to the package)."""
    m, clock = machine(model, cpus=cpus)
    memory = MEMORY[model]
    peak = memory.channels * memory.mts * 1e6 * 8
    dram = SimDramCounters(m, sockets=sockets)
    dram.open()
    capped = 0
    for step in (1.0, 0.5, 2.0, 0.1):
        before = m.elapsed_ns()
        per_pkg = [0] * sockets
        for cpu in m.cpus:
            per_pkg[cpu * sockets // cpus] += m.workload(cpu).cumulative(before).total.llc_misses
        clock.advance(step)
        for cpu in m.cpus:
            per_pkg[cpu * sockets // cpus] -= m.workload(cpu).cumulative(m.elapsed_ns()).total.llc_misses
        for pkg, demand in zip(dram.read(), per_pkg, strict=True):
            moved = pkg.read_bytes + pkg.write_bytes
            assert moved <= peak * step
            assert 0 < pkg.read_bytes <= -demand * 64
            capped += pkg.read_bytes < -demand * 64
            assert moved >= 0.99 * peak * step or pkg.read_bytes == -demand * 64  # only cut down to the peak
            assert sum(c.read_bytes for c in pkg.channels) == pkg.read_bytes
    assert capped  # these shapes ask for more than their memory's peak


def test_demo_on_many_cores_shows_dram_within_the_peak(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["--demo", "--batch", "--sim-cpus", "256", "--sim-model", "adl", "--records", "package"]
    code = main([*argv, "--format", "json", "--count", "2", "--interval", "0.3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    records = [json.loads(line) for line in out.splitlines()]
    assert records and all(r["dram_peak_share"] <= 1.0 for r in records), [r["dram_peak_share"] for r in records]
