/* Native sampler threads: one pthread per core (pinned where the CPUs are this host's) that, on every
 * deadline of one shared schedule (epoch + k * interval, missed deadlines skipped), reads the TSC and the
 * counters (rdpmc burst, or one pread per register of the core's msr file), then GLOBAL_STATUS, then the
 * core's extra registers (the power monitor's: APERF, MPERF, C-state residencies, thermal status, RAPL; a
 * failed one is flagged, not fatal), and publishes the reading in its slot. Nothing here writes a
 * register: status clearing, programming and restoring stay in Python, behind its MSR write gate. One
 * Python thread drains every slot once per interval; the thread whose reading completes the round the drain
 * waits for wakes it (one wake-up per interval, not one per core). See pmutop_shim.h. */
#define _GNU_SOURCE
#include "pmutop_shim.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ADDRESSES 64
#define MAX_CHECKS 64
#define MAX_EXTRA 16
#define PMUTOP_SHORT_READ 0x10000  /* not an errno: the read returned less than 8 bytes (see native_sampler.py) */
#define PMUTOP_PIN_FAILED 0xFFFFFFFFu  /* the failed "address" when the thread could not be pinned to its CPU */

struct pmutop_core {
    struct pmutop_group *group;
    int cpu, pin, fd, rdpmc, metrics;
    uint32_t stride, n_fixed, n_gp, n_addr, status_address;
    uint32_t addr[MAX_ADDRESSES];
    /* the foreign-use check: control registers that must still hold (value & mask) == expected */
    uint32_t n_check, check_addr[MAX_CHECKS];
    uint64_t check_mask[MAX_CHECKS], check_expected[MAX_CHECKS];
    int64_t check_ns, checked_at;
    uint64_t foreign;  /* bit j: check j differed at the last check */
    /* extra registers read after GLOBAL_STATUS at every scheduled reading; set before the schedule. One the
     * counters read from the msr file too (the TSC) is taken from that read: extra_from its index, else -1. */
    uint32_t n_extra, extra_addr[MAX_EXTRA];
    int extra_from[MAX_EXTRA];
    /* published reading, under the seqlock `lock_seq` (odd while being written) */
    _Atomic uint64_t lock_seq;
    uint64_t seq, at_ns, status, err, err_address, checked, foreign_seen, extra_failed;
    uint64_t values[MAX_ADDRESSES + 1], extra[MAX_EXTRA];
    /* sleeping: the core's own mutex and condition, so waking at a deadline contends with nobody */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic int stop;
    int started;
    pthread_t thread;
    /* the drain's wait: readings published, the count it waits for (UINT64_MAX: none), and whether this
     * core still counts in the group's `remaining` (both under the group's mutex) */
    _Atomic uint64_t published, need;
    int pending;
};

struct pmutop_group {
    uint32_t n_cores, n_values, n_extra;  /* n_extra: room per core for extra registers (at most MAX_EXTRA) */
    struct pmutop_core *cores;
    /* schedule: epoch, interval, generation, written under `sched_lock` (seqlock) */
    _Atomic uint64_t sched_lock;
    int64_t epoch_ns, interval_ns;
    _Atomic uint64_t gen;
    _Atomic int stop;
    /* the drain: readings published so far, the cores it still waits for, kicks that end its wait */
    _Atomic uint64_t total, kicks;
    uint64_t remaining;
    pthread_mutex_t mu;
    pthread_cond_t cv;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static struct timespec to_timespec(int64_t ns)
{
    struct timespec ts = {ns / 1000000000, ns % 1000000000};
    return ts;
}

static void init_cond(pthread_cond_t *cv)
{
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);  /* deadlines are CLOCK_MONOTONIC, like Python's */
    pthread_cond_init(cv, &attr);
    pthread_condattr_destroy(&attr);
}

pmutop_group *pmutop_group_new(uint32_t n_cores, uint32_t n_values, uint32_t n_extra)
{
    pmutop_group *g;
    uint32_t i;
    if (n_values > MAX_ADDRESSES + 1 || n_extra > MAX_EXTRA)
        return NULL;
    g = calloc(1, sizeof(*g));
    if (!g)
        return NULL;
    g->cores = calloc(n_cores ? n_cores : 1, sizeof(*g->cores));
    if (!g->cores) {
        free(g);
        return NULL;
    }
    g->n_cores = n_cores;
    g->n_values = n_values;
    g->n_extra = n_extra;
    pthread_mutex_init(&g->mu, NULL);
    init_cond(&g->cv);
    for (i = 0; i < n_cores; i++) {
        atomic_store(&g->cores[i].need, UINT64_MAX);
        g->cores[i].group = g;
        g->cores[i].fd = -1;
        pthread_mutex_init(&g->cores[i].mu, NULL);
        init_cond(&g->cores[i].cv);
    }
    return g;
}

