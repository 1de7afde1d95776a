/* A small TAP producer for the C tests, run by prove.
 *
 *   plan(3);                          or  plan_skip_all("no GPU: %s", why);
 *   ok(x == 1, "x is %d", x);
 *   is_int(got, 42, "answer");        prints got/expected on failure
 *   diag("detail %zu", n);            "# ..." on stderr, shown by prove
 *   return exit_status();             non-zero when a test failed or the plan was missed
 *
 * ok() and friends may be called from several threads at once. */
#ifndef LMS_TESTS_TAP_H
#define LMS_TESTS_TAP_H

#include <stddef.h>

#define TAP_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))

void plan(int count);
void plan_skip_all(const char *fmt, ...) TAP_PRINTF(1, 2) __attribute__((noreturn));
void done_testing(void);
int ok(int condition, const char *fmt, ...) TAP_PRINTF(2, 3);
int is_int(long long got, long long expected, const char *fmt, ...) TAP_PRINTF(3, 4);
int is_uint(unsigned long long got, unsigned long long expected, const char *fmt, ...) TAP_PRINTF(3, 4);
int is_str(const char *got, const char *expected, const char *fmt, ...) TAP_PRINTF(3, 4);
void skip(int count, const char *fmt, ...) TAP_PRINTF(2, 3);
void diag(const char *fmt, ...) TAP_PRINTF(1, 2);
void note(const char *fmt, ...) TAP_PRINTF(1, 2);
void bail_out(const char *fmt, ...) TAP_PRINTF(1, 2) __attribute__((noreturn));
int exit_status(void);

/* Runs fn(arg) in a forked child and reports how it ended: the signal that killed it
 * (>0), or -(exit status + 1) when it exited. For "this must crash" tests. */
int tap_run_in_child(void (*fn)(void *arg), void *arg);

#endif
