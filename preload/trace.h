/* The allocation trace (LMS_TRACE) and the dump of live allocations (LMS_DUMP_SIGNAL).
 *
 * liblms calls these at its events; the trace is Chrome Trace Event JSON (docs/trace-format.md)
 * that opens as it is in Perfetto UI and chrome://tracing, and that tools/lms-trace reads.
 *
 *   lms_trace_config cfg = { .path = "run.json", .stack_depth = 8, .max_bytes = 64 << 20 };
 *   if (lms_trace_open(&cfg, err, sizeof err) != 0) { log err; exit 2 }
 *   uint32_t stack = lms_trace_alloc(dev, addr, size, stream, 1);   keep it for the dump
 *   ...
 *   lms_trace_close();                           also run by atexit and on fatal signals
 *
 * Every event function may be called from any thread, never touches CUDA, and costs one
 * branch when nothing is recorded. Times are CLOCK_MONOTONIC nanoseconds (lms_trace_now_ns).
 * Addresses and streams are plain integers: device pointers and CUstream values. The writer
 * buffers at most 128 KiB and writes whole events, so the file on disk always holds complete
 * events, which viewers and lms-trace read even when the process was killed before closing;
 * closing appends the end event. A forked child records nothing. */
#ifndef LMS_PRELOAD_TRACE_H
#define LMS_PRELOAD_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct lms_trace_live lms_trace_live;

/* Dumps the live allocations: with the library's table locked, lms_trace_dump_begin(reason),
 * lms_trace_dump_record for each allocation, lms_trace_dump_end. Called on the trace's own
 * dump thread after LMS_DUMP_SIGNAL (reason "signal"), so it may take locks; liblms calls
 * the same function itself with "oom" just before returning an out-of-memory error. */
typedef void (*lms_trace_walk_fn)(void *ctx, const char *reason);

typedef struct lms_trace_config {
    const char *path;          /* LMS_TRACE; NULL or "" records nothing. "%p" becomes the pid.
                                  An existing file (or link) is never opened: lms_trace_open fails. */
    unsigned stack_depth;      /* LMS_TRACE_STACK_DEPTH: frames per allocation, 0 for none */
    bool record_uses;          /* LMS_TRACE_USES: record lms_trace_launch_uses */
    uint64_t max_bytes;        /* LMS_TRACE_MAX_MB in bytes; 0 for no limit */
    int dump_signal;           /* LMS_DUMP_SIGNAL as a number (lms_dump_signal_number); 0: none */
    lms_trace_walk_fn walk_live; /* needed when dump_signal is set */
    void *walk_ctx;
    /* The settings of this run, recorded so that `lms-trace tune` can replay it. */
    uint64_t threshold_bytes;  /* LMS_THRESHOLD_KB in bytes */
    uint64_t exclude_bytes;    /* LMS_EXCLUDE_MB in bytes */
    uint64_t piece_bytes;      /* LMS_PIECE_MB in bytes, before rounding to the granularity */
    const char *policy;        /* LMS_POLICY */
    const char *mode;          /* LMS_MODE */
} lms_trace_config;

/* Starts recording (when cfg->path is set) and installs the dump signal (when set). Returns 0,
 * or -1 with one line naming the variable and the problem in err. Call once, before device work. */
int lms_trace_open(const lms_trace_config *cfg, char *err, size_t err_len);
/* Writes the end event and closes the file; stops the dump thread. Safe to call twice. */
void lms_trace_close(void);

uint64_t lms_trace_now_ns(void);

enum lms_swap_direction { LMS_SWAP_OUT, LMS_SWAP_IN };

/* Flags read by the inline wrappers below; written only by lms_trace_open/close. */
#define LMS_TRACE_ON_EVENTS 1u /* a trace file is open */
#define LMS_TRACE_ON_STACKS 2u /* capture stacks (trace or dump) */
#define LMS_TRACE_ON_USES   4u /* record launch uses */
extern _Atomic unsigned lms_trace_flags_;

/* The device and its limit, once per device when liblms first sees it. */
void lms_trace_device_(int dev, uint64_t total_bytes, uint64_t soft_limit);
/* Returns the id of the call stack (0 when none is captured): keep it for the dump. */
uint32_t lms_trace_alloc_(int dev, uint64_t addr, uint64_t bytes, uint64_t stream, bool cached);
void lms_trace_free_(int dev, uint64_t addr, uint64_t bytes);
void lms_trace_swap_(int dev, uint64_t addr, uint64_t bytes, enum lms_swap_direction dir,
                     uint64_t start_ns, uint64_t end_ns, uint64_t copy_stream);
