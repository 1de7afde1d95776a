/* A trainer built without MPI: one rank, and every collective is the identity. */
#include "trainer/ranks.h"

#include <stdio.h>

int ranks_start(int *argc, char ***argv, char *err, size_t errlen)
{
    (void)argc;
    (void)argv;
    int announced = ranks_announced();
    if (announced <= 1) return 0;
    snprintf(err, errlen, "started as one of %d ranks, but this trainer was built without MPI "
                          "(install Open MPI, libopenmpi-dev, and rebuild)", announced);
    return -1;
}

int ranks_rank(void) { return 0; }
int ranks_count(void) { return 1; }
int ranks_local_rank(void) { return 0; }
int ranks_local_count(void) { return 1; }

int ranks_node_agrees(const char *text)
{
    (void)text;
    return 1;
}

void ranks_broadcast(void *buf, size_t bytes)
{
    (void)buf;
    (void)bytes;
}

void ranks_sum_floats(float *buf, size_t count)
{
    (void)buf;
    (void)count;
}

void ranks_sum_doubles(double *buf, size_t count)
{
    (void)buf;
    (void)count;
}

int ranks_built_with_mpi(void) { return 0; }

int ranks_finish(int status)
{
    return status;
}

void ranks_fail(int status)
{
    exit(status);
}
