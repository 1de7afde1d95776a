/* Caffe's SGD solver: momentum, L2 weight decay and the learning-rate policies. */
#ifndef TRAINER_SOLVER_H
#define TRAINER_SOLVER_H

#include "trainer/net.h"

typedef enum LrPolicy { LR_FIXED, LR_STEP, LR_INV, LR_MULTISTEP } LrPolicy;

#define SOLVER_MAX_STEPVALUES 16

typedef struct SolverConfig {
    float base_lr, momentum, weight_decay;
    LrPolicy policy;
    float gamma, power;                       /* step, inv, multistep */
    long stepsize;                            /* step */
    long stepvalues[SOLVER_MAX_STEPVALUES];   /* multistep, increasing */
    int nstepvalues;
    long max_iter;
    long test_interval, test_iter, display, snapshot; /* 0 turns test, display or snapshot off */
} SolverConfig;

/* The learning rate at iteration iter:
 *   fixed      base_lr
 *   step       base_lr * gamma ^ floor(iter / stepsize)
 *   inv        base_lr * (1 + gamma * iter) ^ -power
 *   multistep  base_lr * gamma ^ (number of stepvalues <= iter) */
float solver_rate(const SolverConfig *s, long iter);

/* One update of every parameter from its gradient (lr and decay scaled by the param's mults). */
void solver_update(Net *net, const SolverConfig *s, long iter);

const char *lr_policy_name(LrPolicy policy);
int lr_policy_parse(const char *name, LrPolicy *policy); /* 0, or -1 when unknown */

#endif
