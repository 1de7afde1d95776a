#include "preload/stats.h"

#include "preload/log.h"
#include "preload/options.h"
#include "preload/output_file.h"
#include "preload/signals.h"
#include "preload/trace.h"
#include "preload/version.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *const reasons[] = { "limit", "demand", "room", "prefetch", "oom-retry", "plan" };
#define REASONS (sizeof reasons / sizeof reasons[0])

/* Counted by every device's threads at once (each device has a lock of its own), and read by
 * a signal handler: atomic, without a lock. */
static struct {
    _Atomic uint64_t allocations, ooms;
    _Atomic size_t peak_demanded[LMS_MAX_DEVICES], soft_limit[LMS_MAX_DEVICES];
    _Atomic uint64_t evictions[REASONS];
    _Atomic uint64_t bytes_out, bytes_in, restores;
    _Atomic uint64_t ns_out, ns_in, stalls, stall_ns;
    _Atomic uint64_t taken_back, unscanned, learned, on_host_uses, on_host_bytes;
    _Atomic size_t peak_host;
    /* Per device: bytes moved in all, where the iteration under way began (0: none counted),
     * the length of the iterations counted, and the last iterations' bytes, the latest at
     * iterations % LMS_STATS_ITERATIONS_KEPT. */
    _Atomic uint64_t moved[LMS_MAX_DEVICES], iteration_from[LMS_MAX_DEVICES], iterations[LMS_MAX_DEVICES];
    _Atomic uint64_t iteration_steps[LMS_MAX_DEVICES];
    _Atomic uint64_t iteration_moved[LMS_MAX_DEVICES][LMS_STATS_ITERATIONS_KEPT];
} S;

static void raise_to(_Atomic size_t *peak, size_t value)
{
    size_t seen = atomic_load(peak);
    while (value > seen && !atomic_compare_exchange_weak(peak, &seen, value))
        ;
}

uint64_t lms_stats_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void lms_stats_alloc(void) { S.allocations++; }
void lms_stats_oom(void) { S.ooms++; }

void lms_stats_demanded(int device, size_t demanded, size_t soft_limit)
{
    raise_to(&S.peak_demanded[device], demanded);
    S.soft_limit[device] = soft_limit;
}

void lms_stats_host(size_t host_bytes)
{
    raise_to(&S.peak_host, host_bytes);
}

void lms_stats_evicted(int device, const char *reason, size_t bytes, uint64_t ns)
{
    for (size_t i = 0; i < REASONS; i++)
        if (strcmp(reason, reasons[i]) == 0)
            S.evictions[i]++;
    S.bytes_out += bytes;
    S.ns_out += ns;
    S.moved[device] += bytes;
}

void lms_stats_restored(int device, size_t bytes_copied, uint64_t ns)
{
    S.restores++;
    S.bytes_in += bytes_copied;
    S.ns_in += ns;
    S.moved[device] += bytes_copied;
}

/* Counted from 1 so that 0 says no iteration is under way; called under the device's lock.
 * Iterations of another length are another loop's (on the H100, cuDNN's algorithm search
 * repeats 5 steps before the trainer's loop begins): those kept so far go. */
void lms_stats_iteration_begins(int device, uint64_t steps)
{
    uint64_t now = S.moved[device] + 1, from = S.iteration_from[device];
    if (steps != S.iteration_steps[device]) {
        S.iteration_steps[device] = steps;
        S.iterations[device] = 0;
        from = 0;
    }
    if (from)
        S.iteration_moved[device][S.iterations[device]++ % LMS_STATS_ITERATIONS_KEPT] = now - from;
    S.iteration_from[device] = now;
}

void lms_stats_iteration_lost(int device) { S.iteration_from[device] = 0; }

void lms_stats_taken_back(void) { S.taken_back++; }
void lms_stats_unscanned(void) { S.unscanned++; }
void lms_stats_learned(void) { S.learned++; }

void lms_stats_on_host(int device, size_t bytes)
{
    S.on_host_uses++;
    S.on_host_bytes += bytes;
    S.moved[device] += bytes;
}

void lms_stats_stall(uint64_t ns)
{
    S.stalls++;
    S.stall_ns += ns;
    /* Stalls reach the trace from here, the one place that times them. */
    uint64_t now = lms_stats_now();
    lms_trace_stall(now - ns, now);
}

/* ---- Printing: at exit, or inside a signal handler (SIGTERM, SIGINT), so it formats into a
 * stack buffer with integer conversions only and writes with write(2): no allocation, no
 * stdio lock. */

static struct {
    int fd;                        /* stderr, or LMS_STATS_FILE */
    pid_t pid;                     /* the process that started (0 before lms_stats_start): a
                                      forked child prints nothing */
    uint64_t start_ns;
    int rank;                      /* the launcher's, -1 without one: the ranks of a job tell
                                      their figures apart by it */
    _Atomic bool printed;
} P = { .fd = STDERR_FILENO, .rank = -1 };

