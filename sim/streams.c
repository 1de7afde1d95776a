/* Streams: the queues work runs on, their worker threads, the legacy NULL stream and the
 * per-thread default streams.
 *
 * Each stream is a FIFO of operations run by its own worker thread, so work really runs
 * asynchronously. The legacy NULL stream of a context is such a FIFO too, started on first
 * use, and is kept in order with the blocking streams the simple way: an operation queued
 * on the NULL stream first waits for the work already queued on every blocking stream, and
 * an operation queued on a blocking stream first waits for the work already queued on the
 * NULL stream. Each thread has a per-thread default stream in each context (CU_STREAM_PER_THREAD,
 * and the NULL handle in the _ptsz/_ptds entry points), started on first use: a blocking
 * stream like the others, gone when its thread exits.
 *
 * cuStreamDestroy returns at once, as on the real driver: the handle is dead, the work queued
 * runs, and the worker frees the stream when it is done.
 *
 * Ordering between streams uses events (events.c): a wait queued for an event holds its
 * stream until the event's done_seq reaches the record_seq seen when the wait was queued.
 * Every wait in the simulator, a worker's or a caller's, is on the one condition cd.progress. */
#include "sim/sim_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned long long last_stream_id;

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
    if (--event->refs == 0) {
        free(event->capture_deps);
        free(event);
    }
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

bool cd_op_memory_usable_locked(const cd_op *op)
{
    if (op->kind == CD_OP_COPY) {
        return cd_range_usable_locked(op->u.copy.dst, cd_copy_span(op, true), op->u.copy.dst_host_ok,
                                      op->u.copy.dst_device, true) &&
               cd_range_usable_locked(op->u.copy.src, cd_copy_span(op, false), op->u.copy.src_host_ok,
                                      op->u.copy.src_device, false);
    }
    if (op->kind == CD_OP_MEMOP)
        return cd_range_usable_locked(op->u.memop.addr, op->u.memop.size, false, op->u.memop.device,
                                      op->u.memop.write);
    if (op->kind == CD_OP_MEMSET)
        return cd_range_usable_locked(op->u.memset.dst,
                                      (op->u.memset.height - 1) * op->u.memset.pitch +
                                          op->u.memset.count * op->u.memset.element_size,
                                      false, op->u.memset.device, true);
    return true;
}

static void run_copy(const cd_op *op)
{
    for (size_t plane = 0; plane < op->u.copy.depth; plane++)
        for (size_t row = 0; row < op->u.copy.height; row++)
            memmove((void *)(op->u.copy.dst + plane * op->u.copy.dst_plane + row * op->u.copy.dst_pitch),
                    (const void *)(op->u.copy.src + plane * op->u.copy.src_plane + row * op->u.copy.src_pitch),
                    op->u.copy.width);
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
    case CD_OP_MEMOP:
        cd_memop_run(op);
        break;
    default:
        break;
    }
}

/* The part that changes the simulator's state, under the lock; `done` is false for work a
 * fault kept from happening. */
