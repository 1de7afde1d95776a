#include "trainer/nccl_gradients.h"
#include "trainer/ranks.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>

/* nccl.h's ABI, declared here so that the trainer builds without NCCL. */
typedef int nccl_result;
typedef struct ncclComm *nccl_comm;
typedef struct { char internal[128]; } nccl_unique_id;
enum { NCCL_SUCCESS = 0, NCCL_FLOAT = 7, NCCL_AVG = 4 };

#define NCCL_FUNCTIONS(X)                                                                    \
    X(ncclGetUniqueId, nccl_result (*)(nccl_unique_id *))                                    \
    X(ncclCommInitRank, nccl_result (*)(nccl_comm *, int, nccl_unique_id, int))              \
    X(ncclCommDestroy, nccl_result (*)(nccl_comm))                                           \
    X(ncclGetErrorString, const char *(*)(nccl_result))                                      \
    X(ncclAllReduce, nccl_result (*)(const void *, void *, size_t, int, int, nccl_comm, cudaStream_t)) \
    X(ncclGroupStart, nccl_result (*)(void))                                                 \
    X(ncclGroupEnd, nccl_result (*)(void))

static struct {
#define FIELD(name, type) __typeof__(type) name;
    NCCL_FUNCTIONS(FIELD)
#undef FIELD
} nccl;

#define BUCKET_BYTES ((size_t)25 << 20) /* DistributedDataParallel's bucket_cap_mb */
#define BUCKET_MAX 256                  /* gradients in one bucket at most */

static struct {
    nccl_comm comm;
    cudaStream_t compute, stream;  /* the backend's stream; the all-reduces' */
    cudaEvent_t queued;            /* on compute: a bucket's gradients are queued */
    float *grads[BUCKET_MAX];      /* the bucket being filled */
    size_t counts[BUCKET_MAX], count, bytes;
} ex;

/* A failure of NCCL or CUDA mid-run: this rank ends the job. */
static void check(int failed, const char *what, const char *why)
{
    if (!failed) return;
    fprintf(stderr, "lms-trainer: error: %s: %s\n", what, why);
    ranks_fail(1);
}
#define NCCL_CHECK(call) do { nccl_result r_ = (call); check(r_ != NCCL_SUCCESS, #call, nccl.ncclGetErrorString(r_)); } while (0)
#define CUDA_CHECK(call) do { cudaError_t e_ = (call); check(e_ != cudaSuccess, #call, cudaGetErrorString(e_)); } while (0)

/* The bucket's all-reduces, after what the compute stream has queued so far. */
static void launch_bucket(void)
{
    if (!ex.count) return;
    CUDA_CHECK(cudaEventRecord(ex.queued, ex.compute));
    CUDA_CHECK(cudaStreamWaitEvent(ex.stream, ex.queued, 0));
    NCCL_CHECK(nccl.ncclGroupStart());
    for (size_t i = 0; i < ex.count; i++)
        NCCL_CHECK(nccl.ncclAllReduce(ex.grads[i], ex.grads[i], ex.counts[i], NCCL_FLOAT, NCCL_AVG, ex.comm, ex.stream));
    NCCL_CHECK(nccl.ncclGroupEnd());
    ex.count = ex.bytes = 0;
}

static void ready(Net *net, Layer *layer)
{
    (void)net;
    for (Param *p = &layer->weight; layer->nparams && p <= &layer->bias; p++) {
        if (ex.count == BUCKET_MAX) launch_bucket();
        ex.grads[ex.count] = p->t.diff;
        ex.counts[ex.count++] = tensor_count(&p->t);
        ex.bytes += tensor_count(&p->t) * sizeof(float);
    }
    if (ex.bytes >= BUCKET_BYTES) launch_bucket();
}

static void finish(Net *net)
{
    (void)net;
    launch_bucket();
    CUDA_CHECK(cudaEventRecord(ex.queued, ex.stream));
    CUDA_CHECK(cudaStreamWaitEvent(ex.compute, ex.queued, 0));
}

static const GradientExchange exchange = {ready, finish};

/* NCCL's functions through the global scope: a preloaded library's come first. */
static int load(char *err, size_t errlen)
{
    if (!dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL)) {
        snprintf(err, errlen, "cannot load NCCL: %s", dlerror());
        return -1;
    }
#define RESOLVE(name, type)                                                       \
    if (!(nccl.name = (type)dlsym(RTLD_DEFAULT, #name))) {                        \
        snprintf(err, errlen, "NCCL has no %s", #name);                           \
        return -1;                                                                \
    }
    NCCL_FUNCTIONS(RESOLVE)
#undef RESOLVE
    return 0;
}

const GradientExchange *nccl_gradients_open(void *compute_stream, char *err, size_t errlen)
{
    /* Every rank learns whether every rank has NCCL: none may wait for the others in a broadcast
     * they never join. */
    *err = 0;
    double missing = load(err, errlen) != 0;
    ranks_sum_doubles(&missing, 1);
    if (missing) {
        if (!*err) snprintf(err, errlen, "NCCL is missing on %g rank%s", missing, missing == 1 ? "" : "s");
        return NULL;
    }
    nccl_unique_id id = {{0}};
    if (!ranks_rank()) NCCL_CHECK(nccl.ncclGetUniqueId(&id));
    ranks_broadcast(&id, sizeof id);
    NCCL_CHECK(nccl.ncclCommInitRank(&ex.comm, ranks_count(), id, ranks_rank()));
    ex.compute = (cudaStream_t)compute_stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&ex.stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&ex.queued, cudaEventDisableTiming));
    return &exchange;
}

void nccl_gradients_close(void)
{
    if (!ex.comm) return;
    NCCL_CHECK(nccl.ncclCommDestroy(ex.comm));
    CUDA_CHECK(cudaEventDestroy(ex.queued));
    CUDA_CHECK(cudaStreamDestroy(ex.stream));
    ex.comm = NULL;
}
