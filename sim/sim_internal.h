/* Internals of the simulated GPU, shared by its files. Not for tests: they use
 * sim.h and cuda.h.
 *
 * One mutex (cd.lock) guards all state; one condition (cd.progress) is broadcast whenever
 * a stream finishes an operation or gets new work, and every wait in the simulator waits on it.
 * Work runs on per-stream worker threads without the lock held. */
#ifndef LMS_SIM_INTERNAL_H
#define LMS_SIM_INTERNAL_H

#include "sim/sim.h"
#include "sim/timing.h"
#include "sim/sim_module.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* cuda.h maps these names to their newest variant; the simulator exports the older forms too,
 * for callers built against older headers (cuGetProcAddress hands them out by version). */
#undef cuEventElapsedTime
#undef cuGetProcAddress
#undef cuStreamGetCaptureInfo
#undef cuGraphAddKernelNode
#undef cuGraphKernelNodeGetParams
#undef cuGraphNodeGetDependencies
#undef cuGraphExecUpdate
#undef cuMemcpyBatchAsync
#undef cuGraphInstantiate
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult cuStreamGetCaptureInfo(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                cuuint64_t *id_out);
CUresult cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                   cuuint64_t *id_out, CUgraph *graph_out,
                                   const CUgraphNode **dependencies_out, size_t *numDependencies_out);
CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                              const CUgraphNode *dependencies, size_t numDependencies,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode, CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
CUresult cuGraphNodeGetDependencies(CUgraphNode hNode, CUgraphNode *dependencies,
                                    size_t *numDependencies);
CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph, CUgraphNode *hErrorNode_out,
                           CUgraphExecUpdateResult *updateResult_out);
CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                            CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                            CUstream hStream);                                      /* CUDA 12.8 */
CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                            char *logBuffer, size_t bufferSize);                     /* CUDA 10 */
CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph, CUgraphNode *phErrorNode,
                               char *logBuffer, size_t bufferSize);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                        unsigned int flags, CUdevice dev);

#define CD_MAX_DEVICES 8
#define CD_MAX_PEERS 8          /* peer contexts one context may reach, as on the hardware */
#define CD_GRANULARITY ((size_t)2 << 20)
#define CD_DRIVER_VERSION 13000

/* ---- contexts (contexts.c), devices and configuration (control.c, config.c) ---- */

typedef struct cd_stream cd_stream;
typedef struct cd_op cd_op;

typedef struct cd_ctx {
    int device;
    bool primary;
    /* A created context until cuCtxDestroy; a primary one while retained, until its last
     * release or a reset. The struct outlives it, so that a stale handle stays recognisable. */
    bool alive;
    int retained;               /* primary-context retain count */
    unsigned long long id;      /* cuCtxGetId: unique for the process's life */
    size_t reserved;            /* device bytes the driver holds for it (itself, loaded kernels) */
    /* Set by a fault of its work: every later call made with it current returns it, until the
     * context is torn down. */
    CUresult sticky_error;
    cd_stream *null_stream;     /* the legacy NULL stream, started on first use */
    cd_stream *streams;         /* created and per-thread streams, linked through cd_stream.next */
    /* When the work of its streams destroyed since ends (all of them; the blocking ones). */
    sim_ns retired_vt_end, retired_blocking_vt_end;
    struct cd_ctx *peers[CD_MAX_PEERS]; /* contexts whose allocations its kernels may reach */
    struct cd_ctx *next;        /* in cd.contexts */
} cd_ctx;

typedef struct cd_device {
    size_t capacity;            /* bytes the test gave the device */
    size_t used;                /* bytes of cuMemAlloc and device-located cuMemCreate */
    size_t reserved;            /* bytes the driver holds for its contexts and loaded kernels */
    cd_ctx primary;
    sim_timeline timeline;      /* its engines' virtual time (clock.c) */
} cd_device;

