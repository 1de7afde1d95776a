/* The wrappers of LMS_HOOK_TABLE but the graphs' (graph_wrappers.c) and the queries'
 * (queries.c): each finds what its call touches, makes it resident through the residency
 * manager, and issues the real call. */
#include "preload/wrappers.h"

#include "preload/graphs.h"
#include "preload/hooks.h"
#include "preload/pointer_arrays.h"
#include "preload/real_driver.h"
#include "preload/residency.h"

/* ---- allocation ---- */

LMS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    return lms_passing_through() ? lms_real.cuMemAlloc_v2(dptr, bytes) : lms_alloc(dptr, bytes, NULL, 0);
}

LMS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                       size_t height, unsigned element_bytes)
{
    if (lms_passing_through())
        return lms_real.cuMemAllocPitch_v2(dptr, pitch, width, height, element_bytes);
    if (!pitch || !width || !height ||
        (element_bytes != 4 && element_bytes != 8 && element_bytes != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t row = (width + 511) / 512 * 512; /* the alignment the driver gives rows */
    CUresult r = lms_alloc(dptr, row * height, NULL, 0);
    if (r == CUDA_SUCCESS)
        *pitch = row;
    return r;
}

LMS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    if (lms_passing_through())
        return lms_real.cuMemFree_v2(dptr);
    lms_pointer_arrays_forget(dptr);
    return lms_free(dptr, NULL, 0);
}

LMS_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    return lms_passing_through() ? lms_real.cuMemGetInfo_v2(free_bytes, total_bytes)
                      : lms_mem_get_info(free_bytes, total_bytes);
}

/* Whether an allocation from pool (or with current, from the device's current pool, as
 * cuMemAllocAsync allocates) is managed. Only the device's default pool holds plain device
 * memory; any other (host-located, IPC-exportable...) keeps its properties, so its
 * allocations pass through: the driver has no query for a pool's location or handle types.
 * Where the driver has no pools (none to query), only cuMemAllocAsync is managed. */
static int managed_pool(CUmemoryPool pool, int current)
{
    CUdevice dev;
    CUmemoryPool default_pool;
    if (!lms_real.cuDeviceGetDefaultMemPool || lms_real.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
        lms_real.cuDeviceGetDefaultMemPool(&default_pool, dev) != CUDA_SUCCESS)
        return current;
    if (current && (!lms_real.cuDeviceGetMemPool || lms_real.cuDeviceGetMemPool(&pool, dev) != CUDA_SUCCESS))
        return 1;
    return pool == default_pool;
}

/* Stream-ordered allocations from the default pool are managed like cuMemAlloc: usable at
 * once, which every stream order allows. */
static CUresult cuMemAllocAsync_impl(__typeof__(cuMemAllocAsync) *real, int per_thread,
                                     CUdeviceptr *dptr, size_t bytes, CUstream stream)
{
    if (lms_passing_through() || !managed_pool(NULL, 1))
        return real(dptr, bytes, stream);
    return lms_alloc(dptr, bytes, stream_of(per_thread, stream), 1);
}
LMS_TWIN(cuMemAllocAsync, _ptsz, (CUdeviceptr *dptr, size_t bytes, CUstream stream), dptr, bytes, stream)

static CUresult cuMemAllocFromPoolAsync_impl(__typeof__(cuMemAllocFromPoolAsync) *real,
                                             int per_thread, CUdeviceptr *dptr, size_t bytes,
                                             CUmemoryPool pool, CUstream stream)
{
    if (lms_passing_through() || !managed_pool(pool, 0))
        return real(dptr, bytes, pool, stream);
    return lms_alloc(dptr, bytes, stream_of(per_thread, stream), 1);
}
LMS_TWIN(cuMemAllocFromPoolAsync, _ptsz,
         (CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream), dptr, bytes, pool, stream)

/* A swappable allocation freed on a capturing stream is the captured graph's to free when it
 * runs, as the driver's free node would be: until then its kernels still use it. */
CUresult lms_free_async(CUdeviceptr dptr, CUstream stream)
{
    lms_allocation a;
    if (lms_allocation_at(dptr, &a) && a.base == dptr && lms_graph_captured_free(stream, dptr))
        return CUDA_SUCCESS;
    lms_pointer_arrays_forget(dptr);
    return lms_free(dptr, stream, 1);
}

