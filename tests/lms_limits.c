/* The soft limit at its exact boundaries: LMS_EXCLUDE_MB, its per-device override, cap mode,
 * out of memory when nothing is evictable, and the host backing cap. Each case runs as a
 * child with its own environment, because liblms reads its options at load. */
#include "tests/lms_testlib.h"

#define MIB ((size_t)1 << 20)

/* Allocates and writes n swappable 2 MiB buffers. */
static CUresult fill(CUdeviceptr *bufs, int n)
{
    static unsigned char host[2 * MIB];
    for (int i = 0; i < n; i++) {
        CUresult r = cuMemAlloc(&bufs[i], 2 * MIB);
        if (r == CUDA_SUCCESS)
            r = cuMemcpyHtoD(bufs[i], host, 2 * MIB);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

static int exclude_fit(size_t handles_that_fit)
{
    CUdeviceptr bufs[8];
    EXPECT(fill(bufs, (int)handles_that_fit) == CUDA_SUCCESS);
    EXPECT(sim_device_used(0) == handles_that_fit * 2 * MIB);
    EXPECT(sim_calls("cuMemUnmap") == 0);
    EXPECT(fill(bufs + handles_that_fit, 1) == CUDA_SUCCESS);
    EXPECT(sim_device_used(0) == handles_that_fit * 2 * MIB);
    EXPECT(sim_calls("cuMemUnmap") > 0);
    return 0;
}

static int exclude_case(void) { return exclude_fit(6); }
static int exclude_device_case(void) { return exclude_fit(5); }

static int cap_case(void)
{
    size_t free_bytes, total;
    EXPECT(cuMemGetInfo(&free_bytes, &total) == CUDA_SUCCESS);
    EXPECT(total == 12 * MIB && free_bytes == 12 * MIB);
    CUdeviceptr all, one;
    EXPECT(cuMemAlloc(&all, 12 * MIB) == CUDA_SUCCESS);
    EXPECT(cuMemAlloc(&one, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(sim_calls("cuMemCreate") == 0);
    EXPECT(cuMemFree(all) == CUDA_SUCCESS);
    EXPECT(cuMemAlloc(&one, 1) == CUDA_SUCCESS);
    return 0;
}

/* 16 MiB: one swappable buffer, then small ones; they evict it, then run out. A swappable
 * one still finds room: it starts in host memory, mapped at its address. */
static int nothing_evictable_case(void)
{
    CUdeviceptr swappable, small;
    EXPECT(fill(&swappable, 1) == CUDA_SUCCESS);
    for (int i = 0; i < 14 * 32; i++)
        EXPECT(cuMemAlloc(&small, 32 * 1024) == CUDA_SUCCESS);
    EXPECT(sim_calls("cuMemUnmap") == 0);
    for (int i = 0; i < 2 * 32; i++)
        EXPECT(cuMemAlloc(&small, 32 * 1024) == CUDA_SUCCESS);
    EXPECT(sim_calls("cuMemUnmap") > 0);
    EXPECT(cuMemAlloc(&small, 32 * 1024) == CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(cuMemAlloc(&swappable, 2 * MIB) == CUDA_SUCCESS);
    EXPECT(cuMemsetD8(swappable, 1, 2 * MIB) == CUDA_SUCCESS);
    return 0;
}

/* 16 MiB device, 4 MiB of host backing: two evictions fit, the third does not. */
static int host_limit_case(void)
{
    CUdeviceptr bufs[11];
    EXPECT(fill(bufs, 10) == CUDA_SUCCESS);
    EXPECT(fill(bufs + 10, 1) == CUDA_ERROR_OUT_OF_MEMORY);
    return 0;
}

/* Allocates `bytes` and writes pattern(seed) into it. */
static CUresult put(CUdeviceptr *p, size_t bytes, unsigned seed)
{
    static unsigned char host[6 * MIB];
    lms_test_pattern(host, bytes, seed);
    CUresult r = cuMemAlloc(p, bytes);
    return r == CUDA_SUCCESS ? cuMemcpyHtoD(*p, host, bytes) : r;
}

static int holds(CUdeviceptr p, size_t bytes, unsigned seed)
{
    static unsigned char host[6 * MIB];
    return cuMemcpyDtoH(host, p, bytes) == CUDA_SUCCESS && lms_test_pattern_ok(host, bytes, seed);
}

/* 16 MiB device, 8 MiB of host backing. A freed 4 MiB buffer leaves its backing pooled; six
 * MiB of evictions then fit the cap, which counts the bytes in use, not those pooled. */
static int host_pool_case(void)
{
    CUdeviceptr a, d, e, c[6];
    EXPECT(put(&a, 4 * MIB, 100) == CUDA_SUCCESS);
    for (unsigned i = 0; i < 6; i++)
        EXPECT(put(&c[i], 2 * MIB, i) == CUDA_SUCCESS);
    EXPECT(put(&d, 4 * MIB, 101) == CUDA_SUCCESS); /* evicts a */
    EXPECT(sim_calls("cuMemUnmap") > 0);
    EXPECT(cuMemFree(a) == CUDA_SUCCESS);
    EXPECT(put(&e, 6 * MIB, 102) == CUDA_SUCCESS); /* evicts c[0], c[1], c[2] */
    /* Read back in an order whose evictions stay within the cap. */
    for (unsigned i = 0; i < 3; i++)
        EXPECT(holds(c[i], 2 * MIB, i)); /* evicts c[i + 3] */
    EXPECT(holds(d, 4 * MIB, 101));
    EXPECT(holds(e, 6 * MIB, 102));
    EXPECT(cuMemFree(d) == CUDA_SUCCESS && cuMemFree(e) == CUDA_SUCCESS);
    for (unsigned i = 3; i < 6; i++)
        EXPECT(holds(c[i], 2 * MIB, i));
    return 0;
}

/* A launch that the driver answers with out of memory (it needed memory of its own) gets room
 * and is issued again, while evictable memory is left. */
static int launch_oom_case(void)
{
    CUdeviceptr bufs[8];
    EXPECT(fill(bufs, 8) == CUDA_SUCCESS); /* the whole 16 MiB */
    unsigned long unmaps = sim_calls("cuMemUnmap");
    sim_fail_call("cuLaunchKernel", 1, CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(lms_test_launch(lms_test_fill_kernel(), NULL, bufs[0], 2 * MIB, 9) == CUDA_SUCCESS);
    EXPECT(sim_calls("cuMemUnmap") > unmaps);
    static unsigned char host[2 * MIB];
    EXPECT(cuMemcpyDtoH(host, bufs[0], 2 * MIB) == CUDA_SUCCESS);
    EXPECT(host[0] == 9 && host[2 * MIB - 1] == 9);
    return 0;
}

/* What the simulated driver holds of the device for contexts and kernels, where it models it. */
size_t sim_device_reserved(int device) __attribute__((weak));

/* Without LMS_EXCLUDE_MB the soft limit is what the device has free at start-up (16 MiB less
 * the context's) less a margin for the driver: 1/16 of the device on one this small. */
static int default_headroom_case(void)
{
    size_t reserved = sim_device_reserved ? sim_device_reserved(0) : 0;
    size_t free_bytes, total;
    EXPECT(cuMemGetInfo(&free_bytes, &total) == CUDA_SUCCESS);
    EXPECT(total == 16 * MIB - reserved - MIB + 100 * MIB);
    return 0;
}

/* A kernel's first launch takes device memory of the driver's: on a full device that launch
 * gets room by an eviction, as an allocation would. */
static int kernel_memory_case(void)
{
    CUdeviceptr bufs[8];
    EXPECT(fill(bufs, 8) == CUDA_SUCCESS);
    EXPECT(lms_test_launch(lms_test_fill_kernel(), NULL, bufs[0], 2 * MIB, 9) == CUDA_SUCCESS);
    static unsigned char host[2 * MIB];
    EXPECT(cuMemcpyDtoH(host, bufs[0], 2 * MIB) == CUDA_SUCCESS);
    EXPECT(host[0] == 9 && host[2 * MIB - 1] == 9);
    return 0;
}

/* swap: capacity = soft limit (12 MiB) + host backing cap (100 MiB); free = that - demanded. */
static int meminfo_case(void)
{
    size_t free_bytes, total;
    CUdeviceptr big, small;
    EXPECT(cuMemAlloc(&big, MIB) == CUDA_SUCCESS);
    EXPECT(cuMemAlloc(&small, 10000) == CUDA_SUCCESS);
    EXPECT(cuMemGetInfo(&free_bytes, &total) == CUDA_SUCCESS);
    EXPECT(total == 112 * MIB);
    EXPECT(free_bytes == 112 * MIB - MIB - 10000);
    return 0;
}

static const lms_test_case cases[] = {
    { "exclude", "LMS_EXCLUDE_MB=4 on 16 MiB: exactly six 2 MiB handles resident, the seventh evicts",
      exclude_case, { "LMS_EXCLUDE_MB=4", NULL } },
    { "exclude-device", "LMS_EXCLUDE_MB_0=6 overrides LMS_EXCLUDE_MB=4: exactly five fit",
      exclude_device_case, { "LMS_EXCLUDE_MB=4", "LMS_EXCLUDE_MB_0=6", NULL } },
    { "cap", "cap mode: the soft limit is the device, to the byte; no VMM",
      cap_case, { "LMS_MODE=cap", "LMS_EXCLUDE_MB=4", NULL } },
    { "nothing-evictable", "small allocations: out of memory only when nothing evictable is left; "
      "a swappable one then starts in host memory", nothing_evictable_case,
      { "LMS_EXCLUDE_MB=0", "LMS_SIM_HOST_VMM=1", NULL } },
    { "host-limit", "LMS_HOST_LIMIT_MB caps host backing: out of memory past it",
      host_limit_case, { "LMS_EXCLUDE_MB=0", "LMS_HOST_LIMIT_MB=4", NULL } },
    { "host-pool", "LMS_HOST_LIMIT_MB counts host backing in use: pooled backing of other sizes gives way",
      host_pool_case, { "LMS_EXCLUDE_MB=0", "LMS_HOST_LIMIT_MB=8", NULL } },
    { "launch-oom", "a launch out of memory is retried after an eviction",
      launch_oom_case, { "LMS_EXCLUDE_MB=0", NULL } },
    { "default-headroom", "default soft limit: free device memory at start-up less a margin",
      default_headroom_case, { "LMS_HOST_LIMIT_MB=100", "LMS_SIM_CONTEXT_RESERVE_MB=4", NULL } },
    { "kernel-memory", "a launch that needs device memory for its kernel gets it by an eviction",
      kernel_memory_case, { "LMS_EXCLUDE_MB=0", "LMS_SIM_KERNEL_RESERVE_MB=2", NULL } },
    { "meminfo", "cuMemGetInfo: total = soft limit + host cap, free = total - bytes the program holds",
      meminfo_case, { "LMS_EXCLUDE_MB=4", "LMS_HOST_LIMIT_MB=100", NULL } },
};
#define CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    static const char *const common[] = { "LMS_THRESHOLD_KB=64", "LMS_SIM_CAPACITY_MB=16", NULL };
    return lms_test_main(argc, argv, cases, CASES, common);
}
