/* Kernels registered with the simulator: layouts, names, and launches of every form. */
#include "tests/sim_testing.h"

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* axpy(float a, const float *x, float *y, int n): y = a * x + y, one element per thread. */
typedef struct axpy_args {
    float a;        /* offset 0 */
    const float *x; /* offset 8 */
    float *y;       /* offset 16 */
    int n;          /* offset 24 */
} axpy_args;

static void axpy(const sim_launch *launch)
{
    float a = *(float *)launch->params[0];
    const float *x = *(const float **)launch->params[1];
    float *y = *(float **)launch->params[2];
    int n = *(int *)launch->params[3];
    unsigned threads = launch->grid[0] * launch->block[0];
    for (unsigned i = 0; i < threads && (int)i < n; i++)
        y[i] += a * x[i];
}

/* slow_then_store(int *out, int value): proves launch arguments are copied at launch. */
static void slow_then_store(const sim_launch *launch)
{
    sleep_ms(100);
    **(int **)launch->params[0] = *(int *)launch->params[1];
}

static const size_t axpy_sizes[] = {sizeof(float), sizeof(float *), sizeof(float *), sizeof(int)};

static float y_host[8];

static void run_and_fetch(CUdeviceptr y)
{
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH_v2(y_host, y, sizeof y_host));
}

