/* The simulated workload's per-segment arithmetic (pmutop.sim.segment.python_amounts, whose copy this is): the
 * same IEEE double expressions in the same order, truncated to integers the same way, so the same numbers.
 * Built with -ffp-contract=off (no fused multiply-add); where doubles are evaluated wider than double
 * (FLT_EVAL_METHOD != 0, the x87) the results could differ, so the function reports that it cannot run. */
#include "pmutop_shim.h"

#include <float.h>
#include <stddef.h>
#include <string.h>

#define M64_ADD 0x9E3779B97F4A7C15ULL

/* splitmix64's finaliser of (x + golden ratio): pmutop.sim.hashing.mix64 */
static uint64_t mix64(uint64_t x)
{
    x += M64_ADD;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

static double clamp(double x, double lo, double hi)
{
    x = x > lo ? x : lo; /* Python: x if x > lo else lo */
    return x < hi ? x : hi;
}

int pmutop_sim_exact(void) { return FLT_EVAL_METHOD == 0; }

int pmutop_sim_segment(const pmutop_sim_params *p, uint64_t seg, uint64_t *out)
{
    const double *f = p->seg_factor;
    uint64_t h = mix64(p->key_hash ^ seg), x;
    double util, ghz, ipc, mpki, miss_ratio, br_per_instr, br_miss_ratio, kernel_frac;
    double t_ret, w1, w2, w3, rest, t_bad, t_fe, t_be, heavy, br, fetch, mem, t_heavy, t_br, t_fetch, t_mem;
    int64_t width = p->width, ref, cycles, instr, llc_refs, llc_misses, branches, branch_misses;
    int64_t k_cycles, k_instr, k_ref, k_refs, k_misses, k_branches, k_br_misses;
    int64_t u_cycles, slots, u_ret, u_bad, u_fe, u_be, u_rec, k_ret, k_bad, k_fe, k_be, k_rec, writebacks;
    int64_t v[35];
    int i;

    if (FLT_EVAL_METHOD != 0)
        return -1;
#define U(k) ((h >> (8 * (k))) & 0xFF)
    util = clamp(p->base[0] * f[U(0)], p->range[0], p->range[1]);
    ghz = clamp(p->base[1] * f[U(1)], p->range[2], p->range[3]);
    ipc = clamp(p->base[2] * f[U(2)], p->range[4], p->range[5]);
    mpki = clamp(p->base[3] * f[U(3)], p->range[6], p->range[7]);
    miss_ratio = clamp(p->base[4] * f[U(4)], p->range[8], p->range[9]);
    br_per_instr = clamp(p->base[5] * f[U(5)], p->range[10], p->range[11]);
    br_miss_ratio = clamp(p->base[6] * f[U(6)], p->range[12], p->range[13]);
    kernel_frac = clamp(p->base[7] * f[U(7)], p->range[14], p->range[15]);
#undef U
    if (p->e_core) {
        ghz *= p->e_core_ghz;
        ipc *= p->e_core_ipc;
    }
    ref = (int64_t)((double)p->seg_ticks * util);
    cycles = (int64_t)((double)ref * ghz * 1e9 / (double)p->tsc_hz);
    instr = (int64_t)((double)cycles * ipc);
    llc_refs = (int64_t)((double)instr * mpki / 1000.0 / miss_ratio);
    llc_misses = (int64_t)((double)llc_refs * miss_ratio);
    branches = (int64_t)((double)instr * br_per_instr);
    branch_misses = (int64_t)((double)branches * br_miss_ratio);
    k_cycles = (int64_t)((double)cycles * kernel_frac);
    k_instr = (int64_t)((double)instr * kernel_frac);
    k_ref = (int64_t)((double)ref * kernel_frac);
    k_refs = (int64_t)((double)llc_refs * kernel_frac);
    k_misses = (int64_t)((double)llc_misses * kernel_frac);
    k_branches = (int64_t)((double)branches * kernel_frac);
    k_br_misses = (int64_t)((double)branch_misses * kernel_frac);

    x = mix64(h ^ p->tma_seg_key);
#define U(k) ((x >> (8 * (k))) & 0xFF)
    t_ret = clamp(ipc * (p->tma[0] * f[U(0)]) / (double)width, 0.03, 0.92);
    w1 = p->tma[1] * f[U(1)];
    w2 = p->tma[2] * f[U(2)];
    w3 = p->tma[3] * f[U(3)];
    rest = (1.0 - t_ret) / (w1 + w2 + w3);
    t_bad = w1 * rest;
    t_fe = w2 * rest;
    t_be = 1.0 - t_ret - t_bad - t_fe;
    heavy = p->tma[4] * f[U(4)];
    br = p->tma[5] * f[U(5)];
    fetch = p->tma[6] * f[U(6)];
    mem = p->tma[7] * f[U(7)];
#undef U
    t_heavy = t_ret * (heavy < 1.0 ? heavy : 1.0);
    t_br = t_bad * (br < 1.0 ? br : 1.0);
    t_fetch = t_fe * (fetch < 1.0 ? fetch : 1.0);
    t_mem = t_be * (mem < 1.0 ? mem : 1.0);

    u_cycles = cycles - k_cycles;
    slots = u_cycles * width;
    u_ret = (int64_t)((double)slots * t_ret);
    u_bad = (int64_t)((double)slots * t_bad);
    u_fe = (int64_t)((double)slots * t_fe);
    u_be = slots - u_ret - u_bad - u_fe;
    u_rec = (int64_t)((double)u_bad * p->recovery / (double)width);
    slots = k_cycles * width;
    k_ret = (int64_t)((double)slots * t_ret);
    k_bad = (int64_t)((double)slots * t_bad);
    k_fe = (int64_t)((double)slots * t_fe);
    k_be = slots - k_ret - k_bad - k_fe;
    k_rec = (int64_t)((double)k_bad * p->recovery / (double)width);

    x = mix64(h ^ p->writeback_key);
    /* hash_unit: the top 53 bits over 2^53 */
    writebacks = (int64_t)((double)llc_misses * (p->wb_lo + (p->wb_hi - p->wb_lo) * ((double)(x >> 11) / 9007199254740992.0)));

    v[0] = u_cycles;
    v[1] = instr - k_instr;
    v[2] = ref - k_ref;
    v[3] = llc_refs - k_refs;
    v[4] = llc_misses - k_misses;
    v[5] = branches - k_branches;
    v[6] = branch_misses - k_br_misses;
    v[7] = u_ret;
    v[8] = u_bad;
    v[9] = u_fe;
    v[10] = u_be;
    v[11] = t_ret != 0.0 ? (int64_t)((double)u_ret * t_heavy / t_ret) : 0;
    v[12] = t_bad != 0.0 ? (int64_t)((double)u_bad * t_br / t_bad) : 0;
    v[13] = t_fe != 0.0 ? (int64_t)((double)u_fe * t_fetch / t_fe) : 0;
    v[14] = t_be > 0.0 ? (int64_t)((double)u_be * t_mem / t_be) : 0;
    v[15] = u_ret + u_bad - width * u_rec;
    v[16] = u_rec;
    v[17] = k_cycles;
    v[18] = k_instr;
    v[19] = k_ref;
    v[20] = k_refs;
    v[21] = k_misses;
    v[22] = k_branches;
    v[23] = k_br_misses;
    v[24] = k_ret;
    v[25] = k_bad;
    v[26] = k_fe;
    v[27] = k_be;
    v[28] = t_ret != 0.0 ? (int64_t)((double)k_ret * t_heavy / t_ret) : 0;
    v[29] = t_bad != 0.0 ? (int64_t)((double)k_bad * t_br / t_bad) : 0;
    v[30] = t_fe != 0.0 ? (int64_t)((double)k_fe * t_fetch / t_fe) : 0;
    v[31] = t_be > 0.0 ? (int64_t)((double)k_be * t_mem / t_be) : 0;
    v[32] = k_ret + k_bad - width * k_rec;
    v[33] = k_rec;
    v[34] = writebacks;
    for (i = 0; i < 35; i++) {
        if (v[i] < 0)
            return -1; /* Python's struct refuses it: let the Python arithmetic say so */
        out[i] = (uint64_t)v[i];
    }
    return 0;
}

int pmutop_sim_run(const pmutop_sim_params *p, uint64_t seg, uint32_t n, const uint64_t *before, uint64_t *out)
{
    uint64_t amounts[35];
    const uint64_t *prev = before;
    uint32_t k;
    int i;

    for (k = 0; k < n; k++) {
        uint64_t *sums = out + (size_t)k * 35;
        if (pmutop_sim_segment(p, seg + k, amounts))
            return -1;
        for (i = 0; i < 35; i++) {
            sums[i] = prev[i] + amounts[i];
            if (sums[i] < prev[i])
                return -1; /* a lane past 2^64: Python's packed sums carry, let Python count them */
        }
        prev = sums;
    }
    return 0;
}

int pmutop_sim_interp(const char *before_bytes, const char *after_bytes, uint64_t off, uint64_t st, uint64_t *out)
{
#ifdef __SIZEOF_INT128__
    uint64_t before[35], after[35];
    int i;
    if (st == 0 || off >= st)
        return -1;
    memcpy(before, before_bytes, sizeof before); /* little-endian packed vectors (Python's to_bytes) */
    memcpy(after, after_bytes, sizeof after);
    for (i = 0; i < 35; i++) {
        if (after[i] < before[i])
            return -1; /* no lane goes down: a caller's mistake, let Python's arithmetic say what it makes of it */
        out[i] = before[i] + (uint64_t)((unsigned __int128)(after[i] - before[i]) * off / st);
    }
    return 0;
#else
    (void)before_bytes; (void)after_bytes; (void)off; (void)st; (void)out;
    return -1;
#endif
}
