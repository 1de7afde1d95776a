/* cuMemUnmap is not ordered against queued work (GPU-FACTS.md), in the simulator's virtual
 * time too: work the timeline still has running when its memory is unmapped, or loses its
 * access, faults as on the GPU, even where the stream's worker thread finished it long
 * before in real time. A program must wait for the work (an event) first; one that does
 * gets no fault.
 *
 * Each case runs in a context of its own, as a fault leaves its context unusable. The host
 * sleeps in real time before it unmaps, so that the worker threads have done the work by
 * then and only virtual time tells that the device is still busy. */
#include "tests/sim_testing.h"

#include <stdatomic.h>

enum { BYTES = 256 << 20 }; /* a copy of it takes the simulated H100 4.9 ms */

typedef struct mapping {
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
} mapping;

static const CUmemAccessDesc READ_WRITE = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
static void *pinned;
static CUfunction reader;

static mapping map_device_memory(void)
{
    mapping m;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CHECK_CU(cuMemAddressReserve(&m.va, BYTES, 0, 0, 0));
    CHECK_CU(cuMemCreate(&m.handle, BYTES, &prop, 0));
    CHECK_CU(cuMemMap(m.va, BYTES, 0, m.handle, 0));
    CHECK_CU(cuMemSetAccess(m.va, BYTES, &READ_WRITE, 1));
    return m;
}

static void unmap_and_free(mapping m, bool mapped)
{
    if (mapped)
        CHECK_CU(cuMemUnmap(m.va, BYTES));
    CHECK_CU(cuMemRelease(m.handle));
    CHECK_CU(cuMemAddressFree(m.va, BYTES));
}

/* read_all(p): reads BYTES at p, in the timing model (the simulator runs it in timing-only
 * mode: the function itself never runs). */
static void read_all(const sim_launch *launch)
{
    (void)launch;
}

static void read_all_cost(const sim_launch *launch, sim_kernel_cost *cost)
{
    (void)launch;
    cost->bytes[0] = cost->extent[0] = BYTES;
}

/* A context of its own, current, with a stream. */
static CUcontext fresh_context(CUstream *stream)
{
    CUcontext ctx;
    CHECK_CU(cuCtxCreate_v4(&ctx, NULL, 0, 0));
    CHECK_CU(cuStreamCreate(stream, CU_STREAM_NON_BLOCKING));
    return ctx;
}

static void end_context(CUcontext ctx)
{
    CHECK_CU(cuCtxDestroy(ctx));
}

static CUresult copy_into(mapping m, CUstream stream)
{
    return cuMemcpyHtoDAsync(m.va, pinned, BYTES, stream);
}

