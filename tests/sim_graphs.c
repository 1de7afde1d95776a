/* Stream capture records launches, copies, memsets and host functions; graphs replay them. */
#include "tests/sim_testing.h"

#include <pthread.h>

/* add_one(int *counter) */
static void add_one(const sim_launch *launch)
{
    **(int **)launch->params[0] += 1;
}

static int host_calls;
static pthread_mutex_t host_calls_lock = PTHREAD_MUTEX_INITIALIZER;

static void count_host_call(void *user_data)
{
    int *seen = user_data;
    pthread_mutex_lock(&host_calls_lock);
    host_calls++;
    pthread_mutex_unlock(&host_calls_lock);
    *seen = 1;
}

static int read_int(CUdeviceptr p)
{
    int value = -1;
    CHECK_CU(cuMemcpyDtoH_v2(&value, p, sizeof value));
    return value;
}

int main(void)
{
    plan(16);
    sim_setup(16 << 20);
    const size_t sizes[] = {sizeof(int *)};
    CUfunction add = (CUfunction)sim_register_kernel("add_one", add_one, 1, sizes);
    CUdeviceptr counter, copy;
    CHECK_CU(cuMemAlloc_v2(&counter, sizeof(int)));
    CHECK_CU(cuMemAlloc_v2(&copy, sizeof(int)));
    CHECK_CU(cuMemsetD32_v2(counter, 0, 1));
    CHECK_CU(cuMemsetD32_v2(copy, 0, 1));

    CUstream capturing, other;
    CHECK_CU(cuStreamCreate(&capturing, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));

    /* Host functions run in stream order. */
    int seen = 0;
    void *params[] = {&counter};
    CHECK_CU(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, other, params, NULL));
    CHECK_CU(cuLaunchHostFunc(other, count_host_call, &seen));
    CHECK_CU(cuStreamSynchronize(other));
    ok(seen == 1 && host_calls == 1, "cuLaunchHostFunc runs on the stream");
    is_int(read_int(counter), 1, "after the kernel queued before it");

    /* Capture. */
    CUstreamCaptureStatus status;
    CHECK_CU(cuStreamBeginCapture_v2(capturing, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(cuStreamIsCapturing(capturing, &status));
    is_int(status, CU_STREAM_CAPTURE_STATUS_ACTIVE, "cuStreamIsCapturing: ACTIVE");
    CHECK_CU(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, capturing, params, NULL));
    CHECK_CU(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, capturing, params, NULL));
    CHECK_CU(cuMemcpyDtoDAsync_v2(copy, counter, sizeof(int), capturing));
    CHECK_CU(cuLaunchHostFunc(capturing, count_host_call, &seen));
    CUgraph graph;
    CHECK_CU(cuStreamEndCapture(capturing, &graph));
    CHECK_CU(cuStreamIsCapturing(capturing, &status));
    is_int(status, CU_STREAM_CAPTURE_STATUS_NONE, "after cuStreamEndCapture: NONE");
    CHECK_CU(cuCtxSynchronize());
    is_int(read_int(counter), 1, "captured work did not run");
    is_int(host_calls, 1, "captured host functions did not run");

    CUgraphExec exec;
    CHECK_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK_CU(cuGraphDestroy(graph)); /* the instance keeps its own copy */
    CHECK_CU(cuGraphLaunch(exec, other));
    CHECK_CU(cuStreamSynchronize(other));
    is_int(read_int(counter), 3, "cuGraphLaunch replays both launches");
    is_int(read_int(copy), 3, "then the copy, in order");
    is_int(host_calls, 2, "and the host function");
    CHECK_CU(cuGraphLaunch(exec, NULL));
    CHECK_CU(cuCtxSynchronize());
    is_int(read_int(counter), 5, "a second replay, on the NULL stream");
    CHECK_CU(cuGraphExecDestroy(exec));

    /* What capture does not support. */
    is_int(cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL),
           CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "capturing the legacy NULL stream: UNSUPPORTED");
    CUevent event;
    CHECK_CU(cuEventCreate(&event, 0));
    CHECK_CU(cuStreamBeginCapture_v2(capturing, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(cuEventRecord(event, capturing), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "recording an event into a capture: UNSUPPORTED (the simulator captures no events)");
    CHECK_CU(cuStreamIsCapturing(capturing, &status));
    is_int(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED, "which invalidates the capture");
    graph = (CUgraph)&graph;
    is_int(cuStreamEndCapture(capturing, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
           "cuStreamEndCapture then: INVALIDATED");
    ok(graph == NULL, "and no graph");
    is_int(cuStreamEndCapture(capturing, &graph), CUDA_ERROR_ILLEGAL_STATE,
           "ending a capture that is not running: ILLEGAL_STATE");

    CHECK_CU(cuEventDestroy_v2(event));
    CHECK_CU(cuStreamDestroy_v2(capturing));
    CHECK_CU(cuStreamDestroy_v2(other));
    CHECK_CU(cuMemFree_v2(counter));
    CHECK_CU(cuMemFree_v2(copy));
    return exit_status();
}
