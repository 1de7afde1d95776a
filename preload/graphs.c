#include "preload/graphs.h"

#include "preload/hooks.h"

#include <pthread.h>
#include <stdlib.h>
#include <uthash.h>

/* The allocations used by one capture, graph or executable graph, keyed by its handle. */
typedef struct use_set {
    const void *key;
    uint64_t *addrs;
    size_t count, cap;
    int uses_any;
    UT_hash_handle hh;
} use_set;

static use_set *sets;
static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;

void lms_graphs_fork_lock(void) { pthread_mutex_lock(&sets_lock); }
void lms_graphs_fork_unlock(void) { pthread_mutex_unlock(&sets_lock); }

static use_set *find(const void *key)
{
    use_set *set;
    HASH_FIND_PTR(sets, &key, set);
    return set;
}

static use_set *find_or_add(const void *key)
{
    use_set *set = find(key);
    if (!set && (set = calloc(1, sizeof *set))) {
        set->key = key;
        HASH_ADD_PTR(sets, key, set);
    }
    return set;
}

static void add(use_set *set, uint64_t addr)
{
    for (size_t i = 0; i < set->count; i++)
        if (set->addrs[i] == addr)
            return;
    if (set->count == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 16;
        uint64_t *grown = realloc(set->addrs, cap * sizeof *grown);
        if (!grown)
            return; /* missed: its launches reach it through the host-mapped fallback */
        set->addrs = grown;
        set->cap = cap;
    }
    set->addrs[set->count++] = addr;
}

static void drop(use_set *set)
{
    HASH_DEL(sets, set);
    free(set->addrs);
    free(set);
}

int lms_graph_capturing(CUstream stream)
{
    CUstreamCaptureStatus status;
    if (!stream || stream == CU_STREAM_LEGACY) /* the legacy stream never captures */
        return 0;
    return lms_real.cuStreamIsCapturing && lms_real.cuStreamIsCapturing(stream, &status) == CUDA_SUCCESS &&
           status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void lms_graph_captured(CUstream stream, const uint64_t *addrs, size_t count, int uses_any)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find_or_add(stream);
    if (set)
        set->uses_any |= uses_any;
    for (size_t i = 0; set && i < count; i++)
        add(set, addrs[i]);
    pthread_mutex_unlock(&sets_lock);
}

/* Moves (or copies) the set of `from` to `to`. */
static void pass_on(const void *from, const void *to, int keep_from)
{
    pthread_mutex_lock(&sets_lock);
    use_set *src = find(from), *dst = src ? find_or_add(to) : NULL;
    if (dst)
        dst->uses_any |= src->uses_any;
    for (size_t i = 0; dst && i < src->count; i++)
        add(dst, src->addrs[i]);
    if (src && !keep_from)
        drop(src);
    pthread_mutex_unlock(&sets_lock);
}

void lms_graph_capture_ended(CUstream stream, CUgraph graph) { pass_on(stream, graph, 0); }

void lms_graph_instantiated(CUgraph graph, CUgraphExec exec) { pass_on(graph, exec, 1); }

int lms_graph_each_use(CUgraphExec exec, void (*fn)(void *ctx, uint64_t addr), void *ctx)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find(exec);
    for (size_t i = 0; set && i < set->count; i++)
        fn(ctx, set->addrs[i]);
    int uses_any = set && set->uses_any;
    pthread_mutex_unlock(&sets_lock);
    return uses_any;
}

void lms_graph_forget(const void *graph_or_exec)
{
    pthread_mutex_lock(&sets_lock);
    use_set *set = find(graph_or_exec);
    if (set)
        drop(set);
    pthread_mutex_unlock(&sets_lock);
}
