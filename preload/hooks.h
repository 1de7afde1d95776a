/* The one table of intercepted driver entry points, and what interpose.c gives the wrappers
 * (the real driver behind them is preload/real_driver.h's).
 *
 * LMS_HOOK_TABLE lists every entry point liblms manages: X(symbol, prototype), where
 * `symbol` is the exact versioned name the driver exports and `prototype` is a function
 * declared in cuda.h with the same type (the _ptds/_ptsz per-thread-stream variants are not
 * declared there), or the type of an older ABI below. liblms exports a wrapper under each symbol; dlsym and cuGetProcAddress
 * hand the wrapper out in place of the driver's function. Everything else passes through. */
#ifndef LMS_PRELOAD_HOOKS_H
#define LMS_PRELOAD_HOOKS_H

#include <cuda.h>

#define LMS_EXPORT __attribute__((visibility("default")))

/* Older ABIs that cuda.h maps to their successors' names: programs built against older
 * toolkits still get them (cudart asks cuGetProcAddress for a name and its version). */
#undef cuGraphInstantiate
#undef cuGraphExecUpdate
#undef cuMemcpyBatchAsync
typedef CUresult lms_graph_instantiate_v1(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node,
                                          char *log, size_t log_bytes);                /* CUDA 10, 11 */
typedef CUresult lms_graph_exec_update_v1(CUgraphExec exec, CUgraph graph, CUgraphNode *error_node,
                                          CUgraphExecUpdateResult *result);            /* CUDA 10.2 */
typedef CUresult lms_memcpy_batch_v1(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                     CUmemcpyAttributes *attrs, size_t *attr_idxs, size_t attr_count,
                                     size_t *fail_idx, CUstream stream);             /* CUDA 12.8 */

#define LMS_HOOK_TWIN(X, base, suffix) X(base, base) X(base##suffix, base)

