#include "preload/graphs.h"

#include "preload/real_driver.h"

#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

/* What one capture, graph or executable graph uses, and the allocations it frees when it
 * runs (freed in a capture). */
typedef struct use_set {
    uint64_t key;          /* a capture's id, or a graph's or executable graph's handle */
    int begun_here;        /* a capture begun through liblms, on origin (origin_thread's own
                            * stream where origin is the per-thread default stream) */
    CUstream origin;
    pthread_t origin_thread;
    lms_graph_ref *refs;
    size_t count, cap;
    uint64_t *frees;
    size_t free_count, free_cap;
    int uses_any;
    int captured;          /* a graph made by capture */
    UT_hash_handle hh;
} use_set;

static use_set *captures, *graphs; /* by capture id; by handle */
static size_t begun;               /* captures with an origin: begun through liblms, not ended */
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;

void lms_graphs_fork_lock(void) { pthread_mutex_lock(&sets_lock); }
void lms_graphs_fork_unlock(void) { pthread_mutex_unlock(&sets_lock); }

static use_set *find(use_set *table, uint64_t key)
{
    use_set *set;
    HASH_FIND(hh, table, &key, sizeof key, set);
    return set;
}

static use_set *find_or_add(use_set **table, uint64_t key)
{
    use_set *set = find(*table, key);
    if (!set && (set = calloc(1, sizeof *set))) {
        set->key = key;
        HASH_ADD(hh, *table, key, sizeof set->key, set);
    }
    return set;
}

static void drop(use_set **table, use_set *set)
{
    HASH_DEL(*table, set);
    free(set->refs);
    free(set->frees);
    free(set);
}

/* Makes room for one more element. Returns 0 when memory is short: that use is missed, and
 * its launches reach the allocation through the host-mapped fallback. */
static int room_for_one(void **array, size_t count, size_t *cap, size_t elem)
{
    if (count < *cap)
        return 1;
    size_t grown_cap = *cap ? *cap * 2 : 16;
    void *grown = realloc(*array, grown_cap * elem);
    if (!grown)
        return 0;
    *array = grown;
    *cap = grown_cap;
    return 1;
}

static void add_ref(use_set *set, lms_graph_ref ref)
{
    if (room_for_one((void **)&set->refs, set->count, &set->cap, sizeof *set->refs))
        set->refs[set->count++] = ref;
}

static int add_free(use_set *set, uint64_t addr)
{
    if (!room_for_one((void **)&set->frees, set->free_count, &set->free_cap, sizeof *set->frees))
        return 0;
    set->frees[set->free_count++] = addr;
    return 1;
}

static void merge(use_set *into, const use_set *from)
{
    into->uses_any |= from->uses_any;
    for (size_t i = 0; i < from->count; i++)
        add_ref(into, from->refs[i]);
    for (size_t i = 0; i < from->free_count; i++)
        add_free(into, from->frees[i]);
}

static int by_ref(const void *x, const void *y)
{
    const lms_graph_ref *a = x, *b = y;
    if (a->addr != b->addr)
        return a->addr < b->addr ? -1 : 1;
    return a->bytes < b->bytes ? -1 : a->bytes > b->bytes;
}

/* Captured calls and scanned nodes repeat the same references: each launch needs them once. */
static void dedupe(use_set *set)
{
    if (set->count < 2)
        return;
    qsort(set->refs, set->count, sizeof *set->refs, by_ref);
    size_t kept = 1;
    for (size_t i = 1; i < set->count; i++)
        if (by_ref(&set->refs[i], &set->refs[kept - 1]) != 0)
            set->refs[kept++] = set->refs[i];
    set->count = kept;
}

/* ---- captures ---- */

/* Whether a capture began on stream, as the calling thread names it. The stream is known by
 * its handle, not by cuStreamGetId: the driver refuses that for a capturing stream and
 * invalidates the capture (measured on the H100, where it broke every capture cuDNN's
 * algorithm search makes). Per-thread default streams share one handle: each is its thread's. */
static int began_on(const use_set *set, CUstream stream)
{
    return set->begun_here && set->origin == stream &&
           (stream != CU_STREAM_PER_THREAD || pthread_equal(set->origin_thread, pthread_self()));
}

/* The id of the capture that stream's work goes into, shared by every stream it forked; 0
 * when none is active. */
static uint64_t capture_id(CUstream stream)
{
    CUstreamCaptureStatus status;
    cuuint64_t id;
    if (!lms_real.cuStreamGetCaptureInfo_v3 ||
        lms_real.cuStreamGetCaptureInfo_v3(stream, &status, &id, NULL, NULL, NULL, NULL) != CUDA_SUCCESS)
        return 0;
    return status == CU_STREAM_CAPTURE_STATUS_ACTIVE ? id : 0;
}

