/* lms-trace summary: the figures of a run in one readable table. */
#include "tools/commands.h"
#include "tools/trace_read.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#define TOP_SITES 10
#define TOP_LIVE 10
#define SHOWN_DUMPS 3
#define MAX_REASONS 16

typedef struct site {
    char *name;
    uint64_t bytes, allocations;
    uint64_t swap_bytes, swaps;
    UT_hash_handle hh;
} site;

typedef struct live {             /* an allocation, to charge its swaps to its call site */
    uint64_t key[2];              /* device, address */
    uint64_t bytes;
    site *site;
    UT_hash_handle hh;
} live;

typedef struct {
    bool seen;
    uint64_t total, soft_limit;
    uint64_t peak_demanded, soft_at_peak, peak_resident, peak_host;
} device_figures;

typedef struct {                  /* one of the largest allocations a dump lists */
    uint64_t bytes;
    int device;
    bool resident;
    char site[256];
} dumped;

typedef struct {
    uint64_t id;
    char reason[16];
    double ts_us;
    uint64_t count, bytes, resident_bytes;
    dumped largest[TOP_LIVE];     /* by size, largest first */
    size_t largest_count;
} dump;

typedef struct {
    device_figures devices[TRACE_MAX_DEVICES];
    uint64_t allocations, allocated_bytes, frees;
    uint64_t swaps[2], swap_bytes[2];
    double swap_us[2];
    uint64_t stalls;
    double stall_us;
    struct { const char *reason; uint64_t count; } reasons[MAX_REASONS];
    uint64_t evictions, ooms, largest_oom, dumps;
    dump shown[SHOWN_DUMPS];      /* the first dumps, with their largest allocations */
    site *sites;
    live *lives;
} summary;

