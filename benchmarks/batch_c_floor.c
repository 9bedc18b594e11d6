/* The floor under any batch monitor here, in C: `cc -O2 -o batch_c_floor batch_c_floor.c && ./batch_c_floor
 * INTERVAL`. The same system calls as benchmarks/batch_python_floor.py (the same perf groups, cpu-clock and
 * context-switches per CPU pmutop may run on, each read with one read() at every deadline; /proc/stat read once
 * an interval, as batch mode's Util% reads it; one write of a line per CPU and an `all` line), from a loop
 * with no interpreter: the batch benchmark compiles it and measures it beside pmutop, perf stat and the Python
 * floor, so the figures say how much of a Python batch's cost is the interpreter. A measurement, not a mode
 * of pmutop. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { WORDS = 5 }; /* a group read: nr, time enabled, time running, cpu-clock, context-switches */

static int open_event(uint64_t config, int cpu, int group_fd)
{
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_SOFTWARE;
    attr.size = sizeof attr;
    attr.config = config;
    attr.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
    /* The leader starts disabled and is enabled once its sibling is in (as pmutop's groups are): a sibling
     * opened into a running group counts nothing here. */
    attr.disabled = group_fd < 0;
    return (int)syscall(SYS_perf_event_open, &attr, -1, cpu, group_fd, PERF_FLAG_FD_CLOEXEC);
}

static int fail(const char *what)
{
    fprintf(stderr, "batch_c_floor: %s: %s\n", what, strerror(errno));
    return 1;
}

int main(int argc, char **argv)
{
    double interval = argc > 1 ? atof(argv[1]) : 0.5;
    if (!(interval > 0))
        return fprintf(stderr, "batch_c_floor: INTERVAL must be > 0\n"), 2;
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed))
        return fail("sched_getaffinity");
    int n = CPU_COUNT(&allowed), k = 0;
    int *cpus = calloc(n, sizeof *cpus), *fds = calloc(n, sizeof *fds);
    uint64_t(*prev)[WORDS] = calloc(n, sizeof *prev);
    size_t room = 64 * (size_t)(n + 1);
    char *out = malloc(room);
    if (!cpus || !fds || !prev || !out)
        return fail("memory");
    for (int cpu = 0; k < n; cpu++)
        if (CPU_ISSET(cpu, &allowed))
            cpus[k++] = cpu;
    for (int i = 0; i < n; i++) {
        fds[i] = open_event(PERF_COUNT_SW_CPU_CLOCK, cpus[i], -1);
        if (fds[i] < 0 || open_event(PERF_COUNT_SW_CONTEXT_SWITCHES, cpus[i], fds[i]) < 0)
            return fail("perf_event_open");
        if (ioctl(fds[i], PERF_EVENT_IOC_ENABLE, 0) || read(fds[i], prev[i], sizeof prev[i]) != sizeof prev[i])
            return fail("enable and read the group");
    }
    int stat = open("/proc/stat", O_RDONLY | O_CLOEXEC);
    static char stat_text[65536];
    if (stat < 0 || pread(stat, stat_text, sizeof stat_text, 0) < 0)
        return fail("/proc/stat");
    int64_t step = (int64_t)(interval * 1e9 + 0.5);
    struct timespec epoch;
    clock_gettime(CLOCK_MONOTONIC, &epoch);
    for (int64_t deadline = 1;; deadline++) {
        int64_t at = (int64_t)epoch.tv_nsec + deadline * step;
        struct timespec wake = {epoch.tv_sec + at / 1000000000, at % 1000000000};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &wake, NULL) == EINTR)
            ;
        double seconds = deadline * interval; /* this deadline's time, as batch mode's time column */
        uint64_t now[WORDS], total = 0;
        size_t len = 0;
        for (int i = 0; i < n; i++) {
            if (read(fds[i], now, sizeof now) != sizeof now)
                return fail("read a group");
            uint64_t switches = now[4] - prev[i][4];
            total += switches;
            len += snprintf(out + len, room - len, "%8.2f %4d %8.3f %9llu\n", seconds, cpus[i],
                            (double)(now[3] - prev[i][3]) / 1e9, (unsigned long long)switches);
            memcpy(prev[i], now, sizeof now);
        }
        if (pread(stat, stat_text, sizeof stat_text, 0) < 0)
            return fail("/proc/stat");
        len += snprintf(out + len, room - len, "%8.2f  all %18llu\n", seconds, (unsigned long long)total);
        if (write(STDOUT_FILENO, out, len) < 0)
            return errno == EPIPE ? 0 : fail("write"); /* its reader went away: the end */
    }
}
