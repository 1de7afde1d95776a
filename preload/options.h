/* liblms's options: one table (LMS_OPTION_TABLE) drives parsing, the start-up dump, and the
 * documentation generated from it (the README's table, the man pages, lms-run's options). Every option is read once, at load, with secure_getenv; a bad value
 * ends the process with status 2 and one line naming the variable, before any device work. */
#ifndef LMS_PRELOAD_OPTIONS_H
#define LMS_PRELOAD_OPTIONS_H

#include <stdint.h>
#include <stdio.h>

#define LMS_MAX_DEVICES 16

enum lms_mode { LMS_MODE_SWAP, LMS_MODE_CAP, LMS_MODE_OFF };
enum lms_stats { LMS_STATS_OFF, LMS_STATS_TABLE, LMS_STATS_JSON };

/* X(field, kind, unit, default, accepted values (enums), description)
 * kind: SIZE (bytes; a plain number counts in `unit`, a K/M/G suffix, either case, overrides it),
 *       COUNT (a whole number up to `unit`), LEVEL (0..3), ENUM (index into the accepted
 *       values), PATH (any non-empty text), SIGNAL (a signal a dump may use: name or number).
 * A default of "" means: computed at load (documented in the description). */
#define LMS_OPTION_TABLE(X)                                                                     \
    X(THRESHOLD_KB, SIZE, 1024, "1000", NULL,                                                  \
      "Allocations smaller than this (KiB) stay resident; larger ones are swappable")          \
    X(EXCLUDE_MB, SIZE, 1048576, "", NULL,                                                     \
      "Device memory (MiB) left out of the cache on every device; `LMS_EXCLUDE_MB_<ordinal>` " \
      "overrides it for one device; default: what is not free when liblms first uses the "    \
      "device (the context, other processes), plus a margin for the driver's later needs of "  \
      "256 MiB (1/16 of the device's memory when that is less)")                              \
    X(HOST_LIMIT_MB, SIZE, 1048576, "", NULL,                                                  \
      "Cap on the pinned host backing in use, holding evicted allocations (MiB); default: "   \
      "half of physical memory")                                                               \
    X(MAP_EVICTED, ENUM, 0, "1", lms_flag_names,                                               \
      "1: map each evicted allocation's host backing at its address, so that a kernel using a "  \
      "pointer liblms did not see reads and writes the right bytes over PCIe instead of "        \
      "faulting (host VMM only; it costs a `cuMemSetAccess` on host memory per eviction, "       \
      "2.4-3.1 ms per 256 MiB on an H100); 0: leave the address unmapped until the restore")     \
    X(MODE, ENUM, 0, "swap", lms_mode_names,                                                   \
      "`swap`: cache device memory over host memory; `cap`: enforce the soft limit without "   \
      "swapping, as if the GPU had only that much memory; `off`: pure pass-through")           \
    X(LOG_LEVEL, LEVEL, 0, "0", NULL,                                                          \
      "0: errors only; 1: start-up settings and warnings; 2: allocations and frees; "          \
      "3: evictions, restores and uses in host memory")                                        \
    X(STATS, ENUM, 0, "off", lms_stats_names,                                                  \
      "Statistics at exit and on SIGTERM or SIGINT, on stderr: `off`, `table` (binary units) " \
      "or `json`")                                                                             \
    X(STATS_FILE, PATH, 0, "", NULL,                                                           \
      "File the statistics go to instead of stderr (a table unless `LMS_STATS=json`); `%p` "   \
      "becomes the process id, `%r` the launcher's rank (nothing without one); an existing "   \
      "file is never overwritten")                                                             \
    X(TRACE, PATH, 0, "", NULL,                                                                \
      "Chrome-trace JSON file to write (read by lms-trace); `%p` becomes the process id, "     \
      "`%r` the launcher's rank (nothing without one); an existing file is never "             \
      "overwritten")                                                                           \
    X(TRACE_STACK_DEPTH, COUNT, 64, "8", NULL,                                                 \
      "Call-stack frames recorded per allocation in the trace and the dump; 0 for none")      \
    X(TRACE_USES, ENUM, 0, "0", lms_flag_names,                                                \
      "1: record which allocations each launch, copy and memset used (large traces)")         \
    X(TRACE_MAX_MB, SIZE, 1048576, "0", NULL, "Stop recording the trace past this size; 0: no limit") \
    X(DUMP_SIGNAL, SIGNAL, 0, "", NULL,                                                        \
      "Signal (e.g. `USR1`) that dumps the live allocations, to the trace or to stderr; "      \
      "refused: signals that stop the program when a user, a terminal, a scheduler or the "    \
      "kernel sends them (`HUP`, `INT`, `QUIT`, `TERM`, `PIPE`, `ALRM`, `XCPU`, `XFSZ`, "      \
      "`TSTP`, `TTIN`, `TTOU`, `CONT`, `KILL`, `STOP`), so that it can still be stopped, and " \
      "faults' (`SEGV`, `BUS`, `FPE`, `ILL`, `ABRT`, `TRAP`, `SYS`)")                           \
    X(POLICY, ENUM, 0, "lru", lms_policy_names, "Eviction policy")                             \
    X(PIECE_MB, SIZE, 1048576, "0", NULL,                                                      \
      "Swappable allocations larger than this (MiB) are split into pieces of this size, each "  \
      "evicted and restored on its own, so that a restore waits for a piece's eviction rather " \
      "than a whole tensor's and only as many pieces move as room needs; 0: never split. A "   \
      "split allocation's handle cannot be retained (`cuMemRetainAllocationHandle`)")           \
    X(PREFETCH, ENUM, 0, "1", lms_flag_names,                                                  \
      "1: with a policy that predicts (`lookahead`), bring allocations back ahead of need "     \
      "after each call, into device memory free at the time, and queue the evictions that "    \
      "make room for what does not fit yet, keeping an eighth of the soft limit free for "      \
      "them by evicting ahead what is needed furthest in the future (a twentieth where the "    \
      "learned iteration's plan evicts each allocation right after its last use before an "     \
      "eviction, or none where its trial found that faster); while the program waits for the " \
      "device (`cuStreamSynchronize`, `cuEventSynchronize`, a copy into host memory that the " \
      "host waits for), finish the evictions in flight and restore into the room they free; "  \
      "0: restore only what each call needs")                                                  \
    X(PLAN_TIMING, ENUM, 0, "1", lms_flag_names,                                               \
      "1: with `lookahead` and `LMS_PREFETCH=1`, once the iteration is learned, time its steps " \
      "and a copy out on the device (events around each call for one iteration), then run "    \
      "each candidate eviction plan for three iterations and keep the fastest: Belady's, "      \
      "those that evict, of the allocations idle long enough for their copy out (0.5 or 1 "     \
      "copies' time), the one needed furthest ahead, so that a restore does not wait for the "  \
      "copy out that frees its room (1 also from where Belady's choice settles), each also "   \
      "making room ahead, while the link would idle, for what the next steps need, and the "   \
      "fastest of these with no room kept free ahead of restores; 0: Belady's plan")

