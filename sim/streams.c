/* Streams: the queues work runs on, their worker threads, and the legacy NULL stream.
 *
 * Each stream is a FIFO of operations run by its own worker thread, so work really runs
 * asynchronously. The legacy NULL stream of a context is such a FIFO too, started on first
 * use, and is kept in order with the blocking streams the simple way: an operation queued
 * on the NULL stream first waits for the work already queued on every blocking stream, and
 * an operation queued on a blocking stream first waits for the work already queued on the
 * NULL stream. The per-thread default stream (CU_STREAM_PER_THREAD, the _ptsz/_ptds entry
 * points) is treated as the legacy NULL stream.
 *
 * Ordering between streams uses events (events.c): a wait queued for an event holds its
 * stream until the event's done_seq reaches the record_seq seen when the wait was queued.
 * Every wait in the simulator, a worker's or a caller's, is on the one condition cd.progress. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

/* ---- operations ---- */

cd_op *cd_op_new(cd_op_kind kind)
{
    cd_op *op = calloc(1, sizeof *op);
    if (op)
        op->kind = kind;
    return op;
}

void cd_event_unref_locked(cd_event *event)
{
    if (--event->refs == 0)
        free(event);
}

void cd_op_free_locked(cd_op *op)
{
    if (op->kind == CD_OP_EVENT_RECORD || op->kind == CD_OP_EVENT_WAIT)
        cd_event_unref_locked(op->u.event.event);
    if (op->kind == CD_OP_KERNEL)
        free(op->u.launch.args);
    free(op);
}

CUresult cd_op_clone_locked(const cd_op *op, cd_op **copy)
{
    cd_op *c = malloc(sizeof *c);
    if (!c)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *c = *op;
    c->next = NULL;
    if (op->kind == CD_OP_KERNEL) {
        CUresult result = cd_kernel_args_dup_locked(op, &c->u.launch.args);
        if (result != CUDA_SUCCESS) {
            free(c);
            return result;
        }
    }
    if (op->kind == CD_OP_EVENT_RECORD || op->kind == CD_OP_EVENT_WAIT)
        op->u.event.event->refs++;
    *copy = c;
    return CUDA_SUCCESS;
}

static void run_copy(const cd_op *op)
{
    for (size_t row = 0; row < op->u.copy.height; row++)
        memmove((void *)(op->u.copy.dst + row * op->u.copy.dst_pitch),
                (const void *)(op->u.copy.src + row * op->u.copy.src_pitch), op->u.copy.width);
}

static void run_memset(const cd_op *op)
{
    for (size_t row = 0; row < op->u.memset.height; row++) {
        uintptr_t dst = op->u.memset.dst + row * op->u.memset.pitch;
        size_t count = op->u.memset.count;
        switch (op->u.memset.element_size) {
        case 1:
            memset((void *)dst, (int)op->u.memset.value, count);
            break;
        case 2:
            for (size_t i = 0; i < count; i++)
                ((uint16_t *)dst)[i] = (uint16_t)op->u.memset.value;
            break;
        default:
            for (size_t i = 0; i < count; i++)
                ((uint32_t *)dst)[i] = op->u.memset.value;
            break;
        }
    }
}

/* The part of an operation that runs without the lock. */
static void run_unlocked(const cd_op *op)
{
    switch (op->kind) {
    case CD_OP_KERNEL:
        cd_kernel_run(op);
        break;
    case CD_OP_COPY:
        run_copy(op);
        break;
    case CD_OP_MEMSET:
        run_memset(op);
        break;
    case CD_OP_HOST_FN:
        op->u.host_fn.fn(op->u.host_fn.user_data);
        break;
    default:
        break;
    }
}

/* The part that changes the simulator's state, under the lock. */
static void finish_locked(const cd_op *op)
{
    switch (op->kind) {
    case CD_OP_COPY:
        cd.bytes_copied += op->u.copy.width * op->u.copy.height;
        break;
    case CD_OP_EVENT_RECORD: {
        cd_event *event = op->u.event.event;
        if (event->done_seq < op->u.event.seq)
            event->done_seq = op->u.event.seq;
        break;
    }
    case CD_OP_FREE:
        cd_free_device_locked(op->u.free.ptr);
        break;
    default:
        break;
    }
}

