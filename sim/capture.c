/* Stream capture: work issued on a capturing stream becomes nodes of the capture's graph
 * (graphs.c) instead of running, each depending on what its stream captured last.
 *
 * An event recorded on a capturing stream remembers where that stream stood; a stream that
 * waits for it joins the capture there (a fork), and the capture's own stream must wait in
 * turn for what the forked streams captured (a join) before cuStreamEndCapture, which
 * otherwise fails with STREAM_CAPTURE_UNJOINED. Waiting in a capture for an event recorded
 * outside it crosses the capture's boundary (STREAM_CAPTURE_ISOLATION); for an event of another
 * capture, it would merge two (STREAM_CAPTURE_MERGE).
 *
 * Capture modes restrict "potentially unsafe" calls (those that synchronize, free or query)
 * as cuThreadExchangeStreamCaptureMode documents: in a thread whose mode is GLOBAL, such a call
 * fails while this thread captures in a mode other than RELAXED or any other thread captures
 * in GLOBAL mode; THREAD_LOCAL heeds only the thread's own captures; RELAXED none. The call
 * returns STREAM_CAPTURE_UNSUPPORTED and invalidates those captures. Synchronizing or querying
 * a capturing stream, or a context one of whose streams captures, fails in every mode, and
 * using the legacy stream while a blocking stream of its context captures fails with
 * STREAM_CAPTURE_IMPLICIT. An invalidated capture refuses further work
 * (STREAM_CAPTURE_INVALIDATED) and ends with no graph. Stream-ordered allocation and free
 * (memory nodes) and external event nodes are not modelled: they are refused. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

struct cd_capture {
    unsigned long long id;      /* unique for the process's life */
    cd_graph *graph;
    cd_stream *origin;          /* where it began, and must end */
    CUstreamCaptureMode mode;
    pthread_t thread;           /* that began it */
    bool invalidated;
    cd_capture *next;           /* in the list of captures in progress */
};

static cd_capture *captures;
static unsigned long long last_capture_id;
static __thread CUstreamCaptureMode thread_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

static bool valid_mode(CUstreamCaptureMode mode)
{
    return mode == CU_STREAM_CAPTURE_MODE_GLOBAL || mode == CU_STREAM_CAPTURE_MODE_THREAD_LOCAL ||
           mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}

static cd_capture *find_capture_locked(unsigned long long id)
{
    for (cd_capture *c = captures; c; c = c->next)
        if (c->id == id)
            return c;
    return NULL;
}

/* Makes room for n dependencies of s, and for their edge data (always zero here). */
static CUresult reserve_deps_locked(cd_stream *s, size_t n)
{
    if (n <= s->dep_capacity)
        return CUDA_SUCCESS;
    cd_node **deps = realloc(s->deps, n * sizeof *deps);
    if (deps)
        s->deps = deps;
    CUgraphEdgeData *edges = realloc(s->dep_edges, n * sizeof *edges);
    if (edges)
        s->dep_edges = edges;
    if (!deps || !edges)
        return CUDA_ERROR_OUT_OF_MEMORY;
    memset(edges, 0, n * sizeof *edges);
    s->dep_capacity = n;
    return CUDA_SUCCESS;
}

static CUresult set_deps_locked(cd_stream *s, cd_node *const *deps, size_t n)
{
    CUresult result = reserve_deps_locked(s, n);
    if (result == CUDA_SUCCESS) {
        if (n > 0)
            memmove(s->deps, deps, n * sizeof *deps);
        s->dep_count = n;
    }
    return result;
}

/* Adds deps to what s depends on, once each. */
static CUresult add_deps_locked(cd_stream *s, cd_node *const *deps, size_t n)
{
    CUresult result = reserve_deps_locked(s, s->dep_count + n);
    for (size_t i = 0; result == CUDA_SUCCESS && i < n; i++) {
        bool known = false;
        for (size_t j = 0; j < s->dep_count; j++)
            known = known || s->deps[j] == deps[i];
        if (!known)
            s->deps[s->dep_count++] = deps[i];
    }
    return result;
}

static void leave_locked(cd_stream *s)
{
    s->capture = NULL;
    s->dep_count = 0;
}

/* Every stream leaves the capture, and it is forgotten; its graph is the caller's to hand out
 * or free. */
