/* pmutop shim: the few x86 instructions Python cannot execute itself.
 * Everything here runs on the calling CPU; callers pin the thread first. */
#include <stdint.h>

int pmutop_is_x86(void);
uint64_t pmutop_rdtsc(void);
int pmutop_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t *out4);
int pmutop_rdpmc(uint32_t ecx, uint64_t *out);
int pmutop_read_counters(uint32_t n_fixed, uint32_t n_gp, uint64_t *out);
/* pmutop_read_counters, then PERF_METRICS (rdpmc 1 << 29) at out[1 + n_fixed + n_gp]. */
int pmutop_read_counters_metrics(uint32_t n_fixed, uint32_t n_gp, uint64_t *out);

/* Self-test workloads (pmutop selftest): deterministic work run between two counter reads.
 * Each returns a checksum (so the work cannot be optimised away), or 0 where unsupported. */
/* `iterations` passes of `1: dec; jnz 1b` (x86-64): exactly 2 instructions per iteration, 1 cycle per
 * iteration at best (the dec chain); returns iterations (0 on non-x86). */
uint64_t pmutop_wl_instructions(uint64_t iterations);
/* Link `lines` 64-byte lines of buf (lines * 8 uint64_t) into one random cycle (Sattolo, xorshift64). */
int pmutop_wl_chase_init(uint64_t *buf, uint64_t lines, uint64_t seed);
/* Follow that cycle for `steps` loads, each depending on the previous one; returns the last line index. */
uint64_t pmutop_wl_chase(const uint64_t *buf, uint64_t steps);
/* `iterations` xorshift64 steps, each with one conditional branch taken when (x & mask): mask 1 makes it
 * unpredictable (random), mask 0 never taken (predictable); the same instructions either way. */
uint64_t pmutop_wl_branches(uint64_t iterations, uint64_t seed, uint64_t mask);
/* `passes` runs through a chain of PMUTOP_WL_JUMPS unconditional jumps, one per 64-byte line (a code
 * footprint far larger than the L1 instruction cache: frontend bound); returns passes (0 on non-x86). */
uint64_t pmutop_wl_jumps(uint64_t passes);
#define PMUTOP_WL_JUMPS 4096

/* Native sampler threads (pmutop_sampler.c): one thread per core reading the counters and GLOBAL_STATUS on
 * a shared deadline schedule into its slot; one Python thread drains the slots once per interval. */
typedef struct pmutop_group pmutop_group;
pmutop_group *pmutop_group_new(uint32_t n_cores, uint32_t n_values, uint32_t n_extra);
int pmutop_group_core(pmutop_group *g, uint32_t i, int cpu, int pin, int fd, uint32_t stride, int rdpmc,
                      uint32_t n_fixed, uint32_t n_gp, int metrics, const uint32_t *addresses, uint32_t n_addresses,
                      uint32_t status_address);
int pmutop_group_checks(pmutop_group *g, uint32_t i, const uint32_t *addresses, const uint64_t *masks,
                        const uint64_t *expected, uint32_t n, int64_t check_ns);
int pmutop_group_extra(pmutop_group *g, uint32_t i, const uint32_t *addresses, uint32_t n);
int pmutop_group_start(pmutop_group *g);
void pmutop_group_schedule(pmutop_group *g, int64_t epoch_ns, int64_t interval_ns);
int pmutop_group_wait(pmutop_group *g, const uint64_t *need, int64_t deadline_ns);
void pmutop_group_kick(pmutop_group *g);
uint64_t pmutop_group_total(pmutop_group *g);
void pmutop_group_read(pmutop_group *g, uint64_t *out);
void pmutop_group_stop_core(pmutop_group *g, uint32_t i);
int pmutop_group_stop(pmutop_group *g, int64_t deadline_ns);
void pmutop_group_free(pmutop_group *g);

/* The simulated workload's arithmetic for one segment (pmutop_sim.c, a copy of pmutop.sim.segment's): what
 * stays the same for a phase (a burst of a mixed phase) and the workload's constants. */
typedef struct pmutop_sim_params {
    uint64_t key_hash;  /* hash64(seed, cpu) */
    uint64_t tma_seg_key;
    uint64_t writeback_key;
    int64_t seg_ticks;
    int64_t tsc_hz;
    int64_t width;  /* issue slots per cycle */
    int64_t e_core;
    double e_core_ghz;
    double e_core_ipc;
    double base[8];  /* the regime's rates before the segment's jitter */
    double range[16];  /* (low, high) of each */
    double tma[8];  /* the phase's (burst's) top-down profile, varied */
    double recovery;
    double wb_lo;
    double wb_hi;
    const double *seg_factor;  /* 256 jitter factors, one per hash byte */
} pmutop_sim_params;
/* 1 where the arithmetic is exactly Python's (doubles evaluated as doubles), else 0. */
int pmutop_sim_exact(void);
/* The segment's 35 amounts into out; 0, or -1 where Python must compute them (a negative amount, wide doubles). */
int pmutop_sim_segment(const pmutop_sim_params *p, uint64_t seg, uint64_t *out);
/* Segments seg .. seg + n - 1 (one phase or burst: the same parameters): out[35 k ..] = before + the amounts of
 * the first k + 1 of them; 0, or -1 where Python must count them. */
int pmutop_sim_run(const pmutop_sim_params *p, uint64_t seg, uint32_t n, const uint64_t *before, uint64_t *out);
/* out[i] = before[i] + (after[i] - before[i]) * off / st, floored, for the 35 lanes of two packed vectors (35
 * little-endian uint64 each: a read within a segment); 0, or -1 where Python must (no 128-bit integers, off
 * outside the segment, a lane that goes down). */
int pmutop_sim_interp(const char *before, const char *after, uint64_t off, uint64_t st, uint64_t *out);
