/* Moving one swappable allocation's bytes between its device handle and its host backing,
 * at its fixed address, and knowing when queued work last used it. Only the mechanics: the
 * residency manager decides what moves, keeps the books, and holds the device's lock around
 * every call here but lms_swap_backing_create.
 *
 * Each device has two copy streams, one per direction, so that evictions, restores and the
 * program's kernels overlap. An eviction is queued, not waited for: its copy out waits on
 * the copy-out stream for the allocation's last uses, and the device handle is unmapped
 * only once that copy has completed (lms_swap_out_done, then lms_swap_out_finish): the
 * driver does not order an unmap after queued work.
 *
 * Host backing is host-located physical memory (cuMemCreate with a HOST location) where the
 * device supports host VMM: each piece stays mapped at an address of its own (its stage) for
 * the copies, and can be mapped at the evicted allocation's address too, so that a kernel
 * reads and writes it there over PCIe: a kernel that uses the allocation behind liblms's
 * back, or a call whose allocations do not all fit on the device. Without host VMM it is a
 * pinned buffer and an evicted allocation's address is left unmapped.
 *
 * The caller holds the lock of the device whose state and allocations a call here touches
 * (lms_device.lock); the pool of host backing, shared by every device, has a lock of its own
 * inside this file, taken last. */
#ifndef LMS_PRELOAD_SWAP_H
#define LMS_PRELOAD_SWAP_H

#include "policy/policy.h"
#include "preload/residency.h"

#include <cuda.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define LMS_MAX_USES 8 /* streams whose last use of one allocation is tracked at once */

typedef struct lms_backing lms_backing;

typedef struct lms_last_use {
    unsigned long long stream_id; /* cuStreamGetId's: per-thread default streams share a handle */
    CUevent event;   /* created on first use of the slot, kept for reuse */
    int active;
} lms_last_use;

/* The last uses of something by queued work, one per stream. */
typedef struct lms_uses {
    lms_last_use slot[LMS_MAX_USES];
} lms_uses;

typedef enum lms_place {
    LMS_RESIDENT,  /* its device handle is mapped at its address and holds its bytes */
    LMS_EVICTING,  /* likewise, while its copy out is queued: a call may take it back at once */
    LMS_EVICTED,   /* its bytes are in its backing; no device memory */
} lms_place;

/* A swappable allocation's reserved address range. LMS_PIECE_MB splits a large allocation
 * into pieces at consecutive addresses, each a block of its own, evicted and restored alone:
 * a restore then waits only for the eviction of one piece, not of a whole tensor, and the two
 * copy directions overlap piece by piece; the policy evicts only as many pieces as it needs. */
typedef struct lms_span {
    CUdeviceptr base;       /* the pointer the program holds */
    size_t size;            /* bytes it asked for */
    size_t reserved;        /* the reserved range: its pieces' padded bytes */
    int pieces;             /* pieces not yet released: the range goes with the last */
} lms_span;

/* One swappable allocation, or one piece of it. */
struct lms_block {
    CUdeviceptr addr;       /* where it starts in its span's range */
    size_t size;            /* its bytes of what the program asked for */
    size_t padded;          /* size rounded up to the granularity: its physical handle */
    lms_span *span;         /* the allocation it belongs to */
    int device;
    lms_place place;
    int host_mapped;        /* its backing is mapped at addr (evicted only) */
    int freed;              /* the program freed it: it waits on the pending list */
    int pins;               /* calls in flight that hold it where it is */
    int retained;           /* the program retained its handle: resident for good */
    CUmemGenericAllocationHandle dev_handle; /* resident or evicting */
    lms_backing *back;      /* evicting and evicted; restored without its bytes, until settled */
    lms_uses uses;
    CUevent restored;       /* recorded after its restore copy, on the copy-in stream */
    int restore_pending;    /* calls on any stream must wait for that event */
    lms_block *next_evicting; /* the device's evictions in flight, in the order queued */
    lms_block *next_pending;  /* freed, waiting for its last uses */
    lms_block *next_to_map;   /* evicted, its backing to be mapped at its address */
    uint64_t created_ns, last_use_ns, evict_start_ns;
    uint32_t stack;         /* the trace's id of the allocating call stack */
};

/* A device handle kept for reuse: it still holds device memory. */
typedef struct lms_spare_handle {
    CUmemGenericAllocationHandle handle;
    size_t bytes;
    struct lms_spare_handle *next;
} lms_spare_handle;

typedef struct lms_device {
    pthread_mutex_t lock;   /* guards the rest, its allocations' blocks and its lists */
    int ready;
    size_t total, soft_limit, granularity;
    int host_vmm;
    CUcontext ctx;          /* where its copy streams and liblms's events live */
    CUstream copy_in;       /* restores, in the order queued */
    CUstream copy_out;      /* evictions, in the order queued */
    CUstream waits;         /* where the host marks an eviction to wait for without a lock */
    CUevent waited;         /* that mark: lms_swap_out_mark */
    size_t resident;        /* device bytes in use: swappable handles, small and own allocations */
    size_t plain;           /* of which small allocations and the program's own VMM handles */
    size_t spare;           /* device bytes in spare handles, kept for reuse */
    lms_spare_handle *spares;
    lms_block *evicting, *evicting_last; /* evictions in flight, oldest first */
    size_t evicting_bytes;  /* their handles' bytes, counted in resident until finished */
    lms_uses unscanned;     /* launches that may use any allocation (their parameters unread) */
    lms_policy *policy;     /* what to evict, and what to bring back ahead of need */
    uint64_t period;        /* the length of the iteration it knew at the last call, 0: none */
    uint64_t period_told;   /* the last length the log said at level 1 */
    unsigned period_changes; /* how often period has changed */
    size_t demanded;        /* bytes the program holds, resident or not */
    size_t live;            /* allocations the program holds */
    lms_block *pending;     /* freed, not yet released */
    lms_block *to_map;      /* evicted, their backing to map at their address (LMS_MAP_EVICTED) */
    struct {                /* the next eviction's copy, timed for step_times.h when wanted */
        int wanted;
        CUevent start, end; /* made with timing: recorded around the copy */
        size_t bytes;       /* copied between them; 0 until then */
    } timed_copy;
} lms_device;