static site *find_site(summary *s, const trace_event *ev)
{
    char name[256];
    trace_call_site(ev, name, sizeof name);
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

/* The live allocation that holds addr: a piece of a split one (LMS_PIECE_MB) starts inside it. */
static live *live_containing(summary *s, int device, uint64_t addr)
{
    live *l = find_live(s, device, addr);
    for (live *c = s->lives; !l && c; c = c->hh.next)
        if (c->key[0] == (uint64_t)device && c->key[1] < addr && addr - c->key[1] < c->bytes) l = c;
    return l;
}

static void count_reason(summary *s, const char *reason)
{
    size_t i = 0;
    while (i < MAX_REASONS && s->reasons[i].reason && strcmp(s->reasons[i].reason, reason) != 0) i++;
    if (i == MAX_REASONS) i = MAX_REASONS - 1, reason = "other";
    if (!s->reasons[i].reason) s->reasons[i].reason = strdup(reason);
    s->reasons[i].count++;
}

static dump *dump_shown(summary *s, uint64_t id)
{
    for (size_t i = 0; i < SHOWN_DUMPS; i++)
        if (s->shown[i].id == id) return &s->shown[i];
    return NULL;
}

/* Keeps the TOP_LIVE largest allocations of a dump, largest first. */
static void add_live(dump *d, const trace_event *ev)
{
    d->count++;
    d->bytes += ev->bytes;
    if (ev->resident) d->resident_bytes += ev->bytes;
    size_t at = d->largest_count;
    while (at > 0 && d->largest[at - 1].bytes < ev->bytes) at--;
    if (at == TOP_LIVE) return;
    size_t moved = d->largest_count < TOP_LIVE ? d->largest_count - at : TOP_LIVE - 1 - at;
    memmove(&d->largest[at + 1], &d->largest[at], moved * sizeof *d->largest);
    if (d->largest_count < TOP_LIVE) d->largest_count++;
    d->largest[at] = (dumped){ .bytes = ev->bytes, .device = ev->device, .resident = ev->resident };
    trace_call_site(ev, d->largest[at].site, sizeof d->largest[at].site);
}

static int on_event(void *ctx, const trace_event *ev)
{
    summary *s = ctx;
    device_figures *d = &s->devices[ev->device];
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
        site *where = find_site(s, ev);
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
        l->bytes = ev->bytes;
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
        live *l = live_containing(s, ev->device, ev->addr);
        if (l) { l->site->swap_bytes += ev->bytes; l->site->swaps++; }
        break;
    }
    case TRACE_STALL: s->stalls++; s->stall_us += ev->dur_us; break;
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
    case TRACE_DUMP:
        if (s->dumps < SHOWN_DUMPS) {
            dump *shown = &s->shown[s->dumps];
            shown->id = ev->dump;
            shown->ts_us = ev->ts_us;
            snprintf(shown->reason, sizeof shown->reason, "%s", ev->reason);
        }
        s->dumps++;
        break;
    case TRACE_LIVE: {
        dump *shown = dump_shown(s, ev->dump);
        if (shown) add_live(shown, ev);
        break;
    }
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

static void print_dumps(const summary *s)
{
    for (size_t i = 0; i < SHOWN_DUMPS && i < s->dumps; i++) {
        const dump *d = &s->shown[i];
        char all[32], resident[32], host[32], size[32];
        format_bytes(d->bytes, all, sizeof all);
        format_bytes(d->resident_bytes, resident, sizeof resident);
        format_bytes(d->bytes - d->resident_bytes, host, sizeof host);
        printf("\ndump %ju (%s) at %.3f ms: %ju live allocations, %s (%s resident, %s in host memory)\n",
               (uintmax_t)d->id, d->reason, d->ts_us / 1000, (uintmax_t)d->count, all, resident, host);
        if (d->largest_count) printf("  %12s %3s %-8s  %s\n", "bytes", "GPU", "state", "call site");
        for (size_t k = 0; k < d->largest_count; k++) {
            format_bytes(d->largest[k].bytes, size, sizeof size);
            printf("  %12s %3d %-8s  %s\n", size, d->largest[k].device, d->largest[k].resident ? "resident" : "host",
                   d->largest[k].site);
        }
    }
    if (s->dumps > SHOWN_DUMPS) printf("\n(%ju more dumps in the trace)\n", (uintmax_t)(s->dumps - SHOWN_DUMPS));
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
    char size[32], rate[32];
    format_bytes(bytes, size, sizeof size);
    format_bandwidth(bytes, us, rate, sizeof rate);
    printf("%-20s %8ju %11s %12.3f ms %12s\n", what, (uintmax_t)count, size, us / 1000, rate);
}

static void print_ending(const trace_info *info)
{
    char note[512];
    trace_ending_note(info, note, sizeof note);
    if (info->complete && info->signal)
        printf("%-20s killed by SIG%s (signal %d); liblms wrote the trace's end\n", "ended",
               sigabbrev_np(info->signal) ? sigabbrev_np(info->signal) : "?", info->signal);
    else if (info->complete)
        printf("%-20s at exit\n", "ended");
    if (note[0]) printf("warning: %s\n", note);
}

int command_summary(int argc, char **argv)
{
    const char *path, *output;
    int status = parse_trace_and_output(argc, argv, "summary TRACE", &path, &output);
    if (status) return status;
    if (output) { print_error("summary: prints to standard output; -o is not used"); return 2; }
    summary *s = calloc(1, sizeof *s);
    trace_info info;
    char err[600] = "";
    if (!s) { print_error("out of memory"); return 1; }
    if (trace_read(path, &info, on_event, s, err, sizeof err) != 0) {
        print_error("%s", err[0] ? err : "out of memory");
        release(s);
        free(s);
        return 1;
    }
    char a[32], b[32], c[32];
    format_bytes(info.threshold_bytes, a, sizeof a);
    printf("trace of %s (pid %ju)%s%s: policy %s, mode %s, threshold %s\n", info.program, (uintmax_t)info.pid,
           info.liblms[0] ? ", liblms " : "", info.liblms, info.policy, info.mode, a);
    print_ending(&info);
    printf("%-20s %.3f ms\n", "duration", info.last_us / 1000);
    format_bytes(s->allocated_bytes, a, sizeof a);
    printf("%-20s %ju (%s), %ju freed\n", "allocations", (uintmax_t)s->allocations, a, (uintmax_t)s->frees);
    for (int dev = 0; dev < TRACE_MAX_DEVICES; dev++) {
        device_figures *d = &s->devices[dev];
        if (!d->seen) continue;
        if (d->total) {
            format_bytes(d->total, a, sizeof a);
            format_bytes(d->soft_limit, b, sizeof b);
            format_bytes(d->total > d->soft_limit ? d->total - d->soft_limit : 0, c, sizeof c);
            printf("GPU %d %-14s %s, soft limit %s (%s left out)\n", dev, "memory", a, b, c);
        }
        uint64_t soft = d->soft_at_peak ? d->soft_at_peak : d->soft_limit;
        format_bytes(d->peak_demanded, a, sizeof a);
        format_bytes(soft, b, sizeof b);
        printf("GPU %d %-14s %s of soft limit %s", dev, "peak demanded", a, b);
        if (soft) printf(" (%.1f %%)", 100.0 * (double)d->peak_demanded / (double)soft);
        printf("\n");
        format_bytes(d->peak_resident, a, sizeof a);
        format_bytes(d->peak_host, c, sizeof c);
        printf("GPU %d %-14s %s\nGPU %d %-14s %s\n", dev, "peak resident", a, dev, "peak host", c);
    }
    printf("%-20s %8s %11s %15s %12s\n", "", "count", "bytes", "time", "bandwidth");
    print_swaps("swapped out", s->swaps[0], s->swap_bytes[0], s->swap_us[0]);
    print_swaps("swapped in", s->swaps[1], s->swap_bytes[1], s->swap_us[1]);
    printf("%-20s %8ju %11s %12.3f ms %9.1f %% of the run\n", "restore stalls", (uintmax_t)s->stalls, "",
           s->stall_us / 1000, info.last_us > 0 ? 100 * s->stall_us / info.last_us : 0.0);
    printf("%-20s %ju", "evictions", (uintmax_t)s->evictions);
    for (size_t i = 0; i < MAX_REASONS && s->reasons[i].reason; i++)
        printf("%s%s %ju", i ? ", " : " (", s->reasons[i].reason, (uintmax_t)s->reasons[i].count);
    printf("%s\n", s->reasons[0].reason ? ")" : "");
    format_bytes(s->largest_oom, a, sizeof a);
    printf("%-20s %ju", "out of memory", (uintmax_t)s->ooms);
    if (s->ooms) printf(" (largest request %s)", a);
    printf("\n%-20s %ju\n", "dumps", (uintmax_t)s->dumps);
    print_dumps(s);
    print_sites(s, by_bytes, false);
    print_sites(s, by_swap_bytes, true);
    release(s);
    free(s);
    return 0;
}
