/* Device memory and pinned host memory on host memory, the list of regions the simulator hands
 * out (regions.h), and what an address is: for copies, kernels, pricing and pointer queries.
 * Virtual memory management is in vmm.c.
 *
 * Device pointers are host addresses, so a host "kernel" dereferences them directly. cuMemAlloc
 * and pinned host memory belong to the context current when they were made, and go with it;
 * cuMemAllocAsync memory comes from the device's pool and belongs to no context. */
#include "sim/regions.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

region *cd_regions;
size_t cd_region_count;
static size_t region_capacity;
static unsigned long long last_buffer_id;

region *cd_region_add_locked(region r)
{
    if (cd_region_count == region_capacity && !cd_grow((void **)&cd_regions, &region_capacity, sizeof *cd_regions))
        return NULL;
    r.buffer_id = ++last_buffer_id;
    cd_regions[cd_region_count] = r;
    return &cd_regions[cd_region_count++];
}

void cd_region_remove_locked(region *r)
{
    *r = cd_regions[--cd_region_count];
}

static bool contains(const region *r, uintptr_t ptr)
{
    return ptr >= r->base && ptr - r->base < r->size;
}

region *cd_region_find_locked(uintptr_t ptr, unsigned mask)
{
    for (size_t i = 0; i < cd_region_count; i++)
        if ((mask >> cd_regions[i].kind & 1) && contains(&cd_regions[i], ptr))
            return &cd_regions[i];
    return NULL;
}

region *cd_region_at_locked(uintptr_t base, region_kind kind)
{
    region *r = cd_region_find_locked(base, REGION_MASK(kind));
    return r && r->base == base ? r : NULL;
}

bool cd_mapping_allows(const region *m, int device, bool write)
{
    CUmemAccess_flags granted =
        device >= 0 && device < CD_MAX_DEVICES ? m->access[device] : CU_MEM_ACCESS_FLAGS_PROT_NONE;
    return write ? granted == CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                 : granted != CU_MEM_ACCESS_FLAGS_PROT_NONE;
}

/* Whether any reservation overlaps [ptr, end). */
static bool reservation_overlaps_locked(uintptr_t ptr, uintptr_t end)
{
    for (size_t i = 0; i < cd_region_count; i++)
        if (cd_regions[i].kind == REGION_RESERVED && cd_regions[i].base < end &&
            ptr < cd_regions[i].base + cd_regions[i].size)
            return true;
    return false;
}

/* The region of `mask` that holds `at` (NULL: none), and in *to where its stretch of the span
 * that ends at `end` ends: the loops below step through a span with it. */
static region *stretch_at_locked(uintptr_t at, uintptr_t end, unsigned mask, uintptr_t *to)
{
    region *r = cd_region_find_locked(at, mask);
    *to = r && r->base + r->size < end ? r->base + r->size : end;
    return r;
}

/* Copies between devices need no peer access (the driver stages them), so any device reaches
 * cuMemAlloc memory this way; a mapping must have been granted to the device, or to the host
 * where the side may be host memory. */
bool cd_range_usable_locked(uintptr_t ptr, size_t size, bool host_ok, int device, bool write)
{
    if (size == 0)
        return true;
    if (ptr + size < ptr)
        return false;
    uintptr_t end = ptr + size;
    region *r = cd_region_find_locked(ptr, DIRECT_MASK);
    if (r)
        return end - r->base <= r->size;
    if (!cd_region_find_locked(ptr, REGION_MASK(REGION_RESERVED))) {
        if (!host_ok)
            return false;
        return !reservation_overlaps_locked(ptr, end); /* host memory must not run into VMM */
    }
    for (uintptr_t at = ptr, to; at < end; at = to) {
        region *m = stretch_at_locked(at, end, REGION_MASK(REGION_MAPPED), &to);
        bool host_granted =
            host_ok && m && (write ? m->host_access == CU_MEM_ACCESS_FLAGS_PROT_READWRITE
                                   : m->host_access != CU_MEM_ACCESS_FLAGS_PROT_NONE);
        if (!m || !(cd_mapping_allows(m, device, write) || host_granted))
            return false;
    }
    return true;
}

/* Kernels reach cuMemAlloc memory of their device, of other contexts on it, and of peer
 * contexts; pool memory only on its device (peer access does not extend to pools); each
 * mapping the span crosses, where their device was granted it. */
bool cd_kernel_may_touch_locked(uintptr_t ptr, size_t size, const cd_ctx *ctx)
{
    uintptr_t end = ptr + (size ? size : 1);
    if (end < ptr)
        return false;
    for (uintptr_t at = ptr, to; at < end; at = to) {
        region *r = stretch_at_locked(at, end, DIRECT_MASK | REGION_MASK(REGION_MAPPED), &to);
        if (!r) /* memory the simulator does not know: the host's, short of any reservation */
            return !reservation_overlaps_locked(at, end);
        if (r->kind == REGION_ALLOC && !(r->pool ? r->device == ctx->device : cd_ctx_reaches_locked(ctx, r->ctx)))
            return false;
        if (r->kind == REGION_MAPPED && !cd_mapping_allows(r, ctx->device, false))
            return false;
    }
    return true;
}

