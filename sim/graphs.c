/* Graphs: made by stream capture (capture.c) or node by node, instantiated into executable
 * graphs, launched, updated.
 *
 * A graph holds its nodes in the order they were added, which is a topological order (a node
 * depends only on nodes added before it). An executable graph is a copy; cuGraphLaunch queues
 * its nodes' work one after another, in that order, on the launch stream: an order the graph
 * allows, without the concurrency of independent branches. Graph, executable graph and node
 * handles are checked against the live ones: a destroyed one is INVALID_VALUE. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

struct cd_graph {
    cd_node *head, *tail;
    size_t count;
    bool exec;                  /* a CUgraphExec */
    bool capturing;             /* a capture's, until cuStreamEndCapture hands it out */
    cd_graph *next;             /* in the list of live graphs */
};

static cd_graph *graphs;

cd_graph *cd_graph_new_locked(void)
{
    cd_graph *g = calloc(1, sizeof *g);
    if (g) {
        g->capturing = true;
        g->next = graphs;
        graphs = g;
    }
    return g;
}

void cd_graph_publish_locked(cd_graph *g)
{
    g->capturing = false;
}

static void node_free_locked(cd_node *n)
{
    cd_op_free_locked(n->op);
    free(n->deps);
    free(n->kernel_params);
    free(n);
}

void cd_graph_free_locked(cd_graph *g)
{
    for (cd_graph **link = &graphs; *link; link = &(*link)->next) {
        if (*link == g) {
            *link = g->next;
            break;
        }
    }
    for (cd_node *n = g->head, *next; n; n = next) {
        next = n->next;
        node_free_locked(n);
    }
    free(g);
}

static CUgraphNodeType node_type(cd_op_kind kind)
{
    switch (kind) {
    case CD_OP_KERNEL:
        return CU_GRAPH_NODE_TYPE_KERNEL;
    case CD_OP_COPY:
        return CU_GRAPH_NODE_TYPE_MEMCPY;
    case CD_OP_MEMSET:
        return CU_GRAPH_NODE_TYPE_MEMSET;
    default:
        return CU_GRAPH_NODE_TYPE_HOST;
    }
}

