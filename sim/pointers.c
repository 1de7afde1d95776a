/* Pointer queries: cuPointerGetAttribute(s) answer what the simulator knows of an address
 * (memory.c), as the driver does for cuMemAlloc, pool, pinned and registered host, and VMM
 * memory. Each attribute is written with the size the driver writes: booleans as int.
 *
 * Where GPU-FACTS.md has no measurement, the answers are assumptions: host-located VMM memory
 * reports MEMORY_TYPE host and DEVICE_ORDINAL -1 (CU_DEVICE_CPU), VMM and pool memory no
 * context, and an address reserved but not mapped answers only RANGE_START_ADDR, RANGE_SIZE
 * and MAPPED (0). */
#include "sim/sim_internal.h"

/* Writes one attribute of the memory info describes into data: INVALID_VALUE where the driver
 * has no answer for that memory, NOT_SUPPORTED (logged) for attributes not modelled. */
static CUresult attribute(void *data, CUpointer_attribute attribute, const cd_pointer_info *info,
                          uintptr_t ptr)
{
    bool allocated = info->kind != CD_POINTER_UNKNOWN && info->kind != CD_POINTER_RESERVED;
    bool on_host = info->kind == CD_POINTER_HOST || info->kind == CD_POINTER_REGISTERED ||
                   (info->kind == CD_POINTER_MAPPED && info->device < 0);
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
        if (info->kind == CD_POINTER_UNKNOWN)
            return CUDA_ERROR_INVALID_VALUE;
        break;
    default:
        if (!allocated)
            return CUDA_ERROR_INVALID_VALUE;
    }
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
        *(CUcontext *)data = (CUcontext)info->ctx;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = on_host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        if (info->access == CU_MEM_ACCESS_FLAGS_PROT_NONE)
            return CUDA_ERROR_INVALID_VALUE;
        *(CUdeviceptr *)data = (CUdeviceptr)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (!on_host || info->host_access == CU_MEM_ACCESS_FLAGS_PROT_NONE)
            return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)ptr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
        *(unsigned long long *)data = info->buffer_id;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
        *(int *)data = 0;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = info->ctx ? info->ctx->device : info->device;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
        *(int *)data = info->kind == CD_POINTER_DEVICE;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)info->base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = info->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
        *(int *)data = allocated;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
        *(int *)data = (int)info->access;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
        *(CUdeviceptr *)data = (CUdeviceptr)info->mapping_base;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = info->mapping_size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(CUmemoryPool *)data = info->kind == CD_POINTER_POOL ? cd_default_pool(info->device) : NULL;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        return cd_unsupported("cuPointerGetAttribute of this attribute");
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* What ptr is, as seen from the current context (INVALID_CONTEXT without one). */
static CUresult describe(CUdeviceptr ptr, cd_pointer_info *info)
{
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_current_ctx_locked(&ctx);
    if (result == CUDA_SUCCESS)
        cd_pointer_info_locked((uintptr_t)ptr, ctx, info);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute_, CUdeviceptr ptr)
{
    CD_ENTER("cuPointerGetAttribute");
    if (!data)
        return CUDA_ERROR_INVALID_VALUE;
    cd_pointer_info info;
    CUresult result = describe(ptr, &info);
    return result == CUDA_SUCCESS ? attribute(data, attribute_, &info, (uintptr_t)ptr) : result;
}

/* What the plural form answers where the singular one has none: zero, of the attribute's
 * size, and -2 for the device ordinal (as the runtime reports for unregistered memory); false
 * for a value that is no attribute. */
static bool write_default(void *data, CUpointer_attribute attribute)
{
    switch (attribute) {
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = -2;
        return true;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
    case CU_POINTER_ATTRIBUTE_MAPPED:
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        *(int *)data = 0;
        return true;
    case CU_POINTER_ATTRIBUTE_CONTEXT:
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        *(void **)data = NULL;
        return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
        *(unsigned long long *)data = 0;
        return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        *(size_t *)data = 0;
        return true;
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
        *(CUDA_POINTER_ATTRIBUTE_P2P_TOKENS *)data = (CUDA_POINTER_ATTRIBUTE_P2P_TOKENS){0};
        return true;
    default:
        return false;
    }
}

/* Unlike the singular form, an attribute with no answer for this memory (an address unknown
 * to the driver, say) is no error: it gets its default. */
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes,
                                void **data, CUdeviceptr ptr)
{
    CD_ENTER("cuPointerGetAttributes");
    if (numAttributes == 0 || !attributes || !data)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned i = 0; i < numAttributes; i++)
        if (!data[i])
            return CUDA_ERROR_INVALID_VALUE;
    cd_pointer_info info;
    CUresult result = describe(ptr, &info);
    for (unsigned i = 0; result == CUDA_SUCCESS && i < numAttributes; i++) {
        result = attribute(data[i], attributes[i], &info, (uintptr_t)ptr);
        if (result == CUDA_ERROR_INVALID_VALUE && write_default(data[i], attributes[i]))
            result = CUDA_SUCCESS;
    }
    return result;
}
