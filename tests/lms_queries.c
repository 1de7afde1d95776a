/* What the driver says of a swappable allocation, whatever its residency: pointer queries
 * answer device memory of its own device and its own range, as for cuMemAlloc memory; legacy
 * IPC refuses it with a log line that says what to do; a handle retained from it stays its
 * own (liblms never moves it nor hands it to another allocation). */
#include "tests/lms_testlib.h"

#include <string.h>

#define MIB ((size_t)1 << 20)
#define SIZE (MIB + 100) /* not a multiple of the granularity: its handle is larger */
#define OTHERS 10        /* 20 MiB of handles on a 16 MiB device */

static CUdeviceptr buf, other[OTHERS];

static void setup(void)
{
    CU_OK(cuMemAlloc(&buf, SIZE));
    CU_OK(cuMemsetD8(buf, 10, SIZE));
    for (int i = 0; i < OTHERS; i++)
        CU_OK(cuMemAlloc(&other[i], MIB));
}

static void touch_others(void)
{
    for (int i = 0; i < OTHERS; i++)
        CU_OK(cuMemsetD8(other[i], 0, MIB));
}

/* Checks every answer about an address inside buf. */
static int answers_as_device_memory(CUdeviceptr inside)
{
    unsigned type = 0;
    int ordinal = -5, ipc = -5;
    CUdeviceptr start = 0, base = 0;
    size_t size = 0, range = 0;
    EXPECT(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, inside) == CUDA_SUCCESS);
    EXPECT(type == CU_MEMORYTYPE_DEVICE);
    EXPECT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, inside) == CUDA_SUCCESS);
    EXPECT(ordinal == 0);
    EXPECT(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, inside) == CUDA_SUCCESS);
    EXPECT(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, inside) == CUDA_SUCCESS);
    EXPECT(start == buf && size == SIZE);
    EXPECT(cuMemGetAddressRange(&base, &range, inside) == CUDA_SUCCESS);
    EXPECT(base == buf && range == SIZE);
    CUpointer_attribute attrs[] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                    CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE };
    type = 0, ordinal = -5, start = 0, size = 0;
    void *data[] = { &type, &ordinal, &start, &size, &ipc };
    EXPECT(cuPointerGetAttributes(5, attrs, data, inside) == CUDA_SUCCESS);
    EXPECT(type == CU_MEMORYTYPE_DEVICE && ordinal == 0 && start == buf && size == SIZE && ipc == 0);
    return 0;
}

static int pointer_queries(void)
{
    setup();
    EXPECT(answers_as_device_memory(buf + 10) == 0);
    touch_others(); /* evicts buf */
    EXPECT(answers_as_device_memory(buf + SIZE - 1) == 0);
    return 0;
}

static int ipc_refused(void)
{
    setup();
    CUipcMemHandle handle;
    lms_test_stderr_begin();
    CUresult r = cuIpcGetMemHandle(&handle, buf);
    const char *log = lms_test_stderr_end();
    EXPECT(r == CUDA_ERROR_INVALID_VALUE);
    EXPECT(strstr(log, "cuIpcGetMemHandle") && strstr(log, "LMS_THRESHOLD_KB"));
    CUdeviceptr small;
    EXPECT(cuMemAlloc(&small, 4096) == CUDA_SUCCESS);
    EXPECT(cuIpcGetMemHandle(&handle, small) == CUDA_SUCCESS);
    return 0;
}

/* Whether the bytes of handle h (one granule of 2 MiB), mapped at an address of its own, all
 * equal value over the allocation's size. */
static int handle_holds(CUmemGenericAllocationHandle h, unsigned char value)
{
    static unsigned char host[SIZE];
    const size_t bytes = 2 * MIB;
    CUdeviceptr va;
    CUmemAccessDesc access = { { CU_MEM_LOCATION_TYPE_DEVICE, 0 }, CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    EXPECT(cuMemAddressReserve(&va, bytes, 0, 0, 0) == CUDA_SUCCESS);
    EXPECT(cuMemMap(va, bytes, 0, h, 0) == CUDA_SUCCESS);
    EXPECT(cuMemSetAccess(va, bytes, &access, 1) == CUDA_SUCCESS);
    EXPECT(cuMemcpyDtoH(host, va, SIZE) == CUDA_SUCCESS);
    EXPECT(cuMemUnmap(va, bytes) == CUDA_SUCCESS && cuMemAddressFree(va, bytes) == CUDA_SUCCESS);
    for (size_t i = 0; i < SIZE; i++)
        EXPECT(host[i] == value);
    return 0;
}

/* The program retains buf's handle (to export it, say): under pressure, and after buf is
 * freed and others take its place, the handle still holds buf's bytes. */
static int retained_handle(void)
{
    setup();
    CUmemGenericAllocationHandle mine;
    EXPECT(cuMemRetainAllocationHandle(&mine, (void *)buf) == CUDA_SUCCESS);
    touch_others();
    EXPECT(handle_holds(mine, 10) == 0);
    EXPECT(cuMemFree(buf) == CUDA_SUCCESS);
    CUdeviceptr next[OTHERS];
    for (int i = 0; i < OTHERS; i++) {
        EXPECT(cuMemAlloc(&next[i], SIZE) == CUDA_SUCCESS);
        EXPECT(cuMemsetD8(next[i], 0x55, SIZE) == CUDA_SUCCESS);
    }
    EXPECT(handle_holds(mine, 10) == 0);
    EXPECT(cuMemRelease(mine) == CUDA_SUCCESS);
    return 0;
}

static const lms_test_case cases[] = {
    { "pointer-queries", "pointer queries answer device memory, its device and its range, resident "
      "or evicted", pointer_queries, { NULL } },
    { "ipc-refused", "cuIpcGetMemHandle of a swappable allocation fails with a log line saying what "
      "to do", ipc_refused, { NULL } },
    { "retained-handle", "a retained handle is never moved nor reused for another allocation",
      retained_handle, { NULL } },
};
#define CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    static const char *const common[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0",
                                          "LMS_SIM_CAPACITY_MB=16", NULL };
    return lms_test_main(argc, argv, cases, CASES, common);
}
