/* hook_cost: real CPU nanoseconds per driver call on this machine, for `make bench-sim`.
 *
 * It reaches the driver as cudart does (dlopen("libcuda.so.1"), cuGetProcAddress_v2), so that
 * under LD_PRELOAD=liblms.so it gets liblms's wrappers and without it the driver's own
 * entry points: the difference of two runs is what liblms's hooks cost per call. It runs on
 * the simulated GPU in timing-only mode (the simulator's own cost per call is the same in
 * both runs), with a kernel registered through the simulator's control API. Prints one JSON
 * object: nanoseconds per launch, per async copy of 4 KiB, per allocation and free of
 * 64 KiB (below liblms's threshold) and of 4 MiB (above it). */
#include "sim/sim.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static CUresult (*get_proc)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static void *entry(const char *name)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult found;
    if (get_proc(name, &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS || !fn) {
        fprintf(stderr, "hook_cost: no %s in the driver\n", name);
        exit(1);
    }
    return fn;
}

static void check(CUresult result, const char *what)
{
    if (result != CUDA_SUCCESS) {
        fprintf(stderr, "hook_cost: %s failed with %d\n", what, (int)result);
        exit(1);
    }
}

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void nothing(const sim_launch *launch)
{
    (void)launch;
}

int main(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (!cuda || !(get_proc = (__typeof__(get_proc))dlsym(cuda, "cuGetProcAddress_v2"))) {
        fprintf(stderr, "hook_cost: cannot load the driver: %s\n", dlerror());
        return 1;
    }
    __typeof__(sim_register_kernel) *register_kernel = (__typeof__(register_kernel))dlsym(cuda, "sim_register_kernel");
    if (!register_kernel) {
        fprintf(stderr, "hook_cost: libcuda.so.1 is not the simulated GPU\n");
        return 1;
    }
    __typeof__(cuInit) *init = entry("cuInit");
    __typeof__(cuDevicePrimaryCtxRetain) *retain = entry("cuDevicePrimaryCtxRetain");
    __typeof__(cuCtxSetCurrent) *set_current = entry("cuCtxSetCurrent");
    __typeof__(cuStreamCreate) *stream_create = entry("cuStreamCreate");
    __typeof__(cuStreamSynchronize) *synchronize = entry("cuStreamSynchronize");
    __typeof__(cuLaunchKernel) *launch = entry("cuLaunchKernel");
    __typeof__(cuMemcpyHtoDAsync_v2) *copy = entry("cuMemcpyHtoDAsync");
    __typeof__(cuMemAlloc_v2) *alloc = entry("cuMemAlloc");
    __typeof__(cuMemFree_v2) *release = entry("cuMemFree");
    __typeof__(cuMemHostAlloc) *host_alloc = entry("cuMemHostAlloc");

    check(init(0), "cuInit");
    CUcontext ctx;
    check(retain(&ctx, 0), "cuDevicePrimaryCtxRetain");
    check(set_current(ctx), "cuCtxSetCurrent");
    CUstream stream;
    check(stream_create(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    size_t sizes[] = {sizeof(CUdeviceptr)};
    CUfunction kernel = (CUfunction)register_kernel("nothing", nothing, 1, sizes);
    CUdeviceptr buffer;
    check(alloc(&buffer, 4 << 20), "cuMemAlloc");
    void *pinned;
    check(host_alloc(&pinned, 4096, 0), "cuMemHostAlloc");

    enum { LAUNCHES = 20000, COPIES = 20000, ALLOCS = 2000 };
    void *params[] = {&buffer};
    double t0 = now_ns();
    for (int i = 0; i < LAUNCHES; i++)
        check(launch(kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL), "cuLaunchKernel");
    double t1 = now_ns();
    check(synchronize(stream), "cuStreamSynchronize");
    double t2 = now_ns();
    for (int i = 0; i < COPIES; i++)
        check(copy(buffer, pinned, 4096, stream), "cuMemcpyHtoDAsync");
    double t3 = now_ns();
    check(synchronize(stream), "cuStreamSynchronize");
    double per_alloc[2];
    size_t alloc_sizes[2] = {64 << 10, 4 << 20};
    for (int s = 0; s < 2; s++) {
        double start = now_ns();
        for (int i = 0; i < ALLOCS; i++) {
            CUdeviceptr p;
            check(alloc(&p, alloc_sizes[s]), "cuMemAlloc");
            check(release(p), "cuMemFree");
        }
        per_alloc[s] = (now_ns() - start) / ALLOCS;
    }
    printf("{\"launch_ns\": %.0f, \"copy_ns\": %.0f, \"alloc_free_64k_ns\": %.0f, \"alloc_free_4m_ns\": %.0f}\n",
           (t1 - t0) / LAUNCHES, (t3 - t2) / COPIES, per_alloc[0], per_alloc[1]);
    return 0;
}
