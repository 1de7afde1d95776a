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

/* Children report what went wrong on stderr and exit 1. */
static void expect(bool condition, const char *what)
{
    if (!condition) {
        diag("in the child: %s", what);
        _exit(1);
    }
}

/* After cuInit, in a child: every device has this shape. */
static void expect_shape(const char *name, size_t mib, int sms, int major, int minor,
                         int engines, int host_vmm)
{
    char got[256] = "";
    size_t total = 0;
    int value = -1;
    expect(cuDeviceGetName(got, sizeof got, 0) == CUDA_SUCCESS && !strcmp(got, name), got);
    expect(cuDeviceTotalMem_v2(&total, 0) == CUDA_SUCCESS && total == mib << 20, "memory");
    const struct {
        CUdevice_attribute attribute;
        int value;
        const char *what;
    } expected[] = {
        {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, sms, "SM count"},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, major, "compute capability major"},
        {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, minor, "compute capability minor"},
        {CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, engines, "copy engines"},
        {CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, host_vmm, "host VMM"},
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++)
        expect(cuDeviceGetAttribute(&value, expected[i].attribute, 0) == CUDA_SUCCESS &&
                   value == expected[i].value,
               expected[i].what);
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    size_t granularity = 0;
    expect(cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
                   CUDA_SUCCESS &&
               granularity == 2u << 20,
           "granularity");
}

static void h100_preset(void *arg)
{
    (void)arg;
    setenv("LMS_SIM_DEVICE", "h100", 1);
    expect(cuInit(0) == CUDA_SUCCESS, "cuInit");
    expect_shape("NVIDIA H100 80GB HBM3", 81079, 132, 9, 0, 3, 1);
    _exit(0);
}

static void preset_overridden(void *arg)
{
    (void)arg;
    setenv("LMS_SIM_DEVICE", "h100", 1);
    setenv("LMS_SIM_NAME", "Small GPU", 1);
    setenv("LMS_SIM_CAPACITY_MB", "512", 1);
    setenv("LMS_SIM_SMS", "8", 1);
    setenv("LMS_SIM_CC", "8.6", 1);
    setenv("LMS_SIM_ASYNC_ENGINES", "2", 1);
    setenv("LMS_SIM_HOST_VMM", "0", 1);
    expect(cuInit(0) == CUDA_SUCCESS, "cuInit");
    expect_shape("Small GPU", 512, 8, 8, 6, 2, 0);
    _exit(0);
}

static void api_over_environment(void *arg)
{
    (void)arg;
    setenv("LMS_SIM_SMS", "99", 1);
    setenv("LMS_SIM_NAME", "from the environment", 1);
    expect(sim_set_device_preset("a100") == CUDA_ERROR_INVALID_VALUE, "an unknown preset");
    expect(sim_set_device_preset("h100") == CUDA_SUCCESS, "the h100 preset");
    sim_set_capacity(0, 256u << 20);
    sim_set_device_name("from the API");
    sim_set_sm_count(16);
    sim_set_compute_capability(8, 0);
    sim_set_async_engine_count(1);
    expect(cuInit(0) == CUDA_SUCCESS, "cuInit");
    expect_shape("from the API", 256, 16, 8, 0, 1, 1);
    _exit(0);
}

/* The old name of the capacity variable is read when the new one is unset. */
static void old_capacity_name(void *arg)
{
    unsetenv("LMS_SIM_CAPACITY_MB");
    setenv("CUDADOUBLE_CAPACITY_MB", "48", 1);
    if (arg)
        setenv("LMS_SIM_CAPACITY_MB", (const char *)arg, 1);
    size_t total = 0;
    expect(cuInit(0) == CUDA_SUCCESS && cuDeviceTotalMem_v2(&total, 0) == CUDA_SUCCESS, "cuInit");
    _exit((int)(total >> 20));
}

/* arg is "VARIABLE=value": cuInit answers INVALID_VALUE and logs a line naming the variable. */
static void reject_bad_environment(void *arg)
{
    char log[] = "/tmp/sim_devices_log.XXXXXX";
    int fd = mkstemp(log);
    expect(fd >= 0, "mkstemp");
    close(fd);
    setenv("LMS_SIM_LOG", log, 1);
    char *setting = strdup(arg), *value = strchr(setting, '=');
    *value++ = '\0';
    setenv(setting, value, 1);
    CUresult result = cuInit(0);
    bool logged = file_mentions(log, setting);
    unlink(log);
    _exit(result == CUDA_ERROR_INVALID_VALUE && logged ? 0 : 1);
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
    static const char *const bad_settings[] = {
        "LMS_SIM_CAPACITY_MB=lots", "LMS_SIM_CAPACITY_MB=-5", "LMS_SIM_DEVICE=a100",
        "LMS_SIM_NAME=",            "LMS_SIM_SMS=0",          "LMS_SIM_CC=9",
        "LMS_SIM_CC=9.x",           "LMS_SIM_CC=.5",          "LMS_SIM_ASYNC_ENGINES=many",
        "LMS_SIM_EXECUTE=fast",     "LMS_SIM_CONTEXT_RESERVE_MB=lots", "LMS_SIM_KERNEL_RESERVE_MB=-1",
    };
    const int bad_count = (int)(sizeof bad_settings / sizeof bad_settings[0]);
    plan(37 + bad_count);

    is_int(tap_run_in_child(configure_from_environment, NULL), -1,
           "LMS_SIM_DEVICES and LMS_SIM_CAPACITY_MB shape the devices");
    for (int i = 0; i < bad_count; i++)
        is_int(tap_run_in_child(reject_bad_environment, (void *)bad_settings[i]), -1,
               "%s: cuInit answers INVALID_VALUE, and the log names the variable",
               bad_settings[i]);
    is_int(tap_run_in_child(h100_preset, NULL), -1,
           "LMS_SIM_DEVICE=h100: name, memory, SMs, compute capability, copy engines, host VMM "
           "and granularity of an H100 80GB HBM3");
    is_int(tap_run_in_child(preset_overridden, NULL), -1,
           "LMS_SIM_NAME, _CAPACITY_MB, _SMS, _CC, _ASYNC_ENGINES and _HOST_VMM override the "
           "preset");
    is_int(tap_run_in_child(api_over_environment, NULL), -1,
           "sim_set_device_preset and the other setters win over the environment");
    is_int(tap_run_in_child(old_capacity_name, NULL), -(48 + 1),
           "CUDADOUBLE_CAPACITY_MB is read when LMS_SIM_CAPACITY_MB is unset");
    is_int(tap_run_in_child(old_capacity_name, "64"), -(64 + 1),
           "LMS_SIM_CAPACITY_MB wins over it");

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
    is_str(name, "lms simulated GPU", "the default name");
    CHECK_CU(cuDeviceGetName(name, 4, 1));
    is_str(name, "lms", "cut to the length given");

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
    ok(free_bytes == (31u << 20) - sim_device_reserved(1) && total == 32u << 20,
       "cuMemGetInfo: %zu free of %zu, the driver's %zu out", free_bytes, total,
       sim_device_reserved(1));
    CHECK_CU(cuMemFree_v2(p));

    is_int(cuDevicePrimaryCtxRelease_v2(1), CUDA_SUCCESS, "release the primary context");
    is_int(cuDevicePrimaryCtxRelease_v2(1), CUDA_ERROR_INVALID_CONTEXT,
           "releasing it once more: INVALID_CONTEXT");
    return exit_status();
}
