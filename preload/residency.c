/* The residency manager (see residency.h and the README's "Residency" section). */
#include "preload/residency.h"

#include "policy/policy.h"
#include "preload/graphs.h"
#include "preload/hooks.h"
#include "preload/log.h"
#include "preload/stats.h"
#include "preload/swap.h"
#include "preload/trace.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

/* Small (and, in cap mode, all) allocations, and the program's own VMM handles. */
typedef struct plain_entry {
    uint64_t key;
    size_t bytes;
    int device;
    uint64_t created_ns;
    uint32_t stack;
    UT_hash_handle hh;
} plain_entry;

#define MAX_VICTIMS 64  /* evictions chosen per round */
/* Without LMS_EXCLUDE_MB, device memory left to the driver beyond what is in use when liblms
 * first sees the device (kernels' local memory, lazily loaded modules): 256 MiB, or 1/16 of a
 * smaller device. The options table says so. */
#define DRIVER_MARGIN_MAX ((size_t)256 << 20)
/* A program that retries a failing allocation in a loop gets one dump per interval. */
#define OOM_DUMP_INTERVAL_NS (2 * 1000000000ull)

static struct {
    pthread_mutex_t lock;
    lms_device dev[LMS_MAX_DEVICES];
    lms_block **by_addr;   /* swappable allocations, sorted by address */
    size_t count, cap;
    plain_entry *plain;
    plain_entry *own_vmm;
    lms_block *pending;    /* freed, not yet released */
    lms_uses any_uses;     /* launches that may use any allocation (uses_any) */
    lms_policy *policy;
    uint64_t step;
    uint64_t oom_dumped_ns;  /* when the last out-of-memory dump was written; 0: never */
} R = { .lock = PTHREAD_MUTEX_INITIALIZER };

static int swapping(void) { return lms_opt.MODE.value == LMS_MODE_SWAP; }

/* liblms's own waits and queries are not the program's: while a stream captures a graph they
 * must not count as the "potentially unsafe" calls that a thread's capture mode forbids, or
 * they would invalidate the capture. So the calling thread works under the lock in relaxed
 * mode; unlock gives it back the mode that lock returned. */
static CUstreamCaptureMode lock(void)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (lms_real.cuThreadExchangeStreamCaptureMode)
        lms_real.cuThreadExchangeStreamCaptureMode(&mode);
    pthread_mutex_lock(&R.lock);
    return mode;
}

static void unlock(CUstreamCaptureMode mode)
{
    pthread_mutex_unlock(&R.lock);
    if (lms_real.cuThreadExchangeStreamCaptureMode)
        lms_real.cuThreadExchangeStreamCaptureMode(&mode);
}

/* ---- the sorted table of swappable allocations ---- */

static size_t upper_bound(CUdeviceptr addr)
{
    size_t lo = 0, hi = R.count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (R.by_addr[mid]->addr <= addr) lo = mid + 1; else hi = mid;
    }
    return lo;
}

static lms_block *find_containing(CUdeviceptr addr)
{
    size_t i = upper_bound(addr);
    if (i == 0)
        return NULL;
    lms_block *a = R.by_addr[i - 1];
    return addr < a->addr + a->size ? a : NULL;
}

static int table_insert(lms_block *a)
{
    if (R.count == R.cap) {
        size_t cap = R.cap ? R.cap * 2 : 64;
        lms_block **grown = realloc(R.by_addr, cap * sizeof *grown);
        if (!grown)
            return 0;
        R.by_addr = grown;
        R.cap = cap;
    }
    size_t i = upper_bound(a->addr);
    memmove(&R.by_addr[i + 1], &R.by_addr[i], (R.count - i) * sizeof *R.by_addr);
    R.by_addr[i] = a;
    R.count++;
    return 1;
}

static void table_remove(lms_block *a)
{
    size_t i = upper_bound(a->addr) - 1;
    memmove(&R.by_addr[i], &R.by_addr[i + 1], (R.count - i - 1) * sizeof *R.by_addr);
    R.count--;
}

/* ---- devices ---- */

/* Device memory less LMS_EXCLUDE_MB; by default, what the device has free now less the
 * driver's margin. */
