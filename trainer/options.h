/* The command line: trainer COMMAND [OPTIONS], parsed with getopt_long from one table. */
#ifndef TRAINER_OPTIONS_H
#define TRAINER_OPTIONS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include "trainer/gpu_backend.h"
#include "trainer/models.h"
#include "trainer/solver.h"

#define CONFIG_MAX_GPUS 64

typedef enum Command { CMD_TRAIN, CMD_TEST, CMD_TIME, CMD_INFO } Command;

typedef struct Config {
    Command command;
    const Model *model;
    ModelOptions model_options;
    int batch;
    SolverConfig solver;      /* the model's defaults, overridden by flags */
    const char *data;         /* "synthetic", "cifar10:DIR", "mnist:DIR" */
    uint64_t seed;
    int cpu, sim, gpu;        /* backend: CPU, simulated GPU, else GPU number gpu */
    /* --gpu N,M,... or all: one rank per device, started by the trainer itself (spawn.h);
     * gpu is the list's first. ngpus is 0 for all, whose count is the node's. */
    int gpus[CONFIG_MAX_GPUS], ngpus;
    GpuOptions gpu_options;
    const char *snapshot_prefix;
    const char *resume;       /* train: snapshot to continue from */
    const char *weights;      /* test: snapshot to evaluate */
    long time_iterations;     /* time: forward-backward passes to average */
    long warmup;              /* --warmup: iterations left out of the rates; -1: run.c's default */
} Config;

/* Parses argv into cfg. Returns 0 to go on, 1 when --help was printed (exit 0), or -1 with a
 * message in err (exit 2). */
int options_parse(int argc, char **argv, Config *cfg, char *err, size_t errlen);
void options_usage(FILE *out);

#endif
