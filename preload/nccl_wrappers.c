/* NCCL's collective and point-to-point calls. NCCL's kernels reach their buffers through work
 * descriptors in NCCL's own memory, which no scan of a launch's parameters sees; so each call
 * is bracketed as a launch is: its send and receive buffers made resident and held, and their
 * last use recorded on the call's stream. Inside ncclGroupStart/ncclGroupEnd (per thread, as
 * NCCL's groups are) NCCL only queues the work and launches it at the outermost ncclGroupEnd:
 * the buffers stay held until then, and their use is recorded after it. NCCL's own driver calls
 * (its cuMem* allocations, its launches) reach the driver's wrappers as any library's do.
 *
 * liblms exports these names, so a program linked against libnccl.so.2 calls them here; the
 * real functions are the next object's (libnccl.so.2), looked up at their first call. A
 * program that carries NCCL inside itself (linked statically), or looks its functions up with
 * dlsym in a handle of its own, is not intercepted. Only
 * nccl.h's ABI is used (plain integers and pointers), so liblms builds without NCCL. */
#include "preload/hooks.h"
#include "preload/log.h"
#include "preload/residency.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdlib.h>

typedef int nccl_result;               /* ncclResult_t */
typedef struct ncclComm *nccl_comm;    /* ncclComm_t */
typedef int nccl_type, nccl_op;        /* ncclDataType_t, ncclRedOp_t */
enum { NCCL_SUCCESS = 0, NCCL_SYSTEM_ERROR = 2, NCCL_IN_PROGRESS = 7 };

/* Bytes of an element of each ncclDataType_t; 0 for one this file does not know. */
static size_t type_bytes(nccl_type type)
{
    static const unsigned char bytes[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1};
    return type >= 0 && (size_t)type < sizeof bytes ? bytes[type] : 0;
}

