/* A kernel reaches the whole span its cost function gives each pointer (sim_module.h's
 * extent), and the simulator checks all of it when the kernel's turn comes, as the GPU faults
 * on any address it touches. liblms maps a large allocation as several handles in one
 * reservation, and a kernel names only its start: a handle past the first, unmapped while the
 * kernel was queued (cuMemUnmap is not ordered against queued work), must fault too, with a
 * sticky ILLEGAL_ADDRESS, in execute and in timing-only mode alike. Each case runs in a child
 * of its own, since a fault leaves its context unusable. */
#include "tests/sim_testing.h"

#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#define HANDLE ((size_t)2 << 20)

/* fill(bytes, size): sets every byte of [bytes, bytes + size) to 7. */
static void fill(const sim_launch *launch)
{
    memset(*(void **)launch->params[0], 7, *(size_t *)launch->params[1]);
}

static void fill_cost(const sim_launch *launch, sim_kernel_cost *cost)
{
    double size = (double)*(size_t *)launch->params[1];
    memset(cost, 0, sizeof *cost);
    cost->bytes[0] = cost->written[0] = size;
    cost->extent[0] = size;
}

/* The same kernel, its cost function giving no extent; it prices the bytes twice over (a
 * read and a write of each), as an in-place kernel's does. */
static void fill_cost_without_extent(const sim_launch *launch, sim_kernel_cost *cost)
{
    fill_cost(launch, cost);
    cost->bytes[0] *= 2;
    cost->extent[0] = 0;
}

/* Holds its stream until the test has unmapped what it unmaps: whatever the load, the kernel
 * behind it is still queued then. */
static atomic_int go;

static void wait_for_go(void *arg)
{
    (void)arg;
    while (!atomic_load(&go))
        sleep_ms(1);
}

/* What the kernel's cost function says of its reach. */
typedef enum reach { EXTENT, NO_EXTENT, NO_COST_FUNCTION } reach;

typedef struct scenario {
    const char *mode;  /* LMS_SIM_EXECUTE */
    int unmap;         /* the handle unmapped while the kernel is queued: 0, 1; -1 none */
    reach cost;
} scenario;

/* Child exit statuses. */
enum { RAN = 10, FAULTED, FAULTED_NOT_STICKY, OTHER };

/* Two handles in one reservation, the kernel queued over both behind a host function that
 * waits for the test, one of them unmapped meanwhile. Exits RAN when the kernel ran (and, executing, filled the
 * second handle), FAULTED when it faulted and later calls fail too. */
static void run(void *arg)
{
    const scenario *sc = arg;
    setenv("LMS_SIM_EXECUTE", sc->mode, 1);
    setenv("LMS_SIM_LOG", "/dev/null", 1); /* the fault is logged */
    sim_setup(64 << 20);
    const size_t sizes[] = {sizeof(void *), sizeof(size_t)};
    CUkernel kernel = sim_register_kernel("fill", fill, 2, sizes);
    if (sc->cost != NO_COST_FUNCTION)
        sim_set_kernel_cost(kernel, sc->cost == EXTENT ? fill_cost : fill_cost_without_extent);

    CUdeviceptr va;
    CUmemGenericAllocationHandle handles[2];
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK_CU(cuMemAddressReserve(&va, 2 * HANDLE, 0, 0, 0));
    for (int h = 0; h < 2; h++) {
        CHECK_CU(cuMemCreate(&handles[h], HANDLE, &prop, 0));
        CHECK_CU(cuMemMap(va + h * HANDLE, HANDLE, 0, handles[h], 0));
    }
    CHECK_CU(cuMemSetAccess(va, 2 * HANDLE, &access, 1));
    CUstream stream;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuLaunchHostFunc(stream, wait_for_go, NULL));
    size_t size = 2 * HANDLE;
    void *params[] = {&va, &size};
    CHECK_CU(cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
    if (sc->unmap >= 0)
        CHECK_CU(cuMemUnmap(va + (CUdeviceptr)sc->unmap * HANDLE, HANDLE));
    atomic_store(&go, 1);
    CUresult synced = cuStreamSynchronize(stream);
    if (synced == CUDA_ERROR_ILLEGAL_ADDRESS) {
        CUdeviceptr later;
        _exit(cuMemAlloc_v2(&later, 4096) == CUDA_ERROR_ILLEGAL_ADDRESS ? FAULTED : FAULTED_NOT_STICKY);
    }
    unsigned char last = 0;
    if (synced != CUDA_SUCCESS || (sc->unmap != 1 && cuMemcpyDtoH_v2(&last, va + size - 1, 1) != CUDA_SUCCESS))
        _exit(OTHER);
    _exit(strcmp(sc->mode, "execute") == 0 && sc->unmap != 1 && last != 7 ? OTHER : RAN);
}

/* How a child ended, in words. */
static const char *ending(int how)
{
    static char text[64];
    switch (-how - 1) {
    case RAN: return "the kernel ran";
    case FAULTED: return "ILLEGAL_ADDRESS, sticky";
    case FAULTED_NOT_STICKY: return "ILLEGAL_ADDRESS, not sticky";
    case OTHER: return "another result";
    }
    snprintf(text, sizeof text, how > 0 ? "killed by signal %d" : "exit status %d", how > 0 ? how : -how - 1);
    return text;
}

int main(void)
{
    plan(12);
    const char *modes[] = {"execute", "timing-only"};
    for (int m = 0; m < 2; m++) {
        scenario second = {modes[m], 1, EXTENT}, first = {modes[m], 0, EXTENT}, none = {modes[m], -1, EXTENT},
                 unknown = {modes[m], -1, NO_EXTENT}, costless = {modes[m], 0, NO_COST_FUNCTION},
                 costless_mapped = {modes[m], -1, NO_COST_FUNCTION};
        int how = tap_run_in_child(run, &second);
        is_int(how, -(FAULTED + 1), "%s: a kernel over two handles, the second unmapped while it was queued: "
               "ILLEGAL_ADDRESS, sticky (%s)", modes[m], ending(how));
        how = tap_run_in_child(run, &first);
        is_int(how, -(FAULTED + 1), "%s: the first unmapped: ILLEGAL_ADDRESS, sticky (%s)", modes[m], ending(how));
        how = tap_run_in_child(run, &none);
        is_int(how, -(RAN + 1), "%s: both still mapped: it runs over all of its extent and no further (%s)",
               modes[m], ending(how));
        how = tap_run_in_child(run, &unknown);
        is_int(how, -(RAN + 1), "%s: a cost function without extents, its bytes priced twice over: "
               "no fault past the mapping (%s)", modes[m], ending(how));
        how = tap_run_in_child(run, &costless);
        is_int(how, -(FAULTED + 1), "%s: no cost function, the handle its pointer names unmapped: "
               "ILLEGAL_ADDRESS, sticky (%s)", modes[m], ending(how));
        how = tap_run_in_child(run, &costless_mapped);
        is_int(how, -(RAN + 1), "%s: no cost function, both mapped: it runs, its size not taken for a pointer (%s)",
               modes[m], ending(how));
    }
    return exit_status();
}