static size_t soft_limit(int d, size_t total)
{
    uint64_t exclude = lms_opt.exclude_bytes[d];
    if (exclude == LMS_EXCLUDE_COMPUTED) {
        size_t free_now, total_now;
        if (lms_real.cuMemGetInfo_v2(&free_now, &total_now) != CUDA_SUCCESS || free_now > total)
            free_now = total;
        exclude = total - free_now + (total / 16 < DRIVER_MARGIN_MAX ? total / 16 : DRIVER_MARGIN_MAX);
    }
    return total > exclude ? total - exclude : 0;
}

static CUresult current_device(int *device)
{
    CUdevice d;
    CUresult r = lms_real.cuCtxGetDevice(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (d < 0 || d >= LMS_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    lms_device *ds = &R.dev[d];
    *device = d;
    if (ds->ready)
        return CUDA_SUCCESS;

    size_t total;
    if ((r = lms_real.cuDeviceTotalMem_v2(&total, d)) != CUDA_SUCCESS)
        return r;
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, d } };
    size_t granularity = 0;
    int vmm = 0, host_vmm = 0;
    if (swapping()) {
        if ((r = lms_real.cuDeviceGetAttribute(
                 &vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d)) != CUDA_SUCCESS)
            return r;
        if (!vmm) {
            lms_log(LMS_LOG_ERROR, d, "device has no virtual memory management: cannot swap");
            return CUDA_ERROR_NOT_SUPPORTED;
        }
        if ((r = lms_real.cuMemGetAllocationGranularity(&granularity, &prop,
                                                        CU_MEM_ALLOC_GRANULARITY_MINIMUM)))
            return r;
        if (lms_real.cuDeviceGetAttribute(
                &host_vmm, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, d))
            host_vmm = 0;
        if ((r = lms_real.cuStreamCreate(&ds->copy_stream, CU_STREAM_NON_BLOCKING)))
            return r;
        if ((r = lms_real.cuEventCreate(&ds->copy_done, CU_EVENT_DISABLE_TIMING)))
            return r;
    }
    ds->total = total;
    ds->soft_limit = soft_limit(d, total);
    ds->granularity = granularity;
    ds->host_vmm = host_vmm;
    ds->ready = 1;
    lms_trace_device(d, total, ds->soft_limit);
    lms_log(LMS_LOG_INFO, d, "device memory %zu bytes, soft limit %zu bytes, %s backing", total,
            ds->soft_limit, host_vmm ? "host-located VMM" : "pinned host (no host VMM: see README)");
    return CUDA_SUCCESS;
}

static unsigned percent(size_t part, size_t whole)
{
    return whole ? (unsigned)((double)part * 100.0 / (double)whole) : 0;
}

static void log_figures(int level, int d, const char *what, CUdeviceptr addr, size_t bytes)
{
    const lms_device *ds = &R.dev[d];
    size_t held = ds->resident + ds->spare;
    size_t available = ds->soft_limit > held ? ds->soft_limit - held : 0;
    lms_log(level, d, "%s: size=%zu [count=%zu demanded=%u%% allocated=%u%% available=%u%%] ptr=0x%llx",
            what, bytes, ds->live, percent(ds->demanded, ds->soft_limit),
            percent(held, ds->soft_limit), percent(available, ds->soft_limit),
            (unsigned long long)addr);
}

/* ---- the trace: every event liblms records goes through here ---- */

static void trace_counters(int d)
{
    const lms_device *ds = &R.dev[d];
    lms_trace_counters(d, ds->resident + ds->spare, lms_swap_host_bytes(), ds->demanded, ds->soft_limit);
}

/* The dump of live allocations (LMS_DUMP_SIGNAL, and out of memory). */
static void walk_live_locked(const char *reason)
{
    lms_trace_dump_begin(reason);
    for (size_t i = 0; i < R.count; i++) {
        const lms_block *a = R.by_addr[i];
        lms_trace_dump_record(&(lms_trace_live){ a->device, a->addr, a->size, a->resident,
                                                 a->created_ns, a->last_use_ns, a->stack });
    }
    for (const plain_entry *e = R.plain; e; e = e->hh.next)
        lms_trace_dump_record(&(lms_trace_live){ e->device, e->key, e->bytes, true,
                                                 e->created_ns, 0, e->stack });
    lms_trace_dump_end();
}

void lms_residency_walk_live(void *ctx, const char *reason)
{
    (void)ctx;
    CUstreamCaptureMode mode = lock();
    walk_live_locked(reason);
    unlock(mode);
}

