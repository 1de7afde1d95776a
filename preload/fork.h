/* Forking while other threads are inside liblms: before fork, the thread that forks takes
 * every lock of the library, in the order the library nests them, and lets them go after it
 * in the parent and in the child, so the child finds them free and the tables consistent.
 *
 * pthread_atfork runs prepare handlers in the reverse order of registration. The trace's own
 * handlers (registered by lms_trace_open) must run after these: the trace's locks are taken
 * while these are held, never the other way round. So call this after lms_trace_open. */
#ifndef LMS_PRELOAD_FORK_H
#define LMS_PRELOAD_FORK_H

/* Once, at start-up, after lms_trace_open. */
void lms_fork_protect(void);

#endif
