/* Writes a scripted trace through the same writer liblms uses (preload/trace.c), so that the
 * tests know every figure in it. Not a test itself: the trace_* and tools_* tests run it.
 *
 *   trace_workload PATH [--uses] [--depth N] [--max-mb N] [--repeat N] [--die-by KILL|TERM]
 *                       [--dump-signal NAME] [--threads N]
 *
 * The workload, on device 0 (1 GiB, LMS_EXCLUDE_MB=512: soft limit 512 MiB), per repetition:
 *   alloc A 256 MiB (from site_a), B 256 MiB (site_b), C 128 MiB (site_c), s 4 KiB (not cached)
 *   swap out A (10 ms), evict A "demand"; launch "kernel_bc" uses B, C, s
 *   swap in A (5 ms) after evicting B, a 2 ms restore stall; launch "kernel_a" uses A, s;
 *   out of memory for 1 GiB
 *   free A, B, C, s
 * with counters after each change. --die-by kills the process by that signal before closing.
 * --dump-signal installs the dump, raises the signal and waits until the dump is written. */
#include "preload/signals.h"
#include "preload/trace.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB (1ull << 20)
enum { A, B, C, S, COUNT };
static const uint64_t addr[COUNT] = { 0x7f0000000000, 0x7f0010000000, 0x7f0020000000, 0x7f0030000000 };
static const uint64_t size[COUNT] = { 256 * MiB, 256 * MiB, 128 * MiB, 4096 };
static const uint64_t soft_limit = 512 * MiB;

static struct {
    bool live[COUNT];
    bool resident[COUNT];
    uint32_t stack[COUNT];
    uint64_t created_ns[COUNT];
} table;
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic unsigned signal_dumps;

static void counters(void)
{
    uint64_t resident = 0, host = 0, demanded = 0;
    for (int i = 0; i < COUNT; i++) {
        if (!table.live[i]) continue;
        demanded += size[i];
        if (table.resident[i]) resident += size[i];
        else host += size[i];
    }
    lms_trace_counters(0, resident, host, demanded, soft_limit);
}

static inline __attribute__((always_inline)) void allocate(int i)
{
    table.stack[i] = lms_trace_alloc(0, addr[i], size[i], 0x1000, i != S);
    table.created_ns[i] = lms_trace_now_ns();
    table.live[i] = table.resident[i] = true;
    counters();
}

/* Three call sites, as a program would have. */
/* The empty asm after each call keeps it from becoming a jump, which would hide the site. */
__attribute__((noinline)) void site_a(void) { allocate(A); __asm__ volatile(""); }
__attribute__((noinline)) void site_b(void) { allocate(B); __asm__ volatile(""); }
__attribute__((noinline)) void site_c(void) { allocate(C); allocate(S); __asm__ volatile(""); }

static void swap(int i, enum lms_swap_direction dir, uint64_t ms)
{
    uint64_t start = lms_trace_now_ns();
    uint64_t range = lms_trace_range_begin(dir, size[i]);
    lms_trace_range_end(range);
    lms_trace_swap(0, addr[i], size[i], dir, start, start + ms * 1000000, 0x2000 + dir);
    if (dir == LMS_SWAP_OUT) lms_trace_evict(0, addr[i], size[i], "demand");
    table.resident[i] = dir == LMS_SWAP_IN;
    counters();
}

static uint64_t step;
static void launch(const char *kernel, const int *uses, size_t count)
{
    uint64_t addrs[COUNT];
    for (size_t i = 0; i < count; i++) addrs[i] = addr[uses[i]];
    lms_trace_launch_uses(kernel, 0x1000, step++, addrs, count);
}

/* What liblms does for a dump: its table locked, then the dump. */
static void dump_locked(const char *reason)
{
    lms_trace_dump_begin(reason);
    for (int i = 0; i < COUNT; i++) {
        if (!table.live[i]) continue;
        lms_trace_live live = { .device = 0, .addr = addr[i], .bytes = size[i], .resident = table.resident[i],
                                .created_ns = table.created_ns[i], .stack = table.stack[i] };
        lms_trace_dump_record(&live);
    }
    lms_trace_dump_end();
}

static void walk_live(void *ctx, const char *reason)
{
    (void)ctx;
    pthread_mutex_lock(&table_lock);
    dump_locked(reason);
    pthread_mutex_unlock(&table_lock);
    signal_dumps++;
}

