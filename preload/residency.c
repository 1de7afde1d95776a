/* The residency manager (see residency.h and the README's "Residency" section).
 *
 * Locks. An eviction on one device must never stall launches on another, so each device has
 * a lock of its own (lms_device.lock) that guards its state, its allocations' blocks (every
 * field that changes), its lists (evictions in flight, pending frees, backing to map) and
 * its planned evictions. The table of swappable allocations of every device (by_addr), the
 * small allocations and the program's own VMM handles have the table lock, held only to look
 * up, insert or remove, never across a driver call that waits. The host backing pool has its
 * own lock in swap.c, statistics are atomic, the trace and the graphs lock their own.
 *
 * Order: device locks in ascending device order, then the table lock, then the pool's (and
 * the trace's, the graphs'). A call that touches several devices (a copy between two, a kernel
 * with pointers on both, a launch whose parameters could not be read) takes the locks of all
 * of them at once: it finds their devices in the table, takes their locks, and looks again,
 * until no new device turns up. Each thread knows which device locks it holds (held_devices),
 * so that making host backing, which takes ~50 ms per 256 MiB, releases them all and takes
 * them again in order; its caller then looks afresh, as it always had to.
 *
 * A block is freed only under its device's lock, after it left the table under the table
 * lock: a block found in the table stays valid while the table lock is held, and after that
 * while its device's lock is.
 *
 * Waits: the host waits with a device's lock held only when that device's memory is needed at
 * once (make_room's wait for the oldest eviction or free, and keep_resident's), and then with
 * no other lock: other devices go on meanwhile. A call whose allocations lie on several
 * devices first waits for the eviction's copy with every lock released (as for making
 * backing), then reaps it with its locks. During the program's own waits (lms_host_waits)
 * liblms holds no lock. */
#include "preload/residency.h"

#include "policy/policy.h"
#include "preload/graphs.h"
#include "preload/real_driver.h"
#include "preload/log.h"
#include "preload/stats.h"
#include "preload/step_times.h"
#include "preload/swap.h"
#include "preload/trace.h"

#include <pthread.h>
#include <stdatomic.h>
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
/* Prefetches go this far ahead, in bytes brought back before they are needed: a quarter of the
 * soft limit. On the simulated H100 it did best of 1/32 to 1/2 where swapping bounds the run
 * (cifar10_full at 2x and 4x the cap); further ahead evicts more than it hides. */
#define PREFETCH_WINDOW_SHARE 4
/* The plan's evictions wait in liblms while an eighth of the soft limit is in flight, and at
 * most PLANNED_MAX of them. */
#define PLANNED_IN_FLIGHT_SHARE 8
#define PLANNED_MAX 256
/* Without LMS_EXCLUDE_MB, device memory left to the driver beyond what is in use when liblms
 * first sees the device (kernels' local memory, lazily loaded modules): 256 MiB, or 1/16 of a
 * smaller device. The options table says so. */
#define DRIVER_MARGIN_MAX ((size_t)256 << 20)
/* A program that retries a failing allocation in a loop gets one dump per interval. */
#define OOM_DUMP_INTERVAL_NS (2 * 1000000000ull)

static struct {
    lms_device dev[LMS_MAX_DEVICES];  /* each with its lock */
    pthread_mutex_t table_lock;       /* guards the three below */
    lms_block **by_addr;   /* swappable allocations of every device, sorted by address */
    size_t count, cap;
    plain_entry *plain;
    plain_entry *own_vmm;
    _Atomic uint64_t step;
    _Atomic uint64_t oom_dumped_ns;  /* when the last out-of-memory dump was written; 0: never */
    size_t reserved_offset[LMS_MAX_DEVICES]; /* where the next range goes in the device's window */
} R = { .table_lock = PTHREAD_MUTEX_INITIALIZER };

/* The device locks the calling thread holds, a bit per device. */
static _Thread_local uint32_t held_devices;
/* The thread ran out of memory: the live allocations are dumped once it holds no lock. */
static _Thread_local int oom_dump_wanted;

#define DEVICE_BIT(d) ((uint32_t)1 << (d))
#define ALL_DEVICES ((uint32_t)((1ull << LMS_MAX_DEVICES) - 1))
_Static_assert(LMS_MAX_DEVICES <= 32, "held_devices has a bit per device");

/* How far making room may go: only what is free or coming back already; also queueing
 * evictions; also waiting for them. */
typedef enum room_mode { ROOM_FREE, ROOM_EVICT, ROOM_WAIT } room_mode;

static int swapping(void) { return lms_opt.MODE.value == LMS_MODE_SWAP; }

/* liblms's own waits and queries are not the program's: while a stream captures a graph they
 * must not count as the "potentially unsafe" calls that a thread's capture mode forbids, or
 * they would invalidate the capture. So the calling thread works under the lock in relaxed
 * mode; unlock gives it back the mode that lock returned (MODE_KEPT: the exchange failed, the
 * thread kept its own). */
#define MODE_KEPT ((CUstreamCaptureMode)-1)

/* Sets the calling thread's capture mode to *mode and returns its old one there; a failed
 * exchange is tried again once. Returns whether it took. */
static int exchange_capture_mode(CUstreamCaptureMode *mode)
{
    CUstreamCaptureMode wanted = *mode;
    for (int attempt = 0; lms_real.cuThreadExchangeStreamCaptureMode && attempt < 2; attempt++) {
        *mode = wanted;
        if (lms_real.cuThreadExchangeStreamCaptureMode(mode) == CUDA_SUCCESS)
            return 1;
    }
    return 0;
}

/* Entering liblms from the program's call, and leaving it with no lock held. */
static CUstreamCaptureMode enter(void)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (!exchange_capture_mode(&mode))
        mode = MODE_KEPT;
    return mode;
}

static void walk_live(const char *reason);

static void leave(CUstreamCaptureMode mode)
{
    if (oom_dump_wanted) {
        oom_dump_wanted = 0;
        walk_live("oom"); /* into the trace when one is recorded, else to stderr */
    }
    if (mode != MODE_KEPT)
        exchange_capture_mode(&mode);
}

/* Takes the locks of the devices named, in ascending order; the thread holds none. */
static void lock_devices(uint32_t devices)
{
    for (int d = 0; d < LMS_MAX_DEVICES; d++)
        if (devices & DEVICE_BIT(d))
            pthread_mutex_lock(&R.dev[d].lock);
    held_devices = devices;
}

/* Maps the backing of the allocations of device d evicted since its lock was taken at their
 * addresses. It costs a cuMemSetAccess on host memory each: done last, it overlaps the restore
 * copies queued meanwhile instead of delaying them, and it is done before the program's next
 * call. */
static void map_evicted(int d)
{
    for (lms_block *a = R.dev[d].to_map; a; a = a->next_to_map)
        if (a->place == LMS_EVICTED && !a->host_mapped && !a->freed && lms_swap_map_host(a) != CUDA_SUCCESS)
            lms_log(LMS_LOG_ERROR, a->device, "cannot map the host backing at 0x%llx after its eviction",
                    (unsigned long long)a->addr);
    R.dev[d].to_map = NULL;
}

/* Gives back every device lock the thread holds. */
static void unlock_devices(void)
{
    for (int d = LMS_MAX_DEVICES; d-- > 0;)
        if (held_devices & DEVICE_BIT(d)) {
            map_evicted(d);
            pthread_mutex_unlock(&R.dev[d].lock);
        }
    held_devices = 0;
}

static void table_lock(void) { pthread_mutex_lock(&R.table_lock); }
static void table_unlock(void) { pthread_mutex_unlock(&R.table_lock); }

/* ---- the sorted table of swappable allocations: under the table lock ---- */

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

/* The table index of a span's first piece (its pieces follow it there). */
static size_t first_piece(const lms_span *span)
{
    return upper_bound(span->base) - 1;
}

/* Whether table index i holds a piece of span: from first_piece on, while this holds. */
static int in_span(size_t i, const lms_span *span)
{
    return i < R.count && R.by_addr[i]->span == span;
}

/* The block at addr, looked up under the table lock: valid after it only where the caller
 * holds its device's lock. */
static lms_block *block_at(CUdeviceptr addr)
{
    table_lock();
    lms_block *a = find_containing(addr);
    table_unlock();
    return a;
}

/* The block at addr of device d (NULL if there is none, or it is another device's): with d's
 * lock held, it stays valid. */
static lms_block *block_of_device_at(CUdeviceptr addr, int d)
{
    table_lock();
    lms_block *a = find_containing(addr);
    if (a && a->device != d)
        a = NULL;
    table_unlock();
    return a;
}

/* The block at addr with its device's lock taken (the thread holds none), or NULL with none
 * taken. */
