/* Kernels: host functions a test registers with a name and a parameter layout, launched on
 * streams like device kernels. Launch parameters are copied at launch time into one packed
 * buffer laid out as registered, from kernelParams or from the `extra` buffer. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

struct cd_kernel {
    bool is_function;           /* CUfunction (cuModuleGetFunction), else CUkernel */
    char *name;
    sim_kernel_fn fn;
    int param_count;
    size_t *sizes, *offsets;    /* [param_count] */
    size_t args_size;           /* bytes of the packed parameter buffer */
    struct cd_kernel *next;
};

static pthread_mutex_t kernels_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cd_kernel *kernels;

/* C alignment of a parameter: the largest power of two dividing its size, at most 8. */
static size_t alignment_of(size_t size)
{
    size_t align = 8;
    while (align > 1 && size % align)
        align /= 2;
    return align;
}

static struct cd_kernel *register_kernel(const char *name, sim_kernel_fn fn, int param_count,
                                         const size_t *param_sizes, bool is_function)
{
    if (!name || !fn || param_count < 0 || (param_count > 0 && !param_sizes))
        return NULL;
    struct cd_kernel *k = calloc(1, sizeof *k);
    size_t n = (size_t)param_count;
    if (!k || !(k->name = strdup(name)) || !(k->sizes = calloc(n + 1, sizeof *k->sizes)) ||
        !(k->offsets = calloc(n + 1, sizeof *k->offsets)))
        abort(); /* a test that cannot register its kernels cannot run */
    k->is_function = is_function;
    k->fn = fn;
    k->param_count = param_count;
    for (size_t i = 0; i < n; i++) {
        size_t align = alignment_of(param_sizes[i]);
        k->offsets[i] = (k->args_size + align - 1) / align * align;
        k->sizes[i] = param_sizes[i];
        k->args_size = k->offsets[i] + param_sizes[i];
    }
    pthread_mutex_lock(&kernels_lock);
    k->next = kernels;
    kernels = k;
    pthread_mutex_unlock(&kernels_lock);
    return k;
}

CUkernel sim_register_kernel(const char *name, sim_kernel_fn fn, int param_count,
                                    const size_t *param_sizes)
{
    return (CUkernel)register_kernel(name, fn, param_count, param_sizes, false);
}

CUfunction sim_register_function(const char *name, sim_kernel_fn fn,
                                        int param_count, const size_t *param_sizes)
{
    return (CUfunction)register_kernel(name, fn, param_count, param_sizes, true);
}

void cd_kernels_fork_lock(void) { pthread_mutex_lock(&kernels_lock); }
void cd_kernels_fork_unlock(void) { pthread_mutex_unlock(&kernels_lock); }

static const struct cd_kernel *find_kernel(const void *handle)
{
    pthread_mutex_lock(&kernels_lock);
    const struct cd_kernel *k = kernels;
    while (k && (const void *)k != handle)
        k = k->next;
    pthread_mutex_unlock(&kernels_lock);
    return k;
}

void cd_kernel_run(const cd_op *op)
{
    const struct cd_kernel *k = op->u.launch.kernel;
    void **params = calloc((size_t)k->param_count + 1, sizeof *params);
    if (!params)
        abort();
    for (int i = 0; i < k->param_count; i++)
        params[i] = op->u.launch.args + k->offsets[i];
    sim_launch launch = {.params = params};
    memcpy(launch.grid, op->u.launch.grid, sizeof launch.grid);
    memcpy(launch.block, op->u.launch.block, sizeof launch.block);
    k->fn(&launch);
    free(params);
}

unsigned char *cd_kernel_args_dup(const cd_op *op)
{
    size_t size = op->u.launch.kernel->args_size;
    unsigned char *copy = malloc(size + 1);
    if (copy)
        memcpy(copy, op->u.launch.args, size);
    return copy;
}

