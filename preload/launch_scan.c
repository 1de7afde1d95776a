/* Finding the allocations a launch references: every 8-byte-aligned word of its
 * parameters, laid out as cuKernelGetParamInfo (CUkernel handles: cudart, cuBLAS, cuDNN,
 * PyTorch) or cuFuncGetParamInfo (CUfunction handles) says, cached per handle until a module
 * or library is unloaded; or the packed `extra` buffer (cuBLASLt). A layout is cached only
 * once the driver has given all of it: a launch whose parameters cannot be read (twice) is
 * marked as one that may use anything. */
#include "preload/real_driver.h"
#include "preload/residency.h"
#include "preload/stats.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

typedef struct param { size_t offset, size; } param;

typedef struct param_layout {
    CUfunction f;
    const char *name; /* the kernel's, from the driver; "launch" when it has none */
    size_t count;
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

/* Reads the whole layout through one family of queries. The driver answers INVALID_VALUE
 * for the index past the last parameter; any other error (INVALID_HANDLE from the other
 * family, or a failure) leaves the layout unknown: returns 0 with nothing read. */
static int read_layout(CUfunction f, int as_kernel, param_layout *layout)
{
    layout->count = 0;
    size_t cap = 0, offset, size;
    for (size_t i = 0;; i++) {
        CUresult r = param_info(f, as_kernel, i, &offset, &size);
        if (r == CUDA_ERROR_INVALID_VALUE)
            return 1;
        if (r != CUDA_SUCCESS)
            break;
        if (layout->count == cap) {
            cap = cap ? cap * 2 : 8;
            param *grown = realloc(layout->params, cap * sizeof *grown);
            if (!grown)
                break;
            layout->params = grown;
        }
        layout->params[layout->count++] = (param){ offset, size };
    }
    layout->count = 0;
    return 0;
}

/* The layout of f, learnt and cached; NULL when the driver does not give all of it. */
static param_layout *learn_layout(CUfunction f)
{
    param_layout *layout = calloc(1, sizeof *layout);
    if (!layout)
        return NULL;
    layout->f = f;
    /* "No parameters" may also be how one family refuses the other's handle: then the
     * function family is asked too. */
    int as_kernel = read_layout(f, 1, layout);
    if (!(as_kernel && layout->count) && !read_layout(f, 0, layout) && !as_kernel) {
        free(layout->params);
        free(layout);
        return NULL;
    }
    layout->name = "launch";
    if (lms_real.cuKernelGetName && lms_real.cuKernelGetName(&layout->name, (CUkernel)f) != CUDA_SUCCESS &&
        lms_real.cuFuncGetName && lms_real.cuFuncGetName(&layout->name, f) != CUDA_SUCCESS)
        layout->name = "launch";
    HASH_ADD_PTR(layouts, f, layout);
    return layout;
}

void lms_launch_scan_forget(void)
{
    pthread_mutex_lock(&layouts_lock);
    param_layout *layout, *next;
    HASH_ITER(hh, layouts, layout, next) {
        HASH_DEL(layouts, layout);
        free(layout->params);
        free(layout);
    }
    pthread_mutex_unlock(&layouts_lock);
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
    /* A query that failed is asked again once: a launch that cannot be scanned may use any
     * allocation, and without host VMM one it reaches evicted faults. */
    for (int attempt = 0; !layout && attempt < 2; attempt++)
        layout = learn_layout(f);
    if (layout)
        call->what = layout->name;
    for (size_t i = 0; params && layout && i < layout->count; i++)
        if (params[i])
            scan_words(call, params[i], layout->params[i].offset, layout->params[i].size);
    pthread_mutex_unlock(&layouts_lock);
    if (params) {
        call->uses_any = !layout;
        if (!layout)
            lms_stats_unscanned();
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