static lms_block *lock_block_at(CUdeviceptr addr)
{
    for (;;) {
        table_lock();
        lms_block *a = find_containing(addr);
        int d = a ? a->device : -1;
        table_unlock();
        if (d < 0)
            return NULL;
        lock_devices(DEVICE_BIT(d));
        if ((a = block_of_device_at(addr, d)))
            return a;
        unlock_devices(); /* freed meanwhile, or another device's now: look again */
    }
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

/* The current context's device; asked without a lock. */
static CUresult current_device(int *device)
{
    CUdevice d;
    CUresult r = lms_real.cuCtxGetDevice(&d);
    if (r != CUDA_SUCCESS)
        return r;
    if (d < 0 || d >= LMS_MAX_DEVICES)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = d;
    return CUDA_SUCCESS;
}

/* Readies the current context's device d, whose lock the thread holds. */
static CUresult ready_device(int d)
{
    lms_device *ds = &R.dev[d];
    CUresult r;
    if (ds->ready)
        return swapping() && !ds->ctx ? lms_swap_streams_create(ds) : CUDA_SUCCESS;

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
        if ((r = lms_swap_streams_create(ds)))
            return r;
    }
    ds->total = total;
    ds->soft_limit = soft_limit(d, total);
    ds->granularity = granularity;
    ds->host_vmm = host_vmm;
    ds->policy = lms_policy_create(lms_policy_names[lms_opt.POLICY.value]);
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

/* The dump of live allocations (LMS_DUMP_SIGNAL, and out of memory), with every lock: the
 * thread holds none. */
static void walk_live(const char *reason)
{
    lock_devices(ALL_DEVICES);
    table_lock();
    lms_trace_dump_begin(reason);
    for (size_t i = 0; i < R.count;) {
        const lms_block *a = R.by_addr[i];
        int resident = 1; /* every piece */
        uint64_t last_use_ns = 0;
        for (; in_span(i, a->span); i++) {
            resident &= R.by_addr[i]->place != LMS_EVICTED;
            last_use_ns = R.by_addr[i]->last_use_ns > last_use_ns ? R.by_addr[i]->last_use_ns : last_use_ns;
        }
        lms_trace_dump_record(&(lms_trace_live){ a->device, a->span->base, a->span->size, resident,
                                                 a->created_ns, last_use_ns, a->stack });
    }
    for (const plain_entry *e = R.plain; e; e = e->hh.next)
        lms_trace_dump_record(&(lms_trace_live){ e->device, e->key, e->bytes, true,
                                                 e->created_ns, 0, e->stack });
    lms_trace_dump_end();
    table_unlock();
    unlock_devices();
}

void lms_residency_walk_live(void *ctx, const char *reason)
{
    (void)ctx;
    CUstreamCaptureMode mode = enter();
    walk_live(reason);
    leave(mode);
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

/* A handle the driver failed to release still holds device memory: it stays a spare, and
 * the call that needed the room fails (the next one may release it). */
static CUresult release_spare(lms_device *ds)
{
    lms_spare_handle *spare = ds->spares;
    CUresult r = lms_real.cuMemRelease(spare->handle);
    if (r != CUDA_SUCCESS)
        return r;
    ds->spares = spare->next;
    ds->spare -= spare->bytes;
    free(spare);
    return CUDA_SUCCESS;
}

/* ---- eviction: queued, finished once its copy has completed ---- */

/* A launch whose parameters could not be read may use any allocation: no mapping changes
 * before it has completed. Returns whether that is so; with wait, waits for it first. */
static int unscanned_done(lms_device *ds, int wait)
{
    return lms_swap_uses_done(&ds->unscanned, wait);
}

/* Queues a's eviction: its copy out runs on the copy-out stream once its last uses are done,
 * and its device memory comes back when reap_evictions finds that copy completed.
 * CUDA_ERROR_NOT_READY when the pool has no backing for it. */
static CUresult evict_begin(lms_block *a, const char *reason)
{
    int d = a->device;
    lms_device *ds = &R.dev[d];
    uint64_t start = lms_stats_now();
    CUresult r = lms_swap_out_begin(ds, a, &ds->unscanned);
    if (r == CUDA_ERROR_NOT_READY)
        return r; /* no backing for it: the caller makes one */
    if (r != CUDA_SUCCESS) {
        lms_log(LMS_LOG_SWAP, d, "evict failed: ptr=0x%llx error=%d", (unsigned long long)a->addr, r);
        return r;
    }
    a->place = LMS_EVICTING;
    a->evict_start_ns = start;
    a->next_evicting = NULL;
    if (ds->evicting_last)
        ds->evicting_last->next_evicting = a;
    else
        ds->evicting = a;
    ds->evicting_last = a;
    ds->evicting_bytes += a->padded;
    lms_policy_evicted(ds->policy, a->addr);
    lms_stats_evicted(a->device, reason, a->size, lms_stats_now() - start);
    lms_trace_evict(d, a->addr, a->padded, reason);
    log_figures(LMS_LOG_SWAP, d, "evict", a->addr, a->size);
    return CUDA_SUCCESS;
}

static void unlink_evicting(lms_block *a)
{
    lms_device *ds = &R.dev[a->device];
    lms_block *before = NULL;
    for (lms_block *b = ds->evicting; b != a; b = b->next_evicting)
        before = b;
    if (before)
        before->next_evicting = a->next_evicting;
    else
        ds->evicting = a->next_evicting;
    if (ds->evicting_last == a)
        ds->evicting_last = before;
    ds->evicting_bytes -= a->padded;
}

/* An allocation whose eviction has not finished still has its bytes in its device handle:
 * it is resident again at once, whatever the queued copy out does. */
static void back_to_resident(lms_block *a)
{
    lms_swap_backing_give_back(a); /* the copy-out stream orders its next copy after this one */
    a->place = LMS_RESIDENT;
    lms_stats_taken_back();
    if (!a->freed)
        lms_policy_restored(R.dev[a->device].policy, a->addr);
}

/* A call needs an allocation whose eviction is in flight. */
static void take_back(lms_block *a)
{
    unlink_evicting(a);
    back_to_resident(a);
}

/* Finishes device d's evictions whose copies have completed, oldest first (the copy-out
 * stream completes them in that order); with wait, waits for the oldest. Each device handle
 * becomes a spare; the backing is mapped at the address (LMS_MAP_EVICTED) before the lock
 * goes. Returns how many finished. */
static int reap_evictions(int d, int wait)
{
    lms_device *ds = &R.dev[d];
    int finished = 0;
    while (ds->evicting) {
        lms_block *a = ds->evicting;
        int now = wait && finished == 0;
        if (!lms_swap_out_done(a, now) || !unscanned_done(ds, now))
            break;
        unlink_evicting(a);
        if (lms_swap_out_finish(a) != CUDA_SUCCESS) {
            back_to_resident(a); /* still mapped: nothing came back */
            continue;
        }
        a->place = LMS_EVICTED;
        if (ds->host_vmm && lms_opt.MAP_EVICTED.value && !a->freed) {
            a->next_to_map = ds->to_map;
            ds->to_map = a;
        }
        ds->resident -= a->padded;
        keep_spare(ds, a->dev_handle, a->padded);
        lms_trace_swap(d, a->addr, a->size, LMS_SWAP_OUT, a->evict_start_ns, lms_stats_now(),
                       (uint64_t)(uintptr_t)ds->copy_out);
        trace_counters(d);
        finished++;
    }
    return finished;
}

/* ---- freeing ---- */

static void release(lms_block *a)
{
    lms_device *ds = &R.dev[a->device];
    unscanned_done(ds, 1);
    lms_swap_release(a, 0);
    if (a->place == LMS_RESIDENT) {
        ds->resident -= a->padded;
        if (a->retained) /* the program may hold it still: no other allocation gets it */
            lms_real.cuMemRelease(a->dev_handle);
        else
            keep_spare(ds, a->dev_handle, a->padded);
    }
    free(a);
}

/* Releases freed allocations of device d whose last uses are done; with wait, waits for them.
 * One whose eviction has not finished waits for reap_evictions. Returns how many bytes of
 * device memory came back. */
static size_t reap_pending(int d, int wait)
{
    size_t freed = 0;
    for (lms_block **p = &R.dev[d].pending; *p;) {
        lms_block *a = *p;
        /* A call still in flight on another thread may hold it: a program's race, but
         * liblms must not free what that call will touch. */
        if (a->pins == 0 && a->place != LMS_EVICTING &&
            lms_swap_uses_done(&a->uses, wait)) {
            *p = a->next_pending;
            freed += a->place == LMS_RESIDENT ? a->padded : 0;
            release(a);
        } else {
            p = &a->next_pending;
        }
    }
    return freed;
}

/* ---- making room ---- */

/* Host backing for evicting a, made with every device lock the thread holds released (and
 * taken again after): whoever called must look at the table afresh afterwards. */
static CUresult make_backing(const lms_block *a)
{
    int d = a->device;
    size_t bytes = a->padded;
    lms_backing *unwanted;
    CUresult r = lms_swap_backing_reserve(d, bytes, &unwanted);
    if (r != CUDA_SUCCESS)
        return r;
    lms_backing *b;
    uint32_t held = held_devices;
    unlock_devices();
    r = lms_swap_backing_create(&R.dev[d], d, bytes, unwanted, &b);
    lock_devices(held);
    lms_swap_backing_add(bytes, b);
    return r;
}

static int keep_victim(void *ctx, lms_alloc_id id)
{
    lms_block *a = block_of_device_at((CUdeviceptr)id, *(int *)ctx);
    return !a || a->pins > 0 || a->retained || a->place != LMS_RESIDENT;
}

/* Queues the evictions of the policy's victims for `bytes` of device d. CUDA_ERROR_NOT_FOUND
 * when there is none. It may release the lock to make host backing, and then returns at once
 * (CUDA_SUCCESS): the caller looks afresh. */
static CUresult evict_victims(int d, size_t bytes, const char *reason)
{
    lms_alloc_id victims[MAX_VICTIMS];
    size_t n = lms_policy_choose_victims(R.dev[d].policy, bytes, keep_victim, &d, victims, MAX_VICTIMS);
    if (n == 0)
        return CUDA_ERROR_NOT_FOUND;
    for (size_t i = 0; i < n; i++) {
        lms_block *a = block_at((CUdeviceptr)victims[i]);
        CUresult r = evict_begin(a, reason);
        if (r == CUDA_ERROR_NOT_READY) /* no backing for it in the pool */
            return make_backing(a);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

/* Device bytes of device d that come back without another eviction: those of the evictions
 * in flight, and of freed allocations still resident. */
static size_t coming_back(int d)
{
    size_t bytes = R.dev[d].evicting_bytes;
    for (const lms_block *a = R.dev[d].pending; a; a = a->next_pending)
        if (a->place == LMS_RESIDENT)
            bytes += a->padded;
    return bytes;
}

/* Waits for device d's oldest eviction with every lock the thread holds released, on a mark
 * of d's own (lms_swap_out_mark), so that other threads' calls go on meanwhile, and takes the
 * locks again: the caller reaps and looks afresh. Returns the wait's result;
 * CUDA_ERROR_NOT_READY when nothing is in flight or no mark could be made. */
static CUresult await_eviction_unlocked(int d)
{
    lms_device *ds = &R.dev[d];
    CUevent mark;
    CUresult r = ds->evicting ? lms_swap_out_mark(ds, ds->evicting, &mark) : CUDA_ERROR_NOT_READY;
    if (r != CUDA_SUCCESS)
        return r;
    uint32_t held = held_devices;
    unlock_devices();
    r = lms_real.cuEventSynchronize(mark);
    lock_devices(held);
    return r;
}

/* Before the host waits for device d's memory, which it may do with d's lock held: a call that
 * holds other devices' locks too (a call on several devices) waits for the copy without them,
 * so that those devices' calls go on meanwhile. */
static void await_eviction_alone(int d)
{
    if (held_devices != DEVICE_BIT(d))
        await_eviction_unlocked(d);
}

/* Frees device memory until `bytes` more fit under the soft limit of device d: what is free
 * already first (finished evictions, freed allocations whose uses are done, spare handles),
 * then, from ROOM_EVICT on, queued evictions of the policy's victims; with ROOM_WAIT the host
 * waits for the oldest eviction or free when nothing else can give the memory now. Short of
 * the memory otherwise: CUDA_ERROR_NOT_READY. With reuse, a spare handle of exactly `bytes` is
 * taken instead when there is one (*reused). It may release the lock while it makes host
 * backing. */
static CUresult make_room(int d, size_t bytes, const char *reason, room_mode mode,
                          CUmemGenericAllocationHandle *reuse, int *reused)
{
    lms_device *ds = &R.dev[d];
    for (;;) {
        if (reuse && take_spare(ds, bytes, reuse)) {
            *reused = 1;
            return CUDA_SUCCESS;
        }
        if (ds->resident + ds->spare + bytes <= ds->soft_limit)
            return CUDA_SUCCESS;
        if (reap_evictions(d, 0) || reap_pending(d, 0) > 0)
            continue;
        if (ds->spares) {
            CUresult r = release_spare(ds);
            if (r != CUDA_SUCCESS)
                return r;
            continue;
        }
        size_t short_by = ds->resident + bytes - ds->soft_limit, coming = coming_back(d);
        if (mode >= ROOM_EVICT && swapping() && short_by > coming) {
            CUresult r = evict_victims(d, short_by - coming, reason);
            if (r == CUDA_SUCCESS)
                continue;
            if (r != CUDA_ERROR_NOT_FOUND)
                return r;
        }
        if (mode < ROOM_WAIT)
            return CUDA_ERROR_NOT_READY;
        await_eviction_alone(d);
        if (reap_evictions(d, 1) || reap_pending(d, 1) > 0)
            continue;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
}

/* Out of memory below the soft limit (other processes use the device too): frees one more
 * piece of device memory, evicting if need be (making host backing for it may release the
 * lock). Returns 0 when nothing is left to free. */
static int evict_for_retry(int d)
{
    lms_device *ds = &R.dev[d];
    for (;;) {
        if (reap_evictions(d, 0) || reap_pending(d, 0) > 0)
            return 1;
        if (ds->spares)
            return release_spare(ds) == CUDA_SUCCESS;
        if (!ds->evicting && swapping()) {
            CUresult r = evict_victims(d, 1, "oom-retry");
            if (r == CUDA_SUCCESS)
                continue;
            if (r != CUDA_ERROR_NOT_FOUND)
                return 0;
        }
        await_eviction_alone(d);
        return reap_evictions(d, 1) || reap_pending(d, 1) > 0;
    }
}

/* Device handles are made exportable as a file descriptor, as NCCL and RDMA registration ask
 * of a handle the program retains (cuMemRetainAllocationHandle); on a device that refuses the
 * type, plain from then on. */
static CUresult create_exportable(int d, size_t bytes, CUmemGenericAllocationHandle *h)
{
    static int plain_only[LMS_MAX_DEVICES];
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { CU_MEM_LOCATION_TYPE_DEVICE, d },
                                 .requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR };
    CUresult r = plain_only[d] ? CUDA_ERROR_NOT_SUPPORTED : lms_real.cuMemCreate(h, bytes, &prop, 0);
    if (r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_ERROR_INVALID_VALUE) {
        plain_only[d] = 1;
        prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
        r = lms_real.cuMemCreate(h, bytes, &prop, 0);
    }
    return r;
}

static CUresult create_device_handle(int d, size_t bytes, CUmemGenericAllocationHandle *h)
{
    CUresult r;
    while ((r = create_exportable(d, bytes, h)) == CUDA_ERROR_OUT_OF_MEMORY &&
           evict_for_retry(d))
        ;
    return r;
}

/* A device handle of `bytes` for device d, within its soft limit: a spare, or a new one. */
static CUresult device_handle(int d, size_t bytes, const char *reason, room_mode mode,
                              CUmemGenericAllocationHandle *h)
{
    int reused = 0;
    CUresult r = make_room(d, bytes, reason, mode, h, &reused);
    return r == CUDA_SUCCESS && !reused ? create_device_handle(d, bytes, h) : r;
}

/* The restore copy is only queued: the calls that use a wait for it on their streams. The
 * trace shows the time it took to issue. *blind: restored without its bytes (whole_write),
 * by this call. mode: how far making room for it may go; short of ROOM_WAIT it is a prefetch,
 * which never waits (CUDA_ERROR_NOT_READY instead). The lock may be released meanwhile, and
 * another call restore a. */
static CUresult restore(lms_block *a, int whole_write, room_mode mode, int *blind)
{
    int d = a->device;
    lms_device *ds = &R.dev[d];
    *blind = 0;
    if (a->place == LMS_EVICTING) {
        take_back(a);
        return CUDA_SUCCESS;
    }
    uint64_t start = lms_stats_now();
    CUmemGenericAllocationHandle h;
    int demand = mode == ROOM_WAIT;
    CUresult r = device_handle(d, a->padded, demand ? "demand" : "prefetch", mode, &h);
    if (r == CUDA_SUCCESS && a->place != LMS_EVICTED) {
        keep_spare(ds, h, a->padded);
        return CUDA_SUCCESS;
    }
    /* Its backing mapped at its address goes: nothing queued may still use it there. */
    if (r == CUDA_SUCCESS && a->host_mapped &&
        !(lms_swap_uses_done(&a->uses, demand) && unscanned_done(ds, demand))) {
        keep_spare(ds, h, a->padded);
        return CUDA_ERROR_NOT_READY;
    }
    if (r == CUDA_SUCCESS && (r = lms_swap_in(ds, a, h, whole_write)) != CUDA_SUCCESS)
        keep_spare(ds, h, a->padded);
    if (r != CUDA_SUCCESS) {
        lms_log(LMS_LOG_SWAP, d, "restore failed: ptr=0x%llx error=%d", (unsigned long long)a->addr, r);
        return r;
    }
    a->place = LMS_RESIDENT;
    ds->resident += a->padded;
    *blind = whole_write;
    lms_policy_restored(ds->policy, a->addr);
    uint64_t end = lms_stats_now();
    lms_stats_restored(a->device, whole_write ? 0 : a->size, end - start);
    if (!whole_write)
        lms_trace_swap(d, a->addr, a->size, LMS_SWAP_IN, start, end, (uint64_t)(uintptr_t)ds->copy_in);
    trace_counters(d);
    log_figures(LMS_LOG_SWAP, d, "restore", a->addr, a->size);
    return CUDA_SUCCESS;
}

static CUresult out_of_memory(int d, size_t bytes)
{
    lms_stats_oom();
    lms_trace_oom(d, bytes);
    uint64_t now = lms_stats_now(), dumped = atomic_load(&R.oom_dumped_ns);
    if ((dumped == 0 || now - dumped >= OOM_DUMP_INTERVAL_NS) &&
        atomic_compare_exchange_strong(&R.oom_dumped_ns, &dumped, now))
        oom_dump_wanted = 1; /* once the thread holds no lock: it takes them all */
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
    CUresult r = make_room(d, bytes, "limit", ROOM_WAIT, NULL, NULL);
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
    table_lock();
    HASH_ADD(hh, R.plain, key, sizeof e->key, e);
    table_unlock();
    counted_in(d, bytes, bytes);
    R.dev[d].plain += bytes;
    return CUDA_SUCCESS;
}

/* Host backing for a new allocation that does not fit on the device: its bytes start there. */
static CUresult backing_for(lms_block *a)
{
    CUresult r = CUDA_SUCCESS;
    while (r == CUDA_SUCCESS && !lms_swap_backing_take(a))
        r = make_backing(a); /* the locks go meanwhile: another may take it */
    return r;
}

/* Without host VMM an allocation lives on the device or nowhere: one larger than the soft limit
 * leaves beside the small allocations never fits. An arena sized from cuMemGetInfo asks for one
 * (its total counts the host backing in swap mode): the log says so, whatever the level. */
static CUresult never_fits(int d, size_t bytes)
{
    const lms_device *ds = &R.dev[d];
    lms_log(LMS_LOG_ERROR, d,
            "out of memory: an allocation of %zu bytes cannot be resident beside %zu bytes of small "
            "allocations within the soft limit of %zu bytes, and without host VMM it cannot live in "
            "host memory; cuMemGetInfo's total counts LMS_HOST_LIMIT_MB too: size arenas from the "
            "soft limit, or lower LMS_EXCLUDE_MB",
            bytes, ds->plain, ds->soft_limit);
    return out_of_memory(d, bytes);
}

/* The bytes of one piece of a swappable allocation on device d: LMS_PIECE_MB rounded up to
 * the granularity, or 0 (unsplit). */
static size_t piece_bytes(const lms_device *ds)
{
    size_t piece = lms_opt.PIECE_MB.value;
    return piece ? (piece + ds->granularity - 1) / ds->granularity * ds->granularity : 0;
}

/* Takes a freed allocation's piece out of the table and the policy, to be released once its
 * last uses are done. */
static void forget_piece(lms_block *a, CUstream stream, int async)
{
    if (async)
        lms_swap_record_use(&a->uses, stream);
    lms_device *ds = &R.dev[a->device];
    lms_policy_freed(ds->policy, a->addr);
    a->freed = 1;
    ds->demanded -= a->size;
    a->next_pending = ds->pending;
    ds->pending = a;
}

/* Every piece of a span still in the table (all, or all made so far), which follow one
 * another from its first: out of the table first, in their order, then forgotten. */
static void forget_pieces(lms_span *span, CUstream stream, int async)
{
    lms_block *pieces = NULL, **last = &pieces;
    table_lock();
    size_t first = first_piece(span);
    while (in_span(first, span)) {
        lms_block *a = R.by_addr[first];
        table_remove(a);
        *last = a;
        last = &a->next_pending;
    }
    *last = NULL;
    table_unlock();
    while (pieces) {
        lms_block *a = pieces;
        pieces = a->next_pending;
        forget_piece(a, stream, async);
    }
}

/* A new piece is resident; one that cannot be, beside the small allocations, or finds no room,
 * starts in host memory mapped at its address (with host VMM only). It goes into the table and
 * the policy, counted in the device's figures. */
static CUresult add_piece(int d, lms_span *span, size_t offset, size_t bytes)
{
    lms_device *ds = &R.dev[d];
    size_t padded = (bytes + ds->granularity - 1) / ds->granularity * ds->granularity;
    lms_block *a = calloc(1, sizeof *a);
    if (!a)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *a = (lms_block){ .addr = span->base + offset, .size = bytes, .padded = padded, .span = span,
                      .device = d, .place = LMS_RESIDENT };
    CUresult r = ds->host_vmm && span->reserved + ds->plain > ds->soft_limit
                     ? CUDA_ERROR_OUT_OF_MEMORY
                     : device_handle(d, padded, "limit", ROOM_WAIT, &a->dev_handle);
    if (r == CUDA_ERROR_OUT_OF_MEMORY && ds->host_vmm) {
        a->place = LMS_EVICTED;
        r = backing_for(a);
    }
    if (r == CUDA_SUCCESS) {
        if ((r = a->place == LMS_RESIDENT ? lms_swap_map(a->addr, padded, a->dev_handle, d)
                                          : lms_swap_map_host(a)) == CUDA_SUCCESS) {
            table_lock();
            int inserted = table_insert(a);
            table_unlock();
            if (!inserted) {
                lms_real.cuMemUnmap(a->addr, padded);
                r = CUDA_ERROR_OUT_OF_MEMORY;
            }
        }
        if (r != CUDA_SUCCESS && a->place == LMS_RESIDENT)
            keep_spare(ds, a->dev_handle, padded);
        if (r != CUDA_SUCCESS && a->place == LMS_EVICTED)
            lms_swap_backing_give_back(a);
    }
    if (r != CUDA_SUCCESS) {
        free(a);
        return r;
    }
    span->pieces++;
    a->pins += ds->host_vmm; /* until alloc_swappable has made them all */
    lms_policy_created(ds->policy, a->addr, padded);
    if (a->place == LMS_EVICTED)
        lms_policy_evicted(ds->policy, a->addr);
    a->created_ns = lms_stats_now();
    ds->resident += a->place == LMS_RESIDENT ? padded : 0;
    ds->demanded += bytes;
    return CUDA_SUCCESS;
}

/* Why liblms chooses where its ranges lie. It finds the allocations a launch uses by reading
 * every 64-bit word of its parameters, and a word made of two adjacent 32-bit integers (a count
 * and a channel number; a divider's magic and shift) reads as an address when its upper half
 * is a small number. Without a hint the H100's driver reserved from 0x302000000 up, where the
 * upper half is 3 to 9: there cuDNN's and the trainer's kernels named allocations they never
 * touch, and liblms made each of them resident for the call. So each device asks for a window
 * of its own where the upper half is 0x6a5d and more: an odd number, far from the integers
 * kernels take. A driver that cannot place a range there is asked for one anywhere. */
#define RESERVATION_BASE ((CUdeviceptr)0x6a5d00000000)
#define RESERVATION_WINDOW ((size_t)1 << 38) /* per device: 256 GiB, reused from its start */

static CUresult reserve_range(int d, CUdeviceptr *base, size_t bytes)
{
    lms_device *ds = &R.dev[d];
    if (R.reserved_offset[d] + bytes > RESERVATION_WINDOW)
        R.reserved_offset[d] = 0;
    CUdeviceptr hint = RESERVATION_BASE + (CUdeviceptr)d * RESERVATION_WINDOW + R.reserved_offset[d];
    CUresult r = lms_real.cuMemAddressReserve(base, bytes, ds->granularity, hint, 0);
    if (r != CUDA_SUCCESS)
        r = lms_real.cuMemAddressReserve(base, bytes, ds->granularity, 0, 0);
    if (r == CUDA_SUCCESS)
        R.reserved_offset[d] += bytes;
    return r;
}

/* A new swappable allocation: an address range of its own, and its pieces (one unless
 * LMS_PIECE_MB splits it), each resident or, where there is no room, in host memory. */
static CUresult alloc_swappable(int d, CUdeviceptr *dptr, size_t bytes)
{
    lms_device *ds = &R.dev[d];
    size_t padded = (bytes + ds->granularity - 1) / ds->granularity * ds->granularity;
    size_t piece = piece_bytes(ds);
    if (!piece || piece > padded)
        piece = padded;
    /* Without host VMM a call that uses it needs every piece on the device at once. */
    if (!ds->host_vmm && padded + ds->plain > ds->soft_limit)
        return never_fits(d, padded);
    lms_span *span = calloc(1, sizeof *span);
    if (!span)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *span = (lms_span){ .size = bytes, .reserved = padded };
    CUresult r = reserve_range(d, &span->base, padded);
    if (r != CUDA_SUCCESS) {
        free(span);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? out_of_memory(d, padded) : r;
    }
    /* With host VMM its pieces are pinned while it is made: room for a later one never comes
     * from evicting an earlier one, whose bytes nothing has written yet; past the room there
     * is, the rest start in host memory. Without, that is the only way for them all to exist. */
    for (size_t offset = 0; offset < bytes && r == CUDA_SUCCESS; offset += piece)
        r = add_piece(d, span, offset, bytes - offset < piece ? bytes - offset : piece);
    uint32_t stack = r == CUDA_SUCCESS ? lms_trace_alloc(d, span->base, bytes, 0, true) : 0;
    table_lock();
    for (size_t i = first_piece(span); in_span(i, span); i++) {
        R.by_addr[i]->pins -= ds->host_vmm;
        R.by_addr[i]->stack = stack;
    }
    table_unlock();
    if (r != CUDA_SUCCESS && span->pieces == 0) {
        lms_real.cuMemAddressFree(span->base, span->reserved);
        free(span);
    } else if (r != CUDA_SUCCESS) {
        forget_pieces(span, NULL, 0); /* the range goes with the last of them */
        reap_pending(d, 0);
    }
    if (r != CUDA_SUCCESS) {
        trace_counters(d);
        return r == CUDA_ERROR_OUT_OF_MEMORY ? out_of_memory(d, padded) : r;
    }
    ds->live++;
    lms_stats_demanded(d, ds->demanded, ds->soft_limit);
    trace_counters(d);
    *dptr = span->base;
    return CUDA_SUCCESS;
}

CUresult lms_alloc(CUdeviceptr *dptr, size_t bytes, CUstream stream, int async)
{
    if (!dptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (bytes == 0)
        return lms_real.cuMemAlloc_v2(dptr, bytes);
    CUstreamCaptureMode mode = enter();
    int d;
    CUresult r = current_device(&d);
    if (r == CUDA_SUCCESS) {
        lock_devices(DEVICE_BIT(d));
        r = ready_device(d);
        if (r == CUDA_SUCCESS && swapping() && bytes >= lms_opt.THRESHOLD_KB.value)
            r = alloc_swappable(d, dptr, bytes);
        else if (r == CUDA_SUCCESS)
            r = alloc_plain(d, dptr, bytes, stream, async);
        if (r == CUDA_SUCCESS) {
            lms_stats_alloc();
            log_figures(LMS_LOG_ALLOC, d, "allocate", *dptr, bytes);
        }
        unlock_devices();
    }
    leave(mode);
    return r;
}

/* A freed swappable allocation's pieces are released once their last uses are done. */
static void forget(lms_span *span, int d, CUstream stream, int async)
{
    log_figures(LMS_LOG_ALLOC, d, "free", span->base, span->size);
    lms_trace_free(d, span->base, span->size);
    forget_pieces(span, stream, async);
    R.dev[d].live--;
    trace_counters(d);
}

/* A small allocation goes back to the driver as the program asked, with no lock held:
 * cuMemFree waits for the whole device. Until the driver has it, it still counts. */
static CUresult free_plain(plain_entry *e, CUstream stream, int async)
{
    CUresult r = real_free(e->key, stream, async);
    if (r == CUDA_SUCCESS) {
        lock_devices(DEVICE_BIT(e->device));
        lms_device *ds = &R.dev[e->device];
        ds->resident -= e->bytes;
        ds->plain -= e->bytes;
        ds->demanded -= e->bytes;
        ds->live--;
        log_figures(LMS_LOG_ALLOC, e->device, "free", e->key, e->bytes);
        lms_trace_free(e->device, e->key, e->bytes);
        trace_counters(e->device);
        unlock_devices();
        free(e);
    } else {
        table_lock();
        HASH_ADD(hh, R.plain, key, sizeof e->key, e);
        table_unlock();
    }
    return r;
}

CUresult lms_free(CUdeviceptr dptr, CUstream stream, int async)
{
    if (!dptr)
        return CUDA_SUCCESS; /* freeing NULL does nothing */
    CUstreamCaptureMode mode = enter();
    plain_entry *e;
    table_lock();
    HASH_FIND(hh, R.plain, &dptr, sizeof dptr, e);
    if (e)
        HASH_DEL(R.plain, e); /* this call frees it: no other may */
    table_unlock();
    if (e) {
        CUresult r = free_plain(e, stream, async);
        leave(mode);
        return r;
    }
    lms_block *a = lock_block_at(dptr);
    int swappable = a && a->span->base == dptr, d = a ? a->device : 0;
    if (swappable)
        forget(a->span, d, stream, async);
    if (a)
        unlock_devices();
    leave(mode);
    if (a && !swappable)
        return CUDA_ERROR_INVALID_VALUE; /* inside an allocation, not its start */
    if (!swappable)
        return real_free(dptr, stream, async);
    /* As the driver's cuMemFree does, wait for the whole device: programs rely on it, to
     * read zero-copy results say. Then the allocation's last uses are done. Not while a
     * stream captures: the driver would refuse, and invalidate the capture; the allocation
     * is released once its last uses are done all the same. The allocation is freed already:
     * a wait that fails is tried once more, so that the program hears of an error only when
     * the context itself has failed (the driver's cuMemFree returns that error too). */
    CUresult r = CUDA_SUCCESS;
    if (!async && !lms_graph_captures_under_way() && lms_real.cuCtxSynchronize() != CUDA_SUCCESS)
        r = lms_real.cuCtxSynchronize();
    mode = enter();
    lock_devices(DEVICE_BIT(d));
    reap_evictions(d, 0);
    reap_pending(d, 0);
    unlock_devices();
    leave(mode);
    return r;
}

CUresult lms_mem_get_info(size_t *free_bytes, size_t *total_bytes)
{
    if (!free_bytes || !total_bytes)
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode mode = enter();
    int d;
    CUresult r = current_device(&d);
    if (r == CUDA_SUCCESS) {
        lock_devices(DEVICE_BIT(d));
        if ((r = ready_device(d)) == CUDA_SUCCESS) {
            const lms_device *ds = &R.dev[d];
            /* swap: the cache's capacity, device plus host backing; cap: the soft limit. */
            size_t total = ds->soft_limit + (swapping() ? lms_opt.HOST_LIMIT_MB.value : 0);
            size_t used = swapping() ? ds->demanded : ds->resident;
            *total_bytes = total;
            *free_bytes = total > used ? total - used : 0;
        }
        unlock_devices();
    }
    leave(mode);
    return r;
}

CUresult lms_vmm_create(CUmemGenericAllocationHandle *handle, size_t size,
                        const CUmemAllocationProp *prop, unsigned long long flags)
{
    if (!handle || !prop || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        prop->location.id < 0 || prop->location.id >= LMS_MAX_DEVICES)
        return lms_real.cuMemCreate(handle, size, prop, flags);
    int d = prop->location.id, current = d;
    CUstreamCaptureMode mode = enter();
    /* The current device too: it is readied, the usual case, when d is not yet. */
    CUresult current_known = current_device(&current);
    lock_devices(DEVICE_BIT(d) | (current_known == CUDA_SUCCESS ? DEVICE_BIT(current) : 0));
    CUresult r = CUDA_SUCCESS;
    if (!R.dev[d].ready) {
        r = current_known == CUDA_SUCCESS ? ready_device(current) : current_known;
        if (r == CUDA_SUCCESS && !R.dev[d].ready)
            r = CUDA_ERROR_INVALID_DEVICE;
    }
    if (r == CUDA_SUCCESS && (r = make_room(d, size, "limit", ROOM_WAIT, NULL, NULL)) == CUDA_ERROR_OUT_OF_MEMORY)
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
        table_lock();
        HASH_ADD(hh, R.own_vmm, key, sizeof e->key, e);
        table_unlock();
        counted_in(d, size, size);
        R.dev[d].plain += size;
    }
    unlock_devices();
    leave(mode);
    return r;
}

/* The handle leaves the table before it is released: no other thread's cuMemCreate can
 * get it back from the driver while it is still there. */
CUresult lms_vmm_release(CUmemGenericAllocationHandle handle)
{
    CUstreamCaptureMode mode = enter();
    plain_entry *e;
    table_lock();
    HASH_FIND(hh, R.own_vmm, &handle, sizeof handle, e);
    if (e)
        HASH_DEL(R.own_vmm, e);
    table_unlock();
    CUresult r = lms_real.cuMemRelease(handle);
    if (r == CUDA_SUCCESS && e) {
        lock_devices(DEVICE_BIT(e->device));
        lms_device *ds = &R.dev[e->device];
        ds->resident -= e->bytes;
        ds->plain -= e->bytes;
        ds->demanded -= e->bytes;
        ds->live--;
        unlock_devices();
        free(e);
    } else if (e) {
        table_lock();
        HASH_ADD(hh, R.own_vmm, key, sizeof e->key, e);
        table_unlock();
    }
    leave(mode);
    return r;
}

/* ---- calls ---- */

int lms_call_make_room(void)
{
    if (!swapping())
        return 0;
    CUstreamCaptureMode mode = enter();
    int d, freed = 0;
    if (current_device(&d) == CUDA_SUCCESS) {
        lock_devices(DEVICE_BIT(d));
        freed = ready_device(d) == CUDA_SUCCESS && evict_for_retry(d);
        unlock_devices();
    }
    leave(mode);
    return freed;
}

void lms_call_init(lms_call *call, CUstream stream, const char *what)
{
    call->stream = stream;
    call->capturing = 0;
    call->uses_any = 0;
    call->device = -1;
    call->timed_device = -1;
    call->what = what;
    call->copy = what != NULL && strcmp(what, "memcpy") == 0;
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

/* Whether the call writes every byte of a through ref. A captured call writes only when its
 * graph runs: until then the bytes must stay (the caller's part). */
static int overwrites(const lms_ref *ref, const lms_block *a)
{
    return ref->whole_write && ref->addr <= a->addr && ref->addr + ref->bytes >= a->addr + a->size;
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
    call->held[call->held_count++] = (lms_held){ a, whole_write, 0, 0, 0 };
    a->pins++;
}

/* Device bytes on device d that calls in flight hold there. */
static size_t held_on_device(int d)
{
    size_t bytes = 0;
    table_lock();
    for (size_t i = 0; i < R.count; i++)
        if (R.by_addr[i]->device == d && R.by_addr[i]->pins > 0 && R.by_addr[i]->place == LMS_RESIDENT)
            bytes += R.by_addr[i]->padded;
    table_unlock();
    return bytes;
}

/* Takes back the call's allocations whose eviction has not finished, then sets, per device,
 * the device bytes the call may still take: what the soft limit leaves beside small
 * allocations, what other calls hold there and the call's allocations already there; or
 * SIZE_MAX where all of the call's allocations fit beside the small ones, or where there is
 * no host VMM to leave any elsewhere. Returns whether any device is short. */
static int budgets(lms_call *call, size_t *avail)
{
    size_t need[LMS_MAX_DEVICES] = { 0 }, there[LMS_MAX_DEVICES] = { 0 };
    for (size_t i = 0; i < call->held_count; i++) {
        lms_block *a = call->held[i].alloc;
        if (a->place == LMS_EVICTING)
            take_back(a);
        need[a->device] += a->padded;
        there[a->device] += a->place == LMS_RESIDENT ? a->padded : 0;
    }
    int short_of_room = 0;
    for (int d = 0; d < LMS_MAX_DEVICES; d++) {
        const lms_device *ds = &R.dev[d];
        avail[d] = SIZE_MAX;
        if (!need[d] || !ds->host_vmm || need[d] + ds->plain <= ds->soft_limit)
            continue;
        size_t used = ds->plain + held_on_device(d); /* this call's included: it holds them */
        avail[d] = ds->soft_limit > used ? ds->soft_limit - used : 0;
        short_of_room = 1;
    }
    return short_of_room;
}

static int reused_soonest_first(const void *x, const void *y)
{
    const lms_held *h = x, *k = y;
    if (h->reuse != k->reuse)
        return h->reuse < k->reuse ? -1 : 1;
    size_t a = h->alloc->padded, b = k->alloc->padded;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* Leaves an evicted allocation in its host backing for the call, mapped at its address. */
static CUresult use_on_host(lms_held *h)
{
    lms_block *a = h->alloc;
    CUresult r = a->host_mapped ? CUDA_SUCCESS : lms_swap_map_host(a);
    if (r == CUDA_SUCCESS) {
        h->on_host = 1;
        lms_stats_on_host(a->device, a->size);
        log_figures(LMS_LOG_SWAP, a->device, "used in host memory", a->addr, a->size);
    }
    return r;
}

/* Queues, without waiting, the evictions that will give `bytes` of device d beyond what is
 * free and coming back already. */
static void queue_room(int d, size_t bytes, const char *reason)
{
    lms_device *ds = &R.dev[d];
    reap_evictions(d, 0);
    size_t need = ds->resident + bytes, have = ds->soft_limit + coming_back(d);
    if (swapping() && need > have)
        evict_victims(d, need - have, reason);
}

/* Where a call does not fit on its device, an evicted allocation the learned loop uses again
 * only more than this many steps after it stays in host memory for the call, even where it
 * would fit: restored, it would go out again before that use, its bytes copied in and out
 * where the call moves them over PCIe once. Measured on the simulated H100 (make bench-sim's
 * runs, 2026-11-28): cifar10_full at 4x, 8x and 12x the cap 1.9, 1.8 and 1.0 % faster, unet3d
 * at 352^3 0.16 % slower, the others unchanged; 1 and 2 steps did the same as 3, 6 a little
 * less. */
#define RESTORED_IF_REUSED_WITHIN 3

/* Whether the learned loop uses allocation a of device d again within RESTORED_IF_REUSED_WITHIN
 * steps after the call about to use it. */
static int reused_soon(int d, const lms_block *a)
{
    uint64_t reuse = lms_policy_reuse_after_next(R.dev[d].policy, a->addr);
    return reuse != UINT64_MAX && reuse <= RESTORED_IF_REUSED_WITHIN;
}

/* Makes the call's allocations resident. Where they do not all fit on their device, those
 * already there stay, the evicted ones go in while they fit, those the policy says are used
 * again soonest after the call first (then the largest: all alike under LRU), but none used
 * again only later than RESTORED_IF_REUSED_WITHIN steps on; the rest stay in host memory,
 * mapped at their addresses, for the call to read and write over PCIe (with host VMM only); so
 * does one whose backing queued work still uses there: restoring it would wait for that work.
 * A call that fits waits for that work where the learned loop uses the allocation again within
 * RESTORED_IF_REUSED_WITHIN steps after it: left in host memory, it would cross the link in
 * this call and the next, each kernel reading it there (on the simulated H100, make
 * bench-sim's runs, 2026-11-28: cifar10_full at 8x and 12x the cap 5.0 and 3.6 % faster, the
 * others the same; restored whatever its reuse, unet3d at 352^3 ran 2.8 % slower). The
 * evictions that make room for every restore are queued before the first restore waits for
 * any, so that their copies follow one another. */
static CUresult place_held(lms_call *call)
{
    size_t avail[LMS_MAX_DEVICES], coming[LMS_MAX_DEVICES] = { 0 };
    if (budgets(call, avail)) {
        for (size_t i = 0; i < call->held_count; i++)
            call->held[i].reuse = lms_policy_reuse_after_next(R.dev[call->held[i].alloc->device].policy,
                                                              call->held[i].alloc->addr);
        qsort(call->held, call->held_count, sizeof *call->held, reused_soonest_first);
    }
    for (size_t i = 0; i < call->held_count; i++) {
        lms_held *h = &call->held[i];
        lms_block *a = h->alloc;
        int d = a->device;
        if (a->place != LMS_EVICTED)
            continue;
        int worth_restoring = avail[d] == SIZE_MAX || h->reuse == UINT64_MAX || h->reuse <= RESTORED_IF_REUSED_WITHIN;
        int left_there = a->host_mapped && !lms_swap_uses_done(&a->uses, 0) &&
                         (avail[d] != SIZE_MAX || !reused_soon(d, a));
        if (worth_restoring && a->padded <= avail[d] && !left_there) {
            coming[d] += a->padded;
            avail[d] -= avail[d] != SIZE_MAX ? a->padded : 0;
        } else {
            h->on_host = 1; /* planned: use_on_host below */
        }
    }
    for (int d = 0; d < LMS_MAX_DEVICES; d++)
        if (coming[d])
            queue_room(d, coming[d], "demand");
    for (size_t i = 0; i < call->held_count; i++) {
        lms_held *h = &call->held[i];
        lms_block *a = h->alloc;
        int d = a->device;
        if (a->place != LMS_EVICTED) /* another call may have restored it meanwhile */
            continue;
        CUresult r = h->on_host ? CUDA_ERROR_OUT_OF_MEMORY
                                : restore(a, h->whole_write, ROOM_WAIT, &h->restored_blind);
        if (r == CUDA_ERROR_OUT_OF_MEMORY && R.dev[d].host_vmm)
            r = use_on_host(h);
        if (r != CUDA_SUCCESS)
            return r == CUDA_ERROR_OUT_OF_MEMORY ? out_of_memory(d, a->padded) : r;
    }
    return CUDA_SUCCESS;
}

/* Evictions the plan decided and not yet queued. They go to the copy-out stream only while
 * less than PLANNED_IN_FLIGHT_SHARE of the soft limit is in flight there: a copy engine serves
 * its direction in the order copies were queued, so an eviction that a restore waits for, or a
 * copy of the program's, must not queue behind a long line of them. Each is dropped if its
 * allocation was used again meanwhile: that use has a plan of its own.
 *
 * Those decided after a step wait for the program's next call on the device: they are queued
 * before it if it is a launch, after it if it is a copy. A copy to the host is often one the
 * program waits for, its loss read back right after the backward pass; queued behind the plan's
 * evictions of that pass it waited for them all, and so did the next iteration's first launch.
 * Measured on the simulated H100 (make bench-sim's runs, 2026-11-28): unet3d 0.4 to 3.9 %
 * faster, cifar10_full at 2x 2.0 %, none slower by more than 0.1 %. */
static struct planned {
    CUdeviceptr addr;
    uint64_t used_ns;   /* its last use when the plan chose it */
} planned[LMS_MAX_DEVICES][PLANNED_MAX];
static size_t planned_count[LMS_MAX_DEVICES];

static void queue_planned(int d)
{
    if (!planned_count[d])
        return;
    lms_device *ds = &R.dev[d];
    reap_evictions(d, 0);
    size_t done = 0;
    while (done < planned_count[d] && ds->evicting_bytes < ds->soft_limit / PLANNED_IN_FLIGHT_SHARE) {
        struct planned p = planned[d][done];
        lms_block *a = block_of_device_at(p.addr, d);
        if (!a || a->addr != p.addr || a->last_use_ns != p.used_ns || keep_victim(&d, p.addr)) {
            done++;
            continue;
        }
        CUresult r = evict_begin(a, "plan");
        if (r == CUDA_ERROR_NOT_READY) { /* no backing for it in the pool */
            if (make_backing(a) != CUDA_SUCCESS)
                break;
            continue; /* the locks went meanwhile: look afresh */
        }
        if (r != CUDA_SUCCESS)
            break;
        done++;
    }
    planned_count[d] -= done;
    memmove(planned[d], planned[d] + done, planned_count[d] * sizeof planned[d][0]);
}

/* Queues the evictions planned after earlier steps that may go now, then notes those the
 * policy's plan makes after the step whose work was just queued on device d: the program's next
 * call queues them. The plan is made for the memory swappable allocations may take: the soft
 * limit less the small ones. */
static void plan_evictions(int d)
{
    lms_device *ds = &R.dev[d];
    queue_planned(d);
    if (!lms_policy_predicts(ds->policy))
        return;
    size_t capacity = ds->soft_limit > ds->plain ? ds->soft_limit - ds->plain : 0;
    lms_alloc_id ids[MAX_VICTIMS];
    size_t n = lms_policy_evict_after_step(ds->policy, capacity, ids, MAX_VICTIMS);
    for (size_t i = 0; i < n && planned_count[d] < PLANNED_MAX; i++) {
        lms_block *a = block_at((CUdeviceptr)ids[i]);
        if (!keep_victim(&d, ids[i]))
            planned[d][planned_count[d]++] = (struct planned){ a->addr, a->last_use_ns };
    }
}

/* Brings back, ahead of need, what the policy names for the steps after `step` on device d,
 * into device memory free now, so that the copies overlap the work already queued. For what
 * does not fit yet, making room (mode ROOM_EVICT) queues the evictions of the victims, without
 * waiting: a later call brings it back once that room is there. The evictions that keep the
 * policy's share of the soft limit free (lms_policy_room_to_keep) are queued first. With
 * ROOM_FREE it queues no eviction. */
static void prefetch(int d, uint64_t step, room_mode mode)
{
    lms_device *ds = &R.dev[d];
    reap_evictions(d, 0);
    double room_share = mode == ROOM_EVICT ? lms_policy_room_to_keep(ds->policy) : 0;
    if (room_share > 0)
        queue_room(d, (size_t)((double)ds->soft_limit * room_share), "room");
    lms_alloc_id ids[MAX_VICTIMS];
    size_t room = ds->soft_limit > ds->resident ? ds->soft_limit - ds->resident : 0;
    size_t n = lms_policy_prefetch_within(ds->policy, step + 1, room, ds->soft_limit / PREFETCH_WINDOW_SHARE,
                                          ids, MAX_VICTIMS);
    for (size_t i = 0; i < n; i++) {
        lms_block *a = block_of_device_at((CUdeviceptr)ids[i], d);
        if (!a || a->place != LMS_EVICTED || a->pins > 0)
            continue;
        int blind;
        if (restore(a, 0, mode, &blind) != CUDA_SUCCESS)
            return;
    }
}

int lms_host_waits_wanted(void)
{
    return swapping() && lms_opt.PREFETCH.value;
}

/* Each wait is for the oldest eviction, with the lock released (the program's other threads go
 * on meanwhile), and stops once what the program waits for is done: it never waits longer than
 * the program would by more than one eviction's copy. The restores take only the room those
 * evictions free: an eviction queued now would stand in the copy engine's queue ahead of a
 * copy the program waits for (its loss, read back). */
void lms_host_waits(int (*awaited_done)(void *what), void *what, int copy_follows)
{
    if (!lms_host_waits_wanted())
        return;
    CUstreamCaptureMode mode = enter();
    for (int d = 0; d < LMS_MAX_DEVICES; d++) {
        lms_device *ds = &R.dev[d];
        lock_devices(DEVICE_BIT(d));
        if (!ds->ready || !lms_policy_predicts(ds->policy)) {
            unlock_devices();
            continue;
        }
        /* The evictions decided before the program's wait: queued, or planned and waiting
         * for the copy-out stream. Those planned go behind all the program waits for, but not
         * ahead of its copy. */
        if (!copy_follows)
            queue_planned(d);
        size_t older = planned_count[d];
        for (const lms_block *a = ds->evicting; a; a = a->next_evicting)
            older++;
        while (older > 0 && ds->evicting && !awaited_done(what)) {
            CUresult waited = await_eviction_unlocked(d);
            size_t finished = ds->ready ? (size_t)reap_evictions(d, 0) : 0;
            if (waited != CUDA_SUCCESS || finished == 0)
                break;
            older -= finished < older ? finished : older;
            if (!copy_follows)
                queue_planned(d);
            prefetch(d, atomic_load(&R.step), ROOM_FREE);
        }
        unlock_devices();
    }
    leave(mode);
}

/* A call that may use any allocation may write one whose copy out is queued, after the copy
 * has read it: every eviction of its device still in flight is taken back. */
static void take_back_evictions(int d)
{
    while (R.dev[d].evicting)
        take_back(R.dev[d].evicting);
}

/* The blocks the call's references reach, under the table lock: returns their devices, and
 * with pin (the thread holds those devices' locks) holds each for the call. */
static uint32_t reach(lms_call *call, int pin)
{
    uint32_t devices = 0;
    for (size_t i = 0; i < call->ref_count; i++) {
        const lms_ref *ref = &call->refs[i];
        lms_block *a = find_containing(ref->addr);
        if (!a && ref->bytes <= 1)
            continue;
        /* A pointer (one byte: a kernel's parameter) may reach anywhere in its allocation: every
         * piece. A range reaches the pieces, and the allocations after, that it overlaps. */
        size_t j = ref->bytes > 1 ? upper_bound(ref->addr) - (a != NULL) : first_piece(a->span);
        for (; ref->bytes > 1 ? j < R.count && R.by_addr[j]->addr < ref->addr + ref->bytes
                              : in_span(j, a->span); j++) {
            devices |= DEVICE_BIT(R.by_addr[j]->device);
            if (pin)
                hold(call, R.by_addr[j], !call->capturing && overwrites(ref, R.by_addr[j]));
        }
    }
    return devices;
}

/* Takes the locks of every device the call touches (the current one too, for a call that
 * uses_any) and pins the allocations it references. */
static void lock_call(lms_call *call)
{
    if (call->uses_any && current_device(&call->device) != CUDA_SUCCESS)
        call->device = -1;
    uint32_t devices = call->device >= 0 ? DEVICE_BIT(call->device) : 0;
    table_lock();
    devices |= reach(call, 0);
    table_unlock();
    for (;;) { /* until no allocation of another device turns up while the locks are taken */
        lock_devices(devices);
        table_lock();
        uint32_t reached = reach(call, 0);
        if (!(reached & ~devices))
            break;
        table_unlock();
        unlock_devices();
        devices |= reached;
    }
    reach(call, 1);
    table_unlock();
    if (call->device >= 0 && ready_device(call->device) != CUDA_SUCCESS)
        call->device = -1;
}

/* The devices whose allocations the call holds. */
static uint32_t devices_held_by(const lms_call *call)
{
    uint32_t devices = 0;
    for (size_t i = 0; i < call->held_count; i++)
        devices |= DEVICE_BIT(call->held[i].alloc->device);
    return devices;
}

/* The call's part in timing the learned iteration (step_times.h), once its stream waits for
 * its restores: its start, where it holds allocations of one device only, which it returns;
 * else -1, and where it holds several devices' or is captured (a step whose work runs at the
 * graph's launch), the measurements on those devices stop: their steps are no longer timed in
 * a row. */
static int time_call_begin(const lms_call *call)
{
    if (!call->held_count || !lms_opt.PREFETCH.value || !lms_opt.PLAN_TIMING.value)
        return -1;
    int d = call->held[0].alloc->device;
    uint32_t devices = devices_held_by(call);
    if (devices == DEVICE_BIT(d) && !call->capturing) {
        lms_step_times_before_call(&R.dev[d], d, call->stream);
        return d;
    }
    for (int e = 0; e < LMS_MAX_DEVICES; e++)
        if (devices & DEVICE_BIT(e))
            lms_step_times_break(&R.dev[e], e);
    return -1;
}

/* Changes of the iteration said at level 1 before only new lengths are: cuDNN's algorithm search
 * times each algorithm a few times, and on the H100 liblms learned its 5 steps, departed from
 * them and learned them again about a hundred times before the trainer's first iteration. */
#define CHANGES_TOLD 8

/* Says when device d's policy learns the program's iteration, and when a step departs from it
 * (naming the call `what` that did: the kernel, or memcpy, memset...): a run that keeps
 * relearning swaps by least recent use meanwhile, and its plans are timed anew. The statistics
 * count what each learned iteration moves, from one start of it to the next. */
static void note_period(int d, const char *what)
{
    lms_device *ds = &R.dev[d];
    uint64_t period = lms_policy_period(ds->policy);
    if (lms_policy_at_iteration_start(ds->policy))
        lms_stats_iteration_begins(d, period);
    if (period == ds->period)
        return;
    lms_stats_iteration_lost(d);
    int told = ++ds->period_changes <= CHANGES_TOLD || (period && period != ds->period_told);
    if (ds->period_changes == CHANGES_TOLD + 1)
        lms_log(LMS_LOG_INFO, d, "policy: the iteration keeps changing: from here on level 1 says only an "
                "iteration of a new length, LMS_LOG_LEVEL=2 every change");
    if (period) {
        lms_stats_learned();
        lms_log(told ? LMS_LOG_INFO : LMS_LOG_ALLOC, d, "policy: learned an iteration of %llu steps",
                (unsigned long long)period);
        if (told)
            ds->period_told = period;
    } else {
        lms_log(told ? LMS_LOG_INFO : LMS_LOG_ALLOC, d, "policy: a step departed from the iteration of %llu steps, "
                "at a call of %.160s: least recently used until it is learned again", (unsigned long long)ds->period,
                what ? what : "an unnamed kernel");
    }
    ds->period = period;
}

/* Whether the call's i-th held allocation is the first it holds on its device, or one on another
 * than the first's: what is done once per device goes with these (most calls use one device). */
static int names_device(const lms_call *call, size_t i)
{
    return i == 0 || call->held[i].alloc->device != call->held[0].alloc->device;
}

/* The plan's evictions noted so far, then work ahead of need, on the devices whose allocations
 * the call holds. liblms queues them right before a launch, and right after a copy of the
 * program's: copy engines serve their direction in the order copies are queued, and the
 * program often waits for its copy to the host (see plan_evictions). */
static void prefetch_for(const lms_call *call, uint64_t step)
{
    for (size_t i = 0; i < call->held_count; i++) {
        int d = call->held[i].alloc->device;
        if (!names_device(call, i))
            continue;
        queue_planned(d);
        prefetch(d, step, ROOM_EVICT);
    }
}

CUresult lms_call_begin(lms_call *call)
{
    if (!swapping() || (call->ref_count == 0 && !call->uses_any))
        return CUDA_SUCCESS;
    call->capturing = lms_graph_capturing(call->stream);
    CUstreamCaptureMode mode = enter();
    lock_call(call);
    if (call->device >= 0)
        take_back_evictions(call->device);
    uint64_t step = atomic_fetch_add(&R.step, 1) + 1;
    uint64_t stall_start = lms_stats_now();
    int stalled = 0;
    for (size_t i = 0; i < call->held_count; i++)
        stalled |= call->held[i].alloc->place != LMS_RESIDENT;
    CUresult r = place_held(call);
    if (stalled)
        lms_stats_stall(lms_stats_now() - stall_start);
    for (size_t i = 0; i < call->held_count; i++)
        lms_swap_wait_restored(call->held[i].alloc, call->stream, call->capturing);
    call->timed_device = time_call_begin(call);
    uint64_t now = lms_stats_now();
    uint64_t inline_addrs[LMS_CALL_INLINE];
    uint64_t *addrs = call->held_count <= LMS_CALL_INLINE ? inline_addrs
                                                          : malloc(call->held_count * sizeof *addrs);
    for (size_t i = 0; i < call->held_count; i++) {
        lms_policy_used(R.dev[call->held[i].alloc->device].policy, call->held[i].alloc->addr, step);
        call->held[i].alloc->last_use_ns = now;
        if (addrs)
            addrs[i] = call->held[i].alloc->addr;
    }
    for (size_t i = 0; i < call->held_count; i++)
        if (names_device(call, i))
            note_period(call->held[i].alloc->device, call->what);
    if (addrs && call->capturing)
        lms_graph_captured(call->stream, addrs, call->held_count, call->uses_any);
    else if (addrs)
        lms_trace_launch_uses(call->what, (uint64_t)(uintptr_t)call->stream, step, addrs,
                              call->held_count);
    if (addrs != inline_addrs)
        free(addrs);
    if (call->timed_device >= 0)
        lms_step_times_iteration_mark(&R.dev[call->timed_device], call->timed_device, call->stream);
    if (r == CUDA_SUCCESS && !call->capturing && !call->copy && lms_opt.PREFETCH.value)
        prefetch_for(call, step);
    unlock_devices();
    leave(mode);
    return r;
}

void lms_call_end(lms_call *call, CUresult result)
{
    if (call->held_count || call->uses_any) {
        CUstreamCaptureMode mode = enter();
        uint32_t devices = call->device >= 0 ? DEVICE_BIT(call->device) : 0;
        for (size_t i = 0; i < call->held_count; i++) /* pinned: not released */
            devices |= DEVICE_BIT(call->held[i].alloc->device);
        lock_devices(devices);
        /* Captured work runs at cuGraphLaunch, which records its uses then. */
        for (size_t i = 0; i < call->held_count; i++) {
            lms_block *a = call->held[i].alloc;
            if (call->held[i].restored_blind)
                lms_swap_settle(&R.dev[a->device], a, result == CUDA_SUCCESS);
            if (!call->capturing)
                lms_swap_record_use(&a->uses, call->stream);
            a->pins--;
        }
        if (call->uses_any && !call->capturing && call->device >= 0)
            lms_swap_record_use(&R.dev[call->device].unscanned, call->stream);
        if (call->timed_device >= 0) { /* its start is marked: now its end */
            lms_step_times_after_call(&R.dev[call->timed_device], call->timed_device, call->stream);
            lms_step_times_collect(&R.dev[call->timed_device], call->timed_device);
        }
        if (call->held_count && !call->capturing && swapping() && lms_opt.PREFETCH.value) {
            if (call->copy && result == CUDA_SUCCESS)
                prefetch_for(call, atomic_load(&R.step));
            plan_evictions(call->held[0].alloc->device);
        }
        unlock_devices();
        leave(mode);
    }
    if (call->refs != call->inline_refs)
        free(call->refs);
    if (call->held != call->inline_held)
        free(call->held);
}

/* ---- contexts ---- */

/* An allocation goes with its context (lose_device): the driver's own would. gone: the
 * context has died, its events with it. */
static void drop_block(lms_block *a, int gone)
{
    lms_device *ds = &R.dev[a->device];
    if (!gone) {
        lms_swap_uses_done(&a->uses, 1);
        if (a->place == LMS_EVICTING)
            lms_swap_out_done(a, 1);
    }
    if (!a->freed) {
        lms_policy_freed(ds->policy, a->addr);
        ds->demanded -= a->size;
        if (a->addr == a->span->base) { /* the allocation, once */
            ds->live--;
            lms_trace_free(a->device, a->span->base, a->span->size);
        }
    }
    lms_swap_release(a, gone);
    if (a->place != LMS_EVICTED) {
        ds->resident -= a->padded;
        keep_spare(ds, a->dev_handle, a->padded);
    }
    free(a);
}

/* Device d's copy streams and liblms's events were made in a context that is ending (gone:
 * it has died already, and its work with it). The program's allocations on the device go
 * too: its swappable ones are released and its small ones forgotten (the driver frees them).
 * Spare handles and host-located VMM backing, memory of no context, stay. */
static void lose_device(int d, int gone)
{
    lms_device *ds = &R.dev[d];
    if (!gone)
        unscanned_done(ds, 1);
    /* Out of the table first, in their order; dropped (which may wait) without its lock. */
    lms_block *mine = NULL, **last = &mine;
    plain_entry *plain = NULL, *e, *tmp;
    table_lock();
    size_t kept = 0;
    for (size_t i = 0; i < R.count; i++) {
        lms_block *a = R.by_addr[i];
        if (a->device == d) {
            *last = a;
            last = &a->next_pending;
        } else {
            R.by_addr[kept++] = a;
        }
    }
    R.count = kept;
    HASH_ITER(hh, R.plain, e, tmp) {
        if (e->device != d)
            continue;
        HASH_DEL(R.plain, e);
        e->hh.next = plain;
        plain = e;
    }
    table_unlock();
    *last = ds->pending; /* then the freed ones */
    ds->pending = NULL;
    while (mine) {
        lms_block *a = mine;
        mine = a->next_pending;
        drop_block(a, gone);
    }
    ds->evicting = ds->evicting_last = NULL;
    ds->evicting_bytes = 0;
    ds->to_map = NULL; /* nothing evicted since the lock was taken */
    for (; plain; plain = tmp) {
        tmp = plain->hh.next;
        ds->resident -= plain->bytes;
        ds->plain -= plain->bytes;
        ds->demanded -= plain->bytes;
        ds->live--;
        lms_trace_free(d, plain->key, plain->bytes);
        free(plain);
    }
    lms_swap_uses_clear(&ds->unscanned, gone);
    lms_swap_backing_context_ends(d, gone);
    lms_step_times_forget(ds, d, gone);
    lms_swap_streams_destroy(ds, gone);
    trace_counters(d);
    lms_log(LMS_LOG_INFO, d, "its context ended: liblms let go of the allocations made in it");
}

void lms_residency_context_ends(CUcontext ctx, int gone)
{
    CUstreamCaptureMode mode = enter();
    for (int d = 0; d < LMS_MAX_DEVICES; d++) {
        lock_devices(DEVICE_BIT(d));
        if (R.dev[d].ready && R.dev[d].ctx == ctx)
            lose_device(d, gone);
        unlock_devices();
    }
    leave(mode);
}

/* ---- what the program asks of its allocations ---- */

int lms_allocation_at(CUdeviceptr addr, lms_allocation *out)
{
    CUstreamCaptureMode mode = enter();
    const lms_block *a = lock_block_at(addr);
    if (a) {
        *out = (lms_allocation){ a->span->base, a->span->size, a->device, R.dev[a->device].ctx };
        unlock_devices();
    }
    leave(mode);
    return a != NULL;
}

/* Only the table's: an allocation's base never changes while it is there. */
size_t lms_allocation_bases(const uint64_t *words, size_t count, uint64_t *bases)
{
    size_t found = 0;
    table_lock();
    for (size_t i = 0; i < count; i++) {
        const lms_block *a = words[i] ? find_containing((CUdeviceptr)words[i]) : NULL;
        if (a)
            bases[found++] = a->span->base;
    }
    table_unlock();
    return found;
}

/* Makes a resident for good: restored if need be, the host waiting for its bytes. */
static CUresult keep_resident(lms_block *a)
{
    int blind;
    CUresult r = a->place == LMS_RESIDENT ? CUDA_SUCCESS : restore(a, 0, ROOM_WAIT, &blind);
    if (r == CUDA_SUCCESS && a->place != LMS_RESIDENT)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS) {
        lms_swap_wait_restored(a, NULL, 1);
        a->retained = 1;
    }
    return r;
}

CUresult lms_retain_handle(CUmemGenericAllocationHandle *handle, CUdeviceptr addr)
{
    CUstreamCaptureMode mode = enter();
    lms_block *a = lock_block_at(addr);
    int d = a ? a->device : -1;
    CUresult r = !a ? CUDA_ERROR_INVALID_VALUE : a->span->pieces > 1 ? CUDA_ERROR_NOT_SUPPORTED : keep_resident(a);
    if (r == CUDA_ERROR_NOT_SUPPORTED)
        lms_log(LMS_LOG_ERROR, a->device,
                "cuMemRetainAllocationHandle(0x%llx): LMS_PIECE_MB split that allocation into "
                "pieces; no one handle holds it",
                (unsigned long long)addr);
    if (r == CUDA_SUCCESS && (a = block_of_device_at(addr, d))) /* restore may release the locks */
        r = lms_real.cuMemRetainAllocationHandle(handle, (void *)a->addr);
    if (d >= 0)
        unlock_devices();
    leave(mode);
    return r;
}

/* ---- start-up, fork, exit ---- */

/* Every lock of the residency manager, in the order they nest: the devices', the table's, the
 * pool's. */
void lms_residency_fork_lock(void)
{
    lock_devices(ALL_DEVICES);
    table_lock();
    lms_swap_fork_lock();
}

void lms_residency_fork_unlock(void)
{
    lms_swap_fork_unlock();
    table_unlock();
    for (int d = LMS_MAX_DEVICES; d-- > 0;)
        pthread_mutex_unlock(&R.dev[d].lock);
    held_devices = 0;
}

static void at_exit(void)
{
    lms_stats_print();
}

void lms_residency_start(void)
{
    for (int d = 0; d < LMS_MAX_DEVICES; d++)
        pthread_mutex_init(&R.dev[d].lock, NULL);
    lms_stats_start();
    atexit(at_exit);
}
