#include "preload/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The path with "%p" replaced by the pid. */
static int expand_path(const char *path, char *expanded, size_t len)
{
    size_t n = 0;
    for (const char *s = path; *s; s++) {
        char piece[24];
        if (s[0] == '%' && s[1] == 'p') { snprintf(piece, sizeof piece, "%d", (int)getpid()); s++; }
        else { piece[0] = *s; piece[1] = '\0'; }
        size_t piece_len = strlen(piece);
        if (n + piece_len >= len) return -1;
        memcpy(expanded + n, piece, piece_len);
        n += piece_len;
    }
    expanded[n] = '\0';
    return 0;
}

int lms_output_file_create(const char *variable, const char *path, mode_t mode, char *err, size_t err_len)
{
    char expanded[4096];
    if (expand_path(path, expanded, sizeof expanded) != 0) {
        snprintf(err, err_len, "%s=%s: path too long", variable, path);
        return -1;
    }
    int fd = open(expanded, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0)
        snprintf(err, err_len, "%s=%s: cannot create %s: %s%s", variable, path, expanded, strerror(errno),
                 errno == EEXIST ? " (an existing file is never overwritten: remove it or use %p)" : "");
    return fd;
}
