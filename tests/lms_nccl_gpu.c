/* The real NCCL under liblms on the real GPU (tests/lms_nccl_gpu.sh runs it, under
 * LD_PRELOAD, in make check-gpu). One case per run, named by the argument: a communicator of
 * one rank on device 0, and one of its collectives (or a send to itself paired with a receive
 * in a group) whose input other buffers' writes evicted just before the call, the result
 * checked against the host's model. With one rank every operation's result is its input, a
 * sum over one rank; the receive buffer starts as NaNs, so a call that writes nothing fails.
 *
 * On success a run prints `input_bytes N`: the bytes of the evicted input, which liblms must
 * have copied back in for the call ("swapped_in" in its LMS_STATS=json). The script runs each
 * case twice, because an evicted buffer that stays mapped in host memory (LMS_MAP_EVICTED=1,
 * the default) serves NCCL's kernels there, correctly but without liblms's hook:
 * - LMS_MAP_EVICTED=1: the receive buffer is written last, resident during the call and when
 *   read back, so that only the hook's restore of the input copies anything in. (In place, and
 *   in the group whose buffers are evicted between its calls, the result is read from a buffer
 *   that a missing hook would leave in host memory, to be copied in then: these count below.)
 * - LMS_MAP_EVICTED=0: evicted buffers are unmapped, and a kernel reaching one faults.
 *
 * NCCL is loaded as the trainer loads it (trainer/nccl_gradients.c): dlopen into the global
 * scope, then each function through it, where a preloaded liblms's wrappers come first.
 *
 *   lms_nccl_gpu_check probe     exits 0 where NCCL loads, else prints why and exits 1
 *   lms_nccl_gpu_check list      the cases: "NAME DESCRIPTION" a line
 *   lms_nccl_gpu_check CASE      runs one case */
#include "tests/fake_nccl.h"

#include <cuda.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define BYTES (64 * MIB)                 /* each buffer */
#define COUNT (BYTES / sizeof(float))
#define FILLERS 20 /* written to evict: more than the script's 1 GiB cache */

#define NCCL_FUNCTIONS(X)                                                                         \
    X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclAllReduce) X(ncclReduceScatter) \
    X(ncclAllGather) X(ncclBroadcast) X(ncclReduce) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)

static struct {
#define FIELD(name) __typeof__(name) *name;
    NCCL_FUNCTIONS(FIELD)
#undef FIELD
    const char *(*ncclGetErrorString)(ncclResult_t); /* for messages; NULL where NCCL lacks it */
} nccl;

/* Loads NCCL; on failure returns its reason. */
static const char *load_nccl(void)
{
    static char why[512];
    if (!dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL)) {
        snprintf(why, sizeof why, "cannot load NCCL: %s", dlerror());
        return why;
    }
