/* Timing-only execution (LMS_SIM_EXECUTE=timing-only) on an H100-shaped device: kernels do
 * not run and copies and memsets move no byte, so 60 GiB of device memory and 60 GiB of
 * host-located VMM memory cost no host memory; every check, and the fault rules, still hold. */
#include "tests/sim_testing.h"

#include <signal.h>
#include <stdint.h>
#include <unistd.h>

#define GIB ((size_t)1 << 30)
#define CHUNK (2 * GIB)
#define ALLOCS 20     /* 40 GiB of cuMemAlloc */
#define DEVICE_VMM 10 /* 20 GiB of device-located handles */
#define HOST_VMM 30   /* 60 GiB of host-located handles */
#define HANDLES (DEVICE_VMM + HOST_VMM)

static bool kernel_ran, host_fn_ran;

/* Writes a byte on every page of its buffer: were it run, it would make the memory resident. */
static void touch(const sim_launch *launch)
{
    unsigned char *p = *(unsigned char **)launch->params[0];
    size_t size = *(size_t *)launch->params[1];
    for (size_t at = 0; at < size; at += 4096)
        p[at] = 1;
    kernel_ran = true;
}

static void note_host_fn(void *arg)
{
    *(bool *)arg = true;
}

static void sleep_100ms(void *arg)
{
    (void)arg;
    sleep_ms(100);
}

/* The process's resident memory, from /proc/self/status. */
static size_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %zu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib << 10;
}

/* Children: the CPU touches device memory, as on the GPU it may not: work that would reach it
 * does nothing here, so nothing opens it. */
static CUdeviceptr timing_only_device(void)
{
    setenv("LMS_SIM_EXECUTE", "timing-only", 1);
    CHECK_CU(cuInit(0));
    CUcontext ctx;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK_CU(cuCtxSetCurrent(ctx));
    CUdeviceptr p;
    CHECK_CU(cuMemAlloc_v2(&p, 4096));
    return p;
}

static void cpu_touches_allocation(void *arg)
{
    (void)arg;
    *(volatile unsigned char *)(uintptr_t)timing_only_device() = 1;
    _exit(0);
}

/* A mapping's bytes, the CPU reading them: location names where the handle lies; the host is
 * granted access to host-located ones. */