static void counted_in(int d, size_t resident, size_t demanded)
{
    lms_device *ds = &R.dev[d];
    ds->resident += resident;
    ds->demanded += demanded;
    ds->live++;
    lms_stats_demanded(d, ds->demanded, ds->soft_limit);
    trace_counters(d);
}

/* ---- spare device handles: an evicted or freed allocation's handle, for the next restore ---- */

static void keep_spare(lms_device *ds, CUmemGenericAllocationHandle h, size_t bytes)
{
    lms_spare_handle *spare = malloc(sizeof *spare);
    if (!spare) {
        lms_real.cuMemRelease(h);
        return;
    }
    *spare = (lms_spare_handle){ h, bytes, ds->spares };
    ds->spares = spare;
    ds->spare += bytes;
}

static int take_spare(lms_device *ds, size_t bytes, CUmemGenericAllocationHandle *h)
{
    for (lms_spare_handle **p = &ds->spares; *p; p = &(*p)->next)
        if ((*p)->bytes == bytes) {
            lms_spare_handle *spare = *p;
            *p = spare->next;
            *h = spare->handle;
            ds->spare -= bytes;
            free(spare);
            return 1;
        }
    return 0;
}

static void release_spare(lms_device *ds)
{
    lms_spare_handle *spare = ds->spares;
    ds->spares = spare->next;
    ds->spare -= spare->bytes;
    lms_real.cuMemRelease(spare->handle);
    free(spare);
}

/* ---- eviction ---- */

/* A launch whose parameters could not be read may use any allocation: no mapping changes
 * before it has completed. */
static void wait_for_unscanned_launches(void)
{
    lms_swap_uses_done(&R.any_uses, 1);
}

static CUresult evict(lms_block *a, const char *reason)
{
    int d = a->device;
    lms_device *ds = &R.dev[d];
    uint64_t start = lms_stats_now();
    wait_for_unscanned_launches();
    CUresult r = lms_swap_out(ds, a);
    if (r != CUDA_SUCCESS) {
        lms_log(LMS_LOG_SWAP, d, "evict failed: ptr=0x%llx error=%d", (unsigned long long)a->addr, r);
        return r;
    }
    ds->resident -= a->padded;
    keep_spare(ds, a->dev_handle, a->padded);
    lms_policy_evicted(R.policy, a->addr);
    uint64_t end = lms_stats_now();
    lms_stats_evicted(reason, a->size, end - start);
    lms_trace_evict(d, a->addr, a->padded, reason);
    lms_trace_swap(d, a->addr, a->size, LMS_SWAP_OUT, start, end, (uint64_t)(uintptr_t)ds->copy_stream);
    trace_counters(d);
    log_figures(LMS_LOG_SWAP, d, "evict", a->addr, a->padded);
    return CUDA_SUCCESS;
}

/* ---- freeing ---- */

static void release(lms_block *a)
{
    lms_device *ds = &R.dev[a->device];
    wait_for_unscanned_launches();
    lms_swap_release(a);
    if (a->resident) {
        ds->resident -= a->padded;
        keep_spare(ds, a->dev_handle, a->padded);
    }
    free(a);
}

/* Releases freed allocations whose last uses are done; with wait, waits for them. Returns
 * how many bytes of device memory came back. */
static size_t reap_pending(int d, int wait)
{
    size_t freed = 0;
    for (lms_block **p = &R.pending; *p;) {
        lms_block *a = *p;
        /* A call still in flight on another thread may hold it: a program's race, but
         * liblms must not free what that call will touch. */
        if ((d < 0 || a->device == d) && a->pins == 0 && lms_swap_uses_done(&a->uses, wait)) {
            *p = a->next_pending;
            freed += a->resident ? a->padded : 0;
            release(a);
        } else {
            p = &a->next_pending;
        }
    }
    return freed;
}

/* ---- making room ---- */

/* Host backing for evicting a, made with the lock released: whoever called must look at the
 * table afresh afterwards. */
static CUresult make_backing(const lms_block *a)
{
    int d = a->device;
    size_t bytes = a->padded;
    lms_backing *unwanted;
    CUresult r = lms_swap_backing_reserve(d, bytes, &unwanted);
    if (r != CUDA_SUCCESS)
        return r;
    lms_backing *b;
    pthread_mutex_unlock(&R.lock);
    r = lms_swap_backing_create(&R.dev[d], d, bytes, unwanted, &b);
    pthread_mutex_lock(&R.lock);
    lms_swap_backing_add(bytes, b);
    return r;
}