CUresult cd_graph_add_locked(cd_graph *g, cd_op *op, cd_node *const *deps, size_t dep_count,
                             cd_node **node)
{
    cd_node *n = calloc(1, sizeof *n);
    cd_node **copy = calloc(dep_count + 1, sizeof *copy);
    if (!n || !copy) {
        free(n);
        free(copy);
        cd_op_free_locked(op);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (dep_count > 0)
        memcpy(copy, deps, dep_count * sizeof *copy);
    n->type = node_type(op->kind);
    n->op = op;
    n->deps = copy;
    n->dep_count = dep_count;
    n->graph = g;
    n->index = g->count;
    if (g->tail)
        g->tail->next = n;
    else
        g->head = n;
    g->tail = n;
    g->count++;
    *node = n;
    return CUDA_SUCCESS;
}

bool cd_graph_joined_locked(cd_graph *g, cd_node *const *ends, size_t end_count)
{
    /* Marks the ends and every node they depend on, each pushed once on the work list. */
    cd_node **todo = malloc((g->count + 1) * sizeof *todo);
    if (!todo)
        abort();
    size_t top = 0;
    for (cd_node *n = g->head; n; n = n->next)
        n->mark = false;
    for (size_t i = 0; i < end_count; i++) {
        if (!ends[i]->mark) {
            ends[i]->mark = true;
            todo[top++] = ends[i];
        }
    }
    while (top > 0) {
        cd_node *n = todo[--top];
        for (size_t i = 0; i < n->dep_count; i++) {
            if (!n->deps[i]->mark) {
                n->deps[i]->mark = true;
                todo[top++] = n->deps[i];
            }
        }
    }
    free(todo);
    for (cd_node *n = g->head; n; n = n->next)
        if (!n->mark)
            return false;
    return true;
}

/* ---- handles ---- */

static cd_graph *find_graph_locked(const void *handle, bool exec)
{
    for (cd_graph *g = graphs; g; g = g->next)
        if ((const void *)g == handle && g->exec == exec)
            return g;
    return NULL;
}

static cd_node *find_node_locked(CUgraphNode handle)
{
    for (cd_graph *g = graphs; g; g = g->next)
        for (cd_node *n = g->exec ? NULL : g->head; n; n = n->next)
            if ((CUgraphNode)n == handle)
                return n;
    return NULL;
}

/* ---- building ---- */

CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CD_ENTER("cuGraphCreate");
    if (!phGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    cd_graph *g = cd_graph_new_locked();
    if (g)
        cd_graph_publish_locked(g);
    pthread_mutex_unlock(&cd.lock);
    if (!g)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *phGraph = (CUgraph)g;
    return CUDA_SUCCESS;
}

/* A capture's graph is the capture's to destroy. */
CUresult cuGraphDestroy(CUgraph hGraph)
{
    CD_ENTER("cuGraphDestroy");
    pthread_mutex_lock(&cd.lock);
    cd_graph *g = find_graph_locked(hGraph, false);
    bool destroyable = g && !g->capturing;
    if (destroyable)
        cd_graph_free_locked(g);
    pthread_mutex_unlock(&cd.lock);
    return destroyable ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* The kernel node's context field is ignored: the simulator's kernels belong to no context. */
CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                 const CUgraphNode *dependencies, size_t numDependencies,
                                 const CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CD_ENTER("cuGraphAddKernelNode");
    if (!phGraphNode || !nodeParams || (numDependencies > 0 && !dependencies))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    cd_graph *g = find_graph_locked(hGraph, false);
    CUresult result = g ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; result == CUDA_SUCCESS && i < numDependencies; i++) {
        cd_node *dep = find_node_locked(dependencies[i]);
        if (!dep || dep->graph != g)
            result = CUDA_ERROR_INVALID_VALUE;
    }
    const unsigned grid[3] = {nodeParams->gridDimX, nodeParams->gridDimY, nodeParams->gridDimZ};
    const unsigned block[3] = {nodeParams->blockDimX, nodeParams->blockDimY, nodeParams->blockDimZ};
    CUfunction f = nodeParams->func ? nodeParams->func : (CUfunction)nodeParams->kern;
    cd_op *op;
    if (result == CUDA_SUCCESS)
        result = cd_kernel_op_locked(f, grid, block, nodeParams->sharedMemBytes,
                                     nodeParams->kernelParams, nodeParams->extra, &op);
    cd_node *node;
    if (result == CUDA_SUCCESS)
        result = cd_graph_add_locked(g, op, (cd_node *const *)dependencies, numDependencies, &node);
    if (result == CUDA_SUCCESS)
        *phGraphNode = (CUgraphNode)node;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, NULL);
    CUDA_KERNEL_NODE_PARAMS params = {
        nodeParams->func,         nodeParams->gridDimX,       nodeParams->gridDimY,
        nodeParams->gridDimZ,     nodeParams->blockDimX,      nodeParams->blockDimY,
        nodeParams->blockDimZ,    nodeParams->sharedMemBytes, nodeParams->kernelParams,
        nodeParams->extra,        NULL,                       NULL};
    return cuGraphAddKernelNode_v2(phGraphNode, hGraph, dependencies, numDependencies, &params);
}

/* ---- queries ---- */

