/* lms-trace tune: replays the recorded launches through policy/ for a grid of settings.
 *
 * The model is the library's: an allocation of at least LMS_THRESHOLD_KB is cached (it may be
 * evicted, and takes whole 2 MiB units of device memory, the VMM granularity); a smaller one
 * stays resident. With LMS_PIECE_MB (the trace's piece_bytes) an allocation is split as the
 * library splits it: pieces at consecutive addresses, every piece_bytes rounded up to the
 * granularity, each charged, evicted and restored alone. Each device's cache holds its total memory minus LMS_EXCLUDE_MB. Creating an
 * allocation, or restoring one a launch uses, first evicts the victims the policy chooses
 * (never one the same launch uses); the policy hears of a launch's uses after its restores, as
 * in the library. Every policy in lms_policy_names is replayed unless --policy names some. Swap
 * traffic is the bytes of the allocations moved; the stall is the restores' bytes over the
 * swap-in bandwidth measured in the trace (or 55 GB/s, pinned copies on an H100, when the run
 * swapped nothing in). The whole grid is replayed in one pass over the trace.
 *
 * Less memory left out of the cache always replays as less traffic, since the replay cannot see
 * the device memory liblms does not manage: the CUDA context, the kernels of the libraries
 * loaded at their first use, cuBLAS's and cuDNN's own buffers, other processes. So by default
 * the grid leaves out at least HEADROOM (1/16 of the device's memory when that is less), and
 * the recommendation says so. */
#include "tools/commands.h"
#include "tools/trace_read.h"
#include "policy/policy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#define GRANULARITY (2ull << 20)
#define MAX_GRID 16
#define MAX_VICTIMS 64
#define DEFAULT_GIBPS 51.2       /* 55 GB/s */
#define MiB (1ull << 20)
#define HEADROOM (1024 * MiB)

typedef struct setting {
    const char *policy_name;
    uint64_t threshold_bytes, exclude_bytes;
    lms_policy *policies[TRACE_MAX_DEVICES];  /* one per device, made on first use */
    uint64_t resident[TRACE_MAX_DEVICES];
    uint64_t out_bytes, in_bytes, evictions, restores, ooms;
} setting;

/* An allocation, or one piece of a split one. */
typedef struct allocation {
    uint64_t key[2];                          /* device, address */
    uint64_t bytes;                           /* its own */
    uint64_t alloc_bytes;                     /* the whole allocation's: whether it is cached */
    bool *evicted;                            /* [setting count] */
    UT_hash_handle hh;
} allocation;

typedef struct {
    int pass;
    uint64_t total[TRACE_MAX_DEVICES];        /* device memory, from lms.device */
    uint64_t left_out[TRACE_MAX_DEVICES];     /* what the run left out of its cache */
    bool seen[TRACE_MAX_DEVICES];
    uint64_t piece;                           /* LMS_PIECE_MB rounded up to the granularity; 0: none */
    uint64_t recorded_out, recorded_in;
    double recorded_in_us;
    uint64_t partial_step, partial_left_out;  /* the first launch whose uses the trace did not all list */
    setting *settings;
    size_t setting_count;
    allocation *allocations;
    const json_value *keep;                   /* the uses of the launch being replayed */
    bool failed;
} replay;

static uint64_t padded(uint64_t bytes) { return (bytes + GRANULARITY - 1) / GRANULARITY * GRANULARITY; }

static bool cached(const setting *s, const allocation *a) { return a->alloc_bytes >= s->threshold_bytes; }

static uint64_t charge(const setting *s, const allocation *a) { return cached(s, a) ? padded(a->bytes) : a->bytes; }

/* Where an allocation of `bytes` puts its pieces: every `step` bytes from its start. */
static uint64_t piece_step(const replay *r, uint64_t bytes)
{
    return r->piece && r->piece < padded(bytes) ? r->piece : padded(bytes);
}

static uint64_t capacity(const replay *r, const setting *s, int dev)
{
    return r->total[dev] > s->exclude_bytes ? r->total[dev] - s->exclude_bytes : 0;
}

static lms_policy *policy_of(replay *r, setting *s, int dev)
{
    if (!s->policies[dev] && !(s->policies[dev] = lms_policy_create(s->policy_name))) r->failed = true;
    return s->policies[dev];
}

static allocation *find(replay *r, int dev, uint64_t addr)
{
    uint64_t key[2] = { (uint64_t)dev, addr };
    allocation *a;
    HASH_FIND(hh, r->allocations, key, sizeof key, a);
    return a;
}