/* Copies the parameters out of the packed `extra` buffer. */
static CUresult args_from_extra(const struct cd_kernel *k, void **extra, unsigned char *args)
{
    const void *buffer = NULL;
    const size_t *size = NULL;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buffer = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!buffer || !size || *size < k->args_size)
        return CUDA_ERROR_INVALID_VALUE;
    memcpy(args, buffer, k->args_size);
    return CUDA_SUCCESS;
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3],
                       CUstream hStream, void **kernelParams, void **extra)
{
    const struct cd_kernel *k = find_kernel(f);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < 3; i++)
        if (grid[i] == 0 || block[i] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    if ((kernelParams && extra) || (k->param_count > 0 && !kernelParams && !extra))
        return CUDA_ERROR_INVALID_VALUE;
    cd_op *op = cd_op_new(CD_OP_KERNEL);
    unsigned char *args = calloc(1, k->args_size + 1);
    if (!op || !args) {
        free(op);
        free(args);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUresult result = CUDA_SUCCESS;
    if (extra)
        result = args_from_extra(k, extra, args);
    else
        for (int i = 0; i < k->param_count; i++)
            memcpy(args + k->offsets[i], kernelParams[i], k->sizes[i]);
    if (result != CUDA_SUCCESS) {
        free(op);
        free(args);
        return result;
    }
    op->u.launch.kernel = k;
    op->u.launch.args = args;
    memcpy(op->u.launch.grid, grid, sizeof op->u.launch.grid);
    memcpy(op->u.launch.block, block, sizeof op->u.launch.block);
    return cd_enqueue(hStream, op);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    CD_ENTER("cuLaunchKernel");
    (void)sharedMemBytes;
    const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
    const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};
    return launch(f, grid, block, hStream, kernelParams, extra);
}

/* Launch attributes (cooperative, clusters, priorities...) are accepted and ignored. */
CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra)
{
    CD_ENTER("cuLaunchKernelEx");
    if (!config)
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned grid[3] = {config->gridDimX, config->gridDimY, config->gridDimZ};
    const unsigned block[3] = {config->blockDimX, config->blockDimY, config->blockDimZ};
    return launch(f, grid, block, config->hStream, kernelParams, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    CD_ENTER("cuLaunchCooperativeKernel");
    (void)sharedMemBytes;
    const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
    const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};
    return launch(f, grid, block, hStream, kernelParams, NULL);
}

/* ---- introspection: CUkernel and CUfunction answer only their own family ---- */

static CUresult param_info(const void *handle, bool is_function, size_t paramIndex,
                           size_t *paramOffset, size_t *paramSize)
{
    const struct cd_kernel *k = find_kernel(handle);
    if (!k || k->is_function != is_function)
        return CUDA_ERROR_INVALID_HANDLE;
    if (paramIndex >= (size_t)k->param_count || (!paramOffset && !paramSize))
        return CUDA_ERROR_INVALID_VALUE;
    if (paramOffset)
        *paramOffset = k->offsets[paramIndex];
    if (paramSize)
        *paramSize = k->sizes[paramIndex];
    return CUDA_SUCCESS;
}

static CUresult name_of(const void *handle, bool is_function, const char **name)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    const struct cd_kernel *k = find_kernel(handle);
    if (!k || k->is_function != is_function)
        return CUDA_ERROR_INVALID_HANDLE;
    *name = k->name;
    return CUDA_SUCCESS;
}

CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                              size_t *paramSize)
{
    CD_ENTER("cuKernelGetParamInfo");
    return param_info(kernel, false, paramIndex, paramOffset, paramSize);
}

CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                            size_t *paramSize)
{
    CD_ENTER("cuFuncGetParamInfo");
    return param_info(func, true, paramIndex, paramOffset, paramSize);
}

CUresult cuKernelGetName(const char **name, CUkernel hfunc)
{
    CD_ENTER("cuKernelGetName");
    return name_of(hfunc, false, name);
}

CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
    CD_ENTER("cuFuncGetName");
    return name_of(hfunc, true, name);
}
