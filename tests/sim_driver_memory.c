/* The driver's own device memory: each context takes some when it is made, each kernel more at
 * its first launch in a context; the program cannot use it, cuMemGetInfo counts it out, and a
 * launch or a context that finds no room fails with OUT_OF_MEMORY. */
#include "tests/sim_testing.h"

#include <libgen.h>
#include <limits.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

static void nothing(const sim_launch *launch)
{
    (void)launch;
}

static CUresult launch(CUfunction f)
{
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
}

static size_t free_now(void)
{
    size_t free_bytes = 0, total;
    CHECK_CU(cuMemGetInfo_v2(&free_bytes, &total));
    return free_bytes;
}

/* Children report what went wrong on stderr and exit 1. */
static void expect(bool condition, const char *what)
{
    if (!condition) {
        diag("in the child: %s", what);
        _exit(1);
    }
}

/* The presets' amounts, read at cuInit like the rest of the shape. */
static void preset_reserve(void *arg)
{
    setenv("LMS_SIM_DEVICE", arg, 1);
    CUcontext ctx;
    expect(cuInit(0) == CUDA_SUCCESS && cuDevicePrimaryCtxRetain(&ctx, 0) == CUDA_SUCCESS,
           "cuInit and a context");
    _exit((int)(sim_device_reserved(0) / MiB % 256));
}

/* The environment sets the amounts, and the API wins over it. */
static void reserve_from_environment(void *arg)
{
    setenv("LMS_SIM_CONTEXT_RESERVE_MB", "8", 1);
    setenv("LMS_SIM_KERNEL_RESERVE_MB", "4", 1);
    if (arg)
        sim_set_context_reserve(3 * MiB);
    sim_setup(64 * MiB);
    CUkernel k = sim_register_kernel("nothing", nothing, 0, NULL);
    size_t at_start = sim_device_reserved(0);
    expect(launch((CUfunction)k) == CUDA_SUCCESS && cuCtxSynchronize() == CUDA_SUCCESS, "launch");
    _exit(at_start == (arg ? 3 : 8) * MiB && sim_device_reserved(0) == at_start + 4 * MiB ? 0 : 1);
}

int main(void)
{
    plan(16);
    setenv("LMS_SIM_LOG", "/dev/null", 1); /* launches that find no room are logged */
    /* First, while this process has no threads: a TSan child must not inherit any. */
    is_int(tap_run_in_child(preset_reserve, "test"), -(2 + 1),
           "the test preset: a context takes 2 MiB");
    is_int(tap_run_in_child(preset_reserve, "h100"), -(527 % 256 + 1),
           "the h100 preset: 527 MiB (measured on the H100: cuMemGetInfo after the context's creation)");
    is_int(tap_run_in_child(reserve_from_environment, NULL), -1,
           "LMS_SIM_CONTEXT_RESERVE_MB and LMS_SIM_KERNEL_RESERVE_MB set the amounts");
    is_int(tap_run_in_child(reserve_from_environment, "api"), -1,
           "sim_set_context_reserve wins over the environment");

    sim_set_context_reserve(4 * MiB);
    sim_set_kernel_reserve(2 * MiB);
    sim_setup(16 * MiB);
    CUkernel k1 = sim_register_kernel("first", nothing, 0, NULL);
    CUkernel k2 = sim_register_kernel("second", nothing, 0, NULL);
    CUkernel k3 = sim_register_kernel("third", nothing, 0, NULL);
    is_uint(sim_device_reserved(0), 4 * MiB, "the primary context holds 4 MiB once retained");
    is_uint(free_now(), 12 * MiB, "cuMemGetInfo: free counts it out");

    CHECK_CU(launch((CUfunction)k1));
    CHECK_CU(launch((CUfunction)k1));
    is_uint(sim_device_reserved(0), 6 * MiB, "a kernel's first launch takes 2 MiB, later ones none");
    is_uint(free_now(), 10 * MiB, "and free goes down by as much");

    /* The program gets what is left, exactly. */
    CUdeviceptr all, more;
    CHECK_CU(cuMemAlloc_v2(&all, 10 * MiB - 4096));
    is_int(cuMemAlloc_v2(&more, 8192), CUDA_ERROR_OUT_OF_MEMORY,
           "an allocation past what the driver left: OUT_OF_MEMORY");
    is_int(launch((CUfunction)k2), CUDA_ERROR_OUT_OF_MEMORY,
           "a new kernel's first launch on a full device: OUT_OF_MEMORY");
    is_int(launch((CUfunction)k1), CUDA_SUCCESS, "a kernel already loaded still launches");
    CUcontext created;
    is_int(cuCtxCreate_v4(&created, NULL, 0, 0), CUDA_ERROR_OUT_OF_MEMORY,
           "a context on a full device: OUT_OF_MEMORY");
    CHECK_CU(cuMemFree_v2(all));
    is_int(launch((CUfunction)k2), CUDA_SUCCESS, "with memory freed, the launch works");

    /* A second context loads its kernels again; its memory goes with it. */
    size_t before = sim_device_reserved(0);
    CHECK_CU(cuCtxCreate_v4(&created, NULL, 0, 0));
    CHECK_CU(launch((CUfunction)k1));
    CHECK_CU(launch((CUfunction)k3));
    CHECK_CU(cuCtxSynchronize());
    is_uint(sim_device_reserved(0), before + 8 * MiB,
            "another context: its own 4 MiB, and 2 MiB for each kernel it launched");
    CHECK_CU(cuCtxDestroy_v2(created));
    is_uint(sim_device_reserved(0), before, "cuCtxDestroy gives all of it back");

    /* An unloaded module's kernels give theirs back. */
    char exe[PATH_MAX], module_path[PATH_MAX + 32];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len < 0)
        bail_out("readlink /proc/self/exe failed");
    exe[len] = '\0';
    snprintf(module_path, sizeof module_path, "%s/sim_test_module.so", dirname(exe));
    CUmodule module;
    CUfunction scale;
    CHECK_CU(cuModuleLoad(&module, module_path));
    CHECK_CU(cuModuleGetFunction(&scale, module, "scale"));
    CUdeviceptr data;
    CHECK_CU(cuMemAlloc_v2(&data, sizeof(float)));
    float factor = 2;
    int n = 1;
    void *params[] = {&data, &factor, &n};
    CHECK_CU(cuLaunchKernel(scale, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    CHECK_CU(cuModuleUnload(module));
    is_uint(sim_device_reserved(0), before, "cuModuleUnload gives its kernels' memory back");
    CHECK_CU(cuMemFree_v2(data));
    return exit_status();
}