void lms_trace_evict_(int dev, uint64_t addr, uint64_t bytes, const char *reason);
void lms_trace_oom_(int dev, uint64_t bytes);
void lms_trace_counters_(int dev, uint64_t resident, uint64_t host, uint64_t demanded,
                         uint64_t soft_limit);
void lms_trace_stall_(uint64_t start_ns, uint64_t end_ns);
void lms_trace_launch_uses_(const char *kernel, uint64_t stream, uint64_t step,
                            const uint64_t *addrs, size_t count);

static inline bool lms_trace_recording(void)
{
    return atomic_load_explicit(&lms_trace_flags_, memory_order_relaxed) & LMS_TRACE_ON_EVENTS;
}
static inline void lms_trace_device(int dev, uint64_t total_bytes, uint64_t soft_limit)
{
    if (lms_trace_recording()) lms_trace_device_(dev, total_bytes, soft_limit);
}
/* cached: liblms manages it (may be swapped); false for allocations under the threshold. */
static inline uint32_t lms_trace_alloc(int dev, uint64_t addr, uint64_t bytes, uint64_t stream,
                                       bool cached)
{
    if (atomic_load_explicit(&lms_trace_flags_, memory_order_relaxed))
        return lms_trace_alloc_(dev, addr, bytes, stream, cached);
    return 0;
}
static inline void lms_trace_free(int dev, uint64_t addr, uint64_t bytes)
{
    if (lms_trace_recording()) lms_trace_free_(dev, addr, bytes);
}
/* One copy between device and pinned host memory, once it is known to have finished. */
static inline void lms_trace_swap(int dev, uint64_t addr, uint64_t bytes,
                                  enum lms_swap_direction dir, uint64_t start_ns, uint64_t end_ns,
                                  uint64_t copy_stream)
{
    if (lms_trace_recording()) lms_trace_swap_(dev, addr, bytes, dir, start_ns, end_ns, copy_stream);
}
/* reason: a short constant such as "demand", "oom-retry", "limit". */
static inline void lms_trace_evict(int dev, uint64_t addr, uint64_t bytes, const char *reason)
{
    if (lms_trace_recording()) lms_trace_evict_(dev, addr, bytes, reason);
}
/* The program is about to get an out-of-memory error for `bytes`. */
static inline void lms_trace_oom(int dev, uint64_t bytes)
{
    if (lms_trace_recording()) lms_trace_oom_(dev, bytes);
}
static inline void lms_trace_counters(int dev, uint64_t resident, uint64_t host,
                                      uint64_t demanded, uint64_t soft_limit)
{
    if (lms_trace_recording()) lms_trace_counters_(dev, resident, host, demanded, soft_limit);
}
/* Calls waited for restores from start_ns to end_ns (lms_trace_now_ns times). */
static inline void lms_trace_stall(uint64_t start_ns, uint64_t end_ns)
{
    if (lms_trace_recording()) lms_trace_stall_(start_ns, end_ns);
}
/* Launch (or copy, or memset: pass "memcpy"/"memset" as the name) number `step`, the same
 * step given to lms_policy_used, used these allocations (their base addresses). */
static inline void lms_trace_launch_uses(const char *kernel, uint64_t stream, uint64_t step,
                                         const uint64_t *addrs, size_t count)
{
    if (atomic_load_explicit(&lms_trace_flags_, memory_order_relaxed) & LMS_TRACE_ON_USES)
        lms_trace_launch_uses_(kernel, stream, step, addrs, count);
}

/* The dump of live allocations, written by the walk_live function above (always with the
 * library's locks taken first, then these: one lock order). The dump goes into the trace
 * when one is recorded, else to stderr as a table. Thread-safe; dumps do not interleave. */
struct lms_trace_live {
    int device;
    uint64_t addr;
    uint64_t bytes;
    bool resident;             /* false: its bytes are in host memory */
    uint64_t created_ns;       /* lms_trace_now_ns() at allocation */
    uint64_t last_use_ns;      /* 0 when never used */
    uint32_t stack;            /* what lms_trace_alloc returned */
};
void lms_trace_dump_begin(const char *reason);
void lms_trace_dump_record(const lms_trace_live *live);
void lms_trace_dump_end(void);

/* NVTX ranges in domain "liblms" around the host side of a swap, for Nsight Systems; free
 * when no tool is attached, independent of LMS_TRACE. Begin returns the id to end. */
uint64_t lms_trace_range_begin(enum lms_swap_direction dir, uint64_t bytes);
void lms_trace_range_end(uint64_t range);

#endif
