/* Stream-ordered allocations: from the device's default pool they are managed (a large one
 * becomes swappable); from any other pool (host-located, IPC-exportable...) they are the
 * driver's. The pool checks run only where the simulator has memory pools. */
#include "tests/lms_testlib.h"

#define MIB ((size_t)1 << 20)

/* A driver entry point the simulator does not export for linking, or NULL. */
static void *entry(const char *name)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    return cuGetProcAddress(name, &fn, 12000, 0, &status) == CUDA_SUCCESS ? fn : NULL;
}

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0",
                                       "LMS_SIM_CAPACITY_MB=16", NULL };
    lms_test_with_env(argv, env);
    plan(3);
    lms_test_context();
    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    CUdeviceptr p;
    unsigned long creates = sim_calls("cuMemCreate");
    CU_OK(cuMemAllocAsync(&p, 4 * MIB, stream));
    ok(sim_calls("cuMemCreate") > creates, "cuMemAllocAsync from the default pool: swappable");
    CU_OK(cuMemFreeAsync(p, stream));

    __typeof__(cuDeviceGetDefaultMemPool) *get_default = entry("cuDeviceGetDefaultMemPool");
    __typeof__(cuMemPoolCreate) *pool_create = entry("cuMemPoolCreate");
    CUmemoryPool default_pool, host_pool;
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { CU_MEM_LOCATION_TYPE_HOST, 0 } };
    if (!get_default || get_default(&default_pool, 0) != CUDA_SUCCESS || !pool_create ||
        pool_create(&host_pool, &props) != CUDA_SUCCESS) {
        skip(2, "the simulator has no memory pools: liblms passes every pool through");
    } else {
        creates = sim_calls("cuMemCreate");
        CU_OK(cuMemAllocFromPoolAsync(&p, 4 * MIB, default_pool, stream));
        ok(sim_calls("cuMemCreate") > creates, "cuMemAllocFromPoolAsync from the default pool: swappable");
        CU_OK(cuMemFreeAsync(p, stream));
        creates = sim_calls("cuMemCreate");
        CU_OK(cuMemAllocFromPoolAsync(&p, 4 * MIB, host_pool, stream));
        ok(sim_calls("cuMemCreate") == creates, "from a host-located pool: the driver's own");
        CU_OK(cuMemFreeAsync(p, stream));
    }
    CU_OK(cuStreamSynchronize(stream));
    CU_OK(cuStreamDestroy(stream));
    return exit_status();
}
