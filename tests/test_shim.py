"""The C shim on this real machine: rdtsc, cpuid, and the forked rdpmc probe."""

from __future__ import annotations

import os
import struct

import pytest

from pmutop.hw import shim

pytestmark = pytest.mark.skipif(not shim.available(), reason="needs the compiled shim on x86")


def test_rdtsc_advances() -> None:
    a = shim.rdtsc()
    b = shim.rdtsc()
    assert 0 < a < b


def test_cpuid_vendor_matches_proc_cpuinfo() -> None:
    _, ebx, ecx, edx = shim.cpuid_here(0)
    vendor = struct.pack("<3I", ebx, edx, ecx).decode()
    with open("/proc/cpuinfo") as f:
        cpuinfo = f.read()
    assert f"vendor_id\t: {vendor}" in cpuinfo


@pytest.mark.skipif(not os.path.exists("/dev/cpu/0/cpuid"), reason="no cpuid device")
def test_pinned_cpuid_matches_the_cpuid_device() -> None:
    cpu = max(os.sched_getaffinity(0))
    fd = os.open(f"/dev/cpu/{cpu}/cpuid", os.O_RDONLY)
    try:
        device = struct.unpack("<4I", os.pread(fd, 16, 1))
    finally:
        os.close(fd)
    eax, ebx, _ecx, _edx = shim.cpuid_on(cpu, 1)
    # EBX[31:24] is the initial APIC ID: it only matches when the instruction really ran on that CPU.
    assert (eax, ebx >> 24) == (device[0], device[1] >> 24)


def test_a_faulting_rdpmc_kills_only_the_forked_probe() -> None:
    # No CPU has a general-purpose counter 0x7fff: rdpmc #GPs (SIGSEGV) whatever CR4.PCE says.
    result = shim.probe_rdpmc_ecx(0, 0x7FFF)
    assert result.ok is False
    assert "SIGSEGV" in result.detail and "cpu 0" in result.detail
    assert shim.rdtsc() > 0  # and we are still alive


def test_probe_fails_where_the_cpu_has_no_fixed_counters() -> None:
    if shim.cpuid_here(0xA)[0] & 0xFF != 0:
        pytest.skip("this CPU has an architectural PMU")
    result = shim.probe_rdpmc(0, 3, 0)
    assert result.ok is False and "SIGSEGV" in result.detail