static int keep_victim(void *ctx, lms_alloc_id id)
{
    lms_block *a = find_containing((CUdeviceptr)id);
    return !a || a->pins > 0 || a->device != *(int *)ctx;
}

/* Frees device memory until `bytes` more fit under the soft limit of device d: spare handles
 * first, then freed allocations once their last uses are done, then the policy's victims.
 * With reuse, a spare handle of exactly `bytes` is taken instead when there is one (*reused).
 * It may release the lock while it makes host backing. */
static CUresult make_room(int d, size_t bytes, const char *reason, CUmemGenericAllocationHandle *reuse,
                          int *reused)
{
    lms_device *ds = &R.dev[d];
    for (;;) {
        if (reuse && take_spare(ds, bytes, reuse)) {
            *reused = 1;
            return CUDA_SUCCESS;
        }
        if (ds->resident + ds->spare + bytes <= ds->soft_limit)
            return CUDA_SUCCESS;
        if (ds->spares) {
            release_spare(ds);
            continue;
        }
        if (R.pending && reap_pending(d, 1) > 0)
            continue;
        if (!swapping())
            return CUDA_ERROR_OUT_OF_MEMORY;
        lms_alloc_id victims[MAX_VICTIMS];
        size_t n = lms_policy_choose_victims(R.policy, ds->resident + bytes - ds->soft_limit,
                                             keep_victim, &d, victims, MAX_VICTIMS);
        if (n == 0)
            return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t i = 0; i < n; i++) {
            lms_block *a = find_containing((CUdeviceptr)victims[i]);
            int backed = lms_swap_has_backing(d, a->padded);
            CUresult r = backed ? evict(a, reason) : make_backing(a);
            if (r != CUDA_SUCCESS)
                return r;
            if (!backed)
                break; /* the victims may have changed meanwhile: choose again */
        }
    }
}

/* Out of memory below the soft limit (other processes use the device too): evict one more
 * allocation (making host backing for it may release the lock). Returns 0 when nothing is
 * left to evict. */
static int evict_for_retry(int d)
{
    lms_device *ds = &R.dev[d];
    if (ds->spares) {
        release_spare(ds);
        return 1;
    }
    if (R.pending && reap_pending(d, 1) > 0)
        return 1;
    if (!swapping())
        return 0;
    for (;;) {
        lms_alloc_id victim;
        if (lms_policy_choose_victims(R.policy, 1, keep_victim, &d, &victim, 1) == 0)
            return 0;
        lms_block *a = find_containing((CUdeviceptr)victim);
        if (lms_swap_has_backing(d, a->padded))
            return evict(a, "oom-retry") == CUDA_SUCCESS;
        if (make_backing(a) != CUDA_SUCCESS) /* the lock was released: choose again */
            return 0;
    }
}

static CUresult create_device_handle(int d, size_t bytes, CUmemGenericAllocationHandle *h)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, d } };
    CUresult r;
    while ((r = lms_real.cuMemCreate(h, bytes, &prop, 0)) == CUDA_ERROR_OUT_OF_MEMORY &&
           evict_for_retry(d))
        ;
    return r;
}

/* The restore copy is only queued: the calls that use a wait for it on their streams. The
 * trace shows the time it took to issue. *blind: restored without its bytes (whole_write),
 * by this call; another may have restored a while making room released the lock. */