struct cd_state {
    pthread_mutex_t lock;
    pthread_cond_t progress;
    bool initialized;
    int device_count;
    /* The shape of every device (config.c); capacities are in devices[]. */
    char device_name[256];
    int sm_count, cc_major, cc_minor, async_engines;
    bool host_vmm;
    bool timing_only;           /* LMS_SIM_EXECUTE=timing-only: no device byte is touched */
    size_t context_reserve;     /* device bytes each context holds from its creation */
    size_t kernel_reserve;      /* and each kernel from its first launch in it */
    cd_device devices[CD_MAX_DEVICES];
    cd_ctx *contexts;           /* every context ever made */
    size_t bytes_mapped;
    size_t bytes_copied;
    unsigned long unsupported_calls;
};
extern struct cd_state cd;

/* Counts a call of an entry point and applies a pending injected fault: returns true and sets
 * *result when the call must return *result at once. Entries that need cuInit also answer
 * NOT_INITIALIZED before it; most answer the sticky error of the current context after a
 * fault (those that tear a context down do not). */
typedef enum cd_entry_checks { CD_CHECK_NOTHING, CD_CHECK_INIT, CD_CHECK_INIT_AND_FAULT } cd_entry_checks;
bool cd_enter(const char *entry_point, cd_entry_checks checks, CUresult *result);
#define CD_ENTER_CHECKING(name, checks)                                                      \
    do {                                                                                     \
        CUresult cd_early_;                                                                  \
        if (cd_enter(name, checks, &cd_early_))                                              \
            return cd_early_;                                                                \
    } while (0)
#define CD_ENTER(name) CD_ENTER_CHECKING(name, CD_CHECK_INIT_AND_FAULT)
#define CD_ENTER_ANYTIME(name) CD_ENTER_CHECKING(name, CD_CHECK_NOTHING)
#define CD_ENTER_DESPITE_FAULT(name) CD_ENTER_CHECKING(name, CD_CHECK_INIT)

/* Sets, at cuInit, what the API did not set before from the environment (config.c);
 * INVALID_VALUE, with a log line naming the variable, for a bad value. */
CUresult cd_configure_locked(void);
/* getenv for LMS_SIM_* names that falls back to their old CUDADOUBLE_* names. */
const char *cd_getenv(const char *name);
/* Logs one line to LMS_SIM_LOG (default stderr). */
void cd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Logs the call and answers NOT_SUPPORTED: the fate of every unimplemented entry point. */
CUresult cd_unsupported(const char *entry_point);
/* A GPU fault in ctx's work: the context is unusable from then on (a sticky ILLEGAL_ADDRESS),
 * logged once with what faulted. */
void cd_fault_locked(cd_ctx *ctx, const char *what);
/* Device bytes a new allocation may still take: capacity minus the program's and the driver's. */
size_t cd_device_free_locked(int device);

/* Makes each device's primary context, not alive until retained (at cuInit). */
void cd_contexts_init_locked(void);
/* The calling thread's current context: INVALID_CONTEXT without one, CONTEXT_IS_DESTROYED
 * when it was destroyed (or is a primary context reset or released since). */
CUresult cd_current_ctx_locked(cd_ctx **ctx);
CUresult cd_current_ctx(cd_ctx **ctx);
/* The context a handle names, alive or not; NULL for anything else. */
cd_ctx *cd_ctx_find_locked(CUcontext handle);
/* Whether kernels of ctx may reach the allocations of owner: the same device, or peer access. */
bool cd_ctx_reaches_locked(const cd_ctx *ctx, const cd_ctx *owner);
/* Takes bytes of the device's memory for the driver, on ctx's account: OUT_OF_MEMORY when the
 * device has no room left. cd_ctx_unreserve_locked gives them back. */
CUresult cd_ctx_reserve_locked(cd_ctx *ctx, size_t bytes);
void cd_ctx_unreserve_locked(cd_ctx *ctx, size_t bytes);

/* ---- memory (memory.c) ---- */

/* Whether [ptr, ptr+size) is memory a copy or memset may touch for `device`: inside a cuMemAlloc
 * allocation, pinned/registered host memory, or mappings the device was granted (read and
 * write for `write`). Memory inside a reservation but unmapped or without access is not.
 * `host_ok` accepts any other address as pageable host memory (the unified cuMemcpy forms). */
