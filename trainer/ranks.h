/* Ranks: the processes of one data-parallel training job, one per device, started by mpirun
 * or srun. MPI stays behind this interface (ranks_mpi.c); a trainer built without MPI runs as
 * a single rank (ranks_single.c) and refuses to be one of several.
 *
 * Every call but ranks_rank, ranks_count, ranks_local_*, ranks_built_with_mpi and ranks_fail is
 * collective: every rank makes it, in the same order. */
#ifndef TRAINER_RANKS_H
#define TRAINER_RANKS_H

#include <stddef.h>
#include <stdlib.h>

/* Joins the job when a launcher started the process (its variables are set), else makes the
 * process a job of one rank. Returns 0, or -1 with the reason in err. */
int ranks_start(int *argc, char ***argv, char *err, size_t errlen);
int ranks_rank(void);
int ranks_count(void);
/* This rank's place among the ranks on its node, and their number. */
int ranks_local_rank(void);
int ranks_local_count(void);

/* Whether every rank on this node passes the same text. */
int ranks_node_agrees(const char *text);
/* Copies rank 0's bytes into every rank's buf. */
void ranks_broadcast(void *buf, size_t bytes);
/* Replaces each element by its sum over the ranks. */
void ranks_sum_floats(float *buf, size_t count);
void ranks_sum_doubles(double *buf, size_t count);

/* Whether this trainer can be one of several ranks (it was built with MPI). */
int ranks_built_with_mpi(void);

/* Every rank ends the job with the same status; returns it. */
int ranks_finish(int status);
/* This rank failed on its own: ends the whole job (the others would wait for it forever),
 * with status. */
_Noreturn void ranks_fail(int status);

/* The number of ranks a launcher announces in the environment (Open MPI's mpirun, PMI's
 * srun), 0 when none does; PMIx (srun --mpi=pmix) announces only a rank, counted as 1. */
static inline int ranks_announced(void)
{
    const char *size = getenv("OMPI_COMM_WORLD_SIZE");
    if (!size) size = getenv("PMI_SIZE");
    if (size) return atoi(size);
    return getenv("PMIX_RANK") ? 1 : 0;
}

#endif
