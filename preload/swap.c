#include "preload/swap.h"

#include "preload/graphs.h"
#include "preload/real_driver.h"
#include "preload/log.h"
#include "preload/stats.h"
#include "preload/trace.h"

#include <pthread.h>
#include <stdlib.h>

struct lms_backing {
    size_t bytes;
    int device;
    CUmemGenericAllocationHandle handle; /* host VMM */
    CUdeviceptr stage;                   /* host VMM: its own mapping, for copies */
    void *pinned;                        /* without host VMM */
    CUevent done;                        /* recorded after the last copy that reads or writes it */
    CUstream last;                       /* the stream of that copy */
    lms_backing *next;                   /* in the pool */
};

/* Free backing of every device, and the bytes of backing that hold evicted allocations, that
 * are pooled, and that are being made (lms_swap_backing_reserve to lms_swap_backing_add).
 * Every device's threads share them, under pool_lock: held only while the list and the
 * counts change, never across a driver call. */
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static lms_backing *pool;
static size_t in_use, pooled, coming;

size_t lms_swap_host_bytes(void)
{
    pthread_mutex_lock(&pool_lock);
    size_t bytes = in_use + pooled;
    pthread_mutex_unlock(&pool_lock);
    return bytes;
}

void lms_swap_fork_lock(void) { pthread_mutex_lock(&pool_lock); }
void lms_swap_fork_unlock(void) { pthread_mutex_unlock(&pool_lock); }

/* A failed wait is no proof that the work is done. It is tried once more (a passing failure
 * then succeeds; a failed context, whose work never ends, fails again), and then the whole
 * context is drained, unless a stream captures: the driver would refuse that, and invalidate
 * the capture. */
static void drain_context(void)
{
    if (!lms_graph_captures_under_way())
        lms_real.cuCtxSynchronize();
}

/* Whatever fails, work queued on stream no longer runs when this returns. */
static void drain(CUstream stream)
{
    if (lms_real.cuStreamSynchronize(stream) != CUDA_SUCCESS &&
        lms_real.cuStreamSynchronize(stream) != CUDA_SUCCESS)
        drain_context();
}

/* Waits for the work before event's last record. */
static void wait_event(CUevent event)
{
    if (lms_real.cuEventSynchronize(event) != CUDA_SUCCESS &&
        lms_real.cuEventSynchronize(event) != CUDA_SUCCESS)
        drain_context();
}

/* Records *event (made on first use) on stream. */
static CUresult record(CUevent *event, CUstream stream)
{
    if (!*event) {
        CUresult r = lms_real.cuEventCreate(event, CU_EVENT_DISABLE_TIMING);
        if (r != CUDA_SUCCESS) {
            *event = NULL;
            return r;
        }
    }
    return lms_real.cuEventRecord(*event, stream);
}

/* ---- copy streams ---- */

/* At the default priority: the streams carry only copies between host and device (and waits
 * for events), and cuda.h says of cuStreamCreateWithPriority that priorities have no effect on
 * those; only kernels are scheduled by them. */
CUresult lms_swap_streams_create(lms_device *dev)
{
    CUresult r = lms_real.cuCtxGetCurrent(&dev->ctx);
    CUstream *streams[] = { &dev->copy_in, &dev->copy_out, &dev->waits };
    size_t made = 0;
    while (r == CUDA_SUCCESS && made < sizeof streams / sizeof *streams &&
           (r = lms_real.cuStreamCreate(streams[made], CU_STREAM_NON_BLOCKING)) == CUDA_SUCCESS)
        made++;
    if (r == CUDA_SUCCESS)
        r = lms_real.cuEventCreate(&dev->waited, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS) {
        while (made > 0)
            lms_real.cuStreamDestroy_v2(*streams[--made]);
        dev->copy_in = dev->copy_out = dev->waits = NULL;
        dev->waited = NULL;
    }
    return r;
}

void lms_swap_streams_destroy(lms_device *dev, int gone)
{
    if (!gone && dev->copy_in) {
        lms_real.cuStreamDestroy_v2(dev->copy_in);
        lms_real.cuStreamDestroy_v2(dev->copy_out);
        lms_real.cuStreamDestroy_v2(dev->waits);
        lms_real.cuEventDestroy_v2(dev->waited);
    }
    dev->copy_in = dev->copy_out = dev->waits = NULL;
    dev->waited = NULL;
    dev->ctx = NULL;
}

