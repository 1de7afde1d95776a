/* Stream capture and graphs: launches, copies, memsets and host functions issued on a
 * capturing stream are recorded, not run; cuGraphLaunch replays them in order on its stream.
 * Events, stream-ordered frees and the legacy NULL stream cannot be captured. */
#include "sim/sim_internal.h"

#include <stdlib.h>

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    CD_ENTER("cuStreamBeginCapture");
    (void)mode;
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->is_null)
        result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
    else if (result == CUDA_SUCCESS && s->capture)
        result = CUDA_ERROR_ILLEGAL_STATE;
    else if (result == CUDA_SUCCESS && !(s->capture = calloc(1, sizeof *s->capture)))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    if (result == CUDA_SUCCESS)
        s->capture_invalidated = false;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

static void graph_free_locked(cd_graph *g)
{
    for (cd_op *op = g->head, *next; op; op = next) {
        next = op->next;
        cd_op_free_locked(op);
    }
    free(g);
}

CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    CD_ENTER("cuStreamEndCapture");
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && !s->capture)
        result = CUDA_ERROR_ILLEGAL_STATE;
    if (result == CUDA_SUCCESS) {
        *phGraph = NULL;
        if (s->capture_invalidated) {
            graph_free_locked(s->capture);
            result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else {
            *phGraph = (CUgraph)s->capture;
        }
        s->capture = NULL;
        s->capture_invalidated = false;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    CD_ENTER("cuStreamIsCapturing");
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS)
        *captureStatus = !s->capture ? CU_STREAM_CAPTURE_STATUS_NONE
                         : s->capture_invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                                  : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* Copies a graph's operations into *copy. */
static CUresult graph_clone_locked(const cd_graph *g, cd_graph **copy)
{
    cd_graph *c = calloc(1, sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    for (const cd_op *op = g->head; op; op = op->next) {
        cd_op *op_copy;
        CUresult result = cd_op_clone_locked(op, &op_copy);
        if (result != CUDA_SUCCESS) {
            graph_free_locked(c);
            return result;
        }
        if (c->tail)
            c->tail->next = op_copy;
        else
            c->head = op_copy;
        c->tail = op_copy;
    }
    *copy = c;
    return CUDA_SUCCESS;
}

CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                     unsigned long long flags)
{
    CD_ENTER("cuGraphInstantiateWithFlags");
    if (!phGraphExec || !hGraph || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    cd_graph *exec;
    pthread_mutex_lock(&cd.lock);
    CUresult result = graph_clone_locked((const cd_graph *)hGraph, &exec);
    pthread_mutex_unlock(&cd.lock);
    if (result == CUDA_SUCCESS)
        *phGraphExec = (CUgraphExec)exec;
    return result;
}

/* Replays the captured operations on hStream, in their order. */
CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    CD_ENTER("cuGraphLaunch");
    if (!hGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    cd_graph *run = NULL;
    pthread_mutex_lock(&cd.lock);
    CUresult result = graph_clone_locked((const cd_graph *)hGraphExec, &run);
    for (cd_op *op = run ? run->head : NULL, *next; op; op = next) {
        next = op->next;
        cd_stream *s;
        if (result == CUDA_SUCCESS)
            result = cd_enqueue_locked(hStream, op, &s);
        else
            cd_op_free_locked(op);
    }
    free(run);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    CD_ENTER("cuGraphExecDestroy");
    if (!hGraphExec)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    graph_free_locked((cd_graph *)hGraphExec);
    pthread_mutex_unlock(&cd.lock);
    return CUDA_SUCCESS;
}

CUresult cuGraphDestroy(CUgraph hGraph)
{
    CD_ENTER("cuGraphDestroy");
    if (!hGraph)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    graph_free_locked((cd_graph *)hGraph);
    pthread_mutex_unlock(&cd.lock);
    return CUDA_SUCCESS;
}
