/* Reading a liblms trace (docs/trace-format.md) as a stream of typed events.
 *
 * trace_read calls `on_event` for every event in file order; an event and the JSON it points
 * into (frames, pcs, uses) live until the callback returns. Memory stays bounded by one event
 * (and the table of symbols), whatever the size of the file. A trace cut anywhere, as a
 * killed process leaves it, reads up to its last whole event: trace_info says where it ends. */
#ifndef LMS_TOOLS_TRACE_READ_H
#define LMS_TOOLS_TRACE_READ_H

#include "tools/json.h"
#include "tools/symbols.h"

#include <stdbool.h>
#include <stdint.h>

#define TRACE_MAX_DEVICES 64

typedef enum {
    TRACE_DEVICE,              /* device, total_bytes, soft_limit */
    TRACE_ALLOC,               /* device, addr, bytes, stream, cached, stack, frames, pcs */
    TRACE_FREE,                /* device, addr, bytes, frames, pcs */
    TRACE_SWAP_OUT,            /* device, addr, bytes, stream, ts_us .. ts_us + dur_us */
    TRACE_SWAP_IN,
    TRACE_EVICT,               /* device, addr, bytes, reason */
    TRACE_OOM,                 /* device, bytes */
    TRACE_COUNTERS,            /* device, demanded, resident, host, soft_limit */
    TRACE_STALL,               /* ts_us .. ts_us + dur_us: calls waited for restores */
    TRACE_LAUNCH,              /* name (the kernel), stream, step, uses */
    TRACE_DUMP,                /* reason, dump */
    TRACE_LIVE,                /* dump, device, addr, bytes, resident, age_us, idle_us, frames, pcs */
    TRACE_TRUNCATED,           /* the trace reached LMS_TRACE_MAX_MB; nothing follows */
    TRACE_END,                 /* the last event of a complete trace: signal */
} trace_kind;

typedef struct trace_event {
    trace_kind kind;
    double ts_us, dur_us;
    int device;
    uint64_t addr, bytes, stream;
    bool cached, resident;
    uint64_t stack;
    const json_value *frames;  /* array of strings ("site+0x1f (libfoo.so)"), or NULL */
    const json_value *pcs;     /* the frames' return addresses ("0x..."), or NULL */
    const char *name, *reason;
    uint64_t demanded, resident_bytes, host, soft_limit, total_bytes;
    uint64_t step;
    const json_value *uses;    /* array of "0x..." strings */
    uint64_t uses_left_out;    /* the launch's uses the trace did not list (it lists a limited number) */
    uint64_t dump, age_us, idle_us;
    int signal;                /* TRACE_END: the signal the process died by, 0 at exit */
    symbols *symbols;          /* the objects the trace described, for trace_frame_name */
} trace_event;

typedef struct trace_info {
    /* The run's settings (lms.settings). */
    uint64_t version;
    char liblms[32];           /* the library's version; "" before trace version 2 */
    char program[64];
    uint64_t pid;
    uint64_t threshold_bytes, exclude_bytes;
    uint64_t piece_bytes;      /* LMS_PIECE_MB in bytes (0: never split; absent from older traces) */
    char policy[32], mode[16];
    uint64_t stack_depth;
    bool uses;
    uint64_t epoch_start_us;   /* wall-clock time of ts 0; 0 before trace version 2 */
    /* How the trace ends, known once trace_read returns. */
    bool complete;             /* lms.trace_end was read */
    int signal;                /* the signal the process died by (complete traces) */
    bool truncated;            /* LMS_TRACE_MAX_MB stopped the recording */
    bool cut;                  /* the file ends without lms.trace_end (killed, or cut short) */
    uint64_t events;           /* events read */
    uint64_t whole_bytes;      /* bytes up to the end of the last whole event */
    uint64_t file_bytes;       /* bytes in the file */
    double last_us;            /* the latest time an event covers */
} trace_info;

/* Return non-zero from the callback to stop early (trace_read then returns that value). */
typedef int (*trace_event_fn)(void *ctx, const trace_event *event);

/* `path` "-" reads standard input (kept for a second reading). Returns 0 after the whole
 * file, cut or not; -1 with a message naming the file (and the offset, for malformed JSON)
 * in err, after the events before the problem were delivered. */
int trace_read(const char *path, trace_info *info, trace_event_fn on_event, void *ctx, char *err,
               size_t err_len);

/* A sentence on how the trace ends when it is not whole ("" when it is complete). */
void trace_ending_note(const trace_info *info, char *buf, size_t len);

/* Frame i of an event from the symbols and lines of the file of its object, where that file
 * is still the one that ran; false otherwise. */
bool trace_frame_symbol(const trace_event *event, size_t i, symbol *found);
/* Frame i as recorded: "site+0x1f (libfoo.so)", "program+0x12e1"; "?" when there is none. */
const char *trace_frame_recorded(const trace_event *event, size_t i);
/* Frame i: "function (file.c:12)" (trace_frame_symbol), else as recorded. */
void trace_frame_name(const trace_event *event, size_t i, char *buf, size_t len);
/* The call site of an allocation: its first frame outside liblms and the CUDA libraries,
 * named as trace_frame_name does ("?" without frames). */
void trace_call_site(const trace_event *event, char *buf, size_t len);

#endif
