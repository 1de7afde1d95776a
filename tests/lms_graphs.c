/* cuGraphLaunch of a graph made by stream capture restores every allocation its captured
 * launches used. Runs without host-located VMM, so an evicted buffer is unmapped and a
 * graph kernel that reached one would crash instead of being served over the fallback. */
#include "tests/lms_testlib.h"

#include <string.h>

#define MIB ((size_t)1 << 20)
#define IN_GRAPH 5   /* their 10 MiB of handles fit the 16 MiB device */
#define OTHERS 8     /* writing these evicts every buffer of the graph */

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0",
                                       "LMS_SIM_CAPACITY_MB=16", "LMS_SIM_HOST_VMM=0", NULL };
    lms_test_with_env(argv, env);
    plan(4);
    lms_test_context();
    static unsigned char host[MIB];
    CUdeviceptr graph_buf[IN_GRAPH], other[OTHERS];
    for (int i = 0; i < IN_GRAPH; i++) {
        CU_OK(cuMemAlloc(&graph_buf[i], MIB));
        CU_OK(cuMemsetD8(graph_buf[i], 10, MIB));
    }
    for (int i = 0; i < OTHERS; i++)
        CU_OK(cuMemAlloc(&other[i], MIB));

    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CU_OK(cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (int i = 0; i < IN_GRAPH; i++)
        CU_OK(lms_test_launch(lms_test_add_kernel(), stream, graph_buf[i], MIB, 1));
    CUgraph graph;
    CUgraphExec exec;
    CU_OK(cuStreamEndCapture(stream, &graph));
    CU_OK(cuGraphInstantiate(&exec, graph, 0));
    unsigned long launches = sim_calls("cuGraphLaunch");

    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < OTHERS; i++)
            CU_OK(cuMemsetD8(other[i], 0, MIB));
        CU_OK(cuGraphLaunch(exec, stream));
    }
    CU_OK(cuStreamSynchronize(stream));
    is_uint(sim_calls("cuGraphLaunch") - launches, 2, "the graph ran twice");
    int right = 0;
    for (int i = 0; i < IN_GRAPH; i++) {
        CU_OK(cuMemcpyDtoH(host, graph_buf[i], MIB));
        right += host[0] == 12 && host[MIB - 1] == 12;
    }
    is_int(right, IN_GRAPH, "each launch restored every buffer the captured kernels use (10 + 1 + 1)");
    int others_right = 0;
    for (int i = 0; i < OTHERS; i++) {
        CU_OK(cuMemcpyDtoH(host, other[i], MIB));
        others_right += host[0] == 0 && host[MIB - 1] == 0;
    }
    is_int(others_right, OTHERS, "the other buffers kept their data");
    CU_OK(cuGraphExecDestroy(exec));
    CU_OK(cuGraphDestroy(graph));
    ok(cuMemcpyDtoH(host, graph_buf[0], MIB) == CUDA_SUCCESS, "buffers outlive their graph");
    for (int i = 0; i < IN_GRAPH; i++)
        CU_OK(cuMemFree(graph_buf[i]));
    for (int i = 0; i < OTHERS; i++)
        CU_OK(cuMemFree(other[i]));
    CU_OK(cuStreamDestroy(stream));
    return exit_status();
}