static CUresult cuMemFreeAsync_impl(__typeof__(cuMemFreeAsync) *real, int per_thread,
                                    CUdeviceptr dptr, CUstream stream)
{
    return lms_passing_through() ? real(dptr, stream) : lms_free_async(dptr, stream_of(per_thread, stream));
}
LMS_TWIN(cuMemFreeAsync, _ptsz, (CUdeviceptr dptr, CUstream stream), dptr, stream)

LMS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    return lms_passing_through() ? lms_real.cuMemCreate(handle, size, prop, flags)
                      : lms_vmm_create(handle, size, prop, flags);
}

LMS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    return lms_passing_through() ? lms_real.cuMemRelease(handle) : lms_vmm_release(handle);
}

/* ---- launches ---- */

void lms_scan_launch(lms_call *call, CUfunction f, void **params, void **extra)
{
    lms_call_scan_launch(call, f, params, extra);
    lms_pointer_arrays_expand(call);
}

static CUresult cuLaunchKernel_impl(__typeof__(cuLaunchKernel) *real, int per_thread, CUfunction f,
                                    unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, CUstream stream, void **params,
                                    void **extra)
{
    lms_call call;
    lms_call_init(&call, stream_of(per_thread, stream), "launch");
    if (!lms_passing_through())
        lms_scan_launch(&call, f, params, extra);
    LMS_MANAGED_CALL(call, real(f, gx, gy, gz, bx, by, bz, shared, stream, params, extra));
}
LMS_TWIN(cuLaunchKernel, _ptsz,
         (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
          unsigned bz, unsigned shared, CUstream stream, void **params, void **extra),
         f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)

static CUresult cuLaunchKernelEx_impl(__typeof__(cuLaunchKernelEx) *real, int per_thread,
                                      const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra)
{
    lms_call call;
    lms_call_init(&call, stream_of(per_thread, config ? config->hStream : NULL), "launch");
    if (!lms_passing_through())
        lms_scan_launch(&call, f, params, extra);
    LMS_MANAGED_CALL(call, real(config, f, params, extra));
}
LMS_TWIN(cuLaunchKernelEx, _ptsz,
         (const CUlaunchConfig *config, CUfunction f, void **params, void **extra),
         config, f, params, extra)

static CUresult cuLaunchCooperativeKernel_impl(__typeof__(cuLaunchCooperativeKernel) *real,
                                               int per_thread, CUfunction f, unsigned gx,
                                               unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                               unsigned bz, unsigned shared, CUstream stream,
                                               void **params)
{
    lms_call call;
    lms_call_init(&call, stream_of(per_thread, stream), "launch");
    if (!lms_passing_through())
        lms_scan_launch(&call, f, params, NULL);
    LMS_MANAGED_CALL(call, real(f, gx, gy, gz, bx, by, bz, shared, stream, params));
}
LMS_TWIN(cuLaunchCooperativeKernel, _ptsz,
         (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
          unsigned bz, unsigned shared, CUstream stream, void **params),
         f, gx, gy, gz, bx, by, bz, shared, stream, params)

/* ---- copies ---- */

/* Defines name##_impl for a copy or memset whose references `refs` adds to `call`; `before`
 * runs once its allocations are in place, just before the driver's call. */
#define LMS_RANGE_CALL_BEFORE(name, what, stream_expr, params, refs, before, ...)         \
    static CUresult name##_impl(__typeof__(name) *real, int per_thread, LMS_UNPAREN params) \
    {                                                                                    \
        lms_call call;                                                                   \
        lms_call_init(&call, stream_of(per_thread, stream_expr), what);                  \
        if (!lms_passing_through()) { refs; }                                            \
        LMS_MANAGED_CALL(call, ((before), real(__VA_ARGS__)));                           \
    }
#define LMS_RANGE_CALL(name, what, stream_expr, params, refs, ...) \
    LMS_RANGE_CALL_BEFORE(name, what, stream_expr, params, refs, (void)0, __VA_ARGS__)
#define LMS_UNPAREN(...) __VA_ARGS__
#define REF(addr, bytes, whole) lms_call_ref(&call, (CUdeviceptr)(addr), (bytes), (whole))

