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
#include <time.h>

/* cuda.h maps these names to their newest variant; the simulator exports the old ones too. */
#undef cuEventElapsedTime
#undef cuGetProcAddress
CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);

#define CD_MAX_DEVICES 8
#define CD_GRANULARITY ((size_t)2 << 20)
#define CD_DRIVER_VERSION 13000

/* ---- contexts, devices, configuration (control.c) ---- */

typedef struct cd_stream cd_stream;
typedef struct cd_op cd_op;

typedef struct cd_ctx {
    int device;
    int retained;               /* primary-context retain count */
    cd_stream *null_stream;     /* the legacy NULL stream, started on first use */
    cd_stream *streams;         /* created streams, linked through cd_stream.next */
} cd_ctx;

typedef struct cd_device {
    size_t capacity;            /* bytes the test gave the device */
    size_t used;                /* bytes of cuMemAlloc and device-located cuMemCreate */
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
    cd_device devices[CD_MAX_DEVICES];
    CUresult sticky_error;      /* set by a fault; every later call returns it */
    size_t bytes_mapped;
    size_t bytes_copied;
    unsigned long unsupported_calls;
};
extern struct cd_state cd;

/* Counts a call of an entry point and applies a pending injected fault: returns true and sets
 * *result when the call must return *result at once. Entries that need cuInit also answer
 * NOT_INITIALIZED before it, and the sticky error after a fault. */
bool cd_enter(const char *entry_point, bool needs_init, CUresult *result);
#define CD_ENTER(name)                                                                       \
    do {                                                                                     \
        CUresult cd_early_;                                                                  \
        if (cd_enter(name, true, &cd_early_))                                                \
            return cd_early_;                                                                \
    } while (0)
#define CD_ENTER_ANYTIME(name)                                                               \
    do {                                                                                     \
        CUresult cd_early_;                                                                  \
        if (cd_enter(name, false, &cd_early_))                                               \
            return cd_early_;                                                                \
    } while (0)

/* Sets, at cuInit, what the API did not set before from the environment (config.c);
 * INVALID_VALUE, with a log line naming the variable, for a bad value. */
CUresult cd_configure_locked(void);
/* The calling thread's current context, or INVALID_CONTEXT. Call without cd.lock. */
CUresult cd_current_ctx(cd_ctx **ctx);
/* getenv for LMS_SIM_* names that falls back to their old CUDADOUBLE_* names. */
const char *cd_getenv(const char *name);
/* Logs one line to LMS_SIM_LOG (default stderr). */
void cd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Logs the call and answers NOT_SUPPORTED: the fate of every unimplemented entry point. */
CUresult cd_unsupported(const char *entry_point);

/* ---- memory (memory.c) ---- */

/* Whether [ptr, ptr+size) is memory a copy may touch: inside a cuMemAlloc allocation,
 * inside mappings with access granted, or pinned/registered host memory. Memory inside a
 * reservation but unmapped or without access is not. `host_ok` accepts any other address as
 * pageable host memory (the unified cuMemcpy forms). Call with cd.lock held. */
bool cd_range_usable(uintptr_t ptr, size_t size, bool host_ok);
/* Gives back a device allocation (cuMemFree, and cuMemFreeAsync when its turn comes). */
CUresult cd_free_device_locked(uintptr_t ptr);

/* ---- streams (streams.c), events (events.c), capture (capture.c) ---- */

typedef struct cd_event {
    unsigned flags;
    unsigned long record_seq;   /* records issued */
    unsigned long done_seq;     /* records executed */
    sim_ns vt_recorded;         /* virtual time the last record issued is reached */
    int refs;                   /* the handle and every queued op that names the event */
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
} cd_op_kind;

struct cd_op {
    cd_op *next;
    cd_op_kind kind;
    sim_ns vt_end;              /* virtual time it ends, fixed when queued (clock.c) */
    union {
        struct {
            cd_kernel *kernel;
            unsigned long generation;   /* the kernel slot's, when launched (kernels.c) */
            unsigned grid[3], block[3];
            unsigned char *args;        /* packed parameters, laid out as registered */
        } launch;
        struct {                        /* rows of width bytes; one row for 1D copies */
            uintptr_t dst, src;
            size_t dst_pitch, src_pitch, width, height;
        } copy;
        struct {                        /* rows of count elements; one row for 1D memsets */
            uintptr_t dst;
            uint32_t value;
            unsigned element_size;      /* 1, 2 or 4 */
            size_t count, pitch, height;
        } memset;
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
    bool is_null;               /* the legacy NULL stream */
    pthread_t thread;
    bool stopping;
    cd_op *head, *tail;         /* queued; head is running or next */
    unsigned long submitted, completed;
    struct cd_graph *capture;   /* non-NULL while capturing (capture.c) */
    bool capture_invalidated;
    sim_ns vt_end;              /* virtual time its last queued op ends */
    cd_stream *next;            /* in ctx->streams */
};

/* A captured graph, and its instantiation: operations in the order they were issued. */
typedef struct cd_graph {
    cd_op *head, *tail;
} cd_graph;

cd_op *cd_op_new(cd_op_kind kind);
/* A copy of op to queue again (graph replay): OUT_OF_MEMORY, or INVALID_HANDLE for a launch
 * of a kernel unloaded since. */
CUresult cd_op_clone_locked(const cd_op *op, cd_op **copy);
void cd_op_free_locked(cd_op *op);
void cd_event_unref_locked(cd_event *event);

/* The stream a handle names (NULL, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD: the current
 * context's NULL stream, started on first use); INVALID_HANDLE for an unknown one. */
CUresult cd_resolve_stream_locked(CUstream hStream, cd_stream **stream);
/* Queues op on hStream, or records it into the stream's capture. Takes ownership of op in
 * all cases; *stream is where it went. */
CUresult cd_enqueue_locked(CUstream hStream, cd_op *op, cd_stream **stream);
CUresult cd_enqueue(CUstream hStream, cd_op *op);
/* Queues op on the NULL stream and waits for it: synchronous copies and memsets. */
CUresult cd_run_sync(cd_op *op);
/* Waits until every stream of ctx (NULL: the current context) has finished its queued work. */
CUresult cd_ctx_synchronize(cd_ctx *ctx);

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
/* What a call costs the host, by base name; 0 for calls that charge by size themselves. */
double cd_call_ns(const char *base_name);
/* Prices op, queued on s now: sets op->vt_end and s->vt_end, and an event record's time. */
void cd_schedule_locked(cd_stream *s, cd_op *op);
/* When everything queued so far on s (the NULL stream: and on the blocking streams it
 * waits for), or on every stream of ctx, is done. */
sim_ns cd_stream_vt_end_locked(const cd_stream *s);
sim_ns cd_ctx_vt_end_locked(const cd_ctx *ctx);

/* Where an address lives, for pricing: device memory, host memory the device reaches
 * directly (pinned, registered, host-located VMM), or pageable host memory. */
typedef enum cd_memory_kind { CD_MEMORY_DEVICE, CD_MEMORY_PINNED, CD_MEMORY_PAGEABLE } cd_memory_kind;
cd_memory_kind cd_memory_kind_locked(uintptr_t ptr);
/* A launch's floating-point operations and its bytes in device and in host memory, from its
 * kernel's cost function and where each pointer parameter points. */
void cd_kernel_price_locked(const cd_op *op, double *flops, double *device_bytes, double *host_bytes);

#endif
