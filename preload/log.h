/* Logging that is safe anywhere inside the hooks: it formats into a stack buffer and
 * write(2)s to stderr, so it never allocates memory (host or device) and never re-enters
 * the driver. */
#ifndef LMS_PRELOAD_LOG_H
#define LMS_PRELOAD_LOG_H

#include "preload/options.h"

#define LMS_LOG_ERROR 0
#define LMS_LOG_INFO 1
#define LMS_LOG_ALLOC 2
#define LMS_LOG_SWAP 3

/* Prints "[LMS:<device>] ..." (or "[LMS] ..." for device < 0) when level <= LMS_LOG_LEVEL. */
void lms_log(int level, int device, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Bad input found at load (an option's value, a file that cannot be created): prints
 * "liblms: ..." as one line, whatever LMS_LOG_LEVEL says, and ends the process with status 2. */
void lms_exit_bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
