/* Kernels: host functions with a name and a parameter layout, launched on streams like
 * device kernels. Each kernel is a slot, and the slot's address is its handle (a CUkernel or a
 * CUfunction): registered by a test (sim.h) or loaded from a module (modules.c). Launch
 * parameters are copied at launch time into one packed buffer laid out as registered, from
 * kernelParams or from the `extra` buffer.
 *
 * The slots of an unloaded module are kept and handed out again, the last freed first: the
 * real driver may give a new kernel the handle value of a dead one, so a cache keyed by
 * handle (liblms caches parameter layouts so) must be tested against reuse. A launch op
 * remembers the generation of its slot, so that a graph captured before an unload cannot
 * replay a kernel that is gone. The slots are guarded by cd.lock; a queued launch keeps its
 * slot from being freed, so that the worker thread reads it without the lock.
 *
 * A kernel is loaded into a context at its first launch there (lazy loading, as the real
 * driver does by default), and the driver then holds device memory for it (code, local
 * memory) until the kernel is unloaded or the context goes: a launch on a full device fails
 * with OUT_OF_MEMORY. */
#include "sim/regions.h"
#include "sim/sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cd_kernel {
    bool live;                  /* false: a free slot */
    bool is_function;           /* CUfunction (cuModuleGetFunction), else CUkernel */
    unsigned long generation;   /* bumped each time the slot is freed */
    char *name;
    sim_kernel_fn fn;
    sim_cost_fn cost;
    int param_count;
    size_t *sizes, *offsets;    /* [param_count] */
    size_t args_size;           /* bytes of the packed parameter buffer */
    unsigned long queued;       /* launches queued on streams and not yet finished */
    cd_ctx **loaded_in;         /* contexts it was loaded into, each holding driver memory */
    size_t loaded_count;
    struct cd_kernel *function; /* a CUkernel's CUfunction, made by cuKernelGetFunction */
    struct cd_kernel *next;     /* every slot, live or free */
    struct cd_kernel *next_free;
};

static struct cd_kernel *slots, *free_slots;

/* C alignment of a parameter: the largest power of two dividing its size, at most 8. */
static size_t alignment_of(size_t size)
{
    size_t align = 8;
    while (align > 1 && size % align)
        align /= 2;
    return align;
}

cd_kernel *cd_kernel_add_locked(const sim_module_kernel *desc, bool is_function)
{
    size_t n = (size_t)desc->param_count;
    char *name = strdup(desc->name);
    size_t *sizes = calloc(n + 1, sizeof *sizes), *offsets = calloc(n + 1, sizeof *offsets);
    struct cd_kernel *k = free_slots ? free_slots : calloc(1, sizeof *k);
    if (!name || !sizes || !offsets || !k) {
        if (k && k != free_slots)
            free(k);
        free(name);
        free(sizes);
        free(offsets);
        return NULL;
    }
    if (k == free_slots) {
        free_slots = k->next_free;
    } else {
        k->next = slots;
        slots = k;
    }
    k->live = true;
    k->is_function = is_function;
    k->name = name;
    k->fn = desc->fn;
    k->cost = desc->cost;
    k->param_count = desc->param_count;
    k->sizes = sizes;
    k->offsets = offsets;
    k->args_size = 0;
    for (size_t i = 0; i < n; i++) {
        size_t align = alignment_of(desc->param_sizes[i]);
        offsets[i] = (k->args_size + align - 1) / align * align;
        sizes[i] = desc->param_sizes[i];
        k->args_size = offsets[i] + sizes[i];
    }
    return k;
}

static void free_slot_locked(struct cd_kernel *k)
{
    for (size_t i = 0; i < k->loaded_count; i++)
        cd_ctx_unreserve_locked(k->loaded_in[i], cd.kernel_reserve);
    free(k->loaded_in);
    k->loaded_in = NULL;
    k->loaded_count = 0;
    free(k->name);
    free(k->sizes);
    free(k->offsets);
    k->live = false;
    k->generation++;
    k->function = NULL;
    k->next_free = free_slots;
    free_slots = k;
}

