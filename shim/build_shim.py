"""cffi builder for pmutop.hw._shim (API mode, out-of-line); setup.py runs it through cffi_modules."""

from cffi import FFI

ffibuilder = FFI()
ffibuilder.cdef(
    """
    int pmutop_is_x86(void);
    uint64_t pmutop_rdtsc(void);
    int pmutop_cpuid(uint32_t leaf, uint32_t subleaf, uint32_t *out4);
    int pmutop_rdpmc(uint32_t ecx, uint64_t *out);
    int pmutop_read_counters(uint32_t n_fixed, uint32_t n_gp, uint64_t *out);
    int pmutop_read_counters_metrics(uint32_t n_fixed, uint32_t n_gp, uint64_t *out);
    uint64_t pmutop_wl_instructions(uint64_t iterations);
    int pmutop_wl_chase_init(uint64_t *buf, uint64_t lines, uint64_t seed);
    uint64_t pmutop_wl_chase(const uint64_t *buf, uint64_t steps);
    uint64_t pmutop_wl_branches(uint64_t iterations, uint64_t seed, uint64_t mask);
    uint64_t pmutop_wl_jumps(uint64_t passes);
    #define PMUTOP_WL_JUMPS ...
    typedef struct pmutop_group pmutop_group;
    pmutop_group *pmutop_group_new(uint32_t n_cores, uint32_t n_values, uint32_t n_extra);
    int pmutop_group_core(pmutop_group *g, uint32_t i, int cpu, int pin, int fd, uint32_t stride, int rdpmc,
                          uint32_t n_fixed, uint32_t n_gp, int metrics, const uint32_t *addresses,
                          uint32_t n_addresses, uint32_t status_address);
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
    typedef struct pmutop_sim_params {
        uint64_t key_hash;
        uint64_t tma_seg_key;
        uint64_t writeback_key;
        int64_t seg_ticks;
        int64_t tsc_hz;
        int64_t width;
        int64_t e_core;
        double e_core_ghz;
        double e_core_ipc;
        double base[8];
        double range[16];
        double tma[8];
        double recovery;
        double wb_lo;
        double wb_hi;
        const double *seg_factor;
    } pmutop_sim_params;
    int pmutop_sim_exact(void);
    int pmutop_sim_segment(const pmutop_sim_params *p, uint64_t seg, uint64_t *out);
    int pmutop_sim_run(const pmutop_sim_params *p, uint64_t seg, uint32_t n, const uint64_t *before, uint64_t *out);
    int pmutop_sim_interp(const char *before, const char *after, uint64_t off, uint64_t st, uint64_t *out);
    """
)
ffibuilder.set_source(
    "pmutop.hw._shim",
    '#include "pmutop_shim.h"',
    # setuptools wants paths relative to the project root, where setup.py runs.
    sources=["shim/pmutop_shim.c", "shim/pmutop_sampler.c", "shim/pmutop_sim.c"],
    include_dirs=["shim"],
    # No fused multiply-add: the simulator's arithmetic (pmutop_sim.c) must round as Python's does.
    extra_compile_args=["-O2", "-pthread", "-ffp-contract=off"],
    extra_link_args=["-pthread"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
