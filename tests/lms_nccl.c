/* NCCL's calls under liblms (preload/nccl_wrappers.c), with a stand-in NCCL (tests/fake_nccl.c)
 * whose kernels, like NCCL's, find their buffers through work descriptors no launch parameter
 * names. The buffers are 4x the device and each call's are evicted just before it, and the
 * device's other buffers written while its slow kernel is still queued: each collective, and a
 * send and a receive paired in a group whose buffers are evicted between the calls, reads and
 * writes the right bytes. Without the hook (or without the group's buffers held to its end)
 * the kernels find their buffers unmapped and crash where host-located VMM is off; where it is
 * on, an evicted buffer stays mapped at its address, in host memory, and they would work
 * there, slowly. */
#include "tests/lms_testlib.h"
#include "tests/fake_nccl.h"

#define MIB ((size_t)1 << 20)
#define COUNT (MIB / sizeof(float)) /* floats in a buffer */
#define BUFS 64                     /* 64 MiB on a 16 MiB device */
#define USED 8                      /* the calls' buffers: the others evict them */

static CUdeviceptr buf[BUFS];
static CUstream stream;
static ncclComm_t comm;

static void fill(CUdeviceptr p, float value)
{
    static float host[COUNT];
    for (size_t i = 0; i < COUNT; i++) host[i] = value;
    CU_OK(cuMemcpyHtoD(p, host, MIB));
}

/* Buffer i holds i + 1 everywhere; the communicator has 2 ranks, this one rank 0. */
static void setup(void)
{
    lms_test_context();
    lms_test_alloc_buffers(buf, BUFS, MIB, -1);
    for (int i = 0; i < USED; i++) fill(buf[i], (float)(i + 1));
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 2, id, 0) != ncclSuccess)
        bail_out("the stand-in NCCL does not start");
}

/* Writes 24 MiB of other buffers: the least recently used, the calls' among them, go. */
static void evict(void)
{
    for (int i = USED; i < USED + 24; i++) CU_OK(cuMemsetD8(buf[i], 0, MIB));
}

/* Whether floats [first, first + count) of p all hold value, once the stream is done. */
static int holds(CUdeviceptr p, size_t first, size_t count, float value)
{
    static float host[COUNT];
    if (cuStreamSynchronize(stream) != CUDA_SUCCESS || cuMemcpyDtoH(host, p, MIB) != CUDA_SUCCESS) return 0;
    for (size_t i = first; i < first + count; i++)
        if (host[i] != value) {
            fprintf(stderr, "float %zu holds %g, not %g\n", i, host[i], value);
            return 0;
        }
    return 1;
}

#define SEND(i) ((const void *)buf[i])
#define RECV(i) ((void *)buf[i])

/* Evicts, issues the call, evicts again while its kernel waits. */
#define CALL(expr)                            \
    do {                                      \
        evict();                              \
        EXPECT((expr) == ncclSuccess);        \
        evict();                              \
    } while (0)

static int collectives(void)
{
    setup();
    CALL(ncclAllReduce(SEND(0), RECV(1), COUNT, ncclFloat, ncclSum, comm, stream));
    EXPECT(holds(buf[1], 0, COUNT, 2 * 1));
    CALL(ncclAllReduce(SEND(1), RECV(1), COUNT, ncclFloat, ncclSum, comm, stream)); /* in place */
    EXPECT(holds(buf[1], 0, COUNT, 2 * 2));
    CALL(ncclReduceScatter(SEND(2), RECV(3), COUNT / 2, ncclFloat, ncclSum, comm, stream));
    EXPECT(holds(buf[3], 0, COUNT / 2, 2 * 3) && holds(buf[3], COUNT / 2, COUNT / 2, 4));
    CALL(ncclAllGather(SEND(4), RECV(5), COUNT / 2, ncclFloat, comm, stream));
    EXPECT(holds(buf[5], 0, COUNT, 5));
    CALL(ncclBroadcast(SEND(6), RECV(7), COUNT, ncclFloat, 0, comm, stream));
    EXPECT(holds(buf[7], 0, COUNT, 7));
    CALL(ncclReduce(SEND(6), RECV(2), COUNT, ncclFloat, ncclSum, 0, comm, stream));
    EXPECT(holds(buf[2], 0, COUNT, 2 * 7));
    return 0;
}

static int group(void)
{
    setup();
    EXPECT(ncclGroupStart() == ncclSuccess);
    CALL(ncclSend(SEND(0), COUNT, ncclFloat, 1, comm, stream));
    CALL(ncclRecv(RECV(1), COUNT, ncclFloat, 1, comm, stream));
    EXPECT(ncclGroupEnd() == ncclSuccess);
    evict();
    EXPECT(holds(buf[1], 0, COUNT, 1));
    return 0;
}

static const lms_test_case cases[] = {
    {"collectives", "all-reduce (and in place), reduce-scatter, all-gather, broadcast and reduce on "
     "buffers evicted before and during each call", collectives, {NULL}},
    {"group", "a send and a receive in a group, evicted between the calls, pair at ncclGroupEnd", group, {NULL}},
};
#define CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    static const char *const common[] = {"LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16", NULL};
    return lms_test_main(argc, argv, cases, CASES, common);
}