#define LMS_COPY(name, suffix, stream_expr, params, refs, ...)             \
    LMS_RANGE_CALL(name, "memcpy", stream_expr, params, refs, __VA_ARGS__) \
    LMS_TWIN(name, suffix, params, __VA_ARGS__)

/* What the program waits for is done: liblms's waits stop there. */
static int stream_done(void *stream) { return lms_real.cuStreamQuery((CUstream)stream) == CUDA_SUCCESS; }
static int event_done(void *event) { return lms_real.cuEventQuery((CUevent)event) == CUDA_SUCCESS; }

/* The host waits for a copy into host memory when the copy is synchronous, or when that memory
 * is pageable (the driver stages it through pinned memory of its own), and first for the work
 * queued before it on its stream: a training loop reads its loss so. liblms works meanwhile,
 * as during cuStreamSynchronize; an event recorded on the stream says when that work is done. */
static void wait_before_copy(const lms_call *call, CUdeviceptr dst, int synchronous)
{
    unsigned type;
    CUevent queued;
    if (lms_passing_through() || !lms_host_waits_wanted() || lms_graph_capturing(call->stream))
        return;
    int pageable = lms_real.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, dst) != CUDA_SUCCESS;
    if (!pageable && !(synchronous && type == CU_MEMORYTYPE_HOST))
        return;
    if (lms_real.cuEventCreate(&queued, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return;
    if (lms_real.cuEventRecord(queued, call->stream) == CUDA_SUCCESS)
        lms_host_waits(event_done, queued, 1);
    lms_real.cuEventDestroy_v2(queued);
}

#define LMS_COPY_TO_HOST(name, suffix, stream_expr, params, refs, dst, synchronous, ...)              \
    LMS_RANGE_CALL_BEFORE(name, "memcpy", stream_expr, params, refs,                                 \
                          wait_before_copy(&call, (CUdeviceptr)(uintptr_t)(dst), synchronous), __VA_ARGS__) \
    LMS_TWIN(name, suffix, params, __VA_ARGS__)

LMS_COPY_TO_HOST(cuMemcpy, _ptds, NULL, (CUdeviceptr dst, CUdeviceptr src, size_t n),
                 (REF(dst, n, 1), REF(src, n, 0)), dst, 1, dst, src, n)
LMS_COPY_TO_HOST(cuMemcpyAsync, _ptsz, s, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
                 (REF(dst, n, 1), REF(src, n, 0)), dst, 0, dst, src, n, s)
LMS_COPY(cuMemcpyPeer, _ptds, NULL,
         (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),
         (REF(dst, n, 1), REF(src, n, 0)), dst, dc, src, sc, n)
LMS_COPY(cuMemcpyPeerAsync, _ptsz, s,
         (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s),
         (REF(dst, n, 1), REF(src, n, 0)), dst, dc, src, sc, n, s)
/* A host-to-device copy may write a pointer array: what it points to is learnt. */
#define REF_FROM_HOST(dst, src, n) (REF(dst, n, 1), lms_pointer_arrays_copied(dst, src, n))

LMS_COPY(cuMemcpyHtoD_v2, _ptds, NULL, (CUdeviceptr dst, const void *src, size_t n),
         REF_FROM_HOST(dst, src, n), dst, src, n)
LMS_COPY_TO_HOST(cuMemcpyDtoH_v2, _ptds, NULL, (void *dst, CUdeviceptr src, size_t n),
                 REF(src, n, 0), dst, 1, dst, src, n)
LMS_COPY(cuMemcpyDtoD_v2, _ptds, NULL, (CUdeviceptr dst, CUdeviceptr src, size_t n),
         (REF(dst, n, 1), REF(src, n, 0)), dst, src, n)
LMS_COPY(cuMemcpyHtoDAsync_v2, _ptsz, s, (CUdeviceptr dst, const void *src, size_t n, CUstream s),
         REF_FROM_HOST(dst, src, n), dst, src, n, s)
LMS_COPY_TO_HOST(cuMemcpyDtoHAsync_v2, _ptsz, s, (void *dst, CUdeviceptr src, size_t n, CUstream s),
                 REF(src, n, 0), dst, 0, dst, src, n, s)
LMS_COPY(cuMemcpyDtoDAsync_v2, _ptsz, s, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
         (REF(dst, n, 1), REF(src, n, 0)), dst, src, n, s)
LMS_COPY(cuMemcpyDtoA_v2, _ptds, NULL, (CUarray dst, size_t offset, CUdeviceptr src, size_t n),
         REF(src, n, 0), dst, offset, src, n)
LMS_COPY(cuMemcpyAtoD_v2, _ptds, NULL, (CUdeviceptr dst, CUarray src, size_t offset, size_t n),
         REF(dst, n, 1), dst, src, offset, n)

void lms_ref_pitched(lms_call *call, CUmemorytype type, CUdeviceptr base, size_t x, size_t y,
                     size_t z, size_t pitch, size_t plane_rows, size_t width, size_t height,
                     size_t depth)
{
    if (type != CU_MEMORYTYPE_DEVICE && type != CU_MEMORYTYPE_UNIFIED)
        return;
    if (!width || !height || !depth)
        return;
    size_t start = (z * plane_rows + y) * pitch + x;
    size_t span = ((depth - 1) * plane_rows + (height - 1)) * pitch + width;
    lms_call_ref(call, base + start, span, 0);
}

#define REF_2D(p) \
    (lms_ref_pitched(&call, (p)->srcMemoryType, (p)->srcDevice, (p)->srcXInBytes, (p)->srcY, 0, \
                     (p)->srcPitch, 0, (p)->WidthInBytes, (p)->Height, 1),                     \
     lms_ref_pitched(&call, (p)->dstMemoryType, (p)->dstDevice, (p)->dstXInBytes, (p)->dstY, 0, \
                     (p)->dstPitch, 0, (p)->WidthInBytes, (p)->Height, 1))

LMS_COPY(cuMemcpy2D_v2, _ptds, NULL, (const CUDA_MEMCPY2D *p), if (p) REF_2D(p), p)
LMS_COPY(cuMemcpy2DUnaligned_v2, _ptds, NULL, (const CUDA_MEMCPY2D *p), if (p) REF_2D(p), p)
LMS_COPY(cuMemcpy2DAsync_v2, _ptsz, s, (const CUDA_MEMCPY2D *p, CUstream s), if (p) REF_2D(p), p, s)
LMS_COPY(cuMemcpy3D_v2, _ptds, NULL, (const CUDA_MEMCPY3D *p), if (p) REF_3D(&call, p), p)
LMS_COPY(cuMemcpy3DAsync_v2, _ptsz, s, (const CUDA_MEMCPY3D *p, CUstream s), if (p) REF_3D(&call, p), p, s)
LMS_COPY(cuMemcpy3DPeer, _ptds, NULL, (const CUDA_MEMCPY3D_PEER *p), if (p) REF_3D(&call, p), p)
LMS_COPY(cuMemcpy3DPeerAsync, _ptsz, s, (const CUDA_MEMCPY3D_PEER *p, CUstream s),
         if (p) REF_3D(&call, p), p, s)

/* Each copy of a batch, by its addresses (device or host: liblms ignores what it does not
 * manage). */
static void ref_batch(lms_call *call, const CUdeviceptr *dsts, const CUdeviceptr *srcs,
                      const size_t *sizes, size_t count)
{
    for (size_t i = 0; dsts && srcs && sizes && i < count; i++) {
        lms_call_ref(call, dsts[i], sizes[i], 1);
        lms_call_ref(call, srcs[i], sizes[i], 0);
    }
}

LMS_COPY(cuMemcpyBatchAsync_v2, _ptsz, s,
         (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
          size_t *attr_idxs, size_t attr_count, CUstream s),
         ref_batch(&call, dsts, srcs, sizes, count), dsts, srcs, sizes, count, attrs, attr_idxs,
         attr_count, s)
LMS_COPY(cuMemcpyBatchAsync, _ptsz, s,
         (CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count, CUmemcpyAttributes *attrs,
          size_t *attr_idxs, size_t attr_count, size_t *fail_idx, CUstream s),
         ref_batch(&call, dsts, srcs, sizes, count), dsts, srcs, sizes, count, attrs, attr_idxs,
         attr_count, fail_idx, s)

/* ---- stream memory operations: each reads or writes one word ---- */

#define LMS_MEMOP(name, bytes, value_type)                                                      \
    LMS_RANGE_CALL(name, "memop", s, (CUstream s, CUdeviceptr addr, value_type value, unsigned flags), \
                   REF(addr, bytes, 0), s, addr, value, flags)                                   \
    LMS_TWIN(name, _ptsz, (CUstream s, CUdeviceptr addr, value_type value, unsigned flags),      \
             s, addr, value, flags)

LMS_MEMOP(cuStreamWriteValue32_v2, 4, cuuint32_t)
LMS_MEMOP(cuStreamWriteValue64_v2, 8, cuuint64_t)
LMS_MEMOP(cuStreamWaitValue32_v2, 4, cuuint32_t)
LMS_MEMOP(cuStreamWaitValue64_v2, 8, cuuint64_t)

void lms_ref_mem_ops(lms_call *call, unsigned count, const CUstreamBatchMemOpParams *ops)
{
    for (unsigned i = 0; ops && i < count; i++) {
        switch (ops[i].operation) {
        case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        case CU_STREAM_MEM_OP_WAIT_VALUE_64:
            lms_call_ref(call, ops[i].waitValue.address,
                         ops[i].operation == CU_STREAM_MEM_OP_WAIT_VALUE_32 ? 4 : 8, 0);
            break;
        case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        case CU_STREAM_MEM_OP_WRITE_VALUE_64:
            lms_call_ref(call, ops[i].writeValue.address,
                         ops[i].operation == CU_STREAM_MEM_OP_WRITE_VALUE_32 ? 4 : 8, 0);
            break;
        default: /* barriers and flushes name no memory */
            break;
        }
    }
}

LMS_RANGE_CALL(cuStreamBatchMemOp_v2, "memop", s,
               (CUstream s, unsigned count, CUstreamBatchMemOpParams *ops, unsigned flags),
               lms_ref_mem_ops(&call, count, ops), s, count, ops, flags)
LMS_TWIN(cuStreamBatchMemOp_v2, _ptsz, (CUstream s, unsigned count, CUstreamBatchMemOpParams *ops, unsigned flags),
         s, count, ops, flags)

/* ---- memsets ---- */

#define LMS_MEMSET(name, suffix, stream_expr, params, refs, ...)           \
    LMS_RANGE_CALL(name, "memset", stream_expr, params, refs, __VA_ARGS__) \
    LMS_TWIN(name, suffix, params, __VA_ARGS__)

void lms_ref_memset_2d(lms_call *call, CUdeviceptr dst, size_t pitch, size_t w, size_t h, size_t elem)
{
    if (w && h)
        lms_call_ref(call, dst, (h - 1) * pitch + w * elem, pitch == w * elem);
}
#define REF_2D_SET(dst, pitch, w, h, elem) lms_ref_memset_2d(&call, dst, pitch, w, h, elem)

LMS_MEMSET(cuMemsetD8_v2, _ptds, NULL, (CUdeviceptr dst, unsigned char v, size_t n),
           REF(dst, n, 1), dst, v, n)
LMS_MEMSET(cuMemsetD16_v2, _ptds, NULL, (CUdeviceptr dst, unsigned short v, size_t n),
           REF(dst, n * 2, 1), dst, v, n)
LMS_MEMSET(cuMemsetD32_v2, _ptds, NULL, (CUdeviceptr dst, unsigned v, size_t n),
           REF(dst, n * 4, 1), dst, v, n)
LMS_MEMSET(cuMemsetD2D8_v2, _ptds, NULL,
           (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h),
           REF_2D_SET(dst, pitch, w, h, 1), dst, pitch, v, w, h)
LMS_MEMSET(cuMemsetD2D16_v2, _ptds, NULL,
           (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h),
           REF_2D_SET(dst, pitch, w, h, 2), dst, pitch, v, w, h)
LMS_MEMSET(cuMemsetD2D32_v2, _ptds, NULL,
           (CUdeviceptr dst, size_t pitch, unsigned v, size_t w, size_t h),
           REF_2D_SET(dst, pitch, w, h, 4), dst, pitch, v, w, h)
LMS_MEMSET(cuMemsetD8Async, _ptsz, s, (CUdeviceptr dst, unsigned char v, size_t n, CUstream s),
           REF(dst, n, 1), dst, v, n, s)
LMS_MEMSET(cuMemsetD16Async, _ptsz, s, (CUdeviceptr dst, unsigned short v, size_t n, CUstream s),
           REF(dst, n * 2, 1), dst, v, n, s)
LMS_MEMSET(cuMemsetD32Async, _ptsz, s, (CUdeviceptr dst, unsigned v, size_t n, CUstream s),
           REF(dst, n * 4, 1), dst, v, n, s)
LMS_MEMSET(cuMemsetD2D8Async, _ptsz, s,
           (CUdeviceptr dst, size_t pitch, unsigned char v, size_t w, size_t h, CUstream s),
           REF_2D_SET(dst, pitch, w, h, 1), dst, pitch, v, w, h, s)
LMS_MEMSET(cuMemsetD2D16Async, _ptsz, s,
           (CUdeviceptr dst, size_t pitch, unsigned short v, size_t w, size_t h, CUstream s),
           REF_2D_SET(dst, pitch, w, h, 2), dst, pitch, v, w, h, s)
LMS_MEMSET(cuMemsetD2D32Async, _ptsz, s,
           (CUdeviceptr dst, size_t pitch, unsigned v, size_t w, size_t h, CUstream s),
           REF_2D_SET(dst, pitch, w, h, 4), dst, pitch, v, w, h, s)

/* ---- unloads ---- */

#define LMS_UNLOAD(name, handle_type)                                                  \
    LMS_EXPORT CUresult name(handle_type handle)                                       \
    {                                                                                  \
        int passthrough = lms_passing_through();                                                  \
        CUresult r = lms_real.name ? lms_real.name(handle) : CUDA_ERROR_NOT_SUPPORTED; \
        if (!passthrough && r == CUDA_SUCCESS)                                         \
            lms_launch_scan_forget();                                                  \
        return r;                                                                      \
    }

LMS_UNLOAD(cuModuleUnload, CUmodule)
LMS_UNLOAD(cuLibraryUnload, CUlibrary)

/* ---- context teardown ---- */

/* The device's primary context, where it is active; else NULL. */
static CUcontext active_primary(CUdevice dev)
{
    unsigned flags;
    int active = 0;
    CUcontext ctx;
    if (lms_real.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active ||
        lms_real.cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS)
        return NULL;
    lms_real.cuDevicePrimaryCtxRelease_v2(dev); /* the retain above's: it stays active */
    return ctx;
}

LMS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUcontext ctx = lms_passing_through() ? NULL : active_primary(dev);
    if (ctx)
        lms_residency_context_ends(ctx, 0);
    CUresult r = lms_real.cuDevicePrimaryCtxReset_v2(dev);
    if (ctx && r == CUDA_SUCCESS)
        lms_launch_scan_forget(); /* its modules went with it: kernel handles may come back */
    return r;
}

