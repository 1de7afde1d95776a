/* The simulator's streams and events run work asynchronously and in order. */
#include "tests/sim_int_kernels.h"
#include "tests/sim_testing.h"

#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

static pthread_mutex_t flag_lock = PTHREAD_MUTEX_INITIALIZER;
static bool flag;

static void set_flag(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&flag_lock);
    flag = true;
    pthread_mutex_unlock(&flag_lock);
}

static bool flag_is_set(void)
{
    pthread_mutex_lock(&flag_lock);
    bool set = flag;
    pthread_mutex_unlock(&flag_lock);
    return set;
}

/* store_into(out, delay_ms): says it has started, sleeps, then writes 1 to *out, which the host
 * unmaps meanwhile. Its write is meant to fault, racing the unmap: that race is what the test
 * is about, so ThreadSanitizer does not watch this kernel. */
static atomic_int store_started, store_go;

__attribute__((no_sanitize("thread"))) static void store_into(const sim_launch *launch)
{
    int *out = *(int **)launch->params[0];
    atomic_store(&store_started, 1);
    sleep_ms(*(int *)launch->params[1]);
    *out = 1;
}

static void wait_for_store_go(void *unused)
{
    (void)unused;
    while (!atomic_load(&store_go))
        sleep_ms(1);
}

enum { FAULTED = 7 };

/* In a child: a kernel on mapped memory that is unmapped before it runs (queued: behind a host
 * function that waits for the unmap), or while it runs. Queued, it faults when its turn comes,
 * as on the GPU: exit status FAULTED. Running, its store dies of SIGSEGV: a fault in the
 * middle of a kernel, which the simulator cannot turn into an error code. */
