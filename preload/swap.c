#include "preload/swap.h"

#include "preload/hooks.h"
#include "preload/log.h"
#include "preload/stats.h"
#include "preload/trace.h"

#include <stdlib.h>

struct lms_backing {
    size_t bytes;
    int device;                          /* whose copy stream reads and writes it */
    CUstream copy_stream;
    CUmemGenericAllocationHandle handle; /* host VMM */
    CUdeviceptr stage;                   /* host VMM: its own mapping, for copies */
    void *pinned;                        /* without host VMM */
    lms_backing *next;                   /* in the pool */
};

/* Free backing of every device, and the bytes of backing that hold evicted allocations, that
 * are pooled, and that are being made (lms_swap_backing_reserve to lms_swap_backing_add). */
static lms_backing *pool;
static size_t in_use, pooled, coming;

size_t lms_swap_host_bytes(void) { return in_use + pooled; }

CUresult lms_swap_map(CUdeviceptr addr, size_t bytes, CUmemGenericAllocationHandle handle, int device)
{
    CUresult r = lms_real.cuMemMap(addr, bytes, 0, handle, 0);
    if (r != CUDA_SUCCESS)
        return r;
    CUmemAccessDesc access = { { CU_MEM_LOCATION_TYPE_DEVICE, device }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    r = lms_real.cuMemSetAccess(addr, bytes, &access, 1);
    if (r != CUDA_SUCCESS)
        lms_real.cuMemUnmap(addr, bytes);
    return r;
}

/* ---- host backing: one pool, recycled by size and device, trimmed to LMS_HOST_LIMIT_MB ---- */

int lms_swap_has_backing(int device, size_t bytes)
{
    for (const lms_backing *b = pool; b; b = b->next)
        if (b->bytes == bytes && b->device == device)
            return 1;
    return 0;
}

CUresult lms_swap_backing_reserve(int device, size_t bytes, lms_backing **unwanted)
{
    size_t limit = lms_opt.HOST_LIMIT_MB.value;
    if (in_use + coming + bytes > limit) {
        lms_log(LMS_LOG_ERROR, device,
                "out of memory: host backing in use would grow to %zu bytes, past LMS_HOST_LIMIT_MB "
                "(%zu bytes)",
                in_use + coming + bytes, limit);
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

/* A restore may still read it on its copy stream: the memory goes only after that. */
static void release_backing(lms_backing *b)
{
    if (lms_real.cuStreamSynchronize(b->copy_stream) != CUDA_SUCCESS)
        lms_real.cuCtxSynchronize();
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
    *b = (lms_backing){ .bytes = bytes, .device = device, .copy_stream = dev->copy_stream };
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
    coming -= bytes;
    if (b) {
        b->next = pool;
        pool = b;
        pooled += bytes;
        lms_stats_host(in_use + pooled);
    }
}

/* Takes a piece of the pool for an eviction. */
static lms_backing *backing_take(int device, size_t bytes)
{
    for (lms_backing **p = &pool; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes && (*p)->device == device) {
            lms_backing *b = *p;
            *p = b->next;
            pooled -= bytes;
            in_use += bytes;
            return b;
        }
    return NULL;
}

/* Back to the pool. A copy that still reads it runs on the copy stream, before any copy
 * that a later eviction puts into it. */
static void backing_put(lms_backing *b)
{
    b->next = pool;
    pool = b;
    in_use -= b->bytes;
    pooled += b->bytes;
}

/* ---- last uses ---- */

void lms_swap_record_use(lms_uses *uses, CUstream stream)
{
    lms_last_use *slot = NULL;
    for (int i = 0; i < LMS_MAX_USES && !slot; i++)
        if (uses->slot[i].active && uses->slot[i].stream == stream)
            slot = &uses->slot[i];
    for (int i = 0; i < LMS_MAX_USES && !slot; i++)
        if (!uses->slot[i].active || lms_real.cuEventQuery(uses->slot[i].event) == CUDA_SUCCESS)
            slot = &uses->slot[i];
    if (!slot) { /* every slot busy on another stream: wait for the first */
        slot = &uses->slot[0];
        lms_real.cuEventSynchronize(slot->event);
    }
    if (!slot->event && lms_real.cuEventCreate(&slot->event, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
        /* Nothing to wait for later: wait for the stream now. */
        slot->event = NULL;
        slot->active = 0;
        if (lms_real.cuStreamSynchronize(stream) != CUDA_SUCCESS)
            lms_real.cuCtxSynchronize();
        return;
    }
    slot->stream = stream;
    slot->active = lms_real.cuEventRecord(slot->event, stream) == CUDA_SUCCESS;
    if (!slot->active && lms_real.cuStreamSynchronize(stream) != CUDA_SUCCESS)
        lms_real.cuCtxSynchronize();
}

int lms_swap_uses_done(lms_uses *uses, int wait)
{
    for (int i = 0; i < LMS_MAX_USES; i++) {
        lms_last_use *use = &uses->slot[i];
        if (!use->active)
            continue;
        CUresult r = wait ? lms_real.cuEventSynchronize(use->event) : lms_real.cuEventQuery(use->event);
        if (r == CUDA_ERROR_NOT_READY)
            return 0;
        use->active = 0; /* done, or failed: an error there is the program's to see */
    }
    return 1;
}

/* ---- copies ---- */

/* One copy on the copy stream, waited for. Whatever fails, the copy no longer runs when this
 * returns: the caller unmaps one side next. */
static CUresult copy_and_wait(lms_device *dev, CUdeviceptr dst_dev, void *dst_host, CUdeviceptr src_dev,
                              size_t bytes)
{
    CUresult r = dst_host ? lms_real.cuMemcpyDtoHAsync_v2(dst_host, src_dev, bytes, dev->copy_stream)
                          : lms_real.cuMemcpyDtoDAsync_v2(dst_dev, src_dev, bytes, dev->copy_stream);
    if (r == CUDA_SUCCESS)
        r = lms_real.cuEventRecord(dev->copy_done, dev->copy_stream);
    if (r == CUDA_SUCCESS)
        r = lms_real.cuEventSynchronize(dev->copy_done);
    if (r != CUDA_SUCCESS && lms_real.cuStreamSynchronize(dev->copy_stream) != CUDA_SUCCESS)
        lms_real.cuCtxSynchronize();
    return r;
}

/* Queues the copy of a's bytes from its backing into its device handle on the copy stream,
 * and records a->restored after it, for the calls that use a to wait on their streams. */
static CUresult copy_in(lms_device *dev, lms_block *a)
{
    CUresult r = a->back->pinned
                     ? lms_real.cuMemcpyHtoDAsync_v2(a->addr, a->back->pinned, a->size, dev->copy_stream)
                     : lms_real.cuMemcpyDtoDAsync_v2(a->addr, a->back->stage, a->size, dev->copy_stream);
    if (r != CUDA_SUCCESS)
        return r;
    if ((a->restored || lms_real.cuEventCreate(&a->restored, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) &&
        lms_real.cuEventRecord(a->restored, dev->copy_stream) == CUDA_SUCCESS) {
        a->restore_pending = 1;
        return CUDA_SUCCESS;
    }
    /* No event to order the calls after the copy: the host waits for it instead. */
    r = lms_real.cuStreamSynchronize(dev->copy_stream);
    if (r != CUDA_SUCCESS)
        lms_real.cuCtxSynchronize();
    return r;
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

/* ---- out and in ---- */

CUresult lms_swap_out(lms_device *dev, lms_block *a)
{
    lms_backing *b = backing_take(a->device, a->padded);
    if (!b)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = CUDA_SUCCESS;
    /* The copy waits, on the copy stream, for the last use on every stream. */
    for (int i = 0; i < LMS_MAX_USES && r == CUDA_SUCCESS; i++)
        if (a->uses.slot[i].active)
            r = lms_real.cuStreamWaitEvent(dev->copy_stream, a->uses.slot[i].event, 0);
    if (r == CUDA_SUCCESS) {
        uint64_t range = lms_trace_range_begin(LMS_SWAP_OUT, a->size);
        r = copy_and_wait(dev, b->stage, b->pinned, a->addr, a->size);
        lms_trace_range_end(range);
    }
    /* Only now that the copy has completed (and with it every last use) may the handle go. */
    if (r == CUDA_SUCCESS)
        r = lms_real.cuMemUnmap(a->addr, a->padded);
    if (r == CUDA_SUCCESS && dev->host_vmm &&
        (r = lms_swap_map(a->addr, a->padded, b->handle, a->device)) != CUDA_SUCCESS &&
        lms_swap_map(a->addr, a->padded, a->dev_handle, a->device) != CUDA_SUCCESS)
        lms_log(LMS_LOG_ERROR, a->device, "cannot remap 0x%llx after a failed eviction",
                (unsigned long long)a->addr);
    if (r != CUDA_SUCCESS) {
        backing_put(b);
        return r;
    }
    for (int i = 0; i < LMS_MAX_USES; i++)
        a->uses.slot[i].active = 0;
    a->back = b;
    a->resident = 0;
    return CUDA_SUCCESS;
}

/* Maps the backing back at the allocation's address, after a failed restore. */
static void remap_backing(lms_device *dev, lms_block *a)
{
    if (dev->host_vmm && lms_swap_map(a->addr, a->padded, a->back->handle, a->device) != CUDA_SUCCESS)
        lms_log(LMS_LOG_ERROR, a->device, "cannot remap 0x%llx after a failed restore",
                (unsigned long long)a->addr);
}

CUresult lms_swap_in(lms_device *dev, lms_block *a, CUmemGenericAllocationHandle h, int whole_write)
{
    /* The device handle takes the address; the bytes come from the backing's own mapping. */
    CUresult r = dev->host_vmm ? lms_real.cuMemUnmap(a->addr, a->padded) : CUDA_SUCCESS;
    if (r == CUDA_SUCCESS && (r = lms_swap_map(a->addr, a->padded, h, a->device)) != CUDA_SUCCESS)
        remap_backing(dev, a);
    if (r == CUDA_SUCCESS && !whole_write) {
        uint64_t range = lms_trace_range_begin(LMS_SWAP_IN, a->size);
        r = copy_in(dev, a);
        lms_trace_range_end(range);
        if (r != CUDA_SUCCESS) {
            lms_real.cuMemUnmap(a->addr, a->padded);
            remap_backing(dev, a);
        }
    }
    if (r != CUDA_SUCCESS)
        return r;
    if (!whole_write) {
        backing_put(a->back);
        a->back = NULL;
    }
    a->dev_handle = h;
    a->resident = 1;
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

void lms_swap_release(lms_block *a)
{
    lms_real.cuMemUnmap(a->addr, a->padded);
    if (a->back)
        backing_put(a->back);
    lms_real.cuMemAddressFree(a->addr, a->padded);
    if (a->restored)
        lms_real.cuEventDestroy_v2(a->restored);
    for (int i = 0; i < LMS_MAX_USES; i++)
        if (a->uses.slot[i].event)
            lms_real.cuEventDestroy_v2(a->uses.slot[i].event);
}