#define LMS_HOOK_TABLE(X)                                              \
    /* allocation */                                                   \
    X(cuMemAlloc_v2, cuMemAlloc_v2)                                    \
    X(cuMemAllocPitch_v2, cuMemAllocPitch_v2)                          \
    X(cuMemFree_v2, cuMemFree_v2)                                      \
    X(cuMemGetInfo_v2, cuMemGetInfo_v2)                                \
    LMS_HOOK_TWIN(X, cuMemAllocAsync, _ptsz)                           \
    LMS_HOOK_TWIN(X, cuMemAllocFromPoolAsync, _ptsz)                   \
    LMS_HOOK_TWIN(X, cuMemFreeAsync, _ptsz)                            \
    X(cuMemCreate, cuMemCreate)                                        \
    X(cuMemRelease, cuMemRelease)                                      \
    /* launches */                                                     \
    LMS_HOOK_TWIN(X, cuLaunchKernel, _ptsz)                            \
    LMS_HOOK_TWIN(X, cuLaunchKernelEx, _ptsz)                          \
    LMS_HOOK_TWIN(X, cuLaunchCooperativeKernel, _ptsz)                 \
    /* copies */                                                       \
    LMS_HOOK_TWIN(X, cuMemcpy, _ptds)                                  \
    LMS_HOOK_TWIN(X, cuMemcpyAsync, _ptsz)                             \
    LMS_HOOK_TWIN(X, cuMemcpyPeer, _ptds)                              \
    LMS_HOOK_TWIN(X, cuMemcpyPeerAsync, _ptsz)                         \
    LMS_HOOK_TWIN(X, cuMemcpyHtoD_v2, _ptds)                           \
    LMS_HOOK_TWIN(X, cuMemcpyDtoH_v2, _ptds)                           \
    LMS_HOOK_TWIN(X, cuMemcpyDtoD_v2, _ptds)                           \
    LMS_HOOK_TWIN(X, cuMemcpyHtoDAsync_v2, _ptsz)                      \
    LMS_HOOK_TWIN(X, cuMemcpyDtoHAsync_v2, _ptsz)                      \
    LMS_HOOK_TWIN(X, cuMemcpyDtoDAsync_v2, _ptsz)                      \
    LMS_HOOK_TWIN(X, cuMemcpyDtoA_v2, _ptds)                           \
    LMS_HOOK_TWIN(X, cuMemcpyAtoD_v2, _ptds)                           \
    LMS_HOOK_TWIN(X, cuMemcpy2D_v2, _ptds)                             \
    LMS_HOOK_TWIN(X, cuMemcpy2DUnaligned_v2, _ptds)                    \
    LMS_HOOK_TWIN(X, cuMemcpy2DAsync_v2, _ptsz)                        \
    LMS_HOOK_TWIN(X, cuMemcpy3D_v2, _ptds)                             \
    LMS_HOOK_TWIN(X, cuMemcpy3DAsync_v2, _ptsz)                        \
    LMS_HOOK_TWIN(X, cuMemcpy3DPeer, _ptds)                            \
    LMS_HOOK_TWIN(X, cuMemcpy3DPeerAsync, _ptsz)                       \
    LMS_HOOK_TWIN(X, cuMemcpyBatchAsync_v2, _ptsz)                     \
    X(cuMemcpyBatchAsync, lms_memcpy_batch_v1)                         \
    X(cuMemcpyBatchAsync_ptsz, lms_memcpy_batch_v1)                    \
    /* waits for the device */                                         \
    LMS_HOOK_TWIN(X, cuStreamSynchronize, _ptsz)                       \
    X(cuEventSynchronize, cuEventSynchronize)                          \
    /* stream memory operations */                                     \
    LMS_HOOK_TWIN(X, cuStreamWriteValue32_v2, _ptsz)                   \
    LMS_HOOK_TWIN(X, cuStreamWriteValue64_v2, _ptsz)                   \
    LMS_HOOK_TWIN(X, cuStreamWaitValue32_v2, _ptsz)                    \
    LMS_HOOK_TWIN(X, cuStreamWaitValue64_v2, _ptsz)                    \
    LMS_HOOK_TWIN(X, cuStreamBatchMemOp_v2, _ptsz)                     \
    /* memsets */                                                      \
    LMS_HOOK_TWIN(X, cuMemsetD8_v2, _ptds)                             \
    LMS_HOOK_TWIN(X, cuMemsetD16_v2, _ptds)                            \
    LMS_HOOK_TWIN(X, cuMemsetD32_v2, _ptds)                            \
    LMS_HOOK_TWIN(X, cuMemsetD2D8_v2, _ptds)                           \
    LMS_HOOK_TWIN(X, cuMemsetD2D16_v2, _ptds)                          \
    LMS_HOOK_TWIN(X, cuMemsetD2D32_v2, _ptds)                          \
    LMS_HOOK_TWIN(X, cuMemsetD8Async, _ptsz)                           \
    LMS_HOOK_TWIN(X, cuMemsetD16Async, _ptsz)                          \
    LMS_HOOK_TWIN(X, cuMemsetD32Async, _ptsz)                          \
    LMS_HOOK_TWIN(X, cuMemsetD2D8Async, _ptsz)                         \
    LMS_HOOK_TWIN(X, cuMemsetD2D16Async, _ptsz)                        \
    LMS_HOOK_TWIN(X, cuMemsetD2D32Async, _ptsz)                        \
    /* graphs */                                                       \
    LMS_HOOK_TWIN(X, cuStreamBeginCapture_v2, _ptsz)                   \
    LMS_HOOK_TWIN(X, cuStreamBeginCaptureToGraph, _ptsz)               \
    LMS_HOOK_TWIN(X, cuStreamEndCapture, _ptsz)                        \
    X(cuGraphInstantiateWithFlags, cuGraphInstantiateWithFlags)        \
    LMS_HOOK_TWIN(X, cuGraphInstantiateWithParams, _ptsz)              \
    X(cuGraphInstantiate, lms_graph_instantiate_v1)                    \
    X(cuGraphInstantiate_v2, lms_graph_instantiate_v1)                 \
    X(cuGraphExecUpdate, lms_graph_exec_update_v1)                     \
    X(cuGraphExecUpdate_v2, cuGraphExecUpdate_v2)                      \
    LMS_HOOK_TWIN(X, cuGraphLaunch, _ptsz)                             \
    X(cuGraphExecDestroy, cuGraphExecDestroy)                          \
    X(cuGraphDestroy, cuGraphDestroy)                                  \
    /* what the driver says of an allocation, and its exports */       \
    X(cuPointerGetAttribute, cuPointerGetAttribute)                    \
    X(cuPointerGetAttributes, cuPointerGetAttributes)                  \
    X(cuMemGetAddressRange_v2, cuMemGetAddressRange_v2)                \
    X(cuIpcGetMemHandle, cuIpcGetMemHandle)                            \
    X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle)        \
    /* unloads: the kernel handles they free may come back */           \
    X(cuModuleUnload, cuModuleUnload)                                  \
    X(cuLibraryUnload, cuLibraryUnload)                                \
    /* context teardown: liblms's streams and events go with it */     \
    X(cuDevicePrimaryCtxReset_v2, cuDevicePrimaryCtxReset_v2)          \
    X(cuDevicePrimaryCtxRelease_v2, cuDevicePrimaryCtxRelease_v2)      \
    X(cuCtxDestroy_v2, cuCtxDestroy_v2)

/* The per-thread variants, declared with the type of their prototype. */
#define LMS_DECLARE_HOOK(symbol, prototype) LMS_EXPORT __typeof__(prototype) symbol;
LMS_HOOK_TABLE(LMS_DECLARE_HOOK)
#undef LMS_DECLARE_HOOK

/* Loads libcuda.so.1 and the options once; every hook calls it, or lms_passing_through, first. */
void lms_init(void);
/* lms_init, then whether liblms only passes calls through (LMS_MODE=off, or the driver could
 * not be loaded) rather than managing them (swap or cap). */
int lms_passing_through(void);

/* The wrapper liblms hands out for a real driver function, or `real` itself. */
void *lms_wrapper_for(void *real);

#endif
