/* Four threads launch on four streams, sharing read-only buffers and writing their own,
 * under 4x oversubscription (64 MiB of swappable buffers on a 16 MiB device; each
 * call pins two buffers, so four threads need eight 2 MiB handles at once). */
#include "tests/lms_testlib.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define THREADS 4
#define SHARED 16
#define OWN 4
#define ROUNDS 12

static CUcontext ctx;
static CUdeviceptr shared[SHARED];
static CUkernel copy_add;

/* dst[i] = src[i] + delta */
static void copy_add_fn(const sim_launch *l)
{
    uint8_t *dst = *(uint8_t **)l->params[0];
    const uint8_t *src = *(const uint8_t **)l->params[1];
    size_t n = *(size_t *)l->params[2];
    int delta = *(int *)l->params[3];
    for (size_t i = 0; i < n; i++)
        dst[i] = (uint8_t)(src[i] + delta);
}

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    static __thread unsigned char got[MIB], want[MIB];
    long mismatches = 0;
    CU_OK(cuCtxSetCurrent(ctx));
    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr own[OWN];
    for (int i = 0; i < OWN; i++)
        CU_OK(cuMemAlloc(&own[i], MIB));
    for (int round = 0; round < ROUNDS; round++) {
        int s = (t * 3 + round) % SHARED, o = round % OWN, delta = t + 1;
        size_t n = MIB;
        void *params[] = { &own[o], &shared[s], &n, &delta };
        CU_OK(cuLaunchKernel((CUfunction)copy_add, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
        CU_OK(cuMemcpyDtoHAsync(got, own[o], MIB, stream));
        CU_OK(cuStreamSynchronize(stream));
        lms_test_pattern(want, MIB, (unsigned)s);
        for (size_t i = 0; i < MIB; i++)
            mismatches += got[i] != (uint8_t)(want[i] + delta);
    }
    for (int i = 0; i < OWN; i++)
        CU_OK(cuMemFree(own[i]));
    CU_OK(cuStreamDestroy(stream));
    return (void *)(intptr_t)mismatches;
}

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0",
                                       "LMS_SIM_CAPACITY_MB=16", NULL };
    lms_test_with_env_swapping(argv, env);
    plan(THREADS + 1);
    ctx = lms_test_context();
    size_t sizes[] = { sizeof(void *), sizeof(void *), sizeof(size_t), sizeof(int) };
    copy_add = sim_register_kernel("copy_add", copy_add_fn, 4, sizes);
    static unsigned char host[MIB];
    for (int s = 0; s < SHARED; s++) {
        CU_OK(cuMemAlloc(&shared[s], MIB));
        lms_test_pattern(host, MIB, (unsigned)s);
        CU_OK(cuMemcpyHtoD(shared[s], host, MIB));
    }
    pthread_t threads[THREADS];
    for (int t = 0; t < THREADS; t++)
        pthread_create(&threads[t], NULL, worker, (void *)(intptr_t)t);
    for (int t = 0; t < THREADS; t++) {
        void *mismatches;
        pthread_join(threads[t], &mismatches);
        is_int((intptr_t)mismatches, 0, "thread %d: every byte it read back is right", t);
    }
    ok(sim_device_used(0) <= 16 * MIB, "device use stayed within the soft limit");
    for (int s = 0; s < SHARED; s++)
        CU_OK(cuMemFree(shared[s]));
    return exit_status();
}
