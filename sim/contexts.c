/* Contexts: each device's primary context and created ones, every thread's stack of current
 * contexts, their teardown, peer access between them, and the device memory the driver holds
 * for them.
 *
 * A context is alive from its creation (a primary one: from a retain) until cuCtxDestroy (a
 * primary one: its last release, or a reset). Its teardown waits for its work, then frees what
 * it owns: streams, events, cuMemAlloc and pinned host memory; their handles are dead from
 * then on. It is the way out of a fault, whose error sticks to the context until then. VMM and pool memory belong to no context and stay. A context's struct is never
 * freed, so that a stale handle is recognised as dead rather than taken for a later context
 * made at the same address: a few hundred bytes per context ever created. */
#include "sim/sim_internal.h"

#include <stdlib.h>
#include <string.h>

/* Deeper than any program nests contexts; the driver's own limit is not documented. */
#define STACK_DEPTH 64

/* The calling thread's stack of contexts: the top one is current. */
static __thread cd_ctx *stack[STACK_DEPTH];
static __thread int depth;

static unsigned long long last_ctx_id;

cd_ctx *cd_ctx_find_locked(CUcontext handle)
{
    for (cd_ctx *c = cd.contexts; c; c = c->next)
        if ((CUcontext)c == handle)
            return c;
    return NULL;
}

static cd_ctx *find_alive_locked(CUcontext handle)
{
    cd_ctx *c = cd_ctx_find_locked(handle);
    return c && c->alive ? c : NULL;
}

