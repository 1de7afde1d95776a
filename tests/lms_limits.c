/* The soft limit at its exact boundaries: LMS_EXCLUDE_MB, its per-device override, cap mode,
 * out of memory when nothing is evictable, and the host backing cap. Each case runs as a
 * child with its own environment, because liblms reads its options at load. */
#include "tests/lms_testlib.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#define MIB ((size_t)1 << 20)

#define EXPECT(cond)                                                             \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);  \
            return 1;                                                            \
        }                                                                        \
    } while (0)

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

static int exclude_case(size_t handles_that_fit)
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

/* 16 MiB: one swappable buffer, then small ones; they evict it, then run out. */
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
    EXPECT(cuMemAlloc(&small, 2 * MIB) == CUDA_ERROR_OUT_OF_MEMORY);
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

static int child(const char *name)
{
    lms_test_context();
    if (strcmp(name, "exclude") == 0) return exclude_case(6);
    if (strcmp(name, "exclude-device") == 0) return exclude_case(5);
    if (strcmp(name, "cap") == 0) return cap_case();
    if (strcmp(name, "nothing-evictable") == 0) return nothing_evictable_case();
    if (strcmp(name, "host-limit") == 0) return host_limit_case();
    if (strcmp(name, "meminfo") == 0) return meminfo_case();
    return 2;
}

typedef struct limit_case {
    const char *name, *what;
    const char *env[6];
} limit_case;

static const limit_case cases[] = {
    { "exclude", "LMS_EXCLUDE_MB=4 on 16 MiB: exactly six 2 MiB handles resident, the seventh evicts",
      { "LMS_EXCLUDE_MB=4", NULL } },
    { "exclude-device", "LMS_EXCLUDE_MB_0=6 overrides LMS_EXCLUDE_MB=4: exactly five fit",
      { "LMS_EXCLUDE_MB=4", "LMS_EXCLUDE_MB_0=6", NULL } },
    { "cap", "cap mode: the soft limit is the device, to the byte; no VMM",
      { "LMS_MODE=cap", "LMS_EXCLUDE_MB=4", NULL } },
    { "nothing-evictable", "out of memory only when nothing evictable is left",
      { "LMS_EXCLUDE_MB=0", NULL } },
    { "host-limit", "LMS_HOST_LIMIT_MB caps host backing: out of memory past it",
      { "LMS_EXCLUDE_MB=0", "LMS_HOST_LIMIT_MB=4", NULL } },
    { "meminfo", "cuMemGetInfo: total = soft limit + host cap, free = total - bytes the program holds",
      { "LMS_EXCLUDE_MB=4", "LMS_HOST_LIMIT_MB=100", NULL } },
};
#define CASES (int)(sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    if (argc > 1)
        return child(argv[1]);
    plan(CASES);
    static const char *const common[] = { "LMS_THRESHOLD_KB=64", "LMS_SIM_CAPACITY_MB=16", NULL };
    for (int i = 0; i < CASES; i++) {
        const char *env[10];
        int n = 0;
        for (int k = 0; common[k]; k++) env[n++] = common[k];
        for (int k = 0; cases[i].env[k]; k++) env[n++] = cases[i].env[k];
        env[n] = NULL;
        int status = lms_test_run_self(argv, cases[i].name, env);
        ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (status %#x)", cases[i].what, status);
    }
    return exit_status();
}
