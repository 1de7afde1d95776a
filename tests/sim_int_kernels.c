#include "tests/sim_int_kernels.h"
#include "tests/sim_testing.h"

CUfunction slow_store_fn, copy_int_fn;

static void slow_store(const sim_launch *launch)
{
    int *out = *(int **)launch->params[0];
    sleep_ms(*(int *)launch->params[2]);
    *out = *(int *)launch->params[1];
}

static void copy_int(const sim_launch *launch)
{
    **(int **)launch->params[0] = **(int **)launch->params[1];
}

/* As many operations as the calibrated H100 does in delay_ms, so that slow_store runs as long
 * in virtual time as it really sleeps. */
static void slow_store_cost(const sim_launch *launch, sim_kernel_cost *cost)
{
    int delay_ms = *(int *)launch->params[2];
    cost->flops = delay_ms * 1e-3 * sim_calibration_h100.fp32_flops * sim_calibration_h100.kernel_efficiency;
}

void int_kernels_register(void)
{
    const size_t slow_sizes[] = {sizeof(int *), sizeof(int), sizeof(int)};
    const size_t copy_sizes[] = {sizeof(int *), sizeof(int *)};
    slow_store_fn = (CUfunction)sim_register_kernel("slow_store", slow_store, 3, slow_sizes);
    sim_set_kernel_cost(slow_store_fn, slow_store_cost);
    copy_int_fn = (CUfunction)sim_register_kernel("copy_int", copy_int, 2, copy_sizes);
}

CUresult launch_slow_store(CUstream stream, CUdeviceptr out, int value, int delay_ms)
{
    void *params[] = {&out, &value, &delay_ms};
    return cuLaunchKernel(slow_store_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

CUresult launch_copy_int(CUstream stream, CUdeviceptr dst, CUdeviceptr src)
{
    void *params[] = {&dst, &src};
    return cuLaunchKernel(copy_int_fn, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

int read_int(CUdeviceptr p)
{
    int value = -1;
    CHECK_CU(cuMemcpyDtoH_v2(&value, p, sizeof value));
    return value;
}