static CUresult restore(lms_block *a, int whole_write, int *blind)
{
    int d = a->device;
    lms_device *ds = &R.dev[d];
    uint64_t start = lms_stats_now();
    CUmemGenericAllocationHandle h;
    int reused = 0;
    *blind = 0;
    CUresult r = make_room(d, a->padded, "demand", &h, &reused);
    if (r == CUDA_SUCCESS && a->resident) {
        if (reused)
            keep_spare(ds, h, a->padded);
        return CUDA_SUCCESS;
    }
    if (r == CUDA_SUCCESS && !reused)
        r = create_device_handle(d, a->padded, &h);
    if (r == CUDA_SUCCESS)
        wait_for_unscanned_launches();
    if (r == CUDA_SUCCESS && (r = lms_swap_in(ds, a, h, whole_write)) != CUDA_SUCCESS)
        keep_spare(ds, h, a->padded);
    if (r != CUDA_SUCCESS) {
        lms_log(LMS_LOG_SWAP, d, "restore failed: ptr=0x%llx error=%d", (unsigned long long)a->addr, r);
        return r;
    }
    ds->resident += a->padded;
    *blind = whole_write;
    lms_policy_restored(R.policy, a->addr);
    uint64_t end = lms_stats_now();
    lms_stats_restored(whole_write ? 0 : a->size, end - start);
    if (!whole_write)
        lms_trace_swap(d, a->addr, a->size, LMS_SWAP_IN, start, end, (uint64_t)(uintptr_t)ds->copy_stream);
    trace_counters(d);
    log_figures(LMS_LOG_SWAP, d, "restore", a->addr, a->padded);
    return CUDA_SUCCESS;
}

static CUresult out_of_memory(int d, size_t bytes)
{
    lms_stats_oom();
    lms_trace_oom(d, bytes);
    uint64_t now = lms_stats_now();
    if (R.oom_dumped_ns == 0 || now - R.oom_dumped_ns >= OOM_DUMP_INTERVAL_NS) {
        R.oom_dumped_ns = now;
        walk_live_locked("oom"); /* into the trace when one is recorded, else to stderr */
    }
    log_figures(LMS_LOG_INFO, d, "out of memory", 0, bytes);
    return CUDA_ERROR_OUT_OF_MEMORY;
}

/* ---- allocation ---- */

/* The driver's own allocation and free, as the program asked for them: stream-ordered (async)
 * or not. */
static CUresult real_alloc(CUdeviceptr *dptr, size_t bytes, CUstream stream, int async)
{
    if (!async)
        return lms_real.cuMemAlloc_v2(dptr, bytes);
    return lms_real.cuMemAllocAsync ? lms_real.cuMemAllocAsync(dptr, bytes, stream)
                                    : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult real_free(CUdeviceptr dptr, CUstream stream, int async)
{
    if (!async)
        return lms_real.cuMemFree_v2(dptr);
    return lms_real.cuMemFreeAsync ? lms_real.cuMemFreeAsync(dptr, stream) : CUDA_ERROR_NOT_SUPPORTED;
}

static CUresult alloc_plain(int d, CUdeviceptr *dptr, size_t bytes, CUstream stream, int async)
{
    CUresult r = make_room(d, bytes, "limit", NULL, NULL);
    if (r == CUDA_ERROR_OUT_OF_MEMORY)
        return out_of_memory(d, bytes);
    if (r != CUDA_SUCCESS)
        return r;
    while ((r = real_alloc(dptr, bytes, stream, async)) == CUDA_ERROR_OUT_OF_MEMORY && evict_for_retry(d))
        ;
    if (r != CUDA_SUCCESS)
        return r == CUDA_ERROR_OUT_OF_MEMORY ? out_of_memory(d, bytes) : r;
    plain_entry *e = calloc(1, sizeof *e);
    if (!e) {
        real_free(*dptr, stream, async);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *e = (plain_entry){ .key = *dptr, .bytes = bytes, .device = d, .created_ns = lms_stats_now() };
    e->stack = lms_trace_alloc(d, *dptr, bytes, 0, false);
    HASH_ADD(hh, R.plain, key, sizeof e->key, e);
    counted_in(d, bytes, bytes);
    return CUDA_SUCCESS;
}

static CUresult alloc_swappable(int d, CUdeviceptr *dptr, size_t bytes)
{
    lms_device *ds = &R.dev[d];
    size_t padded = (bytes + ds->granularity - 1) / ds->granularity * ds->granularity;
    lms_block *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *a = (lms_block){ .size = bytes, .padded = padded, .device = d, .resident = 1 };
    CUresult r = make_room(d, padded, "limit", NULL, NULL);
    if (r == CUDA_SUCCESS)
        r = lms_real.cuMemAddressReserve(&a->addr, padded, ds->granularity, 0, 0);
    if (r != CUDA_SUCCESS) {
        free(a);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? out_of_memory(d, padded) : r;
    }
    if ((r = create_device_handle(d, padded, &a->dev_handle)) == CUDA_SUCCESS &&
        (r = lms_swap_map(a->addr, padded, a->dev_handle, d)) != CUDA_SUCCESS)
        lms_real.cuMemRelease(a->dev_handle);
    if (r == CUDA_SUCCESS && !table_insert(a)) {
        lms_real.cuMemUnmap(a->addr, padded);
        lms_real.cuMemRelease(a->dev_handle);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r != CUDA_SUCCESS) {
        lms_real.cuMemAddressFree(a->addr, padded);
        free(a);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? out_of_memory(d, padded) : r;
    }
    lms_policy_created(R.policy, a->addr, padded);
    a->created_ns = lms_stats_now();
    a->stack = lms_trace_alloc(d, a->addr, bytes, 0, true);
    counted_in(d, padded, bytes);
    *dptr = a->addr;
    return CUDA_SUCCESS;
}

CUresult lms_alloc(CUdeviceptr *dptr, size_t bytes, CUstream stream, int async)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes == 0)
        return lms_real.cuMemAlloc_v2(dptr, bytes);
    CUstreamCaptureMode mode = lock();
    int d;
    CUresult r = current_device(&d);
    if (r == CUDA_SUCCESS) {
        if (swapping() && bytes >= lms_opt.THRESHOLD_KB.value)
            r = alloc_swappable(d, dptr, bytes);
        else
            r = alloc_plain(d, dptr, bytes, stream, async);
        if (r == CUDA_SUCCESS) {
            lms_stats_alloc();
            log_figures(LMS_LOG_ALLOC, d, "allocate", *dptr, bytes);
        }
    }
    unlock(mode);
    return r;
}

