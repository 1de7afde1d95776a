/* The wrappers of LMS_HOOK_TABLE: each finds what its call touches, makes it resident
 * through the residency manager, and issues the real call. */
#include "preload/graphs.h"
#include "preload/hooks.h"
#include "preload/residency.h"

/* The stream a call runs on, for its last-use events: stream 0 of a _ptds/_ptsz variant is
 * the calling thread's default stream. */
static CUstream stream_of(int per_thread, CUstream stream)
{
    return per_thread && !stream ? CU_STREAM_PER_THREAD : stream;
}

/* Defines the legacy and per-thread-stream exports of one entry point from name##_impl. */
#define LMS_TWIN(name, suffix, params, ...)                                              \
    LMS_EXPORT CUresult name params                                                      \
    {                                                                                    \
        lms_init();                                                                      \
        return lms_real.name ? name##_impl(lms_real.name, 0, __VA_ARGS__)                \
                             : CUDA_ERROR_NOT_SUPPORTED;                                 \
    }                                                                                    \
    LMS_EXPORT CUresult name##suffix params                                              \
    {                                                                                    \
        lms_init();                                                                      \
        return lms_real.name##suffix ? name##_impl(lms_real.name##suffix, 1, __VA_ARGS__) \
                                     : CUDA_ERROR_NOT_SUPPORTED;                         \
    }

/* Brackets `issue` (an expression using `real`) with the residency manager; issues it again
 * while the driver runs out of memory and liblms can free some. */
#define LMS_MANAGED_CALL(call, issue)                                                  \
    do {                                                                               \
        CUresult lms_result = lms_call_begin(&(call));                                 \
        if (lms_result == CUDA_SUCCESS)                                                \
            while ((lms_result = (issue)) == CUDA_ERROR_OUT_OF_MEMORY && lms_call_make_room()) \
                ;                                                                      \
        lms_call_end(&(call), lms_result);                                             \
        return lms_result;                                                             \
    } while (0)

/* ---- allocation ---- */

LMS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytes)
{
    return lms_init() ? lms_real.cuMemAlloc_v2(dptr, bytes) : lms_alloc(dptr, bytes, NULL, 0);
}

LMS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width,
                                       size_t height, unsigned element_bytes)
{
    if (lms_init())
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
    return lms_init() ? lms_real.cuMemFree_v2(dptr) : lms_free(dptr, NULL, 0);
}

LMS_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
    return lms_init() ? lms_real.cuMemGetInfo_v2(free_bytes, total_bytes)
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
    if (lms_init() || !managed_pool(NULL, 1))
        return real(dptr, bytes, stream);
    return lms_alloc(dptr, bytes, stream_of(per_thread, stream), 1);
}
LMS_TWIN(cuMemAllocAsync, _ptsz, (CUdeviceptr *dptr, size_t bytes, CUstream stream), dptr, bytes, stream)

static CUresult cuMemAllocFromPoolAsync_impl(__typeof__(cuMemAllocFromPoolAsync) *real,
                                             int per_thread, CUdeviceptr *dptr, size_t bytes,
                                             CUmemoryPool pool, CUstream stream)
{
    if (lms_init() || !managed_pool(pool, 0))
        return real(dptr, bytes, pool, stream);
    return lms_alloc(dptr, bytes, stream_of(per_thread, stream), 1);
}
LMS_TWIN(cuMemAllocFromPoolAsync, _ptsz,
         (CUdeviceptr *dptr, size_t bytes, CUmemoryPool pool, CUstream stream), dptr, bytes, pool, stream)

static CUresult cuMemFreeAsync_impl(__typeof__(cuMemFreeAsync) *real, int per_thread,
                                    CUdeviceptr dptr, CUstream stream)
{
    return lms_init() ? real(dptr, stream) : lms_free(dptr, stream_of(per_thread, stream), 1);
}
LMS_TWIN(cuMemFreeAsync, _ptsz, (CUdeviceptr dptr, CUstream stream), dptr, stream)

LMS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    return lms_init() ? lms_real.cuMemCreate(handle, size, prop, flags)
                      : lms_vmm_create(handle, size, prop, flags);
}

LMS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    return lms_init() ? lms_real.cuMemRelease(handle) : lms_vmm_release(handle);
}

/* ---- launches ---- */

static CUresult cuLaunchKernel_impl(__typeof__(cuLaunchKernel) *real, int per_thread, CUfunction f,
                                    unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                    unsigned bz, unsigned shared, CUstream stream, void **params,
                                    void **extra)
{
    lms_call call;
    lms_call_init(&call, stream_of(per_thread, stream), "launch");
    if (!lms_init())
        lms_call_scan_launch(&call, f, params, extra);
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
    if (!lms_init())
        lms_call_scan_launch(&call, f, params, extra);
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
    if (!lms_init())
        lms_call_scan_launch(&call, f, params, NULL);
    LMS_MANAGED_CALL(call, real(f, gx, gy, gz, bx, by, bz, shared, stream, params));
}
LMS_TWIN(cuLaunchCooperativeKernel, _ptsz,
         (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
          unsigned bz, unsigned shared, CUstream stream, void **params),
         f, gx, gy, gz, bx, by, bz, shared, stream, params)

