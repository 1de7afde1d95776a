/* The wrappers of the graph entry points: captures begin and end (graphs.c keeps what they
 * use), every form of instantiation and cuGraphExecUpdate read the graph's nodes as the
 * launches, copies and memsets they are, and cuGraphLaunch holds what the executable graph
 * uses, then frees what the graph frees. */
#include "preload/graphs.h"
#include "preload/hooks.h"
#include "preload/real_driver.h"
#include "preload/residency.h"
#include "preload/wrappers.h"

#include <stdlib.h>

/* ---- captures ---- */

static CUresult cuStreamBeginCapture_v2_impl(__typeof__(cuStreamBeginCapture_v2) *real, int per_thread,
                                             CUstream stream, CUstreamCaptureMode mode)
{
    CUresult r = real(stream, mode);
    if (!lms_passing_through() && r == CUDA_SUCCESS)
        lms_graph_capture_begun(stream_of(per_thread, stream));
    return r;
}
LMS_TWIN(cuStreamBeginCapture_v2, _ptsz, (CUstream stream, CUstreamCaptureMode mode), stream, mode)

static CUresult cuStreamBeginCaptureToGraph_impl(__typeof__(cuStreamBeginCaptureToGraph) *real,
                                                 int per_thread, CUstream stream, CUgraph graph,
                                                 const CUgraphNode *deps, const CUgraphEdgeData *edges,
                                                 size_t dep_count, CUstreamCaptureMode mode)
{
    CUresult r = real(stream, graph, deps, edges, dep_count, mode);
    if (!lms_passing_through() && r == CUDA_SUCCESS)
        lms_graph_capture_begun(stream_of(per_thread, stream));
    return r;
}
LMS_TWIN(cuStreamBeginCaptureToGraph, _ptsz,
         (CUstream stream, CUgraph graph, const CUgraphNode *deps, const CUgraphEdgeData *edges,
          size_t dep_count, CUstreamCaptureMode mode),
         stream, graph, deps, edges, dep_count, mode)

/* The capture ends in every case but a wrong thread's: then it goes on. */
static CUresult cuStreamEndCapture_impl(__typeof__(cuStreamEndCapture) *real, int per_thread,
                                        CUstream stream, CUgraph *graph)
{
    CUstream s = stream_of(per_thread, stream);
    uint64_t capture = lms_passing_through() ? 0 : lms_graph_capture_of(s);
    CUresult r = real(stream, graph);
    if (capture && !lms_graph_capturing(s))
        lms_graph_capture_ended(capture, r == CUDA_SUCCESS && graph ? *graph : NULL);
    return r;
}
LMS_TWIN(cuStreamEndCapture, _ptsz, (CUstream stream, CUgraph *graph), stream, graph)

/* ---- reading a graph ---- */

static void scan_graph(lms_call *call, CUgraph graph);