/* A freed swappable allocation is released once its last uses are done. */
static void forget(lms_block *a, CUstream stream, int async)
{
    if (async)
        lms_swap_record_use(&a->uses, stream);
    table_remove(a);
    lms_policy_freed(R.policy, a->addr);
    lms_device *ds = &R.dev[a->device];
    ds->demanded -= a->size;
    ds->live--;
    log_figures(LMS_LOG_ALLOC, a->device, "free", a->addr, a->size);
    lms_trace_free(a->device, a->addr, a->size);
    trace_counters(a->device);
    a->next_pending = R.pending;
    R.pending = a;
}

/* A small allocation goes back to the driver as the program asked, outside the lock:
 * cuMemFree waits for the whole device. Until the driver has it, it still counts. */
static CUresult free_plain(plain_entry *e, CUstream stream, int async)
{
    CUresult r = real_free(e->key, stream, async);
    CUstreamCaptureMode mode = lock();
    if (r == CUDA_SUCCESS) {
        lms_device *ds = &R.dev[e->device];
        ds->resident -= e->bytes;
        ds->demanded -= e->bytes;
        ds->live--;
        log_figures(LMS_LOG_ALLOC, e->device, "free", e->key, e->bytes);
        lms_trace_free(e->device, e->key, e->bytes);
        trace_counters(e->device);
        free(e);
    } else {
        HASH_ADD(hh, R.plain, key, sizeof e->key, e);
    }
    unlock(mode);
    return r;
}

CUresult lms_free(CUdeviceptr dptr, CUstream stream, int async)
{
    if (!dptr)
        return CUDA_SUCCESS; /* freeing NULL does nothing */
    CUstreamCaptureMode mode = lock();
    lms_block *a = find_containing(dptr);
    int swappable = a && a->addr == dptr;
    plain_entry *e;
    HASH_FIND(hh, R.plain, &dptr, sizeof dptr, e);
    if (e)
        HASH_DEL(R.plain, e); /* this call frees it: no other may */
    else if (swappable)
        forget(a, stream, async);
    unlock(mode);
    if (e)
        return free_plain(e, stream, async);
    if (a && !swappable)
        return CUDA_ERROR_INVALID_VALUE; /* inside an allocation, not its start */
    if (!swappable)
        return real_free(dptr, stream, async);
    /* As the driver's cuMemFree does, wait for the whole device: programs rely on it, to
     * read zero-copy results say. Then the allocation's last uses are done. */
    CUresult r = async ? CUDA_SUCCESS : lms_real.cuCtxSynchronize();
    mode = lock();
    reap_pending(-1, 0);
    unlock(mode);
    return r;
}

