/* Virtual time for the simulator's operations: each is priced by the timing model
 * (timing.h) as it is queued, and the host clock follows the calls the program makes.
 *
 * Times are fixed at enqueue, from the stream's previous work, the events it waits for and
 * the engines, so they do not depend on when the worker threads really run: the same
 * program gives the same timeline on every machine. Whether work is done is still decided
 * by the worker threads (a query answers NOT_READY until both the real work and its
 * virtual end are behind the caller). */
#include "sim/sim_internal.h"

#include <stdatomic.h>
#include <string.h>

static _Atomic sim_ns host_now;
static _Atomic sim_ns host_waited; /* of host_now, the time the host spent waiting for devices */

sim_ns cd_host_now(void)
{
    return atomic_load(&host_now);
}

void cd_host_charge(double ns)
{
    atomic_fetch_add(&host_now, (sim_ns)(ns + 0.5));
}

void cd_host_wait_until(sim_ns t)
{
    sim_ns now = atomic_load(&host_now);
    while (now < t && !atomic_compare_exchange_weak(&host_now, &now, t))
        ;
    if (now < t) {
        atomic_fetch_add(&host_waited, t - now);
        cd_timeline_host_wait(now, t);
    }
}

sim_ns cd_host_waited(void)
{
    return atomic_load(&host_waited);
}

/* Calls that queue work cost a launch; those whose cost depends on a size are charged by
 * their own code (cd_host_charge with sim_sized_ns); every other call costs call_ns. */
double cd_call_ns(const char *base_name)
{
    static const char *const enqueue_prefixes[] = {"cuLaunch", "cuMemcpy", "cuMemset",
                                                   "cuEventRecord", "cuStreamWaitEvent",
                                                   "cuGraphLaunch"};
    static const char *const sized[] = {"cuMemAlloc", "cuMemAllocPitch", "cuMemAllocAsync",
                                        "cuMemAddressReserve", "cuMemCreate", "cuMemMap",
                                        "cuMemSetAccess", "cuMemUnmap", "cuMemRelease",
                                        "cuMemHostAlloc", "cuMemAllocHost", "cuMemFreeHost",
                                        "cuMemHostRegister"};
    const sim_calibration *cal = sim_calibration_now();
    for (size_t i = 0; i < sizeof sized / sizeof *sized; i++)
        if (!strcmp(base_name, sized[i]))
            return 0;
    for (size_t i = 0; i < sizeof enqueue_prefixes / sizeof *enqueue_prefixes; i++)
        if (!strncmp(base_name, enqueue_prefixes[i], strlen(enqueue_prefixes[i])))
            return cal->launch_ns;
    return cal->call_ns;
}

static sim_ns later(sim_ns a, sim_ns b)
{
    return a > b ? a : b;
}

/* The legacy NULL stream and the blocking streams of its context wait for one another. */
static sim_ns legacy_ready_locked(const cd_stream *s)
{
    sim_ns ready = 0;
    if (s->is_null) {
        ready = s->ctx->retired_blocking_vt_end;
        for (const cd_stream *b = s->ctx->streams; b; b = b->next)
            if (!(b->flags & CU_STREAM_NON_BLOCKING))
                ready = later(ready, b->vt_end);
    } else if (!(s->flags & CU_STREAM_NON_BLOCKING) && s->ctx->null_stream) {
        ready = s->ctx->null_stream->vt_end;
    }
    return ready;
}

static sim_ns schedule_copy_locked(sim_timeline *t, const cd_op *op, sim_ns ready, sim_ns *start,
                                   sim_engine *engine)
{
    const sim_calibration *cal = sim_calibration_now();
    double bytes = (double)cd_copy_bytes(op);
    cd_memory_kind dst = cd_memory_kind_locked(op->u.copy.dst);
    cd_memory_kind src = cd_memory_kind_locked(op->u.copy.src);
    *engine = dst == CD_MEMORY_DEVICE && src == CD_MEMORY_DEVICE ? SIM_ENGINE_COMPUTE
              : dst == CD_MEMORY_DEVICE || src != CD_MEMORY_DEVICE ? SIM_ENGINE_H2D
                                                                   : SIM_ENGINE_D2H;
    if (dst == CD_MEMORY_DEVICE && src == CD_MEMORY_DEVICE)
        return sim_timeline_compute(t, ready, cal->copy_latency_ns + bytes / cal->d2d_copy * 1e9,
                                    start);
    if (dst == CD_MEMORY_DEVICE)
        return sim_timeline_copy(t, SIM_ENGINE_H2D, ready, bytes,
                                 src == CD_MEMORY_PINNED ? cal->pinned_h2d : cal->pageable_h2d, start);
    if (src == CD_MEMORY_DEVICE)
        return sim_timeline_copy(t, SIM_ENGINE_D2H, ready, bytes,
                                 dst == CD_MEMORY_PINNED ? cal->pinned_d2h : cal->pageable_d2h, start);
    /* Host to host: the driver copies through the device, at the pageable rate. */
    return sim_timeline_copy(t, SIM_ENGINE_H2D, ready, bytes, cal->pageable_h2d, start);
}