int main(void)
{
    plan(26);
    sim_setup(16 << 20);
    CUkernel kernel = sim_register_kernel("axpy", axpy, 4, axpy_sizes);
    CUfunction function = sim_register_function("axpy_function", axpy, 4, axpy_sizes);

    /* Layout and names, each family answering only for its own handles. */
    const size_t offsets[] = {0, 8, 16, 24};
    for (size_t i = 0; i < 4; i++) {
        size_t offset = 99, size = 99;
        CHECK_CU(cuKernelGetParamInfo(kernel, i, &offset, &size));
        ok(offset == offsets[i] && size == axpy_sizes[i],
           "cuKernelGetParamInfo %zu: offset %zu size %zu", i, offset, size);
    }
    size_t offset, size;
    is_int(cuKernelGetParamInfo(kernel, 4, &offset, &size), CUDA_ERROR_INVALID_VALUE,
           "a parameter index past the last: INVALID_VALUE");
    CHECK_CU(cuFuncGetParamInfo(function, 3, &offset, &size));
    ok(offset == 24 && size == sizeof(int), "cuFuncGetParamInfo on a function");
    is_int(cuFuncGetParamInfo((CUfunction)kernel, 0, &offset, &size), CUDA_ERROR_INVALID_HANDLE,
           "cuFuncGetParamInfo on a CUkernel: INVALID_HANDLE");
    is_int(cuKernelGetParamInfo((CUkernel)function, 0, &offset, &size), CUDA_ERROR_INVALID_HANDLE,
           "cuKernelGetParamInfo on a CUfunction: INVALID_HANDLE");
    const char *name = NULL;
    CHECK_CU(cuKernelGetName(&name, kernel));
    is_str(name, "axpy", "cuKernelGetName");
    CHECK_CU(cuFuncGetName(&name, function));
    is_str(name, "axpy_function", "cuFuncGetName");
    is_int(cuFuncGetName(&name, (CUfunction)kernel), CUDA_ERROR_INVALID_HANDLE,
           "cuFuncGetName on a CUkernel: INVALID_HANDLE");
    is_int(cuKernelGetName(&name, (CUkernel)function), CUDA_ERROR_INVALID_HANDLE,
           "cuKernelGetName on a CUfunction: INVALID_HANDLE");
    is_int(cuKernelGetName(&name, (CUkernel)&name), CUDA_ERROR_INVALID_HANDLE,
           "an unknown handle: INVALID_HANDLE");

    const size_t odd_sizes[] = {1, 12, 2, 16};
    CUkernel odd = sim_register_kernel("odd", axpy, 4, odd_sizes);
    const size_t odd_offsets[] = {0, 4, 16, 24};
    bool layout_ok = true;
    for (size_t i = 0; i < 4; i++) {
        CHECK_CU(cuKernelGetParamInfo(odd, i, &offset, NULL));
        layout_ok = layout_ok && offset == odd_offsets[i];
    }
    ok(layout_ok, "parameters align to their size's largest power of two, at most 8");

    /* Launches. */
    float x_host[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    CUdeviceptr x, y;
    CHECK_CU(cuMemAlloc_v2(&x, sizeof x_host));
    CHECK_CU(cuMemAlloc_v2(&y, sizeof y_host));
    CHECK_CU(cuMemcpyHtoD_v2(x, x_host, sizeof x_host));
    CHECK_CU(cuMemsetD32_v2(y, 0, 8));

    float a = 2;
    int n = 8;
    void *params[] = {&a, &x, &y, &n};
    CHECK_CU(cuLaunchKernel((CUfunction)kernel, 2, 1, 1, 4, 1, 1, 0, NULL, params, NULL));
    run_and_fetch(y);
    ok(y_host[0] == 2 && y_host[7] == 16, "cuLaunchKernel with kernelParams on a CUkernel");

    axpy_args packed = {1, (const float *)(uintptr_t)x, (float *)(uintptr_t)y, 8};
    size_t packed_size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, CU_LAUNCH_PARAM_END};
    CHECK_CU(cuLaunchKernel(function, 1, 1, 1, 8, 1, 1, 0, NULL, NULL, extra));
    run_and_fetch(y);
    ok(y_host[0] == 3 && y_host[7] == 24, "cuLaunchKernel with the packed `extra` buffer");

    CUstream stream;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUlaunchAttribute cooperative = {.id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 1};
    CUlaunchConfig config = {.gridDimX = 1,
                             .gridDimY = 1,
                             .gridDimZ = 1,
                             .blockDimX = 8,
                             .blockDimY = 1,
                             .blockDimZ = 1,
                             .hStream = stream,
                             .attrs = &cooperative,
                             .numAttrs = 1};
    CHECK_CU(cuLaunchKernelEx(&config, (CUfunction)kernel, NULL, extra));
    run_and_fetch(y);
    ok(y_host[0] == 4 && y_host[7] == 32, "cuLaunchKernelEx with `extra` on a stream");
    CHECK_CU(cuLaunchKernelEx(&config, function, params, NULL));
    CHECK_CU(cuLaunchCooperativeKernel(function, 1, 1, 1, 8, 1, 1, 0, stream, params));
    run_and_fetch(y);
    ok(y_host[0] == 8 && y_host[7] == 64,
       "cuLaunchKernelEx and cuLaunchCooperativeKernel with kernelParams");

    a = 100;
    CHECK_CU(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 4, 1, 1, 0, NULL, params, NULL));
    run_and_fetch(y);
    ok(y_host[3] == 32 + 400 && y_host[4] == 40, "grid and block reach the kernel (4 threads ran)");

    /* Arguments are copied when the launch is queued, not when it runs. */
    const size_t store_sizes[] = {sizeof(int *), sizeof(int)};
    CUkernel store = sim_register_kernel("slow_then_store", slow_then_store, 2, store_sizes);
    int value = 1, stored = 0;
    void *store_params[] = {&y, &value};
    CHECK_CU(cuLaunchKernel((CUfunction)store, 1, 1, 1, 1, 1, 1, 0, stream, store_params, NULL));
    value = 2;
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK_CU(cuMemcpyDtoH_v2(&stored, y, sizeof stored));
    is_int(stored, 1, "a kernel sees its arguments as they were at launch");

    /* Launch errors. */
    size_t short_size = offsetof(axpy_args, n);
    void *short_extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                           &short_size, CU_LAUNCH_PARAM_END};
    is_int(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, short_extra),
           CUDA_ERROR_INVALID_VALUE,
           "an `extra` buffer smaller than the parameters: INVALID_VALUE");
    is_int(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, NULL, params, extra),
           CUDA_ERROR_INVALID_VALUE, "both kernelParams and extra: INVALID_VALUE");
    is_int(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
           CUDA_ERROR_INVALID_VALUE, "no parameters for a kernel that has some: INVALID_VALUE");
    is_int(cuLaunchKernel(function, 0, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
           CUDA_ERROR_INVALID_VALUE, "an empty grid: INVALID_VALUE");
    is_int(cuLaunchKernel((CUfunction)&a, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL),
           CUDA_ERROR_INVALID_HANDLE, "an unknown function: INVALID_HANDLE");
    is_int(cuLaunchKernel(function, 1, 1, 1, 1, 1, 1, 0, (CUstream)&a, params, NULL),
           CUDA_ERROR_INVALID_HANDLE, "an unknown stream: INVALID_HANDLE");

    CHECK_CU(cuStreamDestroy_v2(stream));
    CHECK_CU(cuMemFree_v2(x));
    CHECK_CU(cuMemFree_v2(y));
    return exit_status();
}