/* Adds the references of one node's work to call. Returns 0 when liblms cannot read them. */
static int scan_node(lms_call *call, CUgraphNode node)
{
    CUgraphNodeType type;
    if (lms_real.cuGraphNodeGetType(node, &type) != CUDA_SUCCESS)
        return 0;
    switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        CUDA_KERNEL_NODE_PARAMS p;
        if (!lms_real.cuGraphKernelNodeGetParams_v2 ||
            lms_real.cuGraphKernelNodeGetParams_v2(node, &p) != CUDA_SUCCESS)
            return 0;
        int uses_any = call->uses_any; /* the scan says it of this kernel only */
        lms_scan_launch(call, p.func ? p.func : (CUfunction)p.kern, p.kernelParams, p.extra);
        call->uses_any |= uses_any;
        return 1;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
        CUDA_MEMCPY3D p;
        if (!lms_real.cuGraphMemcpyNodeGetParams || lms_real.cuGraphMemcpyNodeGetParams(node, &p) != CUDA_SUCCESS)
            return 0;
        REF_3D(call, &p);
        return 1;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        CUDA_MEMSET_NODE_PARAMS p;
        if (!lms_real.cuGraphMemsetNodeGetParams || lms_real.cuGraphMemsetNodeGetParams(node, &p) != CUDA_SUCCESS)
            return 0;
        lms_ref_memset_2d(call, p.dst, p.pitch, p.width, p.height, p.elementSize);
        return 1;
    }
    case CU_GRAPH_NODE_TYPE_BATCH_MEM_OP: {
        CUDA_BATCH_MEM_OP_NODE_PARAMS p;
        if (!lms_real.cuGraphBatchMemOpNodeGetParams ||
            lms_real.cuGraphBatchMemOpNodeGetParams(node, &p) != CUDA_SUCCESS)
            return 0;
        lms_ref_mem_ops(call, p.count, p.paramArray);
        return 1;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: {
        CUgraph child;
        if (!lms_real.cuGraphChildGraphNodeGetGraph ||
            lms_real.cuGraphChildGraphNodeGetGraph(node, &child) != CUDA_SUCCESS)
            return 0;
        scan_graph(call, child);
        return 1;
    }
    case CU_GRAPH_NODE_TYPE_HOST: /* host code cannot reach device memory */
    case CU_GRAPH_NODE_TYPE_EMPTY:
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL:
    case CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT:
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: /* the graph's own memory, not liblms's */
    case CU_GRAPH_NODE_TYPE_MEM_FREE:
        return 1;
    default: /* conditional nodes and whatever comes later */
        return 0;
    }
}

/* Adds the references of graph's nodes to call; a node liblms cannot read makes the graph
 * one that may use any allocation, but for a copy or memset of a graph made by capture: it
 * was seen when captured. */
static void scan_graph(lms_call *call, CUgraph graph)
{
    size_t count = 0;
    CUgraphNode *nodes = NULL;
    if (!lms_real.cuGraphGetNodes || !lms_real.cuGraphNodeGetType ||
        lms_real.cuGraphGetNodes(graph, NULL, &count) != CUDA_SUCCESS ||
        !(nodes = malloc((count ? count : 1) * sizeof *nodes)) ||
        lms_real.cuGraphGetNodes(graph, nodes, &count) != CUDA_SUCCESS) {
        call->uses_any = 1;
        free(nodes);
        return;
    }
    int captured = lms_graph_made_by_capture(graph);
    for (size_t i = 0; i < count; i++) {
        CUgraphNodeType type;
        if (!scan_node(call, nodes[i]) &&
            !(captured && lms_real.cuGraphNodeGetType(nodes[i], &type) == CUDA_SUCCESS &&
              (type == CU_GRAPH_NODE_TYPE_MEMCPY || type == CU_GRAPH_NODE_TYPE_MEMSET)))
            call->uses_any = 1;
    }
    free(nodes);
}

/* exec was instantiated from graph, or updated to it: what its work uses is read again. */
static void read_graph(CUgraph graph, CUgraphExec exec)
{
    lms_call call;
    lms_call_init(&call, NULL, "graph");
    scan_graph(&call, graph);
    lms_graph_ref *refs = malloc((call.ref_count ? call.ref_count : 1) * sizeof *refs);
    size_t count = refs ? call.ref_count : 0;
    for (size_t i = 0; i < count; i++)
        refs[i] = (lms_graph_ref){ call.refs[i].addr, call.refs[i].bytes };
    lms_graph_instantiated(graph, exec, refs, count, call.uses_any || (call.ref_count && !refs));
    free(refs);
    lms_call_end(&call, CUDA_ERROR_NOT_READY); /* never begun: this frees its references */
}

static CUresult instantiated(CUresult r, CUgraph graph, const CUgraphExec *exec)
{
    if (!lms_passing_through() && r == CUDA_SUCCESS && exec)
        read_graph(graph, *exec);
    return r;
}

