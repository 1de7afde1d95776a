/* The simulator's virtual memory management carries the real driver's semantics. */
#include "tests/sim_int_kernels.h"
#include "tests/sim_testing.h"

#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define GRAIN (2 * MiB)

static const CUmemAllocationProp on_device = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                              .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
static const CUmemAccessDesc device_rw = {{CU_MEM_LOCATION_TYPE_DEVICE, 0},
                                          CU_MEM_ACCESS_FLAGS_PROT_READWRITE};

/* store_byte(unsigned char *p, unsigned char value) */
static void store_byte(const sim_launch *launch)
{
    **(unsigned char **)launch->params[0] = *(unsigned char *)launch->params[1];
}

static CUfunction store_byte_fn;

static CUresult launch_store(CUdeviceptr p, unsigned char value)
{
    void *params[] = {&p, &value};
    return cuLaunchKernel(store_byte_fn, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL);
}

static unsigned char byte_at(CUdeviceptr p)
{
    unsigned char b = 0;
    CHECK_CU(cuMemcpyDtoH_v2(&b, p, 1));
    return b;
}

static void setup(void)
{
    sim_setup(16 * MiB);
    const size_t sizes[] = {sizeof(void *), 1};
    store_byte_fn = sim_register_function("store_byte", store_byte, 2, sizes);
    int_kernels_register();
}

/* The int a kernel reads at p (copy_int, its copy read back). */
static int kernel_reads(CUdeviceptr p)
{
    static CUdeviceptr out;
    if (!out)
        CHECK_CU(cuMemAlloc_v2(&out, sizeof(int)));
    CHECK_CU(launch_copy_int(NULL, out, p));
    return read_int(out);
}

/* Maps `to` at `at` for the device, copies there what `from` holds, and unmaps both: the way
 * liblms moves an allocation between device and host-located memory. `from` is mapped at
 * `scratch` for the copy. */
static void copy_handle(CUmemGenericAllocationHandle to, CUdeviceptr at, CUmemGenericAllocationHandle from,
                        CUdeviceptr scratch)
{
    CHECK_CU(cuMemMap(at, GRAIN, 0, to, 0));
    CHECK_CU(cuMemMap(scratch, GRAIN, 0, from, 0));
    CHECK_CU(cuMemSetAccess(at, GRAIN, &device_rw, 1));
    CHECK_CU(cuMemSetAccess(scratch, GRAIN, &device_rw, 1));
    CHECK_CU(cuMemcpyDtoD_v2(at, scratch, GRAIN));
    CHECK_CU(cuCtxSynchronize()); /* a copy between device addresses may return before it ends */
    CHECK_CU(cuMemUnmap(at, GRAIN));
    CHECK_CU(cuMemUnmap(scratch, GRAIN));
}

/* Children: a kernel given a pointer to reserved memory that is unmapped, or mapped without
 * access. It faults before it touches it, as on the GPU: exit status FAULTED when the context
 * says so, and keeps saying it. */
enum { FAULTED = 7 };

static void exit_faulted_or_not(void)
{
    CUdeviceptr later;
    _exit(cuCtxSynchronize() == CUDA_ERROR_ILLEGAL_ADDRESS && cuMemAlloc_v2(&later, 16) == CUDA_ERROR_ILLEGAL_ADDRESS
              ? FAULTED
              : 0);
}

static void touch_unmapped(void *arg)
{
    (void)arg;
    setup();
    CUdeviceptr va;
    CHECK_CU(cuMemAddressReserve(&va, GRAIN, 0, 0, 0));
    CHECK_CU(launch_store(va + 10, 1));
    exit_faulted_or_not();
}

static void touch_without_access(void *arg)
{
    (void)arg;
    setup();
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CHECK_CU(cuMemAddressReserve(&va, GRAIN, 0, 0, 0));
    CHECK_CU(cuMemCreate(&h, GRAIN, &on_device, 0));
    CHECK_CU(cuMemMap(va, GRAIN, 0, h, 0));
    CHECK_CU(launch_store(va + 10, 1));
    exit_faulted_or_not();
}

static CUmemGenericAllocationHandle create_filled(CUdeviceptr scratch_va, unsigned char fill)
{
    CUmemGenericAllocationHandle h;
    CHECK_CU(cuMemCreate(&h, GRAIN, &on_device, 0));
    CHECK_CU(cuMemMap(scratch_va, GRAIN, 0, h, 0));
    CHECK_CU(cuMemSetAccess(scratch_va, GRAIN, &device_rw, 1));
    CHECK_CU(cuMemsetD8_v2(scratch_va, fill, GRAIN));
    CHECK_CU(cuMemUnmap(scratch_va, GRAIN));
    return h;
}

