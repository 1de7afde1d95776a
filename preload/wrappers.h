/* What the wrapper files share (wrappers.c: allocation, launches, copies, memsets, memory
 * operations; graph_wrappers.c: captures and graphs): how a wrapper is defined and brackets
 * its call, and how the references of each kind of work are found. */
#ifndef LMS_PRELOAD_WRAPPERS_H
#define LMS_PRELOAD_WRAPPERS_H

#include "preload/hooks.h"
#include "preload/real_driver.h"
#include "preload/residency.h"

/* The stream a call runs on, for its last-use events: stream 0 of a _ptds/_ptsz variant is
 * the calling thread's default stream. */
static inline CUstream stream_of(int per_thread, CUstream stream)
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

/* Brackets `issue` (an expression using `real`) with the residency manager, its result in
 * `result`; issues it again while the driver runs out of memory and liblms can free some. */
#define LMS_MANAGED_ISSUE(call, issue, result)                                         \
    do {                                                                               \
        (result) = lms_call_begin(&(call));                                            \
        if ((result) == CUDA_SUCCESS)                                                  \
            while (((result) = (issue)) == CUDA_ERROR_OUT_OF_MEMORY && lms_call_make_room()) \
                ;                                                                      \
        lms_call_end(&(call), (result));                                               \
    } while (0)
#define LMS_MANAGED_CALL(call, issue)                                                  \
    do {                                                                               \
        CUresult lms_result;                                                           \
        LMS_MANAGED_ISSUE(call, issue, lms_result);                                    \
        return lms_result;                                                             \
    } while (0)

/* A launch's references: its parameters, and what the pointer arrays they point into hold. */
void lms_scan_launch(lms_call *call, CUfunction f, void **params, void **extra);
/* The device range a 2D/3D copy reads or writes on one side (rows beyond the first start a
 * pitch apart; planes, plane_rows rows apart). */
void lms_ref_pitched(lms_call *call, CUmemorytype type, CUdeviceptr base, size_t x, size_t y,
                     size_t z, size_t pitch, size_t plane_rows, size_t width, size_t height,
                     size_t depth);
/* Both sides of a CUDA_MEMCPY3D (or _PEER) at p. */
#define REF_3D(c, p) \
    (lms_ref_pitched(c, (p)->srcMemoryType, (p)->srcDevice, (p)->srcXInBytes, (p)->srcY,    \
                     (p)->srcZ, (p)->srcPitch, (p)->srcHeight, (p)->WidthInBytes, (p)->Height, \
                     (p)->Depth),                                                           \
     lms_ref_pitched(c, (p)->dstMemoryType, (p)->dstDevice, (p)->dstXInBytes, (p)->dstY,    \
                     (p)->dstZ, (p)->dstPitch, (p)->dstHeight, (p)->WidthInBytes, (p)->Height, \
                     (p)->Depth))
/* A pitched memset of h rows of w elements of elem bytes. */
void lms_ref_memset_2d(lms_call *call, CUdeviceptr dst, size_t pitch, size_t w, size_t h, size_t elem);
/* The words a batch of stream memory operations waits on or writes. */
void lms_ref_mem_ops(lms_call *call, unsigned count, const CUstreamBatchMemOpParams *ops);
/* cuMemFreeAsync on stream, as liblms does it. */
CUresult lms_free_async(CUdeviceptr dptr, CUstream stream);

#endif
