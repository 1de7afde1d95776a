/* Moving one swappable allocation's bytes between its device handle and its host backing,
 * at its fixed address, and knowing when queued work last used it. Only the mechanics: the
 * residency manager decides what moves, keeps the books, and holds its lock around every
 * call here.
 *
 * Host backing is host-located physical memory (cuMemCreate with a HOST location) where the
 * device supports host VMM: each piece stays mapped at an address of its own (its stage) for
 * the copies, and is mapped at the evicted allocation's address too, so a kernel that uses
 * the allocation behind liblms's back reads and writes the right bytes over PCIe. Without
 * host VMM it is a pinned buffer and an evicted allocation's address is left unmapped. */
#ifndef LMS_PRELOAD_SWAP_H
#define LMS_PRELOAD_SWAP_H

#include "preload/residency.h"

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#define LMS_MAX_USES 8 /* streams whose last use of one allocation is tracked at once */

typedef struct lms_backing lms_backing;

typedef struct lms_last_use {
    CUstream stream;
    CUevent event;   /* created on first use of the slot, kept for reuse */
    int active;
} lms_last_use;

/* One swappable allocation. */
struct lms_block {
    CUdeviceptr addr;       /* start of its reserved range: the pointer the program holds */
    size_t size;            /* bytes asked for */
    size_t padded;          /* size rounded up to the granularity: its physical handle */
    int device;
    int resident;
    int pins;               /* calls in flight that need it resident */
    CUmemGenericAllocationHandle dev_handle; /* when resident */
    lms_backing *back;      /* when evicted */
    lms_last_use uses[LMS_MAX_USES];
    CUevent restored;       /* recorded after its restore copy, on the copy stream */
    int restore_pending;    /* calls on any stream must wait for that event */
    lms_block *next_pending; /* freed, waiting for its last uses */
    uint64_t created_ns, last_use_ns;
    uint32_t stack;         /* the trace's id of the allocating call stack */
};

/* A device handle kept for reuse: it still holds device memory. */
typedef struct lms_spare_handle {
    CUmemGenericAllocationHandle handle;
    size_t bytes;
    struct lms_spare_handle *next;
} lms_spare_handle;

typedef struct lms_device {
    int ready;
    size_t total, soft_limit, granularity;
    int host_vmm;
    CUstream copy_stream;   /* every swap copy of the device, in order */
    CUevent copy_done;
    size_t resident;        /* device bytes in use: swappable handles, small and own allocations */
    size_t spare;           /* device bytes in spare handles, kept for reuse */
    lms_spare_handle *spares;
    size_t demanded;        /* bytes the program holds, resident or not */
    size_t live;            /* allocations the program holds */
    lms_backing *pool;      /* free host backing, mapped for this device */
} lms_device;

/* Maps a physical handle at addr with read/write access for the device. */
CUresult lms_swap_map(CUdeviceptr addr, size_t bytes, CUmemGenericAllocationHandle handle, int device);

/* Copies a resident allocation out, after its last uses, and unmaps its device handle, which
 * the caller keeps or releases (a->back holds the bytes). On failure it is still resident
 * and intact. */
CUresult lms_swap_out(lms_device *dev, lms_block *a);
/* Maps device handle h at an evicted allocation's address and queues the copy of its bytes
 * in (none when whole_write: the call overwrites them all). The calls that use it must then
 * lms_swap_wait_restored. On failure it is still evicted and intact; h is the caller's. */
CUresult lms_swap_in(lms_device *dev, lms_block *a, CUmemGenericAllocationHandle h, int whole_write);
/* Orders stream (or the host, while stream captures a graph) after a's restore copy. */
void lms_swap_wait_restored(lms_block *a, CUstream stream, int capturing);

/* The last use on stream is the work queued there so far. */
void lms_swap_record_use(lms_block *a, CUstream stream);
/* Whether every last use is done; with wait, waits for them first. */
int lms_swap_uses_done(lms_block *a, int wait);

/* Gives back what a freed allocation holds: its mapping, backing, address range and events;
 * not a itself, nor its device handle when resident (unmapped then, for the caller). Its last
 * uses must be done. */
void lms_swap_release(lms_device *dev, lms_block *a);

/* Bytes of host backing, in use or pooled: LMS_HOST_LIMIT_MB caps it. */
size_t lms_swap_host_bytes(void);

#endif