CUresult lms_swap_out_mark(lms_device *dev, const lms_block *a, CUevent *mark)
{
    const lms_backing *b = a->back;
    CUresult r = b->done ? lms_real.cuStreamWaitEvent(dev->waits, b->done, 0) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS)
        r = lms_real.cuEventRecord(dev->waited, dev->waits);
    *mark = dev->waited;
    return r;
}

/* Read/write access for the device and for every device that can reach it as a peer, as
 * cuMemAlloc memory is reachable from peers. Returns how many descriptors. */
static unsigned access_of(int device, CUmemAccessDesc *access)
{
    int count = 0, can;
    unsigned n = 0;
    access[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, device }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    if (lms_real.cuDeviceGetCount(&count) != CUDA_SUCCESS)
        count = 0;
    for (int d = 0; d < count && d < LMS_MAX_DEVICES; d++)
        if (d != device && lms_real.cuDeviceCanAccessPeer(&can, d, device) == CUDA_SUCCESS && can)
            access[n++] = (CUmemAccessDesc){ { CU_MEM_LOCATION_TYPE_DEVICE, d },
                                             CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    return n;
}

CUresult lms_swap_map(CUdeviceptr addr, size_t bytes, CUmemGenericAllocationHandle handle, int device)
{
    CUresult r = lms_real.cuMemMap(addr, bytes, 0, handle, 0);
    if (r != CUDA_SUCCESS)
        return r;
    CUmemAccessDesc access[LMS_MAX_DEVICES];
    r = lms_real.cuMemSetAccess(addr, bytes, access, access_of(device, access));
    if (r != CUDA_SUCCESS)
        lms_real.cuMemUnmap(addr, bytes);
    return r;
}

/* ---- host backing: one pool, recycled by size and device, trimmed to LMS_HOST_LIMIT_MB ---- */

CUresult lms_swap_backing_reserve(int device, size_t bytes, lms_backing **unwanted)
{
    size_t limit = lms_opt.HOST_LIMIT_MB.value;
    pthread_mutex_lock(&pool_lock);
    size_t would_use = in_use + coming + bytes;
    if (would_use > limit) {
        pthread_mutex_unlock(&pool_lock);
        lms_log(LMS_LOG_ERROR, device,
                "out of memory: host backing in use would grow to %zu bytes, past LMS_HOST_LIMIT_MB "
                "(%zu bytes)",
                would_use, limit);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *unwanted = NULL;
    while (in_use + pooled + coming + bytes > limit) {
        lms_backing *b = pool;
        pool = b->next;
        pooled -= b->bytes;
        b->next = *unwanted;
        *unwanted = b;
    }
    coming += bytes;
    pthread_mutex_unlock(&pool_lock);
    return CUDA_SUCCESS;
}

static CUresult create_backing(lms_device *dev, int d, lms_backing *b)
{
    if (!dev->host_vmm)
        return lms_real.cuMemHostAlloc(&b->pinned, b->bytes, 0);
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_HOST, 0 } };
    CUresult r = lms_real.cuMemCreate(&b->handle, b->bytes, &prop, 0);
    if (r != CUDA_SUCCESS)
        return r;
    if ((r = lms_real.cuMemAddressReserve(&b->stage, b->bytes, dev->granularity, 0, 0)) != CUDA_SUCCESS) {
        lms_real.cuMemRelease(b->handle);
        return r;
    }
    if ((r = lms_swap_map(b->stage, b->bytes, b->handle, d)) != CUDA_SUCCESS) {
        lms_real.cuMemAddressFree(b->stage, b->bytes);
        lms_real.cuMemRelease(b->handle);
    }
    return r;
}

/* A copy may still read or write it: the memory goes only after that. */
static void release_backing(lms_backing *b)
{
    if (b->done) {
        wait_event(b->done);
        lms_real.cuEventDestroy_v2(b->done);
    }
    if (b->pinned) {
        lms_real.cuMemFreeHost(b->pinned);
    } else {
        lms_real.cuMemUnmap(b->stage, b->bytes);
        lms_real.cuMemAddressFree(b->stage, b->bytes);
        lms_real.cuMemRelease(b->handle);
    }
    free(b);
}