void run_once(void)
{
    pthread_mutex_lock(&table_lock);
    site_a();
    site_b();
    site_c();
    swap(A, LMS_SWAP_OUT, 10);
    launch("kernel_bc", (const int[]){ B, C, S }, 3);
    swap(B, LMS_SWAP_OUT, 10);
    swap(A, LMS_SWAP_IN, 5);
    uint64_t stalled = lms_trace_now_ns();
    lms_trace_stall(stalled, stalled + 2000000);
    launch("kernel_a", (const int[]){ A, S }, 2);
    lms_trace_oom(0, 1024 * MiB);
    dump_locked("oom");
    for (int i = 0; i < COUNT; i++) {
        lms_trace_free(0, addr[i], size[i]);
        table.live[i] = false;
        counters();
    }
    pthread_mutex_unlock(&table_lock);
}

static unsigned long repeat = 1;
static void *run_many(void *unused)
{
    (void)unused;
    for (unsigned long r = 0; r < repeat; r++) run_once();
    return NULL;
}

static unsigned long number(const char *flag, const char *text)
{
    char *end;
    unsigned long v = strtoul(text ? text : "", &end, 10);
    if (!text || !*text || *end) { fprintf(stderr, "trace_workload: %s wants a number, got '%s'\n", flag, text ? text : ""); exit(2); }
    return v;
}

int main(int argc, char **argv)
{
    if (argc < 2) { fprintf(stderr, "usage: trace_workload PATH [options]\n"); return 2; }
    lms_trace_config cfg = { .path = argv[1], .stack_depth = 4, .threshold_bytes = 1000 << 10,
                             .exclude_bytes = 512 * MiB,
                             .policy = "lru", .mode = "swap", .walk_live = walk_live };
    int die_by = 0;
    unsigned long threads = 1;
    for (int i = 2; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--uses") == 0) cfg.record_uses = true;
        else if (strcmp(argv[i], "--depth") == 0) cfg.stack_depth = (unsigned)number(argv[i], value), i++;
        else if (strcmp(argv[i], "--max-mb") == 0) cfg.max_bytes = number(argv[i], value) * MiB, i++;
        else if (strcmp(argv[i], "--repeat") == 0) repeat = number(argv[i], value), i++;
        else if (strcmp(argv[i], "--threads") == 0) threads = number(argv[i], value), i++;
        else if (strcmp(argv[i], "--die-by") == 0) {
            /* KILL or TERM, which no dump may use: a trace without its end, or with it. */
            die_by = !value ? -1 : strcmp(value, "KILL") == 0 ? SIGKILL : strcmp(value, "TERM") == 0 ? SIGTERM : -1;
            if (die_by < 0) { fprintf(stderr, "trace_workload: bad signal '%s'\n", value ? value : ""); return 2; }
            i++;
        }
        else if (strcmp(argv[i], "--dump-signal") == 0) {
            cfg.dump_signal = lms_dump_signal_number(value);
            if (cfg.dump_signal < 0) { fprintf(stderr, "trace_workload: bad signal '%s'\n", value); return 2; }
            i++;
        } else { fprintf(stderr, "trace_workload: unknown option %s\n", argv[i]); return 2; }
    }
    if (strcmp(cfg.path, "-") == 0) cfg.path = NULL;   /* no trace: a dump goes to stderr */

    char err[512];
    if (lms_trace_open(&cfg, err, sizeof err) != 0) { fprintf(stderr, "trace_workload: %s\n", err); return 2; }
    lms_trace_device(0, 1024 * MiB, soft_limit);
    if (threads > 16) threads = 16;
    pthread_t workers[16];
    for (unsigned long t = 1; t < threads; t++) pthread_create(&workers[t], NULL, run_many, NULL);
    run_many(NULL);
    for (unsigned long t = 1; t < threads; t++) pthread_join(workers[t], NULL);

    if (cfg.dump_signal) {
        pthread_mutex_lock(&table_lock);
        site_a();
        pthread_mutex_unlock(&table_lock);
        unsigned before = signal_dumps;
        raise(cfg.dump_signal);
        for (int waited = 0; signal_dumps == before && waited < 5000; waited++)
            nanosleep(&(struct timespec){ .tv_nsec = 1000000 }, NULL);
    }
    if (die_by > 0) raise(die_by);
    lms_trace_close();
    return 0;
}
