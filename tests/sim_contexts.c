/* Contexts: created and primary ones, the stack of current contexts, what their destruction or
 * reset takes with it, and peer access between them. */
#include "tests/sim_testing.h"

#include <pthread.h>

#define MiB ((size_t)1 << 20)

static pthread_mutex_t flag_lock = PTHREAD_MUTEX_INITIALIZER;
static bool flag;

static void set_flag_late(void *unused)
{
    (void)unused;
    sleep_ms(200);
    pthread_mutex_lock(&flag_lock);
    flag = true;
    pthread_mutex_unlock(&flag_lock);
}

static bool flag_is_set(void)
{
    pthread_mutex_lock(&flag_lock);
    bool set = flag;
    pthread_mutex_unlock(&flag_lock);
    return set;
}

/* In another thread, current there: what cuCtxGetDevice answers after ctx is destroyed. */
typedef struct destroyed_elsewhere {
    CUcontext ctx;
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int stage;                  /* 1: current in the thread; 2: destroyed by the main thread */
    CUresult result;
} destroyed_elsewhere;

static void *hold_current(void *arg)
{
    destroyed_elsewhere *d = arg;
    CHECK_CU(cuCtxSetCurrent(d->ctx));
    pthread_mutex_lock(&d->lock);
    d->stage = 1;
    pthread_cond_broadcast(&d->changed);
    while (d->stage != 2)
        pthread_cond_wait(&d->changed, &d->lock);
    pthread_mutex_unlock(&d->lock);
    CUdevice dev;
    d->result = cuCtxGetDevice(&dev);
    return NULL;
}

static void set_stage(destroyed_elsewhere *d, int stage)
{
    pthread_mutex_lock(&d->lock);
    d->stage = stage;
    pthread_cond_broadcast(&d->changed);
    pthread_mutex_unlock(&d->lock);
}

static void wait_stage(destroyed_elsewhere *d, int stage)
{
    pthread_mutex_lock(&d->lock);
    while (d->stage != stage)
        pthread_cond_wait(&d->changed, &d->lock);
    pthread_mutex_unlock(&d->lock);
}