CUresult lms_swap_backing_create(lms_device *dev, int device, size_t bytes, lms_backing *unwanted,
                                 lms_backing **out)
{
    while (unwanted) {
        lms_backing *next = unwanted->next;
        release_backing(unwanted);
        unwanted = next;
    }
    lms_backing *b = calloc(1, sizeof *b);
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *b = (lms_backing){ .bytes = bytes, .device = device };
    CUresult r = create_backing(dev, device, b);
    if (r != CUDA_SUCCESS) {
        free(b);
        b = NULL;
    }
    *out = b;
    return r;
}

void lms_swap_backing_add(size_t bytes, lms_backing *b)
{
    pthread_mutex_lock(&pool_lock);
    coming -= bytes;
    if (b) {
        b->next = pool;
        pool = b;
        pooled += bytes;
        lms_stats_host(in_use + pooled);
    }
    pthread_mutex_unlock(&pool_lock);
}

/* The device's pieces leave the pool while their copies are waited for, outside its lock. */
void lms_swap_backing_context_ends(int device, int gone)
{
    lms_backing *mine = NULL;
    pthread_mutex_lock(&pool_lock);
    for (lms_backing **p = &pool; *p;) {
        lms_backing *b = *p;
        if (b->device != device) {
            p = &b->next;
            continue;
        }
        *p = b->next;
        pooled -= b->bytes;
        b->next = mine;
        mine = b;
    }
    pthread_mutex_unlock(&pool_lock);
    while (mine) {
        lms_backing *b = mine;
        mine = b->next;
        if (b->done && !gone) {
            wait_event(b->done);
            lms_real.cuEventDestroy_v2(b->done);
        }
        b->done = NULL;
        if (!b->pinned) {
            pthread_mutex_lock(&pool_lock);
            b->next = pool;
            pool = b;
            pooled += b->bytes;
            pthread_mutex_unlock(&pool_lock);
            continue;
        }
        /* Pinned memory is the context's: the driver frees it with the context. */
        if (!gone)
            lms_real.cuMemFreeHost(b->pinned);
        free(b);
    }
}

/* Takes a piece of the pool for an eviction. */
static lms_backing *backing_take(int device, size_t bytes)
{
    lms_backing *b = NULL;
    pthread_mutex_lock(&pool_lock);
    for (lms_backing **p = &pool; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes && (*p)->device == device) {
            b = *p;
            *p = b->next;
            pooled -= bytes;
            in_use += bytes;
            break;
        }
    pthread_mutex_unlock(&pool_lock);
    return b;
}

/* Back to the pool. A copy that still reads or writes it is ordered before the next one
 * through its done event. */
static void backing_put(lms_backing *b)
{
    pthread_mutex_lock(&pool_lock);
    b->next = pool;
    pool = b;
    in_use -= b->bytes;
    pooled += b->bytes;
    pthread_mutex_unlock(&pool_lock);
}

/* ---- last uses ---- */

/* Which stream a handle names for the calling thread: every thread's per-thread default
 * stream is CU_STREAM_PER_THREAD, every context's legacy stream NULL. Ids are unique for the
 * process's life; a stream without one is known by its handle. */
static unsigned long long stream_id(CUstream stream)
{
    unsigned long long id;
    return lms_real.cuStreamGetId && lms_real.cuStreamGetId(stream, &id) == CUDA_SUCCESS ? id
                                                                                     : (uintptr_t)stream;
}

void lms_swap_record_use(lms_uses *uses, CUstream stream)
{
    lms_last_use *slot = NULL;
    unsigned long long id = stream_id(stream);
    for (int i = 0; i < LMS_MAX_USES && !slot; i++)
        if (uses->slot[i].active && uses->slot[i].stream_id == id)
            slot = &uses->slot[i];
    for (int i = 0; i < LMS_MAX_USES && !slot; i++)
        if (!uses->slot[i].active || lms_real.cuEventQuery(uses->slot[i].event) == CUDA_SUCCESS)
            slot = &uses->slot[i];
    if (!slot) { /* every slot busy on another stream: wait for the first */
        slot = &uses->slot[0];
        wait_event(slot->event);
    }
    slot->stream_id = id;
    slot->active = record(&slot->event, stream) == CUDA_SUCCESS;
    if (!slot->active) /* nothing to wait for later: wait for the stream now */
        drain(stream);
}