/* The real functions, looked up once each. */
static void *real_function(_Atomic(void *) *slot, const char *name)
{
    void *f = atomic_load_explicit(slot, memory_order_acquire);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        if (!f)
            lms_log(LMS_LOG_ERROR, -1, "%s: no NCCL loaded after liblms defines it", name);
        atomic_store_explicit(slot, f, memory_order_release);
    }
    return f;
}
#define REAL(name)                                                              \
    static _Atomic(void *) real_##name##_slot;                                  \
    __typeof__(name) *real = (__typeof__(name) *)real_function(&real_##name##_slot, #name)

/* Not intercepted: asked only. */
nccl_result ncclCommCount(const nccl_comm comm, int *count);
nccl_result ncclCommUserRank(const nccl_comm comm, int *rank);

/* The communicator's size and this rank in it; 1 and 0 where NCCL cannot say. */
static int comm_size(nccl_comm comm)
{
    int n = 1;
    REAL(ncclCommCount);
    return real && real(comm, &n) == NCCL_SUCCESS && n > 0 ? n : 1;
}

static int comm_rank(nccl_comm comm)
{
    int r = 0;
    REAL(ncclCommUserRank);
    return real && real(comm, &r) == NCCL_SUCCESS ? r : 0;
}

/* The calls of this thread's open group, held until its outermost ncclGroupEnd. */
static __thread int group_depth;
static __thread lms_call **group_calls;
static __thread size_t group_count, group_cap;

static lms_call *call_new(CUstream stream, const char *what)
{
    lms_call *call = malloc(sizeof *call);
    if (call)
        lms_call_init(call, stream, what);
    return call;
}

/* count elements of type at buf; whole_write: the call overwrites them all. A type this file
 * does not know still makes the allocation that holds buf resident. */
static void ref(lms_call *call, const void *buf, size_t count, nccl_type type, int whole_write)
{
    size_t bytes = count * type_bytes(type);
    if (buf)
        lms_call_ref(call, (CUdeviceptr)(uintptr_t)buf, bytes ? bytes : 1, whole_write && bytes);
}

static void call_done(lms_call *call, CUresult result)
{
    lms_call_end(call, result);
    free(call);
}

/* After the real call: its buffers are released now, or at the end of the open group. A call
 * NCCL refused was not issued. */
static void call_issued(lms_call *call, nccl_result result)
{
    if (result != NCCL_SUCCESS || group_depth == 0) {
        call_done(call, result == NCCL_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
        return;
    }
    if (group_count == group_cap) {
        size_t cap = group_cap ? 2 * group_cap : 16;
        lms_call **calls = realloc(group_calls, cap * sizeof *calls);
        if (!calls) {
            /* Released now, its buffers could be evicted under the group's work. */
            lms_log(LMS_LOG_ERROR, -1, "%s: out of host memory to hold its buffers to ncclGroupEnd", call->what);
            abort();
        }
        group_calls = calls;
        group_cap = cap;
    }
    group_calls[group_count++] = call;
}

/* The body of a wrapper: `refs` (statements using `call`) names the buffers of the real call
 * `name(args...)`. */
#define MANAGED(name, stream, refs, ...)                                              \
    REAL(name);                                                                       \
    if (!real)                                                                        \
        return NCCL_SYSTEM_ERROR;                                                     \
    if (lms_passing_through())                                                                   \
        return real(__VA_ARGS__);                                                     \
    lms_call *call = call_new(stream, #name);                                         \
    if (!call)                                                                        \
        return NCCL_SYSTEM_ERROR;                                                     \
    refs;                                                                             \
    if (lms_call_begin(call) != CUDA_SUCCESS) {                                       \
        call_done(call, CUDA_ERROR_OUT_OF_MEMORY);                                    \
        return NCCL_SYSTEM_ERROR;                                                     \
    }                                                                                 \
    nccl_result result = real(__VA_ARGS__);                                           \
    call_issued(call, result);                                                        \
    return result

LMS_EXPORT nccl_result ncclAllReduce(const void *send, void *recv, size_t count, nccl_type type,
                                     nccl_op op, nccl_comm comm, CUstream stream)
{
    MANAGED(ncclAllReduce, stream,
            (ref(call, send, count, type, 0), ref(call, recv, count, type, send != recv)),
            send, recv, count, type, op, comm, stream);
}

/* send holds recv_count elements for every rank. */
LMS_EXPORT nccl_result ncclReduceScatter(const void *send, void *recv, size_t recv_count, nccl_type type,
                                         nccl_op op, nccl_comm comm, CUstream stream)
{
    MANAGED(ncclReduceScatter, stream,
            (ref(call, send, recv_count * comm_size(comm), type, 0), ref(call, recv, recv_count, type, send != recv)),
            send, recv, recv_count, type, op, comm, stream);
}

/* recv gets send_count elements from every rank. */
LMS_EXPORT nccl_result ncclAllGather(const void *send, void *recv, size_t send_count, nccl_type type,
                                     nccl_comm comm, CUstream stream)
{
    MANAGED(ncclAllGather, stream,
            (ref(call, send, send_count, type, 0), ref(call, recv, send_count * comm_size(comm), type, send != recv)),
            send, recv, send_count, type, comm, stream);
}

/* Only the root's send buffer is read. */
LMS_EXPORT nccl_result ncclBroadcast(const void *send, void *recv, size_t count, nccl_type type, int root,
                                     nccl_comm comm, CUstream stream)
{
    MANAGED(ncclBroadcast, stream,
            (comm_rank(comm) == root ? ref(call, send, count, type, 0) : (void)0,
             ref(call, recv, count, type, send != recv)),
            send, recv, count, type, root, comm, stream);
}

/* In place: the root's buffer is read, every other rank's written. */
LMS_EXPORT nccl_result ncclBcast(void *buf, size_t count, nccl_type type, int root, nccl_comm comm,
                                 CUstream stream)
{
    MANAGED(ncclBcast, stream, ref(call, buf, count, type, comm_rank(comm) != root),
            buf, count, type, root, comm, stream);
}

/* Only the root's receive buffer is written. */
LMS_EXPORT nccl_result ncclReduce(const void *send, void *recv, size_t count, nccl_type type, nccl_op op,
                                  int root, nccl_comm comm, CUstream stream)
{
    MANAGED(ncclReduce, stream,
            (ref(call, send, count, type, 0),
             comm_rank(comm) == root ? ref(call, recv, count, type, send != recv) : (void)0),
            send, recv, count, type, op, root, comm, stream);
}

LMS_EXPORT nccl_result ncclSend(const void *send, size_t count, nccl_type type, int peer, nccl_comm comm,
                                CUstream stream)
{
    MANAGED(ncclSend, stream, ref(call, send, count, type, 0), send, count, type, peer, comm, stream);
}

LMS_EXPORT nccl_result ncclRecv(void *recv, size_t count, nccl_type type, int peer, nccl_comm comm,
                                CUstream stream)
{
    MANAGED(ncclRecv, stream, ref(call, recv, count, type, 1), recv, count, type, peer, comm, stream);
}

LMS_EXPORT nccl_result ncclGroupStart(void)
{
    REAL(ncclGroupStart);
    if (!real)
        return NCCL_SYSTEM_ERROR;
    nccl_result result = real();
    if (result == NCCL_SUCCESS)
        group_depth++;
    return result;
}

/* The outermost end launches the group's work: its calls' buffers are released after it. A
 * nonblocking communicator's NCCL_IN_PROGRESS counts as launched. */
LMS_EXPORT nccl_result ncclGroupEnd(void)
{
    REAL(ncclGroupEnd);
    if (!real)
        return NCCL_SYSTEM_ERROR;
    nccl_result result = real();
    if (group_depth > 0 && --group_depth == 0) {
        int issued = result == NCCL_SUCCESS || result == NCCL_IN_PROGRESS;
        for (size_t i = 0; i < group_count; i++)
            call_done(group_calls[i], issued ? CUDA_SUCCESS : CUDA_ERROR_UNKNOWN);
        free(group_calls); /* nothing left behind when the thread ends */
        group_calls = NULL;
        group_count = group_cap = 0;
    }
    return result;
}