/* What a call of that size costs the host's virtual clock (calibration.h). */
static void charge(const sim_sized_cost *cost, size_t bytes)
{
    cd_host_charge(sim_sized_ns(cost, (double)bytes));
}

static cd_memory_kind kind_of(const region *r)
{
    if (!r)
        return CD_MEMORY_PAGEABLE;
    if (r->kind == REGION_ALLOC || (r->kind == REGION_MAPPED && r->phys->device >= 0))
        return CD_MEMORY_DEVICE;
    return CD_MEMORY_PINNED;
}

cd_memory_kind cd_memory_kind_locked(uintptr_t ptr)
{
    return kind_of(cd_region_find_locked(ptr, DIRECT_MASK | REGION_MASK(REGION_MAPPED)));
}

double cd_host_share_locked(uintptr_t ptr, size_t size)
{
    uintptr_t end = ptr + (size ? size : 1);
    if (end < ptr)
        end = UINTPTR_MAX;
    double host = 0;
    for (uintptr_t at = ptr, to; at < end; at = to)
        if (kind_of(stretch_at_locked(at, end, DIRECT_MASK | REGION_MASK(REGION_MAPPED), &to)) != CD_MEMORY_DEVICE)
            host += (double)(to - at);
    return host / (double)(end - ptr);
}

