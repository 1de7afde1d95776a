/* A stand-in for libnccl.so.2 on the simulated GPU, for tests/lms_nccl.c. Its communicators'
 * other ranks mirror this one (each holds what this one holds), so every collective has a
 * result this rank alone can compute. Like NCCL's, its kernel finds its buffers through a work
 * descriptor in the library's own (host) memory, never through a launch parameter, and the
 * work of a group is launched at ncclGroupEnd. Floats and ncclSum only. Each kernel first
 * sleeps DELAY_US: an eviction that does not wait for it comes while it is queued. */
#include "tests/fake_nccl.h"

#include "sim/sim.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define DELAY_US 100000

struct ncclComm {
    int nranks, rank;
};

/* recv[i], i < count: REDUCE nranks * send[i]; SCATTER nranks * send[rank * count + i];
 * COPY send[i]. GATHER: recv[r * count + i] = send[i] for every rank r. */
typedef enum { REDUCE, SCATTER, GATHER, COPY } work_kind;
typedef struct work {
    work_kind kind;
    const float *send;
    float *recv;
    size_t count;
    int nranks, rank;
    int peer;          /* send and receive: the peer, to pair them at ncclGroupEnd */
    CUstream stream;
} work;

/* Descriptors of launched work: reused round-robin (tests wait long before RING launches). */
#define RING 256
static work ring[RING];
static unsigned ring_next;
static pthread_mutex_t ring_lock = PTHREAD_MUTEX_INITIALIZER;

static void run(const sim_launch *launch)
{
    const work *w = *(const work **)launch->params[0];
    usleep(DELAY_US);
    for (size_t i = 0; i < w->count; i++) {
        switch (w->kind) {
        case REDUCE: w->recv[i] = w->nranks * w->send[i]; break;
        case SCATTER: w->recv[i] = w->nranks * w->send[(size_t)w->rank * w->count + i]; break;
        case COPY: w->recv[i] = w->send[i]; break;
        case GATHER:
            for (int r = 0; r < w->nranks; r++) w->recv[(size_t)r * w->count + i] = w->send[i];
            break;
        }
    }
}

static CUkernel kernel;
static void register_kernel(void)
{
    static const size_t sizes[] = {sizeof(work *)};
    kernel = sim_register_kernel("fake_nccl_work", run, 1, sizes);
}

static ncclResult_t launch(const work *w)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_kernel);
    pthread_mutex_lock(&ring_lock);
    work *slot = &ring[ring_next++ % RING];
    *slot = *w;
    pthread_mutex_unlock(&ring_lock);
    void *params[] = {&slot};
    return cuLaunchKernel((CUfunction)kernel, 1, 1, 1, 1, 1, 1, 0, w->stream, params, NULL) == CUDA_SUCCESS
               ? ncclSuccess : ncclInvalidUsage;
}

/* The calls of this thread's open group, and its sends and receives, still to be paired. */
#define GROUP_MAX 64
static __thread int depth;
static __thread work queued[GROUP_MAX], sends[GROUP_MAX], recvs[GROUP_MAX];
static __thread int nqueued, nsends, nrecvs;

static ncclResult_t enqueue(work w)
{
    if (!depth) return launch(&w);
    if (nqueued == GROUP_MAX) return ncclInvalidUsage;
    queued[nqueued++] = w;
    return ncclSuccess;
}

static int usable(ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm)
{
    return type == ncclFloat && op == ncclSum && comm;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    (void)id;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank)
{
    (void)id;
    if (nranks < 1 || rank < 0 || rank >= nranks || !(*comm = malloc(sizeof **comm))) return ncclInvalidArgument;
    (*comm)->nranks = nranks;
    (*comm)->rank = rank;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm)
{
    free(comm);
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int *count)
{
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int *rank)
{
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, CUstream stream)
{
    if (!usable(type, op, comm)) return ncclInvalidArgument;
    return enqueue((work){REDUCE, send, recv, count, comm->nranks, comm->rank, 0, stream});
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t recv_count, ncclDataType_t type,
                               ncclRedOp_t op, ncclComm_t comm, CUstream stream)
{
    if (!usable(type, op, comm)) return ncclInvalidArgument;
    return enqueue((work){SCATTER, send, recv, recv_count, comm->nranks, comm->rank, 0, stream});
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t send_count, ncclDataType_t type,
                           ncclComm_t comm, CUstream stream)
{
    if (!usable(type, ncclSum, comm)) return ncclInvalidArgument;
    return enqueue((work){GATHER, send, recv, send_count, comm->nranks, comm->rank, 0, stream});
}

/* The root's data is every rank's: the root copies its own. */
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, CUstream stream)
{
    if (!usable(type, ncclSum, comm) || root != comm->rank) return ncclInvalidArgument;
    return enqueue((work){COPY, send, recv, count, comm->nranks, comm->rank, 0, stream});
}

ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                        int root, ncclComm_t comm, CUstream stream)
{
    if (!usable(type, op, comm) || root != comm->rank) return ncclInvalidArgument;
    return enqueue((work){REDUCE, send, recv, count, comm->nranks, comm->rank, 0, stream});
}

/* What a peer sends this rank is what this rank sends it: a receive copies the send it pairs. */
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                      CUstream stream)
{
    if (!usable(type, ncclSum, comm) || !depth || nsends == GROUP_MAX) return ncclInvalidUsage;
    sends[nsends++] = (work){COPY, send, NULL, count, comm->nranks, comm->rank, peer, stream};
    return ncclSuccess;
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer, ncclComm_t comm, CUstream stream)
{
    if (!usable(type, ncclSum, comm) || !depth || nrecvs == GROUP_MAX) return ncclInvalidUsage;
    recvs[nrecvs++] = (work){COPY, NULL, recv, count, comm->nranks, comm->rank, peer, stream};
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void)
{
    depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (!depth) return ncclInvalidUsage;
    if (--depth) return ncclSuccess;
    ncclResult_t result = ncclSuccess;
    for (int r = 0; r < nrecvs; r++) {
        int s = 0;
        while (s < nsends && (sends[s].peer != recvs[r].peer || sends[s].count != recvs[r].count)) s++;
        if (s == nsends || nqueued == GROUP_MAX) {
            result = ncclInvalidUsage;
            continue;
        }
        recvs[r].send = sends[s].send;
        sends[s] = sends[--nsends];
        queued[nqueued++] = recvs[r];
    }
    for (int i = 0; i < nqueued && result == ncclSuccess; i++) result = launch(&queued[i]);
    nqueued = nsends = nrecvs = 0;
    return result;
}
