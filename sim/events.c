/* Events: recorded into streams, queried, synchronized, waited on by other streams, timed.
 * An event counts the records issued (record_seq) and the records executed (done_seq). An
 * event belongs to the context current when it was made, and dies with it.
 *
 * Recorded into a capturing stream, an event is not queued: it remembers where the capture
 * stood (capture.c), so that a stream waiting for it joins the capture there; until recorded
 * again outside a capture, it cannot be queried or synchronized (CUDA_ERROR_CAPTURED_EVENT). */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

static cd_event *live_events;

static cd_event *find_event_locked(CUevent hEvent)
{
    for (cd_event *e = live_events; e; e = e->next)
        if ((CUevent)e == hEvent)
            return e;
    return NULL;
}

CUresult cd_event_set_capture_locked(cd_event *event, unsigned long long capture_id,
                                     cd_node *const *deps, size_t dep_count)
{
    cd_node **copy = NULL;
    if (dep_count > 0) {
        if (!(copy = malloc(dep_count * sizeof *copy)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        memcpy(copy, deps, dep_count * sizeof *copy);
    }
    free(event->capture_deps);
    event->capture_id = capture_id;
    event->capture_deps = copy;
    event->capture_dep_count = dep_count;
    return CUDA_SUCCESS;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    CD_ENTER("cuEventCreate");
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    CUresult result = cd_current_ctx(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    cd_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    e->ctx = ctx;
    e->refs = 1;
    pthread_mutex_lock(&cd.lock);
    e->next = live_events;
    live_events = e;
    pthread_mutex_unlock(&cd.lock);
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

static void forget_locked(cd_event **link)
{
    cd_event *e = *link;
    *link = e->next;
    cd_event_unref_locked(e);
}

/* Returns at once; queued records and waits keep the event alive until they ran. */
CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CD_ENTER("cuEventDestroy");
    pthread_mutex_lock(&cd.lock);
    cd_event **link = &live_events;
    while (*link && (CUevent)*link != hEvent)
        link = &(*link)->next;
    bool found = *link != NULL;
    if (found)
        forget_locked(link);
    pthread_mutex_unlock(&cd.lock);
    return found ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

void cd_events_release_ctx_locked(const cd_ctx *ctx)
{
    for (cd_event **link = &live_events; *link;) {
        if ((*link)->ctx == ctx)
            forget_locked(link);
        else
            link = &(*link)->next;
    }
}

/* Queues a record of hEvent (its next one) on hStream. The op holds a reference to the event.
 * The event and the stream must share a context. */
static CUresult record(CUevent hEvent, CUstream hStream)
{
    pthread_mutex_lock(&cd.lock);
    cd_event *e = find_event_locked(hEvent);
    cd_stream *s;
    CUresult result = !e ? CUDA_ERROR_INVALID_HANDLE : cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->ctx != e->ctx)
        result = CUDA_ERROR_INVALID_HANDLE;
    if (result == CUDA_SUCCESS && s->capture) {
        result = cd_capture_record_event_locked(s, e);
    } else if (result == CUDA_SUCCESS) {
        cd_op *op = cd_op_new(CD_OP_EVENT_RECORD);
        result = !op ? CUDA_ERROR_OUT_OF_MEMORY : cd_event_set_capture_locked(e, 0, NULL, 0);
        if (result == CUDA_SUCCESS) {
            e->refs++;
            op->u.event.event = e;
            op->u.event.seq = e->record_seq + 1;
            result = cd_enqueue_locked(hStream, op, &s);
            op = NULL; /* cd_enqueue_locked owns it, and frees it when it fails */
        }
        free(op);
        if (result == CUDA_SUCCESS)
            e->record_seq++;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CD_ENTER("cuEventRecord");
    return record(hEvent, hStream);
}

/* CU_EVENT_RECORD_EXTERNAL (an event-record node in a capture) is not modelled. */
CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    CD_ENTER("cuEventRecordWithFlags");
    if (flags == CU_EVENT_RECORD_EXTERNAL)
        return cd_unsupported("cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL)");
    if (flags != CU_EVENT_RECORD_DEFAULT)
        return CUDA_ERROR_INVALID_VALUE;
    return record(hEvent, hStream);
}

/* Queries and waits are refused for an event last recorded into a capture, and, as potentially
 * unsafe calls, where the thread's capture mode forbids them. */
static CUresult check_queryable_locked(const cd_event *e, const char *call)
{
    if (!e)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->capture_id)
        return CUDA_ERROR_CAPTURED_EVENT;
    return cd_capture_unsafe_call_locked(call);
}

/* Whether the event's last record is complete. Virtual time alone answers, so that a program
 * polling a query sees the same answers, and its clock the same time, on every run; work that
 * virtual time says is done is waited for if the worker threads are behind. */
static CUresult event_complete_locked(const cd_event *e)
{
    if (e->vt_recorded > cd_host_now())
        return CUDA_ERROR_NOT_READY;
    while (e->done_seq < e->record_seq)
        pthread_cond_wait(&cd.progress, &cd.lock);
    return CUDA_SUCCESS;
}

CUresult cuEventQuery(CUevent hEvent)
{
    CD_ENTER("cuEventQuery");
    pthread_mutex_lock(&cd.lock);
    cd_event *e = find_event_locked(hEvent);
    CUresult result = check_queryable_locked(e, "cuEventQuery");
    if (result == CUDA_SUCCESS)
        result = event_complete_locked(e);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    CD_ENTER("cuEventSynchronize");
    pthread_mutex_lock(&cd.lock);
    cd_event *e = find_event_locked(hEvent);
    CUresult result = check_queryable_locked(e, "cuEventSynchronize");
    if (result == CUDA_SUCCESS) {
        unsigned long target = e->record_seq;
        while (e->done_seq < target)
            pthread_cond_wait(&cd.progress, &cd.lock);
        cd_host_wait_until(e->vt_recorded);
        result = e->ctx->sticky_error;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

static CUresult elapsed_time(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    if (!pMilliseconds)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    cd_event *start = find_event_locked(hStart), *end = find_event_locked(hEnd);
    CUresult result = CUDA_SUCCESS;
    if (!start || !end || start->record_seq == 0 || end->record_seq == 0 ||
        ((start->flags | end->flags) & CU_EVENT_DISABLE_TIMING))
        result = CUDA_ERROR_INVALID_HANDLE;
    else if (start->capture_id || end->capture_id)
        result = CUDA_ERROR_CAPTURED_EVENT;
    else if ((result = event_complete_locked(start)) == CUDA_SUCCESS)
        result = event_complete_locked(end);
    if (result == CUDA_SUCCESS)
        *pMilliseconds = (float)(((double)end->vt_recorded - (double)start->vt_recorded) / 1e6);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CD_ENTER("cuEventElapsedTime");
    return elapsed_time(pMilliseconds, hStart, hEnd);
}

CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    CD_ENTER("cuEventElapsedTime");
    return elapsed_time(pMilliseconds, hStart, hEnd);
}

/* Queues a wait for the event's last record; waiting for an event never recorded waits for
 * nothing. Events of other contexts may be waited for. A capturing stream, or an event
 * recorded into a capture, makes it a matter for the capture (capture.c). */
CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    CD_ENTER("cuStreamWaitEvent");
    if (Flags == CU_EVENT_WAIT_EXTERNAL)
        return cd_unsupported("cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL)");
    if (Flags != CU_EVENT_WAIT_DEFAULT)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    cd_event *e = find_event_locked(hEvent);
    cd_stream *s;
    CUresult result = !e ? CUDA_ERROR_INVALID_HANDLE : cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && (s->capture || e->capture_id)) {
        result = cd_capture_wait_event_locked(s, e);
    } else if (result == CUDA_SUCCESS && e->record_seq > 0) {
        cd_op *op = cd_op_new(CD_OP_EVENT_WAIT);
        if (op) {
            e->refs++;
            op->u.event.event = e;
            op->u.event.seq = e->record_seq;
            result = cd_enqueue_locked(hStream, op, &s);
        } else {
            result = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}