bool cd_range_usable_locked(uintptr_t ptr, size_t size, bool host_ok, int device, bool write);
/* Whether a kernel of ctx may touch [ptr, ptr+size) (size 0: ptr alone): device memory of its
 * device or of a peer context, pinned host memory, mappings its device was granted. Addresses
 * unknown to the simulator are taken for host memory the kernel may reach, short of any
 * reservation. */
bool cd_kernel_may_touch_locked(uintptr_t ptr, size_t size, const cd_ctx *ctx);
/* The handle of a device's default memory pool (the only pool there is). */
CUmemoryPool cd_default_pool(int device);
/* Gives back a device allocation (cuMemFree, and cuMemFreeAsync when its turn comes). */
CUresult cd_free_device_locked(uintptr_t ptr);
/* Device work (a kernel, copy or memset) running on a stream's worker. Kernels are host code,
 * so while one runs every host-located mapping is open to the process at its devices' access;
 * while a copy or memset runs, those in its ranges. Otherwise a host-located mapping is open
 * only as far as the host was granted access (vmm.c). The struct lives on the worker's stack
 * meanwhile. */
typedef struct cd_device_work {
    bool kernel;
    uintptr_t start[2], end[2];     /* a copy's or memset's ranges (empty: start == end) */
    struct cd_device_work *next;    /* in the list of work running */
} cd_device_work;
void cd_device_work_begin_locked(cd_device_work *work, const cd_op *op);
void cd_device_work_end_locked(cd_device_work *work);
/* Frees what a context owns: its cuMemAlloc and pinned host allocations, its registrations. */
void cd_memory_release_ctx_locked(const cd_ctx *ctx);

/* What an address is, for pointer attributes and IPC (memory.c). */
typedef enum cd_pointer_kind {
    CD_POINTER_UNKNOWN,
    CD_POINTER_DEVICE,          /* cuMemAlloc and cuMemAllocPitch */
    CD_POINTER_POOL,            /* cuMemAllocAsync: from the device's pool, no context */
    CD_POINTER_HOST,            /* cuMemHostAlloc, cuMemAllocHost */
    CD_POINTER_REGISTERED,      /* cuMemHostRegister */
    CD_POINTER_MAPPED,          /* cuMemMap */
    CD_POINTER_RESERVED,        /* inside a reservation, not mapped */
} cd_pointer_kind;

typedef struct cd_pointer_info {
    cd_pointer_kind kind;
    uintptr_t base;             /* the allocation's range; for VMM the whole reservation */
    size_t size;
    uintptr_t mapping_base;     /* the allocation, or the VMM mapping */
    size_t mapping_size;
    int device;                 /* where the memory is; -1: on the host */
    cd_ctx *ctx;                /* the context that made it; NULL for VMM and pool memory */
    unsigned long long buffer_id; /* unique for the process's life */
    CUmemAccess_flags access;  /* what the asking context's device may do with it */
    CUmemAccess_flags host_access; /* what the host may: pinned memory, or a mapping's grant */
} cd_pointer_info;
void cd_pointer_info_locked(uintptr_t ptr, const cd_ctx *asking, cd_pointer_info *info);

/* ---- streams (streams.c), events (events.c) ---- */

typedef struct cd_node cd_node;
typedef struct cd_capture cd_capture;

typedef struct cd_event {
    unsigned flags;
    cd_ctx *ctx;
    unsigned long record_seq;   /* records issued */
    unsigned long done_seq;     /* records executed */
    sim_ns vt_recorded;         /* virtual time the last record issued is reached */
    int refs;                   /* the handle and every queued op that names the event */
    /* Last recorded into a capture (capture.c): its id (0: not), and the nodes a wait for
     * the event makes the waiting stream depend on. */
    unsigned long long capture_id;
    cd_node **capture_deps;
    size_t capture_dep_count;
    struct cd_event *next;      /* in the list of live events */
} cd_event;

