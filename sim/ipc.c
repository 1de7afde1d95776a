/* Interprocess memory handles (legacy CUDA IPC).
 *
 * cuIpcGetMemHandle exports cuMemAlloc memory only: VMM memory is INVALID_VALUE (measured,
 * GPU-FACTS.md), and so are pool, pinned and unknown memory. A handle names the allocation and
 * the process that made it. The driver refuses to open a handle in the process that exported
 * it (CUDA_ERROR_INVALID_CONTEXT, as seen from the real driver); the simulator's device memory
 * is private to its process, so a handle from another process cannot be opened either: that is
 * NOT_SUPPORTED, and logged. Nothing is ever opened, so nothing can be closed. */
#include "sim/sim_internal.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define HANDLE_MAGIC "lms-sim-ipc"

typedef struct handle_contents {
    char magic[sizeof HANDLE_MAGIC];
    pid_t pid;
    unsigned long long buffer_id;
    CUdeviceptr base;
} handle_contents;

_Static_assert(sizeof(handle_contents) <= CU_IPC_HANDLE_SIZE, "an IPC handle holds 64 bytes");

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
    CD_ENTER("cuIpcGetMemHandle");
    if (!pHandle)
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    cd_pointer_info info;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_current_ctx_locked(&ctx);
    if (result == CUDA_SUCCESS) {
        cd_pointer_info_locked((uintptr_t)dptr, ctx, &info);
        if (info.kind != CD_POINTER_DEVICE)
            result = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&cd.lock);
    if (result != CUDA_SUCCESS)
        return result;
    handle_contents contents = {HANDLE_MAGIC, getpid(), info.buffer_id, (CUdeviceptr)info.base};
    memset(pHandle, 0, sizeof *pHandle);
    memcpy(pHandle->reserved, &contents, sizeof contents);
    return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int Flags)
{
    CD_ENTER("cuIpcOpenMemHandle");
    if (!pdptr || (Flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS))
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    CUresult result = cd_current_ctx(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    handle_contents contents;
    memcpy(&contents, handle.reserved, sizeof contents);
    if (memcmp(contents.magic, HANDLE_MAGIC, sizeof contents.magic) != 0)
        return CUDA_ERROR_INVALID_HANDLE;
    if (contents.pid == getpid()) {
        cd_log("cuIpcOpenMemHandle: the handle was exported by this process: "
               "CUDA_ERROR_INVALID_CONTEXT, as on the real driver");
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    char what[96];
    snprintf(what, sizeof what, "cuIpcOpenMemHandle of memory of process %ld", (long)contents.pid);
    return cd_unsupported(what);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
    CD_ENTER("cuIpcCloseMemHandle");
    (void)dptr;
    cd_ctx *ctx;
    CUresult result = cd_current_ctx(&ctx);
    return result == CUDA_SUCCESS ? CUDA_ERROR_INVALID_VALUE : result;
}