static int keep_used(void *ctx, lms_alloc_id id)
{
    const replay *r = ctx;
    for (size_t i = 0; r->keep && i < r->keep->count; i++) {
        uint64_t addr;
        if (json_as_u64(&r->keep->items[i], &addr) && addr == id) return 1;
    }
    return 0;
}

/* Evicts until `need` more bytes fit on `dev`; false when the policy has nothing left. */
static bool make_room(replay *r, size_t si, int dev, uint64_t need)
{
    setting *s = &r->settings[si];
    lms_policy *policy = policy_of(r, s, dev);
    uint64_t limit = capacity(r, s, dev);
    while (policy && s->resident[dev] + need > limit) {
        lms_alloc_id victims[MAX_VICTIMS];
        size_t n = lms_policy_choose_victims(policy, s->resident[dev] + need - limit, keep_used, r, victims, MAX_VICTIMS);
        if (n == 0) return false;
        for (size_t i = 0; i < n; i++) {
            allocation *a = find(r, dev, victims[i]);
            if (!a || a->evicted[si]) { r->failed = true; return false; }
            a->evicted[si] = true;
            s->resident[dev] -= charge(s, a);
            s->out_bytes += a->bytes;
            s->evictions++;
            lms_policy_evicted(policy, victims[i]);
        }
    }
    return policy != NULL;
}

/* A new allocation's piece at `offset` (all of it, unsplit), made room for as the library does. */
static void add_piece(replay *r, const trace_event *ev, uint64_t offset, uint64_t bytes)
{
    allocation *a = find(r, ev->device, ev->addr + offset);
    if (a) { r->failed = true; return; }      /* allocated twice without a free */
    if (!(a = calloc(1, sizeof *a)) || !(a->evicted = calloc(r->setting_count, sizeof *a->evicted))) {
        free(a);
        r->failed = true;
        return;
    }
    a->key[0] = (uint64_t)ev->device;
    a->key[1] = ev->addr + offset;
    a->bytes = bytes;
    a->alloc_bytes = ev->bytes;
    HASH_ADD(hh, r->allocations, key, sizeof a->key, a);
    r->keep = NULL;
    for (size_t si = 0; si < r->setting_count; si++) {
        setting *s = &r->settings[si];
        uint64_t c = charge(s, a);
        if (!make_room(r, si, ev->device, c)) s->ooms++;
        s->resident[ev->device] += c;
        if (cached(s, a) && policy_of(r, s, ev->device)) lms_policy_created(s->policies[ev->device], a->key[1], c);
    }
}

static void replay_alloc(replay *r, const trace_event *ev)
{
    uint64_t step = piece_step(r, ev->bytes);
    for (uint64_t offset = 0; offset < ev->bytes && !r->failed; offset += step)
        add_piece(r, ev, offset, ev->bytes - offset < step ? ev->bytes - offset : step);
}

static void replay_free(replay *r, const trace_event *ev)
{
    uint64_t step = piece_step(r, ev->bytes);
    for (uint64_t offset = 0; offset < ev->bytes; offset += step) {
        allocation *a = find(r, ev->device, ev->addr + offset);
        if (!a) return;                       /* made before the trace started */
        for (size_t si = 0; si < r->setting_count; si++) {
            setting *s = &r->settings[si];
            if (!a->evicted[si]) s->resident[ev->device] -= charge(s, a);
            if (cached(s, a) && s->policies[ev->device]) lms_policy_freed(s->policies[ev->device], a->key[1]);
        }
        HASH_DEL(r->allocations, a);
        free(a->evicted);
        free(a);
    }
}

/* The cached allocation a launch used, on whichever device holds it; NULL for another. */
static allocation *used_allocation(replay *r, const setting *s, const json_value *use)
{
    uint64_t addr;
    allocation *a = NULL;
    for (int dev = 0; dev < TRACE_MAX_DEVICES && !a && json_as_u64(use, &addr); dev++)
        if (r->seen[dev]) a = find(r, dev, addr);
    return a && cached(s, a) ? a : NULL;
}

/* As the library does: first every evicted allocation the launch uses is restored (making room
 * never evicts another it uses), then the policy is told of each use. */