/* The kernels go last and in reverse, so that loading the same table again hands each
 * kernel its old handle. */
void cd_kernels_remove_locked(cd_kernel *const *kernels, int count)
{
    for (int i = 0; i < count; i++)
        if (kernels[i]->function)
            free_slot_locked(kernels[i]->function);
    for (int i = count; i-- > 0;)
        free_slot_locked(kernels[i]);
}

bool cd_kernels_queued_locked(cd_kernel *const *kernels, int count)
{
    for (int i = 0; i < count; i++)
        if (kernels[i]->queued || (kernels[i]->function && kernels[i]->function->queued))
            return true;
    return false;
}

void cd_kernel_queued_locked(const cd_op *op, bool queued)
{
    if (queued)
        op->u.launch.kernel->queued++;
    else
        op->u.launch.kernel->queued--;
}

static struct cd_kernel *register_kernel(const char *name, sim_kernel_fn fn, int param_count,
                                         const size_t *param_sizes, bool is_function)
{
    if (!name || !fn || param_count < 0 || (param_count > 0 && !param_sizes))
        return NULL;
    const sim_module_kernel desc = {name, fn, param_count, param_sizes, NULL};
    pthread_mutex_lock(&cd.lock);
    struct cd_kernel *k = cd_kernel_add_locked(&desc, is_function);
    pthread_mutex_unlock(&cd.lock);
    if (!k)
        abort(); /* a test that cannot register its kernels cannot run */
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

static struct cd_kernel *find_kernel_locked(const void *handle)
{
    for (struct cd_kernel *k = slots; k; k = k->next)
        if ((const void *)k == handle && k->live)
            return k;
    return NULL;
}

void sim_set_kernel_cost(const void *kernel, sim_cost_fn cost)
{
    pthread_mutex_lock(&cd.lock);
    struct cd_kernel *k = find_kernel_locked(kernel);
    if (k)
        k->cost = cost;
    pthread_mutex_unlock(&cd.lock);
}

/* The launch a kernel function or a cost function sees: params[i] points into the op's
 * packed arguments. The caller frees launch->params. */
static sim_launch launch_of(const cd_op *op)
{
    const struct cd_kernel *k = op->u.launch.kernel;
    sim_launch launch = {.params = calloc((size_t)k->param_count + 1, sizeof *launch.params)};
    if (!launch.params)
        abort();
    for (int i = 0; i < k->param_count; i++)
        launch.params[i] = op->u.launch.args + k->offsets[i];
    memcpy(launch.grid, op->u.launch.grid, sizeof launch.grid);
    memcpy(launch.block, op->u.launch.block, sizeof launch.block);
    return launch;
}

void cd_kernel_run(const cd_op *op)
{
    sim_launch launch = launch_of(op);
    op->u.launch.kernel->fn(&launch);
    free(launch.params);
}

/* What a launch's cost function says: its operations, and the bytes it moves through each of
 * its `count` parameters, with the pointer each pointer-sized one holds. Without a cost
 * function, nothing (count 0). */
typedef struct launch_cost {
    sim_kernel_cost cost;
    uintptr_t pointers[SIM_MAX_KERNEL_PARAMS];
    int count;
} launch_cost;

static void cost_of(const cd_op *op, launch_cost *lc)
{
    memset(lc, 0, sizeof *lc);
    const struct cd_kernel *k = op->u.launch.kernel;
    if (!k->cost)
        return;
    sim_launch launch = launch_of(op);
    k->cost(&launch, &lc->cost);
    lc->count = k->param_count; /* at most SIM_MAX_KERNEL_PARAMS: modules are checked at load */
    for (int i = 0; i < k->param_count; i++)
        if (k->sizes[i] == sizeof lc->pointers[i])
            memcpy(&lc->pointers[i], launch.params[i], sizeof lc->pointers[i]);
    free(launch.params);
}

/* Whether pointer parameter i reaches memory: it moves bytes or its cost gives it a span. */
static bool reaches_memory(const launch_cost *lc, int i)
{
    return (lc->cost.bytes[i] > 0 || lc->cost.extent[i] > 0) && lc->pointers[i];
}

/* The span pointer parameter i reaches: its extent, or its first byte where the cost function
 * gives none. */
static size_t reach_of(const launch_cost *lc, int i)
{
    return lc->cost.extent[i] > 0 ? (size_t)lc->cost.extent[i] : 1;
}

/* A pointer parameter's bytes are priced where the span it reaches lies, spread evenly over
 * that span (its first byte where the cost function gives none): a kernel reaches host-located
 * and pinned memory over the bus, at the zero-copy rate. An allocation liblms splits into
 * pieces may have some on the device and some on the host. */
void cd_kernel_price_locked(const cd_op *op, double *flops, double *device_bytes, double *host_bytes,
                            double *host_written)
{
    launch_cost lc;
    cost_of(op, &lc);
    *flops = lc.cost.flops;
    *device_bytes = *host_bytes = *host_written = 0;
    for (int i = 0; i < lc.count; i++) {
        if (lc.cost.bytes[i] <= 0)
            continue;
        double on_host = lc.pointers[i] ? cd_host_share_locked(lc.pointers[i], reach_of(&lc, i)) : 0;
        double written = lc.cost.written[i] < lc.cost.bytes[i] ? lc.cost.written[i] : lc.cost.bytes[i];
        *host_bytes += lc.cost.bytes[i] * on_host;
        *host_written += (written > 0 ? written : 0) * on_host;
        *device_bytes += lc.cost.bytes[i] * (1 - on_host);
    }
}

int cd_kernel_cost_json_locked(const cd_op *op, char *out, size_t size)
{
    launch_cost lc;
    cost_of(op, &lc);
    size_t used = (size_t)snprintf(out, size, "\"flops\": %.17g, \"reaches\": [", lc.cost.flops);
    const char *comma = "";
    for (int i = 0; i < lc.count && used < size; i++) {
        if (!reaches_memory(&lc, i))
            continue; /* the spans cd_kernel_reaches_locked checks, no others */
        used += (size_t)snprintf(out + used, size - used, "%s[\"0x%llx\", %zu, %.17g, %.17g]", comma,
                                 (unsigned long long)lc.pointers[i], reach_of(&lc, i), lc.cost.bytes[i],
                                 lc.cost.written[i]);
        comma = ", ";
    }
    if (used < size)
        used += (size_t)snprintf(out + used, size - used, "]");
    return used < size;
}

/* A kernel without a cost function says nothing of what it reaches. A pointer-sized parameter
 * whose value lies in device memory (cuMemAlloc's, or a VMM reservation) is taken for a
 * pointer it uses, at its first byte; any other value may be a size or a double, and is not
 * checked. */
static bool pointer_parameters_reach_locked(const cd_op *op, const cd_ctx *ctx)
{
    const struct cd_kernel *k = op->u.launch.kernel;
    for (int i = 0; i < k->param_count; i++) {
        uintptr_t p;
        if (k->sizes[i] != sizeof p)
            continue;
        memcpy(&p, op->u.launch.args + k->offsets[i], sizeof p);
        if (cd_region_find_locked(p, REGION_MASK(REGION_ALLOC) | REGION_MASK(REGION_RESERVED)) &&
            !cd_kernel_may_touch_locked(p, 1, ctx))
            return false;
    }
    return true;
}

bool cd_kernel_reaches_locked(const cd_op *op, const cd_ctx *ctx)
{
    if (op->u.launch.kernel->generation != op->u.launch.generation)
        return true;
    if (!op->u.launch.kernel->cost)
        return pointer_parameters_reach_locked(op, ctx);
    launch_cost lc;
    cost_of(op, &lc);
    for (int i = 0; i < lc.count; i++) {
        if (reaches_memory(&lc, i) && !cd_kernel_may_touch_locked(lc.pointers[i], reach_of(&lc, i), ctx))
            return false;
    }
    return true;
}

CUresult cd_kernel_args_dup_locked(const cd_op *op, unsigned char **copy)
{
    const struct cd_kernel *k = op->u.launch.kernel;
    if (k->generation != op->u.launch.generation) {
        cd_log("a graph launches a kernel whose module was unloaded: CUDA_ERROR_INVALID_HANDLE");
        return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!(*copy = malloc(k->args_size + 1)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    memcpy(*copy, op->u.launch.args, k->args_size);
    return CUDA_SUCCESS;
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

CUresult cd_kernel_op_locked(CUfunction f, const unsigned grid[3], const unsigned block[3],
                             unsigned shared_bytes, void **kernelParams, void **extra, cd_op **op)
{
    struct cd_kernel *k = find_kernel_locked(f);
    if (!k)
        return CUDA_ERROR_INVALID_HANDLE;
    for (int i = 0; i < 3; i++)
        if (grid[i] == 0 || block[i] == 0)
            return CUDA_ERROR_INVALID_VALUE;
    if ((kernelParams && extra) || (k->param_count > 0 && !kernelParams && !extra))
        return CUDA_ERROR_INVALID_VALUE;
    cd_op *launch = cd_op_new(CD_OP_KERNEL);
    unsigned char *args = calloc(1, k->args_size + 1);
    if (!launch || !args) {
        free(launch);
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
        free(launch);
        free(args);
        return result;
    }
    launch->u.launch.kernel = k;
    launch->u.launch.generation = k->generation;
    launch->u.launch.args = args;
    launch->u.launch.shared_bytes = shared_bytes;
    memcpy(launch->u.launch.grid, grid, sizeof launch->u.launch.grid);
    memcpy(launch->u.launch.block, block, sizeof launch->u.launch.block);
    *op = launch;
    return CUDA_SUCCESS;
}

CUresult cd_kernel_load_locked(const cd_op *op, cd_ctx *ctx)
{
    struct cd_kernel *k = op->u.launch.kernel;
    for (size_t i = 0; i < k->loaded_count; i++)
        if (k->loaded_in[i] == ctx)
            return CUDA_SUCCESS;
    cd_ctx **grown = realloc(k->loaded_in, (k->loaded_count + 1) * sizeof *grown);
    if (!grown)
        return CUDA_ERROR_OUT_OF_MEMORY;
    k->loaded_in = grown;
    CUresult result = cd_ctx_reserve_locked(ctx, cd.kernel_reserve);
    if (result == CUDA_SUCCESS)
        k->loaded_in[k->loaded_count++] = ctx;
    else
        cd_log("loading kernel %s: its %zu bytes of device memory do not fit: "
               "CUDA_ERROR_OUT_OF_MEMORY", k->name, cd.kernel_reserve);
    return result;
}

/* The driver memory goes back with the context's own. */
void cd_kernels_release_ctx_locked(const cd_ctx *ctx)
{
    for (struct cd_kernel *k = slots; k; k = k->next) {
        for (size_t i = 0; i < k->loaded_count;) {
            if (k->loaded_in[i] == ctx)
                k->loaded_in[i] = k->loaded_in[--k->loaded_count];
            else
                i++;
        }
    }
}

void **cd_kernel_params_of(const cd_op *op)
{
    if (op->u.launch.kernel->generation != op->u.launch.generation)
        return NULL;
    sim_launch launch = launch_of(op);
    return launch.params;
}

CUfunction cd_kernel_handle(const cd_op *op)
{
    return (CUfunction)op->u.launch.kernel;
}

const char *cd_kernel_name_locked(const cd_op *op)
{
    const cd_kernel *k = op->u.launch.kernel;
    return k->live && k->generation == op->u.launch.generation ? k->name : "(unloaded kernel)";
}

/* Under cd.lock from the look-up to the queue: an unload cannot come between. */
static CUresult launch_locked(CUfunction f, const unsigned grid[3], const unsigned block[3],
                              unsigned shared_bytes, CUstream hStream, void **kernelParams,
                              void **extra)
{
    cd_stream *s;
    cd_op *op;
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS)
        result = cd_kernel_op_locked(f, grid, block, shared_bytes, kernelParams, extra, &op);
    if (result != CUDA_SUCCESS)
        return result;
    result = cd_kernel_load_locked(op, s->ctx);
    if (result != CUDA_SUCCESS) {
        cd_op_free_locked(op);
        return result;
    }
    return cd_enqueue_locked(hStream, op, &s);
}

static CUresult launch(CUfunction f, const unsigned grid[3], const unsigned block[3],
                       unsigned shared_bytes, CUstream hStream, void **kernelParams, void **extra)
{
    pthread_mutex_lock(&cd.lock);
    CUresult result = launch_locked(f, grid, block, shared_bytes, hStream, kernelParams, extra);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void **kernelParams, void **extra)
{
    CD_ENTER("cuLaunchKernel");
    const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
    const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};
    return launch(f, grid, block, sharedMemBytes, hStream, kernelParams, extra);
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
    return launch(f, grid, block, config->sharedMemBytes, config->hStream, kernelParams, extra);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void **kernelParams)
{
    CD_ENTER("cuLaunchCooperativeKernel");
    const unsigned grid[3] = {gridDimX, gridDimY, gridDimZ};
    const unsigned block[3] = {blockDimX, blockDimY, blockDimZ};
    return launch(f, grid, block, sharedMemBytes, hStream, kernelParams, NULL);
}

/* ---- introspection: CUkernel and CUfunction answer only their own family ---- */

static CUresult param_info(const void *handle, bool is_function, size_t paramIndex,
                           size_t *paramOffset, size_t *paramSize)
{
    CUresult result = CUDA_SUCCESS;
    pthread_mutex_lock(&cd.lock);
    const struct cd_kernel *k = find_kernel_locked(handle);
    if (!k || k->is_function != is_function)
        result = CUDA_ERROR_INVALID_HANDLE;
    else if (paramIndex >= (size_t)k->param_count || (!paramOffset && !paramSize))
        result = CUDA_ERROR_INVALID_VALUE;
    if (result == CUDA_SUCCESS && paramOffset)
        *paramOffset = k->offsets[paramIndex];
    if (result == CUDA_SUCCESS && paramSize)
        *paramSize = k->sizes[paramIndex];
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* The name stays valid until the kernel's module is unloaded, as with the real driver. */
static CUresult name_of(const void *handle, bool is_function, const char **name)
{
    if (!name)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    const struct cd_kernel *k = find_kernel_locked(handle);
    bool valid = k && k->is_function == is_function;
    if (valid)
        *name = k->name;
    pthread_mutex_unlock(&cd.lock);
    return valid ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
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

/* The CUfunction of a CUkernel is a slot of its own, made on the first request and freed
 * with the kernel; with one context per device, one serves them all. */
CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel)
{
    CD_ENTER("cuKernelGetFunction");
    if (!pFunc)
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    CUresult result = cd_current_ctx(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cd.lock);
    struct cd_kernel *k = find_kernel_locked(kernel);
    if (!k || k->is_function) {
        result = CUDA_ERROR_INVALID_HANDLE;
    } else if (!k->function) {
        const sim_module_kernel desc = {k->name, k->fn, k->param_count, k->sizes, k->cost};
        if (!(k->function = cd_kernel_add_locked(&desc, true)))
            result = CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (result == CUDA_SUCCESS)
        *pFunc = (CUfunction)k->function;
    pthread_mutex_unlock(&cd.lock);
    return result;
}
