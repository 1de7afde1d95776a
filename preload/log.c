#include "preload/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

static void write_line(const char *prefix, const char *fmt, va_list ap)
{
    char line[1024];
    int len = snprintf(line, sizeof line, "%s", prefix);
    int body = vsnprintf(line + len, sizeof line - (size_t)len - 1, fmt, ap);
    len += body < 0 ? 0 : body;
    if ((size_t)len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    for (ssize_t done = 0, n; done < len; done += n)
        if ((n = write(STDERR_FILENO, line + done, (size_t)(len - done))) <= 0)
            break;
}

void lms_log(int level, int device, const char *fmt, ...)
{
    if ((uint64_t)level > lms_opt.LOG_LEVEL.value)
        return;
    char prefix[24];
    if (device < 0) snprintf(prefix, sizeof prefix, "[LMS] ");
    else snprintf(prefix, sizeof prefix, "[LMS:%d] ", device);
    va_list ap;
    va_start(ap, fmt);
    write_line(prefix, fmt, ap);
    va_end(ap);
}

/* gcc's --coverage runtime (libgcov), which `make coverage` links in (-u __gcov_dump): its
 * counts are written at exit, which _exit skips. */
extern void __gcov_dump(void) __attribute__((weak));

void lms_exit_bad_input(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    write_line("liblms: ", fmt, ap);
    va_end(ap);
    if (__gcov_dump)
        __gcov_dump();
    _exit(2);
}