static void *map_anonymous(size_t size, int prot)
{
    void *p = mmap(NULL, size, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* ---- cuMemAlloc and friends ---- */

/* An allocation on ctx's device: its own (owner ctx), or the pool's (owner NULL). */
static CUresult alloc_device_locked(CUdeviceptr *dptr, size_t size, cd_ctx *ctx, cd_ctx *owner)
{
    void *p = NULL;
    CUresult result = CUDA_SUCCESS;
    /* Timing-only, nothing of the simulator touches device memory: the CPU may not either. */
    int prot = cd.timing_only ? PROT_NONE : PROT_READ | PROT_WRITE;
    if (size > cd_device_free_locked(ctx->device) || !(p = map_anonymous(size, prot)))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    else if (!cd_region_add_locked((region){.kind = REGION_ALLOC, .base = (uintptr_t)p, .size = size,
                                           .device = ctx->device, .ctx = owner, .pool = !owner})) {
        munmap(p, size);
        result = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (result == CUDA_SUCCESS) {
        cd.devices[ctx->device].used += size;
        *dptr = (CUdeviceptr)(uintptr_t)p;
    }
    return result;
}

static CUresult alloc_device(CUdeviceptr *dptr, size_t size)
{
    if (!dptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    charge(&sim_calibration_now()->mem_alloc, size);
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_current_ctx_locked(&ctx);
    if (result == CUDA_SUCCESS)
        result = alloc_device_locked(dptr, size, ctx, ctx);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    CD_ENTER("cuMemAlloc");
    return alloc_device(dptr, bytesize);
}

/* Rows start on 512-byte boundaries, like the real driver's pitch. */
CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes)
{
    CD_ENTER("cuMemAllocPitch");
    if (!pPitch || WidthInBytes == 0 || Height == 0 ||
        (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t pitch = (WidthInBytes + 511) & ~(size_t)511;
    if (Height > SIZE_MAX / pitch)
        return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult result = alloc_device(dptr, pitch * Height);
    if (result == CUDA_SUCCESS)
        *pPitch = pitch;
    return result;
}

/* ---- stream-ordered allocation ----
 * Each device has its default memory pool, which stays its current one: the simulator creates
 * no other pools (cuMemPoolCreate and cuDeviceSetMemPool are unsupported). */

CUmemoryPool cd_default_pool(int device) { return (CUmemoryPool)&cd.devices[device]; }

/* The device whose default pool the handle is; -1 for anything else. */
static int pool_device(CUmemoryPool pool)
{
    for (int d = 0; d < cd.device_count; d++)
        if (pool && pool == cd_default_pool(d))
            return d;
    return -1;
}

/* Allocated at once from the pool of `device` (-1: the stream's device), ready before any work
 * the stream runs later. A capture would need a memory-allocation node, which the simulator
 * does not model. */
static CUresult alloc_async(CUdeviceptr *dptr, size_t bytesize, int device, CUstream hStream,
                            const char *call)
{
    if (!dptr || bytesize == 0)
        return CUDA_ERROR_INVALID_VALUE;
    charge(&sim_calibration_now()->mem_alloc, bytesize);
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->capture)
        result = cd_capture_refuse_locked(s, call);
    if (result == CUDA_SUCCESS)
        result = alloc_device_locked(dptr, bytesize, device < 0 ? s->ctx : &cd.devices[device].primary, NULL);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    CD_ENTER("cuMemAllocAsync");
    return alloc_async(dptr, bytesize, -1, hStream, "cuMemAllocAsync");
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream)
{
    CD_ENTER("cuMemAllocFromPoolAsync");
    int device = pool_device(pool);
    return device < 0 ? CUDA_ERROR_INVALID_VALUE
                      : alloc_async(dptr, bytesize, device, hStream, "cuMemAllocFromPoolAsync");
}

static CUresult device_pool(CUmemoryPool *pool_out, CUdevice dev)
{
    if (!pool_out)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= cd.device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *pool_out = cd_default_pool(dev);
    return CUDA_SUCCESS;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CD_ENTER("cuDeviceGetDefaultMemPool");
    return device_pool(pool_out, dev);
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CD_ENTER("cuDeviceGetMemPool");
    return device_pool(pool, dev);
}

CUresult cd_free_device_locked(uintptr_t ptr)
{
    region *r = cd_region_at_locked(ptr, REGION_ALLOC);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    munmap((void *)r->base, r->size);
    cd.devices[r->device].used -= r->size;
    cd_region_remove_locked(r);
    return CUDA_SUCCESS;
}

/* Like the real driver, cuMemFree waits for all work of the context first; during a capture
 * that makes it a potentially unsafe call. */
CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    CD_ENTER("cuMemFree");
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_capture_unsafe_call_locked("cuMemFree");
    pthread_mutex_unlock(&cd.lock);
    if (result == CUDA_SUCCESS)
        result = cd_ctx_synchronize(NULL);
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cd.lock);
    result = cd_free_device_locked((uintptr_t)dptr);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    CD_ENTER("cuMemFreeAsync");
    pthread_mutex_lock(&cd.lock);
    bool known = cd_region_at_locked((uintptr_t)dptr, REGION_ALLOC) != NULL;
    pthread_mutex_unlock(&cd.lock);
    if (!known)
        return CUDA_ERROR_INVALID_VALUE;
    cd_op *op = cd_op_new(CD_OP_FREE);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.free.ptr = (uintptr_t)dptr;
    return cd_enqueue(hStream, op);
}

/* ---- pinned host memory ---- */

static CUresult host_alloc(void **pp, size_t bytesize, unsigned int Flags)
{
    if (!pp || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP |
                             CU_MEMHOSTALLOC_WRITECOMBINED)))
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    CUresult result = cd_current_ctx(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    void *p = map_anonymous(bytesize, PROT_READ | PROT_WRITE);
    if (!p)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&cd.lock);
    region *r = cd_region_add_locked((region){.kind = REGION_HOST_ALLOC, .base = (uintptr_t)p,
                                              .size = bytesize, .device = -1, .ctx = ctx});
    pthread_mutex_unlock(&cd.lock);
    if (!r) {
        munmap(p, bytesize);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *pp = p;
    return CUDA_SUCCESS;
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
    CD_ENTER("cuMemHostAlloc");
    charge(&sim_calibration_now()->host_alloc, bytesize);
    return host_alloc(pp, bytesize, Flags);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    CD_ENTER("cuMemAllocHost");
    charge(&sim_calibration_now()->host_alloc, bytesize);
    return host_alloc(pp, bytesize, 0);
}

/* Waits for the device first, as the real driver does, which makes the call potentially unsafe
 * during a capture; without a context nothing can be queued, so there is nothing to wait for.
 * A fault of the work waited for is the call's result, as cuMemFree's: the caller then does
 * nothing. */
static CUresult wait_for_device(const char *call)
{
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_capture_unsafe_call_locked(call);
    bool has_ctx = cd_current_ctx_locked(&ctx) == CUDA_SUCCESS;
    pthread_mutex_unlock(&cd.lock);
    if (result == CUDA_SUCCESS && has_ctx)
        result = cd_ctx_synchronize(ctx);
    return result;
}

CUresult cuMemFreeHost(void *p)
{
    CD_ENTER("cuMemFreeHost");
    CUresult result = wait_for_device("cuMemFreeHost");
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cd.lock);
    region *r = cd_region_at_locked((uintptr_t)p, REGION_HOST_ALLOC);
    if (r) {
        charge(&sim_calibration_now()->host_free, r->size);
        munmap((void *)r->base, r->size);
        cd_region_remove_locked(r);
    }
    pthread_mutex_unlock(&cd.lock);
    return r ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Registering is refused during a capture where the thread's mode forbids unsafe calls, as
 * measured on the real driver (STREAM_CAPTURE_UNSUPPORTED). */
CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    CD_ENTER("cuMemHostRegister");
    if (!p || bytesize == 0 ||
        (Flags & ~(unsigned)(CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                             CU_MEMHOSTREGISTER_READ_ONLY)))
        return CUDA_ERROR_INVALID_VALUE;
    uintptr_t base = (uintptr_t)p;
    charge(&sim_calibration_now()->host_register, bytesize);
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_current_ctx_locked(&ctx);
    if (result == CUDA_SUCCESS)
        result = cd_capture_unsafe_call_locked("cuMemHostRegister");
    for (size_t i = 0; result == CUDA_SUCCESS && i < cd_region_count; i++) {
        region *r = &cd_regions[i];
        if ((r->kind == REGION_HOST_ALLOC || r->kind == REGION_HOST_REGISTERED) &&
            r->base < base + bytesize && base < r->base + r->size)
            result = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    }
    if (result == CUDA_SUCCESS &&
        !cd_region_add_locked((region){.kind = REGION_HOST_REGISTERED, .base = base,
                                       .size = bytesize, .device = -1, .ctx = ctx}))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuMemHostUnregister(void *p)
{
    CD_ENTER("cuMemHostUnregister");
    CUresult result = wait_for_device("cuMemHostUnregister");
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cd.lock);
    region *r = cd_region_at_locked((uintptr_t)p, REGION_HOST_REGISTERED);
    if (r)
        cd_region_remove_locked(r);
    pthread_mutex_unlock(&cd.lock);
    return r ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

/* Host and device share one address space here: the device pointer is the host pointer. */
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    CD_ENTER("cuMemHostGetDevicePointer");
    if (!pdptr || Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    region *r = cd_region_find_locked((uintptr_t)p, REGION_MASK(REGION_HOST_ALLOC) |
                                                        REGION_MASK(REGION_HOST_REGISTERED));
    pthread_mutex_unlock(&cd.lock);
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

void cd_memory_release_ctx_locked(const cd_ctx *ctx)
{
    for (size_t i = 0; i < cd_region_count;) {
        region *r = &cd_regions[i];
        if (r->ctx != ctx) {
            i++;
            continue;
        }
        if (r->kind == REGION_ALLOC)
            cd.devices[r->device].used -= r->size;
        if (r->kind != REGION_HOST_REGISTERED)
            munmap((void *)r->base, r->size);
        cd_region_remove_locked(r);
    }
}

/* ---- what an address is ---- */

/* A mapped VMM address reports its mapping (its handle's range), as the real driver does. */
CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    CD_ENTER("cuMemGetAddressRange");
    pthread_mutex_lock(&cd.lock);
    region *r = cd_region_find_locked((uintptr_t)dptr, DIRECT_MASK | REGION_MASK(REGION_MAPPED));
    if (r && pbase)
        *pbase = (CUdeviceptr)r->base;
    if (r && psize)
        *psize = r->size;
    pthread_mutex_unlock(&cd.lock);
    return r ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

void cd_pointer_info_locked(uintptr_t ptr, const cd_ctx *asking, cd_pointer_info *info)
{
    static const cd_pointer_kind kinds[] = {
        [REGION_ALLOC] = CD_POINTER_DEVICE,
        [REGION_MAPPED] = CD_POINTER_MAPPED,
        [REGION_HOST_ALLOC] = CD_POINTER_HOST,
        [REGION_HOST_REGISTERED] = CD_POINTER_REGISTERED,
    };
    memset(info, 0, sizeof *info);
    info->device = -1;
    region *r = cd_region_find_locked(ptr, DIRECT_MASK | REGION_MASK(REGION_MAPPED));
    region *reservation = cd_region_find_locked(ptr, REGION_MASK(REGION_RESERVED));
    const region *range = reservation ? reservation : r;
    if (!range)
        return;
    info->kind = r ? kinds[r->kind] : CD_POINTER_RESERVED;
    info->base = range->base;
    info->size = range->size;
    if (!r)
        return;
    if (r->kind == REGION_ALLOC && r->pool)
        info->kind = CD_POINTER_POOL;
    info->mapping_base = r->base;
    info->mapping_size = r->size;
    info->device = r->kind == REGION_ALLOC || r->kind == REGION_MAPPED ? r->device : -1;
    info->ctx = r->ctx;
    info->buffer_id = r->buffer_id;
    if (r->kind == REGION_MAPPED)
        info->host_access = r->host_access;
    else if (r->kind != REGION_ALLOC)
        info->host_access = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (asking && (r->kind == REGION_MAPPED ? cd_mapping_allows(r, asking->device, false)
                                            : cd_kernel_may_touch_locked(ptr, 1, asking)))
        info->access = r->kind == REGION_MAPPED ? r->access[asking->device]
                                                : CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
}
