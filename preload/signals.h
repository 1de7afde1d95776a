/* What liblms does before the process dies by a signal.
 *
 * The trace's end and the statistics are written at exit, which a process killed by SIGTERM
 * or SIGINT (or crashing) never reaches; so liblms also writes them on those signals, then
 * lets the process die by the signal as it would have, so that its exit status still says
 * which. A handler is installed only for a signal whose action is the default: a program
 * that handles a signal itself decides what happens.
 *
 * And which signals may ask for a dump of the live allocations (LMS_DUMP_SIGNAL). */
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

/* "USR1", "SIGUSR1" or "10" -> 10; -1 when it is not a signal a dump may use: none that stops
 * the program when a user, a terminal, a scheduler or the kernel sends it, and no fault's. */
int lms_dump_signal_number(const char *name);
#define LMS_DUMP_REFUSED_SIGNALS \
    "HUP, INT, QUIT, TERM, PIPE, ALRM, XCPU, XFSZ, TSTP, TTIN, TTOU, CONT, KILL, STOP; faults: SEGV, BUS, FPE, " \
    "ILL, ABRT, TRAP, SYS"

#endif
