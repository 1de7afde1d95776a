/* The rules of stream capture: events recorded into a capture, fork and join across streams,
 * cuStreamGetCaptureInfo, and the capture modes that restrict potentially unsafe calls. */
#include "tests/sim_testing.h"

#include <pthread.h>

/* add_one(int *counter) */
static void add_one(const sim_launch *launch)
{
    **(int **)launch->params[0] += 1;
}

static CUfunction add;
static CUcontext ctx;
static CUdeviceptr counter;

static CUresult launch_add(CUstream stream)
{
    void *params[] = {&counter};
    return cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

static int read_counter(void)
{
    int value = -1;
    CHECK_CU(cuMemcpyDtoH_v2(&value, counter, sizeof value));
    return value;
}

static CUstreamCaptureStatus status_of(CUstream stream)
{
    CUstreamCaptureStatus status;
    CHECK_CU(cuStreamIsCapturing(stream, &status));
    return status;
}

/* Ends a capture that is expected to fail, and checks that it left no graph. */
static CUresult end_failing(CUstream stream)
{
    CUgraph graph = (CUgraph)&graph;
    CUresult result = cuStreamEndCapture(stream, &graph);
    if (graph)
        diag("a failed capture gave a graph");
    return graph ? CUDA_ERROR_UNKNOWN : result;
}

/* Ends a capture known to be invalidated. */
static void end_invalidated(CUstream stream)
{
    CUresult result = end_failing(stream);
    if (result != CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
        bail_out("ending an invalidated capture returned %d", (int)result);
}

static void events_and_forks(CUstream a, CUstream b, CUevent e1, CUevent e2)
{
    /* An event recorded into a capture is no work: it cannot be queried or waited for. */
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK_CU(launch_add(a));
    is_int(cuEventRecord(e1, a), CUDA_SUCCESS, "an event may be recorded into a capture");
    is_int(cuEventQuery(e1), CUDA_ERROR_CAPTURED_EVENT, "querying it: CAPTURED_EVENT");
    is_int(cuEventSynchronize(e1), CUDA_ERROR_CAPTURED_EVENT, "synchronizing it: CAPTURED_EVENT");

    /* Fork: b waits for the event and joins the capture; left unjoined, the capture fails. */
    CHECK_CU(cuStreamWaitEvent(b, e1, 0));
    cuuint64_t id_a = 0, id_b = 1;
    CUstreamCaptureStatus status;
    CHECK_CU(cuStreamGetCaptureInfo(a, &status, &id_a, NULL, NULL, NULL, NULL));
    CHECK_CU(cuStreamGetCaptureInfo(b, &status, &id_b, NULL, NULL, NULL, NULL));
    ok(status == CU_STREAM_CAPTURE_STATUS_ACTIVE && id_a == id_b,
       "a stream waiting for a captured event joins that capture");
    CHECK_CU(launch_add(b));
    CHECK_CU(launch_add(a));
    is_int(end_failing(b), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED,
           "ending the capture on the forked stream: STREAM_CAPTURE_UNMATCHED");
    is_int(end_failing(a), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
           "which invalidated it: the capture ends with no graph");
    ok(status_of(a) == CU_STREAM_CAPTURE_STATUS_NONE && status_of(b) == CU_STREAM_CAPTURE_STATUS_NONE,
       "and both streams are out of it");

    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(launch_add(a));
    CHECK_CU(cuEventRecord(e1, a));
    CHECK_CU(cuStreamWaitEvent(b, e1, 0));
    CHECK_CU(launch_add(b));
    CHECK_CU(launch_add(a));
    is_int(end_failing(a), CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
           "a fork never joined back: STREAM_CAPTURE_UNJOINED, and no graph");

    /* Fork and join: the graph has the diamond's edges, and runs each kernel once. */
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(launch_add(a));
    CHECK_CU(cuEventRecord(e1, a));
    CHECK_CU(cuStreamWaitEvent(b, e1, 0));
    CHECK_CU(launch_add(b));
    CHECK_CU(launch_add(a));
    CHECK_CU(cuEventRecord(e2, b));
    CHECK_CU(cuStreamWaitEvent(a, e2, 0));
    const CUgraphNode *deps;
    const CUgraphEdgeData *edges;
    size_t dep_count = 0;
    CUgraph capturing_graph;
    CHECK_CU(cuStreamGetCaptureInfo_v3(a, &status, &id_a, &capturing_graph, &deps, &edges,
                                       &dep_count));
    ok(dep_count == 2 && edges[0].type == 0 && edges[1].type == 0,
       "cuStreamGetCaptureInfo_v3: after the join the stream depends on both branches");
    is_int(cuStreamGetCaptureInfo_v3(a, &status, NULL, NULL, NULL, &edges, NULL),
           CUDA_ERROR_INVALID_VALUE, "edge data without dependencies: INVALID_VALUE");
    CUgraph graph;
    is_int(cuStreamEndCapture(a, &graph), CUDA_SUCCESS, "the joined capture ends with a graph");
    ok(graph == capturing_graph && status_of(b) == CU_STREAM_CAPTURE_STATUS_NONE,
       "the graph cuStreamGetCaptureInfo named; the forked stream is out of the capture");
    size_t count = 0;
    CHECK_CU(cuGraphGetNodes(graph, NULL, &count));
    CUgraphNode nodes[3];
    CHECK_CU(cuGraphGetNodes(graph, nodes, &count));
    CUgraphNode deps1[2], deps2[2];
    size_t n1 = 2, n2 = 2;
    CHECK_CU(cuGraphNodeGetDependencies(nodes[1], deps1, NULL, &n1));
    CHECK_CU(cuGraphNodeGetDependencies(nodes[2], deps2, NULL, &n2));
    ok(count == 3 && n1 == 1 && n2 == 1 && deps1[0] == nodes[0] && deps2[0] == nodes[0],
       "three kernel nodes, both branches after the first");
    CUgraphExec exec;
    int before = read_counter();
    CHECK_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK_CU(cuGraphLaunch(exec, a));
    CHECK_CU(cuStreamSynchronize(a));
    is_int(read_counter(), before + 3, "the graph runs each of the three kernels once");
    CHECK_CU(cuGraphExecDestroy(exec));
    CHECK_CU(cuGraphDestroy(graph));
    is_int(cuEventQuery(e1), CUDA_ERROR_CAPTURED_EVENT,
           "an event last recorded into a capture stays unqueryable after it");
    CHECK_CU(cuEventRecord(e1, a));
    CHECK_CU(cuEventSynchronize(e1));
    is_int(cuEventQuery(e1), CUDA_SUCCESS, "until it is recorded outside a capture");

    /* Boundaries: an event recorded outside, or in another capture. */
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(cuStreamWaitEvent(a, e1, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION,
           "waiting in a capture for an event recorded outside it: STREAM_CAPTURE_ISOLATION");
    is_int(launch_add(a), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
           "the capture is invalidated: later work is refused");
    end_invalidated(a);
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(cuStreamBeginCapture_v2(b, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(cuEventRecord(e2, b));
    is_int(cuStreamWaitEvent(a, e2, 0), CUDA_ERROR_STREAM_CAPTURE_MERGE,
           "waiting for an event of another capture: STREAM_CAPTURE_MERGE");
    end_invalidated(a);
    CHECK_CU(cuStreamEndCapture(b, &graph));
    CHECK_CU(cuGraphDestroy(graph));
}

/* In another thread: the result of a potentially unsafe call, in the given capture mode. */
typedef struct unsafe_call {
    CUstreamCaptureMode mode;
    CUstream stream;
    CUresult result;
} unsafe_call;

static void *synchronize_elsewhere(void *arg)
{
    unsafe_call *call = arg;
    CHECK_CU(cuCtxSetCurrent(ctx));
    CUstreamCaptureMode mode = call->mode;
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
    call->result = cuStreamSynchronize(call->stream);
    return NULL;
}

static CUresult synchronize_in_thread(CUstreamCaptureMode mode, CUstream stream)
{
    unsafe_call call = {mode, stream, CUDA_ERROR_UNKNOWN};
    pthread_t thread;
    pthread_create(&thread, NULL, synchronize_elsewhere, &call);
    pthread_join(thread, NULL);
    return call.result;
}

/* In another thread: ending a capture. */
typedef struct end_call {
    CUstream stream;
    CUresult result;
} end_call;

static void *end_elsewhere(void *arg)
{
    end_call *call = arg;
    CUgraph graph = NULL;
    CHECK_CU(cuCtxSetCurrent(ctx));
    call->result = cuStreamEndCapture(call->stream, &graph);
    if (graph)
        CHECK_CU(cuGraphDestroy(graph));
    return NULL;
}

static CUresult end_in_thread(CUstream stream)
{
    end_call call = {stream, CUDA_ERROR_UNKNOWN};
    pthread_t thread;
    pthread_create(&thread, NULL, end_elsewhere, &call);
    pthread_join(thread, NULL);
    return call.result;
}

static void modes(CUstream a, CUstream other, CUevent e1)
{
    CUgraph graph;
    /* GLOBAL: the capturing thread may not make potentially unsafe calls. */
    static const char *const forbidden[] = {
        "cuStreamSynchronize of another stream",     "cuStreamQuery of another stream",
        "cuEventQuery of an event recorded outside", "cuEventSynchronize of it",
        "cuCtxSynchronize",                          "cuMemFree",
        "a synchronous copy",
    };
    CUdeviceptr victim;
    CHECK_CU(cuMemAlloc_v2(&victim, 64));
    int host = 0;
    for (size_t i = 0; i < sizeof forbidden / sizeof forbidden[0]; i++) {
        CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CUresult r = i == 0   ? cuStreamSynchronize(other)
                     : i == 1 ? cuStreamQuery(other)
                     : i == 2 ? cuEventQuery(e1)
                     : i == 3 ? cuEventSynchronize(e1)
                     : i == 4 ? cuCtxSynchronize()
                     : i == 5 ? cuMemFree_v2(victim)
                              : cuMemcpyDtoH_v2(&host, counter, sizeof host);
        CUstreamCaptureStatus status = status_of(a);
        CUresult ended = end_failing(a);
        ok(r == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED &&
               status == CU_STREAM_CAPTURE_STATUS_INVALIDATED &&
               ended == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
           "GLOBAL capture: %s: STREAM_CAPTURE_UNSUPPORTED (%d), the capture invalidated",
           forbidden[i], (int)r);
    }
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUdeviceptr fresh;
    is_int(cuMemAlloc_v2(&fresh, 64), CUDA_SUCCESS, "cuMemAlloc is allowed in a GLOBAL capture");
    is_int(status_of(a), CU_STREAM_CAPTURE_STATUS_ACTIVE, "and leaves it active");
    is_int(synchronize_in_thread(CU_STREAM_CAPTURE_MODE_GLOBAL, other),
           CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "another thread in GLOBAL mode may not synchronize during a GLOBAL capture either");
    end_invalidated(a);
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(synchronize_in_thread(CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, other), CUDA_SUCCESS,
           "one in THREAD_LOCAL mode may: other threads' captures do not concern it");
    is_int(end_in_thread(a), CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
           "a GLOBAL capture ended by another thread: STREAM_CAPTURE_WRONG_THREAD");
    CHECK_CU(cuStreamEndCapture(a, &graph));
    CHECK_CU(cuGraphDestroy(graph));

    /* THREAD_LOCAL captures concern their own thread only. */
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    is_int(synchronize_in_thread(CU_STREAM_CAPTURE_MODE_GLOBAL, other), CUDA_SUCCESS,
           "during a THREAD_LOCAL capture, another thread (even GLOBAL) may synchronize");
    is_int(cuStreamQuery(other), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "the capturing thread may not");
    end_invalidated(a);

    /* RELAXED: unsafe calls are allowed; those that conflict with capture are not. */
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    is_int(cuStreamSynchronize(other), CUDA_SUCCESS,
           "a RELAXED capture allows synchronizing another stream");
    is_int(cuMemFree_v2(fresh), CUDA_SUCCESS, "and cuMemFree");
    is_int(status_of(a), CU_STREAM_CAPTURE_STATUS_ACTIVE, "the capture is still active");
    is_int(cuStreamSynchronize(a), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "synchronizing the capturing stream itself: UNSUPPORTED in every mode");
    end_invalidated(a);
    /* Measured on the H100, in every mode: liblms asking a capturing stream's id broke every
     * capture of cuDNN's algorithm search. */
    unsigned long long id;
    CUcontext owner;
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    is_int(cuStreamGetId(other, &id), CUDA_SUCCESS, "cuStreamGetId of another stream during a capture: allowed");
    is_int(cuStreamGetCtx(a, &owner), CUDA_SUCCESS, "cuStreamGetCtx of the capturing stream: allowed");
    is_int(cuStreamGetId(a, &id), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "cuStreamGetId of the capturing stream itself: UNSUPPORTED in every mode");
    end_invalidated(a);
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
    is_int(end_in_thread(a), CUDA_SUCCESS, "a RELAXED capture may be ended by another thread");

    /* The thread's own mode. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
    is_int(mode, CU_STREAM_CAPTURE_MODE_GLOBAL, "cuThreadExchangeStreamCaptureMode: GLOBAL at first");
    CHECK_CU(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(cuStreamQuery(other), CUDA_SUCCESS,
           "in RELAXED mode the thread may query during its own GLOBAL capture");
    CHECK_CU(cuThreadExchangeStreamCaptureMode(&mode));
    CHECK_CU(cuStreamEndCapture(a, &graph));
    CHECK_CU(cuGraphDestroy(graph));
    mode = (CUstreamCaptureMode)7;
    is_int(cuThreadExchangeStreamCaptureMode(&mode), CUDA_ERROR_INVALID_VALUE,
           "an unknown mode: INVALID_VALUE");
    is_int(cuStreamBeginCapture_v2(a, (CUstreamCaptureMode)7), CUDA_ERROR_INVALID_VALUE,
           "cuStreamBeginCapture with an unknown mode: INVALID_VALUE");
}

/* The legacy stream, while a blocking stream captures. */
static void legacy_stream(CUstream blocking)
{
    CUstreamCaptureStatus status;
    CHECK_CU(cuStreamBeginCapture_v2(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
    is_int(cuStreamIsCapturing(NULL, &status), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
           "cuStreamIsCapturing(legacy) while a blocking stream captures: IMPLICIT");
    is_int(status_of(blocking), CU_STREAM_CAPTURE_STATUS_ACTIVE, "which leaves the capture active");
    cuuint64_t capture;
    is_int(cuStreamGetCaptureInfo(NULL, &status, &capture, NULL, NULL, NULL, NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
           "cuStreamGetCaptureInfo of the legacy stream: IMPLICIT");
    unsigned long long id;
    is_int(cuStreamGetId(CU_STREAM_PER_THREAD, &id), CUDA_SUCCESS, "cuStreamGetId of the per-thread stream: allowed");
    is_int(status_of(blocking), CU_STREAM_CAPTURE_STATUS_ACTIVE, "the capture still active");
    is_int(cuStreamGetId(NULL, &id), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
           "cuStreamGetId of the legacy stream: IMPLICIT (measured on the H100)");
    is_int(status_of(blocking), CU_STREAM_CAPTURE_STATUS_INVALIDATED, "which invalidates the capture");
    end_invalidated(blocking);
    CHECK_CU(cuStreamBeginCapture_v2(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
    is_int(launch_add(NULL), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
           "work on the legacy stream: IMPLICIT");
    is_int(status_of(blocking), CU_STREAM_CAPTURE_STATUS_INVALIDATED, "which invalidates the capture");
    end_invalidated(blocking);
    CUdeviceptr p;
    CHECK_CU(cuStreamBeginCapture_v2(blocking, CU_STREAM_CAPTURE_MODE_RELAXED));
    is_int(cuMemAllocAsync(&p, 64, blocking), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "cuMemAllocAsync in a capture (memory nodes are not modelled): UNSUPPORTED");
    end_invalidated(blocking);
    is_int(status_of(NULL), CU_STREAM_CAPTURE_STATUS_NONE, "after it, the legacy stream is usable");
}

int main(void)
{
    plan(56);
    setenv("LMS_SIM_LOG", "/dev/null", 1); /* refused calls are logged */
    ctx = sim_setup(16 << 20);
    const size_t sizes[] = {sizeof(int *)};
    add = (CUfunction)sim_register_kernel("add_one", add_one, 1, sizes);
    CHECK_CU(cuMemAlloc_v2(&counter, sizeof(int)));
    CHECK_CU(cuMemsetD32_v2(counter, 0, 1));
    CUstream a, b, other, blocking;
    CHECK_CU(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
    CUevent e1, e2;
    CHECK_CU(cuEventCreate(&e1, 0));
    CHECK_CU(cuEventCreate(&e2, 0));

    events_and_forks(a, b, e1, e2);
    modes(a, other, e1);
    legacy_stream(blocking);

    CHECK_CU(cuEventDestroy_v2(e1));
    CHECK_CU(cuEventDestroy_v2(e2));
    CHECK_CU(cuStreamDestroy_v2(a));
    CHECK_CU(cuStreamDestroy_v2(b));
    CHECK_CU(cuStreamDestroy_v2(other));
    CHECK_CU(cuStreamDestroy_v2(blocking));
    CHECK_CU(cuMemFree_v2(counter));
    return exit_status();
}