static void cpu_reads_mapping(void *arg)
{
    CUmemLocationType location = *(const CUmemLocationType *)arg;
    timing_only_device();
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED, .location = {location, 0}};
    CUmemAccessDesc access[2] = {
        {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
        {{CU_MEM_LOCATION_TYPE_HOST, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
    };
    CHECK_CU(cuMemAddressReserve(&va, 2 << 20, 0, 0, 0));
    CHECK_CU(cuMemCreate(&h, 2 << 20, &prop, 0));
    CHECK_CU(cuMemMap(va, 2 << 20, 0, h, 0));
    CHECK_CU(cuMemSetAccess(va, 2 << 20, access, location == CU_MEM_LOCATION_TYPE_HOST ? 2 : 1));
    _exit(*(volatile unsigned char *)(uintptr_t)va);
}

int main(void)
{
    plan(19);
    /* First, while this process has no threads: a TSan child must not inherit any. */
    is_int(tap_run_in_child(cpu_touches_allocation, NULL), SIGSEGV,
           "the CPU writing cuMemAlloc memory dies of SIGSEGV, as on the GPU");
    CUmemLocationType on_device = CU_MEM_LOCATION_TYPE_DEVICE, on_host = CU_MEM_LOCATION_TYPE_HOST;
    is_int(tap_run_in_child(cpu_reads_mapping, &on_device), SIGSEGV,
           "the CPU reading a device-located mapping dies of SIGSEGV");
    is_int(tap_run_in_child(cpu_reads_mapping, &on_host), -1,
           "it reads a host-located one granted to the host (its zeroes)");

    setenv("LMS_SIM_DEVICE", "h100", 1);
    setenv("LMS_SIM_EXECUTE", "timing-only", 1);
    setenv("LMS_SIM_LOG", "/dev/null", 1); /* the fault at the end is logged */
    CHECK_CU(cuInit(0));
    CUcontext ctx;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK_CU(cuCtxSetCurrent(ctx));
    size_t rss_before = rss_bytes();

    CUdeviceptr allocs[ALLOCS], reservation;
    bool all = true;
    for (int i = 0; i < ALLOCS; i++)
        all = all && cuMemAlloc_v2(&allocs[i], CHUNK) == CUDA_SUCCESS;
    ok(all, "cuMemAlloc of %d x 2 GiB", ALLOCS);

    CHECK_CU(cuMemAddressReserve(&reservation, HANDLES * CHUNK, 0, 0, 0));
    CUmemGenericAllocationHandle handles[HANDLES];
    CUmemAccessDesc access[2] = {
        {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
        {{CU_MEM_LOCATION_TYPE_HOST, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE},
    };
    all = true;
    for (int i = 0; i < HANDLES; i++) {
        CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                    .location = {i < DEVICE_VMM ? CU_MEM_LOCATION_TYPE_DEVICE
                                                                : CU_MEM_LOCATION_TYPE_HOST,
                                                 0}};
        CUdeviceptr at = reservation + (CUdeviceptr)(i * CHUNK);
        all = all && cuMemCreate(&handles[i], CHUNK, &prop, 0) == CUDA_SUCCESS &&
              cuMemMap(at, CHUNK, 0, handles[i], 0) == CUDA_SUCCESS &&
              cuMemSetAccess(at, CHUNK, access, i < DEVICE_VMM ? 1 : 2) == CUDA_SUCCESS;
    }
    ok(all, "%d device-located and %d host-located handles of 2 GiB, mapped with access",
       DEVICE_VMM, HOST_VMM);
    size_t free_bytes, total;
    CHECK_CU(cuMemGetInfo_v2(&free_bytes, &total));
    is_uint(total - free_bytes, (ALLOCS + DEVICE_VMM) * CHUNK + sim_device_reserved(0),
            "60 GiB of device memory in use, and what the driver holds");
    CUdeviceptr more;
    is_int(cuMemAlloc_v2(&more, 20 * GIB), CUDA_ERROR_OUT_OF_MEMORY,
           "past the 81079 MiB of the device: OUT_OF_MEMORY, as ever");

    /* Work over all of it. */
    const size_t sizes[] = {sizeof(void *), sizeof(size_t)};
    CUkernel kernel = sim_register_kernel("touch", touch, 2, sizes);
    size_t chunk = CHUNK;
    all = true;
    for (int i = 0; i < ALLOCS; i++) {
        void *params[] = {&allocs[i], &chunk};
        all = all &&
              cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL) ==
                  CUDA_SUCCESS &&
              cuMemsetD32Async(allocs[i], 0xffffffff, CHUNK / 4, NULL) == CUDA_SUCCESS;
    }
    size_t copied = sim_bytes_copied();
    for (int i = 0; i < HANDLES; i++)
        all = all && cuMemcpyDtoDAsync_v2(reservation + (CUdeviceptr)(i * CHUNK),
                                          allocs[i % ALLOCS], CHUNK, NULL) == CUDA_SUCCESS;
    CHECK_CU(cuLaunchHostFunc(NULL, note_host_fn, &host_fn_ran));
    CHECK_CU(cuCtxSynchronize());
    ok(all, "launches, memsets and copies over all of it are accepted");
    ok(!kernel_ran, "kernels do not run");
    ok(host_fn_ran, "host functions do");
    is_uint(sim_bytes_copied() - copied, HANDLES * CHUNK, "copies count what they would move");

    unsigned char host[64];
    memset(host, 0xab, sizeof host);
    CHECK_CU(cuMemcpyDtoH_v2(host, allocs[0], sizeof host));
    ok(host[0] == 0xab && host[63] == 0xab, "a copy to the host moves no byte");
    size_t rss_after = rss_bytes();
    ok(rss_after - rss_before < (200u << 20),
       "120 GiB allocated, mapped and worked on: resident memory grew by %zu MiB",
       (rss_after - rss_before) >> 20);

    /* Addresses are still checked when called. */
    CUdeviceptr unmapped;
    CHECK_CU(cuMemAddressReserve(&unmapped, CHUNK, 0, 0, 0));
    is_int(cuMemcpyHtoD_v2(unmapped, host, sizeof host), CUDA_ERROR_INVALID_VALUE,
           "a copy to reserved, unmapped memory: INVALID_VALUE");
    is_int(cuMemsetD8_v2(unmapped, 0, 16), CUDA_ERROR_INVALID_VALUE,
           "a memset there: INVALID_VALUE");
    is_int(cuMemcpyDtoH_v2(host, allocs[0] + CHUNK - 8, sizeof host), CUDA_ERROR_INVALID_VALUE,
           "a copy past the end of an allocation: INVALID_VALUE");

    /* A queued copy whose memory is unmapped before it runs faults, and the fault sticks. */
    CUstream stream;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr last = reservation + (CUdeviceptr)((HANDLES - 1) * CHUNK);
    CHECK_CU(cuLaunchHostFunc(stream, sleep_100ms, NULL));
    CHECK_CU(cuMemcpyDtoDAsync_v2(last, allocs[0], CHUNK, stream));
    CHECK_CU(cuMemUnmap(last, CHUNK));
    is_int(cuStreamSynchronize(stream), CUDA_ERROR_ILLEGAL_ADDRESS,
           "a queued copy into memory unmapped since: ILLEGAL_ADDRESS");
    is_int(cuMemAlloc_v2(&more, 4096), CUDA_ERROR_ILLEGAL_ADDRESS, "and every later call fails");
    ok(rss_bytes() - rss_before < (200u << 20), "still no memory resident");
    return exit_status();
}
