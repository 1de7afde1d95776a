/* What liblms does before the process dies by a signal.
 *
 * The trace's end and the statistics are written at exit, which a process killed by SIGTERM
 * or SIGINT (or crashing) never reaches; so liblms also writes them on those signals, then
 * lets the process die by the signal as it would have, so that its exit status still says
 * which. A handler is installed only for a signal whose action is the default: a program
 * that handles a signal itself decides what happens. */
#ifndef LMS_PRELOAD_SIGNALS_H
#define LMS_PRELOAD_SIGNALS_H

#include <stddef.h>

/* Called inside the signal handler, in the order registered: async-signal-safe code only. */
typedef void (*lms_signal_fn)(int signal_number);

/* Calls fn when the process is about to die by one of `signals`. At most 4 functions. */
void lms_signals_at_death(lms_signal_fn fn, const int *signals, size_t count);
/* fn is called no more; a signal left without a function gets its default action back
 * (where liblms's handler is still the one installed). */
void lms_signals_forget(lms_signal_fn fn);

#endif
