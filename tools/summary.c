/* lms-trace summary: the figures of a run in one readable table. */
#include "tools/commands.h"
#include "tools/trace_read.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#define TOP_SITES 10
#define MAX_REASONS 16

typedef struct site {
    char *name;
    uint64_t bytes, allocations;
    uint64_t swap_bytes, swaps;
    UT_hash_handle hh;
} site;

typedef struct live {             /* an allocation, to charge its swaps to its call site */
    uint64_t key[2];              /* device, address */
    site *site;
    UT_hash_handle hh;
} live;

typedef struct {
    bool seen;
    uint64_t total, soft_limit;
    uint64_t peak_demanded, soft_at_peak, peak_resident, peak_host;
} device_figures;

typedef struct {
    device_figures devices[TRACE_MAX_DEVICES];
    uint64_t allocations, allocated_bytes, frees;
    uint64_t swaps[2], swap_bytes[2];
    double swap_us[2];
    struct { const char *reason; uint64_t count; } reasons[MAX_REASONS];
    uint64_t evictions, ooms, largest_oom, dumps;
    double end_us;
    bool truncated;
    site *sites;
    live *lives;
} summary;

static site *find_site(summary *s, const json_value *frames)
{
    char name[256];
    trace_call_site(frames, name, sizeof name);
    site *found;
    HASH_FIND_STR(s->sites, name, found);
    if (found) return found;
    found = calloc(1, sizeof *found);
    if (!found || !(found->name = strdup(name))) { free(found); return NULL; }
    HASH_ADD_KEYPTR(hh, s->sites, found->name, strlen(found->name), found);
    return found;
}

static live *find_live(summary *s, int device, uint64_t addr)
{
    uint64_t key[2] = { (uint64_t)device, addr };
    live *found;
    HASH_FIND(hh, s->lives, key, sizeof key, found);
    return found;
}

static void count_reason(summary *s, const char *reason)
{
    size_t i = 0;
    while (i < MAX_REASONS && s->reasons[i].reason && strcmp(s->reasons[i].reason, reason) != 0) i++;
    if (i == MAX_REASONS) i = MAX_REASONS - 1, reason = "other";
    if (!s->reasons[i].reason) s->reasons[i].reason = strdup(reason);
    s->reasons[i].count++;
}

static int on_event(void *ctx, const trace_event *ev)
{
    summary *s = ctx;
    device_figures *d = &s->devices[ev->device];
    double end = ev->ts_us + ev->dur_us;
    if (end > s->end_us) s->end_us = end;
    switch (ev->kind) {
    case TRACE_DEVICE:
        d->seen = true;
        d->total = ev->total_bytes;
        d->soft_limit = ev->soft_limit;
        break;
    case TRACE_ALLOC: {
        d->seen = true;
        s->allocations++;
        s->allocated_bytes += ev->bytes;
        site *where = find_site(s, ev->frames);
        if (!where) return -1;
        where->bytes += ev->bytes;
        where->allocations++;
        live *l = find_live(s, ev->device, ev->addr);
        if (!l) {
            if (!(l = calloc(1, sizeof *l))) return -1;
            l->key[0] = (uint64_t)ev->device;
            l->key[1] = ev->addr;
            HASH_ADD(hh, s->lives, key, sizeof l->key, l);
        }
        l->site = where;
        break;
    }
    case TRACE_FREE: {
        s->frees++;
        live *l = find_live(s, ev->device, ev->addr);
        if (l) { HASH_DEL(s->lives, l); free(l); }
        break;
    }
    case TRACE_SWAP_OUT:
    case TRACE_SWAP_IN: {
        int dir = ev->kind == TRACE_SWAP_IN;
        s->swaps[dir]++;
        s->swap_bytes[dir] += ev->bytes;
        s->swap_us[dir] += ev->dur_us;
        live *l = find_live(s, ev->device, ev->addr);
        if (l) { l->site->swap_bytes += ev->bytes; l->site->swaps++; }
        break;
    }
    case TRACE_EVICT: s->evictions++; count_reason(s, ev->reason); break;
    case TRACE_OOM:
        s->ooms++;
        if (ev->bytes > s->largest_oom) s->largest_oom = ev->bytes;
        break;
    case TRACE_COUNTERS:
        d->seen = true;
        d->soft_limit = ev->soft_limit;
        if (ev->demanded > d->peak_demanded) { d->peak_demanded = ev->demanded; d->soft_at_peak = ev->soft_limit; }
        if (ev->resident_bytes > d->peak_resident) d->peak_resident = ev->resident_bytes;
        if (ev->host > d->peak_host) d->peak_host = ev->host;
        break;
    case TRACE_DUMP: s->dumps++; break;
    case TRACE_TRUNCATED: s->truncated = true; break;
    default: break;
    }
    return 0;
}

static int by_bytes(const void *a, const void *b)
{
    const site *x = *(site *const *)a, *y = *(site *const *)b;
    if (x->bytes != y->bytes) return x->bytes < y->bytes ? 1 : -1;
    return strcmp(x->name, y->name);
}

static int by_swap_bytes(const void *a, const void *b)
{
    const site *x = *(site *const *)a, *y = *(site *const *)b;
    if (x->swap_bytes != y->swap_bytes) return x->swap_bytes < y->swap_bytes ? 1 : -1;
    return strcmp(x->name, y->name);
}