/* Only the last release ends the context: liblms learns it afterwards. */
LMS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUcontext ctx = lms_passing_through() ? NULL : active_primary(dev);
    CUresult r = lms_real.cuDevicePrimaryCtxRelease_v2(dev);
    if (ctx && r == CUDA_SUCCESS && active_primary(dev) != ctx) {
        lms_residency_context_ends(ctx, 1);
        lms_launch_scan_forget();
    }
    return r;
}

LMS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    int passthrough = lms_passing_through();
    if (!passthrough)
        lms_residency_context_ends(ctx, 0);
    CUresult r = lms_real.cuCtxDestroy_v2(ctx);
    if (!passthrough && r == CUDA_SUCCESS)
        lms_launch_scan_forget();
    return r;
}

/* ---- waits for the device ---- */

/* While the program waits, liblms finishes its evictions and starts its restores. Stream 0 of
 * the per-thread variant is the thread's default stream: that is the one waited for. */
static CUresult cuStreamSynchronize_impl(__typeof__(cuStreamSynchronize) *real, int per_thread, CUstream stream)
{
    if (!lms_passing_through())
        lms_host_waits(stream_done, stream_of(per_thread, stream), 0);
    return real(stream);
}
LMS_TWIN(cuStreamSynchronize, _ptsz, (CUstream stream), stream)

LMS_EXPORT CUresult cuEventSynchronize(CUevent event)
{
    if (!lms_passing_through())
        lms_host_waits(event_done, event, 0);
    return lms_real.cuEventSynchronize(event);
}