static void replay_launch(replay *r, const trace_event *ev)
{
    r->keep = ev->uses;
    for (size_t si = 0; si < r->setting_count; si++) {
        setting *s = &r->settings[si];
        for (size_t i = 0; i < ev->uses->count; i++) {
            allocation *a = used_allocation(r, s, &ev->uses->items[i]);
            if (!a || !a->evicted[si]) continue;
            int dev = (int)a->key[0];
            if (!make_room(r, si, dev, charge(s, a))) s->ooms++;
            a->evicted[si] = false;
            s->resident[dev] += charge(s, a);
            s->in_bytes += a->bytes;
            s->restores++;
            lms_policy_restored(s->policies[dev], a->key[1]);
        }
        for (size_t i = 0; i < ev->uses->count; i++) {
            allocation *a = used_allocation(r, s, &ev->uses->items[i]);
            if (a) lms_policy_used(s->policies[a->key[0]], a->key[1], ev->step);
        }
    }
    r->keep = NULL;
}

static int on_event(void *ctx, const trace_event *ev)
{
    replay *r = ctx;
    if (r->pass == 1) {
        switch (ev->kind) {
        case TRACE_DEVICE:
            r->total[ev->device] = ev->total_bytes;
            r->left_out[ev->device] = ev->total_bytes > ev->soft_limit ? ev->total_bytes - ev->soft_limit : 0;
            r->seen[ev->device] = true;
            break;
        case TRACE_ALLOC: r->seen[ev->device] = true; break;
        case TRACE_SWAP_OUT: r->recorded_out += ev->bytes; break;
        case TRACE_SWAP_IN: r->recorded_in += ev->bytes; r->recorded_in_us += ev->dur_us; break;
        case TRACE_LAUNCH:
            if (ev->uses_left_out && !r->partial_left_out) {
                r->partial_step = ev->step;
                r->partial_left_out = ev->uses_left_out;
            }
            break;
        default: break;
        }
        return 0;
    }
    switch (ev->kind) {
    case TRACE_ALLOC: replay_alloc(r, ev); break;
    case TRACE_FREE: replay_free(r, ev); break;
    case TRACE_LAUNCH: replay_launch(r, ev); break;
    default: break;
    }
    return r->failed ? -1 : 0;
}

/* "64,256,1000" into values (times `unit`); false after printing an error. */
static bool parse_list(const char *flag, const char *text, uint64_t unit, uint64_t *values, size_t *count)
{
    *count = 0;
    for (const char *p = text; *p;) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || (*end && *end != ',') || errno || *p == '-' || v > UINT64_MAX / unit || *count == MAX_GRID) {
            print_error("tune: %s %s: expected up to %d comma-separated non-negative integers", flag, text, MAX_GRID);
            return false;
        }
        values[(*count)++] = v * unit;
        p = *end ? end + 1 : end;
    }
    if (*count == 0) { print_error("tune: %s wants at least one value", flag); return false; }
    return true;
}

static void add_unique(uint64_t *values, size_t *count, uint64_t v)
{
    for (size_t i = 0; i < *count; i++) if (values[i] == v) return;
    if (*count < MAX_GRID) values[(*count)++] = v;
}

static void release(replay *r)
{
    allocation *a, *tmp;
    HASH_ITER(hh, r->allocations, a, tmp) { HASH_DEL(r->allocations, a); free(a->evicted); free(a); }
    for (size_t si = 0; si < r->setting_count; si++)
        for (int dev = 0; dev < TRACE_MAX_DEVICES; dev++)
            if (r->settings[si].policies[dev]) lms_policy_destroy(r->settings[si].policies[dev]);
    free(r->settings);
}

static const char usage[] = "tune TRACE [--threshold-kb N,N,...] [--exclude-mb N,N,...] [--policy NAME,...]";

/* "1000 KiB", "512 MiB": sizes of the grid, whole in their unit. */
static void format_setting(uint64_t bytes, uint64_t unit, char *buf, size_t len)
{
    snprintf(buf, len, "%ju %s", (uintmax_t)(bytes / unit), unit == MiB ? "MiB" : "KiB");
}