CUresult lms_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode mode = lock();
    int d;
    CUresult r = current_device(&d);
    if (r == CUDA_SUCCESS) {
        const lms_device *ds = &R.dev[d];
        /* swap: the cache's capacity, device plus host backing; cap: the soft limit. */
        size_t total = ds->soft_limit + (swapping() ? lms_opt.HOST_LIMIT_MB.value : 0);
        size_t used = swapping() ? ds->demanded : ds->resident;
        *total_bytes = total;
        *free_bytes = total > used ? total - used : 0;
    }
    unlock(mode);
    return r;
}

CUresult lms_vmm_create(CUmemGenericAllocationHandle *handle, size_t size,
                        const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        prop->location.id < 0 || prop->location.id >= LMS_MAX_DEVICES)
        return lms_real.cuMemCreate(handle, size, prop, flags);
    int d = prop->location.id;
    CUstreamCaptureMode mode = lock();
    CUresult r = CUDA_SUCCESS;
    if (!R.dev[d].ready) {
        int current;
        r = current_device(&current); /* readies the current device, the usual case */
        if (r == CUDA_SUCCESS && !R.dev[d].ready)
            r = CUDA_ERROR_INVALID_DEVICE;
    }
    if (r == CUDA_SUCCESS && (r = make_room(d, size, "limit", NULL, NULL)) == CUDA_ERROR_OUT_OF_MEMORY)
        r = out_of_memory(d, size);
    if (r == CUDA_SUCCESS) {
        while ((r = lms_real.cuMemCreate(handle, size, prop, flags)) == CUDA_ERROR_OUT_OF_MEMORY &&
               evict_for_retry(d))
            ;
    }
    plain_entry *e = NULL;
    if (r == CUDA_SUCCESS && !(e = calloc(1, sizeof *e))) {
        lms_real.cuMemRelease(*handle);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (r == CUDA_SUCCESS) {
        *e = (plain_entry){ .key = *handle, .bytes = size, .device = d };
        HASH_ADD(hh, R.own_vmm, key, sizeof e->key, e);
        counted_in(d, size, size);
    }
    unlock(mode);
    return r;
}

CUresult lms_vmm_release(CUmemGenericAllocationHandle handle)
{
    CUstreamCaptureMode mode = lock();
    CUresult r = lms_real.cuMemRelease(handle);
    plain_entry *e;
    HASH_FIND(hh, R.own_vmm, &handle, sizeof handle, e);
    if (r == CUDA_SUCCESS && e) {
        lms_device *ds = &R.dev[e->device];
        ds->resident -= e->bytes;
        ds->demanded -= e->bytes;
        ds->live--;
        HASH_DEL(R.own_vmm, e);
        free(e);
    }
    unlock(mode);
    return r;
}

/* ---- calls ---- */

int lms_call_make_room(void)
{
    if (!swapping())
        return 0;
    CUstreamCaptureMode mode = lock();
    int d;
    int freed = current_device(&d) == CUDA_SUCCESS && evict_for_retry(d);
    unlock(mode);
    return freed;
}

void lms_call_init(lms_call *call, CUstream stream, const char *what)
{
    call->stream = stream;
    call->capturing = 0;
    call->uses_any = 0;
    call->what = what;
    call->ref_count = call->held_count = 0;
    call->ref_cap = call->held_cap = LMS_CALL_INLINE;
    call->refs = call->inline_refs;
    call->held = call->inline_held;
}

/* Doubles an array that starts in inline storage. Returns 0 when memory is short. */
static int grow(void **array, const void *inline_array, size_t *cap, size_t elem)
{
    void *grown = *array == inline_array ? malloc(*cap * 2 * elem) : realloc(*array, *cap * 2 * elem);
    if (!grown)
        return 0;
    if (*array == inline_array)
        memcpy(grown, inline_array, *cap * elem);
    *array = grown;
    *cap *= 2;
    return 1;
}

void lms_call_ref(lms_call *call, CUdeviceptr addr, size_t bytes, int whole_write)
{
    if (call->ref_count == call->ref_cap &&
        !grow((void **)&call->refs, call->inline_refs, &call->ref_cap, sizeof *call->refs))
        return; /* missed: the host-mapped fallback still serves it */
    call->refs[call->ref_count++] = (lms_ref){ addr, bytes ? bytes : 1, whole_write };
}

