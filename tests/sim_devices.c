/* The simulator's devices, contexts and configuration. */
#include "tests/sim_testing.h"

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

/* In a child, before the parent's cuInit: the environment shapes the device. */
static void configure_from_environment(void *arg)
{
    (void)arg;
    setenv("LMS_SIM_DEVICES", "3", 1);
    setenv("LMS_SIM_CAPACITY_MB", "16", 1);
    int count = 0;
    size_t total = 0;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS ||
        cuDeviceTotalMem_v2(&total, 2) != CUDA_SUCCESS)
        _exit(1);
    _exit(count == 3 && total == 16u << 20 ? 0 : 2);
}

static void reject_bad_environment(void *arg)
{
    setenv("LMS_SIM_LOG", "/dev/null", 1);
    setenv("LMS_SIM_CAPACITY_MB", (const char *)arg, 1);
    _exit(cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1);
}

static void *current_context_elsewhere(void *arg)
{
    CUcontext *seen = arg;
    *seen = (CUcontext)&seen;
    cuCtxGetCurrent(seen);
    return NULL;
}

int main(void)
{
    plan(33);

    is_int(tap_run_in_child(configure_from_environment, NULL), -1,
           "LMS_SIM_DEVICES and LMS_SIM_CAPACITY_MB shape the devices");
    is_int(tap_run_in_child(reject_bad_environment, "lots"), -1,
           "LMS_SIM_CAPACITY_MB=lots: cuInit answers INVALID_VALUE");
    is_int(tap_run_in_child(reject_bad_environment, "-5"), -1,
           "LMS_SIM_CAPACITY_MB=-5: cuInit answers INVALID_VALUE");

    int count = -1, value = -1;
    is_int(cuDeviceGetCount(&count), CUDA_ERROR_NOT_INITIALIZED, "before cuInit: NOT_INITIALIZED");
    is_int(cuDriverGetVersion(&value), CUDA_SUCCESS, "cuDriverGetVersion works before cuInit");
    is_int(value, 13000, "and says CUDA 13.0");

    sim_set_device_count(2);
    sim_set_capacity(1, 32u << 20);
    sim_set_host_vmm(0);
    is_int(cuInit(0), CUDA_SUCCESS, "cuInit");
    is_int(cuInit(1), CUDA_ERROR_INVALID_VALUE, "cuInit with flags: INVALID_VALUE");
    CHECK_CU(cuDeviceGetCount(&count));
    is_int(count, 2, "two devices, as set");
    CUdevice dev = -1;
    is_int(cuDeviceGet(&dev, 2), CUDA_ERROR_INVALID_DEVICE, "device 2 does not exist");
    CHECK_CU(cuDeviceGet(&dev, 1));
    is_int(dev, 1, "cuDeviceGet(1)");

    size_t total = 0;
    CHECK_CU(cuDeviceTotalMem_v2(&total, 1));
    is_uint(total, 32u << 20, "device 1 has the capacity set");
    char name[64] = "";
    CHECK_CU(cuDeviceGetName(name, sizeof name, 1));
    ok(name[0] != '\0', "it has a name: %s", name);

    static const struct {
        CUdevice_attribute attribute;
        int value;
        const char *what;
    } attributes[] = {
        {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1, "VMM supported"},
        {CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0, "host VMM off, as set"},
        {CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0, "host NUMA VMM off"},
        {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 3, "three copy engines"},
        {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1, "memory pools supported"},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9, "compute capability 9.x"},
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132, "132 multiprocessors"},
    };
    for (size_t i = 0; i < sizeof attributes / sizeof attributes[0]; i++) {
        value = -1;
        CHECK_CU(cuDeviceGetAttribute(&value, attributes[i].attribute, 0));
        is_int(value, attributes[i].value, "attribute %d: %s", (int)attributes[i].attribute,
               attributes[i].what);
    }
    unsigned long unsupported = sim_unsupported_calls();
    setenv("LMS_SIM_LOG", "/dev/null", 1);
    is_int(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 0),
           CUDA_ERROR_NOT_SUPPORTED, "an attribute the simulator does not model: NOT_SUPPORTED");
    is_uint(sim_unsupported_calls(), unsupported + 1, "and counted as unsupported");

    CUdeviceptr p;
    is_int(cuMemAlloc_v2(&p, 1024), CUDA_ERROR_INVALID_CONTEXT,
           "cuMemAlloc without a current context: INVALID_CONTEXT");

    CUcontext ctx, current = NULL, elsewhere;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 1));
    CHECK_CU(cuCtxSetCurrent(ctx));
    CHECK_CU(cuCtxGetCurrent(&current));
    ok(current == ctx, "cuCtxSetCurrent / cuCtxGetCurrent");
    CHECK_CU(cuCtxGetDevice(&dev));
    is_int(dev, 1, "the current context belongs to device 1");
    dev = -1;
    CHECK_CU(cuCtxGetDevice_v2(&dev, NULL));
    is_int(dev, 1, "cuCtxGetDevice_v2 of the current context (NULL)");
    CUcontext ctx0;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx0, 0));
    CHECK_CU(cuCtxGetDevice_v2(&dev, ctx0));
    is_int(dev, 0, "cuCtxGetDevice_v2 of a context named");
    is_int(cuCtxSynchronize_v2(ctx0), CUDA_SUCCESS, "cuCtxSynchronize_v2 of a context named");
    is_int(cuCtxSetCurrent((CUcontext)&dev), CUDA_ERROR_INVALID_CONTEXT,
           "cuCtxSetCurrent of an unknown context: INVALID_CONTEXT");
    pthread_t thread;
    pthread_create(&thread, NULL, current_context_elsewhere, &elsewhere);
    pthread_join(thread, NULL);
    ok(elsewhere == NULL, "another thread has no current context");

    size_t free_bytes = 0;
    CHECK_CU(cuMemAlloc_v2(&p, 1u << 20));
    CHECK_CU(cuMemGetInfo_v2(&free_bytes, &total));
    ok(free_bytes == 31u << 20 && total == 32u << 20, "cuMemGetInfo: %zu free of %zu", free_bytes,
       total);
    CHECK_CU(cuMemFree_v2(p));

    is_int(cuDevicePrimaryCtxRelease_v2(1), CUDA_SUCCESS, "release the primary context");
    is_int(cuDevicePrimaryCtxRelease_v2(1), CUDA_ERROR_INVALID_CONTEXT,
           "releasing it once more: INVALID_CONTEXT");
    return exit_status();
}