int command_tune(int argc, char **argv)
{
    const char *path = NULL, *thresholds_text = NULL, *excludes_text = NULL, *policies_text = NULL;
    for (int i = 1; i < argc; i++) {
        const char **flag = strcmp(argv[i], "--threshold-kb") == 0 ? &thresholds_text
                          : strcmp(argv[i], "--exclude-mb") == 0 ? &excludes_text
                          : strcmp(argv[i], "--policy") == 0 ? &policies_text : NULL;
        if (flag && i + 1 < argc) *flag = argv[++i];
        else if (argv[i][0] == '-' || path) { print_error("tune: unexpected argument %s\nusage: lms-trace %s", argv[i], usage); return 2; }
        else path = argv[i];
    }
    if (!path) { print_error("tune: no trace given\nusage: lms-trace %s", usage); return 2; }

    uint64_t thresholds[MAX_GRID], excludes[MAX_GRID];
    size_t threshold_count = 0, exclude_count = 0;
    if ((thresholds_text && !parse_list("--threshold-kb", thresholds_text, 1024, thresholds, &threshold_count)) ||
        (excludes_text && !parse_list("--exclude-mb", excludes_text, MiB, excludes, &exclude_count)))
        return 2;
    const char *policies[MAX_GRID];
    size_t policy_count = 0;
    char policy_list[256];
    snprintf(policy_list, sizeof policy_list, "%s", policies_text ? policies_text : "");
    for (char *save = NULL, *name = strtok_r(policy_list, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        lms_policy *probe = lms_policy_create(name);
        if (!probe) {
            char known[256] = "";
            for (size_t i = 0; lms_policy_names[i]; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", lms_policy_names[i]);
            print_error("tune: --policy %s: unknown policy (known: %s)", name, known);
            return 2;
        }
        lms_policy_destroy(probe);
        if (policy_count < MAX_GRID) policies[policy_count++] = name;
    }
    if (policies_text && policy_count == 0) { print_error("tune: --policy wants at least one name"); return 2; }
    for (size_t i = 0; !policies_text && lms_policy_names[i] && policy_count < MAX_GRID; i++) policies[policy_count++] = lms_policy_names[i];

    replay r = { .pass = 1 };
    trace_info info;
    char err[600] = "";
    if (trace_read(path, &info, on_event, &r, err, sizeof err) != 0) { print_error("%s", err); return 1; }
    if (!info.uses) {
        print_error("%s: recorded without LMS_TRACE_USES=1, so it holds no launches to replay", path);
        return 1;
    }
    if (r.partial_left_out) {
        /* A replay without them would keep out of memory what the launch needed. */
        print_error("%s: the launch at step %ju leaves %ju of its uses out (the trace lists a limited number per "
                    "launch), so no replay can know what it needed: record with a larger LMS_PIECE_MB",
                    path, (uintmax_t)r.partial_step, (uintmax_t)r.partial_left_out);
        return 1;
    }
    r.piece = info.piece_bytes ? padded(info.piece_bytes) : 0;
    uint64_t smallest_total = UINT64_MAX;
    for (int dev = 0; dev < TRACE_MAX_DEVICES; dev++)
        if (r.seen[dev] && r.total[dev] < smallest_total) smallest_total = r.total[dev];
    if (smallest_total == UINT64_MAX || smallest_total == 0) {
        print_error("%s: no lms.device event gives the device memory; nothing to replay", path);
        return 1;
    }
    uint64_t headroom = excludes_text ? 0 : smallest_total / 16 < HEADROOM ? smallest_total / 16 : HEADROOM;
    if (!thresholds_text) {
        static const uint64_t kb[] = { 64, 256, 1000, 4096, 16384 };
        for (size_t i = 0; i < sizeof kb / sizeof *kb; i++) add_unique(thresholds, &threshold_count, kb[i] << 10);
        add_unique(thresholds, &threshold_count, info.threshold_bytes);
    }
    if (!excludes_text) {
        static const uint64_t mb[] = { 256, 512, 1024, 2048, 4096, 8192 };
        add_unique(excludes, &exclude_count, headroom);
        for (size_t i = 0; i < sizeof mb / sizeof *mb; i++)
            if (mb[i] * MiB > headroom && mb[i] * MiB < smallest_total) add_unique(excludes, &exclude_count, mb[i] * MiB);
        for (int dev = 0; dev < TRACE_MAX_DEVICES; dev++)
            if (r.seen[dev] && r.total[dev] && r.left_out[dev] < smallest_total)
                add_unique(excludes, &exclude_count, r.left_out[dev]);
    }

    r.setting_count = policy_count * threshold_count * exclude_count;
    if (!(r.settings = calloc(r.setting_count, sizeof *r.settings))) { print_error("out of memory"); return 1; }
    size_t n = 0;
    for (size_t p = 0; p < policy_count; p++)
        for (size_t t = 0; t < threshold_count; t++)
            for (size_t e = 0; e < exclude_count; e++)
                r.settings[n++] = (setting){ .policy_name = policies[p], .threshold_bytes = thresholds[t],
                                             .exclude_bytes = excludes[e] };
    r.pass = 2;
    if (trace_read(path, &info, on_event, &r, err, sizeof err) != 0 || r.failed) {
        print_error("%s", err[0] ? err : "replay failed: the trace's allocations are inconsistent (allocated twice, or out of memory)");
        release(&r);
        return 1;
    }

    double bytes_per_us = r.recorded_in_us > 0 ? r.recorded_in / r.recorded_in_us : DEFAULT_GIBPS * 1073741824.0 / 1e6;
    char out[32], in[32], threshold[32], exclude[32], rate[32];
    format_bytes(r.recorded_out, out, sizeof out);
    format_bytes(r.recorded_in, in, sizeof in);
    format_setting(info.threshold_bytes, 1024, threshold, sizeof threshold);
    printf("recorded run: policy %s, threshold %s: swapped out %s, in %s\n", info.policy, threshold, out, in);
    for (int dev = 0; dev < TRACE_MAX_DEVICES; dev++)
        if (r.seen[dev] && r.total[dev]) {
            format_bytes(r.total[dev], out, sizeof out);
            format_setting(r.left_out[dev], MiB, exclude, sizeof exclude);
            printf("GPU %d: %s, %s left out of the cache\n", dev, out, exclude);
        }
    char note[512];
    trace_ending_note(&info, note, sizeof note);
    if (note[0]) printf("warning: %s\n", note);
    format_bandwidth((uint64_t)(bytes_per_us * 1e6), 1e6, rate, sizeof rate);
    printf("stalls assume %s for restores (%s)\n\n", rate, r.recorded_in_us > 0 ? "measured in this trace" : "no swap-in recorded");
    printf("%-10s %12s %10s %12s %12s %9s %9s %10s %5s\n", "policy", "threshold", "exclude", "swap out", "swap in",
           "evictions", "restores", "stall ms", "OOM");
    const setting *best = NULL;
    for (size_t i = 0; i < r.setting_count; i++) {
        const setting *s = &r.settings[i];
        format_bytes(s->out_bytes, out, sizeof out);
        format_bytes(s->in_bytes, in, sizeof in);
        format_setting(s->threshold_bytes, 1024, threshold, sizeof threshold);
        format_setting(s->exclude_bytes, MiB, exclude, sizeof exclude);
        printf("%-10s %12s %10s %12s %12s %9ju %9ju %10.3f %5ju\n", s->policy_name, threshold, exclude, out, in,
               (uintmax_t)s->evictions, (uintmax_t)s->restores, s->in_bytes / bytes_per_us / 1e3, (uintmax_t)s->ooms);
        /* Least traffic wins among the settings that keep the headroom; on a tie, more memory
         * left outside the cache, then the larger threshold (fewer mappings). */
        if (s->ooms || s->exclude_bytes < headroom) continue;
        uint64_t traffic = s->out_bytes + s->in_bytes, best_traffic = best ? best->out_bytes + best->in_bytes : 0;
        if (!best || traffic < best_traffic ||
            (traffic == best_traffic && (s->exclude_bytes > best->exclude_bytes ||
                                         (s->exclude_bytes == best->exclude_bytes && s->threshold_bytes > best->threshold_bytes))))
            best = s;
    }
    if (best) {
        format_bytes(best->out_bytes + best->in_bytes, out, sizeof out);
        printf("\nrecommended: LMS_POLICY=%s LMS_THRESHOLD_KB=%ju LMS_EXCLUDE_MB=%ju (predicted swap traffic %s, stall %.3f ms)\n",
               best->policy_name, (uintmax_t)(best->threshold_bytes >> 10), (uintmax_t)(best->exclude_bytes / MiB), out,
               best->in_bytes / bytes_per_us / 1e3);
        if (headroom) {
            format_setting(headroom, MiB, exclude, sizeof exclude);
            printf("headroom: at least %s stays out of the cache for the device memory liblms does not see (the\n"
                   "CUDA context, the libraries' kernels and workspaces, other processes), which the replay cannot\n"
                   "count: it would always prefer less; --exclude-mb tries smaller values\n", exclude);
        }
    } else {
        printf("\nno setting in the grid avoids running out of memory: the working set of one launch is larger than the device\n");
    }
    release(&r);
    return 0;
}
