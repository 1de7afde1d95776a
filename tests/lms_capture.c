/* Stream capture under liblms: what liblms does while a program captures must not invalidate
 * the capture (torch.cuda.graph captures in global mode, allocating as it goes, while other
 * threads work), and a swappable allocation freed inside a capture lives as long as the graph
 * that frees it may still use it. Runs without host-located VMM: an evicted or released buffer
 * is unmapped, and a kernel reaching one crashes. */
#include "tests/lms_testlib.h"

#include <pthread.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define BUFS 12 /* 24 MiB of handles on a 16 MiB device */

static CUcontext ctx;
static CUdeviceptr buf[BUFS];
static CUstream stream;

static void setup(void)
{
    ctx = lms_test_context();
    lms_test_alloc_buffers(buf, BUFS, MIB, 10);
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
}

static int holds(CUdeviceptr p, unsigned char value)
{
    static unsigned char host[MIB];
    return cuMemcpyDtoH(host, p, MIB) == CUDA_SUCCESS && host[0] == value && host[MIB - 1] == value;
}

/* Another thread, in thread-local capture mode (as a data loader's would be), frees a
 * swappable buffer while the main thread captures in global mode. */
static void *free_elsewhere(void *p)
{
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    CU_OK(cuCtxSetCurrent(ctx));
    CU_OK(cuThreadExchangeStreamCaptureMode(&mode));
    return (void *)(intptr_t)cuMemFree(*(CUdeviceptr *)p);
}

/* torch.cuda.graph's pattern under memory pressure: in global mode, the captured kernels use
 * evicted buffers (restored during the capture), the capture allocates more than fits (evicting
 * as it goes), and another thread frees. */