CUresult cd_current_ctx_locked(cd_ctx **ctx)
{
    *ctx = depth > 0 ? stack[depth - 1] : NULL;
    if (!*ctx)
        return CUDA_ERROR_INVALID_CONTEXT;
    return (*ctx)->alive ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

CUresult cd_current_ctx(cd_ctx **ctx)
{
    pthread_mutex_lock(&cd.lock);
    CUresult result = cd_current_ctx_locked(ctx);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cd_ctx_reserve_locked(cd_ctx *ctx, size_t bytes)
{
    if (bytes > cd_device_free_locked(ctx->device))
        return CUDA_ERROR_OUT_OF_MEMORY;
    ctx->reserved += bytes;
    cd.devices[ctx->device].reserved += bytes;
    return CUDA_SUCCESS;
}

void cd_ctx_unreserve_locked(cd_ctx *ctx, size_t bytes)
{
    ctx->reserved -= bytes;
    cd.devices[ctx->device].reserved -= bytes;
}

bool cd_ctx_reaches_locked(const cd_ctx *ctx, const cd_ctx *owner)
{
    if (ctx->device == owner->device)
        return true;
    for (int i = 0; i < CD_MAX_PEERS; i++)
        if (ctx->peers[i] == owner)
            return true;
    return false;
}

/* A context comes to life: the driver takes its memory on the device. */
static CUresult activate_locked(cd_ctx *ctx)
{
    CUresult result = cd_ctx_reserve_locked(ctx, cd.context_reserve);
    if (result == CUDA_SUCCESS) {
        ctx->alive = true;
        ctx->id = ++last_ctx_id;
    }
    return result;
}

/* Waits for the context's work, then frees everything it owns. */
static void teardown_locked(cd_ctx *ctx)
{
    cd_ctx_drain_locked(ctx);
    cd_streams_release_ctx_locked(ctx);
    cd_events_release_ctx_locked(ctx);
    cd_memory_release_ctx_locked(ctx);
    cd_kernels_release_ctx_locked(ctx);
    for (cd_ctx *c = cd.contexts; c; c = c->next)
        for (int i = 0; i < CD_MAX_PEERS; i++)
            if (c->peers[i] == ctx)
                c->peers[i] = NULL;
    memset(ctx->peers, 0, sizeof ctx->peers);
    cd_ctx_unreserve_locked(ctx, ctx->reserved);
    ctx->sticky_error = CUDA_SUCCESS;
    ctx->alive = false;
}

static bool valid_device_locked(CUdevice dev)
{
    return dev >= 0 && dev < cd.device_count;
}

void cd_contexts_init_locked(void)
{
    for (int d = cd.device_count; d-- > 0;) {
        cd_ctx *primary = &cd.devices[d].primary;
        primary->device = d;
        primary->primary = true;
        primary->next = cd.contexts;
        cd.contexts = primary;
    }
}

/* ---- primary contexts ---- */

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CD_ENTER("cuDevicePrimaryCtxRetain");
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    CUresult result = valid_device_locked(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    cd_ctx *ctx = result == CUDA_SUCCESS ? &cd.devices[dev].primary : NULL;
    if (ctx && !ctx->alive)
        result = activate_locked(ctx);
    if (result == CUDA_SUCCESS) {
        ctx->retained++;
        *pctx = (CUcontext)ctx;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* The last release tears the context down, as on the real driver. */
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CD_ENTER_DESPITE_FAULT("cuDevicePrimaryCtxRelease");
    pthread_mutex_lock(&cd.lock);
    CUresult result = CUDA_SUCCESS;
    if (!valid_device_locked(dev)) {
        result = CUDA_ERROR_INVALID_DEVICE;
    } else {
        cd_ctx *ctx = &cd.devices[dev].primary;
        if (ctx->retained == 0)
            result = CUDA_ERROR_INVALID_CONTEXT;
        else if (--ctx->retained == 0 && ctx->alive)
            teardown_locked(ctx);
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* Tears the context down; its retains stay counted, and the next retain brings it back. */
CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CD_ENTER_DESPITE_FAULT("cuDevicePrimaryCtxReset");
    pthread_mutex_lock(&cd.lock);
    CUresult result = valid_device_locked(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    if (result == CUDA_SUCCESS && cd.devices[dev].primary.alive)
        teardown_locked(&cd.devices[dev].primary);
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CD_ENTER("cuDevicePrimaryCtxGetState");
    if (!flags || !active)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    CUresult result = valid_device_locked(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    if (result == CUDA_SUCCESS) {
        *flags = 0;
        *active = cd.devices[dev].primary.alive;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* ---- created contexts ---- */

/* Made, and pushed on the calling thread's stack. Scheduling and other flags are accepted
 * and ignored: nothing in the simulator depends on them. */
static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK))
        return CUDA_ERROR_INVALID_VALUE;
    if (depth == STACK_DEPTH) {
        cd_log("cuCtxCreate: %d contexts are current already: CUDA_ERROR_OUT_OF_MEMORY", depth);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    cd_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return CUDA_ERROR_OUT_OF_MEMORY;
    pthread_mutex_lock(&cd.lock);
    CUresult result = valid_device_locked(dev) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    if (result == CUDA_SUCCESS) {
        ctx->device = dev;
        result = activate_locked(ctx);
    }
    if (result == CUDA_SUCCESS) {
        ctx->next = cd.contexts;
        cd.contexts = ctx;
        stack[depth++] = ctx;
        *pctx = (CUcontext)ctx;
    }
    pthread_mutex_unlock(&cd.lock);
    if (result != CUDA_SUCCESS)
        free(ctx);
    return result;
}

CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CD_ENTER("cuCtxCreate");
    return ctx_create(pctx, flags, dev);
}

/* Execution affinity limits the SMs a context may use; the simulator has no SMs to limit. */
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev)
{
    CD_ENTER("cuCtxCreate");
    if (numParams < 0 || (numParams > 0 && !paramsArray))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}

CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams, unsigned int flags,
                        CUdevice dev)
{
    CD_ENTER("cuCtxCreate");
    if (ctxCreateParams && ctxCreateParams->cigParams)
        return cd_unsupported("cuCtxCreate with CUDA in graphics (CIG) parameters");
    if (ctxCreateParams && (ctxCreateParams->numExecAffinityParams < 0 ||
                            (ctxCreateParams->numExecAffinityParams > 0 &&
                             !ctxCreateParams->execAffinityParams)))
        return CUDA_ERROR_INVALID_VALUE;
    return ctx_create(pctx, flags, dev);
}

/* Primary contexts are not destroyed this way: they are released or reset. */
CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    CD_ENTER_DESPITE_FAULT("cuCtxDestroy");
    pthread_mutex_lock(&cd.lock);
    cd_ctx *c = find_alive_locked(ctx);
    CUresult result = c && !c->primary ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    if (result == CUDA_SUCCESS) {
        teardown_locked(c);
        if (depth > 0 && stack[depth - 1] == c)
            depth--;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* ---- the current context: binding works despite a fault, to reach a way out of it ---- */

CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    CD_ENTER_DESPITE_FAULT("cuCtxPushCurrent");
    pthread_mutex_lock(&cd.lock);
    cd_ctx *c = find_alive_locked(ctx);
    CUresult result = !c ? CUDA_ERROR_INVALID_CONTEXT
                      : depth == STACK_DEPTH ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    if (result == CUDA_SUCCESS)
        stack[depth++] = c;
    pthread_mutex_unlock(&cd.lock);
    if (result == CUDA_ERROR_OUT_OF_MEMORY)
        cd_log("cuCtxPushCurrent: %d contexts are current already: CUDA_ERROR_OUT_OF_MEMORY", depth);
    return result;
}

CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    CD_ENTER_DESPITE_FAULT("cuCtxPopCurrent");
    if (depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    cd_ctx *top = stack[--depth];
    if (pctx)
        *pctx = (CUcontext)top;
    return CUDA_SUCCESS;
}

/* Replaces the top of the stack; NULL pops it. */
CUresult cuCtxSetCurrent(CUcontext ctx)
{
    CD_ENTER_DESPITE_FAULT("cuCtxSetCurrent");
    if (!ctx) {
        if (depth > 0)
            depth--;
        return CUDA_SUCCESS;
    }
    pthread_mutex_lock(&cd.lock);
    cd_ctx *c = find_alive_locked(ctx);
    pthread_mutex_unlock(&cd.lock);
    if (!c)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (depth == 0)
        depth = 1;
    stack[depth - 1] = c;
    return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CD_ENTER_DESPITE_FAULT("cuCtxGetCurrent");
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = depth > 0 ? (CUcontext)stack[depth - 1] : NULL;
    return CUDA_SUCCESS;
}

/* The context named, or the current one for NULL. */
static CUresult named_or_current_locked(CUcontext handle, cd_ctx **ctx)
{
    if (!handle)
        return cd_current_ctx_locked(ctx);
    *ctx = find_alive_locked(handle);
    return *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult device_of(CUdevice *device, CUcontext handle)
{
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    CUresult result = named_or_current_locked(handle, &ctx);
    if (result == CUDA_SUCCESS)
        *device = ctx->device;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuCtxGetDevice(CUdevice *device)
{
    CD_ENTER("cuCtxGetDevice");
    return device_of(device, NULL);
}

/* CUDA 13: ctx NULL means the current context. */
CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    CD_ENTER("cuCtxGetDevice");
    return device_of(device, ctx);
}

CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId)
{
    CD_ENTER("cuCtxGetId");
    if (!ctxId)
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *c;
    pthread_mutex_lock(&cd.lock);
    CUresult result = named_or_current_locked(ctx, &c);
    if (result == CUDA_SUCCESS)
        *ctxId = c->id;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* Synchronizing a context while one of its streams captures, or where the thread's capture
 * mode forbids it, is refused (and invalidates the captures concerned). */
static CUresult ctx_synchronize(CUcontext handle)
{
    cd_ctx *ctx;
    pthread_mutex_lock(&cd.lock);
    CUresult result = named_or_current_locked(handle, &ctx);
    if (result == CUDA_SUCCESS)
        result = cd_capture_check_ctx_locked(ctx);
    if (result == CUDA_SUCCESS)
        result = cd_capture_unsafe_call_locked("cuCtxSynchronize");
    pthread_mutex_unlock(&cd.lock);
    return result == CUDA_SUCCESS ? cd_ctx_synchronize(ctx) : result;
}

CUresult cuCtxSynchronize(void)
{
    CD_ENTER("cuCtxSynchronize");
    return ctx_synchronize(NULL);
}

/* CUDA 13: ctx NULL means the current context. */
CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    CD_ENTER("cuCtxSynchronize");
    return ctx_synchronize(ctx);
}

/* ---- peer access ---- */

/* Every pair of simulated devices is connected; a device is not its own peer. */
CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
    CD_ENTER("cuDeviceCanAccessPeer");
    if (!canAccessPeer)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&cd.lock);
    bool valid = valid_device_locked(dev) && valid_device_locked(peerDev);
    pthread_mutex_unlock(&cd.lock);
    if (!valid)
        return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

/* The current context and the peer named, or the error the driver gives for them. */
static CUresult peer_pair_locked(CUcontext peerContext, cd_ctx **ctx, cd_ctx **peer)
{
    CUresult result = cd_current_ctx_locked(ctx);
    if (result != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_CONTEXT;
    *peer = find_alive_locked(peerContext);
    return *peer && *peer != *ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

/* Peer access opens the peer's cuMemAlloc memory to this context's kernels; it does not reach
 * VMM mappings (those need cuMemSetAccess for the device) nor pool memory. */
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
    CD_ENTER("cuCtxEnablePeerAccess");
    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx, *peer;
    pthread_mutex_lock(&cd.lock);
    CUresult result = peer_pair_locked(peerContext, &ctx, &peer);
    int free_slot = -1;
    for (int i = 0; result == CUDA_SUCCESS && i < CD_MAX_PEERS; i++) {
        if (ctx->peers[i] == peer)
            result = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
        else if (!ctx->peers[i] && free_slot < 0)
            free_slot = i;
    }
    if (result == CUDA_SUCCESS && ctx->device == peer->device)
        result = CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
    else if (result == CUDA_SUCCESS && free_slot < 0)
        result = CUDA_ERROR_TOO_MANY_PEERS;
    if (result == CUDA_SUCCESS)
        ctx->peers[free_slot] = peer;
    pthread_mutex_unlock(&cd.lock);
    return result;
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
    CD_ENTER("cuCtxDisablePeerAccess");
    cd_ctx *ctx, *peer;
    pthread_mutex_lock(&cd.lock);
    CUresult result = peer_pair_locked(peerContext, &ctx, &peer);
    if (result == CUDA_SUCCESS) {
        result = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
        for (int i = 0; i < CD_MAX_PEERS; i++) {
            if (ctx->peers[i] == peer) {
                ctx->peers[i] = NULL;
                result = CUDA_SUCCESS;
            }
        }
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}
