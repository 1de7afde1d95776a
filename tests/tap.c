#include "tests/tap.h"

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static pthread_mutex_t tap_lock = PTHREAD_MUTEX_INITIALIZER;
static int planned = -1;
static int run;
static int failed;

static void vline(FILE *out, const char *prefix, const char *fmt, va_list ap)
{
    fputs(prefix, out);
    vfprintf(out, fmt, ap);
    fputc('\n', out);
    fflush(out);
}

void plan(int count)
{
    pthread_mutex_lock(&tap_lock);
    planned = count;
    printf("1..%d\n", count);
    fflush(stdout);
    pthread_mutex_unlock(&tap_lock);
}

void plan_skip_all(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stdout, "1..0 # SKIP ", fmt, ap);
    va_end(ap);
    exit(0);
}

void done_testing(void)
{
    pthread_mutex_lock(&tap_lock);
    if (planned < 0) {
        planned = run;
        printf("1..%d\n", run);
        fflush(stdout);
    }
    pthread_mutex_unlock(&tap_lock);
}

static int vresult(int condition, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&tap_lock);
    run++;
    if (!condition)
        failed++;
    printf("%sok %d - ", condition ? "" : "not ", run);
    vprintf(fmt, ap);
    putchar('\n');
    fflush(stdout);
    pthread_mutex_unlock(&tap_lock);
    return condition;
}

int ok(int condition, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vresult(condition, fmt, ap);
    va_end(ap);
    return condition;
}

int is_int(long long got, long long expected, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int pass = vresult(got == expected, fmt, ap);
    va_end(ap);
    if (!pass)
        diag("     got: %lld\n#   expected: %lld", got, expected);
    return pass;
}

int is_uint(unsigned long long got, unsigned long long expected, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int pass = vresult(got == expected, fmt, ap);
    va_end(ap);
    if (!pass)
        diag("     got: %llu\n#   expected: %llu", got, expected);
    return pass;
}

int is_str(const char *got, const char *expected, const char *fmt, ...)
{
    int same = got && expected ? strcmp(got, expected) == 0 : got == expected;
    va_list ap;
    va_start(ap, fmt);
    int pass = vresult(same, fmt, ap);
    va_end(ap);
    if (!pass)
        diag("     got: '%s'\n#   expected: '%s'", got ? got : "(null)", expected ? expected : "(null)");
    return pass;
}

void skip(int count, const char *fmt, ...)
{
    char reason[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&tap_lock);
    for (int i = 0; i < count; i++)
        printf("ok %d # skip %s\n", ++run, reason);
    fflush(stdout);
    pthread_mutex_unlock(&tap_lock);
}

void diag(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fflush(stdout);
    vline(stderr, "# ", fmt, ap);
    va_end(ap);
}

void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stdout, "# ", fmt, ap);
    va_end(ap);
}

void bail_out(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vline(stdout, "Bail out! ", fmt, ap);
    va_end(ap);
    exit(255);
}

int exit_status(void)
{
    pthread_mutex_lock(&tap_lock);
    int missed = planned >= 0 && planned != run;
    if (missed)
        diag("planned %d tests but ran %d", planned, run);
    int status = failed ? (failed < 254 ? failed : 254) : missed ? 255 : 0;
    pthread_mutex_unlock(&tap_lock);
    return status;
}

int tap_run_in_child(void (*fn)(void *arg), void *arg)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0)
        bail_out("fork failed");
    if (pid == 0) {
        /* Sanitizers catch SIGSEGV and exit instead; the caller wants the plain signal. */
        signal(SIGSEGV, SIG_DFL);
        signal(SIGBUS, SIG_DFL);
        fn(arg);
        _exit(0);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0)
        bail_out("waitpid failed");
    if (WIFSIGNALED(status))
        return WTERMSIG(status);
    return -(WEXITSTATUS(status) + 1);
}
