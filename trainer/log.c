#include "trainer/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static int log_rank;

void log_info(const char *fmt, ...)
{
    if (log_rank) return;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    localtime_r(&tv.tv_sec, &tm);
    char line[1024];
    int n = snprintf(line, sizeof line, "I%02d%02d %02d:%02d:%02d.%06ld trainer] ", tm.tm_mon + 1, tm.tm_mday,
                     tm.tm_hour, tm.tm_min, tm.tm_sec, (long)tv.tv_usec);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

/* stderr of a rank other than 0: every line starts with the rank. */
typedef struct RankStream {
    char prefix[32];
    int line_start;
} RankStream;

static void write_all(const char *buf, size_t size)
{
    while (size) {
        ssize_t n = write(STDERR_FILENO, buf, size);
        if (n <= 0) return;
        buf += n;
        size -= (size_t)n;
    }
}

/* The prefix and its line go in one write: mpirun copies each rank's stderr as it reads it,
 * and would put another rank's line between two writes. */
static void write_prefixed(const char *prefix, const char *buf, size_t size)
{
    size_t prefix_size = strlen(prefix);
    struct iovec parts[2] = {{(void *)prefix, prefix_size}, {(void *)buf, size}};
    ssize_t n = writev(STDERR_FILENO, parts, 2);
    if (n < 0) return;
    size_t written = (size_t)n;
    /* A short write (a signal, a full pipe): the rest as it goes. */
    if (written < prefix_size) {
        write_all(prefix + written, prefix_size - written);
        written = prefix_size;
    }
    write_all(buf + (written - prefix_size), size - (written - prefix_size));
}

static ssize_t rank_stream_write(void *cookie, const char *buf, size_t size)
{
    RankStream *s = cookie;
    for (size_t at = 0; at < size;) {
        const char *end = memchr(buf + at, '\n', size - at);
        size_t n = end ? (size_t)(end - (buf + at)) + 1 : size - at;
        write_prefixed(s->line_start ? s->prefix : "", buf + at, n);
        s->line_start = end != NULL;
        at += n;
    }
    return (ssize_t)size;
}

void log_set_rank(int rank)
{
    static RankStream stream = {.line_start = 1};
    log_rank = rank;
    if (!rank) return;
    snprintf(stream.prefix, sizeof stream.prefix, "rank %d: ", rank);
    FILE *prefixed = fopencookie(&stream, "w", (cookie_io_functions_t){.write = rank_stream_write});
    if (!prefixed) return; /* unprefixed, then: still on stderr */
    setvbuf(prefixed, NULL, _IOLBF, 0);
    stderr = prefixed;
}
