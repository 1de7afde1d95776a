/* Ranks over MPI: MPI_COMM_WORLD, and the ranks that share this node's memory. */
#include "trainer/ranks.h"

#include <limits.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>

static int started, rank, count = 1, local_rank, local_count = 1;
static MPI_Comm node; /* the ranks on this node */

int ranks_start(int *argc, char ***argv, char *err, size_t errlen)
{
    /* Not under a launcher: no MPI at all, since Open MPI's singleton start forks a daemon. */
    if (!ranks_announced()) return 0;
    if (MPI_Init(argc, argv) != MPI_SUCCESS) {
        snprintf(err, errlen, "MPI_Init failed: cannot join the job's %d ranks", ranks_announced());
        return -1;
    }
    started = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &count);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &local_rank);
    MPI_Comm_size(node, &local_count);
    return 0;
}

int ranks_rank(void) { return rank; }
int ranks_count(void) { return count; }
int ranks_local_rank(void) { return local_rank; }
int ranks_local_count(void) { return local_count; }

/* Compared by their FNV-1a hashes: the lowest and the highest agree when all do. */
int ranks_node_agrees(const char *text)
{
    if (!started) return 1;
    uint64_t hash = 14695981039346656037u;
    for (const char *c = text; *c; c++) hash = (hash ^ (uint8_t)*c) * 1099511628211u;
    uint64_t low = hash, high = hash;
    MPI_Allreduce(MPI_IN_PLACE, &low, 1, MPI_UINT64_T, MPI_MIN, node);
    MPI_Allreduce(MPI_IN_PLACE, &high, 1, MPI_UINT64_T, MPI_MAX, node);
    return low == high;
}

/* MPI counts elements in an int: larger buffers go in pieces. */
#define PIECE ((size_t)INT_MAX)

void ranks_broadcast(void *buf, size_t bytes)
{
    for (size_t done = 0; started && done < bytes; done += PIECE) {
        size_t n = bytes - done < PIECE ? bytes - done : PIECE;
        MPI_Bcast((uint8_t *)buf + done, (int)n, MPI_BYTE, 0, MPI_COMM_WORLD);
    }
}

static void sum(void *buf, size_t elements, size_t size, MPI_Datatype type)
{
    for (size_t done = 0; started && done < elements; done += PIECE) {
        size_t n = elements - done < PIECE ? elements - done : PIECE;
        MPI_Allreduce(MPI_IN_PLACE, (uint8_t *)buf + done * size, (int)n, type, MPI_SUM, MPI_COMM_WORLD);
    }
}

void ranks_sum_floats(float *buf, size_t n)
{
    sum(buf, n, sizeof *buf, MPI_FLOAT);
}

void ranks_sum_doubles(double *buf, size_t n)
{
    sum(buf, n, sizeof *buf, MPI_DOUBLE);
}

int ranks_built_with_mpi(void) { return 1; }

int ranks_finish(int status)
{
    if (started) {
        MPI_Comm_free(&node);
        MPI_Finalize();
    }
    return status;
}

void ranks_fail(int status)
{
    if (started && count > 1) {
        /* Said here: mpirun's own notice of the abort does not always make it out. */
        fprintf(stderr, "lms-trainer: rank %d of %d failed (status %d): ending the job\n", rank, count, status);
        MPI_Abort(MPI_COMM_WORLD, status);
    }
    exit(ranks_finish(status));
}