static void created_contexts(CUcontext primary)
{
    size_t reserved = sim_device_reserved(0);
    CUcontext created, current;
    CHECK_CU(cuCtxCreate_v4(&created, NULL, 0, 0));
    CHECK_CU(cuCtxGetCurrent(&current));
    ok(current == created && created != primary, "cuCtxCreate makes a new context current");
    unsigned long long id_primary, id_created;
    CHECK_CU(cuCtxGetId(primary, &id_primary));
    CHECK_CU(cuCtxGetId(NULL, &id_created));
    ok(id_primary != id_created, "cuCtxGetId: each context its own id");
    CUcontext popped;
    CHECK_CU(cuCtxPopCurrent_v2(&popped));
    CHECK_CU(cuCtxGetCurrent(&current));
    ok(popped == created && current == primary, "cuCtxPopCurrent gives back the one below");
    CHECK_CU(cuCtxPushCurrent_v2(created));

    /* Its resources: a stream with slow work queued, an event, memory. */
    CUstream stream;
    CUevent event;
    CUdeviceptr dev;
    void *pinned;
    size_t used = sim_device_used(0);
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuEventCreate(&event, 0));
    CHECK_CU(cuMemAlloc_v2(&dev, MiB));
    CHECK_CU(cuMemHostAlloc(&pinned, 4096, 0));
    CHECK_CU(cuLaunchHostFunc(stream, set_flag_late, NULL));
    CUmemGenericAllocationHandle vmm;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CHECK_CU(cuMemCreate(&vmm, 2 * MiB, &prop, 0));

    destroyed_elsewhere other = {.ctx = created, .lock = PTHREAD_MUTEX_INITIALIZER,
                                 .changed = PTHREAD_COND_INITIALIZER};
    pthread_t thread;
    pthread_create(&thread, NULL, hold_current, &other);
    wait_stage(&other, 1);
    is_int(cuCtxDestroy_v2(created), CUDA_SUCCESS, "cuCtxDestroy");
    ok(flag_is_set(), "waited for the context's queued work");
    CHECK_CU(cuCtxGetCurrent(&current));
    ok(current == primary, "and popped it, as it was current");
    set_stage(&other, 2);
    pthread_join(thread, NULL);
    is_int(other.result, CUDA_ERROR_CONTEXT_IS_DESTROYED,
           "where it is still current, calls fail with CONTEXT_IS_DESTROYED");
    is_int(cuStreamQuery(stream), CUDA_ERROR_INVALID_HANDLE, "its stream: INVALID_HANDLE");
    is_int(cuEventQuery(event), CUDA_ERROR_INVALID_HANDLE, "its event: INVALID_HANDLE");
    is_uint(sim_device_used(0), used + 2 * MiB,
            "its cuMemAlloc memory is freed; VMM memory belongs to no context and stays");
    is_int(cuMemFree_v2(dev), CUDA_ERROR_INVALID_VALUE, "freeing its allocation: INVALID_VALUE");
    is_int(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE, "its pinned memory is gone too");
    is_uint(sim_device_reserved(0), reserved, "its driver memory is given back");
    CHECK_CU(cuMemRelease(vmm));
    is_int(cuCtxDestroy_v2(created), CUDA_ERROR_INVALID_CONTEXT, "destroying it again: INVALID_CONTEXT");
    is_int(cuCtxPushCurrent_v2(created), CUDA_ERROR_INVALID_CONTEXT, "pushing it: INVALID_CONTEXT");
    is_int(cuCtxSetCurrent(created), CUDA_ERROR_INVALID_CONTEXT, "setting it: INVALID_CONTEXT");
    is_int(cuCtxDestroy_v2(primary), CUDA_ERROR_INVALID_CONTEXT,
           "a primary context is not destroyed with cuCtxDestroy: INVALID_CONTEXT");

    /* The stack. */
    CHECK_CU(cuCtxSetCurrent(NULL));
    CHECK_CU(cuCtxGetCurrent(&current));
    ok(current == NULL, "cuCtxSetCurrent(NULL) pops the only context");
    is_int(cuCtxPopCurrent_v2(&popped), CUDA_ERROR_INVALID_CONTEXT,
           "popping an empty stack: INVALID_CONTEXT");
    CHECK_CU(cuCtxSetCurrent(primary));
}

static void primary_reset(CUcontext primary)
{
    CUstream stream;
    CUevent event;
    CUdeviceptr dev;
    size_t used = sim_device_used(0);
    CHECK_CU(cuStreamCreate(&stream, 0));
    CHECK_CU(cuEventCreate(&event, 0));
    CHECK_CU(cuMemAlloc_v2(&dev, MiB));
    is_int(cuDevicePrimaryCtxReset_v2(0), CUDA_SUCCESS, "cuDevicePrimaryCtxReset");
    int active = 1;
    unsigned flags;
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
    is_int(active, 0, "the primary context is then inactive");
    is_uint(sim_device_used(0), used, "its allocations are freed");
    CUdeviceptr more;
    is_int(cuMemAlloc_v2(&more, 64), CUDA_ERROR_CONTEXT_IS_DESTROYED,
           "while current but reset, calls fail with CONTEXT_IS_DESTROYED");
    CUcontext again;
    CHECK_CU(cuDevicePrimaryCtxRetain(&again, 0));
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
    ok(again == primary && active == 1, "a retain brings it back, with the same handle");
    is_int(cuMemAlloc_v2(&more, 64), CUDA_SUCCESS, "and it works again");
    is_int(cuStreamSynchronize(stream), CUDA_ERROR_INVALID_HANDLE,
           "but a stream made before the reset is dead");
    is_int(cuEventSynchronize(event), CUDA_ERROR_INVALID_HANDLE, "and so is an event");
    CHECK_CU(cuMemFree_v2(more));
    /* The test's own retain and this one: the last release tears it down. */
    CHECK_CU(cuDevicePrimaryCtxRelease_v2(0));
    CHECK_CU(cuDevicePrimaryCtxRelease_v2(0));
    CHECK_CU(cuDevicePrimaryCtxGetState(0, &flags, &active));
    is_int(active, 0, "releasing it for the last time tears it down");
    is_int(cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT,
           "releasing it once more: INVALID_CONTEXT");
    CHECK_CU(cuDevicePrimaryCtxRetain(&again, 0));
}