int pmutop_group_core(pmutop_group *g, uint32_t i, int cpu, int pin, int fd, uint32_t stride, int rdpmc,
                      uint32_t n_fixed, uint32_t n_gp, int metrics, const uint32_t *addresses, uint32_t n_addresses,
                      uint32_t status_address)
{
    struct pmutop_core *c;
    if (i >= g->n_cores || n_addresses > MAX_ADDRESSES || 1 + n_fixed + n_gp + (metrics ? 1 : 0) > g->n_values)
        return -EINVAL;
    if (!rdpmc && n_addresses != 1 + n_fixed + n_gp + (metrics ? 1 : 0))
        return -EINVAL;
    c = &g->cores[i];
    c->cpu = cpu;
    c->pin = pin;
    c->fd = dup(fd);  /* the thread's own: Python closing its device never leaves a thread on a reused fd */
    if (c->fd < 0)
        return -errno;
    c->stride = stride;
    c->rdpmc = rdpmc;
    c->n_fixed = n_fixed;
    c->n_gp = n_gp;
    c->metrics = metrics;
    c->n_addr = n_addresses;
    memcpy(c->addr, addresses, n_addresses * sizeof(uint32_t));
    c->status_address = status_address;
    return 0;
}

/* Control registers this core's thread compares with what Python programmed: at its first reading after
 * check_ns have passed since the last check, and at every reading while a difference is seen. */
int pmutop_group_checks(pmutop_group *g, uint32_t i, const uint32_t *addresses, const uint64_t *masks,
                        const uint64_t *expected, uint32_t n, int64_t check_ns)
{
    struct pmutop_core *c;
    if (i >= g->n_cores || n > MAX_CHECKS)
        return -EINVAL;
    c = &g->cores[i];
    c->n_check = n;
    memcpy(c->check_addr, addresses, n * sizeof(uint32_t));
    memcpy(c->check_mask, masks, n * sizeof(uint64_t));
    memcpy(c->check_expected, expected, n * sizeof(uint64_t));
    c->check_ns = check_ns;
    return 0;
}

/* Extra registers core i's thread reads after GLOBAL_STATUS at every scheduled reading (not the baseline): read
 * only, a failed one flagged in its reading and the thread going on. Only before pmutop_group_schedule: the
 * thread reads them after it has seen a schedule, so it never sees a half-written list. */
