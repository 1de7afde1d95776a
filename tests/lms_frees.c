/* Frees keep the driver's ordering against queued work: cuMemFree waits for the whole device
 * (programs read zero-copy results after cudaFree), and cuMemFreeAsync waits for nothing. */
#include "tests/lms_testlib.h"

#include <stdint.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define SLOW_MS 400

/* sleep_then_set(ms, flag): sleeps, then sets *flag (a host pointer) to 1. */
static void sleep_then_set(const sim_launch *l)
{
    usleep((useconds_t)*(int *)l->params[0] * 1000);
    __atomic_store_n(*(int **)l->params[1], 1, __ATOMIC_RELEASE);
}

static int flag;

/* Queues a kernel on its own stream that sets flag after SLOW_MS. */
static CUresult launch_slow(void)
{
    static CUkernel k;
    static CUstream stream;
    static const size_t sizes[] = { sizeof(int), sizeof(int *) };
    if (!k)
        k = sim_register_kernel("sleep_then_set", sleep_then_set, 2, sizes);
    CUresult r = stream ? CUDA_SUCCESS : cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
    __atomic_store_n(&flag, 0, __ATOMIC_RELEASE);
    int ms = SLOW_MS, *p = &flag;
    void *params[] = { &ms, &p };
    return r == CUDA_SUCCESS ? cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL) : r;
}

static int flag_set(void) { return __atomic_load_n(&flag, __ATOMIC_ACQUIRE); }

/* sleep_then_sum(ms, ptr, bytes, out): sleeps, then sums the bytes at ptr into *out (host). */
static void sleep_then_sum(const sim_launch *l)
{
    usleep((useconds_t)*(int *)l->params[0] * 1000);
    const uint8_t *p = *(const uint8_t **)l->params[1];
    uint64_t sum = 0;
    for (size_t i = 0, n = *(size_t *)l->params[2]; i < n; i++)
        sum += p[i];
    **(uint64_t **)l->params[3] = sum;
}

/* cuMemFreeAsync of a swappable allocation that a kernel queued on the same stream reads
 * later: its memory stays until then, though other allocations want the device meanwhile. */
static int freed_after_its_last_use(void)
{
    static const size_t sizes[] = { sizeof(int), sizeof(void *), sizeof(size_t), sizeof(void *) };
    CUkernel k = sim_register_kernel("sleep_then_sum", sleep_then_sum, 4, sizes);
    CUstream stream;
    CUdeviceptr buf, others[8];
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAlloc(&buf, MIB));
    CU_OK(cuMemsetD8(buf, 5, MIB));
    int ms = SLOW_MS;
    size_t bytes = MIB;
    uint64_t sum = 0, *out = &sum;
    void *params[] = { &ms, &buf, &bytes, &out };
    CU_OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
    CU_OK(cuMemFreeAsync(buf, stream));
    for (int i = 0; i < 8; i++) { /* 16 MiB of handles: the device's all */
        CU_OK(cuMemAlloc(&others[i], MIB));
        CU_OK(cuMemsetD8(others[i], 9, MIB));
    }
    CU_OK(cuStreamSynchronize(stream));
    for (int i = 0; i < 8; i++)
        CU_OK(cuMemFree(others[i]));
    CU_OK(cuStreamDestroy(stream));
    return sum == 5 * MIB;
}

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0",
                                       "LMS_SIM_CAPACITY_MB=16", NULL };
    lms_test_with_env(argv, env);
    plan(6);
    lms_test_context();

    CUdeviceptr big, small;
    CU_OK(cuMemAlloc(&big, MIB));
    CU_OK(launch_slow());
    CU_OK(cuMemFree(big));
    ok(flag_set(), "cuMemFree of a swappable allocation waits for the whole device, as the driver's does");

    CU_OK(cuMemAlloc(&small, 1024));
    CU_OK(launch_slow());
    CU_OK(cuMemFree(small));
    ok(flag_set(), "so does cuMemFree of a small one");

    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU_OK(cuMemAllocAsync(&small, 1024, stream));
    size_t used = sim_device_used(0);
    CU_OK(launch_slow());
    CU_OK(cuMemFreeAsync(small, stream));
    ok(!flag_set(), "cuMemFreeAsync of a small allocation waits for no other stream (the slow kernel on "
                    "another has not ended when it returns)");
    CU_OK(cuStreamSynchronize(stream));
    ok(sim_device_used(0) < used, "and its memory is freed in its stream's order");
    CU_OK(cuCtxSynchronize());
    CU_OK(cuStreamDestroy(stream));

    /* The wait for the device fails once: the allocation is freed all the same, so the
     * program must hear of success, and the wait still happens. */
    CU_OK(cuMemAlloc(&big, MIB));
    CU_OK(launch_slow());
    sim_fail_call("cuCtxSynchronize", 1, CUDA_ERROR_UNKNOWN);
    CUresult freed = cuMemFree(big);
    sim_clear_faults();
    ok(freed == CUDA_SUCCESS && flag_set(),
       "cuMemFree of a swappable allocation whose wait fails once: freed, waited, success (result %d)", freed);
    ok(freed_after_its_last_use(), "cuMemFreeAsync of a swappable allocation keeps it for the kernel queued before");
    return exit_status();
}
