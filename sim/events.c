/* Events: recorded into streams, queried, synchronized, waited on by other streams, timed.
 * An event counts the records issued (record_seq) and the records executed (done_seq). */
#include "sim/sim_internal.h"

#include <stdlib.h>

static cd_event *live_events;

static cd_event *find_event_locked(CUevent hEvent)
{
    for (cd_event *e = live_events; e; e = e->next)
        if ((CUevent)e == hEvent)
            return e;
    return NULL;
}

CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    CD_ENTER("cuEventCreate");
    if (!phEvent || (Flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING |
                                         CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    cd_event *e = calloc(1, sizeof *e);
    if (!e)
        return CUDA_ERROR_OUT_OF_MEMORY;
    e->flags = Flags;
    e->refs = 1;
    pthread_mutex_lock(&cd.lock);
    e->next = live_events;
    live_events = e;
    pthread_mutex_unlock(&cd.lock);
    *phEvent = (CUevent)e;
    return CUDA_SUCCESS;
}

/* Returns at once; queued records and waits keep the event alive until they ran. */
CUresult cuEventDestroy_v2(CUevent hEvent)
{
    CD_ENTER("cuEventDestroy");
    pthread_mutex_lock(&cd.lock);
    cd_event **link = &live_events;
    while (*link && (CUevent)*link != hEvent)
        link = &(*link)->next;
    cd_event *e = *link;
    if (e) {
        *link = e->next;
        cd_event_unref_locked(e);
    }
    pthread_mutex_unlock(&cd.lock);
    return e ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

/* Queues a record of hEvent (its next one), or a wait for its last record, on hStream. The op
 * holds a reference to the event. Waiting for an event never recorded waits for nothing. */
static CUresult enqueue_event_op(cd_op_kind kind, CUevent hEvent, CUstream hStream)
{
    cd_op *op = cd_op_new(kind);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    bool record = kind == CD_OP_EVENT_RECORD;
    pthread_mutex_lock(&cd.lock);
    cd_event *e = find_event_locked(hEvent);
    CUresult result = !e ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
    if (e && (record || e->record_seq > 0)) {
        e->refs++;
        op->u.event.event = e;
        op->u.event.seq = e->record_seq + (record ? 1 : 0);
        cd_stream *s;
        result = cd_enqueue_locked(hStream, op, &s); /* which frees op when it fails */
        if (result == CUDA_SUCCESS && record)
            e->record_seq++;
        op = NULL;
    }
    free(op);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    CD_ENTER("cuEventRecord");
    return enqueue_event_op(CD_OP_EVENT_RECORD, hEvent, hStream);
}

CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags)
{
    CD_ENTER("cuEventRecordWithFlags");
    if (flags != CU_EVENT_RECORD_DEFAULT)
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue_event_op(CD_OP_EVENT_RECORD, hEvent, hStream);
}

CUresult cuEventQuery(CUevent hEvent)
{
    CD_ENTER("cuEventQuery");
    pthread_mutex_lock(&cd.lock);
    cd_event *e = find_event_locked(hEvent);
    CUresult result = !e ? CUDA_ERROR_INVALID_HANDLE
                      : e->done_seq < e->record_seq || e->vt_recorded > cd_host_now()
                          ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuEventSynchronize(CUevent hEvent)
{
    CD_ENTER("cuEventSynchronize");
    pthread_mutex_lock(&cd.lock);
    cd_event *e = find_event_locked(hEvent);
    if (e) {
        unsigned long target = e->record_seq;
        while (e->done_seq < target)
            pthread_cond_wait(&cd.progress, &cd.lock);
        cd_host_wait_until(e->vt_recorded);
    }
    CUresult result = e ? cd.sticky_error : CUDA_ERROR_INVALID_HANDLE;
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
    else if (start->done_seq < start->record_seq || end->done_seq < end->record_seq)
        result = CUDA_ERROR_NOT_READY;
    else
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

CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    CD_ENTER("cuStreamWaitEvent");
    if (Flags != CU_EVENT_WAIT_DEFAULT)
        return CUDA_ERROR_INVALID_VALUE;
    return enqueue_event_op(CD_OP_EVENT_WAIT, hEvent, hStream);
}