/* ---- worker threads ---- */

/* A queued copy or memset whose memory was unmapped (or lost its access) after it was
 * queued faults as on the real GPU: it does nothing, and the context is unusable from then
 * on (a sticky CUDA_ERROR_ILLEGAL_ADDRESS). Kernels are not checked: they crash instead. */
static bool memory_still_usable_locked(const cd_op *op)
{
    uintptr_t dst, src = 0;
    size_t dst_span, src_span = 0;
    if (op->kind == CD_OP_COPY) {
        size_t rows = op->u.copy.height - 1;
        dst = op->u.copy.dst;
        src = op->u.copy.src;
        dst_span = rows * op->u.copy.dst_pitch + op->u.copy.width;
        src_span = rows * op->u.copy.src_pitch + op->u.copy.width;
    } else if (op->kind == CD_OP_MEMSET) {
        dst = op->u.memset.dst;
        dst_span = (op->u.memset.height - 1) * op->u.memset.pitch +
                   op->u.memset.count * op->u.memset.element_size;
    } else {
        return true;
    }
    if (cd_range_usable(dst, dst_span, true) && cd_range_usable(src, src_span, true))
        return true;
    if (cd.sticky_error == CUDA_SUCCESS) {
        cd.sticky_error = CUDA_ERROR_ILLEGAL_ADDRESS;
        cd_log("a queued %s touched memory unmapped since it was queued: "
               "CUDA_ERROR_ILLEGAL_ADDRESS, and every later call fails",
               op->kind == CD_OP_COPY ? "copy" : "memset");
    }
    return false;
}

static void *worker(void *arg)
{
    cd_stream *s = arg;
    pthread_mutex_lock(&cd.lock);
    for (;;) {
        while (!s->head && !s->stopping)
            pthread_cond_wait(&cd.progress, &cd.lock);
        if (!s->head)
            break;
        cd_op *op = s->head;
        if (op->kind == CD_OP_EVENT_WAIT)
            while (op->u.event.event->done_seq < op->u.event.seq)
                pthread_cond_wait(&cd.progress, &cd.lock);
        bool faulted = !memory_still_usable_locked(op);
        /* Timing-only: device work is checked and ordered but not done; a host function is
         * the program's own work. */
        bool run = !faulted && (!cd.timing_only || op->kind == CD_OP_HOST_FN);
        pthread_mutex_unlock(&cd.lock);
        if (run)
            run_unlocked(op);
        pthread_mutex_lock(&cd.lock);
        if (!faulted)
            finish_locked(op);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        if (op->kind == CD_OP_KERNEL)
            cd_kernel_queued_locked(op, false);
        cd_op_free_locked(op);
        s->completed++;
        pthread_cond_broadcast(&cd.progress);
    }
    pthread_mutex_unlock(&cd.lock);
    return NULL;
}

static cd_stream *stream_start_locked(cd_ctx *ctx, unsigned flags, bool is_null)
{
    cd_stream *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->ctx = ctx;
    s->flags = flags;
    s->is_null = is_null;
    if (pthread_create(&s->thread, NULL, worker, s) != 0) {
        free(s);
        return NULL;
    }
    return s;
}

static bool blocking(const cd_stream *s)
{
    return !(s->flags & CU_STREAM_NON_BLOCKING);
}

static bool busy(const cd_stream *s)
{
    return s->completed < s->submitted;
}

/* Finds the stream a handle names; the NULL stream of the current context is started on
 * first use. */
