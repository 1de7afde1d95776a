/* Reading a liblms trace (docs/trace-format.md) as a stream of typed events.
 *
 * trace_read calls `on_event` for every event in file order; an event and the JSON it points
 * into (frames, uses) live until the callback returns. Memory stays bounded by one event,
 * whatever the size of the file. */
#ifndef LMS_TOOLS_TRACE_READ_H
#define LMS_TOOLS_TRACE_READ_H

#include "tools/json.h"

#include <stdbool.h>
#include <stdint.h>

#define TRACE_MAX_DEVICES 64

typedef enum {
    TRACE_DEVICE,              /* device, total_bytes, soft_limit */
    TRACE_ALLOC,               /* device, addr, bytes, stream, cached, stack, frames */
    TRACE_FREE,                /* device, addr, bytes */
    TRACE_SWAP_OUT,            /* device, addr, bytes, stream, ts_us .. ts_us + dur_us */
    TRACE_SWAP_IN,
    TRACE_EVICT,               /* device, addr, bytes, reason */
    TRACE_OOM,                 /* device, bytes */
    TRACE_COUNTERS,            /* device, demanded, resident, host, soft_limit */
    TRACE_LAUNCH,              /* name (the kernel), stream, step, uses */
    TRACE_DUMP,                /* reason, dump */
    TRACE_LIVE,                /* dump, device, addr, bytes, resident, age_us, idle_us, frames */
    TRACE_TRUNCATED,           /* the trace reached LMS_TRACE_MAX_MB; nothing follows */
    TRACE_END,                 /* the last event of a complete trace */
} trace_kind;

typedef struct trace_event {
    trace_kind kind;
    double ts_us, dur_us;
    int device;
    uint64_t addr, bytes, stream;
    bool cached, resident;
    uint64_t stack;
    const json_value *frames;  /* array of strings, or NULL */
    const char *name, *reason;
    uint64_t demanded, resident_bytes, host, soft_limit, total_bytes;
    uint64_t step;
    const json_value *uses;    /* array of "0x..." strings */
    uint64_t dump, age_us, idle_us;
} trace_event;

typedef struct trace_settings {
    char program[64];
    uint64_t pid;
    uint64_t threshold_bytes, exclude_bytes;
    char policy[32], mode[16];
    uint64_t stack_depth;
    bool uses;
} trace_settings;

/* Return non-zero from the callback to stop early (trace_read then returns that value). */
typedef int (*trace_event_fn)(void *ctx, const trace_event *event);

/* 0 after a complete trace; -1 with a message naming the file (and the offset, for malformed
 * JSON) in err, after the events before the problem were delivered. */
int trace_read(const char *path, trace_settings *settings, trace_event_fn on_event, void *ctx,
               char *err, size_t err_len);

/* The call site of an allocation: its first frame outside liblms and the CUDA libraries,
 * written to buf ("?" without frames). */
void trace_call_site(const json_value *frames, char *buf, size_t len);

#endif