int lms_graph_capturing(CUstream stream)
{
    CUstreamCaptureStatus status;
    if (!stream || stream == CU_STREAM_LEGACY || !lms_real.cuStreamIsCapturing) /* the legacy stream never captures */
        return 0;
    /* A failed query is asked again: a capturing stream taken for an idle one gets liblms's
     * events recorded into its graph, and the graph's launches would hold nothing. */
    CUresult r = lms_real.cuStreamIsCapturing(stream, &status);
    if (r != CUDA_SUCCESS)
        r = lms_real.cuStreamIsCapturing(stream, &status);
    return r == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void lms_graph_captured(CUstream stream, const uint64_t *addrs, size_t count, int uses_any)
{
    uint64_t id = capture_id(stream);
    if (!id)
        return; /* an invalidated capture: it makes no graph */
    pthread_mutex_lock(&sets_lock);
    use_set *set = find_or_add(&captures, id);
    if (set)
        set->uses_any |= uses_any;
    for (size_t i = 0; set && i < count; i++)
        add_ref(set, (lms_graph_ref){ addrs[i], 1 });
    pthread_mutex_unlock(&sets_lock);
}

int lms_graph_captured_free(CUstream stream, uint64_t addr)
{
    uint64_t id = lms_graph_capturing(stream) ? capture_id(stream) : 0;
    if (!id)
        return 0;
    pthread_mutex_lock(&sets_lock);
    use_set *set = find_or_add(&captures, id);
    int kept = set && add_free(set, addr);
    pthread_mutex_unlock(&sets_lock);
    return kept;
}

void lms_graph_capture_begun(CUstream stream)
{
    uint64_t id = capture_id(stream);
    if (!id)
        return;
    pthread_mutex_lock(&sets_lock);
    use_set *set = find_or_add(&captures, id);
    if (set && !set->begun_here) {
        set->begun_here = 1;
        set->origin = stream;
        set->origin_thread = pthread_self();
        begun++;
    }
    pthread_mutex_unlock(&sets_lock);
}

uint64_t lms_graph_capture_of(CUstream stream)
{
    uint64_t id = capture_id(stream);
    if (id)
        return id;
    /* An invalidated capture no longer tells its id: it is found by the stream it began on. */
    pthread_mutex_lock(&sets_lock);
    for (const use_set *set = captures; set && !id; set = set->hh.next)
        if (began_on(set, stream))
            id = set->key;
    pthread_mutex_unlock(&sets_lock);
    return id;
}

void lms_graph_capture_ended(uint64_t capture, CUgraph graph)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find(captures, capture);
    use_set *made = graph ? find_or_add(&graphs, (uint64_t)(uintptr_t)graph) : NULL;
    if (made) {
        made->captured = 1;
        if (set)
            merge(made, set);
        dedupe(made);
    }
    if (set) {
        begun -= set->begun_here;
        drop(&captures, set);
    }
    pthread_mutex_unlock(&sets_lock);
}

int lms_graph_captures_under_way(void)
{
    pthread_mutex_lock(&sets_lock);
    int under_way = begun > 0;
    pthread_mutex_unlock(&sets_lock);
    return under_way;
}

/* ---- graphs and executable graphs ---- */

int lms_graph_made_by_capture(CUgraph graph)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find(graphs, (uint64_t)(uintptr_t)graph);
    int captured = set && set->captured;
    pthread_mutex_unlock(&sets_lock);
    return captured;
}

void lms_graph_instantiated(CUgraph graph, CUgraphExec exec, const lms_graph_ref *refs, size_t count,
                            int uses_any)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find(graphs, (uint64_t)(uintptr_t)exec);
    if (set)
        drop(&graphs, set); /* an update: the new graph's work replaces the old */
    const use_set *from = find(graphs, (uint64_t)(uintptr_t)graph);
    if ((set = find_or_add(&graphs, (uint64_t)(uintptr_t)exec))) {
        if (from)
            merge(set, from);
        set->uses_any |= uses_any;
        for (size_t i = 0; i < count; i++)
            add_ref(set, refs[i]);
        dedupe(set);
    }
    pthread_mutex_unlock(&sets_lock);
}

int lms_graph_each_use(CUgraphExec exec, void (*fn)(void *ctx, const lms_graph_ref *ref), void *ctx)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find(graphs, (uint64_t)(uintptr_t)exec);
    for (size_t i = 0; set && i < set->count; i++)
        fn(ctx, &set->refs[i]);
    int uses_any = set && set->uses_any;
    pthread_mutex_unlock(&sets_lock);
    return uses_any;
}

size_t lms_graph_take_frees(CUgraphExec exec, uint64_t **addrs)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find(graphs, (uint64_t)(uintptr_t)exec);
    size_t count = set ? set->free_count : 0;
    *addrs = set ? set->frees : NULL;
    if (set) {
        set->frees = NULL;
        set->free_count = set->free_cap = 0;
    }
    pthread_mutex_unlock(&sets_lock);
    return count;
}

void lms_graph_forget(const void *graph_or_exec)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find(graphs, (uint64_t)(uintptr_t)graph_or_exec);
    if (set)
        drop(&graphs, set);
    pthread_mutex_unlock(&sets_lock);
}
