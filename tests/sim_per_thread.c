/* Per-thread default streams: each thread's own, blocking with respect to the legacy stream
 * like any blocking stream, reached through CU_STREAM_PER_THREAD and the NULL handle of the
 * _ptsz/_ptds entry points; and stream ids and contexts. */
#include "sim/per_thread.h"
#include "tests/sim_int_kernels.h"
#include "tests/sim_testing.h"

#include <pthread.h>

static CUcontext ctx;

static unsigned long long id_of(CUstream stream)
{
    unsigned long long id = 0;
    CHECK_CU(cuStreamGetId(stream, &id));
    return id;
}

/* Another thread: its per-thread stream's id, and a slow kernel left running on that stream,
 * an event recorded after it. */
typedef struct elsewhere {
    unsigned long long id;
    CUdeviceptr out;
    CUevent done;
} elsewhere;

static void *other_thread(void *arg)
{
    elsewhere *e = arg;
    CHECK_CU(cuCtxSetCurrent(ctx));
    e->id = id_of(CU_STREAM_PER_THREAD);
    CHECK_CU(launch_slow_store(CU_STREAM_PER_THREAD, e->out, 3, 400));
    CHECK_CU(cuEventRecord(e->done, CU_STREAM_PER_THREAD));
    return NULL;
}