int lms_swap_uses_done(lms_uses *uses, int wait)
{
    for (int i = 0; i < LMS_MAX_USES; i++) {
        lms_last_use *use = &uses->slot[i];
        if (!use->active)
            continue;
        if (wait)
            wait_event(use->event);
        else if (lms_real.cuEventQuery(use->event) != CUDA_SUCCESS)
            return 0; /* not ready, or the query failed: no proof that it is done */
        use->active = 0;
    }
    return 1;
}

void lms_swap_uses_clear(lms_uses *uses, int gone)
{
    for (int i = 0; i < LMS_MAX_USES; i++) {
        if (uses->slot[i].event && !gone)
            lms_real.cuEventDestroy_v2(uses->slot[i].event);
        uses->slot[i] = (lms_last_use){ 0 };
    }
}

/* Makes stream wait for every last use. */
static CUresult wait_uses(CUstream stream, const lms_uses *uses)
{
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < LMS_MAX_USES && r == CUDA_SUCCESS; i++)
        if (uses->slot[i].active)
            r = lms_real.cuStreamWaitEvent(stream, uses->slot[i].event, 0);
    return r;
}

/* ---- copies ---- */

/* Queues the copy of a's bytes from its backing into its device handle on the copy-in
 * stream, and records a->restored after it, for the calls that use a to wait on their
 * streams, and the backing's done event. */
static CUresult copy_in(lms_device *dev, lms_block *a)
{
    lms_backing *b = a->back;
    CUresult r = b->pinned ? lms_real.cuMemcpyHtoDAsync_v2(a->addr, b->pinned, a->size, dev->copy_in)
                           : lms_real.cuMemcpyDtoDAsync_v2(a->addr, b->stage, a->size, dev->copy_in);
    if (r != CUDA_SUCCESS)
        return r;
    b->last = dev->copy_in;
    a->restore_pending = record(&a->restored, dev->copy_in) == CUDA_SUCCESS;
    /* Without an event to order the calls, or the next copy into the backing, after the
     * copy, the host waits for it now. */
    if (!a->restore_pending || record(&b->done, dev->copy_in) != CUDA_SUCCESS)
        drain(dev->copy_in);
    /* The copy uses a like any call: an eviction's copy or an unmap (a release, say) of one
     * brought back ahead of need and not used since waits for it too. */
    lms_swap_record_use(&a->uses, dev->copy_in);
    return CUDA_SUCCESS;
}

void lms_swap_wait_restored(lms_block *a, CUstream stream, int capturing)
{
    if (!a->restore_pending)
        return;
    if (lms_real.cuEventQuery(a->restored) == CUDA_SUCCESS ||
        ((capturing || lms_real.cuStreamWaitEvent(stream, a->restored, 0) != CUDA_SUCCESS) &&
         lms_real.cuEventSynchronize(a->restored) == CUDA_SUCCESS))
        a->restore_pending = 0;
}

/* ---- out ---- */

CUresult lms_swap_out_begin(lms_device *dev, lms_block *a, lms_uses *unscanned)
{
    lms_backing *b = backing_take(a->device, a->padded);
    if (!b)
        return CUDA_ERROR_NOT_READY;
    /* The copy waits for the last use on every stream, and for a restore still reading the
     * piece on the copy-in stream. */
    CUresult r = wait_uses(dev->copy_out, &a->uses);
    if (r == CUDA_SUCCESS)
        r = wait_uses(dev->copy_out, unscanned);
    if (r == CUDA_SUCCESS && b->done && b->last != dev->copy_out)
        r = lms_real.cuStreamWaitEvent(dev->copy_out, b->done, 0);
    if (r == CUDA_SUCCESS) {
        uint64_t range = lms_trace_range_begin(LMS_SWAP_OUT, a->size);
        int timed = dev->timed_copy.wanted &&
                    lms_real.cuEventRecord(dev->timed_copy.start, dev->copy_out) == CUDA_SUCCESS;
        r = b->pinned ? lms_real.cuMemcpyDtoHAsync_v2(b->pinned, a->addr, a->size, dev->copy_out)
                      : lms_real.cuMemcpyDtoDAsync_v2(b->stage, a->addr, a->size, dev->copy_out);
        if (timed && r == CUDA_SUCCESS && lms_real.cuEventRecord(dev->timed_copy.end, dev->copy_out) == CUDA_SUCCESS) {
            dev->timed_copy.bytes = a->size;
            dev->timed_copy.wanted = 0;
        }
        lms_trace_range_end(range);
        if (r == CUDA_SUCCESS && record(&b->done, dev->copy_out) != CUDA_SUCCESS)
            drain(dev->copy_out); /* nothing to know its end by: the host waits for it now */
    }
    if (r != CUDA_SUCCESS) {
        backing_put(b);
        return r;
    }
    b->last = dev->copy_out;
    a->back = b;
    return CUDA_SUCCESS;
}

