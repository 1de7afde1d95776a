/* cuGetProcAddress: how cudart, cuBLAS and cuDNN find the driver's entry points.
 *
 * A request names the base symbol ("cuMemAlloc"); the answer is the newest variant that
 * the caller's CUDA version allows (cuMemAlloc_v2 from 3.2), or its _ptds/_ptsz form when
 * the caller asks for per-thread default stream semantics. A name that cuda.h declares but
 * the simulator does not implement gets a stub that logs the call and answers
 * CUDA_ERROR_NOT_SUPPORTED, so nothing fails or succeeds silently; any other name is
 * CUDA_ERROR_NOT_FOUND. */
#include "sim/sim_internal.h"
#include "sim/per_thread.h"

#include <string.h>

typedef struct entry {
    const char *name;           /* base name, as requested */
    int version;                /* first CUDA version (1000 * major + 10 * minor) of fn */
    void *fn;
    void *per_thread_fn;        /* the _ptds/_ptsz variant, if the entry has one */
} entry;

#define ENTRY(name, version, fn) {name, version, (void *)fn, NULL}
#define ENTRY_PT(name, version, fn, pt) {name, version, (void *)fn, (void *)pt}

/* Several rows for one name: the newest allowed by the caller's version wins. */
static const entry entries[] = {
    ENTRY("cuGetProcAddress", 11030, cuGetProcAddress),
    ENTRY("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    ENTRY("cuGetErrorName", 6000, cuGetErrorName),
    ENTRY("cuGetErrorString", 6000, cuGetErrorString),
    ENTRY("cuInit", 2000, cuInit),
    ENTRY("cuDriverGetVersion", 2020, cuDriverGetVersion),
    ENTRY("cuDeviceGet", 2000, cuDeviceGet),
    ENTRY("cuDeviceGetCount", 2000, cuDeviceGetCount),
    ENTRY("cuDeviceGetName", 2000, cuDeviceGetName),
    ENTRY("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    ENTRY("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    ENTRY("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    ENTRY("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease_v2),
    ENTRY("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset_v2),
    ENTRY("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    ENTRY("cuCtxCreate", 3020, cuCtxCreate_v2),
    ENTRY("cuCtxCreate", 11040, cuCtxCreate_v3),
    ENTRY("cuCtxCreate", 12050, cuCtxCreate_v4),
    ENTRY("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    ENTRY("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    ENTRY("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    ENTRY("cuCtxGetId", 12000, cuCtxGetId),
    ENTRY("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer),
    ENTRY("cuCtxEnablePeerAccess", 4000, cuCtxEnablePeerAccess),
    ENTRY("cuCtxDisablePeerAccess", 4000, cuCtxDisablePeerAccess),
    ENTRY("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    ENTRY("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    ENTRY("cuCtxGetDevice", 2000, cuCtxGetDevice),
    ENTRY("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    ENTRY("cuCtxSynchronize", 2000, cuCtxSynchronize),
    ENTRY("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    ENTRY("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    ENTRY("cuMemAlloc", 3020, cuMemAlloc_v2),
    ENTRY("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    ENTRY("cuMemFree", 3020, cuMemFree_v2),
    ENTRY_PT("cuMemAllocAsync", 11020, cuMemAllocAsync, cuMemAllocAsync_ptsz),
    ENTRY_PT("cuMemFreeAsync", 11020, cuMemFreeAsync, cuMemFreeAsync_ptsz),
    ENTRY_PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz),
    ENTRY("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    ENTRY("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    ENTRY("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    ENTRY("cuMemAddressReserve", 10020, cuMemAddressReserve),
    ENTRY("cuMemAddressFree", 10020, cuMemAddressFree),
    ENTRY("cuMemCreate", 10020, cuMemCreate),
    ENTRY("cuMemRelease", 10020, cuMemRelease),
    ENTRY("cuMemMap", 10020, cuMemMap),
    ENTRY("cuMemUnmap", 10020, cuMemUnmap),
    ENTRY("cuMemSetAccess", 10020, cuMemSetAccess),
    ENTRY("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    ENTRY("cuMemGetAccess", 10020, cuMemGetAccess),
    ENTRY("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    ENTRY("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    ENTRY("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    ENTRY("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    ENTRY("cuIpcOpenMemHandle", 4010, cuIpcOpenMemHandle_v2),
    ENTRY("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),
    ENTRY("cuMemHostAlloc", 2020, cuMemHostAlloc),
    ENTRY("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    ENTRY("cuMemFreeHost", 2000, cuMemFreeHost),
    ENTRY("cuMemHostRegister", 4000, cuMemHostRegister_v2),
    ENTRY("cuMemHostUnregister", 4000, cuMemHostUnregister),
    ENTRY("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
    ENTRY("cuStreamCreate", 2000, cuStreamCreate),
    ENTRY("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
    ENTRY("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    ENTRY_PT("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    ENTRY_PT("cuStreamQuery", 2000, cuStreamQuery, cuStreamQuery_ptsz),
    ENTRY_PT("cuStreamWaitEvent", 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
    ENTRY_PT("cuStreamGetId", 12000, cuStreamGetId, cuStreamGetId_ptsz),
    ENTRY_PT("cuStreamGetCtx", 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz),
    ENTRY_PT("cuStreamGetCtx", 12050, cuStreamGetCtx_v2, cuStreamGetCtx_v2_ptsz),
    ENTRY("cuEventCreate", 2000, cuEventCreate),
    ENTRY("cuEventDestroy", 4000, cuEventDestroy_v2),
    ENTRY_PT("cuEventRecord", 2000, cuEventRecord, cuEventRecord_ptsz),
    ENTRY_PT("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz),
    ENTRY("cuEventQuery", 2000, cuEventQuery),
    ENTRY("cuEventSynchronize", 2000, cuEventSynchronize),
    ENTRY("cuEventElapsedTime", 2000, cuEventElapsedTime),
    ENTRY("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),
    ENTRY_PT("cuLaunchHostFunc", 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
    ENTRY_PT("cuStreamWriteValue32", 11070, cuStreamWriteValue32_v2, cuStreamWriteValue32_v2_ptsz),
    ENTRY_PT("cuStreamWriteValue64", 11070, cuStreamWriteValue64_v2, cuStreamWriteValue64_v2_ptsz),
    ENTRY_PT("cuStreamWaitValue32", 11070, cuStreamWaitValue32_v2, cuStreamWaitValue32_v2_ptsz),
    ENTRY_PT("cuStreamWaitValue64", 11070, cuStreamWaitValue64_v2, cuStreamWaitValue64_v2_ptsz),
    ENTRY_PT("cuStreamBatchMemOp", 11070, cuStreamBatchMemOp_v2, cuStreamBatchMemOp_v2_ptsz),
    ENTRY_PT("cuMemcpy", 4000, cuMemcpy, cuMemcpy_ptds),
    ENTRY_PT("cuMemcpyAsync", 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
    ENTRY_PT("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds),
    ENTRY_PT("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds),
    ENTRY_PT("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds),
    ENTRY_PT("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz),
    ENTRY_PT("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz),
    ENTRY_PT("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz),
    ENTRY_PT("cuMemcpy2D", 3020, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds),
    ENTRY_PT("cuMemcpy2DAsync", 3020, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz),
    ENTRY_PT("cuMemcpy2DUnaligned", 3020, cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2_ptds),
    ENTRY_PT("cuMemcpyBatchAsync", 12080, cuMemcpyBatchAsync, cuMemcpyBatchAsync_ptsz),
    ENTRY_PT("cuMemcpyBatchAsync", 13000, cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2_ptsz),
    ENTRY_PT("cuMemcpy3D", 3020, cuMemcpy3D_v2, cuMemcpy3D_v2_ptds),
    ENTRY_PT("cuMemcpy3DAsync", 3020, cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2_ptsz),
    ENTRY_PT("cuMemcpy3DPeer", 4000, cuMemcpy3DPeer, cuMemcpy3DPeer_ptds),
    ENTRY_PT("cuMemcpy3DPeerAsync", 4000, cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync_ptsz),
    ENTRY_PT("cuMemsetD8", 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds),
    ENTRY_PT("cuMemsetD16", 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
    ENTRY_PT("cuMemsetD32", 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
    ENTRY_PT("cuMemsetD8Async", 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz),
    ENTRY_PT("cuMemsetD16Async", 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
    ENTRY_PT("cuMemsetD32Async", 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),
    ENTRY_PT("cuMemsetD2D8", 3020, cuMemsetD2D8_v2, cuMemsetD2D8_v2_ptds),
    ENTRY_PT("cuMemsetD2D16", 3020, cuMemsetD2D16_v2, cuMemsetD2D16_v2_ptds),
    ENTRY_PT("cuMemsetD2D32", 3020, cuMemsetD2D32_v2, cuMemsetD2D32_v2_ptds),
    ENTRY_PT("cuMemsetD2D8Async", 3020, cuMemsetD2D8Async, cuMemsetD2D8Async_ptsz),
    ENTRY_PT("cuMemsetD2D16Async", 3020, cuMemsetD2D16Async, cuMemsetD2D16Async_ptsz),
    ENTRY_PT("cuMemsetD2D32Async", 3020, cuMemsetD2D32Async, cuMemsetD2D32Async_ptsz),
    ENTRY_PT("cuMemcpyPeer", 4000, cuMemcpyPeer, cuMemcpyPeer_ptds),
    ENTRY_PT("cuMemcpyPeerAsync", 4000, cuMemcpyPeerAsync, cuMemcpyPeerAsync_ptsz),
    ENTRY_PT("cuLaunchKernel", 4000, cuLaunchKernel, cuLaunchKernel_ptsz),
    ENTRY_PT("cuLaunchKernelEx", 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz),
    ENTRY_PT("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel,
             cuLaunchCooperativeKernel_ptsz),
    ENTRY("cuKernelGetParamInfo", 12040, cuKernelGetParamInfo),
    ENTRY("cuFuncGetParamInfo", 12040, cuFuncGetParamInfo),
    ENTRY("cuKernelGetName", 12030, cuKernelGetName),
    ENTRY("cuFuncGetName", 12030, cuFuncGetName),
    ENTRY("cuKernelGetFunction", 12000, cuKernelGetFunction),
    ENTRY("cuModuleLoad", 2000, cuModuleLoad),
    ENTRY("cuModuleLoadData", 2000, cuModuleLoadData),
    ENTRY("cuModuleGetFunction", 2000, cuModuleGetFunction),
    ENTRY("cuModuleUnload", 2000, cuModuleUnload),
    ENTRY("cuLibraryLoadFromFile", 12000, cuLibraryLoadFromFile),
    ENTRY("cuLibraryLoadData", 12000, cuLibraryLoadData),
    ENTRY("cuLibraryGetKernel", 12000, cuLibraryGetKernel),
    ENTRY("cuLibraryUnload", 12000, cuLibraryUnload),
    ENTRY_PT("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
    ENTRY_PT("cuStreamEndCapture", 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
    ENTRY_PT("cuStreamIsCapturing", 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
    ENTRY_PT("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz),
    ENTRY_PT("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2,
             cuStreamGetCaptureInfo_v2_ptsz),
    ENTRY_PT("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3,
             cuStreamGetCaptureInfo_v3_ptsz),
    ENTRY("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    ENTRY("cuGraphCreate", 10000, cuGraphCreate),
    ENTRY("cuGraphAddKernelNode", 10000, cuGraphAddKernelNode),
    ENTRY("cuGraphAddKernelNode", 12000, cuGraphAddKernelNode_v2),
    ENTRY("cuGraphKernelNodeGetParams", 10000, cuGraphKernelNodeGetParams),
    ENTRY("cuGraphKernelNodeGetParams", 12000, cuGraphKernelNodeGetParams_v2),
    ENTRY("cuGraphMemcpyNodeGetParams", 10000, cuGraphMemcpyNodeGetParams),
    ENTRY("cuGraphMemsetNodeGetParams", 10000, cuGraphMemsetNodeGetParams),
    ENTRY("cuGraphGetNodes", 10000, cuGraphGetNodes),
    ENTRY("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    ENTRY("cuGraphNodeGetDependencies", 10000, cuGraphNodeGetDependencies),
    ENTRY("cuGraphNodeGetDependencies", 12030, cuGraphNodeGetDependencies_v2),
    ENTRY("cuGraphInstantiate", 10000, cuGraphInstantiate),
    ENTRY("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    ENTRY("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
    ENTRY("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    ENTRY_PT("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams,
             cuGraphInstantiateWithParams_ptsz),
    ENTRY_PT("cuGraphLaunch", 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
    ENTRY("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    ENTRY("cuGraphExecUpdate", 10020, cuGraphExecUpdate),
    ENTRY("cuGraphExecUpdate", 12000, cuGraphExecUpdate_v2),
    ENTRY("cuGraphDestroy", 10000, cuGraphDestroy),
};

/* Stubs for every other entry point of cuda.h (unsupported_names.h is generated from it):
 * each logs its name and answers NOT_SUPPORTED whatever its real signature. */
#define CD_UNSUPPORTED(name) \
    static CUresult stub_##name(void) { return cd_unsupported(#name); }
#include "unsupported_names.h"
#undef CD_UNSUPPORTED

#define CD_UNSUPPORTED(name) {#name, 0, (void *)stub_##name, NULL},
static const entry stubs[] = {
#include "unsupported_names.h"
};
#undef CD_UNSUPPORTED

static CUresult lookup(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                       CUdriverProcAddressQueryResult *status)
{
    const entry *best = NULL;
    bool named = false;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        if (strcmp(entries[i].name, symbol) != 0)
            continue;
        named = true;
        if (entries[i].version <= cudaVersion && (!best || entries[i].version > best->version))
            best = &entries[i];
    }
    for (size_t i = 0; !named && i < sizeof stubs / sizeof stubs[0]; i++)
        if (strcmp(stubs[i].name, symbol) == 0)
            best = &stubs[i], named = true;
    *status = best ? CU_GET_PROC_ADDRESS_SUCCESS
              : named ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                      : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    *pfn = NULL;
    if (!best)
        return CUDA_ERROR_NOT_FOUND;
    *pfn = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best->per_thread_fn
               ? best->per_thread_fn
               : best->fn;
    return CUDA_SUCCESS;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    CD_ENTER_ANYTIME("cuGetProcAddress");
    const cuuint64_t known_flags =
        CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    if (!symbol || !pfn || (flags & ~known_flags))
        return CUDA_ERROR_INVALID_VALUE;
    CUdriverProcAddressQueryResult status;
    CUresult result = lookup(symbol, pfn, cudaVersion, flags, &status);
    if (symbolStatus)
        *symbolStatus = status;
    return result;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    CD_ENTER_ANYTIME("cuGetProcAddress");
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    CUdriverProcAddressQueryResult status;
    return lookup(symbol, pfn, cudaVersion, flags, &status);
}
