/* What the driver says of a swappable allocation, and how it is handed out. liblms's
 * allocations are VMM ranges whose memory moves between a device handle and host backing;
 * to the program they are cuMemAlloc memory: pointer queries answer device memory of its
 * device and its own range, resident or not. Legacy IPC cannot export VMM memory: the
 * driver's refusal comes with a log line that says what to do. A handle the program retains
 * (to export it) stays the allocation's own: the residency manager keeps it resident. */
#include "preload/hooks.h"
#include "preload/log.h"
#include "preload/real_driver.h"
#include "preload/residency.h"

/* Answers attr for a swappable allocation as the driver does for cuMemAlloc memory:
 * CUDA_ERROR_NOT_FOUND where the driver's own answer holds. */
static CUresult own_answer(void *data, CUpointer_attribute attr, CUdeviceptr ptr, const lms_allocation *a)
{
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned *)data = CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = a->device;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = a->ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        *(CUdeviceptr *)data = ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER: /* device memory has none */
        return CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = a->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = a->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = 1;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE: /* VMM memory: see cuIpcGetMemHandle */
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(int *)data = CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_FOUND;
    }
}

LMS_EXPORT CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr)
{
    lms_allocation a;
    if (lms_passing_through() || !data || !lms_allocation_at(ptr, &a))
        return lms_real.cuPointerGetAttribute(data, attr, ptr);
    CUresult r = own_answer(data, attr, ptr, &a);
    return r == CUDA_ERROR_NOT_FOUND ? lms_real.cuPointerGetAttribute(data, attr, ptr) : r;
}

/* The driver answers first (an attribute with no answer gets its default there); liblms's
 * answers replace its own. */
LMS_EXPORT CUresult cuPointerGetAttributes(unsigned count, CUpointer_attribute *attrs, void **data,
                                           CUdeviceptr ptr)
{
    lms_allocation a;
    int passthrough = lms_passing_through();
    CUresult r = lms_real.cuPointerGetAttributes(count, attrs, data, ptr);
    if (passthrough || r != CUDA_SUCCESS || !lms_allocation_at(ptr, &a))
        return r;
    for (unsigned i = 0; i < count; i++)
        if (own_answer(data[i], attrs[i], ptr, &a) == CUDA_ERROR_INVALID_VALUE)
            *(void **)data[i] = NULL; /* the host pointer: none, as the plural form answers */
    return CUDA_SUCCESS;
}

LMS_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr ptr)
{
    lms_allocation a;
    if (lms_passing_through() || !lms_allocation_at(ptr, &a))
        return lms_real.cuMemGetAddressRange_v2(base, size, ptr);
    if (base)
        *base = a.base;
    if (size)
        *size = a.size;
    return CUDA_SUCCESS;
}

LMS_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr ptr)
{
    lms_allocation a;
    int passthrough = lms_passing_through();
    CUresult r = lms_real.cuIpcGetMemHandle(handle, ptr);
    if (r != CUDA_SUCCESS && !passthrough && lms_allocation_at(ptr, &a))
        lms_log(LMS_LOG_ERROR, a.device,
                "cuIpcGetMemHandle(0x%llx): error %d: liblms made this allocation of %zu bytes swappable "
                "(VMM memory, which legacy IPC cannot export); set LMS_THRESHOLD_KB above %zu to keep "
                "allocations of that size plain cuMemAlloc memory, or export it with "
                "cuMemRetainAllocationHandle and cuMemExportToShareableHandle",
                (unsigned long long)ptr, (int)r, a.size, a.size / 1024);
    return r;
}

LMS_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    lms_allocation a;
    if (lms_passing_through() || !lms_allocation_at((CUdeviceptr)addr, &a))
        return lms_real.cuMemRetainAllocationHandle(handle, addr);
    return lms_retain_handle(handle, (CUdeviceptr)addr);
}