extern const char *const lms_mode_names[];
extern const char *const lms_stats_names[];
extern const char *const lms_flag_names[];

typedef struct lms_option_value {
    uint64_t value;    /* bytes, level, or index of the accepted value */
    const char *text;  /* the text given, or NULL when the default applies */
} lms_option_value;

typedef struct lms_options {
#define LMS_OPTION_FIELD(name, kind, unit, def, choices, doc) lms_option_value name;
    LMS_OPTION_TABLE(LMS_OPTION_FIELD)
#undef LMS_OPTION_FIELD
    uint64_t exclude_bytes[LMS_MAX_DEVICES]; /* EXCLUDE_MB with the per-device overrides, or
                                                LMS_EXCLUDE_COMPUTED where neither is given */
} lms_options;

#define LMS_EXCLUDE_COMPUTED UINT64_MAX

extern lms_options lms_opt;

/* Reads the environment into lms_opt; on a bad value, prints why and calls _exit(2). */
void lms_options_load(void);
/* Logs each option and its value (log level 1). */
void lms_options_dump(void);
/* The options as the documentation shows them (README, man pages, lms-run --help). */
typedef struct lms_option_doc {
    const char *env;          /* "LMS_THRESHOLD_KB" */
    const char *def;          /* "1000", "(computed)" or "(none)" */
    char accepted[256];       /* "whole number of KiB, or with K/M/G suffix"; "`swap`, `cap`, `off`" */
    char value[128];          /* on a command line: "N", "swap|cap|off", "FILE", "SIGNAL", "0-3" */
    const char *doc;          /* Markdown: `code` in backquotes */
} lms_option_doc;
size_t lms_options_count(void);
void lms_options_doc(size_t i, lms_option_doc *doc);

#endif
