/* Exit statistics (LMS_STATS): counters the residency manager bumps under its lock. */
#ifndef LMS_PRELOAD_STATS_H
#define LMS_PRELOAD_STATS_H

#include <stddef.h>
#include <stdint.h>

uint64_t lms_stats_now(void); /* monotonic nanoseconds */
void lms_stats_alloc(void);
void lms_stats_demanded(int device, size_t demanded, size_t soft_limit);
void lms_stats_host(size_t host_bytes);
/* reason: "limit" (an allocation), "demand" (a call's restore), "oom-retry" (the driver). */
void lms_stats_evicted(const char *reason, size_t bytes, uint64_t ns);
void lms_stats_restored(size_t bytes_copied, uint64_t ns);
void lms_stats_stall(uint64_t ns);
void lms_stats_oom(void);
/* Prints them on stderr as LMS_STATS asks (nothing for off). */
void lms_stats_print(void);

#endif