static void unmap_under_kernel(void *arg)
{
    bool queued = *(const bool *)arg;
    sim_setup(64 << 20);
    const size_t sizes[] = {sizeof(int *), sizeof(int)};
    CUfunction store = (CUfunction)sim_register_kernel("store_into", store_into, 2, sizes);
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUstream stream;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuMemAddressReserve(&va, 2 << 20, 0, 0, 0));
    CHECK_CU(cuMemCreate(&handle, 2 << 20, &prop, 0));
    CHECK_CU(cuMemMap(va, 2 << 20, 0, handle, 0));
    CHECK_CU(cuMemSetAccess(va, 2 << 20, &access, 1));
    if (queued)
        CHECK_CU(cuLaunchHostFunc(stream, wait_for_store_go, NULL));
    int delay_ms = 200;
    void *params[] = {&va, &delay_ms};
    CHECK_CU(cuLaunchKernel(store, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
    while (!queued && !atomic_load(&store_started))
        sleep_ms(1);
    if (cuMemUnmap(va, 2 << 20) != CUDA_SUCCESS) /* not ordered against the kernel */
        _exit(3);
    atomic_store(&store_go, 1);
    CUdeviceptr later;
    _exit(cuStreamSynchronize(stream) == CUDA_ERROR_ILLEGAL_ADDRESS &&
                  cuMemAlloc_v2(&later, 16) == CUDA_ERROR_ILLEGAL_ADDRESS
              ? FAULTED
              : 0);
}

int main(void)
{
    plan(33);

    /* First, while this process has no threads: a TSan child must not inherit any. */
    bool queued = true, running = false;
    is_int(tap_run_in_child(unmap_under_kernel, &queued), -(FAULTED + 1),
           "a kernel queued on memory unmapped before it runs: ILLEGAL_ADDRESS, sticky");
    is_int(tap_run_in_child(unmap_under_kernel, &running), SIGSEGV,
           "a kernel running on memory unmapped under it dies of SIGSEGV");

    setenv("LMS_SIM_LOG", "/dev/null", 1); /* the fault at the end is logged */
    sim_setup(64 << 20);
    int_kernels_register();
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc_v2(&a, sizeof(int)));
    CHECK_CU(cuMemAlloc_v2(&b, sizeof(int)));
    CHECK_CU(cuMemsetD32_v2(a, 0, 1));
    CHECK_CU(cuMemsetD32_v2(b, 0, 1));

    /* Asynchrony: a slow kernel is still running when the queries come. */
    CUstream s1, s2;
    CUevent done;
    CHECK_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuEventCreate(&done, 0));
    is_int(cuEventQuery(done), CUDA_SUCCESS, "an event never recorded is complete");
    CHECK_CU(launch_slow_store(s1, a, 42, 300));
    CHECK_CU(cuEventRecord(done, s1));
    is_int(cuStreamQuery(s1), CUDA_ERROR_NOT_READY, "cuStreamQuery: NOT_READY while a kernel runs");
    is_int(cuEventQuery(done), CUDA_ERROR_NOT_READY, "cuEventQuery: NOT_READY behind the kernel");
    is_int(cuStreamQuery(s2), CUDA_SUCCESS, "another, idle stream is ready");
    is_int(cuEventSynchronize(done), CUDA_SUCCESS, "cuEventSynchronize waits");
    is_int(cuEventQuery(done), CUDA_SUCCESS, "the event is then complete");
    is_int(cuStreamQuery(s1), CUDA_SUCCESS, "and the stream is idle");
    is_int(read_int(a), 42, "the kernel's store is visible");

    /* Events order work across streams. */
    CHECK_CU(launch_slow_store(s1, a, 7, 200));
    CHECK_CU(cuEventRecord(done, s1));
    CHECK_CU(cuStreamWaitEvent(s2, done, 0));
    CHECK_CU(launch_copy_int(s2, b, a));
    CHECK_CU(cuStreamSynchronize(s2));
    is_int(read_int(b), 7, "a kernel after cuStreamWaitEvent sees the other stream's store");

    CUevent never;
    CHECK_CU(cuEventCreate(&never, 0));
    is_int(cuStreamWaitEvent(s2, never, 0), CUDA_SUCCESS,
           "waiting for an event never recorded is a no-op");

    /* Elapsed time between two executed records. */
    CUevent start, untimed;
    float ms = 0;
    CHECK_CU(cuEventCreate(&start, 0));
    CHECK_CU(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
    CHECK_CU(cuEventRecord(start, s1));
    CHECK_CU(launch_slow_store(s1, a, 1, 100));
    CHECK_CU(cuEventRecord(done, s1));
    CHECK_CU(cuEventRecord(untimed, s1));
    is_int(cuEventElapsedTime_v2(&ms, start, done), CUDA_ERROR_NOT_READY,
           "elapsed time of an unfinished event: NOT_READY");
    CHECK_CU(cuEventSynchronize(done));
    is_int(cuEventElapsedTime_v2(&ms, start, done), CUDA_SUCCESS, "elapsed time once both ran");
    ok(ms >= 100 && ms < 100.1, "elapsed time is virtual: the 100 ms kernel as its cost function "
       "prices it (%.4f ms)", (double)ms);
    /* Virtual time answers it as it answers cuEventQuery: an event the host's clock has not
     * reached is not complete, however far the worker threads have got, so that a program
     * polling either sees the same answers on every run. */
    CHECK_CU(cuEventRecord(start, s1));
    CHECK_CU(launch_slow_store(s1, a, 2, 20));
    CHECK_CU(cuEventRecord(done, s1));
    sleep_ms(200); /* the worker's real run is long over */
    is_int(cuEventQuery(done), CUDA_ERROR_NOT_READY, "cuEventQuery: NOT_READY before the host's clock reaches it");
    is_int(cuEventElapsedTime_v2(&ms, start, done), CUDA_ERROR_NOT_READY,
           "cuEventElapsedTime: NOT_READY too, though the worker has run it");
    CHECK_CU(cuEventSynchronize(done));
    is_int(cuEventElapsedTime_v2(&ms, start, never), CUDA_ERROR_INVALID_HANDLE,
           "elapsed time to an event never recorded: INVALID_HANDLE");
    is_int(cuEventElapsedTime_v2(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE,
           "elapsed time to a DISABLE_TIMING event: INVALID_HANDLE");

    /* The legacy NULL stream waits for blocking streams, and they wait for it. */
    CUstream blocking;
    CHECK_CU(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CHECK_CU(launch_slow_store(blocking, a, 11, 200));
    is_int(read_int(a), 11, "a synchronous copy runs after a blocking stream's queued kernel");
    CHECK_CU(launch_slow_store(NULL, a, 12, 200));
    CHECK_CU(launch_copy_int(blocking, b, a));
    CHECK_CU(cuStreamSynchronize(blocking));
    is_int(read_int(b), 12, "a blocking stream's kernel runs after the NULL stream's kernel");

    /* Other ways to name streams and record events. */
    CUstream prioritized;
    CHECK_CU(cuStreamCreateWithPriority(&prioritized, CU_STREAM_NON_BLOCKING, -1));
    CHECK_CU(launch_slow_store(prioritized, a, 21, 50));
    CHECK_CU(cuEventRecordWithFlags(done, prioritized, CU_EVENT_RECORD_DEFAULT));
    CHECK_CU(cuStreamWaitEvent(CU_STREAM_PER_THREAD, done, 0));
    CHECK_CU(launch_copy_int(CU_STREAM_PER_THREAD, b, a));
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    is_int(read_int(b), 21, "cuStreamCreateWithPriority, cuEventRecordWithFlags, CU_STREAM_PER_THREAD");
    CHECK_CU(cuStreamDestroy_v2(prioritized));

    /* cuCtxSynchronize covers every stream. */
    CHECK_CU(launch_slow_store(s1, a, 5, 100));
    CHECK_CU(launch_copy_int(s1, b, a));
    CHECK_CU(cuCtxSynchronize());
    is_int(read_int(b), 5, "cuCtxSynchronize waits for every stream");

    /* Stream-ordered free gives the memory back when its turn comes. */
    CUdeviceptr scratch;
    CHECK_CU(cuMemAllocAsync(&scratch, 1 << 20, s1));
    size_t used = sim_device_used(0);
    CHECK_CU(launch_slow_store(s1, scratch, 1, 200));
    CHECK_CU(cuMemFreeAsync(scratch, s1));
    is_uint(sim_device_used(0), used,
            "cuMemFreeAsync behind a running kernel: still in use");
    CHECK_CU(cuStreamSynchronize(s1));
    is_uint(sim_device_used(0), used - (1 << 20), "and freed once the stream got there");

    /* Destroying a stream returns at once, and lets its queued work finish. */
    CUstream doomed;
    CHECK_CU(cuStreamCreate(&doomed, 0));
    CHECK_CU(launch_slow_store(doomed, a, 99, 300));
    CHECK_CU(cuLaunchHostFunc(doomed, set_flag, NULL));
    is_int(cuStreamDestroy_v2(doomed), CUDA_SUCCESS, "cuStreamDestroy with queued work");
    ok(!flag_is_set(), "returns at once, before the work ran");
    CHECK_CU(cuCtxSynchronize());
    ok(flag_is_set(), "cuCtxSynchronize still waits for a destroyed stream's work");
    is_int(read_int(a), 99, "the queued work ran");
    is_int(cuStreamQuery(doomed), CUDA_ERROR_INVALID_HANDLE,
           "a destroyed stream is an invalid handle");

    CHECK_CU(cuEventDestroy_v2(done));
    CHECK_CU(cuEventDestroy_v2(never));
    CHECK_CU(cuEventDestroy_v2(start));
    CHECK_CU(cuEventDestroy_v2(untimed));
    CHECK_CU(cuStreamDestroy_v2(s2));
    CHECK_CU(cuStreamDestroy_v2(blocking));

    /* Last, as it leaves the context unusable: a queued memset whose memory is unmapped before
     * it runs faults with a sticky ILLEGAL_ADDRESS, as on the real GPU. */
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK_CU(cuMemAddressReserve(&va, 2 << 20, 0, 0, 0));
    CHECK_CU(cuMemCreate(&handle, 2 << 20, &prop, 0));
    CHECK_CU(cuMemMap(va, 2 << 20, 0, handle, 0));
    CHECK_CU(cuMemSetAccess(va, 2 << 20, &access, 1));
    CHECK_CU(launch_slow_store(s1, a, 1, 200));
    CHECK_CU(cuMemsetD8Async(va, 1, 2 << 20, s1));
    is_int(cuMemUnmap(va, 2 << 20), CUDA_SUCCESS, "cuMemUnmap does not wait for queued work");
    is_int(cuStreamSynchronize(s1), CUDA_ERROR_ILLEGAL_ADDRESS,
           "the memset then faults: ILLEGAL_ADDRESS");
    CUdeviceptr after;
    is_int(cuMemAlloc_v2(&after, 16), CUDA_ERROR_ILLEGAL_ADDRESS,
           "and the error is sticky: later calls fail too");
    return exit_status();
}