/* The device's copy streams, in the current context (dev->ctx). */
CUresult lms_swap_streams_create(lms_device *dev);
/* Destroys them; with gone, the context has died with them: their handles are only forgotten. */
void lms_swap_streams_destroy(lms_device *dev, int gone);

/* An event of the device's own that completes with a's eviction: the host may wait for it with
 * the device's lock released, while another thread takes the eviction back and its backing's event goes. */
CUresult lms_swap_out_mark(lms_device *dev, const lms_block *a, CUevent *mark);

/* Maps a physical handle at addr with read/write access for the device. */
CUresult lms_swap_map(CUdeviceptr addr, size_t bytes, CUmemGenericAllocationHandle handle, int device);

/* Host backing comes from one pool, by exact size and device. LMS_HOST_LIMIT_MB caps the
 * backing in use (holding evicted allocations); pooled pieces give way to new ones past it.
 * A piece is made with no device lock held, since a host cuMemCreate takes ~50 ms per
 * 256 MiB: with the locks, lms_swap_backing_reserve; without, lms_swap_backing_create; with
 * them again, lms_swap_backing_add, whatever create returned. */
/* Counts `bytes` as coming, and takes out the pooled pieces (*unwanted) that would push the
 * backing past the cap; CUDA_ERROR_OUT_OF_MEMORY when the backing in use would pass it. */
CUresult lms_swap_backing_reserve(int device, size_t bytes, lms_backing **unwanted);
/* Releases the unwanted pieces and makes one of `bytes` for the device (*out, NULL on failure). */
CUresult lms_swap_backing_create(lms_device *dev, int device, size_t bytes, lms_backing *unwanted,
                                 lms_backing **out);
/* Puts what create made (if anything) into the pool; the bytes are no longer coming. */
void lms_swap_backing_add(size_t bytes, lms_backing *b);
/* A piece of the pool for a, as a->back; returns 0 when there is none (another device's
 * lms_swap_backing_reserve may have released the one made for a). */
int lms_swap_backing_take(lms_block *a);
/* a's piece goes back to the pool. A copy still queued with it is ordered before the next. */
void lms_swap_backing_give_back(lms_block *a);
/* The device's context ends: the events of its pooled pieces go (with gone, they went with
 * it; else once their copies are done), and so do its pinned pieces (without host VMM), which
 * are the context's memory; host-located VMM pieces stay. Every piece must be in the pool. */
void lms_swap_backing_context_ends(int device, int gone);

/* Queues the copy of a resident allocation into a piece of the pool (CUDA_ERROR_NOT_READY
 * when there is none: the caller makes one) on the copy-out stream, after its last uses and
 * those of `unscanned`. a->back then holds the piece; a keeps its device handle, mapped. On failure
 * nothing is queued and a is as it was. */
CUresult lms_swap_out_begin(lms_device *dev, lms_block *a, lms_uses *unscanned);
/* Whether a's copy out has completed; with wait, waits for it first. */
int lms_swap_out_done(const lms_block *a, int wait);
/* After the copy out has completed: unmaps the device handle (the caller keeps or releases
 * it). On failure a is still mapped. */
CUresult lms_swap_out_finish(lms_block *a);

/* Maps an evicted allocation's backing at its address, for a call to use it there. */
CUresult lms_swap_map_host(lms_block *a);
/* Maps device handle h at an evicted allocation's address and queues the copy of its bytes
 * in on the copy-in stream. Queued work must no longer use its backing at its address (its
 * last uses done). The calls that use it must then lms_swap_wait_restored. With whole_write
 * (the call overwrites every byte) nothing is copied and a keeps its backing until
 * lms_swap_settle. On failure it is still evicted and intact; h is the caller's. */
CUresult lms_swap_in(lms_device *dev, lms_block *a, CUmemGenericAllocationHandle h, int whole_write);
/* After the call for which a was restored with whole_write: when that call was not issued,
 * queues the copy of a's bytes in after all, as lms_swap_in would have. Either way the
 * backing goes back to the pool. */
void lms_swap_settle(lms_device *dev, lms_block *a, int issued);
/* Orders stream (or the host, while stream captures a graph) after a's restore copy. */
void lms_swap_wait_restored(lms_block *a, CUstream stream, int capturing);

/* The last use on stream is the work queued there so far. */
void lms_swap_record_use(lms_uses *uses, CUstream stream);
/* Whether every last use is done; with wait, waits for them first. */
int lms_swap_uses_done(lms_uses *uses, int wait);
/* Destroys the events; with gone, their context has died: they are only forgotten. */
void lms_swap_uses_clear(lms_uses *uses, int gone);

/* Gives back what a freed allocation (or piece) holds: its mapping, backing and events (only
 * forgotten with gone: their context died), and with its span's last piece the address range;
 * not a itself, nor its device handle when it has one (unmapped then, for the caller). Its
 * last uses must be done, and its copy out. */
void lms_swap_release(lms_block *a, int gone);

/* Bytes of host backing, in use or pooled. */
size_t lms_swap_host_bytes(void);
/* Around fork (the residency manager's fork lock): take and give back the pool's lock. */
void lms_swap_fork_lock(void);
void lms_swap_fork_unlock(void);

#endif
