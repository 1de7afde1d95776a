/* Pointer queries for cuMemAlloc, VMM (device- and host-located), pinned, registered and pool
 * memory, the allocation handle behind a mapping, and legacy IPC handles. */
#include "tests/sim_testing.h"

#include <string.h>
#include <unistd.h>

#define GRAIN ((size_t)2 << 20)

static CUcontext ctx;
static CUipcMemHandle exported;

/* One attribute of ptr through cuPointerGetAttribute, into a buffer large enough for any. */
typedef union answer {
    CUcontext ctx;
    CUdeviceptr ptr;
    void *host;
    size_t size;
    unsigned long long id;
    unsigned int type;
    int value;
} answer;

static CUresult attribute(answer *out, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    memset(out, 0, sizeof *out);
    return cuPointerGetAttribute(out, attribute, ptr);
}

static int int_of(CUpointer_attribute which, CUdeviceptr ptr)
{
    answer a;
    CHECK_CU(attribute(&a, which, ptr));
    return a.value;
}

static unsigned long long u64_of(CUpointer_attribute which, CUdeviceptr ptr)
{
    answer a;
    CHECK_CU(attribute(&a, which, ptr));
    return a.id;
}

/* In a child, another process: a handle exported by the parent cannot be opened in the
 * simulator (its device memory is private to its process). */
static void open_elsewhere(void *arg)
{
    (void)arg;
    CUdeviceptr p;
    CUcontext c;
    if (cuInit(0) != CUDA_SUCCESS || cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
        cuCtxSetCurrent(c) != CUDA_SUCCESS)
        _exit(1);
    _exit(cuIpcOpenMemHandle_v2(&p, exported, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) ==
                  CUDA_ERROR_NOT_SUPPORTED
              ? 0
              : 2);
}

static void device_memory(CUdeviceptr p, CUdeviceptr q)
{
    answer a;
    CHECK_CU(attribute(&a, CU_POINTER_ATTRIBUTE_CONTEXT, p + 10));
    ok(a.ctx == ctx, "cuMemAlloc memory: CONTEXT, the one it was allocated in");
    is_int(int_of(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p), CU_MEMORYTYPE_DEVICE, "MEMORY_TYPE: DEVICE");
    is_uint(u64_of(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 10), p + 10,
            "DEVICE_POINTER: the address itself");
    is_int(attribute(&a, CU_POINTER_ATTRIBUTE_HOST_POINTER, p), CUDA_ERROR_INVALID_VALUE,
           "HOST_POINTER: INVALID_VALUE, the host cannot reach it");
    is_int(int_of(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p), 0, "DEVICE_ORDINAL: 0");
    ok(u64_of(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 10) == p &&
           u64_of(CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 10) == 4096,
       "RANGE_START_ADDR and RANGE_SIZE: the allocation");
    ok(int_of(CU_POINTER_ATTRIBUTE_IS_MANAGED, p) == 0 && int_of(CU_POINTER_ATTRIBUTE_MAPPED, p) == 1 &&
           int_of(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p) == 1,
       "IS_MANAGED 0, MAPPED 1, IS_LEGACY_CUDA_IPC_CAPABLE 1");
    ok(u64_of(CU_POINTER_ATTRIBUTE_BUFFER_ID, p) != u64_of(CU_POINTER_ATTRIBUTE_BUFFER_ID, q),
       "BUFFER_ID: one per allocation");
    is_int(int_of(CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p), CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE,
           "ACCESS_FLAGS: read-write for its own device");

    CUpointer_attribute several[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                     CU_POINTER_ATTRIBUTE_HOST_POINTER, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    unsigned int type = 0;
    int ordinal = -1;
    void *host = &type;
    size_t size = 0;
    void *data[] = {&type, &ordinal, &host, &size};
    CHECK_CU(cuPointerGetAttributes(4, several, data, p));
    ok(type == CU_MEMORYTYPE_DEVICE && ordinal == 0 && host == NULL && size == 4096,
       "cuPointerGetAttributes: several at once, NULL where the singular form has no answer");
    int on_stack;
    CHECK_CU(cuPointerGetAttributes(4, several, data, (CUdeviceptr)(uintptr_t)&on_stack));
    ok(type == 0 && ordinal == -2 && size == 0,
       "of an address unknown to the driver: no error, zero and ordinal -2");
    is_int(attribute(&a, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)&on_stack),
           CUDA_ERROR_INVALID_VALUE, "cuPointerGetAttribute of it: INVALID_VALUE");
}