static void sleep_200ms(void *unused)
{
    (void)unused;
    sleep_ms(200);
}

/* A fault sticks to its context: the others go on, and destroying it is the way out. */
static void fault_in_a_context(void)
{
    CUcontext created;
    CHECK_CU(cuCtxCreate_v4(&created, NULL, 0, 0));
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle;
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemAccessDesc access = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK_CU(cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0));
    CHECK_CU(cuMemCreate(&handle, 2 * MiB, &prop, 0));
    CHECK_CU(cuMemMap(va, 2 * MiB, 0, handle, 0));
    CHECK_CU(cuMemSetAccess(va, 2 * MiB, &access, 1));
    CUstream stream;
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CHECK_CU(cuLaunchHostFunc(stream, sleep_200ms, NULL));
    CHECK_CU(cuMemsetD8Async(va, 1, 2 * MiB, stream));
    CHECK_CU(cuMemUnmap(va, 2 * MiB));
    is_int(cuStreamSynchronize(stream), CUDA_ERROR_ILLEGAL_ADDRESS,
           "a fault in a created context: ILLEGAL_ADDRESS");
    CUdeviceptr p;
    is_int(cuMemAlloc_v2(&p, 64), CUDA_ERROR_ILLEGAL_ADDRESS, "sticky in that context");
    CHECK_CU(cuCtxPopCurrent_v2(NULL));
    is_int(cuMemAlloc_v2(&p, 64), CUDA_SUCCESS, "the primary context goes on");
    CHECK_CU(cuMemFree_v2(p));
    is_int(cuCtxDestroy_v2(created), CUDA_SUCCESS, "and the faulted context can be destroyed");
    CHECK_CU(cuMemRelease(handle));
    CHECK_CU(cuMemAddressFree(va, 2 * MiB));
}

static void peer_access(CUcontext ctx0)
{
    int can = -1;
    CHECK_CU(cuDeviceCanAccessPeer(&can, 0, 1));
    is_int(can, 1, "cuDeviceCanAccessPeer(0, 1): 1");
    CHECK_CU(cuDeviceCanAccessPeer(&can, 0, 0));
    is_int(can, 0, "a device is not its own peer");
    is_int(cuDeviceCanAccessPeer(&can, 0, 2), CUDA_ERROR_INVALID_DEVICE,
           "a device that does not exist: INVALID_DEVICE");
    CUcontext ctx1, same_device;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx1, 1));
    is_int(cuCtxEnablePeerAccess(ctx1, 0), CUDA_SUCCESS, "cuCtxEnablePeerAccess to device 1's context");
    is_int(cuCtxEnablePeerAccess(ctx1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
           "twice: PEER_ACCESS_ALREADY_ENABLED");
    is_int(cuCtxEnablePeerAccess(ctx1, 1), CUDA_ERROR_INVALID_VALUE, "with flags: INVALID_VALUE");
    is_int(cuCtxEnablePeerAccess(ctx0, 0), CUDA_ERROR_INVALID_CONTEXT,
           "to the current context itself: INVALID_CONTEXT");
    CHECK_CU(cuCtxCreate_v4(&same_device, NULL, 0, 0));
    CHECK_CU(cuCtxPopCurrent_v2(NULL));
    is_int(cuCtxEnablePeerAccess(same_device, 0), CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
           "to another context of the same device: PEER_ACCESS_UNSUPPORTED");
    CHECK_CU(cuCtxDestroy_v2(same_device));
    is_int(cuCtxDisablePeerAccess(ctx1), CUDA_SUCCESS, "cuCtxDisablePeerAccess");
    is_int(cuCtxDisablePeerAccess(ctx1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
           "twice: PEER_ACCESS_NOT_ENABLED");
}

int main(void)
{
    plan(43);
    setenv("LMS_SIM_LOG", "/dev/null", 1); /* the fault is logged */
    sim_set_device_count(2);
    CUcontext primary = sim_setup(64 * MiB);
    created_contexts(primary);
    primary_reset(primary);
    fault_in_a_context();
    peer_access(primary);
    return exit_status();
}