static int global_capture(void)
{
    setup();
    EXPECT(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    for (int i = 0; i < 4; i++)
        EXPECT(lms_test_launch(lms_test_add_kernel(), stream, buf[i], MIB, 1) == CUDA_SUCCESS);
    CUdeviceptr fresh[4];
    for (int i = 0; i < 4; i++)
        EXPECT(cuMemAlloc(&fresh[i], MIB) == CUDA_SUCCESS);
    size_t free_bytes, total;
    EXPECT(cuMemGetInfo(&free_bytes, &total) == CUDA_SUCCESS);
    pthread_t t;
    void *freed;
    EXPECT(pthread_create(&t, NULL, free_elsewhere, &buf[BUFS - 1]) == 0);
    EXPECT(pthread_join(t, &freed) == 0 && (intptr_t)freed == CUDA_SUCCESS);
    for (int i = 4; i < 8; i++)
        EXPECT(lms_test_launch(lms_test_add_kernel(), stream, buf[i], MIB, 1) == CUDA_SUCCESS);
    CUgraphExec exec;
    EXPECT(lms_test_end_capture(stream, &exec) == CUDA_SUCCESS);
    EXPECT(cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(stream) == CUDA_SUCCESS);
    for (int i = 0; i < 8; i++)
        EXPECT(holds(buf[i], 11));
    return 0;
}

/* cuMemFreeAsync of a swappable buffer inside a capture: the graph's kernel still uses it
 * when it runs, however much the program allocates between capture and launch; the free
 * takes effect when the graph runs. */
static int free_in_capture(void)
{
    setup();
    EXPECT(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    EXPECT(lms_test_launch(lms_test_add_kernel(), stream, buf[0], MIB, 1) == CUDA_SUCCESS);
    EXPECT(cuMemFreeAsync(buf[0], stream) == CUDA_SUCCESS);
    CUgraphExec exec;
    EXPECT(lms_test_end_capture(stream, &exec) == CUDA_SUCCESS);
    for (int i = 1; i < BUFS; i++) /* evicts buf[0] and reaps what was freed */
        EXPECT(cuMemsetD8(buf[i], 3, MIB) == CUDA_SUCCESS);
    size_t before, after, total;
    EXPECT(cuMemGetInfo(&before, &total) == CUDA_SUCCESS);
    EXPECT(cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(stream) == CUDA_SUCCESS);
    EXPECT(cuMemGetInfo(&after, &total) == CUDA_SUCCESS);
    EXPECT(after == before + MIB);
    for (int i = 1; i < BUFS; i++)
        EXPECT(holds(buf[i], 3));
    return 0;
}

/* A wait of liblms's that fails once during a capture (the nth cuEventSynchronize, or with
 * an event record failing, cuStreamSynchronize) falls back to another wait: never to one for
 * the whole context, which would invalidate the capture. */
static int waits_fail_in_capture(void)
{
    setup();
    static const char *const waits[] = { "cuEventSynchronize", "cuEventRecord", "cuStreamSynchronize" };
    for (unsigned w = 0; w < sizeof waits / sizeof waits[0]; w++)
        for (unsigned long nth = 1; nth <= 3; nth++) {
            EXPECT(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
            sim_fail_call(waits[w], nth, CUDA_ERROR_UNKNOWN);
            if (strcmp(waits[w], "cuEventRecord") == 0) /* then the stream is drained */
                sim_fail_call("cuStreamSynchronize", 1, CUDA_ERROR_UNKNOWN);
            for (int i = 0; i < BUFS; i++)
                lms_test_launch(lms_test_add_kernel(), stream, buf[i], MIB, 1);
            sim_clear_faults();
            CUgraph graph;
            CUresult ended = cuStreamEndCapture(stream, &graph);
            if (ended != CUDA_SUCCESS) {
                fprintf(stderr, "%s failing at call %lu: cuStreamEndCapture returned %d\n", waits[w], nth, ended);
                return 1;
            }
            EXPECT(cuGraphDestroy(graph) == CUDA_SUCCESS);
        }
    return 0;
}

/* liblms asks whether the launch's stream captures; when that query fails once, it is not
 * taken for an idle stream: the graph's launches still hold what the captured kernels use,
 * while the rest of the device is overwritten between capture and launch. */
static int capture_query_fails(void)
{
    setup();
    for (unsigned long nth = 1; nth <= 4; nth++) {
        EXPECT(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
        sim_fail_call("cuStreamIsCapturing", nth, CUDA_ERROR_UNKNOWN);
        for (int i = 0; i < 4; i++)
            EXPECT(lms_test_launch(lms_test_add_kernel(), stream, buf[i], MIB, 1) == CUDA_SUCCESS);
        sim_clear_faults();
        CUgraphExec exec;
        EXPECT(lms_test_end_capture(stream, &exec) == CUDA_SUCCESS);
        for (int i = 4; i < BUFS; i++) /* evicts buf[0..3] */
            EXPECT(cuMemsetD8(buf[i], (unsigned char)nth, MIB) == CUDA_SUCCESS);
        EXPECT(cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
        EXPECT(cuStreamSynchronize(stream) == CUDA_SUCCESS);
        for (int i = 0; i < 4; i++)
            EXPECT(holds(buf[i], (unsigned char)(10 + nth)));
        EXPECT(cuGraphExecDestroy(exec) == CUDA_SUCCESS);
    }
    return 0;
}

static const lms_test_case cases[] = {
    { "global-capture", "a capture in global mode survives restores, evictions, allocations and "
      "another thread's free", global_capture, { NULL } },
    { "free-in-capture", "a buffer freed inside a capture lives until the graph runs", free_in_capture,
      { NULL } },
    { "waits-fail-in-capture", "a wait of liblms's that fails during a capture does not invalidate it",
      waits_fail_in_capture, { NULL } },
    { "capture-query-fails", "a capture query that fails once is asked again: the graph holds its "
      "buffers", capture_query_fails, { NULL } },
};
#define CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    static const char *const common[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16", NULL };
    return lms_test_main(argc, argv, cases, CASES, common);
}
