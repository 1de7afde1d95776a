/* Exit statistics (LMS_STATS, LMS_STATS_FILE): counters the residency manager bumps under its lock. */
#ifndef LMS_PRELOAD_STATS_H
#define LMS_PRELOAD_STATS_H

#include <stddef.h>
#include <stdint.h>

uint64_t lms_stats_now(void); /* monotonic nanoseconds */
void lms_stats_alloc(void);
void lms_stats_demanded(int device, size_t demanded, size_t soft_limit);
void lms_stats_host(size_t host_bytes);
/* The bytes each device moves (copied out, copied in, used in host memory) are also counted by
 * its learned iterations, below. reason: "limit" (an allocation), "demand" (a call's restore),
 * "room" (the room kept free ahead of need), "prefetch" (room for restoring ahead of need),
 * "oom-retry" (the driver), "plan". */
void lms_stats_evicted(int device, const char *reason, size_t bytes, uint64_t ns);
void lms_stats_restored(int device, size_t bytes_copied, uint64_t ns);
/* An eviction was taken back before it finished (its bytes still on the device): no restore. */
void lms_stats_taken_back(void);
/* A launch whose parameters the driver would not describe: it may use any allocation, so every
 * eviction in flight on its device is taken back, and later ones wait for it. */
void lms_stats_unscanned(void);
/* A device's policy learned the program's iteration (again, after a step departed from it). */
void lms_stats_learned(void);
/* A call used an allocation of `bytes` in host memory (it did not fit on the device). */
void lms_stats_on_host(int device, size_t bytes);
/* Device `device`'s learned iteration, of `steps` steps, begins again: what it moved since the
 * last begin is one iteration's (the last LMS_STATS_ITERATIONS_KEPT of the latest length are
 * printed: what a steady iteration moves, from one run). Lost: its policy lost the iteration,
 * and the one under way does not count. */
#define LMS_STATS_ITERATIONS_KEPT 16
void lms_stats_iteration_begins(int device, uint64_t steps);
void lms_stats_iteration_lost(int device);
void lms_stats_stall(uint64_t ns);
void lms_stats_oom(void);
/* At start-up: starts the run's clock, creates LMS_STATS_FILE (a file that cannot be created
 * ends the process with status 2 and one line naming it), and prints the statistics when the
 * process dies by SIGTERM or SIGINT. */
void lms_stats_start(void);
/* Prints them as LMS_STATS asks, on stderr or into LMS_STATS_FILE: once, and only in the
 * process that started (a forked child prints none). Async-signal-safe. */
void lms_stats_print(void);

#endif
