/* Moving one swappable allocation's bytes between its device handle and its host backing,
 * at its fixed address, and knowing when queued work last used it. Only the mechanics: the
 * residency manager decides what moves, keeps the books, and holds its lock around every
 * call here but lms_swap_backing_create.
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

/* The last uses of something by queued work, one per stream. */
typedef struct lms_uses {
    lms_last_use slot[LMS_MAX_USES];
} lms_uses;

/* One swappable allocation. */
struct lms_block {
    CUdeviceptr addr;       /* start of its reserved range: the pointer the program holds */
    size_t size;            /* bytes asked for */
    size_t padded;          /* size rounded up to the granularity: its physical handle */
    int device;
    int resident;
    int pins;               /* calls in flight that need it resident */
    CUmemGenericAllocationHandle dev_handle; /* when resident */
    lms_backing *back;      /* when evicted; and when restored without its bytes, until settled */
    lms_uses uses;
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
} lms_device;

/* Maps a physical handle at addr with read/write access for the device. */
CUresult lms_swap_map(CUdeviceptr addr, size_t bytes, CUmemGenericAllocationHandle handle, int device);

/* Host backing comes from one pool, by exact size and device. LMS_HOST_LIMIT_MB caps the
 * backing in use (holding evicted allocations); pooled pieces give way to new ones past it.
 * A piece is made outside the residency lock, since a host cuMemCreate takes ~50 ms per
 * 256 MiB: with the lock, lms_swap_backing_reserve; without, lms_swap_backing_create; with
 * it again, lms_swap_backing_add, whatever create returned. */
int lms_swap_has_backing(int device, size_t bytes);
/* Counts `bytes` as coming, and takes out the pooled pieces (*unwanted) that would push the
 * backing past the cap; CUDA_ERROR_OUT_OF_MEMORY when the backing in use would pass it. */
CUresult lms_swap_backing_reserve(int device, size_t bytes, lms_backing **unwanted);
/* Releases the unwanted pieces and makes one of `bytes` for the device (*out, NULL on failure). */
CUresult lms_swap_backing_create(lms_device *dev, int device, size_t bytes, lms_backing *unwanted,
                                 lms_backing **out);
/* Puts what create made (if anything) into the pool; the bytes are no longer coming. */
void lms_swap_backing_add(size_t bytes, lms_backing *b);

/* Copies a resident allocation out, after its last uses, into a piece of the pool (out of
 * memory when there is none: see lms_swap_has_backing), and unmaps its device handle, which
 * the caller keeps or releases (a->back holds the bytes). On failure it is still resident
 * and intact. */
CUresult lms_swap_out(lms_device *dev, lms_block *a);
/* Maps device handle h at an evicted allocation's address and queues the copy of its bytes
 * in. The calls that use it must then lms_swap_wait_restored. With whole_write (the call
 * overwrites every byte) nothing is copied and a keeps its backing until lms_swap_settle.
 * On failure it is still evicted and intact; h is the caller's. */
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

/* Gives back what a freed allocation holds: its mapping, backing, address range and events;
 * not a itself, nor its device handle when resident (unmapped then, for the caller). Its last
 * uses must be done. */
void lms_swap_release(lms_block *a);

/* Bytes of host backing, in use or pooled. */
size_t lms_swap_host_bytes(void);

#endif
