/* The fault sweep's reference workload (tests/fault_sweep.py): a small program under liblms
 * on the simulated GPU, on every simulated device (LMS_SIM_DEVICES), oversubscribed so that
 * it swaps, its data checked against a host model. Run with LMS_THRESHOLD_KB=64
 * LMS_EXCLUDE_MB=0 LMS_SIM_CAPACITY_MB=6: five 1 MiB buffers (2 MiB handles) per 6 MiB device.
 *
 * Per device: copies in, a kernel on each buffer, async memset and copy, a memset of a small
 * (unmanaged) buffer, a captured graph launched twice, with `--loop` a training-like loop (a
 * kernel on each of four buffers, then a wait, LOOP_ITERATIONS times: under
 * LMS_POLICY=lookahead, just enough for the policy to learn it, time its steps and choose
 * between its plans; it takes four times the workload's other calls, so the sweep runs it in
 * one configuration only), a peer copy between the devices; then every byte read back and
 * compared, everything freed, and one more buffer used and checked: the program must work
 * again after a fault.
 *
 * A driver call that fails is reported on stdout ("error CALL RESULT") and retried once. An
 * injected fault fails one call only and a failed call must have done nothing, so the retry
 * works and the model holds; a retry that fails too is reported as "persisting CALL RESULT".
 * The last line is "done errors=E persisting=P mismatches=M"; the exit status is 0 when P and
 * M are 0. */
#include "tests/lms_testlib.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define BUFFERS 5
#define SMALL_BYTES 4096
#define MAX_DEVICES 2
#define LOOP_BUFFERS 4     /* of BUFFERS: three fit the device beside the small buffer */
#define LOOP_ITERATIONS 18 /* fewer, and the plans are not yet timed when it ends */

static unsigned errors, persisting, mismatches;

/* Reports a failed call; true when it must be retried. */
static int failed(CUresult r, const char *what, int retry)
{
    if (r == CUDA_SUCCESS)
        return 0;
    const char *name = NULL;
    cuGetErrorName(r, &name);
    printf("%s %s %s\n", retry ? "error" : "persisting", what, name ? name : "?");
    if (retry)
        errors++;
    else
        persisting++;
    return retry;
}