typedef struct cd_kernel cd_kernel;

typedef enum cd_op_kind {
    CD_OP_KERNEL,
    CD_OP_COPY,
    CD_OP_MEMSET,
    CD_OP_EVENT_RECORD,
    CD_OP_EVENT_WAIT,
    CD_OP_HOST_FN,
    CD_OP_FREE,
    CD_OP_MEMOP,
} cd_op_kind;

/* For a copy's or memset's device: the device of the stream it runs on. */
#define CD_STREAM_DEVICE (-1)

struct cd_op {
    cd_op *next;
    cd_op_kind kind;
    sim_ns vt_end;              /* virtual time it ends, fixed when queued (clock.c) */
    union {
        struct {
            cd_kernel *kernel;
            unsigned long generation;   /* the kernel slot's, when launched (kernels.c) */
            unsigned grid[3], block[3], shared_bytes;
            unsigned char *args;        /* packed parameters, laid out as registered */
        } launch;
        struct {                        /* depth planes of height rows of width bytes */
            uintptr_t dst, src;
            size_t dst_pitch, src_pitch, width, height;
            size_t depth, dst_plane, src_plane; /* planes, and bytes from one to the next */
            CUmemorytype dst_type, src_type;    /* as the call named them (node parameters) */
            bool dst_host_ok, src_host_ok; /* a side may be pageable host memory */
            int dst_device, src_device;    /* whose access each side needs */
        } copy;
        struct {                        /* rows of count elements; one row for 1D memsets */
            uintptr_t dst;
            uint32_t value;
            unsigned element_size;      /* 1, 2 or 4 */
            size_t count, pitch, height;
            int device;
        } memset;
        struct {                        /* a stream memory operation on one word (memops.c) */
            uintptr_t addr;
            uint64_t value;
            unsigned size;              /* 4 or 8 */
            bool write;                 /* a write, or a wait until `condition` holds */
            unsigned condition;         /* CU_STREAM_WAIT_VALUE_GEQ, _EQ, _AND or _NOR */
            int device;                 /* whose access the word needs */
        } memop;
        struct {
            cd_event *event;
            unsigned long seq;
        } event;
        struct {
            CUhostFn fn;
            void *user_data;
        } host_fn;
        struct {
            uintptr_t ptr;
        } free;
    } u;
};

struct cd_stream {
    cd_ctx *ctx;
    unsigned flags;             /* CU_STREAM_NON_BLOCKING or 0 */
    unsigned long long id;      /* cuStreamGetId: unique for the process's life */
    bool is_null;               /* the legacy NULL stream */
    bool per_thread;            /* a thread's per-thread default stream, owned by `owner` */
    pthread_t owner;
    bool destroyed;             /* its handle is dead; it goes once its work is done */
    pthread_t thread;
    cd_op *head, *tail;         /* queued; head is running or next */
    unsigned long submitted, completed;
    /* While it takes part in a capture (capture.c): which, and the nodes the next captured
     * operation will depend on (with their edge data, all zero, for cuStreamGetCaptureInfo). */
    cd_capture *capture;
    cd_node **deps;
    CUgraphEdgeData *dep_edges;
    size_t dep_count, dep_capacity;
    sim_ns vt_end;              /* virtual time its last queued op ends */
    cd_stream *next;            /* in ctx->streams */
};

/* Doubles *capacity (from 64) and reallocates *array, of elements of elem_size bytes, to it.
 * Returns false, leaving both as they were, when memory runs out. */
static inline bool cd_grow(void **array, size_t *capacity, size_t elem_size)
{
    size_t grown_capacity = *capacity ? 2 * *capacity : 64;
    void *grown = realloc(*array, grown_capacity * elem_size);
    if (!grown)
        return false;
    *array = grown;
    *capacity = grown_capacity;
    return true;
}

