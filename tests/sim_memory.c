/* The simulator's device memory, pinned host memory, copies and memsets. */
#include "tests/sim_testing.h"

#include <stdint.h>
#include <string.h>

#define MiB ((size_t)1 << 20)

static void capacity_and_allocation(void)
{
    CUdeviceptr a, b, c;
    size_t before = sim_device_used(0);
    CHECK_CU(cuMemAlloc_v2(&a, 6 * MiB));
    is_uint(sim_device_used(0), before + 6 * MiB, "cuMemAlloc counts against the capacity");
    is_int(cuMemAlloc_v2(&b, 4 * MiB), CUDA_ERROR_OUT_OF_MEMORY,
           "beyond the capacity: OUT_OF_MEMORY");
    is_int(cuMemAllocAsync(&b, 4 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY,
           "cuMemAllocAsync too: OUT_OF_MEMORY");
    CHECK_CU(cuMemAlloc_v2(&b, 2 * MiB));
    is_uint(sim_device_used(0), 8 * MiB, "up to the capacity exactly");
    CHECK_CU(cuMemFree_v2(a));
    CHECK_CU(cuMemFree_v2(b));
    is_uint(sim_device_used(0), before, "cuMemFree gives it back");
    is_int(cuMemAlloc_v2(&c, 0), CUDA_ERROR_INVALID_VALUE, "zero bytes: INVALID_VALUE");
    is_int(cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE, "freeing twice: INVALID_VALUE");

    size_t pitch = 0;
    CHECK_CU(cuMemAllocPitch_v2(&c, &pitch, 100, 8, 4));
    is_uint(pitch, 512, "cuMemAllocPitch rounds rows to 512 bytes");
    is_uint(sim_device_used(0), before + 512 * 8, "and allocates pitch * height");

    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK_CU(cuMemGetAddressRange_v2(&base, &size, c + 700));
    ok(base == c && size == 512 * 8, "cuMemGetAddressRange of an inner address: the allocation");
    int on_stack;
    is_int(cuMemGetAddressRange_v2(&base, &size, (CUdeviceptr)(uintptr_t)&on_stack),
           CUDA_ERROR_NOT_FOUND, "of a host address: NOT_FOUND");
    CHECK_CU(cuMemFree_v2(c));
}

static void copies_and_memsets(void)
{
    CUdeviceptr a, b;
    CHECK_CU(cuMemAlloc_v2(&a, 4096));
    CHECK_CU(cuMemAlloc_v2(&b, 4096));
    unsigned char in[4096], out[4096];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = (unsigned char)(i * 7);
    size_t copied = sim_bytes_copied();
    CHECK_CU(cuMemcpyHtoD_v2(a, in, sizeof in));
    CHECK_CU(cuMemcpyDtoD_v2(b, a, sizeof in));
    memset(out, 0, sizeof out);
    CHECK_CU(cuMemcpyDtoH_v2(out, b, sizeof out));
    ok(memcmp(in, out, sizeof in) == 0, "HtoD, DtoD, DtoH round trip");
    is_uint(sim_bytes_copied(), copied + 3 * sizeof in, "bytes_copied counts all three");

    CUstream s;
    CHECK_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    memset(out, 0, sizeof out);
    CHECK_CU(cuMemsetD8Async(a, 0x5a, 4096, s));
    CHECK_CU(cuMemcpyDtoDAsync_v2(b, a, 4096, s));
    CHECK_CU(cuMemcpyDtoHAsync_v2(out, b, 4096, s));
    CHECK_CU(cuStreamSynchronize(s));
    ok(out[0] == 0x5a && out[4095] == 0x5a, "asynchronous memset and copies, in stream order");
    CHECK_CU(cuMemcpyHtoDAsync_v2(a, in, sizeof in, s));
    CHECK_CU(cuMemcpyAsync(b, a, sizeof in, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemcpy((CUdeviceptr)(uintptr_t)out, b, sizeof out));
    ok(memcmp(in, out, sizeof in) == 0, "cuMemcpy and cuMemcpyAsync take host or device");

    uint16_t halves[4];
    uint32_t words[4];
    CHECK_CU(cuMemsetD16_v2(a, 0xbeef, 4));
    CHECK_CU(cuMemcpyDtoH_v2(halves, a, sizeof halves));
    ok(halves[0] == 0xbeef && halves[3] == 0xbeef, "cuMemsetD16");
    CHECK_CU(cuMemsetD32Async(a, 0xdeadbeef, 4, s));
    CHECK_CU(cuMemsetD16Async(a, 0x1234, 1, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemcpyDtoH_v2(words, a, sizeof words));
    ok(words[0] == 0xdead1234 && words[3] == 0xdeadbeef, "cuMemsetD32Async, cuMemsetD16Async");
    CHECK_CU(cuMemsetD32_v2(a, 7, 4));
    CHECK_CU(cuMemcpyDtoH_v2(words, a, sizeof words));
    ok(words[0] == 7 && words[3] == 7, "cuMemsetD32");
    is_int(cuMemsetD32_v2(a + 2, 0, 1), CUDA_ERROR_INVALID_VALUE,
           "cuMemsetD32 on an unaligned address: INVALID_VALUE");

    is_int(cuMemcpyHtoD_v2(a + 4000, in, 200), CUDA_ERROR_INVALID_VALUE,
           "a copy running past the allocation: INVALID_VALUE");
    is_int(cuMemcpyDtoH_v2(out, (CUdeviceptr)(uintptr_t)in, 16), CUDA_ERROR_INVALID_VALUE,
           "DtoH from an address that is not device memory: INVALID_VALUE");
    is_int(cuMemsetD8_v2((CUdeviceptr)(uintptr_t)out, 0, 16), CUDA_ERROR_INVALID_VALUE,
           "a memset of host memory that is not pinned: INVALID_VALUE");

    /* 2D: a 4 x 8-byte block from a host array with 16-byte rows into a pitched allocation. */
    CUdeviceptr pitched;
    size_t pitch;
    CHECK_CU(cuMemAllocPitch_v2(&pitched, &pitch, 8, 4, 4));
    CUDA_MEMCPY2D up = {.srcMemoryType = CU_MEMORYTYPE_HOST,
                        .srcHost = in,
                        .srcPitch = 16,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                        .dstDevice = pitched,
                        .dstPitch = pitch,
                        .WidthInBytes = 8,
                        .Height = 4};
    CHECK_CU(cuMemcpy2D_v2(&up));
    unsigned char rows[4][8];
    CUDA_MEMCPY2D down = {.srcMemoryType = CU_MEMORYTYPE_DEVICE,
                          .srcDevice = pitched,
                          .srcPitch = pitch,
                          .dstMemoryType = CU_MEMORYTYPE_HOST,
                          .dstHost = rows,
                          .dstPitch = 8,
                          .WidthInBytes = 8,
                          .Height = 4};
    CHECK_CU(cuMemcpy2DAsync_v2(&down, s));
    CHECK_CU(cuStreamSynchronize(s));
    ok(memcmp(rows[0], in, 8) == 0 && memcmp(rows[3], in + 48, 8) == 0,
       "cuMemcpy2D and cuMemcpy2DAsync keep rows apart by their pitches");
    CUDA_MEMCPY2D unified = {.srcMemoryType = CU_MEMORYTYPE_UNIFIED,
                             .srcDevice = pitched + pitch,
                             .srcPitch = pitch,
                             .dstMemoryType = CU_MEMORYTYPE_UNIFIED,
                             .dstDevice = (CUdeviceptr)(uintptr_t)rows,
                             .dstPitch = 4,
                             .WidthInBytes = 4,
                             .Height = 2};
    memset(rows, 0, sizeof rows);
    CHECK_CU(cuMemcpy2D_v2(&unified));
    ok(memcmp(rows[0], in + 16, 4) == 0 && memcmp(rows[0] + 4, in + 32, 4) == 0,
       "cuMemcpy2D between unified addresses");
    down.Height = 5;
    is_int(cuMemcpy2D_v2(&down), CUDA_ERROR_INVALID_VALUE,
           "a 2D copy past the allocation: INVALID_VALUE");

    /* 2D memsets fill width elements of each row, leaving the rest of the pitch alone. */
    CHECK_CU(cuMemsetD8_v2(pitched, 0, pitch * 4));
    CHECK_CU(cuMemsetD2D32_v2(pitched, pitch, 0x01010101, 1, 4));
    CHECK_CU(cuMemsetD2D16Async(pitched + 4, pitch, 0x0202, 1, 4, s));
    CHECK_CU(cuMemsetD2D8Async(pitched + 6, pitch, 3, 1, 3, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemcpyDtoH_v2(out, pitched, pitch * 4));
    ok(memcmp(out, "\1\1\1\1\2\2\3\0", 8) == 0 &&
           memcmp(out + 2 * pitch, "\1\1\1\1\2\2\3\0", 8) == 0 &&
           memcmp(out + 3 * pitch, "\1\1\1\1\2\2\0\0", 8) == 0 && out[pitch + 8] == 0,
       "cuMemsetD2D32, cuMemsetD2D16Async, cuMemsetD2D8Async");
    is_int(cuMemsetD2D8_v2(pitched, 4, 0, 8, 2), CUDA_ERROR_INVALID_VALUE,
           "a 2D memset with a pitch under its width: INVALID_VALUE");

    /* One address space: peer copies are device copies. */
    CUcontext ctx;
    CHECK_CU(cuCtxGetCurrent(&ctx));
    CHECK_CU(cuMemcpyPeer(a, ctx, pitched, ctx, 8));
    CHECK_CU(cuMemcpyPeerAsync(b, ctx, a, ctx, 8, s));
    CHECK_CU(cuStreamSynchronize(s));
    CHECK_CU(cuMemcpyDtoH_v2(out, b, 8));
    ok(memcmp(out, "\1\1\1\1\2\2\3\0", 8) == 0, "cuMemcpyPeer and cuMemcpyPeerAsync");

    CHECK_CU(cuStreamDestroy_v2(s));
    CHECK_CU(cuMemFree_v2(pitched));
    CHECK_CU(cuMemFree_v2(a));
    CHECK_CU(cuMemFree_v2(b));
}

static void pinned_host_memory(void)
{
    void *pinned;
    CUdeviceptr as_device = 0, dev;
    size_t used = sim_device_used(0);
    CHECK_CU(cuMemHostAlloc(&pinned, 8192, CU_MEMHOSTALLOC_DEVICEMAP));
    is_uint(sim_device_used(0), used, "pinned host memory is not device memory");
    CHECK_CU(cuMemHostGetDevicePointer_v2(&as_device, pinned, 0));
    ok(as_device == (CUdeviceptr)(uintptr_t)pinned, "its device pointer is the host pointer");
    CHECK_CU(cuMemAlloc_v2(&dev, 8192));
    memset(pinned, 0x11, 8192);
    CHECK_CU(cuMemcpyDtoD_v2(dev, as_device, 8192));
    CHECK_CU(cuMemsetD8_v2(as_device, 0x22, 4096));
    unsigned char *bytes = pinned;
    ok(bytes[0] == 0x22 && bytes[4096] == 0x11, "device copies and memsets reach pinned memory");
    CHECK_CU(cuMemFreeHost(pinned));
    is_int(cuMemFreeHost(pinned), CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost twice: INVALID_VALUE");

    void *small;
    CHECK_CU(cuMemAllocHost_v2(&small, 64));
    CHECK_CU(cuMemFreeHost(small));

    static char registered[16384];
    is_int(cuMemHostGetDevicePointer_v2(&as_device, registered, 0), CUDA_ERROR_INVALID_VALUE,
           "a device pointer for unregistered memory: INVALID_VALUE");
    CHECK_CU(cuMemHostRegister_v2(registered, sizeof registered, CU_MEMHOSTREGISTER_DEVICEMAP));
    is_int(cuMemHostRegister_v2(registered + 4096, 4096, 0),
           CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "registering it again: ALREADY_REGISTERED");
    CHECK_CU(cuMemHostGetDevicePointer_v2(&as_device, registered + 100, 0));
    ok(as_device == (CUdeviceptr)(uintptr_t)(registered + 100),
       "registered memory has a device pointer");
    CHECK_CU(cuMemcpyDtoD_v2(as_device, dev, 16));
    ok(registered[100] == 0x11, "and device copies reach it");
    CHECK_CU(cuMemHostUnregister(registered));
    is_int(cuMemHostUnregister(registered), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
           "unregistering twice: NOT_REGISTERED");
    CHECK_CU(cuMemFree_v2(dev));
}

int main(void)
{
    plan(37);
    /* Exact capacities: the driver's own memory is tested in sim_driver_memory. */
    sim_set_context_reserve(0);
    sim_set_kernel_reserve(0);
    sim_setup(8 * MiB);
    capacity_and_allocation();
    copies_and_memsets();
    pinned_host_memory();
    return exit_status();
}