static void print_sites(summary *s, int (*order)(const void *, const void *), bool traffic)
{
    size_t count = HASH_COUNT(s->sites), shown = 0;
    site **sorted = malloc((count ? count : 1) * sizeof *sorted);
    if (!sorted) return;
    size_t n = 0;
    for (site *x = s->sites; x; x = x->hh.next) sorted[n++] = x;
    qsort(sorted, n, sizeof *sorted, order);
    printf("\ntop call sites by %s\n  %12s %8s  %s\n", traffic ? "swap traffic" : "bytes allocated",
           traffic ? "swapped" : "allocated", traffic ? "swaps" : "count", "call site");
    for (size_t i = 0; i < n && shown < TOP_SITES; i++) {
        uint64_t bytes = traffic ? sorted[i]->swap_bytes : sorted[i]->bytes;
        if (bytes == 0) continue;
        char size[32];
        format_bytes(bytes, size, sizeof size);
        printf("  %12s %8ju  %s\n", size, (uintmax_t)(traffic ? sorted[i]->swaps : sorted[i]->allocations), sorted[i]->name);
        shown++;
    }
    if (shown == 0) printf("  (none)\n");
    free(sorted);
}

static void release(summary *s)
{
    site *x, *xt;
    HASH_ITER(hh, s->sites, x, xt) { HASH_DEL(s->sites, x); free(x->name); free(x); }
    live *l, *lt;
    HASH_ITER(hh, s->lives, l, lt) { HASH_DEL(s->lives, l); free(l); }
    for (size_t i = 0; i < MAX_REASONS; i++) free((char *)s->reasons[i].reason);
}

static void print_swaps(const char *what, uint64_t count, uint64_t bytes, double us)
{
    char size[32];
    format_bytes(bytes, size, sizeof size);
    printf("%-20s %s in %ju copies, %.3f ms", what, size, (uintmax_t)count, us / 1000);
    if (us > 0) printf(" (%.1f GB/s)", bytes / us / 1000);
    printf("\n");
}

int command_summary(int argc, char **argv)
{
    const char *path, *output;
    int status = parse_trace_and_output(argc, argv, "summary TRACE", &path, &output);
    if (status) return status;
    if (output) { print_error("summary: prints to standard output; -o is not used"); return 2; }
    summary *s = calloc(1, sizeof *s);
    trace_settings settings;
    char err[600];
    if (!s) { print_error("out of memory"); return 1; }
    if (trace_read(path, &settings, on_event, s, err, sizeof err) != 0) {
        print_error("%s", err[0] ? err : "out of memory");
        release(s);
        free(s);
        return 1;
    }
    char a[32], b[32], c[32];
    format_bytes(settings.threshold_bytes, a, sizeof a);
    format_bytes(settings.exclude_bytes, b, sizeof b);
    printf("trace of %s (pid %ju): policy %s, mode %s, threshold %s, exclude %s\n", settings.program,
           (uintmax_t)settings.pid, settings.policy, settings.mode, a, b);
    if (s->truncated) printf("warning: the trace reached LMS_TRACE_MAX_MB and stops early; figures cover the part recorded\n");
    printf("%-20s %.3f ms\n", "duration", s->end_us / 1000);
    format_bytes(s->allocated_bytes, a, sizeof a);
    printf("%-20s %ju (%s), %ju freed\n", "allocations", (uintmax_t)s->allocations, a, (uintmax_t)s->frees);
    for (int dev = 0; dev < TRACE_MAX_DEVICES; dev++) {
        device_figures *d = &s->devices[dev];
        if (!d->seen) continue;
        format_bytes(d->peak_demanded, a, sizeof a);
        format_bytes(d->soft_at_peak ? d->soft_at_peak : d->soft_limit, b, sizeof b);
        uint64_t soft = d->soft_at_peak ? d->soft_at_peak : d->soft_limit;
        printf("GPU %d %-14s %s of soft limit %s", dev, "peak demanded", a, b);
        if (soft) printf(" (%.1f %%)", 100.0 * (double)d->peak_demanded / (double)soft);
        printf("\n");
        format_bytes(d->peak_resident, a, sizeof a);
        format_bytes(d->peak_host, c, sizeof c);
        printf("GPU %d %-14s %s\nGPU %d %-14s %s\n", dev, "peak resident", a, dev, "peak host", c);
    }
    print_swaps("swapped out", s->swaps[0], s->swap_bytes[0], s->swap_us[0]);
    print_swaps("swapped in", s->swaps[1], s->swap_bytes[1], s->swap_us[1]);
    printf("%-20s %.3f ms\n", "swap time", (s->swap_us[0] + s->swap_us[1]) / 1000);
    printf("%-20s %ju", "evictions", (uintmax_t)s->evictions);
    for (size_t i = 0; i < MAX_REASONS && s->reasons[i].reason; i++)
        printf("%s%s %ju", i ? ", " : " (", s->reasons[i].reason, (uintmax_t)s->reasons[i].count);
    printf("%s\n", s->reasons[0].reason ? ")" : "");
    format_bytes(s->largest_oom, a, sizeof a);
    printf("%-20s %ju", "out of memory", (uintmax_t)s->ooms);
    if (s->ooms) printf(" (largest request %s)", a);
    printf("\n%-20s %ju\n", "dumps", (uintmax_t)s->dumps);
    print_sites(s, by_bytes, false);
    print_sites(s, by_swap_bytes, true);
    release(s);
    free(s);
    return 0;
}