cd_op *cd_op_new(cd_op_kind kind);
/* The bytes a copy moves; and the span, from its first byte, of its destination or source. */
static inline size_t cd_copy_bytes(const cd_op *op)
{
    return op->u.copy.width * op->u.copy.height * op->u.copy.depth;
}
static inline size_t cd_copy_span(const cd_op *op, bool dst)
{
    size_t pitch = dst ? op->u.copy.dst_pitch : op->u.copy.src_pitch;
    size_t plane = dst ? op->u.copy.dst_plane : op->u.copy.src_plane;
    return (op->u.copy.depth - 1) * plane + (op->u.copy.height - 1) * pitch + op->u.copy.width;
}
/* A copy of op to queue again (graph replay): OUT_OF_MEMORY, or INVALID_HANDLE for a launch
 * of a kernel unloaded since. */
CUresult cd_op_clone_locked(const cd_op *op, cd_op **copy);
void cd_op_free_locked(cd_op *op);
/* Whether the memory a copy or memset touches is usable by the devices it runs for
 * (cd_range_usable_locked); true for other operations. */
bool cd_op_memory_usable_locked(const cd_op *op);
/* Checks again the device work that the worker threads have finished but virtual time still
 * has running, after memory was unmapped or lost its access: what may no longer touch its
 * memory faults its context, as on the GPU. */
void cd_running_recheck_locked(void);
void cd_event_unref_locked(cd_event *event);

/* Streams that _ptds/_ptsz entry points run on: set around each such call (per_thread.c), it
 * makes the NULL handle name the calling thread's per-thread default stream. */
void cd_default_stream_per_thread(bool on);
/* The stream a handle names: NULL (the legacy stream, or the per-thread one inside a _ptds
 * call), CU_STREAM_LEGACY, CU_STREAM_PER_THREAD (the current context's, started on first
 * use) or a created stream; INVALID_HANDLE for an unknown or destroyed one. */
CUresult cd_resolve_stream_locked(CUstream hStream, cd_stream **stream);
/* Queues op on hStream, or records it into the stream's capture. Takes ownership of op in
 * all cases; *stream is where it went. */
CUresult cd_enqueue_locked(CUstream hStream, cd_op *op, cd_stream **stream);
CUresult cd_enqueue(CUstream hStream, cd_op *op);
/* Queues an asynchronous copy with a pageable host side, and returns once it is done: the real
 * driver stages pageable memory, returning once the source is read (to the device) or the copy
 * is done (to the host), so that the program may reuse its buffer at once. */
CUresult cd_enqueue_staged_locked(CUstream hStream, cd_op *op);
/* Queues op on the default stream (NULL) and waits for it: synchronous copies and memsets.
 * Takes ownership of op. */
CUresult cd_run_sync_locked(cd_op *op);
/* Waits until the work queued on ctx's streams when called is done, and the host's clock
 * for its end. */
void cd_ctx_drain_locked(cd_ctx *ctx);
/* cuCtxSynchronize and the calls that wait for the device: the current context when ctx is
 * NULL. */
CUresult cd_ctx_synchronize(cd_ctx *ctx);
/* Destroys every stream of a context being torn down; they go once idle. */
void cd_streams_release_ctx_locked(cd_ctx *ctx);
/* Forgets the events of a context being torn down: their handles are dead. */
void cd_events_release_ctx_locked(const cd_ctx *ctx);
/* Marks an event as last recorded into capture capture_id after the nodes deps (copied), or,
 * for 0, as recorded outside any capture. OUT_OF_MEMORY leaves it unchanged. */
CUresult cd_event_set_capture_locked(cd_event *event, unsigned long long capture_id,
                                 cd_node *const *deps, size_t dep_count);

/* ---- stream capture (capture.c), graphs (graphs.c) ---- */

/* Records op, issued on capturing stream s, as a node of its capture's graph. Takes ownership. */
CUresult cd_capture_add_locked(cd_stream *s, cd_op *op);
/* An event recorded on a capturing stream, and a wait for an event that either the stream
 * captures or was recorded into a capture (joining the stream to it). */