/* ---- copies ---- */

/* Defines name##_impl for a copy or memset whose references `refs` adds to `call`. */
#define LMS_RANGE_CALL(name, what, stream_expr, params, refs, ...)                       \
    static CUresult name##_impl(__typeof__(name) *real, int per_thread, LMS_UNPAREN params) \
    {                                                                                    \
        lms_call call;                                                                   \
        lms_call_init(&call, stream_of(per_thread, stream_expr), what);                  \
        if (!lms_init()) { refs; }                                                       \
        LMS_MANAGED_CALL(call, real(__VA_ARGS__));                                       \
    }
#define LMS_UNPAREN(...) __VA_ARGS__
#define REF(addr, bytes, whole) lms_call_ref(&call, (CUdeviceptr)(addr), (bytes), (whole))

#define LMS_COPY(name, suffix, stream_expr, params, refs, ...)             \
    LMS_RANGE_CALL(name, "memcpy", stream_expr, params, refs, __VA_ARGS__) \
    LMS_TWIN(name, suffix, params, __VA_ARGS__)

LMS_COPY(cuMemcpy, _ptds, NULL, (CUdeviceptr dst, CUdeviceptr src, size_t n),
         (REF(dst, n, 1), REF(src, n, 0)), dst, src, n)
LMS_COPY(cuMemcpyAsync, _ptsz, s, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
         (REF(dst, n, 1), REF(src, n, 0)), dst, src, n, s)
LMS_COPY(cuMemcpyPeer, _ptds, NULL,
         (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n),
         (REF(dst, n, 1), REF(src, n, 0)), dst, dc, src, sc, n)
LMS_COPY(cuMemcpyPeerAsync, _ptsz, s,
         (CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n, CUstream s),
         (REF(dst, n, 1), REF(src, n, 0)), dst, dc, src, sc, n, s)
LMS_COPY(cuMemcpyHtoD_v2, _ptds, NULL, (CUdeviceptr dst, const void *src, size_t n),
         REF(dst, n, 1), dst, src, n)
LMS_COPY(cuMemcpyDtoH_v2, _ptds, NULL, (void *dst, CUdeviceptr src, size_t n),
         REF(src, n, 0), dst, src, n)
LMS_COPY(cuMemcpyDtoD_v2, _ptds, NULL, (CUdeviceptr dst, CUdeviceptr src, size_t n),
         (REF(dst, n, 1), REF(src, n, 0)), dst, src, n)
LMS_COPY(cuMemcpyHtoDAsync_v2, _ptsz, s, (CUdeviceptr dst, const void *src, size_t n, CUstream s),
         REF(dst, n, 1), dst, src, n, s)
LMS_COPY(cuMemcpyDtoHAsync_v2, _ptsz, s, (void *dst, CUdeviceptr src, size_t n, CUstream s),
         REF(src, n, 0), dst, src, n, s)
LMS_COPY(cuMemcpyDtoDAsync_v2, _ptsz, s, (CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s),
         (REF(dst, n, 1), REF(src, n, 0)), dst, src, n, s)
LMS_COPY(cuMemcpyDtoA_v2, _ptds, NULL, (CUarray dst, size_t offset, CUdeviceptr src, size_t n),
         REF(src, n, 0), dst, offset, src, n)
LMS_COPY(cuMemcpyAtoD_v2, _ptds, NULL, (CUdeviceptr dst, CUarray src, size_t offset, size_t n),
         REF(dst, n, 1), dst, src, offset, n)

