/* cuGraphLaunch restores every allocation the graph's work uses, however the graph was made
 * (captured on one stream or across forked and joined streams, built node by node) and
 * instantiated (cuGraphInstantiateWithFlags, WithParams, the CUDA 11 cuGraphInstantiate), and
 * after cuGraphExecUpdate gives it other buffers. Runs without host-located VMM, so an
 * evicted buffer is unmapped and a graph kernel that reached one would crash instead of being
 * served over the fallback. */
#include "tests/lms_testlib.h"

#include <string.h>

#define MIB ((size_t)1 << 20)
#define IN_GRAPH 5   /* their 10 MiB of handles fit the 16 MiB device */
#define OTHERS 8     /* writing these evicts every buffer of the graph */

static CUdeviceptr graph_buf[IN_GRAPH], other[OTHERS];
static CUstream stream;

/* A driver entry point as cudart finds it, for the given CUDA version. */
static void *entry(const char *name, int version)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    return cuGetProcAddress(name, &fn, version, 0, &status) == CUDA_SUCCESS ? fn : NULL;
}

static void setup(void)
{
    lms_test_alloc_buffers(graph_buf, IN_GRAPH, MIB, 10);
    lms_test_alloc_buffers(other, OTHERS, MIB, -1);
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
}

/* Captures one add kernel per buffer on s. */
static CUresult capture_adds(CUstream s, const CUdeviceptr *bufs)
{
    CUresult r = CUDA_SUCCESS;
    for (int i = 0; i < IN_GRAPH && r == CUDA_SUCCESS; i++)
        r = lms_test_launch(lms_test_add_kernel(), s, bufs[i], MIB, 1);
    return r;
}

static CUresult capture_graph(const CUdeviceptr *bufs, CUgraph *graph)
{
    CUresult r = cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (r == CUDA_SUCCESS)
        r = capture_adds(stream, bufs);
    CUresult end = cuStreamEndCapture(stream, graph);
    return r == CUDA_SUCCESS ? end : r;
}

/* Launches exec twice, each time after the other buffers evicted the graph's, and checks
 * that each launch saw every buffer: 10 + 1 + 1. */
static int launch_and_check(CUgraphExec exec)
{
    static unsigned char host[MIB];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < OTHERS; i++)
            EXPECT(cuMemsetD8(other[i], 0, MIB) == CUDA_SUCCESS);
        EXPECT(cuGraphLaunch(exec, stream) == CUDA_SUCCESS);
    }
    EXPECT(cuStreamSynchronize(stream) == CUDA_SUCCESS);
    for (int i = 0; i < IN_GRAPH; i++) {
        EXPECT(cuMemcpyDtoH(host, graph_buf[i], MIB) == CUDA_SUCCESS);
        EXPECT(host[0] == 12 && host[MIB - 1] == 12);
    }
    for (int i = 0; i < OTHERS; i++) {
        EXPECT(cuMemcpyDtoH(host, other[i], MIB) == CUDA_SUCCESS);
        EXPECT(host[0] == 0 && host[MIB - 1] == 0);
    }
    return 0;
}

static int captured(void)
{
    setup();
    CUgraph graph;
    CUgraphExec exec;
    EXPECT(capture_graph(graph_buf, &graph) == CUDA_SUCCESS);
    EXPECT(cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS);
    EXPECT(launch_and_check(exec) == 0);
    EXPECT(cuGraphExecDestroy(exec) == CUDA_SUCCESS);
    EXPECT(cuGraphDestroy(graph) == CUDA_SUCCESS);
    static unsigned char host[MIB];
    EXPECT(cuMemcpyDtoH(host, graph_buf[0], MIB) == CUDA_SUCCESS); /* buffers outlive their graph */
    return 0;
}

/* The origin stream forks two streams through an event, each captures some of the kernels,
 * and joins them again: the uses of the forked streams belong to the graph too. */