CUresult cd_capture_record_event_locked(cd_stream *s, cd_event *event);
CUresult cd_capture_wait_event_locked(cd_stream *s, cd_event *event);
/* Checks before calls the capture rules restrict; each returns SUCCESS or the error, and
 * invalidates the captures concerned as the driver does:
 *   unsafe call: a "potentially unsafe" call (synchronizing, freeing, querying) made where
 *     the thread's capture mode forbids it (STREAM_CAPTURE_UNSUPPORTED);
 *   stream: synchronizing or querying a capturing stream (UNSUPPORTED), or the legacy stream
 *     while a blocking stream of its context captures (STREAM_CAPTURE_IMPLICIT);
 *   context: synchronizing a context one of whose streams captures (UNSUPPORTED). */
CUresult cd_capture_unsafe_call_locked(const char *call);
CUresult cd_capture_check_stream_locked(const cd_stream *s, bool invalidate);
CUresult cd_capture_check_ctx_locked(const cd_ctx *ctx);
/* Refuses an operation the simulator cannot capture (UNSUPPORTED; invalidates). */
CUresult cd_capture_refuse_locked(cd_stream *s, const char *what);
/* A stream going away leaves its capture; the capture's own stream ends it. */
void cd_capture_stream_gone_locked(cd_stream *s);

typedef struct cd_graph cd_graph;
struct cd_node {
    CUgraphNodeType type;
    cd_op *op;                  /* its work; NULL for an empty node */
    cd_node **deps;
    size_t dep_count;
    void **kernel_params;       /* a kernel node's, as cuGraphKernelNodeGetParams gives them */
    cd_graph *graph;
    size_t index;               /* its position in the graph */
    bool mark;                  /* scratch for graph walks */
    cd_node *next;              /* in its graph, in the order added: a topological order */
};

/* A new empty graph, owned by a capture until cuStreamEndCapture hands it out. */
cd_graph *cd_graph_new_locked(void);
void cd_graph_free_locked(cd_graph *g);
/* Adds a node for op (NULL: an empty node) after deps. Takes ownership of op. */
CUresult cd_graph_add_locked(cd_graph *g, cd_op *op, cd_node *const *deps, size_t dep_count,
                             cd_node **node);
/* Whether every node of g comes before, or is one of, the nodes given. */
bool cd_graph_joined_locked(cd_graph *g, cd_node *const *ends, size_t end_count);
/* Hands a graph out to the program: its handle becomes valid. */
void cd_graph_publish_locked(cd_graph *g);

/* ---- kernels (kernels.c), modules and libraries (modules.c) ---- */

/* A kernel slot is a CUkernel or CUfunction handle. Slots freed by an unload are handed out
 * again, the last freed first. Call these with cd.lock held. */
cd_kernel *cd_kernel_add_locked(const sim_module_kernel *desc, bool is_function);
/* Frees the slots of kernels[0..count) and of the CUfunctions cuKernelGetFunction made for
 * them; a later load gets them back in the same order. */
void cd_kernels_remove_locked(cd_kernel *const *kernels, int count);
/* Whether a launch of one of kernels[0..count) (or of their CUfunctions) is queued or running. */
bool cd_kernels_queued_locked(cd_kernel *const *kernels, int count);
/* Counts a launch op into (queued) or out of a stream's queue. */
void cd_kernel_queued_locked(const cd_op *op, bool queued);
/* A launch op of f: INVALID_HANDLE, INVALID_VALUE for a bad shape or parameters. */
CUresult cd_kernel_op_locked(CUfunction f, const unsigned grid[3], const unsigned block[3],
                             unsigned shared_bytes, void **kernelParams, void **extra,
                             cd_op **op);
/* A launch's kernel is loaded into ctx on first use, which takes the driver memory for it:
 * OUT_OF_MEMORY when the device has no room. */
CUresult cd_kernel_load_locked(const cd_op *op, cd_ctx *ctx);
/* Forgets which kernels a context being torn down had loaded. */
void cd_kernels_release_ctx_locked(const cd_ctx *ctx);
/* The kernel's parameters as a kernelParams array into the op's packed arguments (malloc'd);
 * NULL when the kernel was unloaded since. */
