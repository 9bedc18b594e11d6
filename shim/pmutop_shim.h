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
