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
    """
)
ffibuilder.set_source(
    "pmutop.hw._shim",
    '#include "pmutop_shim.h"',
    # setuptools wants paths relative to the project root, where setup.py runs.
    sources=["shim/pmutop_shim.c"],
    include_dirs=["shim"],
    extra_compile_args=["-O2"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