int pmutop_group_extra(pmutop_group *g, uint32_t i, const uint32_t *addresses, uint32_t n)
{
    struct pmutop_core *c;
    uint32_t j, k;
    int rc = 0;
    if (i >= g->n_cores || n > g->n_extra)
        return -EINVAL;
    c = &g->cores[i];
    pthread_mutex_lock(&c->mu);
    if (atomic_load(&g->gen) != 0) {
        rc = -EBUSY;
    } else {
        memcpy(c->extra_addr, addresses, n * sizeof(uint32_t));
        for (j = 0; j < n; j++) {
            c->extra_from[j] = -1;
            for (k = 0; !c->rdpmc && k < c->n_addr && c->extra_from[j] < 0; k++)
                if (c->addr[k] == addresses[j])
                    c->extra_from[j] = (int)k;
        }
        c->n_extra = n;
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

static int read_msr(struct pmutop_core *c, uint32_t address, uint64_t *out)
{
    ssize_t n = pread(c->fd, out, 8, (off_t)address * c->stride);
    if (n == 8)
        return 0;
    c->err_address = address;
    return n < 0 ? errno : PMUTOP_SHORT_READ;  /* no such register in a snapshot */
}

/* One reading: the clock, the counters, then GLOBAL_STATUS (the order of MsrCpuCounters._collect). */
static int take(struct pmutop_core *c, uint64_t *values, uint64_t *status, uint64_t *at)
{
    uint32_t j;
    int err;
    *at = (uint64_t)now_ns();
    if (c->rdpmc) {
        if (c->metrics)
            pmutop_read_counters_metrics(c->n_fixed, c->n_gp, values);
        else
            pmutop_read_counters(c->n_fixed, c->n_gp, values);
    } else {
        for (j = 0; j < c->n_addr; j++)
            if ((err = read_msr(c, c->addr[j], &values[j])) != 0)
                return err;
    }
    return read_msr(c, c->status_address, status);
}

/* The extra registers, after the counters (`values`): bit j of the result set when register j could not be
 * read (its value then 0). A failure here is the power monitor's missing value for the interval, never the
 * core's end. */
static uint64_t take_extra(struct pmutop_core *c, const uint64_t *values, uint64_t *extra)
{
    uint32_t j;
    uint64_t failed = 0;
    for (j = 0; j < c->n_extra; j++)
        if (c->extra_from[j] >= 0)
            extra[j] = values[c->extra_from[j]];  /* read a moment ago, with the counters */
        else if (pread(c->fd, &extra[j], 8, (off_t)c->extra_addr[j] * c->stride) != 8) {
            extra[j] = 0;
            failed |= 1ull << j;
        }
    return failed;
}

/* The foreign-use check, when due: 0 or errno; *checked 1 when it ran. */
static int check(struct pmutop_core *c, uint64_t at, uint64_t *checked)
{
    uint32_t j;
    uint64_t value, foreign = 0;
    int err;
    *checked = 0;
    if (!c->n_check || ((int64_t)at - c->checked_at < c->check_ns && !c->foreign))
        return 0;
    for (j = 0; j < c->n_check; j++) {
        if ((err = read_msr(c, c->check_addr[j], &value)) != 0)
            return err;
        if ((value & c->check_mask[j]) != c->check_expected[j])
            foreign |= 1ull << j;
    }
    c->foreign = foreign;
    c->checked_at = (int64_t)at;
    *checked = 1;
    return 0;
}

static void publish(struct pmutop_core *c, const uint64_t *values, uint64_t status, uint64_t at, int err,
                    uint64_t checked, const uint64_t *extra, uint64_t extra_failed)
{
    pmutop_group *g = c->group;
    atomic_fetch_add_explicit(&c->lock_seq, 1, memory_order_acq_rel);
    atomic_thread_fence(memory_order_release);
    c->seq++;
    c->at_ns = at;
    c->status = status;
    c->err = (uint64_t)err;
    c->checked = checked;
    c->foreign_seen = c->foreign;
    memcpy(c->values, values, g->n_values * sizeof(uint64_t));
    c->extra_failed = extra_failed;
    memcpy(c->extra, extra, g->n_extra * sizeof(uint64_t));
    atomic_thread_fence(memory_order_release);
    atomic_fetch_add_explicit(&c->lock_seq, 1, memory_order_acq_rel);
    atomic_fetch_add(&g->total, 1);
    /* Only the reading the drain waits for takes the group's mutex: one per core and interval. */
    if (atomic_fetch_add(&c->published, 1) + 1 == atomic_load(&c->need)) {
        pthread_mutex_lock(&g->mu);
        if (c->pending) {
            c->pending = 0;
            if (--g->remaining == 0)
                pthread_cond_broadcast(&g->cv);
        }
        pthread_mutex_unlock(&g->mu);
    }
}

static void schedule(pmutop_group *g, int64_t *epoch, int64_t *interval, uint64_t *gen)
{
    uint64_t s;
    do {
        s = atomic_load(&g->sched_lock);
        *epoch = g->epoch_ns;
        *interval = g->interval_ns;
        *gen = atomic_load(&g->gen);
        atomic_thread_fence(memory_order_acquire);
    } while ((s & 1) || s != atomic_load(&g->sched_lock));
}

static int stopping(struct pmutop_core *c)
{
    return atomic_load(&c->group->stop) || atomic_load(&c->stop);
}

static void *core_main(void *arg)
{
    struct pmutop_core *c = arg;
    pmutop_group *g = c->group;
    uint64_t values[MAX_ADDRESSES + 1] = {0}, status = 0, at = 0, gen, my_gen = 0, checked = 0;
    uint64_t extra[MAX_EXTRA] = {0}, extra_failed = 0;
    int64_t epoch, interval, deadline, k = 1;
    int err = 0;
    char name[16];
    /* "pmutop-cpuN" in ps -L, top -H and /proc/PID/task/TID/comm (at most 15 characters) */
    snprintf(name, sizeof(name), "pmutop-cpu%d", c->cpu);
    pthread_setname_np(pthread_self(), name);
    if (c->pin) {
        cpu_set_t set;
        if (c->cpu < 0 || c->cpu >= CPU_SETSIZE) {
            err = EINVAL;
        } else {
            CPU_ZERO(&set);
            CPU_SET(c->cpu, &set);
            if (sched_setaffinity(0, sizeof(set), &set) != 0)
                err = errno;
        }
        if (err)
            c->err_address = PMUTOP_PIN_FAILED;
    }
    if (!err)
        err = take(c, values, &status, &at);  /* the baseline */
    c->checked_at = (int64_t)at;  /* Python just programmed these registers: the first check is due later */
    publish(c, values, status, at, err, 0, extra, 0);
    if (err)
        goto out;
    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (stopping(c))
            break;
        schedule(g, &epoch, &interval, &gen);
        if (gen == 0) {  /* no schedule yet: wait for it (or stop) */
            pthread_cond_wait(&c->cv, &c->mu);
            continue;
        }
        if (gen != my_gen) {
            my_gen = gen;
            k = 1;
        }
        deadline = epoch + k * interval;
        if (now_ns() < deadline) {
            struct timespec ts = to_timespec(deadline);
            pthread_cond_timedwait(&c->cv, &c->mu, &ts);
            continue;  /* the deadline, a schedule change or stop: look again */
        }
        pthread_mutex_unlock(&c->mu);
        err = take(c, values, &status, &at);
        if (!err)
            extra_failed = take_extra(c, values, extra);
        if (!err)
            err = check(c, at, &checked);
        publish(c, values, status, at, err, checked, extra, extra_failed);
        pthread_mutex_lock(&c->mu);
        if (err)
            break;
        /* Skip deadlines already past, as the Python samplers do. */
        {
            int64_t late = (now_ns() - epoch) / interval + 1;
            k = k + 1 > late ? k + 1 : late;
        }
    }
    pthread_mutex_unlock(&c->mu);
out:
    close(c->fd);
    c->fd = -1;
    return NULL;
}

int pmutop_group_start(pmutop_group *g)
{
    uint32_t i;
    int err = 0;
    sigset_t all, old;
    /* The threads start with every signal blocked (they inherit the mask): a terminating signal always
     * goes to pmutop's guardian thread (pmutop.safety.exit_guard), never to a sampler. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    for (i = 0; i < g->n_cores && !err; i++) {
        err = pthread_create(&g->cores[i].thread, NULL, core_main, &g->cores[i]);
        if (!err)
            g->cores[i].started = 1;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return -err;
}

static void wake_core(struct pmutop_core *c)
{
    pthread_mutex_lock(&c->mu);
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

static void wake_drain(pmutop_group *g)
{
    pthread_mutex_lock(&g->mu);
    atomic_fetch_add(&g->kicks, 1);
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

void pmutop_group_schedule(pmutop_group *g, int64_t epoch_ns, int64_t interval_ns)
{
    uint32_t i;
    atomic_fetch_add(&g->sched_lock, 1);
    g->epoch_ns = epoch_ns;
    g->interval_ns = interval_ns > 0 ? interval_ns : 1;
    atomic_fetch_add(&g->gen, 1);
    atomic_fetch_add(&g->sched_lock, 1);
    for (i = 0; i < g->n_cores; i++)
        if (g->cores[i].started)
            wake_core(&g->cores[i]);
    wake_drain(g);
}

/* Block until every core i with need[i] > 0 has published need[i] readings, or the deadline
 * (CLOCK_MONOTONIC ns) passes, or pmutop_group_kick/stop: 0 all there, 1 timed out, 2 kicked or stopped.
 * Called with the GIL released. */
int pmutop_group_wait(pmutop_group *g, const uint64_t *need, int64_t deadline_ns)
{
    struct timespec ts = to_timespec(deadline_ns);
    uint64_t kicks;
    uint32_t i;
    int rc = 0;
    pthread_mutex_lock(&g->mu);
    kicks = atomic_load(&g->kicks);
    g->remaining = 0;
    for (i = 0; i < g->n_cores; i++) {
        struct pmutop_core *c = &g->cores[i];
        if (!need[i])
            continue;
        /* need first, then published: a reading in between is counted here (pending stays 0) and its
         * publisher, which then waits for this mutex, finds pending clear. */
        atomic_store(&c->need, need[i]);
        c->pending = atomic_load(&c->published) < need[i];
        g->remaining += (uint64_t)c->pending;
    }
    while (g->remaining) {
        if (atomic_load(&g->stop) || atomic_load(&g->kicks) != kicks) {
            rc = 2;
            break;
        }
        if (pthread_cond_timedwait(&g->cv, &g->mu, &ts) == ETIMEDOUT) {
            rc = g->remaining != 0;
            break;
        }
    }
    for (i = 0; i < g->n_cores; i++) {
        atomic_store(&g->cores[i].need, UINT64_MAX);
        g->cores[i].pending = 0;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void pmutop_group_kick(pmutop_group *g) { wake_drain(g); }

uint64_t pmutop_group_total(pmutop_group *g) { return atomic_load(&g->total); }

/* Every core's latest reading, consistent per core: out[i * (8 + n_values + n_extra) ...] = readings
 * published (0: none yet, 1: the baseline, 1 + k: sample k), clock ns, GLOBAL_STATUS, errno (0: fine), the
 * address that failed, 1 if the foreign-use check ran at this reading, the checks that differed (bit j:
 * check j), the extra registers that failed (bit j: extra j), then the n_values values, then the n_extra
 * extra registers. */
void pmutop_group_read(pmutop_group *g, uint64_t *out)
{
    uint32_t i, stride = 8 + g->n_values + g->n_extra;
    for (i = 0; i < g->n_cores; i++) {
        struct pmutop_core *c = &g->cores[i];
        uint64_t *o = out + (uint64_t)i * stride, s;
        do {
            s = atomic_load_explicit(&c->lock_seq, memory_order_acquire);
            o[0] = c->seq;
            o[1] = c->at_ns;
            o[2] = c->status;
            o[3] = c->err;
            o[4] = c->err_address;
            o[5] = c->checked;
            o[6] = c->foreign_seen;
            o[7] = c->extra_failed;
            memcpy(o + 8, c->values, g->n_values * sizeof(uint64_t));
            memcpy(o + 8 + g->n_values, c->extra, g->n_extra * sizeof(uint64_t));
            atomic_thread_fence(memory_order_acquire);
        } while ((s & 1) || s != atomic_load_explicit(&c->lock_seq, memory_order_acquire));
    }
}

void pmutop_group_stop_core(pmutop_group *g, uint32_t i)
{
    if (i < g->n_cores && g->cores[i].started) {
        atomic_store(&g->cores[i].stop, 1);
        wake_core(&g->cores[i]);
    }
}

/* Stop every thread and wait for them until the deadline; 0 when all ended (the group may then be
 * freed), else the number still running (a read stuck in the kernel: the group must then be leaked). */
int pmutop_group_stop(pmutop_group *g, int64_t deadline_ns)
{
    uint32_t i;
    int running = 0;
    struct timespec ts = to_timespec(deadline_ns);
    struct timespec real;
    atomic_store(&g->stop, 1);
    for (i = 0; i < g->n_cores; i++)
        if (g->cores[i].started)
            wake_core(&g->cores[i]);
    wake_drain(g);
    for (i = 0; i < g->n_cores; i++) {
        struct pmutop_core *c = &g->cores[i];
        if (!c->started)
            continue;
        /* pthread_timedjoin_np takes CLOCK_REALTIME: convert what is left of the monotonic deadline. */
        clock_gettime(CLOCK_REALTIME, &real);
        {
            int64_t left = deadline_ns - now_ns();
            int64_t abs_ns = (int64_t)real.tv_sec * 1000000000 + real.tv_nsec + (left > 0 ? left : 0);
            ts = to_timespec(abs_ns);
        }
        if (pthread_timedjoin_np(c->thread, NULL, &ts) == 0)
            c->started = 0;
        else
            running++;
    }
    return running;
}

void pmutop_group_free(pmutop_group *g)
{
    uint32_t i;
    if (!g)
        return;
    for (i = 0; i < g->n_cores; i++) {
        if (g->cores[i].started)
            return;  /* a thread still runs: leak rather than free what it uses */
        if (g->cores[i].fd >= 0)
            close(g->cores[i].fd);  /* configured, never started */
    }
    free(g->cores);
    free(g);
}