int main(void)
{
    plan(17);
    ctx = sim_setup(16 << 20);
    int_kernels_register();
    CUdeviceptr a, b, c;
    CHECK_CU(cuMemAlloc_v2(&a, sizeof(int)));
    CHECK_CU(cuMemAlloc_v2(&b, sizeof(int)));
    CHECK_CU(cuMemAlloc_v2(&c, sizeof(int)));
    CHECK_CU(cuMemsetD32_v2(a, 0, 1));
    CHECK_CU(cuMemsetD32_v2(b, 0, 1));
    CHECK_CU(cuMemsetD32_v2(c, 0, 1));
    /* The work that must not wait below is a copy from pinned memory: the copy engine runs it
     * beside a kernel, where the timing model would run a second kernel after the first. */
    int *pinned;
    CHECK_CU(cuMemHostAlloc((void **)&pinned, sizeof(int), 0));
    *pinned = 5;

    /* Ids: one per stream, the special ones included. */
    CUstream created;
    CHECK_CU(cuStreamCreate(&created, 0));
    unsigned long long legacy = id_of(NULL), per_thread = id_of(CU_STREAM_PER_THREAD);
    unsigned long long via_ptsz = 0;
    CHECK_CU(cuStreamGetId_ptsz(NULL, &via_ptsz));
    ok(legacy == id_of(CU_STREAM_LEGACY) && legacy != per_thread && per_thread != id_of(created),
       "cuStreamGetId: the legacy, per-thread and created streams have ids of their own");
    is_uint(via_ptsz, per_thread, "in a _ptsz entry point, NULL names the per-thread stream");
    is_uint(id_of(CU_STREAM_PER_THREAD), per_thread, "which stays the same for the thread");
    CUcontext of = NULL;
    CUgreenCtx green = (CUgreenCtx)&of;
    CHECK_CU(cuStreamGetCtx(CU_STREAM_PER_THREAD, &of));
    ok(of == ctx, "cuStreamGetCtx of the per-thread stream: the current context");
    of = NULL;
    CHECK_CU(cuStreamGetCtx_v2(created, &of, &green));
    ok(of == ctx && green == NULL, "cuStreamGetCtx_v2 of a created stream: its context, no green one");

    /* Another thread has its own per-thread stream: this one's work does not wait for it. */
    elsewhere other = {.out = c};
    CHECK_CU(cuEventCreate(&other.done, 0));
    pthread_t thread;
    pthread_create(&thread, NULL, other_thread, &other);
    pthread_join(thread, NULL);
    ok(other.id != per_thread && other.id != legacy, "another thread's per-thread stream is another");
    CHECK_CU(cuMemcpyHtoDAsync_v2(b, pinned, sizeof(int), CU_STREAM_PER_THREAD));
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    is_int(cuEventQuery(other.done), CUDA_ERROR_NOT_READY,
           "synchronizing this thread's per-thread stream does not wait for the other thread's");
    CHECK_CU(cuEventSynchronize(other.done));
    is_int(read_int(c), 3, "whose work still runs after its thread exited");

    /* Blocking with respect to the legacy stream, both ways. */
    CHECK_CU(launch_slow_store(CU_STREAM_LEGACY, a, 11, 200));
    CHECK_CU(launch_copy_int(CU_STREAM_PER_THREAD, b, a));
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    is_int(read_int(b), 11, "per-thread work waits for the legacy stream's queued work");
    CHECK_CU(launch_slow_store(CU_STREAM_PER_THREAD, a, 12, 200));
    CHECK_CU(launch_copy_int(NULL, b, a));
    CHECK_CU(cuStreamSynchronize(NULL));
    is_int(read_int(b), 12, "and legacy work waits for the per-thread stream's");

    /* Not with respect to other blocking streams: only the legacy stream synchronizes so. */
    CHECK_CU(launch_slow_store(created, a, 13, 400));
    CHECK_CU(cuMemcpyHtoDAsync_v2(c, pinned, sizeof(int), CU_STREAM_PER_THREAD));
    CHECK_CU(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    is_int(cuStreamQuery(created), CUDA_ERROR_NOT_READY,
           "per-thread work does not wait for another blocking stream");
    CHECK_CU(cuStreamSynchronize(created));

    /* The _ptds synchronous forms run on the per-thread stream. */
    CHECK_CU(launch_slow_store(CU_STREAM_PER_THREAD, a, 14, 200));
    int seen = 0;
    CHECK_CU(cuMemcpyDtoH_v2_ptds(&seen, a, sizeof seen));
    is_int(seen, 14, "cuMemcpyDtoH_v2_ptds runs after the per-thread stream's queued kernel");
    CHECK_CU(cuLaunchKernel_ptsz(copy_int_fn, 1, 1, 1, 1, 1, 1, 0, NULL,
                                 (void *[]){&b, &a}, NULL));
    CHECK_CU(cuStreamSynchronize_ptsz(NULL));
    is_int(read_int(b), 14, "cuLaunchKernel_ptsz and cuStreamSynchronize_ptsz on NULL");

    /* The default streams are not the program's to destroy. */
    is_int(cuStreamDestroy_v2(CU_STREAM_PER_THREAD), CUDA_ERROR_INVALID_HANDLE,
           "cuStreamDestroy(CU_STREAM_PER_THREAD): INVALID_HANDLE");
    is_int(cuStreamDestroy_v2(NULL), CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy(NULL): INVALID_HANDLE");

    /* It may capture, unlike the legacy stream; being blocking, it makes the legacy stream
     * unusable meanwhile. */
    CUstreamCaptureStatus status;
    is_int(cuStreamBeginCapture_v2(CU_STREAM_PER_THREAD, CU_STREAM_CAPTURE_MODE_RELAXED),
           CUDA_SUCCESS, "the per-thread stream may capture");
    is_int(cuStreamIsCapturing(CU_STREAM_LEGACY, &status), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
           "the legacy stream meanwhile: STREAM_CAPTURE_IMPLICIT");
    CUgraph graph;
    CHECK_CU(cuStreamEndCapture(CU_STREAM_PER_THREAD, &graph));
    CHECK_CU(cuGraphDestroy(graph));

    CHECK_CU(cuEventDestroy_v2(other.done));
    CHECK_CU(cuStreamDestroy_v2(created));
    CHECK_CU(cuMemFree_v2(a));
    CHECK_CU(cuMemFree_v2(b));
    CHECK_CU(cuMemFree_v2(c));
    return exit_status();
}