/* The whole report fits (16 devices with every figure at its longest take 8.3 KiB), so that it
 * goes out in one write(2): another process writing to the same terminal, file or pipe (a rank
 * of the same job) comes before or after it, not between its lines. A pipe keeps writes whole
 * up to 4 KiB; one device's JSON report is about 750 bytes. */
typedef struct text {
    char buffer[16 << 10];
    size_t len;
} text;

static void flush(text *t)
{
    for (size_t done = 0; done < t->len;) {
        ssize_t n = write(P.fd, t->buffer + done, t->len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    t->len = 0;
}

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...)
{
    char piece[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(piece, sizeof piece, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    size_t len = (size_t)n < sizeof piece ? (size_t)n : sizeof piece - 1;
    if (t->len + len > sizeof t->buffer) flush(t);
    memcpy(t->buffer + t->len, piece, len);
    t->len += len;
}

/* x / whole in tenths, rounded (a share in per mille, a size in tenths of its unit). */
static unsigned long long tenths(double x, double whole)
{
    return whole > 0 ? (unsigned long long)(x * 10.0 / whole + 0.5) : 0;
}

/* "640.0 MiB", "512 B". */
static const char *binary(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    size_t u = 0;
    double scale = 1;
    while ((double)bytes >= scale * 1024 && u < 4) scale *= 1024, u++;
    unsigned long long t = tenths((double)bytes, scale);
    if (u) snprintf(buf, size, "%llu.%llu %s", t / 10, t % 10, units[u]);
    else snprintf(buf, size, "%llu B", (unsigned long long)bytes);
    return buf;
}

static const char *seconds(uint64_t ns, char *buf, size_t size)
{
    unsigned long long ms = (ns + 500000) / 1000000;
    snprintf(buf, size, "%llu.%03llu s", ms / 1000, ms % 1000);
    return buf;
}

/* Bytes per second of copying, in binary units: "2.0 GiB/s"; "-" when nothing was timed. */
static const char *bandwidth(uint64_t bytes, uint64_t ns, char *buf, size_t size)
{
    if (ns == 0 || bytes == 0) return snprintf(buf, size, "-"), buf;
    char size_text[32];
    snprintf(buf, size, "%s/s", binary((uint64_t)((double)bytes * 1e9 / (double)ns), size_text, sizeof size_text));
    return buf;
}

/* Device d's learned iterations whose bytes are kept, and the i-th of them, oldest first. */
static uint64_t iterations_kept(int d)
{
    uint64_t n = S.iterations[d];
    return n < LMS_STATS_ITERATIONS_KEPT ? n : LMS_STATS_ITERATIONS_KEPT;
}

static uint64_t iteration_moved(int d, uint64_t kept, uint64_t i)
{
    return S.iteration_moved[d][(S.iterations[d] - kept + i) % LMS_STATS_ITERATIONS_KEPT];
}

static void print_json(text *t, uint64_t evictions)
{
    add(t, "{\"liblms\":{\"version\":\"%s\",", LMS_VERSION);
    if (P.rank >= 0) add(t, "\"rank\":%d,", P.rank);
    add(t, "\"allocations\":%llu,\"out_of_memory\":%llu,\"devices\":[", (unsigned long long)S.allocations,
        (unsigned long long)S.ooms);
    for (int d = 0, first = 1; d < LMS_MAX_DEVICES; d++)
        if (S.soft_limit[d]) {
            add(t, "%s{\"device\":%d,\"peak_demanded\":%zu,\"soft_limit\":%zu,", first ? "" : ",", d,
                S.peak_demanded[d], S.soft_limit[d]);
            if (iterations_kept(d))
                add(t, "\"iteration_steps\":%llu,", (unsigned long long)S.iteration_steps[d]);
            add(t, "\"moved_per_iteration\":[");
            for (uint64_t i = 0, kept = iterations_kept(d); i < kept; i++)
                add(t, "%s%llu", i ? "," : "", (unsigned long long)iteration_moved(d, kept, i));
            add(t, "]}");
            first = 0;
        }
    add(t, "],\"swapped_out\":{\"count\":%llu,\"bytes\":%llu,\"ns\":%llu},", (unsigned long long)evictions,
        (unsigned long long)S.bytes_out, (unsigned long long)S.ns_out);
    add(t, "\"swapped_in\":{\"count\":%llu,\"bytes\":%llu,\"ns\":%llu},", (unsigned long long)S.restores,
        (unsigned long long)S.bytes_in, (unsigned long long)S.ns_in);
    add(t, "\"stalls\":{\"count\":%llu,\"ns\":%llu},\"taken_back\":%llu,\"unscanned_launches\":%llu,",
        (unsigned long long)S.stalls, (unsigned long long)S.stall_ns, (unsigned long long)S.taken_back,
        (unsigned long long)S.unscanned);
    add(t, "\"iterations_learned\":%llu,", (unsigned long long)S.learned);
    add(t, "\"on_host\":{\"count\":%llu,\"bytes\":%llu},\"evictions\":{", (unsigned long long)S.on_host_uses,
        (unsigned long long)S.on_host_bytes);
    for (size_t i = 0; i < REASONS; i++)
        add(t, "%s\"%s\":%llu", i ? "," : "", reasons[i], (unsigned long long)S.evictions[i]);
    add(t, "},\"peak_host_pool\":%zu}}\n", S.peak_host);
}

static void print_table(text *t, uint64_t evictions, uint64_t run_ns)
{
    char a[32], b[32], c[32];
    if (P.rank >= 0) snprintf(b, sizeof b, ", rank %d", P.rank);
    add(t, "liblms %s statistics%s, run time %s\n", LMS_VERSION, P.rank >= 0 ? b : "", seconds(run_ns, a, sizeof a));
    add(t, "  %-28s %10llu\n", "allocations", (unsigned long long)S.allocations);
    add(t, "  %-28s %10llu\n", "out-of-memory errors", (unsigned long long)S.ooms);
    for (int d = 0; d < LMS_MAX_DEVICES; d++)
        if (S.soft_limit[d]) {
            unsigned long long share = tenths(100.0 * (double)S.peak_demanded[d], (double)S.soft_limit[d]);
            add(t, "  device %-21d peak demanded %s of soft limit %s (%llu.%llu %%)\n", d,
                binary(S.peak_demanded[d], a, sizeof a), binary(S.soft_limit[d], b, sizeof b), share / 10, share % 10);
            uint64_t kept = iterations_kept(d), sum = 0;
            for (uint64_t i = 0; i < kept; i++)
                sum += iteration_moved(d, kept, i);
            if (kept)
                add(t, "  device %-21d moved %s an iteration (the mean of its last %llu iterations of %llu steps)\n",
                    d, binary(sum / kept, a, sizeof a), (unsigned long long)kept,
                    (unsigned long long)S.iteration_steps[d]);
        }
    add(t, "  %-28s %10s %11s %10s %12s\n", "", "count", "bytes", "time", "bandwidth");
    add(t, "  %-28s %10llu %11s %10s %12s\n", "swapped out", (unsigned long long)evictions,
        binary(S.bytes_out, a, sizeof a), seconds(S.ns_out, b, sizeof b), bandwidth(S.bytes_out, S.ns_out, c, sizeof c));
    add(t, "  %-28s %10llu %11s %10s %12s\n", "swapped in", (unsigned long long)S.restores,
        binary(S.bytes_in, a, sizeof a), seconds(S.ns_in, b, sizeof b), bandwidth(S.bytes_in, S.ns_in, c, sizeof c));
    unsigned long long stalled = tenths(100.0 * (double)S.stall_ns, (double)run_ns);
    add(t, "  %-28s %10llu %11s %10s   %llu.%llu %% of run time\n", "restore stalls", (unsigned long long)S.stalls, "",
        seconds(S.stall_ns, a, sizeof a), stalled / 10, stalled % 10);
    add(t, "  %-28s %10llu\n", "taken back while evicting", (unsigned long long)S.taken_back);
    add(t, "  %-28s %10llu\n", "launches not scanned", (unsigned long long)S.unscanned);
    add(t, "  %-28s %10llu\n", "iterations learned", (unsigned long long)S.learned);
    add(t, "  %-28s %10llu %11s\n", "used in host memory", (unsigned long long)S.on_host_uses,
        binary(S.on_host_bytes, a, sizeof a));
    for (size_t i = 0; i < REASONS; i++)
        add(t, "  evictions (%s)%*s %10llu\n", reasons[i], (int)(16 - strlen(reasons[i])), "",
            (unsigned long long)S.evictions[i]);
    add(t, "  %-28s %10s %11s\n", "peak host pool", "", binary(S.peak_host, a, sizeof a));
}

static bool printing(void) { return lms_opt.STATS.value != LMS_STATS_OFF || lms_opt.STATS_FILE.text; }

void lms_stats_print(void)
{
    if (!printing() || (P.pid && getpid() != P.pid) || atomic_exchange(&P.printed, true)) return;
    uint64_t evictions = 0;
    for (size_t i = 0; i < REASONS; i++)
        evictions += S.evictions[i];
    static text t; /* not on the stack: a signal may run this on a small alternate stack; it
                      runs once (P.printed) */
    if (lms_opt.STATS.value == LMS_STATS_JSON) print_json(&t, evictions);
    else print_table(&t, evictions, lms_stats_now() - P.start_ns);
    flush(&t);
}

static void print_on_signal(int signal_number)
{
    (void)signal_number;
    lms_stats_print();
}

void lms_stats_start(void)
{
    P.pid = getpid();
    P.start_ns = lms_stats_now();
    P.rank = lms_launcher_rank();
    if (!printing()) return;
    if (lms_opt.STATS_FILE.text) {
        char err[1024];
        P.fd = lms_output_file_create("LMS_STATS_FILE", lms_opt.STATS_FILE.text, 0666, err, sizeof err);
        if (P.fd < 0)
            lms_exit_bad_input("%s", err);
    }
    static const int signals[] = { SIGTERM, SIGINT };
    lms_signals_at_death(print_on_signal, signals, sizeof signals / sizeof *signals);
}
