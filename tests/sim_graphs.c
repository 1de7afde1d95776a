/* Stream capture records launches, copies, memsets and host functions; graphs replay them.
 * Graphs built node by node, instantiation and its flags, and updates of executable graphs.
 * The rules of capture itself are tested in sim_capture. */
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

static CUfunction add;

/* A kernel node adding one to *counter, after deps. */
static CUgraphNode add_node(CUgraph graph, CUdeviceptr *counter, const CUgraphNode *deps,
                            size_t dep_count)
{
    void *params[] = {counter};
    CUDA_KERNEL_NODE_PARAMS p = {.func = add, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                 .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                 .kernelParams = params};
    CUgraphNode node;
    CHECK_CU(cuGraphAddKernelNode_v2(&node, graph, deps, dep_count, &p));
    return node;
}

/* Two kernel nodes, the second after the first, each adding one to *counter. */
static CUgraph two_adds(CUdeviceptr *counter, CUgraphNode nodes[2])
{
    CUgraph graph;
    CHECK_CU(cuGraphCreate(&graph, 0));
    nodes[0] = add_node(graph, counter, NULL, 0);
    nodes[1] = add_node(graph, counter, &nodes[0], 1);
    return graph;
}

static void graphs_by_node(CUdeviceptr counter, CUdeviceptr copy, CUstream stream)
{
    CUgraphNode nodes[2];
    CUgraph graph = two_adds(&counter, nodes);
    size_t count = 0;
    CHECK_CU(cuGraphGetNodes(graph, NULL, &count));
    CUgraphNode listed[3] = {NULL, NULL, (CUgraphNode)&count};
    size_t room = 3;
    CHECK_CU(cuGraphGetNodes(graph, listed, &room));
    ok(count == 2 && room == 2 && listed[0] == nodes[0] && listed[1] == nodes[1] && !listed[2],
       "cuGraphGetNodes: the count, then the nodes in order and NULL past them");
    CUgraphNodeType type;
    CHECK_CU(cuGraphNodeGetType(nodes[1], &type));
    is_int(type, CU_GRAPH_NODE_TYPE_KERNEL, "cuGraphNodeGetType: KERNEL");
    CUDA_KERNEL_NODE_PARAMS got;
    CHECK_CU(cuGraphKernelNodeGetParams_v2(nodes[1], &got));
    ok(got.func == add && got.gridDimX == 1 && got.blockDimZ == 1 &&
           *(CUdeviceptr *)got.kernelParams[0] == counter,
       "cuGraphKernelNodeGetParams: the function, shape and a copy of the parameters");
    CUgraphNode dep = NULL;
    size_t deps = 1;
    CHECK_CU(cuGraphNodeGetDependencies_v2(nodes[1], &dep, NULL, &deps));
    ok(deps == 1 && dep == nodes[0], "cuGraphNodeGetDependencies: the second after the first");

    CUgraphNode foreign[2];
    CUgraph other = two_adds(&counter, foreign);
    CUgraphNode node;
    void *params[] = {&counter};
    CUDA_KERNEL_NODE_PARAMS p = {.func = add, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                 .blockDimX = 1, .blockDimY = 1, .blockDimZ = 1,
                                 .kernelParams = params};
    is_int(cuGraphAddKernelNode_v2(&node, graph, foreign, 1, &p), CUDA_ERROR_INVALID_VALUE,
           "a dependency on another graph's node: INVALID_VALUE");

    /* Instantiation, its flags and forms. */
    CUgraphExec exec;
    int before = read_int(counter);
    CHECK_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK_CU(cuGraphLaunch(exec, stream));
    CHECK_CU(cuStreamSynchronize(stream));
    is_int(read_int(counter), before + 2, "a graph built node by node runs both kernels");
    CUgraphExec bad;
    is_int(cuGraphInstantiateWithFlags(&bad, graph, CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD),
           CUDA_ERROR_INVALID_VALUE, "UPLOAD without cuGraphInstantiateWithParams: INVALID_VALUE");
    is_int(cuGraphInstantiateWithFlags(&bad, graph, CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH |
                                                        CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH),
           CUDA_ERROR_INVALID_VALUE, "DEVICE_LAUNCH with AUTO_FREE_ON_LAUNCH: INVALID_VALUE");
    is_int(cuGraphInstantiateWithFlags(&bad, graph, 1ull << 20), CUDA_ERROR_INVALID_VALUE,
           "an unknown flag: INVALID_VALUE");
    CUDA_GRAPH_INSTANTIATE_PARAMS with = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                                   CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH,
                                          .hUploadStream = stream,
                                          .result_out = CUDA_GRAPH_INSTANTIATE_ERROR};
    CUgraphExec uploaded;
    CHECK_CU(cuGraphInstantiateWithParams(&uploaded, graph, &with));
    ok(with.result_out == CUDA_GRAPH_INSTANTIATE_SUCCESS && !with.hErrNode_out,
       "cuGraphInstantiateWithParams with UPLOAD and DEVICE_LAUNCH: SUCCESS");
    CUresult (*instantiate_11)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t);
    CUdriverProcAddressQueryResult found;
    CHECK_CU(cuGetProcAddress_v2("cuGraphInstantiate", (void **)&instantiate_11, 11000, 0, &found));
    CUgraphExec old_form;
    CUgraphNode error_node = (CUgraphNode)&count;
    char log[8] = "x";
    CHECK_CU(instantiate_11(&old_form, graph, &error_node, log, sizeof log));
    ok(!error_node && !log[0], "cuGraphInstantiate for CUDA 11 callers: no flags, an error node");

    /* Updates: same topology, other parameters; then another topology. */
    CUgraphNode moved[2];
    CUgraph retargeted = two_adds(&copy, moved);
    int copy_before = read_int(copy);
    CUgraphExecUpdateResultInfo info;
    CHECK_CU(cuGraphExecUpdate_v2(exec, retargeted, &info));
    CHECK_CU(cuGraphLaunch(exec, stream));
    CHECK_CU(cuStreamSynchronize(stream));
    ok(info.result == CU_GRAPH_EXEC_UPDATE_SUCCESS && read_int(copy) == copy_before + 2 &&
           read_int(counter) == before + 2,
       "cuGraphExecUpdate: the executable graph now adds to the other buffer");
    CUgraph single;
    CHECK_CU(cuGraphCreate(&single, 0));
    add_node(single, &counter, NULL, 0);
    is_int(cuGraphExecUpdate_v2(exec, single, &info), CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
           "an update to another topology: GRAPH_EXEC_UPDATE_FAILURE");
    is_int(info.result, CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED, "TOPOLOGY_CHANGED");

    CHECK_CU(cuGraphExecDestroy(exec));
    CHECK_CU(cuGraphExecDestroy(uploaded));
    CHECK_CU(cuGraphExecDestroy(old_form));
    is_int(cuGraphLaunch(exec, stream), CUDA_ERROR_INVALID_VALUE,
           "launching a destroyed executable graph: INVALID_VALUE");
    CHECK_CU(cuGraphDestroy(graph));
    is_int(cuGraphGetNodes(graph, NULL, &count), CUDA_ERROR_INVALID_VALUE,
           "a destroyed graph: INVALID_VALUE");
    CHECK_CU(cuGraphDestroy(other));
    CHECK_CU(cuGraphDestroy(retargeted));
    CHECK_CU(cuGraphDestroy(single));
}