void **cd_kernel_params_of(const cd_op *op);
/* The function handle a launch op names. */
CUfunction cd_kernel_handle(const cd_op *op);
/* The name of the kernel a launch op runs. */
const char *cd_kernel_name_locked(const cd_op *op);

/* LMS_SIM_TIMELINE (timeline_file.c): each priced op, on the engine that ran it, from start
 * to end in virtual time; and the host's waits. */
void cd_timeline_op_locked(const cd_stream *s, const cd_op *op, sim_engine engine, sim_ns queued,
                           sim_ns start, sim_ns end);
void cd_timeline_host_wait(sim_ns from, sim_ns until);
/* An output file's name (LMS_SIM_REPORT, LMS_SIM_TIMELINE) with %p replaced by the process
 * id, into out; false when it does not fit. */
bool cd_expand_path(const char *path, char *out, size_t size);
/* Whether a queued launch may run on ctx: the span its cost function gives each pointer it
 * moves bytes through (its first byte, without an extent) must be memory ctx's kernels may
 * touch (cd_kernel_may_touch_locked). A launch of a kernel unloaded since may: unloading
 * waited for it. */
bool cd_kernel_reaches_locked(const cd_op *op, const cd_ctx *ctx);

/* Runs a stream memory operation (memops.c) on its stream's worker, without the lock: a wait
 * returns once its condition holds. */
void cd_memop_run(const cd_op *op);
/* Runs a launch op's kernel on the calling thread (a stream's worker), without the lock. */
void cd_kernel_run(const cd_op *op);
/* A second, independent copy of a launch op's arguments, for graph replay; INVALID_HANDLE when
 * its kernel was unloaded since the launch was captured. */
CUresult cd_kernel_args_dup_locked(const cd_op *op, unsigned char **copy);


/* ---- virtual time (clock.c, over the timing model of timing.h) ---- */

sim_ns cd_host_now(void);
void cd_host_charge(double ns);
/* The host waits: its clock moves to t if t is later. */
void cd_host_wait_until(sim_ns t);
/* How much of the host's clock went by in such waits. */
sim_ns cd_host_waited(void);
/* What a call costs the host, by base name; 0 for calls that charge by size themselves. */
double cd_call_ns(const char *base_name);
/* Prices op, queued on s now: sets op->vt_end and s->vt_end, and an event record's time. */
void cd_schedule_locked(cd_stream *s, cd_op *op);
/* When everything queued so far on s (the NULL stream: and on the blocking streams it
 * waits for), on every stream of ctx, or of every context of a device, is done. */
sim_ns cd_stream_vt_end_locked(const cd_stream *s);
sim_ns cd_ctx_vt_end_locked(const cd_ctx *ctx);
sim_ns cd_device_vt_end_locked(int device);

/* Where an address lives, for pricing: device memory, host memory the device reaches
 * directly (pinned, registered, host-located VMM), or pageable host memory. */
typedef enum cd_memory_kind { CD_MEMORY_DEVICE, CD_MEMORY_PINNED, CD_MEMORY_PAGEABLE } cd_memory_kind;
cd_memory_kind cd_memory_kind_locked(uintptr_t ptr);
/* The share of [ptr, ptr + size) (its first byte, for size 0) outside device memory: a
 * kernel reaches it over the bus. */
double cd_host_share_locked(uintptr_t ptr, size_t size);
/* A launch's floating-point operations and its bytes in device and in host memory, from its
 * kernel's cost function and where each pointer parameter points. */
void cd_kernel_price_locked(const cd_op *op, double *flops, double *device_bytes, double *host_bytes,
                            double *host_written);
/* The same cost, wherever its memory lies, as JSON members for the timeline: "flops", and
 * "reaches", per pointer parameter that reaches memory, [pointer, span reached, bytes, of them
 * written]. A bound on the fastest schedule of a run (tools/bench/least_time.py) prices the
 * launch with its memory placed otherwise from them. Returns 0 when size is too small. */
int cd_kernel_cost_json_locked(const cd_op *op, char *out, size_t size);

#endif