static int forked(void)
{
    setup();
    CUstream side[2];
    CUevent fork, join[2];
    EXPECT(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    for (int k = 0; k < 2; k++) {
        EXPECT(cuStreamCreate(&side[k], CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
        EXPECT(cuEventCreate(&join[k], CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS);
    }
    EXPECT(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS);
    EXPECT(cuEventRecord(fork, stream) == CUDA_SUCCESS);
    for (int i = 0; i < IN_GRAPH; i++) {
        CUstream s = i == 0 ? stream : side[i % 2];
        if (i < 3 && s != stream)
            EXPECT(cuStreamWaitEvent(s, fork, 0) == CUDA_SUCCESS);
        EXPECT(lms_test_launch(lms_test_add_kernel(), s, graph_buf[i], MIB, 1) == CUDA_SUCCESS);
    }
    for (int k = 0; k < 2; k++) {
        EXPECT(cuEventRecord(join[k], side[k]) == CUDA_SUCCESS);
        EXPECT(cuStreamWaitEvent(stream, join[k], 0) == CUDA_SUCCESS);
    }
    CUgraphExec exec;
    EXPECT(lms_test_end_capture(stream, &exec) == CUDA_SUCCESS);
    return launch_and_check(exec);
}

/* As cudart's cudaGraphInstantiateWithParams asks. */
static int with_params(void)
{
    setup();
    CUgraph graph;
    CUgraphExec exec;
    EXPECT(capture_graph(graph_buf, &graph) == CUDA_SUCCESS);
    CUDA_GRAPH_INSTANTIATE_PARAMS params = { .flags = CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD,
                                             .hUploadStream = stream };
    EXPECT(cuGraphInstantiateWithParams(&exec, graph, &params) == CUDA_SUCCESS);
    return launch_and_check(exec);
}

/* The CUDA 11 form, as a program built against CUDA 11 gets it from cuGetProcAddress. */
static int instantiate_v2(void)
{
    setup();
    CUresult (*instantiate)(CUgraphExec *, CUgraph, CUgraphNode *, char *, size_t) =
        entry("cuGraphInstantiate", 11000);
    EXPECT(instantiate);
    CUgraph graph;
    CUgraphExec exec;
    CUgraphNode error_node;
    char log[64];
    EXPECT(capture_graph(graph_buf, &graph) == CUDA_SUCCESS);
    EXPECT(instantiate(&exec, graph, &error_node, log, sizeof log) == CUDA_SUCCESS);
    return launch_and_check(exec);
}

/* Built with cuGraphAddKernelNode, one kernel after another. */
static int node_built(void)
{
    setup();
    CUgraph graph;
    CUgraphExec exec;
    CUgraphNode node = NULL;
    EXPECT(cuGraphCreate(&graph, 0) == CUDA_SUCCESS);
    size_t bytes = MIB;
    int delta = 1;
    for (int i = 0; i < IN_GRAPH; i++) {
        void *args[] = { &graph_buf[i], &bytes, &delta };
        CUDA_KERNEL_NODE_PARAMS p = { .func = lms_test_add_kernel(), .gridDimX = 1, .gridDimY = 1,
                                      .gridDimZ = 1, .blockDimX = 1, .blockDimY = 1,
                                      .blockDimZ = 1, .kernelParams = args };
        CUgraphNode after = node;
        EXPECT(cuGraphAddKernelNode(&node, graph, after ? &after : NULL, after ? 1 : 0, &p) ==
               CUDA_SUCCESS);
    }
    EXPECT(cuGraphInstantiateWithFlags(&exec, graph, 0) == CUDA_SUCCESS);
    return launch_and_check(exec);
}

/* Instantiated for other buffers, then updated to the graph's. */
static int exec_updated(void)
{
    setup();
    CUdeviceptr old[IN_GRAPH];
    for (int i = 0; i < IN_GRAPH; i++)
        EXPECT(cuMemAlloc(&old[i], MIB) == CUDA_SUCCESS);
    CUgraph first, second;
    CUgraphExec exec;
    EXPECT(capture_graph(old, &first) == CUDA_SUCCESS);
    EXPECT(cuGraphInstantiateWithFlags(&exec, first, 0) == CUDA_SUCCESS);
    EXPECT(capture_graph(graph_buf, &second) == CUDA_SUCCESS);
    CUgraphExecUpdateResultInfo info;
    EXPECT(cuGraphExecUpdate(exec, second, &info) == CUDA_SUCCESS);
    return launch_and_check(exec);
}

static const lms_test_case cases[] = {
    { "captured", "a graph captured on one stream restores every buffer its kernels use", captured,
      { NULL } },
    { "forked", "so does one captured across forked and joined streams", forked, { NULL } },
    { "with-params", "and one instantiated with cuGraphInstantiateWithParams", with_params, { NULL } },
    { "instantiate-v2", "and with the CUDA 11 cuGraphInstantiate", instantiate_v2, { NULL } },
    { "node-built", "and one built node by node", node_built, { NULL } },
    { "exec-updated", "and one whose buffers cuGraphExecUpdate changed", exec_updated, { NULL } },
};
#define CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    static const char *const common[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16", NULL };
    return lms_test_main(argc, argv, cases, CASES, common);
}