/* The device ranges a 2D/3D copy reads and writes (rows beyond the first start a pitch apart). */
static void ref_pitched(lms_call *call, CUmemorytype type, CUdeviceptr base, size_t x, size_t y,
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
    (ref_pitched(&call, (p)->srcMemoryType, (p)->srcDevice, (p)->srcXInBytes, (p)->srcY, 0, \
                 (p)->srcPitch, 0, (p)->WidthInBytes, (p)->Height, 1),                     \
     ref_pitched(&call, (p)->dstMemoryType, (p)->dstDevice, (p)->dstXInBytes, (p)->dstY, 0, \
                 (p)->dstPitch, 0, (p)->WidthInBytes, (p)->Height, 1))
#define REF_3D(p) \
    (ref_pitched(&call, (p)->srcMemoryType, (p)->srcDevice, (p)->srcXInBytes, (p)->srcY,    \
                 (p)->srcZ, (p)->srcPitch, (p)->srcHeight, (p)->WidthInBytes, (p)->Height,  \
                 (p)->Depth),                                                               \
     ref_pitched(&call, (p)->dstMemoryType, (p)->dstDevice, (p)->dstXInBytes, (p)->dstY,    \
                 (p)->dstZ, (p)->dstPitch, (p)->dstHeight, (p)->WidthInBytes, (p)->Height,  \
                 (p)->Depth))

LMS_COPY(cuMemcpy2D_v2, _ptds, NULL, (const CUDA_MEMCPY2D *p), if (p) REF_2D(p), p)
LMS_COPY(cuMemcpy2DUnaligned_v2, _ptds, NULL, (const CUDA_MEMCPY2D *p), if (p) REF_2D(p), p)
LMS_COPY(cuMemcpy2DAsync_v2, _ptsz, s, (const CUDA_MEMCPY2D *p, CUstream s), if (p) REF_2D(p), p, s)
LMS_COPY(cuMemcpy3D_v2, _ptds, NULL, (const CUDA_MEMCPY3D *p), if (p) REF_3D(p), p)
LMS_COPY(cuMemcpy3DAsync_v2, _ptsz, s, (const CUDA_MEMCPY3D *p, CUstream s), if (p) REF_3D(p), p, s)
LMS_COPY(cuMemcpy3DPeer, _ptds, NULL, (const CUDA_MEMCPY3D_PEER *p), if (p) REF_3D(p), p)
LMS_COPY(cuMemcpy3DPeerAsync, _ptsz, s, (const CUDA_MEMCPY3D_PEER *p, CUstream s),
         if (p) REF_3D(p), p, s)

/* ---- memsets ---- */

#define LMS_MEMSET(name, suffix, stream_expr, params, refs, ...)           \
    LMS_RANGE_CALL(name, "memset", stream_expr, params, refs, __VA_ARGS__) \
    LMS_TWIN(name, suffix, params, __VA_ARGS__)

/* A pitched memset overwrites the whole range only when its rows are back to back. */
#define REF_2D_SET(dst, pitch, w, h, elem) \
    if ((w) && (h)) REF(dst, ((h) - 1) * (pitch) + (w) * (elem), (pitch) == (w) * (elem))

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

/* ---- graphs made by stream capture ---- */

static CUresult cuStreamEndCapture_impl(__typeof__(cuStreamEndCapture) *real, int per_thread,
                                        CUstream stream, CUgraph *graph)
{
    CUresult r = real(stream, graph);
    if (!lms_init() && r == CUDA_SUCCESS && graph)
        lms_graph_capture_ended(stream_of(per_thread, stream), *graph);
    return r;
}
LMS_TWIN(cuStreamEndCapture, _ptsz, (CUstream stream, CUgraph *graph), stream, graph)

LMS_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph,
                                                unsigned long long flags)
{
    int passthrough = lms_init();
    CUresult r = lms_real.cuGraphInstantiateWithFlags(exec, graph, flags);
    if (!passthrough && r == CUDA_SUCCESS && exec)
        lms_graph_instantiated(graph, *exec);
    return r;
}

static void ref_graph_use(void *call, uint64_t addr) { lms_call_ref(call, (CUdeviceptr)addr, 1, 0); }

static CUresult cuGraphLaunch_impl(__typeof__(cuGraphLaunch) *real, int per_thread,
                                   CUgraphExec exec, CUstream stream)
{
    lms_call call;
    lms_call_init(&call, stream_of(per_thread, stream), "graph");
    if (!lms_init())
        call.uses_any = lms_graph_each_use(exec, ref_graph_use, &call);
    LMS_MANAGED_CALL(call, real(exec, stream));
}
LMS_TWIN(cuGraphLaunch, _ptsz, (CUgraphExec exec, CUstream stream), exec, stream)

LMS_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    if (!lms_init())
        lms_graph_forget(exec);
    return lms_real.cuGraphExecDestroy(exec);
}

LMS_EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
    if (!lms_init())
        lms_graph_forget(graph);
    return lms_real.cuGraphDestroy(graph);
}

/* ---- unloads ---- */

#define LMS_UNLOAD(name, handle_type)                                                  \
    LMS_EXPORT CUresult name(handle_type handle)                                       \
    {                                                                                  \
        int passthrough = lms_init();                                                  \
        CUresult r = lms_real.name ? lms_real.name(handle) : CUDA_ERROR_NOT_SUPPORTED; \
        if (!passthrough && r == CUDA_SUCCESS)                                         \
            lms_launch_scan_forget();                                                  \
        return r;                                                                      \
    }

LMS_UNLOAD(cuModuleUnload, CUmodule)
LMS_UNLOAD(cuLibraryUnload, CUlibrary)
