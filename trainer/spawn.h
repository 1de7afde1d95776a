/* Ranks the trainer starts itself: --gpu N,M,... or --gpu all on one node, as Caffe's -gpu
 * flag did. The trainer re-executes itself under Open MPI's mpirun, one rank per listed
 * device, each with --gpu 0 and a view of its own device alone (CUDA_VISIBLE_DEVICES, which
 * spawn_take_device sets in the rank before CUDA starts), as srun --gpus-per-task=1 gives.
 * A --sim rank has a simulated GPU of its own anyway: there the list only counts the ranks.
 *
 * mpirun is started with the trainer's environment, but for LD_PRELOAD, which it passes on to
 * the ranks alone (-x). As root, Open MPI runs only where the user has allowed it
 * (OMPI_ALLOW_RUN_AS_ROOT and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM); its other settings come through
 * OMPI_MCA_* variables. */
#ifndef TRAINER_SPAWN_H
#define TRAINER_SPAWN_H

#include <stddef.h>
#include "trainer/options.h"

/* Where cfg names several devices (a list, or all of the `visible` ones), replaces the process
 * by mpirun running one rank per device with argv; where it names one, makes it cfg->gpu and
 * returns 0. Returns -1 with one line naming --gpu in err when it cannot: a device that is
 * not visible (`visible` < 0: no bound, as on the simulated GPU), no mpirun, a trainer built
 * without MPI. */
int spawn_ranks(Config *cfg, int visible, char **argv, char *err, size_t errlen);
/* In a rank that spawn_ranks started: CUDA shows it its own device alone. Call it before CUDA
 * starts. */
void spawn_take_device(void);

#endif