int lms_swap_out_done(const lms_block *a, int wait)
{
    const lms_backing *b = a->back;
    if (!b->done)
        return 1;
    if (wait)
        wait_event(b->done);
    else if (lms_real.cuEventQuery(b->done) != CUDA_SUCCESS)
        return 0; /* not ready, or the query failed: no proof that it is done */
    return 1;
}

CUresult lms_swap_out_finish(lms_block *a)
{
    CUresult r = lms_real.cuMemUnmap(a->addr, a->padded);
    if (r == CUDA_SUCCESS)
        for (int i = 0; i < LMS_MAX_USES; i++)
            a->uses.slot[i].active = 0; /* the copy out waited for them */
    return r;
}

int lms_swap_backing_take(lms_block *a)
{
    a->back = backing_take(a->device, a->padded);
    return a->back != NULL;
}

void lms_swap_backing_give_back(lms_block *a)
{
    backing_put(a->back);
    a->back = NULL;
}

CUresult lms_swap_map_host(lms_block *a)
{
    CUresult r = lms_swap_map(a->addr, a->padded, a->back->handle, a->device);
    a->host_mapped = r == CUDA_SUCCESS;
    return r;
}

/* ---- in ---- */

CUresult lms_swap_in(lms_device *dev, lms_block *a, CUmemGenericAllocationHandle h, int whole_write)
{
    /* The device handle takes the address; the bytes come from the backing's own mapping. */
    int was_mapped = a->host_mapped;
    CUresult r = was_mapped ? lms_real.cuMemUnmap(a->addr, a->padded) : CUDA_SUCCESS;
    if (r != CUDA_SUCCESS)
        return r;
    a->host_mapped = 0;
    if ((r = lms_swap_map(a->addr, a->padded, h, a->device)) == CUDA_SUCCESS && !whole_write) {
        uint64_t range = lms_trace_range_begin(LMS_SWAP_IN, a->size);
        r = copy_in(dev, a);
        lms_trace_range_end(range);
        if (r != CUDA_SUCCESS)
            lms_real.cuMemUnmap(a->addr, a->padded);
    }
    if (r != CUDA_SUCCESS) {
        if (was_mapped && lms_swap_map_host(a) != CUDA_SUCCESS)
            lms_log(LMS_LOG_ERROR, a->device, "cannot remap 0x%llx after a failed restore",
                    (unsigned long long)a->addr);
        return r;
    }
    if (!whole_write) {
        backing_put(a->back);
        a->back = NULL;
    }
    a->dev_handle = h;
    return CUDA_SUCCESS;
}

void lms_swap_settle(lms_device *dev, lms_block *a, int issued)
{
    if (!issued && copy_in(dev, a) != CUDA_SUCCESS)
        lms_log(LMS_LOG_ERROR, a->device,
                "cannot copy back 0x%llx after a call that was not issued: its bytes are lost",
                (unsigned long long)a->addr);
    backing_put(a->back);
    a->back = NULL;
}

void lms_swap_release(lms_block *a, int gone)
{
    if (a->place != LMS_EVICTED || a->host_mapped)
        lms_real.cuMemUnmap(a->addr, a->padded);
    if (a->back)
        backing_put(a->back);
    if (--a->span->pieces == 0) {
        lms_real.cuMemAddressFree(a->span->base, a->span->reserved);
        free(a->span);
    }
    a->span = NULL;
    if (a->restored && !gone)
        lms_real.cuEventDestroy_v2(a->restored);
    lms_swap_uses_clear(&a->uses, gone);
}