static CUresult launch_reader(mapping m, CUstream stream)
{
    void *params[] = {&m.va};
    return cuLaunchKernel(reader, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

/* Queues work on m with queue_work, lets the worker threads finish it in real time, then
 * unmaps m (or takes its access away) while virtual time says the device still runs it. */
static void unmapped_while_running(const char *what, CUresult (*queue_work)(mapping, CUstream), bool revoke)
{
    CUstream stream;
    CUcontext ctx = fresh_context(&stream);
    mapping m = map_device_memory();
    CHECK_CU(queue_work(m, stream));
    sleep_ms(50);
    if (revoke) {
        CUmemAccessDesc none = READ_WRITE;
        none.flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
        is_int(cuMemSetAccess(m.va, BYTES, &none, 1), CUDA_SUCCESS, "%s: taking the access away returns at once", what);
    } else {
        is_int(cuMemUnmap(m.va, BYTES), CUDA_SUCCESS, "%s: cuMemUnmap returns at once", what);
    }
    is_int(cuStreamSynchronize(stream), CUDA_ERROR_ILLEGAL_ADDRESS,
           "%s: the work, still running in virtual time, faults", what);
    CUdeviceptr after;
    is_int(cuMemAlloc(&after, 16), CUDA_ERROR_ILLEGAL_ADDRESS, "%s: and the error sticks to the context", what);
    end_context(ctx); /* first: every call fails while it is current */
    unmap_and_free(m, revoke);
}

/* The same, but the host waits for the work as told, by wait_for. No fault. */
static void unmapped_after_waiting(const char *what, void (*wait_for)(CUstream, CUevent))
{
    CUstream stream;
    CUcontext ctx = fresh_context(&stream);
    mapping m = map_device_memory();
    CUevent done;
    CHECK_CU(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    CHECK_CU(copy_into(m, stream));
    CHECK_CU(launch_reader(m, stream));
    CHECK_CU(cuEventRecord(done, stream));
    sleep_ms(50);
    wait_for(stream, done);
    is_int(cuMemUnmap(m.va, BYTES), CUDA_SUCCESS, "%s: cuMemUnmap", what);
    is_int(cuStreamSynchronize(stream), CUDA_SUCCESS, "%s: no fault", what);
    CUdeviceptr after;
    is_int(cuMemAlloc(&after, 16), CUDA_SUCCESS, "%s: the context works on", what);
    CHECK_CU(cuMemFree(after));
    CHECK_CU(cuEventDestroy(done));
    unmap_and_free(m, false);
    end_context(ctx);
}

static void event_synchronize(CUstream stream, CUevent done)
{
    (void)stream;
    CHECK_CU(cuEventSynchronize(done));
}

/* Polling advances the host's virtual clock by each query's cost until the work is done. */
static void event_polled(CUstream stream, CUevent done)
{
    (void)stream;
    CUresult r;
    while ((r = cuEventQuery(done)) == CUDA_ERROR_NOT_READY)
        ;
    CHECK_CU(r);
}

/* A host function queued after the work tells the host it is done: the host learns it without a
 * call to the driver, and its virtual clock may still be behind. */
static atomic_int told_done;

static void tell_done(void *unused)
{
    (void)unused;
    atomic_store(&told_done, 1);
}

static void host_function_told(CUstream stream, CUevent done)
{
    (void)done;
    atomic_store(&told_done, 0);
    CHECK_CU(cuLaunchHostFunc(stream, tell_done, NULL));
    while (!atomic_load(&told_done))
        sleep_ms(1);
}

/* The copy-out stream of a swapping library: another stream waits for the event, and the host
 * waits for that stream. */
static void stream_ordered(CUstream stream, CUevent done)
{
    (void)stream;
    CUstream other;
    CHECK_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamWaitEvent(other, done, 0));
    CHECK_CU(cuStreamSynchronize(other));
    CHECK_CU(cuStreamDestroy(other));
}

/* Unmapping memory that no running work uses faults nothing, while other work runs. */
static void unrelated_memory(void)
{
    CUstream stream;
    CUcontext ctx = fresh_context(&stream);
    mapping busy = map_device_memory(), idle = map_device_memory();
    CHECK_CU(copy_into(busy, stream));
    CHECK_CU(launch_reader(busy, stream));
    sleep_ms(50);
    is_int(cuMemUnmap(idle.va, BYTES), CUDA_SUCCESS, "other memory: cuMemUnmap");
    is_int(cuStreamSynchronize(stream), CUDA_SUCCESS, "other memory: the running work does not fault");
    unmap_and_free(idle, false);
    unmap_and_free(busy, true);
    end_context(ctx);
}

static void sleep_a_while(void *unused)
{
    (void)unused;
    sleep_ms(100);
}

/* cuMemFreeHost, which waits for the device first, returns the fault of work that faults
 * meanwhile, and does nothing, as cuMemFree does: the memory stays allocated. */
static void free_host_while_work_faults(void)
{
    void *host; /* the primary context's: it outlives the faulted one */
    CHECK_CU(cuMemHostAlloc(&host, 4096, 0));
    CUstream stream;
    CUcontext ctx = fresh_context(&stream);
    mapping m = map_device_memory();
    CHECK_CU(cuLaunchHostFunc(stream, sleep_a_while, NULL)); /* the memset runs after the unmap */
    CHECK_CU(cuMemsetD8Async(m.va, 1, BYTES, stream));
    CHECK_CU(cuMemUnmap(m.va, BYTES));
    is_int(cuMemFreeHost(host), CUDA_ERROR_ILLEGAL_ADDRESS, "cuMemFreeHost returns the fault of the work it waited for");
    end_context(ctx);
    is_int(cuMemFreeHost(host), CUDA_SUCCESS, "and did nothing: the memory is freed only now");
    unmap_and_free(m, false);
}

int main(void)
{
    plan(25);
    sim_set_execution(SIM_TIMING_ONLY);
    sim_setup(2u << 30);
    CHECK_CU(cuMemHostAlloc(&pinned, BYTES, 0));
    const size_t sizes[] = {sizeof(CUdeviceptr)};
    reader = (CUfunction)sim_register_kernel("read_all", read_all, 1, sizes);
    sim_set_kernel_cost(reader, read_all_cost);

    unmapped_while_running("a copy", copy_into, false);
    unmapped_while_running("a kernel", launch_reader, false);
    unmapped_while_running("a copy, its access taken away", copy_into, true);
    unmapped_after_waiting("cuEventSynchronize first", event_synchronize);
    unmapped_after_waiting("cuEventQuery polled first", event_polled);
    unmapped_after_waiting("a stream waiting for the event first", stream_ordered);
    unmapped_after_waiting("a host function queued after it has run", host_function_told);
    unrelated_memory();
    free_host_while_work_faults();

    CHECK_CU(cuMemFreeHost(pinned));
    return exit_status();
}
