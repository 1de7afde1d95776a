/* Finding the allocations a launch references: every 8-byte-aligned word of its
 * parameters, laid out as cuKernelGetParamInfo (CUkernel handles: cudart, cuBLAS, cuDNN,
 * PyTorch) or cuFuncGetParamInfo (CUfunction handles) says, cached per handle; or the
 * packed `extra` buffer (cuBLASLt). */
#include "preload/hooks.h"
#include "preload/residency.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct param { size_t offset, size; } param;

typedef struct param_layout {
    CUfunction f;
    const char *name; /* the kernel's, from the driver; "launch" when it has none */
    size_t count;    /* 0 also when the driver knows no layout: nothing to scan */
    param *params;
    UT_hash_handle hh;
} param_layout;

static param_layout *layouts;
static pthread_mutex_t layouts_lock = PTHREAD_MUTEX_INITIALIZER;

static CUresult param_info(CUfunction f, int as_kernel, size_t i, size_t *offset, size_t *size)
{
    if (as_kernel)
        return lms_real.cuKernelGetParamInfo ? lms_real.cuKernelGetParamInfo((CUkernel)f, i, offset, size)
                                             : CUDA_ERROR_NOT_SUPPORTED;
    return lms_real.cuFuncGetParamInfo ? lms_real.cuFuncGetParamInfo(f, i, offset, size)
                                       : CUDA_ERROR_NOT_SUPPORTED;
}

static param_layout *learn_layout(CUfunction f)
{
    param_layout *layout = calloc(1, sizeof *layout);
    if (!layout)
        return NULL;
    layout->f = f;
    size_t offset, size;
    int as_kernel = param_info(f, 1, 0, &offset, &size) == CUDA_SUCCESS;
    layout->name = "launch";
    if (lms_real.cuKernelGetName && lms_real.cuKernelGetName(&layout->name, (CUkernel)f) != CUDA_SUCCESS &&
        lms_real.cuFuncGetName && lms_real.cuFuncGetName(&layout->name, f) != CUDA_SUCCESS)
        layout->name = "launch";
    if (as_kernel || param_info(f, 0, 0, &offset, &size) == CUDA_SUCCESS) {
        size_t cap = 0;
        for (size_t i = 0; param_info(f, as_kernel, i, &offset, &size) == CUDA_SUCCESS; i++) {
            if (layout->count == cap) {
                cap = cap ? cap * 2 : 8;
                param *grown = realloc(layout->params, cap * sizeof *grown);
                if (!grown)
                    break;
                layout->params = grown;
            }
            layout->params[layout->count++] = (param){ offset, size };
        }
    }
    HASH_ADD_PTR(layouts, f, layout);
    return layout;
}

void lms_launch_scan_fork_lock(void) { pthread_mutex_lock(&layouts_lock); }
void lms_launch_scan_fork_unlock(void) { pthread_mutex_unlock(&layouts_lock); }

/* Adds each 8-byte-aligned word of bytes (which start at `offset` of the parameter block). */
static void scan_words(lms_call *call, const unsigned char *bytes, size_t offset, size_t size)
{
    for (size_t k = (8 - offset % 8) % 8; k + 8 <= size; k += 8) {
        uint64_t word;
        memcpy(&word, bytes + k, sizeof word);
        if (word)
            lms_call_ref(call, (CUdeviceptr)word, 1, 0);
    }
}

void lms_call_scan_launch(lms_call *call, CUfunction f, void **params, void **extra)
{
    pthread_mutex_lock(&layouts_lock);
    param_layout *layout;
    HASH_FIND_PTR(layouts, &f, layout);
    if (!layout)
        layout = learn_layout(f);
    pthread_mutex_unlock(&layouts_lock);
    /* Layouts are never changed or freed once learnt: reading one needs no lock. */
    if (layout)
        call->what = layout->name;
    if (params) {
        for (size_t i = 0; layout && i < layout->count; i++)
            if (params[i])
                scan_words(call, params[i], layout->params[i].offset, layout->params[i].size);
        return;
    }
    const unsigned char *buffer = NULL;
    size_t size = 0;
    for (size_t i = 0; extra && extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buffer = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = *(size_t *)extra[i + 1];
    }
    if (buffer)
        scan_words(call, buffer, 0, size);
}
