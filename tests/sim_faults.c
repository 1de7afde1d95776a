/* Fault injection, call counters and the log of unsupported calls. */
#include "tests/sim_testing.h"
#include "sim/per_thread.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define GRAIN ((size_t)2 << 20)

/* The child: five allocations; exits with the number (from 1) of the first that failed, 0
 * when none did, or cuInit's error. */
static int allocations_child(void)
{
    CUresult r = cuInit(0);
    if (r != CUDA_SUCCESS)
        return (int)r;
    CUcontext ctx;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK_CU(cuCtxSetCurrent(ctx));
    int failed = 0;
    for (int i = 1; i <= 5; i++) {
        CUdeviceptr p;
        if (cuMemAlloc_v2(&p, 4096) != CUDA_SUCCESS)
            failed = failed ? failed : i;
    }
    return failed;
}

/* Runs allocations_child with the variables set; returns its exit status. */
static int run_child(const char *fail, const char *calls)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        putenv((char *)fail);
        if (calls)
            putenv((char *)calls);
        execl("/proc/self/exe", "sim_faults", "allocations", (char *)NULL);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "allocations"))
        return allocations_child();
    plan(32);
    char log[] = "/tmp/sim_faults_log.XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0)
        bail_out("mkstemp failed");
    close(fd);
    setenv("LMS_SIM_LOG", log, 1); /* read when the first line is logged */
    sim_setup(16 * GRAIN);

    /* Call counters, by base name. */
    unsigned long allocs = sim_calls("cuMemAlloc");
    CUdeviceptr p, q;
    CHECK_CU(cuMemAlloc_v2(&p, 4096));
    CHECK_CU(cuMemAlloc_v2(&q, 4096));
    is_uint(sim_calls("cuMemAlloc"), allocs + 2,
            "sim_calls counts cuMemAlloc_v2 calls");
    is_uint(sim_calls("cuMemAlloc_v2"), allocs + 2, "under either name");
    unsigned long htod = sim_calls("cuMemcpyHtoD");
    int value = 5;
    CHECK_CU(cuMemcpyHtoD_v2(p, &value, sizeof value));
    CHECK_CU(cuMemcpyHtoD_v2_ptds(q, &value, sizeof value));
    is_uint(sim_calls("cuMemcpyHtoD_v2_ptds"), htod + 2,
            "a per-thread variant counts with its base entry point");
    is_uint(sim_calls("cuNeverCalled"), 0, "an entry point never called: 0");

    /* The nth call from now fails, and does nothing. */
    CUmemGenericAllocationHandle h1, h2, h3;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    size_t used = sim_device_used(0);
    sim_fail_call("cuMemCreate", 2, CUDA_ERROR_OUT_OF_MEMORY);
    is_int(cuMemCreate(&h1, GRAIN, &prop, 0), CUDA_SUCCESS,
           "fail_call(cuMemCreate, 2): the 1st call works");
    is_int(cuMemCreate(&h2, GRAIN, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY,
           "the 2nd returns the injected result");
    is_uint(sim_device_used(0), used + GRAIN, "and allocated nothing");
    is_int(cuMemCreate(&h3, GRAIN, &prop, 0), CUDA_SUCCESS, "the 3rd works again");
    CHECK_CU(cuMemRelease(h1));
    CHECK_CU(cuMemRelease(h3));

    sim_fail_call("cuMemAlloc_v2", 1, CUDA_ERROR_UNKNOWN);
    CUdeviceptr r;
    is_int(cuMemAlloc_v2(&r, 4096), CUDA_ERROR_UNKNOWN, "a fault named with its versioned name");
    sim_fail_call("cuLaunchKernel", 1, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
    sim_fail_call("cuLaunchKernel", 2, CUDA_ERROR_INVALID_VALUE);
    CUfunction nothing = (CUfunction)&r; /* never reached: the fault comes first */
    is_int(cuLaunchKernel_ptsz(nothing, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
           CUDA_ERROR_INVALID_HANDLE,
           "a later fault for an entry replaces the pending one: the 1st call runs normally");
    is_int(cuLaunchKernel(nothing, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
           CUDA_ERROR_INVALID_VALUE, "the 2nd call is");
    sim_fail_call("cuMemFree", 1, CUDA_ERROR_INVALID_VALUE);
    sim_clear_faults();
    is_int(cuMemFree_v2(q), CUDA_SUCCESS, "sim_clear_faults drops pending faults");

    /* Counters of bytes. */
    size_t copied = sim_bytes_copied();
    CHECK_CU(cuMemcpyDtoD_v2(q, p, 0));
    CHECK_CU(cuMemcpyDtoD_v2(p + 100, p, 1000));
    is_uint(sim_bytes_copied(), copied + 1000, "bytes_copied adds each copy's size");
    CUdeviceptr va;
    CHECK_CU(cuMemAddressReserve(&va, 4 * GRAIN, 0, 0, 0));
    CHECK_CU(cuMemCreate(&h1, GRAIN, &prop, 0));
    CHECK_CU(cuMemMap(va, GRAIN, 0, h1, 0));
    CHECK_CU(cuMemMap(va + 2 * GRAIN, GRAIN, 0, h1, 0));
    is_uint(sim_bytes_mapped(), 2 * GRAIN, "bytes_mapped while mapped twice");
    CHECK_CU(cuMemUnmap(va, GRAIN));
    is_uint(sim_bytes_mapped(), GRAIN, "and after one unmap");
    CHECK_CU(cuMemUnmap(va + 2 * GRAIN, GRAIN));
    CHECK_CU(cuMemRelease(h1));
    CHECK_CU(cuMemAddressFree(va, 4 * GRAIN));

    /* Unsupported entry points: logged, counted, answered NOT_SUPPORTED. */
    unsigned long unsupported = sim_unsupported_calls();
    CUresult (*pool_create)(CUmemoryPool *, const CUmemPoolProps *) = NULL;
    CUdriverProcAddressQueryResult status;
    CHECK_CU(cuGetProcAddress_v2("cuMemPoolCreate", (void **)&pool_create, 13000, 0, &status));
    CUmemoryPool pool;
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    is_int(pool_create(&pool, &props), CUDA_ERROR_NOT_SUPPORTED,
           "cuMemPoolCreate (not implemented) answers NOT_SUPPORTED");
    is_uint(sim_unsupported_calls(), unsupported + 1,
            "sim_unsupported_calls counts it");
    ok(file_mentions(log, "cuMemPoolCreate"), "and LMS_SIM_LOG has a line naming it");
    is_int(cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX_PITCH, 0), CUDA_ERROR_NOT_SUPPORTED,
           "an attribute the simulator does not model: NOT_SUPPORTED");
    ok(file_mentions(log, "attribute"), "logged too");

    CUDA_MEMCPY2D from_array = {.srcMemoryType = CU_MEMORYTYPE_ARRAY,
                                .srcPitch = 64,
                                .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                                .dstDevice = p,
                                .dstPitch = 64,
                                .WidthInBytes = 16,
                                .Height = 1};
    is_int(cuMemcpy2D_v2(&from_array), CUDA_ERROR_NOT_SUPPORTED,
           "a 2D copy from a CUDA array: NOT_SUPPORTED");
    ok(file_mentions(log, "CUDA array"), "and logged");

    CHECK_CU(cuMemFree_v2(p));

    /* An injected sticky error poisons the context, as a real fault does, until a reset. */
    sim_fail_call("cuMemAlloc", 1, CUDA_ERROR_ILLEGAL_ADDRESS);
    is_int(cuMemAlloc_v2(&r, 4096), CUDA_ERROR_ILLEGAL_ADDRESS, "an injected ILLEGAL_ADDRESS is returned");
    size_t free_bytes, total_bytes;
    is_int(cuMemGetInfo_v2(&free_bytes, &total_bytes), CUDA_ERROR_ILLEGAL_ADDRESS, "and sticks: a later call of another entry fails too");
    CHECK_CU(cuDevicePrimaryCtxReset_v2(0));
    CUcontext ctx;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK_CU(cuCtxSetCurrent(ctx));
    is_int(cuMemAlloc_v2(&r, 4096), CUDA_SUCCESS, "until the context is reset");
    CHECK_CU(cuMemFree_v2(r));

    /* From the environment: the nth call since the process started; the counts at exit. */
    char calls[] = "/tmp/sim_faults_calls.XXXXXX";
    if ((fd = mkstemp(calls)) < 0)
        bail_out("mkstemp failed");
    close(fd);
    char env_calls[64];
    snprintf(env_calls, sizeof env_calls, "LMS_SIM_CALLS=%s", calls);
    static const char *const bad[] = { "LMS_SIM_FAIL=cuMemAlloc:0:UNKNOWN", "LMS_SIM_FAIL=cuMemAlloc:1:NO_SUCH",
                                       "LMS_SIM_FAIL=cuMemAlloc:1" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        is_int(run_child(bad[i], NULL), CUDA_ERROR_INVALID_VALUE, "%s: cuInit refuses it", bad[i]);
    ok(file_mentions(log, "LMS_SIM_FAIL"), "with a log line naming the variable");
    is_int(run_child("LMS_SIM_FAIL=cuMemAlloc_v2:3:OUT_OF_MEMORY", env_calls), 3,
           "LMS_SIM_FAIL=cuMemAlloc_v2:3:OUT_OF_MEMORY: the 3rd allocation of the process fails");
    is_int(run_child("LMS_SIM_FAIL=cuMemAlloc:2:CUDA_ERROR_UNKNOWN", NULL), 2,
           "the full CUDA_ERROR_ name works too");
    ok(file_mentions(calls, "cuMemAlloc 5") && file_mentions(calls, "cuInit 1"),
       "LMS_SIM_CALLS writes each entry point's calls at exit");

    unlink(log);
    unlink(calls);
    return exit_status();
}