#define RESOLVE(name)                                                                    \
    if (!(nccl.name = (__typeof__(name) *)dlsym(RTLD_DEFAULT, #name))) {                 \
        snprintf(why, sizeof why, "the NCCL loaded (libnccl.so.2) has no %s", #name);   \
        return why;                                                                      \
    }
    NCCL_FUNCTIONS(RESOLVE)
#undef RESOLVE
    nccl.ncclGetErrorString = (const char *(*)(ncclResult_t))dlsym(RTLD_DEFAULT, "ncclGetErrorString");
    return NULL;
}

static void cu_ok(CUresult r, const char *what)
{
    if (r == CUDA_SUCCESS) return;
    const char *name = NULL;
    cuGetErrorName(r, &name);
    fprintf(stderr, "lms_nccl_gpu_check: %s: %s (%d)\n", what, name ? name : "unknown CUDA error", (int)r);
    exit(1);
}
static void nccl_ok(ncclResult_t r, const char *what)
{
    if (r == ncclSuccess) return;
    fprintf(stderr, "lms_nccl_gpu_check: %s: %s (NCCL result %d)\n", what,
            nccl.ncclGetErrorString ? nccl.ncclGetErrorString(r) : "failed", (int)r);
    exit(1);
}
#define CU_OK(call) cu_ok((call), #call)
#define NCCL_OK(call) nccl_ok((call), #call)

static float *host_buffer(void)
{
    float *host = malloc(BYTES);
    if (!host) {
        fprintf(stderr, "lms_nccl_gpu_check: out of host memory for %zu bytes\n", BYTES);
        exit(1);
    }
    return host;
}

/* A device address as NCCL takes it. */
#define DEVICE(p) ((void *)(uintptr_t)(p))

static CUdeviceptr filler[FILLERS];
static CUstream stream;
static ncclComm_t comm;

/* Writes every filler whole: the least recently used buffers (the input) are evicted, and
 * (the writes being whole) nothing is copied back in for the fillers. */
static void evict(void)
{
    for (int i = 0; i < FILLERS; i++) CU_OK(cuMemsetD8(filler[i], (unsigned char)i, BYTES));
    CU_OK(cuCtxSynchronize());
}

/* Float i of the input: distinct along the buffer, exact in a float. */
static float input_value(size_t i) { return (float)((i * 2654435761u) % 1000003u); }

/* The operations, each on `send` and `recv` (the same buffer for the in-place one). With one
 * rank, recv's COUNT floats become send's. */
static void all_reduce(CUdeviceptr send, CUdeviceptr recv)
{
    NCCL_OK(nccl.ncclAllReduce(DEVICE(send), DEVICE(recv), COUNT, ncclFloat, ncclSum, comm, stream));
}
static void reduce_scatter(CUdeviceptr send, CUdeviceptr recv)
{
    NCCL_OK(nccl.ncclReduceScatter(DEVICE(send), DEVICE(recv), COUNT, ncclFloat, ncclSum, comm, stream));
}
static void all_gather(CUdeviceptr send, CUdeviceptr recv)
{
    NCCL_OK(nccl.ncclAllGather(DEVICE(send), DEVICE(recv), COUNT, ncclFloat, comm, stream));
}
static void broadcast(CUdeviceptr send, CUdeviceptr recv)
{
    NCCL_OK(nccl.ncclBroadcast(DEVICE(send), DEVICE(recv), COUNT, ncclFloat, 0, comm, stream));
}
static void reduce(CUdeviceptr send, CUdeviceptr recv)
{
    NCCL_OK(nccl.ncclReduce(DEVICE(send), DEVICE(recv), COUNT, ncclFloat, ncclSum, 0, comm, stream));
}
/* NCCL launches a group's work at its end: the send's buffer must stay resident (held) while
 * the fillers evict everything else, the receive buffer too, between the two calls. */
static void send_receive(CUdeviceptr send, CUdeviceptr recv)
{
    NCCL_OK(nccl.ncclGroupStart());
    NCCL_OK(nccl.ncclSend(DEVICE(send), COUNT, ncclFloat, 0, comm, stream));
    evict();
    NCCL_OK(nccl.ncclRecv(DEVICE(recv), COUNT, ncclFloat, 0, comm, stream));
    NCCL_OK(nccl.ncclGroupEnd());
}

static const struct {
    const char *name, *what;
    void (*issue)(CUdeviceptr send, CUdeviceptr recv);
    int in_place;
} cases[] = {
    {"all_reduce", "ncclAllReduce", all_reduce, 0},
    {"all_reduce_in_place", "ncclAllReduce in place", all_reduce, 1},
    {"reduce_scatter", "ncclReduceScatter", reduce_scatter, 0},
    {"all_gather", "ncclAllGather", all_gather, 0},
    {"broadcast", "ncclBroadcast from rank 0", broadcast, 0},
    {"reduce", "ncclReduce to rank 0", reduce, 0},
    {"send_receive", "ncclSend to itself and ncclRecv in a group, evicting between the two", send_receive, 0},
};
#define CASES (sizeof cases / sizeof cases[0])

/* Whether the COUNT floats at p are the input, once the stream is done. */
static int holds_input(CUdeviceptr p)
{
    float *host = host_buffer();
    CU_OK(cuStreamSynchronize(stream));
    CU_OK(cuMemcpyDtoH(host, p, BYTES));
    size_t wrong = 0, first = 0;
    for (size_t i = COUNT; i-- > 0;)
        if (host[i] != input_value(i)) wrong++, first = i;
    if (wrong)
        fprintf(stderr, "lms_nccl_gpu_check: %zu of %zu floats wrong, the first %zu: %g, not %g\n", wrong, COUNT,
                first, host[first], input_value(first));
    free(host);
    return !wrong;
}

static int run_case(size_t c)
{
    const char *why = load_nccl();
    if (why) {
        fprintf(stderr, "lms_nccl_gpu_check: %s\n", why);
        return 1;
    }
    CUdevice device;
    CUcontext context;
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&device, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&context, device));
    CU_OK(cuCtxSetCurrent(context));
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    ncclUniqueId id;
    NCCL_OK(nccl.ncclGetUniqueId(&id));
    NCCL_OK(nccl.ncclCommInitRank(&comm, 1, id, 0));

    CUdeviceptr send, recv;
    CU_OK(cuMemAlloc(&send, BYTES));
    float *host = host_buffer();
    for (size_t i = 0; i < COUNT; i++) host[i] = input_value(i);
    CU_OK(cuMemcpyHtoD(send, host, BYTES));
    free(host);
    for (int i = 0; i < FILLERS; i++) CU_OK(cuMemAlloc(&filler[i], BYTES));
    evict();
    recv = send;
    if (!cases[c].in_place) {
        CU_OK(cuMemAlloc(&recv, BYTES));
        CU_OK(cuMemsetD32(recv, 0x7fc00000u, COUNT)); /* NaN: never equal to the input */
    }
    cases[c].issue(send, recv);
    int right = holds_input(recv);
    NCCL_OK(nccl.ncclCommDestroy(comm));
    if (!right) return 1;
    printf("input_bytes %zu\n", BYTES);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "probe") == 0) {
        const char *why = load_nccl();
        if (why) printf("%s\n", why);
        return why != NULL;
    }
    if (argc == 2 && strcmp(argv[1], "list") == 0) {
        for (size_t c = 0; c < CASES; c++) printf("%s %s\n", cases[c].name, cases[c].what);
        return 0;
    }
    for (size_t c = 0; argc == 2 && c < CASES; c++)
        if (strcmp(argv[1], cases[c].name) == 0) return run_case(c);
    fprintf(stderr, "usage: lms_nccl_gpu_check probe|list|CASE%s%s%s\n", argc == 2 ? " (unknown case '" : "",
            argc == 2 ? argv[1] : "", argc == 2 ? "': see list)" : "");
    return 2;
}
