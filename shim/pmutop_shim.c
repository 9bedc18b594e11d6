/* See pmutop_shim.h. Compiler intrinsics only; on non-x86 builds every call reports failure (-1)
 * so the package still installs and the simulated mode still runs. */
#include "pmutop_shim.h"

/* -- self-test workloads (see pmutop_shim.h); the portable ones first -- */

static uint64_t xorshift64(uint64_t x)
{
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return x;
}

int pmutop_wl_chase_init(uint64_t *buf, uint64_t lines, uint64_t seed)
{
    uint64_t i, x = seed | 1;
    if (lines < 2)
        return -1;
    /* Sattolo's shuffle of the identity, read as "the first word of line i holds the next line": one
     * cycle through every line, in random order (so no prefetcher can follow it). */
    for (i = 0; i < lines; i++)
        buf[i * 8] = i;
    for (i = lines - 1; i > 0; i--) {
        uint64_t j, t;
        x = xorshift64(x);
        j = x % i;
        t = buf[i * 8];
        buf[i * 8] = buf[j * 8];
        buf[j * 8] = t;
    }
    return 0;
}

uint64_t pmutop_wl_chase(const uint64_t *buf, uint64_t steps)
{
    uint64_t i, line = 0;
    for (i = 0; i < steps; i++)
        line = *(volatile const uint64_t *)&buf[line * 8];
    return line;
}

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

/* The workloads with a known instruction count need x86-64 assembly. */
#if defined(__x86_64__)
uint64_t pmutop_wl_instructions(uint64_t iterations)
{
    uint64_t n = iterations;
    if (n == 0)
        return 0;
    __asm__ volatile("1:\n\tdec %0\n\tjnz 1b" : "+r"(n) : : "cc");
    return iterations;
}

uint64_t pmutop_wl_branches(uint64_t iterations, uint64_t seed, uint64_t mask)
{
    uint64_t i, x = seed | 1, acc = 0;
    for (i = 0; i < iterations; i++) {
        x = xorshift64(x);
        /* A real conditional branch (the compiler could make a C `if` a cmov). */
        __asm__ volatile("test %2, %1\n\tjz 1f\n\tinc %0\n1:" : "+r"(acc) : "r"(x), "r"(mask) : "cc");
    }
    return acc + x;
}

#define PMUTOP_STR2(x) #x
#define PMUTOP_STR(x) PMUTOP_STR2(x)

uint64_t pmutop_wl_jumps(uint64_t passes)
{
    uint64_t n = passes;
    if (n == 0)
        return 0;
    __asm__ volatile(
        "2:\n\t"
        ".rept " PMUTOP_STR(PMUTOP_WL_JUMPS) "\n\t"
        "jmp 1f\n\t"
        ".p2align 6\n"
        "1:\n\t"
        ".endr\n\t"
        "dec %0\n\t"
        "jnz 2b"
        : "+r"(n) : : "cc");
    return passes;
}

#else
uint64_t pmutop_wl_instructions(uint64_t iterations) { (void)iterations; return 0; }
uint64_t pmutop_wl_branches(uint64_t iterations, uint64_t seed, uint64_t mask) { (void)iterations; (void)seed; (void)mask; return 0; }
uint64_t pmutop_wl_jumps(uint64_t passes) { (void)passes; return 0; }

#endif