static void finish_locked(const cd_op *op, bool done)
{
    switch (op->kind) {
    case CD_OP_COPY:
        if (done)
            cd.bytes_copied += cd_copy_bytes(op);
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

static bool is_device_work(cd_op_kind kind)
{
    return kind == CD_OP_KERNEL || kind == CD_OP_COPY || kind == CD_OP_MEMSET || kind == CD_OP_MEMOP;
}

/* Whether an operation may touch its memory, as things stand: memory may have been unmapped or
 * lost its access since it was queued (cuMemUnmap is not ordered against queued work), and a
 * kernel may use memory its device cannot reach. Kernels are checked through the pointers
 * their cost functions price, or without one through their pointer parameters
 * (cd_kernel_reaches_locked); what else they touch is not seen (in execute mode, touching
 * unmapped memory crashes them). */
static bool usable_locked(const cd_op *op, const cd_ctx *ctx)
{
    return op->kind == CD_OP_KERNEL ? cd_kernel_reaches_locked(op, ctx) : cd_op_memory_usable_locked(op);
}

static const char *kind_name(cd_op_kind kind)
{
    return kind == CD_OP_KERNEL ? "kernel" : kind == CD_OP_COPY ? "copy" : kind == CD_OP_MEMOP ? "memory operation"
                                                                                                : "memset";
}

/* Whether a queued operation may still touch its memory when its turn comes. Where it may not,
 * it faults as on the GPU: it does nothing, and the context is unusable from then on. */
static bool may_run_locked(const cd_op *op, const cd_stream *s)
{
    if (usable_locked(op, s->ctx))
        return true;
    char what[160];
    snprintf(what, sizeof what, op->kind == CD_OP_KERNEL ? "a queued kernel uses memory its device cannot reach"
                                                         : "a queued %s touched memory unmapped or without access "
                                                           "since it was queued",
             kind_name(op->kind));
    cd_fault_locked(s->ctx, what);
    return false;
}

/* ---- work still running in virtual time ----
 *
 * A worker thread finishes an operation when it gets to it in real time, mostly long before
 * the timeline ends it. On the GPU it runs until then, and memory unmapped, or whose access is
 * taken away, meanwhile faults it just the same. So finished device work is kept, with its
 * context, until the host's clock passes its end, and cuMemUnmap and cuMemSetAccess check it
 * again (cd_running_recheck_locked): a program that unmaps before waiting for the work (an
 * event) gets the fault it would get on the GPU. */
typedef struct running_op {
    cd_op *op;
    cd_ctx *ctx;
} running_op;

static running_op *running;
static size_t running_count, running_cap;

/* Frees what has ended by `ended_by`, or can fault no more. */
static void drop_running_locked(sim_ns ended_by)
{
    size_t kept = 0;
    for (size_t i = 0; i < running_count; i++) {
        running_op r = running[i];
        if (r.op->vt_end > ended_by && r.ctx->alive && r.ctx->sticky_error == CUDA_SUCCESS)
            running[kept++] = r;
        else
            cd_op_free_locked(r.op);
    }
    running_count = kept;
}

/* Adds op to the work still running. Where the list cannot grow, op goes unchecked: the
 * simulator is then kinder than the GPU, never wrong. */
static bool keep_running_locked(cd_op *op, cd_ctx *ctx)
{
    if (running_count == running_cap)
        drop_running_locked(cd_host_now());
    if (running_count == running_cap && !cd_grow((void **)&running, &running_cap, sizeof *running))
        return false;
    running[running_count++] = (running_op){ op, ctx };
    return true;
}

/* Takes op, finished by its worker (done: it touched its memory, or would have in timing-only
 * mode), and keeps it while the timeline has it running. */
static void retire_op_locked(cd_op *op, cd_ctx *ctx, bool done)
{
    if (!(done && is_device_work(op->kind) && op->vt_end > cd_host_now() && keep_running_locked(op, ctx)))
        cd_op_free_locked(op);
}

void cd_running_recheck_locked(void)
{
    drop_running_locked(cd_host_now());
    for (size_t i = 0; i < running_count; i++) {
        running_op r = running[i];
        if (r.ctx->sticky_error == CUDA_SUCCESS && !usable_locked(r.op, r.ctx)) {
            char what[160];
            snprintf(what, sizeof what, "a %s still running in virtual time lost memory it uses (unmapped, or its "
                     "access taken away): nothing waited for it", kind_name(r.op->kind));
            cd_fault_locked(r.ctx, what);
        }
    }
}

/* A destroyed stream whose work is done leaves its context; its work's end is remembered there,
 * for the waits that cover the whole context. */
static void retire_locked(cd_stream *s)
{
    cd_ctx *ctx = s->ctx;
    for (cd_stream **link = &ctx->streams; *link; link = &(*link)->next) {
        if (*link == s) {
            *link = s->next;
            break;
        }
    }
    if (ctx->retired_vt_end < s->vt_end)
        ctx->retired_vt_end = s->vt_end;
    if (!(s->flags & CU_STREAM_NON_BLOCKING) && ctx->retired_blocking_vt_end < s->vt_end)
        ctx->retired_blocking_vt_end = s->vt_end;
    free(s->deps);
    free(s->dep_edges);
}

static void *worker(void *arg)
{
    cd_stream *s = arg;
    pthread_mutex_lock(&cd.lock);
    for (;;) {
        while (!s->head && !s->destroyed)
            pthread_cond_wait(&cd.progress, &cd.lock);
        if (!s->head)
            break;
        cd_op *op = s->head;
        if (op->kind == CD_OP_EVENT_WAIT)
            while (op->u.event.event->done_seq < op->u.event.seq)
                pthread_cond_wait(&cd.progress, &cd.lock);
        /* A faulted context runs nothing more. */
        bool done = s->ctx->sticky_error == CUDA_SUCCESS && may_run_locked(op, s);
        /* Timing-only: device work is checked and ordered but not done; a host function is
         * the program's own work. */
        bool run = done && (!cd.timing_only || op->kind == CD_OP_HOST_FN);
        bool device_work = run && is_device_work(op->kind);
        cd_device_work work;
        if (device_work)
            cd_device_work_begin_locked(&work, op);
        /* Work that ended before a host function runs is done for the program, which may learn
         * it from the function without a call (without moving the host's clock) and unmap. */
        if (run && op->kind == CD_OP_HOST_FN)
            drop_running_locked(op->vt_end);
        pthread_mutex_unlock(&cd.lock);
        if (run)
            run_unlocked(op);
        pthread_mutex_lock(&cd.lock);
        if (device_work)
            cd_device_work_end_locked(&work);
        finish_locked(op, done);
        s->head = op->next;
        if (!s->head)
            s->tail = NULL;
        if (op->kind == CD_OP_KERNEL)
            cd_kernel_queued_locked(op, false);
        retire_op_locked(op, s->ctx, done);
        s->completed++;
        pthread_cond_broadcast(&cd.progress);
    }
    retire_locked(s);
    pthread_cond_broadcast(&cd.progress);
    pthread_mutex_unlock(&cd.lock);
    pthread_detach(pthread_self());
    free(s);
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
    s->id = ++last_stream_id;
    if (pthread_create(&s->thread, NULL, worker, s) != 0) {
        free(s);
        return NULL;
    }
    if (!is_null) {
        s->next = ctx->streams;
        ctx->streams = s;
    }
    return s;
}

/* The handle is dead from now on; the worker lets the queued work finish, then frees it. */
static void destroy_locked(cd_stream *s)
{
    cd_capture_stream_gone_locked(s);
    s->destroyed = true;
    if (s->ctx->null_stream == s)
        s->ctx->null_stream = NULL;
    pthread_cond_broadcast(&cd.progress);
}

void cd_streams_release_ctx_locked(cd_ctx *ctx)
{
    for (cd_stream *s = ctx->streams; s; s = s->next)
        if (!s->destroyed)
            destroy_locked(s);
    if (ctx->null_stream)
        destroy_locked(ctx->null_stream);
}

static bool blocking(const cd_stream *s)
{
    return !(s->flags & CU_STREAM_NON_BLOCKING);
}

static bool busy(const cd_stream *s)
{
    return s->completed < s->submitted;
}

/* ---- per-thread default streams ---- */

/* Set inside _ptds/_ptsz calls: there the NULL handle names the per-thread stream. */
static __thread bool null_is_per_thread;

void cd_default_stream_per_thread(bool on)
{
    null_is_per_thread = on;
}

/* A thread's per-thread streams go with it. The key's value only marks threads that have one. */
static pthread_key_t per_thread_key;
static pthread_once_t per_thread_key_once = PTHREAD_ONCE_INIT;

static void release_per_thread_streams(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&cd.lock);
    for (cd_ctx *ctx = cd.contexts; ctx; ctx = ctx->next)
        for (cd_stream *s = ctx->streams; s; s = s->next)
            if (s->per_thread && !s->destroyed && pthread_equal(s->owner, pthread_self()))
                destroy_locked(s);
    pthread_mutex_unlock(&cd.lock);
}

static void make_per_thread_key(void)
{
    pthread_key_create(&per_thread_key, release_per_thread_streams);
}

static CUresult per_thread_stream_locked(cd_ctx *ctx, cd_stream **stream)
{
    for (cd_stream *s = ctx->streams; s; s = s->next) {
        if (s->per_thread && !s->destroyed && pthread_equal(s->owner, pthread_self())) {
            *stream = s;
            return CUDA_SUCCESS;
        }
    }
    pthread_once(&per_thread_key_once, make_per_thread_key);
    cd_stream *s = stream_start_locked(ctx, 0, false);
    if (!s)
        return CUDA_ERROR_OUT_OF_MEMORY;
    s->per_thread = true;
    s->owner = pthread_self();
    pthread_setspecific(per_thread_key, &per_thread_key);
    *stream = s;
    return CUDA_SUCCESS;
}

/* ---- naming and queueing ---- */

static bool special_handle(CUstream hStream)
{
    return !hStream || hStream == CU_STREAM_LEGACY || hStream == CU_STREAM_PER_THREAD;
}

CUresult cd_resolve_stream_locked(CUstream hStream, cd_stream **stream)
{
    if (special_handle(hStream)) {
        cd_ctx *ctx;
        CUresult result = cd_current_ctx_locked(&ctx);
        if (result != CUDA_SUCCESS)
            return result;
        if (hStream == CU_STREAM_PER_THREAD || (!hStream && null_is_per_thread))
            return per_thread_stream_locked(ctx, stream);
        if (!ctx->null_stream && !(ctx->null_stream = stream_start_locked(ctx, 0, true)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        *stream = ctx->null_stream;
        return CUDA_SUCCESS;
    }
    for (cd_ctx *ctx = cd.contexts; ctx; ctx = ctx->next) {
        for (cd_stream *s = ctx->alive ? ctx->streams : NULL; s; s = s->next) {
            if ((CUstream)s == hStream && !s->destroyed && !s->per_thread) {
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

CUresult cd_enqueue_locked(CUstream hStream, cd_op *op, cd_stream **stream)
{
    cd_stream *s;
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && s->capture) {
        *stream = s;
        return cd_capture_add_locked(s, op);
    }
    if (result == CUDA_SUCCESS)
        result = cd_capture_check_stream_locked(s, true);
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

CUresult cd_enqueue_staged_locked(CUstream hStream, cd_op *op)
{
    cd_stream *s;
    CUresult result = cd_enqueue_locked(hStream, op, &s);
    if (result == CUDA_SUCCESS && !s->capture)
        wait_until_locked(s, s->submitted);
    return result;
}

/* Synchronous copies and memsets are "potentially unsafe" during a capture, and cannot run on
 * a default stream that captures. */
CUresult cd_run_sync_locked(cd_op *op)
{
    cd_stream *s;
    CUresult result = cd_capture_unsafe_call_locked("a synchronous copy or memset");
    if (result == CUDA_SUCCESS)
        result = cd_resolve_stream_locked(NULL, &s);
    if (result == CUDA_SUCCESS)
        result = cd_capture_check_stream_locked(s, true);
    if (result != CUDA_SUCCESS) {
        cd_op_free_locked(op);
        return result;
    }
    result = cd_enqueue_locked(NULL, op, &s);
    if (result == CUDA_SUCCESS) {
        wait_until_locked(s, s->submitted);
        cd_host_wait_until(cd_stream_vt_end_locked(s));
        result = s->ctx->sticky_error;
    }
    return result;
}

/* ---- waiting for a whole context ---- */

/* A stream of ctx by id; NULL once it is gone (its work is then done). */
static const cd_stream *find_by_id_locked(const cd_ctx *ctx, unsigned long long id)
{
    if (ctx->null_stream && ctx->null_stream->id == id)
        return ctx->null_stream;
    for (const cd_stream *s = ctx->streams; s; s = s->next)
        if (s->id == id)
            return s;
    return NULL;
}

/* Waits for what was queued on ctx's streams (blocking_only: on its blocking ones and the NULL
 * stream) when the call began. Streams are named by id, not pointer, as a destroyed one may
 * free itself meanwhile. */
static void drain_locked(cd_ctx *ctx, bool blocking_only)
{
    size_t count = 1;
    for (const cd_stream *s = ctx->streams; s; s = s->next)
        count++;
    struct ticket {
        unsigned long long id;
        unsigned long submitted;
    } *tickets = calloc(count, sizeof *tickets);
    if (!tickets)
        abort();
    count = 0;
    for (const cd_stream *s = ctx->streams; s; s = s->next)
        if (!blocking_only || blocking(s))
            tickets[count++] = (struct ticket){s->id, s->submitted};
    if (ctx->null_stream)
        tickets[count++] = (struct ticket){ctx->null_stream->id, ctx->null_stream->submitted};
    for (size_t i = 0; i < count; i++) {
        const cd_stream *s;
        while ((s = find_by_id_locked(ctx, tickets[i].id)) && s->completed < tickets[i].submitted)
            pthread_cond_wait(&cd.progress, &cd.lock);
    }
    free(tickets);
}

void cd_ctx_drain_locked(cd_ctx *ctx)
{
    drain_locked(ctx, false);
    cd_host_wait_until(cd_ctx_vt_end_locked(ctx));
}

CUresult cd_ctx_synchronize(cd_ctx *ctx)
{
    pthread_mutex_lock(&cd.lock);
    CUresult result = ctx ? CUDA_SUCCESS : cd_current_ctx_locked(&ctx);
    if (result == CUDA_SUCCESS) {
        cd_ctx_drain_locked(ctx);
        result = ctx->sticky_error;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* ---- streams ---- */

static CUresult stream_create(CUstream *phStream, unsigned int Flags)
{
    if (!phStream || (Flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_current_ctx_locked(&ctx);
    cd_stream *s = NULL;
    if (result == CUDA_SUCCESS && !(s = stream_start_locked(ctx, Flags, false)))
        result = CUDA_ERROR_OUT_OF_MEMORY;
    if (result == CUDA_SUCCESS)
        *phStream = (CUstream)s;
    pthread_mutex_unlock(&cd.lock);
    return result;
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

/* Returns at once; the work queued runs to its end. The default streams cannot be destroyed. */
CUresult cuStreamDestroy_v2(CUstream hStream)
{
    CD_ENTER("cuStreamDestroy");
    if (special_handle(hStream))
        return CUDA_ERROR_INVALID_HANDLE;
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS)
        destroy_locked(s);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

static CUresult stream_synchronize(CUstream hStream)
{
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS)
        result = cd_capture_check_stream_locked(s, true);
    if (result == CUDA_SUCCESS)
        result = cd_capture_unsafe_call_locked("cuStreamSynchronize");
    if (result == CUDA_SUCCESS) {
        if (s->is_null) /* the NULL stream also waits for the blocking streams */
            drain_locked(s->ctx, true);
        else
            wait_until_locked(s, s->submitted);
        cd_host_wait_until(cd_stream_vt_end_locked(s));
        result = s->ctx->sticky_error;
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
    if (result == CUDA_SUCCESS)
        result = cd_capture_check_stream_locked(s, true);
    if (result == CUDA_SUCCESS)
        result = cd_capture_unsafe_call_locked("cuStreamQuery");
    /* As cuEventQuery: virtual time answers, the worker threads are waited for. */
    if (result == CUDA_SUCCESS && cd_stream_vt_end_locked(s) > cd_host_now())
        result = CUDA_ERROR_NOT_READY;
    if (result == CUDA_SUCCESS)
        wait_until_locked(s, s->submitted);
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

/* A stream's id and context (either may be NULL), read under the lock. The special handles
 * name the current context's streams, as the driver documents. Its id, as measured on the
 * H100 in every mode, is refused for a capturing stream (UNSUPPORTED) and for the legacy
 * stream while a blocking stream captures (IMPLICIT), each invalidating the capture; its
 * context is not. */
static CUresult stream_identity(CUstream hStream, unsigned long long *id, CUcontext *pctx)
{
    cd_stream *s;
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_resolve_stream_locked(hStream, &s);
    if (result == CUDA_SUCCESS && id && (s->capture || s->is_null))
        result = cd_capture_check_stream_locked(s, true);
    if (result == CUDA_SUCCESS && id)
        *id = s->id;
    if (result == CUDA_SUCCESS && pctx)
        *pctx = (CUcontext)s->ctx;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* Ids count from 1 over the process's life, the special streams included. */
CUresult cuStreamGetId(CUstream hStream, unsigned long long *streamId)
{
    CD_ENTER("cuStreamGetId");
    return streamId ? stream_identity(hStream, streamId, NULL) : CUDA_ERROR_INVALID_VALUE;
}

static CUresult stream_ctx(CUstream hStream, CUcontext *pctx)
{
    return pctx ? stream_identity(hStream, NULL, pctx) : CUDA_ERROR_INVALID_VALUE;
}

CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    CD_ENTER("cuStreamGetCtx");
    return stream_ctx(hStream, pctx);
}

/* There are no green contexts: *pGreenCtx is always NULL. */
CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx)
{
    CD_ENTER("cuStreamGetCtx");
    if (!pGreenCtx)
        return CUDA_ERROR_INVALID_VALUE;
    *pGreenCtx = NULL;
    return stream_ctx(hStream, pCtx);
}
