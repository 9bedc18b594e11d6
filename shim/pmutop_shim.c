/* See pmutop_shim.h. Compiler intrinsics only; on non-x86 builds every call reports failure (-1)
 * so the package still installs and the simulated mode still runs. */
#include "pmutop_shim.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>

int pmutop_is_x86(void) { return 1; }

uint64_t pmutop_rdtsc(void) { return __rdtsc(); }

int pmutop_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t *out4)
{
    unsigned int a, b, c, d;
    __cpuid_count(leaf, subleaf, a, b, c, d);
    out4[0] = a; out4[1] = b; out4[2] = c; out4[3] = d;
    return 0;
}

/* Faults (SIGSEGV) when CR4.PCE is clear or ecx names no counter: only call after a probe. */
int pmutop_rdpmc(uint32_t ecx, uint64_t *out)
{
    *out = __rdpmc((int)ecx);
    return 0;
}

/* One sample: out[0] = TSC, out[1..n_fixed] = fixed counters 0..n_fixed-1 (rdpmc type 0x4000),
 * out[1+n_fixed..] = general counters 0..n_gp-1. lfence keeps the reads from being hoisted
 * above earlier work (rdpmc is not serialising). */
int pmutop_read_counters(uint32_t n_fixed, uint32_t n_gp, uint64_t *out)
{
    uint32_t i;
    _mm_lfence();
    out[0] = __rdtsc();
    for (i = 0; i < n_fixed; i++)
        out[1 + i] = __rdpmc((int)((1u << 30) | i));
    for (i = 0; i < n_gp; i++)
        out[1 + n_fixed + i] = __rdpmc((int)i);
    _mm_lfence();
    return 0;
}

/* The same sample, then PERF_METRICS at out[1+n_fixed+n_gp]: rdpmc ECX = 1 << 29 (SDM RDPMC type 0x2000;
 * Linux INTEL_PMC_FIXED_RDPMC_METRICS). Read right after fixed counter 3 (slots, in the fixed sweep) in
 * the same call, as Linux's intel_update_topdown_event does, so the fractions describe those slots. Faults
 * unless IA32_PERF_CAPABILITIES[15]: only call after a probe. */
int pmutop_read_counters_metrics(uint32_t n_fixed, uint32_t n_gp, uint64_t *out)
{
    uint32_t i;
    _mm_lfence();
    out[0] = __rdtsc();
    for (i = 0; i < n_fixed; i++)
        out[1 + i] = __rdpmc((int)((1u << 30) | i));
    out[1 + n_fixed + n_gp] = __rdpmc((int)(1u << 29));
    for (i = 0; i < n_gp; i++)
        out[1 + n_fixed + i] = __rdpmc((int)i);
    _mm_lfence();
    return 0;
}

#else

int pmutop_is_x86(void) { return 0; }
uint64_t pmutop_rdtsc(void) { return 0; }
int pmutop_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t *out4) { (void)leaf; (void)subleaf; (void)out4; return -1; }
int pmutop_rdpmc(uint32_t ecx, uint64_t *out) { (void)ecx; *out = 0; return -1; }
int pmutop_read_counters(uint32_t n_fixed, uint32_t n_gp, uint64_t *out) { (void)n_fixed; (void)n_gp; (void)out; return -1; }
int pmutop_read_counters_metrics(uint32_t n_fixed, uint32_t n_gp, uint64_t *out) { (void)n_fixed; (void)n_gp; (void)out; return -1; }

#endif