static void vmm_memory(void)
{
    CUdeviceptr va;
    CUmemGenericAllocationHandle handle, retained, host_handle;
    CUmemAllocationProp on_device = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                     .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
    CUmemAllocationProp on_host = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                   .location = {CU_MEM_LOCATION_TYPE_HOST, 0}};
    CUmemAccessDesc device_rw = {{CU_MEM_LOCATION_TYPE_DEVICE, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CUmemAccessDesc host_rw = {{CU_MEM_LOCATION_TYPE_HOST, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    CHECK_CU(cuMemAddressReserve(&va, 4 * GRAIN, 0, 0, 0));
    CHECK_CU(cuMemCreate(&handle, GRAIN, &on_device, 0));
    CHECK_CU(cuMemMap(va + GRAIN, GRAIN, 0, handle, 0));
    CHECK_CU(cuMemSetAccess(va + GRAIN, GRAIN, &device_rw, 1));
    CUdeviceptr inside = va + GRAIN + 100, base;
    size_t size;
    CHECK_CU(cuMemGetAddressRange_v2(&base, &size, inside));
    ok(u64_of(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside) == va &&
           u64_of(CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside) == 4 * GRAIN && base == va + GRAIN &&
           size == GRAIN,
       "VMM: RANGE_START_ADDR and RANGE_SIZE report the reservation, cuMemGetAddressRange the "
       "mapping");
    ok(u64_of(CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, inside) == va + GRAIN &&
           u64_of(CU_POINTER_ATTRIBUTE_MAPPING_SIZE, inside) == GRAIN,
       "MAPPING_BASE_ADDR and MAPPING_SIZE: the mapping");
    answer a;
    CHECK_CU(attribute(&a, CU_POINTER_ATTRIBUTE_CONTEXT, inside));
    ok(a.ctx == NULL && int_of(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside) == CU_MEMORYTYPE_DEVICE &&
           int_of(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, inside) == 0,
       "device-located: no context, MEMORY_TYPE DEVICE, not for legacy IPC");
    ok(int_of(CU_POINTER_ATTRIBUTE_MAPPED, va) == 0 &&
           u64_of(CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va) == va,
       "a reserved, unmapped address: MAPPED 0, and its reservation");
    is_int(attribute(&a, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va), CUDA_ERROR_INVALID_VALUE,
           "but no MEMORY_TYPE: INVALID_VALUE");
    CHECK_CU(cuMemRetainAllocationHandle(&retained, (void *)(uintptr_t)inside));
    ok(retained == handle, "cuMemRetainAllocationHandle: the handle mapped there");
    CHECK_CU(cuMemRelease(handle));
    is_int(cuMemRelease(retained), CUDA_SUCCESS, "retained, it takes a second cuMemRelease");
    is_int(cuMemRelease(retained), CUDA_ERROR_INVALID_VALUE, "and no third");
    CUipcMemHandle ipc;
    is_int(cuIpcGetMemHandle(&ipc, inside), CUDA_ERROR_INVALID_VALUE,
           "cuIpcGetMemHandle of VMM memory: INVALID_VALUE");

    CHECK_CU(cuMemCreate(&host_handle, GRAIN, &on_host, 0));
    CHECK_CU(cuMemMap(va + 2 * GRAIN, GRAIN, 0, host_handle, 0));
    CHECK_CU(cuMemSetAccess(va + 2 * GRAIN, GRAIN, &device_rw, 1));
    CUdeviceptr host_located = va + 2 * GRAIN;
    ok(int_of(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, host_located) == CU_MEMORYTYPE_HOST &&
           int_of(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, host_located) == CU_DEVICE_CPU,
       "host-located: MEMORY_TYPE HOST, DEVICE_ORDINAL CU_DEVICE_CPU (assumed)");
    is_int(attribute(&a, CU_POINTER_ATTRIBUTE_HOST_POINTER, host_located), CUDA_ERROR_INVALID_VALUE,
           "no HOST_POINTER while the host has no access");
    CHECK_CU(cuMemSetAccess(host_located, GRAIN, &host_rw, 1));
    CHECK_CU(attribute(&a, CU_POINTER_ATTRIBUTE_HOST_POINTER, host_located + 8));
    ok(a.host == (void *)(uintptr_t)(host_located + 8), "granted to the host, its HOST_POINTER");
    CHECK_CU(cuMemUnmap(va + GRAIN, 2 * GRAIN));
    CHECK_CU(cuMemRelease(host_handle));
    CHECK_CU(cuMemAddressFree(va, 4 * GRAIN));
}

static void host_memory(void)
{
    void *pinned;
    static char registered[8192];
    CHECK_CU(cuMemHostAlloc(&pinned, 4096, 0));
    CHECK_CU(cuMemHostRegister_v2(registered, sizeof registered, 0));
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)pinned, r = (CUdeviceptr)(uintptr_t)registered;
    answer a;
    CHECK_CU(attribute(&a, CU_POINTER_ATTRIBUTE_HOST_POINTER, p + 4));
    ok(int_of(CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CU_MEMORYTYPE_HOST && a.host == (char *)pinned + 4 &&
           u64_of(CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 4) == p + 4,
       "pinned memory: MEMORY_TYPE HOST, the same host and device pointer");
    CHECK_CU(attribute(&a, CU_POINTER_ATTRIBUTE_CONTEXT, r));
    ok(a.ctx == ctx && int_of(CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, r) == 0 &&
           u64_of(CU_POINTER_ATTRIBUTE_RANGE_SIZE, r + 10) == sizeof registered,
       "registered memory: its context, that context's device, the registered range");
    CUipcMemHandle ipc;
    is_int(cuIpcGetMemHandle(&ipc, p), CUDA_ERROR_INVALID_VALUE,
           "cuIpcGetMemHandle of pinned memory: INVALID_VALUE");
    CHECK_CU(cuMemHostUnregister(registered));
    CHECK_CU(cuMemFreeHost(pinned));

    CUdeviceptr pooled;
    CHECK_CU(cuMemAllocAsync(&pooled, 64, NULL));
    CHECK_CU(attribute(&a, CU_POINTER_ATTRIBUTE_CONTEXT, pooled));
    ok(a.ctx == NULL && int_of(CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, pooled) == 0,
       "pool memory (cuMemAllocAsync): no context, not for legacy IPC");
    is_int(cuIpcGetMemHandle(&ipc, pooled), CUDA_ERROR_INVALID_VALUE,
           "cuIpcGetMemHandle of it: INVALID_VALUE");
    CHECK_CU(cuMemFreeAsync(pooled, NULL));
    CHECK_CU(cuStreamSynchronize(NULL));
}

int main(void)
{
    plan(34);
    setenv("LMS_SIM_LOG", "/dev/null", 1); /* the refused IPC opens are logged */
    ctx = sim_setup(64 << 20);
    CUdeviceptr p, q;
    CHECK_CU(cuMemAlloc_v2(&p, 4096));
    CHECK_CU(cuMemAlloc_v2(&q, 4096));

    /* IPC, first: the child must be forked while this process has no threads (TSan). */
    is_int(cuIpcGetMemHandle(&exported, p + 100), CUDA_SUCCESS,
           "cuIpcGetMemHandle of cuMemAlloc memory");
    CUdeviceptr opened;
    is_int(cuIpcOpenMemHandle_v2(&opened, exported, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
           CUDA_ERROR_INVALID_CONTEXT, "opening it in the process that exported it: INVALID_CONTEXT");
    is_int(tap_run_in_child(open_elsewhere, NULL), -1,
           "in another process: NOT_SUPPORTED (the simulator's device memory is its process's)");
    CUipcMemHandle garbage;
    memset(&garbage, 0x5a, sizeof garbage);
    is_int(cuIpcOpenMemHandle_v2(&opened, garbage, 0), CUDA_ERROR_INVALID_HANDLE,
           "a handle that is none: INVALID_HANDLE");
    is_int(cuIpcCloseMemHandle(p), CUDA_ERROR_INVALID_VALUE,
           "cuIpcCloseMemHandle of memory never opened: INVALID_VALUE");

    device_memory(p, q);
    vmm_memory();
    host_memory();
    CHECK_CU(cuMemFree_v2(p));
    CHECK_CU(cuMemFree_v2(q));
    return exit_status();
}