static void end_locked(cd_capture *c)
{
    for (cd_ctx *ctx = cd.contexts; ctx; ctx = ctx->next)
        for (cd_stream *s = ctx->streams; s; s = s->next)
            if (s->capture == c)
                leave_locked(s);
    for (cd_capture **link = &captures; *link; link = &(*link)->next) {
        if (*link == c) {
            *link = c->next;
            break;
        }
    }
    free(c);
}

CUresult cd_capture_refuse_locked(cd_stream *s, const char *what)
{
    s->capture->invalidated = true;
    cd_log("%s on a capturing stream is not modelled: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "
           "and the capture is invalidated", what);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult cd_capture_add_locked(cd_stream *s, cd_op *op)
{
    cd_capture *c = s->capture;
    CUresult result = CUDA_SUCCESS;
    if (c->invalidated)
        result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    else if (op->kind == CD_OP_FREE)
        result = cd_capture_refuse_locked(s, "cuMemFreeAsync");
    if (result != CUDA_SUCCESS) {
        cd_op_free_locked(op);
        return result;
    }
    cd_node *node;
    result = cd_graph_add_locked(c->graph, op, s->deps, s->dep_count, &node);
    return result == CUDA_SUCCESS ? set_deps_locked(s, &node, 1) : result;
}

CUresult cd_capture_record_event_locked(cd_stream *s, cd_event *event)
{
    if (s->capture->invalidated)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    return cd_event_set_capture_locked(event, s->capture->id, s->deps, s->dep_count);
}

CUresult cd_capture_wait_event_locked(cd_stream *s, cd_event *event)
{
    cd_capture *from = event->capture_id ? find_capture_locked(event->capture_id) : NULL;
    if (event->capture_id && !from)
        return CUDA_ERROR_CAPTURED_EVENT; /* its capture has ended */
    cd_capture *c = s->capture;
    if (!c) { /* the stream joins the event's capture */
        if (s->is_null) {
            from->invalidated = true;
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
        }
        if (from->invalidated)
            return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        CUresult result = set_deps_locked(s, event->capture_deps, event->capture_dep_count);
        if (result == CUDA_SUCCESS)
            s->capture = from;
        return result;
    }
    if (c->invalidated)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!from && event->record_seq == 0)
        return CUDA_SUCCESS; /* never recorded: nothing to wait for */
    if (from != c) {
        c->invalidated = true;
        return from ? CUDA_ERROR_STREAM_CAPTURE_MERGE : CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
    }
    return add_deps_locked(s, event->capture_deps, event->capture_dep_count);
}

/* ---- the checks of calls the capture rules restrict ---- */