/* Pins a for the call (once); whole_write stays set only if every reference writes all of it. */
static void hold(lms_call *call, lms_block *a, int whole_write)
{
    for (size_t i = 0; i < call->held_count; i++)
        if (call->held[i].alloc == a) {
            call->held[i].whole_write &= whole_write;
            return;
        }
    if (call->held_count == call->held_cap &&
        !grow((void **)&call->held, call->inline_held, &call->held_cap, sizeof *call->held))
        return;
    call->held[call->held_count++] = (lms_held){ a, whole_write, 0 };
    a->pins++;
}

CUresult lms_call_begin(lms_call *call)
{
    if (!swapping() || (call->ref_count == 0 && !call->uses_any))
        return CUDA_SUCCESS;
    call->capturing = lms_graph_capturing(call->stream);
    CUstreamCaptureMode mode = lock();
    for (size_t i = 0; i < call->ref_count; i++) {
        const lms_ref *ref = &call->refs[i];
        lms_block *a = find_containing(ref->addr);
        /* A captured call writes only when its graph runs: until then the bytes must stay. */
        if (a)
            hold(call, a, ref->whole_write && !call->capturing && ref->addr == a->addr &&
                              ref->bytes >= a->size);
        /* A range reaching past the allocation that holds its start touches later ones. */
        if (ref->bytes > 1)
            for (size_t j = upper_bound(ref->addr);
                 j < R.count && R.by_addr[j]->addr < ref->addr + ref->bytes; j++)
                hold(call, R.by_addr[j], 0);
    }
    CUresult r = CUDA_SUCCESS;
    uint64_t step = ++R.step;
    uint64_t stall_start = lms_stats_now();
    int stalled = 0;
    for (size_t i = 0; i < call->held_count && r == CUDA_SUCCESS; i++) {
        lms_block *a = call->held[i].alloc;
        if (a->resident)
            continue;
        stalled = 1;
        r = restore(a, call->held[i].whole_write, &call->held[i].restored_blind);
        if (r == CUDA_ERROR_OUT_OF_MEMORY)
            r = out_of_memory(a->device, a->padded);
    }
    if (stalled)
        lms_stats_stall(lms_stats_now() - stall_start);
    for (size_t i = 0; i < call->held_count; i++)
        lms_swap_wait_restored(call->held[i].alloc, call->stream, call->capturing);
    uint64_t now = lms_stats_now();
    uint64_t inline_addrs[LMS_CALL_INLINE];
    uint64_t *addrs = call->held_count <= LMS_CALL_INLINE ? inline_addrs
                                                          : malloc(call->held_count * sizeof *addrs);
    for (size_t i = 0; i < call->held_count; i++) {
        lms_policy_used(R.policy, call->held[i].alloc->addr, step);
        call->held[i].alloc->last_use_ns = now;
        if (addrs)
            addrs[i] = call->held[i].alloc->addr;
    }
    if (addrs && call->capturing)
        lms_graph_captured(call->stream, addrs, call->held_count, call->uses_any);
    else if (addrs)
        lms_trace_launch_uses(call->what, (uint64_t)(uintptr_t)call->stream, step, addrs,
                              call->held_count);
    if (addrs != inline_addrs)
        free(addrs);
    unlock(mode);
    return r;
}

void lms_call_end(lms_call *call, CUresult result)
{
    if (call->held_count || call->uses_any) {
        CUstreamCaptureMode mode = lock();
        /* Captured work runs at cuGraphLaunch, which records its uses then. */
        for (size_t i = 0; i < call->held_count; i++) {
            lms_block *a = call->held[i].alloc;
            if (call->held[i].restored_blind)
                lms_swap_settle(&R.dev[a->device], a, result == CUDA_SUCCESS);
            if (!call->capturing)
                lms_swap_record_use(&a->uses, call->stream);
            a->pins--;
        }
        if (call->uses_any && !call->capturing)
            lms_swap_record_use(&R.any_uses, call->stream);
        unlock(mode);
    }
    if (call->refs != call->inline_refs)
        free(call->refs);
    if (call->held != call->inline_held)
        free(call->held);
}

/* ---- start-up, fork, exit ---- */

void lms_residency_fork_lock(void) { pthread_mutex_lock(&R.lock); }
void lms_residency_fork_unlock(void) { pthread_mutex_unlock(&R.lock); }

static void at_exit(void)
{
    lms_stats_print();
}

void lms_residency_start(void)
{
    R.policy = lms_policy_create(lms_policy_names[lms_opt.POLICY.value]);
    atexit(at_exit);
}
