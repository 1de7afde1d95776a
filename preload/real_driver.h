/* The real driver behind liblms's hooks: libcuda.so.1's functions, resolved once. */
#ifndef LMS_PRELOAD_REAL_DRIVER_H
#define LMS_PRELOAD_REAL_DRIVER_H

#include "preload/hooks.h"

/* Driver functions liblms calls itself and does not intercept. */
#define LMS_DRIVER_TABLE(X)                                                                 \
    X(cuGetProcAddress_v2) X(cuCtxGetDevice) X(cuCtxGetCurrent) X(cuCtxSetCurrent)          \
    X(cuDeviceTotalMem_v2) X(cuDeviceGetAttribute) X(cuMemGetAllocationGranularity)          \
    X(cuMemAddressReserve) X(cuMemAddressFree) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)   \
    X(cuMemHostAlloc) X(cuMemFreeHost) X(cuStreamCreate) X(cuStreamDestroy_v2) X(cuStreamWaitEvent) \
    X(cuCtxSynchronize) X(cuStreamQuery)                                                     \
    X(cuEventCreate) X(cuEventRecord) X(cuEventQuery) X(cuEventDestroy_v2) X(cuEventElapsedTime_v2) \
    X(cuKernelGetParamInfo) X(cuFuncGetParamInfo) X(cuKernelGetName) X(cuFuncGetName)       \
    X(cuStreamIsCapturing) X(cuThreadExchangeStreamCaptureMode) X(cuDeviceGetDefaultMemPool)       \
    X(cuDeviceGetMemPool) X(cuDevicePrimaryCtxGetState) X(cuDevicePrimaryCtxRetain)          \
    X(cuStreamGetId) X(cuStreamGetCaptureInfo_v3) X(cuDeviceGetCount) X(cuDeviceCanAccessPeer) \
    X(cuGraphGetNodes) X(cuGraphNodeGetType) X(cuGraphKernelNodeGetParams_v2)                 \
    X(cuGraphMemcpyNodeGetParams) X(cuGraphMemsetNodeGetParams) X(cuGraphChildGraphNodeGetGraph) \
    X(cuGraphBatchMemOpNodeGetParams)

/* The real driver, resolved once from libcuda.so.1; a NULL entry is missing there. */
typedef struct lms_driver {
#define LMS_REAL_HOOK(symbol, prototype) __typeof__(prototype) *symbol;
    LMS_HOOK_TABLE(LMS_REAL_HOOK)
#undef LMS_REAL_HOOK
#define LMS_REAL_CALL(symbol) __typeof__(symbol) *symbol;
    LMS_DRIVER_TABLE(LMS_REAL_CALL)
#undef LMS_REAL_CALL
    CUresult (*get_proc_address_v1)(const char *, void **, int, cuuint64_t); /* "cuGetProcAddress" */
} lms_driver;

extern lms_driver lms_real;

/* Loads libcuda.so.1 and fills lms_real from it (with glibc's dlsym, not liblms's). Returns 0,
 * or -1 where libcuda.so.1 cannot be loaded (dlerror() says why): lms_real stays all NULL. */
int lms_real_driver_load(void);

#endif
