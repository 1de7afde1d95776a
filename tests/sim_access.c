/* Who may touch what: cuMemSetAccess grants per location (each device, the host), peer access
 * opens cuMemAlloc memory to another device but not VMM mappings, and the CPU may touch
 * host-located VMM memory only where the host was granted access. Kernels are checked through
 * the pointers their cost functions price (the `scale` kernel of sim_test_module.so). */
#include "tests/sim_testing.h"

#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

#define GRAIN ((size_t)2 << 20)

static char module_path[PATH_MAX + 32];
static CUkernel scale;
static CUcontext ctx0, ctx1;

static CUmemAccessDesc grant(CUmemLocationType type, int id, CUmemAccess_flags flags)
{
    return (CUmemAccessDesc){{type, id}, flags};
}

/* Two devices, their primary contexts (device 0's current), and the scale kernel. */
static void setup(void)
{
    sim_set_device_count(2);
    ctx0 = sim_setup(64 << 20);
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx1, 1));
    CUlibrary library;
    CHECK_CU(cuLibraryLoadFromFile(&library, module_path, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_CU(cuLibraryGetKernel(&scale, library, "scale"));
}

/* scale(data, factor, n) on the current context's NULL stream: data[i] *= factor. */
static CUresult launch_scale(CUdeviceptr data, float factor, int n)
{
    void *params[] = {&data, &factor, &n};
    return cuLaunchKernel((CUfunction)scale, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
}

/* Reserves, creates on `where` and maps one granule, granting `grants`. */
static CUdeviceptr map_granule(CUmemLocationType where, const CUmemAccessDesc *grants, size_t count)
{
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {where, 0}};
    CHECK_CU(cuMemAddressReserve(&va, GRAIN, 0, 0, 0));
    CHECK_CU(cuMemCreate(&handle, GRAIN, &prop, 0));
    CHECK_CU(cuMemMap(va, GRAIN, 0, handle, 0));
    CHECK_CU(cuMemRelease(handle));
    if (count > 0)
        CHECK_CU(cuMemSetAccess(va, GRAIN, grants, count));
    return va;
}

/* ---- children: faults end the process's use of the GPU, so each has one of its own ---- */

/* A kernel of device 1 on memory it may not reach: ILLEGAL_ADDRESS, sticky. */
static void expect_fault(CUdeviceptr data)
{
    CHECK_CU(cuCtxSetCurrent(ctx1));
    CHECK_CU(launch_scale(data, 2, 4));
    CUresult result = cuCtxSynchronize();
    CUdeviceptr more;
    _exit(result == CUDA_ERROR_ILLEGAL_ADDRESS &&
                  cuMemAlloc_v2(&more, 16) == CUDA_ERROR_ILLEGAL_ADDRESS
              ? 0
              : 1);
}

static void vmm_of_device_0(void *arg)
{
    (void)arg;
    setup();
    CUmemAccessDesc device0 = grant(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    expect_fault(map_granule(CU_MEM_LOCATION_TYPE_DEVICE, &device0, 1));
}

static void alloc_of_device_0(void *arg)
{
    (void)arg;
    setup();
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc_v2(&p, 64));
    expect_fault(p);
}

/* Peer access from device 1 opens device 0's cuMemAlloc memory, not its mappings. */
static void peer_is_not_for_vmm(void *arg)
{
    (void)arg;
    setup();
    CUmemAccessDesc device0 = grant(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUdeviceptr va = map_granule(CU_MEM_LOCATION_TYPE_DEVICE, &device0, 1), p;
    CHECK_CU(cuMemAlloc_v2(&p, 64));
    CHECK_CU(cuMemsetD8_v2(p, 0, 64));
    CHECK_CU(cuCtxSetCurrent(ctx1));
    CHECK_CU(cuCtxEnablePeerAccess(ctx0, 0));
    CHECK_CU(launch_scale(p, 2, 4));
    if (cuCtxSynchronize() != CUDA_SUCCESS)
        _exit(2);
    expect_fault(va);
}

static void sleep_200ms(void *unused)
{
    (void)unused;
    sleep_ms(200);
}

/* Access revoked after a copy was queued: the copy faults when it runs. */
static void revoked_before_run(void *arg)
{
    (void)arg;
    setup();
    CUmemAccessDesc device0 = grant(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUdeviceptr va = map_granule(CU_MEM_LOCATION_TYPE_DEVICE, &device0, 1);
    CUstream stream;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuLaunchHostFunc(stream, sleep_200ms, NULL));
    CHECK_CU(cuMemsetD8Async(va, 1, GRAIN, stream));
    CUmemAccessDesc none = grant(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CHECK_CU(cuMemSetAccess(va, GRAIN, &none, 1));
    _exit(cuStreamSynchronize(stream) == CUDA_ERROR_ILLEGAL_ADDRESS ? 0 : 1);
}

/* The CPU reads host-located memory granted to device 0 only. */
static void cpu_reads(void *arg)
{
    (void)arg;
    setup();
    CUmemAccessDesc device0 = grant(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUdeviceptr va = map_granule(CU_MEM_LOCATION_TYPE_HOST, &device0, 1);
    volatile unsigned char byte = *(volatile unsigned char *)(uintptr_t)va;
    (void)byte;
    _exit(0);
}

int main(void)
{
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len < 0)
        bail_out("readlink /proc/self/exe failed");
    exe[len] = '\0';
    snprintf(module_path, sizeof module_path, "%s/sim_test_module.so", dirname(exe));
    setenv("LMS_SIM_LOG", "/dev/null", 1); /* the faults are logged */
    plan(19);

    /* First, while this process has no threads: a TSan child must not inherit any. */
    is_int(tap_run_in_child(vmm_of_device_0, NULL), -1,
           "a kernel of device 1 on a mapping granted to device 0 only: ILLEGAL_ADDRESS, sticky");
    is_int(tap_run_in_child(alloc_of_device_0, NULL), -1,
           "a kernel of device 1 on device 0's cuMemAlloc memory, without peer access: ILLEGAL_ADDRESS");
    is_int(tap_run_in_child(peer_is_not_for_vmm, NULL), -1,
           "peer access opens cuMemAlloc memory, but not mappings: those still fault");
    is_int(tap_run_in_child(revoked_before_run, NULL), -1,
           "access revoked before a queued memset runs: ILLEGAL_ADDRESS");
    is_int(tap_run_in_child(cpu_reads, NULL), SIGSEGV,
           "the CPU reading host-located memory not granted to the host dies of SIGSEGV");

    setup();
    /* Grants are per location. */
    CUmemAccessDesc device0 = grant(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CUdeviceptr va = map_granule(CU_MEM_LOCATION_TYPE_DEVICE, &device0, 1);
    unsigned long long flags[3];
    const CUmemLocation dev0 = {CU_MEM_LOCATION_TYPE_DEVICE, 0}, dev1 = {CU_MEM_LOCATION_TYPE_DEVICE, 1},
                        host = {CU_MEM_LOCATION_TYPE_HOST, 0};
    CHECK_CU(cuMemGetAccess(&flags[0], &dev0, va));
    CHECK_CU(cuMemGetAccess(&flags[1], &dev1, va + 100));
    CHECK_CU(cuMemGetAccess(&flags[2], &host, va));
    ok(flags[0] == CU_MEM_ACCESS_FLAGS_PROT_READWRITE && flags[1] == CU_MEM_ACCESS_FLAGS_PROT_NONE &&
           flags[2] == CU_MEM_ACCESS_FLAGS_PROT_NONE,
       "cuMemGetAccess: device 0 read-write, device 1 and the host nothing");
    CUmemAccessDesc host_rw = grant(CU_MEM_LOCATION_TYPE_HOST, 0, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    is_int(cuMemSetAccess(va, GRAIN, &host_rw, 1), CUDA_ERROR_INVALID_VALUE,
           "granting the host access to device memory: INVALID_VALUE");

    float values[4] = {1, 2, 3, 4}, back[4];
    CHECK_CU(cuMemcpyHtoD_v2(va, values, sizeof values));
    CHECK_CU(cuCtxSetCurrent(ctx1));
    is_int(cuMemcpyHtoD_v2(va, values, sizeof values), CUDA_ERROR_INVALID_VALUE,
           "a copy on device 1 into a mapping granted to device 0: INVALID_VALUE");
    CUmemAccessDesc device1_read = grant(CU_MEM_LOCATION_TYPE_DEVICE, 1, CU_MEM_ACCESS_FLAGS_PROT_READ);
    CHECK_CU(cuMemSetAccess(va, GRAIN, &device1_read, 1));
    is_int(cuMemcpyDtoH_v2(back, va, sizeof back), CUDA_SUCCESS,
           "granted read access, device 1 may copy from it");
    is_int(cuMemsetD8_v2(va, 0, 16), CUDA_ERROR_INVALID_VALUE, "but not write to it: INVALID_VALUE");
    CHECK_CU(cuMemGetAccess(&flags[0], &dev0, va));
    is_uint(flags[0], CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "device 0's grant is untouched");
    CUmemAccessDesc device1_rw = grant(CU_MEM_LOCATION_TYPE_DEVICE, 1, CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
    CHECK_CU(cuMemSetAccess(va, GRAIN, &device1_rw, 1));
    CHECK_CU(launch_scale(va, 10, 4));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH_v2(back, va, sizeof back));
    ok(back[0] == 10 && back[3] == 40, "granted read-write, device 1's kernels use it");

    /* Peer access, for cuMemAlloc memory. */
    CHECK_CU(cuCtxSetCurrent(ctx0));
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc_v2(&p, sizeof values));
    CHECK_CU(cuMemcpyHtoD_v2(p, values, sizeof values));
    CHECK_CU(cuCtxSetCurrent(ctx1));
    CHECK_CU(cuMemcpyDtoH_v2(back, p, sizeof back));
    ok(back[1] == 2, "copies reach another device's cuMemAlloc memory without peer access");
    CHECK_CU(cuCtxEnablePeerAccess(ctx0, 0));
    CHECK_CU(launch_scale(p, 3, 4));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemcpyDtoH_v2(back, p, sizeof back));
    ok(back[1] == 6, "with peer access, kernels do");

    /* Host-located memory: kernels of a device granted access reach it; the CPU once the host
     * is granted access too. */
    CHECK_CU(cuCtxSetCurrent(ctx0));
    CUdeviceptr hv = map_granule(CU_MEM_LOCATION_TYPE_HOST, &device0, 1);
    CHECK_CU(cuMemcpyHtoD_v2(hv, values, sizeof values));
    CHECK_CU(launch_scale(hv, 5, 4));
    CHECK_CU(cuCtxSynchronize());
    CHECK_CU(cuMemGetAccess(&flags[2], &host, hv));
    is_uint(flags[2], CU_MEM_ACCESS_FLAGS_PROT_NONE, "host-located memory: no host access at first");
    CHECK_CU(cuMemSetAccess(hv, GRAIN, &host_rw, 1));
    const float *cpu = (const float *)(uintptr_t)hv;
    ok(cpu[0] == 5 && cpu[3] == 20, "granted to the host, the CPU reads what the kernel wrote");
    ((float *)(uintptr_t)hv)[2] = 99;
    CHECK_CU(cuMemcpyDtoH_v2(back, hv, sizeof back));
    ok(back[2] == 99, "and what the CPU writes, copies see");
    CUmemAccessDesc device0_none = grant(CU_MEM_LOCATION_TYPE_DEVICE, 0, CU_MEM_ACCESS_FLAGS_PROT_NONE);
    CHECK_CU(cuMemSetAccess(hv, GRAIN, &device0_none, 1));
    ok(cpu[3] == 20, "revoking device 0's grant leaves the host's");
    is_int(cuMemcpyDtoH_v2(back, hv, sizeof back), CUDA_ERROR_INVALID_VALUE,
           "but device 0 no longer reaches it: a copy from it as device memory is INVALID_VALUE");
    CHECK_CU(cuMemFree_v2(p));
    return exit_status();
}
