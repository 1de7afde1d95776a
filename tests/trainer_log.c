/* The log of a rank other than 0 (trainer/log.h): each line it writes to stderr reaches the
 * launcher prefixed, as one write. mpirun reads every rank's stderr and copies what it reads
 * to its own, so a prefix written apart from its line could come out glued to another rank's
 * line. stderr is a packet socket here, so that each write arrives as one packet. */
#include "tests/tap.h"
#include "trainer/log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* The packets written to the socket since the last call, joined by '|'. */
static void drain(int fd, char *out, size_t size)
{
    out[0] = '\0';
    char packet[4096];
    ssize_t n;
    while ((n = recv(fd, packet, sizeof packet - 1, MSG_DONTWAIT)) > 0) {
        packet[n] = '\0';
        if (out[0]) strncat(out, "|", size - strlen(out) - 1);
        strncat(out, packet, size - strlen(out) - 1);
    }
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) bail_out("recv: %s", strerror(errno));
}

int main(void)
{
    plan(4);
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair)) bail_out("socketpair: %s", strerror(errno));
    int saved_fd = dup(STDERR_FILENO);
    FILE *saved_stderr = stderr;
    if (saved_fd < 0 || dup2(pair[0], STDERR_FILENO) < 0) bail_out("dup2: %s", strerror(errno));
    log_set_rank(3);

    char got[4][512];
    fprintf(stderr, "lms-trainer: error: %s: %s\n", "lenet", "out of simulated GPU memory");
    drain(pair[1], got[0], sizeof got[0]);
    fprintf(stderr, "first\nsecond\n");
    drain(pair[1], got[1], sizeof got[1]);
    fprintf(stderr, "a line in ");
    fprintf(stderr, "two calls\n");
    drain(pair[1], got[2], sizeof got[2]);
    log_info("rank 0 alone logs %d", 0);
    drain(pair[1], got[3], sizeof got[3]);

    stderr = saved_stderr;
    dup2(saved_fd, STDERR_FILENO);
    is_str(got[0], "rank 3: lms-trainer: error: lenet: out of simulated GPU memory\n",
           "a line and its prefix: one write");
    is_str(got[1], "rank 3: first\n|rank 3: second\n", "two lines in one call: a write each, each prefixed");
    is_str(got[2], "rank 3: a line in two calls\n", "a line written in two calls: one write");
    is_str(got[3], "", "log_info's lines are dropped");
    return exit_status();
}
