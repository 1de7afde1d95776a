/* The TAP producer itself: what prove sees for passing, failing and skipped tests. */
#include "tests/tap.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void crash(void *arg)
{
    (void)arg;
    raise(SIGSEGV);
}

static void exit_seven(void *arg)
{
    (void)arg;
    exit(7);
}

/* Runs the producer in a child with stdout captured, so that a failing ok() can be
 * checked without failing this test. The child inherits the count of 5 tests run. */
static void failing_run(void *arg)
{
    (void)arg;
    int quiet = open("/dev/null", O_WRONLY); /* its diagnostics are expected, not news */
    dup2(quiet, 2);
    plan(2);
    ok(1, "first");
    is_int(3, 4, "second %s", "fails");
    exit(exit_status());
}

int main(void)
{
    plan(6);
    ok(1, "ok with format %d", 1);
    is_int(-5, -5, "is_int equal");
    is_str("abc", "abc", "is_str equal");
    is_int(tap_run_in_child(crash, NULL), SIGSEGV, "child killed by SIGSEGV is reported as the signal");
    is_int(tap_run_in_child(exit_seven, NULL), -8, "child exit status 7 is reported as -8");

    char path[] = "/tmp/tap_self_test.XXXXXX";
    int fd = mkstemp(path);
    fflush(stdout);
    int saved = dup(1);
    dup2(fd, 1);
    int outcome = tap_run_in_child(failing_run, NULL);
    dup2(saved, 1);
    close(saved);
    char text[512] = {0};
    ssize_t got = pread(fd, text, sizeof text - 1, 0);
    close(fd);
    unlink(path);
    ok(got > 0 && outcome == -2 && strstr(text, "1..2\nok 6 - first\nnot ok 7 - second fails\n") != NULL,
       "a failing test prints 'not ok' and the exit status counts failures");
    return exit_status();
}