static sim_ns schedule_memset_locked(sim_timeline *t, const cd_op *op, sim_ns ready, sim_ns *start)
{
    const sim_calibration *cal = sim_calibration_now();
    double bytes = (double)op->u.memset.count * op->u.memset.element_size * op->u.memset.height;
    if (cd_memory_kind_locked(op->u.memset.dst) != CD_MEMORY_DEVICE) /* written over the link */
        return sim_timeline_zero_copy(t, ready, cal->copy_latency_ns, bytes, 0, start);
    return sim_timeline_compute(t, ready, cal->copy_latency_ns + bytes / cal->memset_rate * 1e9, start);
}

void cd_schedule_locked(cd_stream *s, cd_op *op)
{
    sim_timeline *t = &cd.devices[s->ctx->device].timeline;
    sim_ns queued = cd_host_now();
    sim_timeline_forget_before(t, queued);
    sim_ns ready = later(later(queued, s->vt_end), legacy_ready_locked(s)), start = ready;
    sim_ns end = ready;
    sim_engine engine = SIM_ENGINE_COMPUTE;
    switch (op->kind) {
    case CD_OP_KERNEL: {
        double flops, device_bytes, host_bytes, host_written;
        cd_kernel_price_locked(op, &flops, &device_bytes, &host_bytes, &host_written);
        end = sim_timeline_zero_copy(t, ready, sim_kernel_ns(flops, device_bytes), host_bytes,
                                     host_bytes > 0 ? 1 - host_written / host_bytes : 0, &start);
        break;
    }
    case CD_OP_COPY:
        end = schedule_copy_locked(t, op, ready, &start, &engine);
        if (cd_memory_kind_locked(op->u.copy.dst) == CD_MEMORY_PAGEABLE ||
            cd_memory_kind_locked(op->u.copy.src) == CD_MEMORY_PAGEABLE)
            cd_host_wait_until(end); /* the driver stages pageable memory: the host waits */
        break;
    case CD_OP_MEMSET:
        end = schedule_memset_locked(t, op, ready, &start);
        break;
    case CD_OP_EVENT_RECORD:
        op->u.event.event->vt_recorded = ready;
        break;
    case CD_OP_EVENT_WAIT:
        end = later(ready, op->u.event.event->vt_recorded);
        break;
    default:
        break;
    }
    op->vt_end = end;
    s->vt_end = end;
    cd_timeline_op_locked(s, op, engine, queued, start, end);
}

sim_ns cd_stream_vt_end_locked(const cd_stream *s)
{
    return later(s->vt_end, s->is_null ? legacy_ready_locked(s) : 0);
}

sim_ns cd_ctx_vt_end_locked(const cd_ctx *ctx)
{
    sim_ns end = later(ctx->retired_vt_end, ctx->null_stream ? ctx->null_stream->vt_end : 0);
    for (const cd_stream *s = ctx->streams; s; s = s->next)
        end = later(end, s->vt_end);
    return end;
}

sim_ns cd_device_vt_end_locked(int device)
{
    sim_ns end = 0;
    for (const cd_ctx *ctx = cd.contexts; ctx; ctx = ctx->next)
        if (ctx->device == device)
            end = later(end, cd_ctx_vt_end_locked(ctx));
    return end;
}

unsigned long long sim_host_ns(void)
{
    return cd_host_now();
}

unsigned long long sim_engine_busy_ns(int device, int engine)
{
    if (device < 0 || device >= CD_MAX_DEVICES || engine < 0 || engine >= SIM_ENGINE_COUNT)
        return 0;
    pthread_mutex_lock(&cd.lock);
    sim_ns busy = cd.devices[device].timeline.busy_ns[engine];
    pthread_mutex_unlock(&cd.lock);
    return busy;
}

unsigned long long sim_device_done_ns(int device)
{
    if (device < 0 || device >= CD_MAX_DEVICES)
        return 0;
    pthread_mutex_lock(&cd.lock);
    sim_ns done = cd_device_vt_end_locked(device);
    pthread_mutex_unlock(&cd.lock);
    return done;
}

const char *sim_calibration_version(void)
{
    return sim_calibration_now()->version;
}