int main(void)
{
    plan(35);

    /* First, while this process has no threads: a TSan child must not inherit any. */
    is_int(tap_run_in_child(touch_unmapped, NULL), -(FAULTED + 1),
           "a kernel given a pointer to reserved, unmapped memory: ILLEGAL_ADDRESS, sticky");
    is_int(tap_run_in_child(touch_without_access, NULL), -(FAULTED + 1),
           "a kernel given a pointer to memory mapped without access: ILLEGAL_ADDRESS, sticky");

    setup();
    size_t granularity = 0;
    CHECK_CU(cuMemGetAllocationGranularity(&granularity, &on_device,
                                           CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    is_uint(granularity, GRAIN, "granularity: 2 MiB");

    CUdeviceptr va;
    CHECK_CU(cuMemAddressReserve(&va, 8 * GRAIN, 0, 0, 0));
    ok(va % GRAIN == 0, "reservations are aligned to the granularity");
#ifdef __SANITIZE_ADDRESS__
    skip(1, "AddressSanitizer's shadow memory takes the low addresses the driver reserves at");
#else
    is_uint(va, 0x302000000, "without a hint, the first reservation lies where the H100's driver put it");
#endif
    is_uint(sim_device_used(0), 0, "reserving uses no device memory");
    is_int(cuMemAddressReserve(&va, MiB, 0, 0, 0), CUDA_ERROR_INVALID_VALUE,
           "reserving a size that is not a multiple of the granularity: INVALID_VALUE");

    /* Physical memory is shared between its mappings. */
    CUmemGenericAllocationHandle a;
    CHECK_CU(cuMemCreate(&a, 2 * GRAIN, &on_device, 0));
    is_uint(sim_device_used(0), 2 * GRAIN, "cuMemCreate on the device counts against it");
    CHECK_CU(cuMemMap(va, 2 * GRAIN, 0, a, 0));
    CHECK_CU(cuMemMap(va + 2 * GRAIN, 2 * GRAIN, 0, a, 0));
    is_uint(sim_bytes_mapped(), 4 * GRAIN, "bytes_mapped counts both mappings");
    is_int(cuMemcpyHtoD_v2(va, "x", 1), CUDA_ERROR_INVALID_VALUE,
           "a copy to memory mapped without access: INVALID_VALUE");
    CHECK_CU(cuMemSetAccess(va, 4 * GRAIN, &device_rw, 1));
    CHECK_CU(cuMemcpyHtoD_v2(va + 100, "shared", 7));
    char text[8] = "";
    CHECK_CU(cuMemcpyDtoH_v2(text, va + 2 * GRAIN + 100, 7));
    is_str(text, "shared", "bytes written through one mapping show through the other");
    CHECK_CU(launch_store(va + 2 * GRAIN + 5, 0x77));
    is_int(byte_at(va + 5), 0x77, "and a kernel's store too");

    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK_CU(cuMemGetAddressRange_v2(&base, &size, va + 2 * GRAIN + 12345));
    ok(base == va + 2 * GRAIN && size == 2 * GRAIN,
       "cuMemGetAddressRange reports the mapping, not the reservation");
    is_int(cuMemGetAddressRange_v2(&base, &size, va + 5 * GRAIN), CUDA_ERROR_NOT_FOUND,
           "an unmapped reserved address: NOT_FOUND");

    /* Errors the real driver gives. */
    is_int(cuMemUnmap(va, GRAIN), CUDA_ERROR_INVALID_VALUE, "a partial unmap: INVALID_VALUE");
    is_int(cuMemMap(va + 4 * GRAIN, GRAIN, GRAIN, a, 0), CUDA_ERROR_NOT_SUPPORTED,
           "cuMemMap at a non-zero offset: NOT_SUPPORTED");
    is_int(cuMemMap(va + GRAIN, 2 * GRAIN, 0, a, 0), CUDA_ERROR_INVALID_VALUE,
           "mapping over a mapping: INVALID_VALUE");
    is_int(cuMemcpyHtoD_v2(va + 4 * GRAIN, "x", 1), CUDA_ERROR_INVALID_VALUE,
           "a copy to reserved, unmapped memory: INVALID_VALUE");
    is_int(cuMemsetD8_v2(va + 4 * GRAIN - 1, 0, 2), CUDA_ERROR_INVALID_VALUE,
           "a memset running from mapped into unmapped memory: INVALID_VALUE");
    is_int(cuMemAddressFree(va, 8 * GRAIN), CUDA_ERROR_INVALID_VALUE,
           "freeing a reservation that is still mapped: INVALID_VALUE");

    /* Release while mapped: the memory lives until its last mapping goes. */
    CHECK_CU(cuMemRelease(a));
    is_int(byte_at(va + 5), 0x77, "after cuMemRelease the mapped memory still holds its bytes");
    is_uint(sim_device_used(0), 2 * GRAIN, "and still counts");
    is_int(cuMemRelease(a), CUDA_ERROR_INVALID_VALUE, "releasing a handle twice: INVALID_VALUE");
    CHECK_CU(cuMemUnmap(va, 4 * GRAIN));
    is_uint(sim_device_used(0), 0, "unmapping both mappings frees it");
    is_uint(sim_bytes_mapped(), 0, "and bytes_mapped is back to 0");

    /* Evict and restore at the same address: each physical allocation keeps its own bytes. */
    CUmemGenericAllocationHandle b = create_filled(va, 0xbb), c = create_filled(va, 0xcc);
    CHECK_CU(cuMemMap(va, GRAIN, 0, b, 0));
    CHECK_CU(cuMemSetAccess(va, GRAIN, &device_rw, 1));
    is_int(byte_at(va + 9), 0xbb, "one allocation mapped at an address shows its bytes");
    CHECK_CU(cuMemUnmap(va, GRAIN));
    CHECK_CU(cuMemMap(va, GRAIN, 0, c, 0));
    CHECK_CU(cuMemSetAccess(va, GRAIN, &device_rw, 1));
    is_int(byte_at(va + 9), 0xcc, "another mapped at the same address shows its own");
    CHECK_CU(cuMemUnmap(va, GRAIN));
    CHECK_CU(cuMemMap(va, GRAIN, 0, b, 0));
    CHECK_CU(cuMemSetAccess(va, GRAIN, &device_rw, 1));
    is_int(byte_at(va + 9), 0xbb, "and the first one comes back intact");
    CHECK_CU(cuMemUnmap(va, GRAIN));
    CHECK_CU(cuMemRelease(b));
    CHECK_CU(cuMemRelease(c));

    /* Capacity, and host-located physical memory. */
    CUmemGenericAllocationHandle big, host, numa;
    is_int(cuMemCreate(&big, 10 * GRAIN, &on_device, 0), CUDA_ERROR_OUT_OF_MEMORY,
           "cuMemCreate beyond the capacity: OUT_OF_MEMORY");
    CUmemAllocationProp on_host = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                   .location = {CU_MEM_LOCATION_TYPE_HOST, 0}};
    CUmemAllocationProp on_numa = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                   .location = {CU_MEM_LOCATION_TYPE_HOST_NUMA, 0}};
    CHECK_CU(cuMemCreate(&host, 10 * GRAIN, &on_host, 0));
    CHECK_CU(cuMemCreate(&numa, GRAIN, &on_numa, 0));
    is_uint(sim_device_used(0), 0, "host-located memory does not count against the device");
    CHECK_CU(cuMemMap(va, GRAIN, 0, numa, 0));
    const CUmemAccessDesc device_and_host[] = {
        device_rw, {{CU_MEM_LOCATION_TYPE_HOST, 0}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE}};
    CHECK_CU(cuMemSetAccess(va, GRAIN, device_and_host, 2));
    CHECK_CU(launch_store(va + 1, 0x42));
    is_int(byte_at(va + 1), 0x42,
           "host-located memory mapped with access works like device memory");
    CHECK_CU(cuMemUnmap(va, GRAIN));

    /* An address remapped from device memory to host-located memory holding the same bytes,
     * and back: kernels see the same data there throughout. */
    CUmemGenericAllocationHandle on_gpu = create_filled(va, 0xdd);
    copy_handle(numa, va, on_gpu, va + GRAIN);
    CHECK_CU(cuMemMap(va, GRAIN, 0, numa, 0));
    CHECK_CU(cuMemSetAccess(va, GRAIN, &device_rw, 1));
    is_int(kernel_reads(va + 8), (int)0xdddddddd, "remapped to host-located memory with the same bytes, a kernel reads them");
    CHECK_CU(launch_store(va + 9, 0xee));
    CHECK_CU(cuCtxSynchronize()); /* unmapping is not ordered against the store */
    CHECK_CU(cuMemUnmap(va, GRAIN));
    copy_handle(on_gpu, va, numa, va + GRAIN);
    CHECK_CU(cuMemMap(va, GRAIN, 0, on_gpu, 0));
    CHECK_CU(cuMemSetAccess(va, GRAIN, &device_rw, 1));
    /* The byte at 9 is the int at 8's second, little-endian. */
    is_int(kernel_reads(va + 8), (int)0xddddeedd, "and back on the device, with what a kernel wrote there meanwhile");
    CHECK_CU(cuMemUnmap(va, GRAIN));
    CHECK_CU(cuMemRelease(on_gpu));
    CHECK_CU(cuMemRelease(host));
    CHECK_CU(cuMemRelease(numa));
    sim_set_host_vmm(0);
    is_int(cuMemCreate(&host, GRAIN, &on_host, 0), CUDA_ERROR_NOT_SUPPORTED,
           "without host VMM, host-located cuMemCreate: NOT_SUPPORTED");
    sim_set_host_vmm(1);

    is_int(cuMemAddressFree(va, 8 * GRAIN), CUDA_SUCCESS, "cuMemAddressFree once unmapped");
    return exit_status();
}
