/* An eviction waits for every kernel still using its allocation: one running on another
 * thread's per-thread default stream (all of them are CU_STREAM_PER_THREAD to the program),
 * and one that reaches it through a pointer stored in device memory (a pointer array, as
 * cublas*Batched reads). Runs without host-located VMM: an evicted buffer is unmapped, and
 * a kernel still writing it crashes. */
#include "tests/lms_testlib.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define HALF (MIB / 2)
#define OTHERS 10 /* with the buffer, 22 MiB of handles on a 16 MiB device */
#define SLOW_US 300000

static CUcontext ctx;
static CUdeviceptr buf, other[OTHERS];

static void setup(void)
{
    ctx = lms_test_context();
    lms_test_alloc_buffers(&buf, 1, MIB, 10);
    lms_test_alloc_buffers(other, OTHERS, MIB, -1);
}

/* Writes every other buffer from a thread of its own: the buffer is evicted meanwhile. */
static void *evict_from_elsewhere(void *unused)
{
    (void)unused;
    CUstream s;
    CU_OK(cuCtxSetCurrent(ctx));
    CU_OK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (int i = 0; i < OTHERS; i++)
        CU_OK(cuMemsetD8Async(other[i], 0, MIB, s));
    CU_OK(cuStreamSynchronize(s));
    CU_OK(cuStreamDestroy(s));
    return NULL;
}

static void evict_meanwhile(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, evict_from_elsewhere, NULL) != 0 || pthread_join(t, NULL) != 0)
        bail_out("cannot run the evicting thread");
}

static int holds(CUdeviceptr p, size_t offset, size_t bytes, unsigned char value)
{
    static unsigned char host[MIB];
    return cuMemcpyDtoH(host, p, MIB) == CUDA_SUCCESS && host[offset] == value &&
           host[offset + bytes - 1] == value;
}

/* slow_add(ptr, bytes, delta): sleeps, then adds delta to every byte. */
static void slow_add(const sim_launch *l)
{
    usleep(SLOW_US);
    uint8_t *p = *(uint8_t **)l->params[0];
    for (size_t i = 0, n = *(size_t *)l->params[1]; i < n; i++)
        p[i] = (uint8_t)(p[i] + *(int *)l->params[2]);
}

static CUresult launch_slow_add(CUstream s, CUdeviceptr p, size_t bytes, int delta)
{
    static CUkernel k;
    static const size_t sizes[] = { sizeof(void *), sizeof(size_t), sizeof(int) };
    if (!k)
        k = sim_register_kernel("slow_add", slow_add, 3, sizes);
    void *params[] = { &p, &bytes, &delta };
    return cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL);
}

static pthread_barrier_t launched, evicted;

/* On its per-thread default stream: a slow kernel on the buffer's first half, kept alive (a
 * per-thread stream goes with its thread) until the buffer has been evicted. */
static void *slow_on_own_stream(void *unused)
{
    (void)unused;
    CU_OK(cuCtxSetCurrent(ctx));
    CU_OK(launch_slow_add(CU_STREAM_PER_THREAD, buf, HALF, 1));
    pthread_barrier_wait(&launched);
    pthread_barrier_wait(&evicted);
    CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    return NULL;
}

/* A quick kernel on the second half, on this thread's own per-thread default stream. */
static void *quick_on_own_stream(void *unused)
{
    (void)unused;
    CU_OK(cuCtxSetCurrent(ctx));
    CU_OK(lms_test_launch(lms_test_add_kernel(), CU_STREAM_PER_THREAD, buf + HALF, HALF, 1));
    CU_OK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
    return NULL;
}

static int per_thread_streams(void)
{
    setup();
    pthread_t slow, quick;
    EXPECT(pthread_barrier_init(&launched, NULL, 2) == 0 && pthread_barrier_init(&evicted, NULL, 2) == 0);
    EXPECT(pthread_create(&slow, NULL, slow_on_own_stream, NULL) == 0);
    pthread_barrier_wait(&launched);
    EXPECT(pthread_create(&quick, NULL, quick_on_own_stream, NULL) == 0);
    EXPECT(pthread_join(quick, NULL) == 0);
    evict_meanwhile();
    pthread_barrier_wait(&evicted);
    EXPECT(pthread_join(slow, NULL) == 0);
    EXPECT(holds(buf, 0, HALF, 11) && holds(buf, HALF, HALF, 11));
    return 0;
}

/* indirect_add(table, bytes, delta): sleeps, then adds delta to every byte of the buffer
 * whose address is the first entry of table, an array of pointers in device memory. */
static void indirect_add(const sim_launch *l)
{
    usleep(SLOW_US);
    uint8_t *p = **(uint8_t ***)l->params[0];
    for (size_t i = 0, n = *(size_t *)l->params[1]; i < n; i++)
        p[i] = (uint8_t)(p[i] + *(int *)l->params[2]);
}

static int pointer_in_device_memory(void)
{
    setup();
    static const size_t sizes[] = { sizeof(void *), sizeof(size_t), sizeof(int) };
    CUkernel k = sim_register_kernel("indirect_add", indirect_add, 3, sizes);
    CUdeviceptr table, entries[4] = { buf };
    EXPECT(cuMemAlloc(&table, sizeof entries) == CUDA_SUCCESS);
    EXPECT(cuMemcpyHtoD(table, entries, sizeof entries) == CUDA_SUCCESS);
    CUstream s;
    EXPECT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    size_t bytes = MIB;
    int delta = 1;
    void *params[] = { &table, &bytes, &delta };
    EXPECT(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, s, params, NULL) == CUDA_SUCCESS);
    evict_meanwhile();
    EXPECT(cuStreamSynchronize(s) == CUDA_SUCCESS);
    EXPECT(holds(buf, 0, MIB, 11));
    return 0;
}

static const lms_test_case cases[] = {
    { "per-thread-streams", "a kernel on one thread's per-thread default stream is waited for though "
      "another thread's used the buffer since", per_thread_streams, { NULL } },
    { "pointer-in-device-memory", "a kernel that reaches a buffer through a pointer array that the "
      "host copied to the device is waited for", pointer_in_device_memory, { NULL } },
};
#define CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    static const char *const common[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16", NULL };
    return lms_test_main(argc, argv, cases, CASES, common);
}
