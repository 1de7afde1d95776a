#include "preload/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void lms_log(int level, int device, const char *fmt, ...)
{
    if ((uint64_t)level > lms_opt.LOG_LEVEL.value)
        return;
    char line[512];
    int len = device < 0 ? snprintf(line, sizeof line, "[LMS] ")
                         : snprintf(line, sizeof line, "[LMS:%d] ", device);
    va_list ap;
    va_start(ap, fmt);
    int body = vsnprintf(line + len, sizeof line - (size_t)len - 1, fmt, ap);
    va_end(ap);
    len += body < 0 ? 0 : body;
    if ((size_t)len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    for (ssize_t done = 0, n; done < len; done += n)
        if ((n = write(STDERR_FILENO, line + done, (size_t)(len - done))) <= 0)
            break;
}