/* The call, and once more if it failed. */
#define CALL(expr)                                  \
    do {                                            \
        if (failed((expr), #expr, 1))               \
            failed((expr), #expr, 0);               \
    } while (0)

typedef struct device_state {
    CUcontext ctx;
    CUstream stream;
    CUdeviceptr buf[BUFFERS], small;
    unsigned char model[BUFFERS][MIB], small_model[SMALL_BYTES];
} device_state;

static device_state devs[MAX_DEVICES];
static unsigned char host[MIB];

static CUresult launch_add(CUstream stream, CUdeviceptr ptr, size_t bytes, int delta)
{
    return lms_test_launch(lms_test_add_kernel(), stream, ptr, bytes, delta);
}

static void model_add(unsigned char *bytes, size_t n, int delta)
{
    for (size_t k = 0; k < n; k++)
        bytes[k] = (unsigned char)(bytes[k] + delta);
}

static void use(device_state *s)
{
    CALL(cuCtxSetCurrent(s->ctx));
}

static void allocate_and_write(device_state *s, unsigned seed)
{
    use(s);
    CALL(cuStreamCreate(&s->stream, CU_STREAM_NON_BLOCKING));
    for (unsigned i = 0; i < BUFFERS; i++) {
        CALL(cuMemAlloc(&s->buf[i], MIB));
        lms_test_pattern(s->model[i], MIB, seed + i);
        CALL(cuMemcpyHtoD(s->buf[i], s->model[i], MIB));
    }
    CALL(cuMemAlloc(&s->small, SMALL_BYTES));
    memset(s->small_model, (int)seed, SMALL_BYTES);
    CALL(cuMemcpyHtoD(s->small, s->small_model, SMALL_BYTES));
}

/* Kernels, async memset and copy on the program's stream; a memset of the small buffer. */
static void compute(device_state *s, int device)
{
    use(s);
    for (unsigned i = 0; i < BUFFERS; i++) {
        CALL(launch_add(s->stream, s->buf[i], MIB, (int)i + 1));
        model_add(s->model[i], MIB, (int)i + 1);
    }
    const unsigned word = 0x01020304u;
    CALL(cuMemsetD32Async(s->buf[1], word, 64 * 1024 / 4, s->stream));
    for (size_t k = 0; k < 64 * 1024; k += 4)
        memcpy(&s->model[1][k], &word, 4);
    CALL(cuMemcpyDtoDAsync(s->buf[2], s->buf[0], 128 * 1024, s->stream));
    memcpy(s->model[2], s->model[0], 128 * 1024);
    CALL(cuMemsetD8(s->small, (unsigned char)(device + 1), SMALL_BYTES));
    memset(s->small_model, device + 1, SMALL_BYTES);
    CALL(cuStreamSynchronize(s->stream));
}

/* A kernel on buffer 3, captured into a graph and launched twice. */
static void graph(device_state *s)
{
    use(s);
    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    CALL(cuStreamBeginCapture(s->stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CALL(launch_add(s->stream, s->buf[3], MIB, 5));
    CALL(cuStreamEndCapture(s->stream, &g));
    CALL(cuGraphInstantiateWithFlags(&exec, g, 0));
    for (int launch = 0; launch < 2; launch++) {
        CALL(cuGraphLaunch(exec, s->stream));
        model_add(s->model[3], MIB, 5);
    }
    CALL(cuStreamSynchronize(s->stream));
    CALL(cuGraphExecDestroy(exec));
    CALL(cuGraphDestroy(g));
}

/* The loop of a training run: the same launches every iteration, and a wait at its end. */
static void loop(device_state *s)
{
    use(s);
    for (int iteration = 0; iteration < LOOP_ITERATIONS; iteration++) {
        for (unsigned i = 0; i < LOOP_BUFFERS; i++) {
            CALL(launch_add(s->stream, s->buf[i], MIB, 1));
            model_add(s->model[i], MIB, 1);
        }
        CALL(cuStreamSynchronize(s->stream));
    }
}

static void check(device_state *s, int device)
{
    use(s);
    for (unsigned i = 0; i < BUFFERS; i++) {
        memset(host, 0, MIB);
        CALL(cuMemcpyDtoH(host, s->buf[i], MIB));
        if (memcmp(host, s->model[i], MIB) != 0) {
            printf("mismatch device %d buffer %u\n", device, i);
            mismatches++;
        }
    }
    memset(host, 0, SMALL_BYTES);
    CALL(cuMemcpyDtoHAsync(host, s->small, SMALL_BYTES, s->stream));
    CALL(cuStreamSynchronize(s->stream));
    if (memcmp(host, s->small_model, SMALL_BYTES) != 0) {
        printf("mismatch device %d small buffer\n", device);
        mismatches++;
    }
}

static void release(device_state *s)
{
    use(s);
    for (unsigned i = 0; i < BUFFERS; i++)
        CALL(cuMemFree(s->buf[i]));
    CALL(cuMemFree(s->small));
    CALL(cuStreamDestroy(s->stream));
}

/* After everything: one buffer allocated, written, launched on, read back and freed. */
static void again(device_state *s, int device)
{
    use(s);
    CUdeviceptr p = 0;
    CALL(cuMemAlloc(&p, MIB));
    lms_test_pattern(s->model[0], MIB, 99);
    CALL(cuMemcpyHtoD(p, s->model[0], MIB));
    CALL(launch_add(NULL, p, MIB, 1));
    model_add(s->model[0], MIB, 1);
    CALL(cuMemcpyDtoH(host, p, MIB));
    if (memcmp(host, s->model[0], MIB) != 0) {
        printf("mismatch device %d after the end\n", device);
        mismatches++;
    }
    CALL(cuMemFree(p));
}

int main(int argc, char **argv)
{
    int looping = argc == 2 && strcmp(argv[1], "--loop") == 0;
    if (argc > 1 && !looping) {
        fprintf(stderr, "usage: %s [--loop]\n", argv[0]);
        return 2;
    }
    int count = 0;
    CALL(cuInit(0));
    CALL(cuDeviceGetCount(&count));
    if (count > MAX_DEVICES)
        count = MAX_DEVICES;
    for (int d = 0; d < count; d++)
        CALL(cuDevicePrimaryCtxRetain(&devs[d].ctx, d));
    for (int d = 0; d < count; d++)
        allocate_and_write(&devs[d], (unsigned)d * 16);
    for (int d = 0; d < count; d++)
        compute(&devs[d], d);
    for (int d = 0; d < count; d++)
        graph(&devs[d]);
    for (int d = 0; looping && d < count; d++)
        loop(&devs[d]);
    if (count == 2) { /* buffer 4 of device 1 becomes device 0's */
        use(&devs[1]);
        CALL(cuMemcpyPeer(devs[1].buf[4], devs[1].ctx, devs[0].buf[4], devs[0].ctx, MIB));
        memcpy(devs[1].model[4], devs[0].model[4], MIB);
    }
    for (int d = 0; d < count; d++)
        check(&devs[d], d);
    for (int d = 0; d < count; d++)
        release(&devs[d]);
    for (int d = 0; d < count; d++)
        again(&devs[d], d);
    for (int d = 0; d < count; d++)
        CALL(cuDevicePrimaryCtxRelease(d));
    printf("done errors=%u persisting=%u mismatches=%u\n", errors, persisting, mismatches);
    return persisting || mismatches ? 1 : 0;
}