CUresult cd_capture_unsafe_call_locked(const char *call)
{
    if (thread_mode == CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_SUCCESS;
    bool forbidden = false;
    for (cd_capture *c = captures; c; c = c->next) {
        bool own = pthread_equal(c->thread, pthread_self());
        if ((own && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!own && thread_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
             c->mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            c->invalidated = true;
            forbidden = true;
        }
    }
    if (!forbidden)
        return CUDA_SUCCESS;
    cd_log("%s during a stream capture, which the thread's capture mode forbids: "
           "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, and the capture is invalidated", call);
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

CUresult cd_capture_check_stream_locked(const cd_stream *s, bool invalidate)
{
    if (s->capture) {
        s->capture->invalidated = s->capture->invalidated || invalidate;
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    CUresult result = CUDA_SUCCESS;
    for (const cd_stream *b = s->is_null ? s->ctx->streams : NULL; b; b = b->next) {
        if (b->capture && !(b->flags & CU_STREAM_NON_BLOCKING)) {
            b->capture->invalidated = b->capture->invalidated || invalidate;
            result = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
        }
    }
    return result;
}

CUresult cd_capture_check_ctx_locked(const cd_ctx *ctx)
{
    CUresult result = CUDA_SUCCESS;
    for (const cd_stream *s = ctx->streams; s; s = s->next) {
        if (s->capture) {
            s->capture->invalidated = true;
            result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    return result;
}

void cd_capture_stream_gone_locked(cd_stream *s)
{
    cd_capture *c = s->capture;
    if (!c)
        return;
    if (c->origin != s) {
        leave_locked(s);
        return;
    }
    cd_graph_free_locked(c->graph);
    end_locked(c);
}

/* ---- entry points ---- */

CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    CD_ENTER("cuStreamBeginCapture");
    if (!valid_mode(mode))
        return CUDA_ERROR_INVALID_VALUE;
    cd_stream *s;
    cd_capture *c = NULL;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->is_null)
        result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
    else if (result == CUDA_SUCCESS && s->capture)
        result = CUDA_ERROR_ILLEGAL_STATE;
    else if (result == CUDA_SUCCESS && !(c = calloc(1, sizeof *c)))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    else if (result == CUDA_SUCCESS && !(c->graph = cd_graph_new_locked()))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    if (result == CUDA_SUCCESS) {
        c->id = ++last_capture_id;
        c->origin = s;
        c->mode = mode;
        c->thread = pthread_self();
        c->next = captures;
        captures = c;
        s->capture = c;
        s->dep_count = 0;
    } else {
        free(c);
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* Hands out the graph of a capture that was neither invalidated nor left unjoined; the
 * capture ends in every case but the wrong thread's. */
CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    CD_ENTER("cuStreamEndCapture");
    if (!phGraph)
        return CUDA_ERROR_INVALID_VALUE;
    *phGraph = NULL;
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    cd_capture *c = result == CUDA_SUCCESS ? s->capture : NULL;
    if (result == CUDA_SUCCESS && !c) {
        result = CUDA_ERROR_ILLEGAL_STATE;
    } else if (result == CUDA_SUCCESS && c->origin != s) {
        c->invalidated = true;
        result = CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    } else if (result == CUDA_SUCCESS && c->mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
               !pthread_equal(c->thread, pthread_self())) {
        result = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    } else if (result == CUDA_SUCCESS) {
        if (c->invalidated)
            result = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        else if (!cd_graph_joined_locked(c->graph, s->deps, s->dep_count))
            result = CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
        if (result == CUDA_SUCCESS) {
            cd_graph_publish_locked(c->graph);
            *phGraph = (CUgraph)c->graph;
        } else {
            cd_graph_free_locked(c->graph);
        }
        end_locked(c);
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* The stream hStream names, and its capture status. Asked of the legacy stream while a
 * blocking stream captures: IMPLICIT, which here does not invalidate the capture. */
static CUresult capture_status_locked(CUstream hStream, cd_stream **s, CUstreamCaptureStatus *status)
{
    CUresult result = cd_resolve_stream_locked(hStream, s);
    if (result == CUDA_SUCCESS && (*s)->is_null)
        result = cd_capture_check_stream_locked(*s, false);
    if (result == CUDA_SUCCESS)
        *status = !(*s)->capture ? CU_STREAM_CAPTURE_STATUS_NONE
                  : (*s)->capture->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                               : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return result;
}

CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    CD_ENTER("cuStreamIsCapturing");
    if (!captureStatus)
        return CUDA_ERROR_INVALID_VALUE;
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = capture_status_locked(hStream, &s, captureStatus);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* The dependency array stays valid until the next call on the stream, as documented. */
CUresult cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out,
                                   const CUgraphEdgeData **edgeData_out,
                                   size_t *numDependencies_out)
{
    CD_ENTER("cuStreamGetCaptureInfo");
    if (!captureStatus_out || (edgeData_out && !dependencies_out))
        return CUDA_ERROR_INVALID_VALUE;
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = capture_status_locked(hStream, &s, captureStatus_out);
    if (result == CUDA_SUCCESS && *captureStatus_out == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
        if (id_out)
            *id_out = s->capture->id;
        if (graph_out)
            *graph_out = (CUgraph)s->capture->graph;
        if (dependencies_out)
            *dependencies_out = (const CUgraphNode *)s->deps;
        if (edgeData_out)
            *edgeData_out = s->dep_edges;
        if (numDependencies_out)
            *numDependencies_out = s->dep_count;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out, size_t *numDependencies_out)
{
    return cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, graph_out,
                                     dependencies_out, NULL, numDependencies_out);
}

CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                cuuint64_t *id_out)
{
    return cuStreamGetCaptureInfo_v3(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode)
{
    CD_ENTER("cuThreadExchangeStreamCaptureMode");
    if (!mode || !valid_mode(*mode))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode previous = thread_mode;
    thread_mode = *mode;
    *mode = previous;
    return CUDA_SUCCESS;
}