CUresult cd_resolve_stream_locked(CUstream hStream, cd_stream **stream)
{
    if (hStream == NULL || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD) {
        cd_ctx *ctx;
        CUresult result = cd_current_ctx(&ctx);
        if (result != CUDA_SUCCESS)
            return result;
        if (!ctx->null_stream && !(ctx->null_stream = stream_start_locked(ctx, 0, true)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        *stream = ctx->null_stream;
        return CUDA_SUCCESS;
    }
    for (int d = 0; d < cd.device_count; d++) {
        for (cd_stream *s = cd.devices[d].primary.streams; s; s = s->next) {
            if ((CUstream)s == hStream) {
                *stream = s;
                return CUDA_SUCCESS;
            }
        }
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

static void append_locked(cd_stream *s, cd_op *op)
{
    op->next = NULL;
    if (s->tail)
        s->tail->next = op;
    else
        s->head = op;
    s->tail = op;
    s->submitted++;
    if (op->kind == CD_OP_KERNEL)
        cd_kernel_queued_locked(op, true);
}

/* Makes `waiter` wait for the work queued on `target` so far (an internal event). */
static bool order_after_locked(cd_stream *waiter, cd_stream *target)
{
    cd_event *marker = calloc(1, sizeof *marker);
    cd_op *record = cd_op_new(CD_OP_EVENT_RECORD), *wait = cd_op_new(CD_OP_EVENT_WAIT);
    if (!marker || !record || !wait) {
        free(marker);
        free(record);
        free(wait);
        return false;
    }
    marker->flags = CU_EVENT_DISABLE_TIMING;
    marker->refs = 2;
    marker->record_seq = 1;
    record->u.event.event = wait->u.event.event = marker;
    record->u.event.seq = wait->u.event.seq = 1;
    append_locked(target, record);
    append_locked(waiter, wait);
    return true;
}

static bool legacy_order_locked(cd_stream *s)
{
    if (s->is_null) {
        for (cd_stream *b = s->ctx->streams; b; b = b->next)
            if (blocking(b) && busy(b) && !order_after_locked(s, b))
                return false;
        return true;
    }
    cd_stream *null_stream = s->ctx->null_stream;
    if (blocking(s) && null_stream && busy(null_stream))
        return order_after_locked(s, null_stream);
    return true;
}

static bool capturable(cd_op_kind kind)
{
    return kind == CD_OP_KERNEL || kind == CD_OP_COPY || kind == CD_OP_MEMSET ||
           kind == CD_OP_HOST_FN;
}

CUresult cd_enqueue_locked(CUstream hStream, cd_op *op, cd_stream **stream)
{
    cd_stream *s;
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->capture) {
        if (!capturable(op->kind)) {
            s->capture_invalidated = true;
            result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        } else {
            op->next = NULL;
            if (s->capture->tail)
                s->capture->tail->next = op;
            else
                s->capture->head = op;
            s->capture->tail = op;
            *stream = s;
            return CUDA_SUCCESS;
        }
    }
    if (result == CUDA_SUCCESS && !legacy_order_locked(s))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    if (result != CUDA_SUCCESS) {
        cd_op_free_locked(op);
        return result;
    }
    cd_schedule_locked(s, op);
    append_locked(s, op);
    pthread_cond_broadcast(&cd.progress);
    *stream = s;
    return CUDA_SUCCESS;
}

CUresult cd_enqueue(CUstream hStream, cd_op *op)
{
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_enqueue_locked(hStream, op, &s);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

static void wait_until_locked(const cd_stream *s, unsigned long ticket)
{
    while (s->completed < ticket)
        pthread_cond_wait(&cd.progress, &cd.lock);
}

CUresult cd_run_sync(cd_op *op)
{
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_enqueue_locked(NULL, op, &s);
    if (result == CUDA_SUCCESS) {
        wait_until_locked(s, s->submitted);
        cd_host_wait_until(cd_stream_vt_end_locked(s));
        result = cd.sticky_error;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* Waits for what was queued on ctx's streams when the call began. */
static void drain_ctx_locked(cd_ctx *ctx, bool blocking_only)
{
    unsigned long count = 0;
    for (cd_stream *s = ctx->streams; s; s = s->next)
        count++;
    unsigned long *tickets = calloc(count + 1, sizeof *tickets);
    cd_stream **streams = calloc(count + 1, sizeof *streams);
    if (!tickets || !streams)
        abort();
    count = 0;
    for (cd_stream *s = ctx->streams; s; s = s->next)
        if (!blocking_only || blocking(s))
            streams[count] = s, tickets[count++] = s->submitted;
    if (ctx->null_stream)
        streams[count] = ctx->null_stream, tickets[count++] = ctx->null_stream->submitted;
    for (unsigned long i = 0; i < count; i++)
        wait_until_locked(streams[i], tickets[i]);
    free(tickets);
    free(streams);
}

CUresult cd_ctx_synchronize(cd_ctx *ctx)
{
    if (!ctx) {
        CUresult result = cd_current_ctx(&ctx);
        if (result != CUDA_SUCCESS)
            return result;
    }
    pthread_mutex_lock(&cd.lock);
    drain_ctx_locked(ctx, false);
    cd_host_wait_until(cd_ctx_vt_end_locked(ctx));
    CUresult result = cd.sticky_error;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* ---- streams ---- */

static CUresult stream_create(CUstream *phStream, unsigned int Flags)
{
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    CUresult result = cd_current_ctx(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    pthread_mutex_lock(&cd.lock);
    cd_stream *s = stream_start_locked(ctx, Flags, false);
    if (s) {
        s->next = ctx->streams;
        ctx->streams = s;
        *phStream = (CUstream)s;
    }
    pthread_mutex_unlock(&cd.lock);
    return s ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    CD_ENTER("cuStreamCreate");
    return stream_create(phStream, Flags);
}

/* Priorities are accepted and ignored: every stream has its own thread. */
CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    CD_ENTER("cuStreamCreateWithPriority");
    (void)priority;
    return stream_create(phStream, flags);
}

/* Unlike the real driver, which returns at once, this waits for the stream's queued work. */
CUresult cuStreamDestroy_v2(CUstream hStream)
{
    CD_ENTER("cuStreamDestroy");
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->is_null)
        result = CUDA_ERROR_INVALID_HANDLE;
    if (result != CUDA_SUCCESS) {
        pthread_mutex_unlock(&cd.lock);
        return result;
    }
    for (cd_stream **link = &s->ctx->streams; *link; link = &(*link)->next) {
        if (*link == s) {
            *link = s->next;
            break;
        }
    }
    s->stopping = true;
    pthread_cond_broadcast(&cd.progress);
    pthread_mutex_unlock(&cd.lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_lock(&cd.lock);
    if (s->capture) {
        for (cd_op *op = s->capture->head, *next; op; op = next) {
            next = op->next;
            cd_op_free_locked(op);
        }
        free(s->capture);
    }
    pthread_mutex_unlock(&cd.lock);
    free(s);
    return CUDA_SUCCESS;
}

static CUresult stream_synchronize(CUstream hStream)
{
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->capture) {
        s->capture_invalidated = true;
        result = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (result == CUDA_SUCCESS) {
        if (s->is_null) /* the NULL stream also waits for the blocking streams */
            drain_ctx_locked(s->ctx, true);
        else
            wait_until_locked(s, s->submitted);
        cd_host_wait_until(cd_stream_vt_end_locked(s));
        result = cd.sticky_error;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuStreamSynchronize(CUstream hStream)
{
    CD_ENTER("cuStreamSynchronize");
    return stream_synchronize(hStream);
}

CUresult cuStreamQuery(CUstream hStream)
{
    CD_ENTER("cuStreamQuery");
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && (busy(s) || cd_stream_vt_end_locked(s) > cd_host_now()))
        result = CUDA_ERROR_NOT_READY;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData)
{
    CD_ENTER("cuLaunchHostFunc");
    if (!fn)
        return CUDA_ERROR_INVALID_VALUE;
    cd_op *op = cd_op_new(CD_OP_HOST_FN);
    if (!op)
        return CUDA_ERROR_OUT_OF_MEMORY;
    op->u.host_fn.fn = fn;
    op->u.host_fn.user_data = userData;
    return cd_enqueue(hStream, op);
}
