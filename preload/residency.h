/* The residency manager: device memory as a cache over host memory.
 *
 * An allocation of at least LMS_THRESHOLD_KB gets its own reserved virtual range and one
 * physical handle, so its device pointer never changes while its bytes move between the
 * device and host backing. Smaller ones are real allocations that stay resident. Every
 * launch, copy and memset is bracketed by lms_call_begin/lms_call_end, which make what
 * the call references resident and record when it was last used. Each device has a lock of
 * its own, so that a wait on one device never stalls calls on another (residency.c says how
 * the locks nest). */
#ifndef LMS_PRELOAD_RESIDENCY_H
#define LMS_PRELOAD_RESIDENCY_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

/* Once, after the options and the driver are loaded. */
void lms_residency_start(void);
/* Dumps every live allocation (the trace's walk_live callback). */
void lms_residency_walk_live(void *ctx, const char *reason);
/* Around fork (preload/fork.c): take and give back every lock of the residency manager (and
 * of the host backing pool under it). */
void lms_residency_fork_lock(void);
void lms_residency_fork_unlock(void);

/* async: cuMemAllocAsync or cuMemFreeAsync on stream, else cuMemAlloc or cuMemFree. A small
 * allocation is the driver's own, allocated and freed as the program asks; a swappable one is
 * usable at once, and freed once the work queued so far (on stream, or on the whole device
 * for cuMemFree, which waits for it as the driver's does) is done. */
CUresult lms_alloc(CUdeviceptr *dptr, size_t bytes, CUstream stream, int async);
CUresult lms_free(CUdeviceptr dptr, CUstream stream, int async);
CUresult lms_mem_get_info(size_t *free_bytes, size_t *total_bytes);
/* The program's own cuMemCreate/cuMemRelease, counted in the budget. */
CUresult lms_vmm_create(CUmemGenericAllocationHandle *handle, size_t size,
                        const CUmemAllocationProp *prop, unsigned long long flags);
CUresult lms_vmm_release(CUmemGenericAllocationHandle handle);

typedef struct lms_block lms_block;

/* A device range a call touches; whole_write: the call overwrites all of it. */
typedef struct lms_ref {
    CUdeviceptr addr;
    size_t bytes;
    int whole_write;
} lms_ref;

typedef struct lms_held {
    lms_block *alloc;
    int whole_write;      /* every reference to it overwrites all of it: nothing to restore */
    int restored_blind;   /* restored without its bytes, for the call to overwrite */
    int on_host;          /* left in host memory, mapped at its address: the call uses it there */
    uint64_t reuse;       /* where the call needs more than fits: steps from it to the next use */
} lms_held;

#define LMS_CALL_INLINE 32
typedef struct lms_call {
    CUstream stream;      /* where the call runs: its last-use events go there */
    int capturing;        /* the stream captures into a graph: uses go to the graph instead */
    int uses_any;         /* a launch whose parameters could not be read: it may use anything */
    int device;           /* with uses_any, the current device: its allocations wait for it */
    int timed_device;     /* the device whose step times the call marks (step_times.h), or -1 */
    const char *what;     /* the kernel's name, "memcpy" or "memset": for the trace */
    int copy;             /* "memcpy": a copy engine serves it, in the order copies are queued */
    size_t ref_count, ref_cap;
    lms_ref *refs;        /* ranges and scanned words; inline_refs until it grows */
    size_t held_count, held_cap;
    lms_held *held;       /* the allocations the call pinned resident; inline_held at first */
    lms_ref inline_refs[LMS_CALL_INLINE];
    lms_held inline_held[LMS_CALL_INLINE];
} lms_call;

/* The program is about to wait for the device: the evictions in flight finish meanwhile, and
 * what the policy names comes back into the room they free, instead of when the program's next
 * call needs it. copy_follows: the wait is for the work before a copy of the program's, queued
 * once it returns (a read into host memory): the plan's evictions wait for that copy. */
void lms_host_waits(int (*awaited_done)(void *what), void *what, int copy_follows);
/* Whether lms_host_waits does anything (swapping, with LMS_PREFETCH): a caller may spare the
 * making of what it would wait on. */
int lms_host_waits_wanted(void);

void lms_call_init(lms_call *call, CUstream stream, const char *what);
/* Any value may be given: words that point nowhere are ignored. */
void lms_call_ref(lms_call *call, CUdeviceptr addr, size_t bytes, int whole_write);
/* Makes every referenced allocation resident and pins it until lms_call_end; where they do not
 * all fit on the device, some stay in host memory, mapped at their addresses (host VMM only).
 * A call that uses_any holds off every unmap until it has completed. On failure
 * (CUDA_ERROR_OUT_OF_MEMORY when host memory runs out, or without host VMM when nothing
 * evictable is left) the call must not be issued; lms_call_end still has to be called. */
CUresult lms_call_begin(lms_call *call);
/* The driver answered the call CUDA_ERROR_OUT_OF_MEMORY (it needs memory of its own, below
 * the soft limit): frees some device memory, as for an allocation. Returns 0 when nothing is
 * left to free; else the call may be issued again. */
int lms_call_make_room(void);
/* result: the call's, or lms_call_begin's failure; unless it is CUDA_SUCCESS the call is
 * taken as not issued, and what it was to overwrite gets its bytes back. */
void lms_call_end(lms_call *call, CUresult result);

/* A context ends: about to (gone 0: its handles still work), or already (gone 1, after a
 * primary context's last release). Where it holds a device's copy streams, the program's
 * allocations on that device go with it, as the driver's do, and the streams are made again
 * in the context current at the next allocation. */
void lms_residency_context_ends(CUcontext ctx, int gone);

/* A swappable allocation as the program sees it: cuMemAlloc memory of its device. */
typedef struct lms_allocation {
    CUdeviceptr base;
    size_t size;          /* bytes asked for */
    int device;
    CUcontext ctx;        /* the device's, where liblms works */
} lms_allocation;
/* Whether addr lies in a live swappable allocation (described in *out). */
int lms_allocation_at(CUdeviceptr addr, lms_allocation *out);
/* Of count words, those that point into live swappable allocations, each replaced by the
 * allocation's base, into bases (which may be words); returns how many. */
size_t lms_allocation_bases(const uint64_t *words, size_t count, uint64_t *bases);
/* cuMemRetainAllocationHandle inside a swappable allocation: the program gets its device
 * handle (to export it, say), so from now on the allocation stays resident, and its handle is
 * released with it, never reused for another. */
CUresult lms_retain_handle(CUmemGenericAllocationHandle *handle, CUdeviceptr addr);

/* Adds the words of a launch's parameters to the call (launch_scan.c). */
void lms_call_scan_launch(lms_call *call, CUfunction f, void **params, void **extra);
/* Forgets every parameter layout learnt: after a module or library is unloaded, its kernel
 * handles may come back naming other kernels. */
void lms_launch_scan_forget(void);
/* Around fork (preload/fork.c): take and give back the lock of the parameter layouts. */
void lms_launch_scan_fork_lock(void);
void lms_launch_scan_fork_unlock(void);

#endif