/* ---- instantiation, in every form ---- */

LMS_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph graph, unsigned long long flags)
{
    lms_init();
    return instantiated(lms_real.cuGraphInstantiateWithFlags(exec, graph, flags), graph, exec);
}

static CUresult cuGraphInstantiateWithParams_impl(__typeof__(cuGraphInstantiateWithParams) *real,
                                                  int per_thread, CUgraphExec *exec, CUgraph graph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    (void)per_thread; /* the upload stream's work is the driver's own */
    return instantiated(real(exec, graph, params), graph, exec);
}
LMS_TWIN(cuGraphInstantiateWithParams, _ptsz,
         (CUgraphExec *exec, CUgraph graph, CUDA_GRAPH_INSTANTIATE_PARAMS *params), exec, graph, params)

#define LMS_INSTANTIATE_V1(name)                                                                  \
    LMS_EXPORT CUresult name(CUgraphExec *exec, CUgraph graph, CUgraphNode *error_node, char *log, \
                             size_t log_bytes)                                                    \
    {                                                                                             \
        lms_init();                                                                               \
        return lms_real.name ? instantiated(lms_real.name(exec, graph, error_node, log, log_bytes), \
                                            graph, exec)                                          \
                             : CUDA_ERROR_NOT_SUPPORTED;                                          \
    }
LMS_INSTANTIATE_V1(cuGraphInstantiate)
LMS_INSTANTIATE_V1(cuGraphInstantiate_v2)

LMS_EXPORT CUresult cuGraphExecUpdate_v2(CUgraphExec exec, CUgraph graph, CUgraphExecUpdateResultInfo *info)
{
    lms_init();
    if (!lms_real.cuGraphExecUpdate_v2)
        return CUDA_ERROR_NOT_SUPPORTED;
    return instantiated(lms_real.cuGraphExecUpdate_v2(exec, graph, info), graph, &exec);
}

LMS_EXPORT CUresult cuGraphExecUpdate(CUgraphExec exec, CUgraph graph, CUgraphNode *error_node,
                                      CUgraphExecUpdateResult *result)
{
    lms_init();
    if (!lms_real.cuGraphExecUpdate)
        return CUDA_ERROR_NOT_SUPPORTED;
    return instantiated(lms_real.cuGraphExecUpdate(exec, graph, error_node, result), graph, &exec);
}

/* ---- launches and ends ---- */

static void ref_graph_use(void *call, const lms_graph_ref *ref)
{
    lms_call_ref(call, (CUdeviceptr)ref->addr, ref->bytes, 0);
}

/* Once the graph is queued, so are the frees it captured: after it, on its stream. */
static CUresult cuGraphLaunch_impl(__typeof__(cuGraphLaunch) *real, int per_thread,
                                   CUgraphExec exec, CUstream stream)
{
    lms_call call;
    CUstream s = stream_of(per_thread, stream);
    lms_call_init(&call, s, "graph");
    int passthrough = lms_passing_through();
    if (!passthrough)
        call.uses_any = lms_graph_each_use(exec, ref_graph_use, &call);
    CUresult r;
    LMS_MANAGED_ISSUE(call, real(exec, stream), r);
    uint64_t *frees = NULL;
    size_t count = r == CUDA_SUCCESS && !passthrough ? lms_graph_take_frees(exec, &frees) : 0;
    for (size_t i = 0; i < count; i++)
        lms_free_async((CUdeviceptr)frees[i], s);
    free(frees);
    return r;
}
LMS_TWIN(cuGraphLaunch, _ptsz, (CUgraphExec exec, CUstream stream), exec, stream)

LMS_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    if (!lms_passing_through())
        lms_graph_forget(exec);
    return lms_real.cuGraphExecDestroy(exec);
}

LMS_EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
    if (!lms_passing_through())
        lms_graph_forget(graph);
    return lms_real.cuGraphDestroy(graph);
}