/* kernelParams points into the node's own copy of the arguments, valid while the node lives. */
CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS *nodeParams)
{
    CD_ENTER("cuGraphKernelNodeGetParams");
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    cd_node *n = find_node_locked(hNode);
    CUresult result = n && n->type == CU_GRAPH_NODE_TYPE_KERNEL ? CUDA_SUCCESS
                                                                : CUDA_ERROR_INVALID_VALUE;
    if (result == CUDA_SUCCESS && !n->kernel_params &&
        !(n->kernel_params = cd_kernel_params_of(n->op)))
        result = CUDA_ERROR_INVALID_HANDLE; /* its kernel was unloaded */
    if (result == CUDA_SUCCESS) {
        const cd_op *op = n->op;
        *nodeParams = (CUDA_KERNEL_NODE_PARAMS){
            .func = cd_kernel_handle(op),
            .gridDimX = op->u.launch.grid[0],
            .gridDimY = op->u.launch.grid[1],
            .gridDimZ = op->u.launch.grid[2],
            .blockDimX = op->u.launch.block[0],
            .blockDimY = op->u.launch.block[1],
            .blockDimZ = op->u.launch.block[2],
            .sharedMemBytes = op->u.launch.shared_bytes,
            .kernelParams = n->kernel_params,
        };
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* The node of hNode if it has the type; NULL (INVALID_VALUE for the caller) otherwise. */
static const cd_node *node_of_type_locked(CUgraphNode hNode, CUgraphNodeType type)
{
    const cd_node *n = find_node_locked(hNode);
    return n && n->type == type ? n : NULL;
}

/* One side of a copy node: where it starts, as the call named its memory. */
static void copy_node_side(CUmemorytype type, uintptr_t start, CUmemorytype *type_out, const void **host,
                           CUdeviceptr *device)
{
    *type_out = type;
    if (type == CU_MEMORYTYPE_HOST)
        *host = (const void *)start;
    else
        *device = (CUdeviceptr)start;
}

CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams)
{
    CD_ENTER("cuGraphMemcpyNodeGetParams");
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    const cd_node *n = node_of_type_locked(hNode, CU_GRAPH_NODE_TYPE_MEMCPY);
    if (n) {
        const cd_op *op = n->op;
        CUDA_MEMCPY3D p = {
            .srcPitch = op->u.copy.src_pitch,
            .srcHeight = op->u.copy.src_pitch ? op->u.copy.src_plane / op->u.copy.src_pitch : 0,
            .dstPitch = op->u.copy.dst_pitch,
            .dstHeight = op->u.copy.dst_pitch ? op->u.copy.dst_plane / op->u.copy.dst_pitch : 0,
            .WidthInBytes = op->u.copy.width,
            .Height = op->u.copy.height,
            .Depth = op->u.copy.depth,
        };
        const void *dst_host = NULL;
        copy_node_side(op->u.copy.src_type, op->u.copy.src, &p.srcMemoryType, &p.srcHost, &p.srcDevice);
        copy_node_side(op->u.copy.dst_type, op->u.copy.dst, &p.dstMemoryType, &dst_host, &p.dstDevice);
        p.dstHost = (void *)dst_host;
        *nodeParams = p;
    }
    pthread_mutex_unlock(&cd.lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode, CUDA_MEMSET_NODE_PARAMS *nodeParams)
{
    CD_ENTER("cuGraphMemsetNodeGetParams");
    if (!nodeParams)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    const cd_node *n = node_of_type_locked(hNode, CU_GRAPH_NODE_TYPE_MEMSET);
    if (n)
        *nodeParams = (CUDA_MEMSET_NODE_PARAMS){
            .dst = (CUdeviceptr)n->op->u.memset.dst,
            .pitch = n->op->u.memset.pitch,
            .value = n->op->u.memset.value,
            .elementSize = n->op->u.memset.element_size,
            .width = n->op->u.memset.count,
            .height = n->op->u.memset.height,
        };
    pthread_mutex_unlock(&cd.lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams)
{
    if (!nodeParams)
        return cuGraphKernelNodeGetParams_v2(hNode, NULL);
    CUDA_KERNEL_NODE_PARAMS params;
    CUresult result = cuGraphKernelNodeGetParams_v2(hNode, &params);
    if (result == CUDA_SUCCESS)
        memcpy(nodeParams, &params, sizeof *nodeParams); /* v1 is v2's first fields */
    return result;
}

CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type)
{
    CD_ENTER("cuGraphNodeGetType");
    if (!type)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    cd_node *n = find_node_locked(hNode);
    if (n)
        *type = n->type;
    pthread_mutex_unlock(&cd.lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* Fills out[0..*count) from items[0..available) and NULLs past them, or, for out NULL, gives
 * the count: the convention of the driver's graph queries. */
static void list_out(CUgraphNode *out, size_t *count, cd_node *const *items, size_t available)
{
    if (!out) {
        *count = available;
        return;
    }
    for (size_t i = 0; i < *count; i++)
        out[i] = i < available ? (CUgraphNode)items[i] : NULL;
    if (*count > available)
        *count = available;
}

CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    CD_ENTER("cuGraphGetNodes");
    if (!numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    cd_graph *g = find_graph_locked(hGraph, false);
    cd_node **all = g ? calloc(g->count + 1, sizeof *all) : NULL;
    if (all) {
        size_t i = 0;
        for (cd_node *n = g->head; n; n = n->next)
            all[i++] = n;
        list_out(nodes, numNodes, all, g->count);
    }
    pthread_mutex_unlock(&cd.lock);
    free(all);
    return !g ? CUDA_ERROR_INVALID_VALUE : all ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

/* Edges carry no data here: edgeData, when given, is all zero. */
CUresult cuGraphNodeGetDependencies_v2(CUgraphNode hNode, CUgraphNode *dependencies,
                                       CUgraphEdgeData *edgeData, size_t *numDependencies)
{
    CD_ENTER("cuGraphNodeGetDependencies");
    if (!numDependencies || (edgeData && !dependencies))
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    cd_node *n = find_node_locked(hNode);
    if (n)
        list_out(dependencies, numDependencies, n->deps, n->dep_count);
    if (n && edgeData)
        memset(edgeData, 0, *numDependencies * sizeof *edgeData);
    pthread_mutex_unlock(&cd.lock);
    return n ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                    size_t *numDependencies)
{
    return cuGraphNodeGetDependencies_v2(hNode, dependencies, NULL, numDependencies);
}

/* ---- executable graphs ---- */

/* A copy of g's nodes, work and edges, for instantiation. */
static CUresult graph_clone_locked(const cd_graph *g, cd_graph **copy)
{
    cd_graph *c = cd_graph_new_locked();
    cd_node **made = calloc(g->count + 1, sizeof *made);
    CUresult result = c && made ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    size_t i = 0;
    for (const cd_node *n = g->head; result == CUDA_SUCCESS && n; n = n->next, i++) {
        cd_op *op;
        result = cd_op_clone_locked(n->op, &op);
        if (result == CUDA_SUCCESS)
            result = cd_graph_add_locked(c, op, n->deps, n->dep_count, &made[i]);
        for (size_t j = 0; result == CUDA_SUCCESS && j < n->dep_count; j++)
            made[i]->deps[j] = made[n->deps[j]->index];
    }
    free(made);
    if (result != CUDA_SUCCESS && c)
        cd_graph_free_locked(c);
    if (result == CUDA_SUCCESS) {
        c->capturing = false;
        c->exec = true;
        *copy = c;
    }
    return result;
}

/* Instantiation flags the driver knows; UPLOAD only through cuGraphInstantiateWithParams. A
 * graph for device launch may hold only kernels, copies and memsets, and at least one. */
static CUresult instantiate_locked(CUgraphExec *phGraphExec, CUgraph hGraph,
                                   unsigned long long flags, bool upload_allowed,
                                   CUgraphNode *error_node, CUgraphInstantiateResult *why)
{
    const unsigned long long known =
        CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
        CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH | CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY;
    bool device_launch = flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH;
    *error_node = NULL;
    *why = CUDA_GRAPH_INSTANTIATE_ERROR;
    cd_graph *g = find_graph_locked(hGraph, false);
    if (!phGraphExec || !g || (flags & ~known) ||
        ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) && !upload_allowed) ||
        (device_launch && (flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH)))
        return CUDA_ERROR_INVALID_VALUE;
    if (device_launch && g->count == 0) {
        *why = CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE;
        return CUDA_ERROR_INVALID_VALUE;
    }
    for (cd_node *n = device_launch ? g->head : NULL; n; n = n->next) {
        if (n->type == CU_GRAPH_NODE_TYPE_HOST) {
            *error_node = (CUgraphNode)n;
            *why = CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED;
            return CUDA_ERROR_INVALID_VALUE;
        }
    }
    cd_graph *exec;
    CUresult result = graph_clone_locked(g, &exec);
    if (result == CUDA_SUCCESS) {
        *phGraphExec = (CUgraphExec)exec;
        *why = CUDA_GRAPH_INSTANTIATE_SUCCESS;
    }
    return result;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    CD_ENTER("cuGraphInstantiateWithFlags");
    CUgraphNode error_node;
    CUgraphInstantiateResult why;
    pthread_mutex_lock(&cd.lock);
    CUresult result = instantiate_locked(phGraphExec, hGraph, flags, false, &error_node, &why);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* An upload has nothing to do here but name a valid stream. */
CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                      CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    CD_ENTER("cuGraphInstantiateWithParams");
    if (!instantiateParams)
        return CUDA_ERROR_INVALID_VALUE;
    CUDA_GRAPH_INSTANTIATE_PARAMS *p = instantiateParams;
    cd_stream *upload;
    pthread_mutex_lock(&cd.lock);
    CUresult result = instantiate_locked(phGraphExec, hGraph, p->flags, true, &p->hErrNode_out,
                                         &p->result_out);
    if (result == CUDA_SUCCESS && (p->flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD))
        result = cd_resolve_stream_locked(p->hUploadStream, &upload);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* The CUDA 11 form: no flags, and an error node and log (empty here) for failures. */
CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize)
{
    CD_ENTER("cuGraphInstantiate");
    CUgraphNode error_node;
    CUgraphInstantiateResult why;
    pthread_mutex_lock(&cd.lock);
    CUresult result = instantiate_locked(phGraphExec, hGraph, 0, false, &error_node, &why);
    pthread_mutex_unlock(&cd.lock);
    if (phErrorNode)
        *phErrorNode = error_node;
    if (logBuffer && bufferSize > 0)
        logBuffer[0] = '\0';
    return result;
}

/* The CUDA 10 form: the CUDA 11 one kept its parameters. */
CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize)
{
    return cuGraphInstantiate_v2(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

/* Queues the nodes' work on hStream in their order; each kernel is loaded into the stream's
 * context on its first launch there. */
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    CD_ENTER("cuGraphLaunch");
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    cd_graph *exec = find_graph_locked(hGraphExec, true);
    CUresult result = !exec ? CUDA_ERROR_INVALID_VALUE : cd_resolve_stream_locked(hStream, &s);
    for (cd_node *n = result == CUDA_SUCCESS ? exec->head : NULL; result == CUDA_SUCCESS && n;
         n = n->next) {
        cd_op *op = NULL;
        result = cd_op_clone_locked(n->op, &op);
        if (result == CUDA_SUCCESS && op->kind == CD_OP_KERNEL)
            result = cd_kernel_load_locked(op, s->ctx);
        if (result == CUDA_SUCCESS)
            result = cd_enqueue_locked(hStream, op, &s);
        else if (op)
            cd_op_free_locked(op);
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CD_ENTER("cuGraphExecDestroy");
    pthread_mutex_lock(&cd.lock);
    cd_graph *exec = find_graph_locked(hGraphExec, true);
    if (exec)
        cd_graph_free_locked(exec);
    pthread_mutex_unlock(&cd.lock);
    return exec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ---- updating an executable graph ---- */

/* Whether a node's work may change from `from` to `to` in place: a kernel may (the simulator's
 * kernels belong to no context); a copy keeps the kind of memory and the devices of each
 * side; a 2D memset keeps its shape, a memset its device. */
static bool updatable_locked(const cd_op *from, const cd_op *to)
{
    switch (from->kind) {
    case CD_OP_COPY:
        return cd_memory_kind_locked(from->u.copy.dst) == cd_memory_kind_locked(to->u.copy.dst) &&
               cd_memory_kind_locked(from->u.copy.src) == cd_memory_kind_locked(to->u.copy.src) &&
               from->u.copy.dst_device == to->u.copy.dst_device &&
               from->u.copy.src_device == to->u.copy.src_device;
    case CD_OP_MEMSET:
        if (from->u.memset.device != to->u.memset.device)
            return false;
        return (from->u.memset.height == 1 && to->u.memset.height == 1) ||
               (from->u.memset.element_size == to->u.memset.element_size &&
                from->u.memset.count == to->u.memset.count &&
                from->u.memset.pitch == to->u.memset.pitch &&
                from->u.memset.height == to->u.memset.height);
    default:
        return true;
    }
}

/* Nodes are paired in order; their types, edges and the changes to their work must fit. */
static CUgraphExecUpdateResult compare_locked(const cd_graph *exec, const cd_graph *g,
                                              CUgraphExecUpdateResultInfo *info)
{
    if (exec->count != g->count)
        return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (const cd_node *e = exec->head, *n = g->head; n; e = e->next, n = n->next) {
        info->errorNode = (CUgraphNode)n;
        if (e->type != n->type)
            return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
        if (e->dep_count != n->dep_count)
            return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
        for (size_t j = 0; j < n->dep_count; j++) {
            if (e->deps[j]->index != n->deps[j]->index) {
                info->errorFromNode = (CUgraphNode)n->deps[j];
                return CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
            }
        }
        if (!updatable_locked(e->op, n->op))
            return CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
    }
    info->errorNode = NULL;
    return CU_GRAPH_EXEC_UPDATE_SUCCESS;
}

static CUresult exec_update_locked(CUgraphExec hGraphExec, CUgraph hGraph,
                                   CUgraphExecUpdateResultInfo *info)
{
    *info = (CUgraphExecUpdateResultInfo){CU_GRAPH_EXEC_UPDATE_ERROR, NULL, NULL};
    cd_graph *exec = find_graph_locked(hGraphExec, true), *g = find_graph_locked(hGraph, false);
    if (!exec || !g)
        return CUDA_ERROR_INVALID_VALUE;
    info->result = compare_locked(exec, g, info);
    if (info->result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    cd_graph *fresh;
    CUresult result = graph_clone_locked(g, &fresh);
    if (result != CUDA_SUCCESS) {
        info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
        return result;
    }
    for (cd_node *e = exec->head, *f = fresh->head; e; e = e->next, f = f->next) {
        cd_op *old = e->op;
        e->op = f->op;
        f->op = old;
    }
    cd_graph_free_locked(fresh);
    return CUDA_SUCCESS;
}

CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                              CUgraphExecUpdateResultInfo *resultInfo)
{
    CD_ENTER("cuGraphExecUpdate");
    if (!resultInfo)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    CUresult result = exec_update_locked(hGraphExec, hGraph, resultInfo);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                           CUgraphExecUpdateResult *updateResult_out)
{
    if (!hErrorNode_out || !updateResult_out)
        return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResultInfo info;
    CUresult result = cuGraphExecUpdate_v2(hGraphExec, hGraph, &info);
    *hErrorNode_out = info.errorNode;
    *updateResult_out = info.result;
    return result;
}
