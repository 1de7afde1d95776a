#include "preload/output_file.h"
#include "preload/quote.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int lms_launcher_rank(void)
{
    static const char *const variables[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID" };
    for (size_t i = 0; i < sizeof variables / sizeof *variables; i++) {
        const char *rank = getenv(variables[i]);
        if (rank && *rank) return atoi(rank);
    }
    return -1;
}

/* The path with "%p" replaced by the pid, "%r" by the rank (by nothing without one). */
static int expand_path(const char *path, char *expanded, size_t len)
{
    size_t n = 0;
    char rank[16] = "";
    if (lms_launcher_rank() >= 0) snprintf(rank, sizeof rank, "%d", lms_launcher_rank());
    for (const char *s = path; *s; s++) {
        char piece[24];
        if (s[0] == '%' && s[1] == 'p') { snprintf(piece, sizeof piece, "%d", (int)getpid()); s++; }
        else if (s[0] == '%' && s[1] == 'r') { snprintf(piece, sizeof piece, "%s", rank); s++; }
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
    char expanded[4096], quoted[LMS_QUOTE_SIZE], quoted_expanded[LMS_QUOTE_SIZE];
    if (expand_path(path, expanded, sizeof expanded) != 0) {
        snprintf(err, err_len, "%s=%s: path too long", variable, lms_quote(path, quoted));
        return -1;
    }
    int fd = open(expanded, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) {
        int error = errno;
        snprintf(err, err_len, "%s=%s: cannot create %s: %s%s", variable, lms_quote(path, quoted),
                 lms_quote(expanded, quoted_expanded), strerror(error),
                 error == EEXIST ? " (an existing file is never overwritten: remove it, or use %p, or %r for ranks)" : "");
    }
    return fd;
}