int main(void)
{
    plan(34);
    setenv("LMS_SIM_LOG", "/dev/null", 1); /* the refused free is logged */
    sim_setup(16 << 20);
    const size_t sizes[] = {sizeof(int *)};
    add = (CUfunction)sim_register_kernel("add_one", add_one, 1, sizes);
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
    CUDA_GRAPH_INSTANTIATE_PARAMS for_device = {.flags = CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH};
    is_int(cuGraphInstantiateWithParams(&exec, graph, &for_device), CUDA_ERROR_INVALID_VALUE,
           "instantiating a graph with a host node for device launch: INVALID_VALUE");
    ok(for_device.result_out == CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED &&
           for_device.hErrNode_out != NULL,
       "NODE_OPERATION_NOT_SUPPORTED, naming the host node");
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
    CUdeviceptr scratch;
    CHECK_CU(cuMemAlloc_v2(&scratch, 16));
    CHECK_CU(cuStreamBeginCapture_v2(capturing, CU_STREAM_CAPTURE_MODE_GLOBAL));
    is_int(cuMemFreeAsync(scratch, capturing), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
           "a stream-ordered free in a capture: UNSUPPORTED (memory nodes are not modelled)");
    CHECK_CU(cuStreamIsCapturing(capturing, &status));
    is_int(status, CU_STREAM_CAPTURE_STATUS_INVALIDATED, "which invalidates the capture");
    graph = (CUgraph)&graph;
    is_int(cuStreamEndCapture(capturing, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
           "cuStreamEndCapture then: INVALIDATED");
    ok(graph == NULL, "and no graph");
    is_int(cuStreamEndCapture(capturing, &graph), CUDA_ERROR_ILLEGAL_STATE,
           "ending a capture that is not running: ILLEGAL_STATE");

    graphs_by_node(counter, copy, other);

    CHECK_CU(cuMemFree_v2(scratch));
    CHECK_CU(cuStreamDestroy_v2(capturing));
    CHECK_CU(cuStreamDestroy_v2(other));
    CHECK_CU(cuMemFree_v2(counter));
    CHECK_CU(cuMemFree_v2(copy));
    return exit_status();
}
