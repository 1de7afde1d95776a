#include "trainer/solver.h"

#include <math.h>
#include <string.h>

static const char *const policy_names[] = {
    [LR_FIXED] = "fixed", [LR_STEP] = "step", [LR_INV] = "inv", [LR_MULTISTEP] = "multistep"};

const char *lr_policy_name(LrPolicy policy)
{
    return policy_names[policy];
}

int lr_policy_parse(const char *name, LrPolicy *policy)
{
    for (int i = 0; i < (int)(sizeof policy_names / sizeof *policy_names); i++)
        if (!strcmp(name, policy_names[i])) {
            *policy = (LrPolicy)i;
            return 0;
        }
    return -1;
}

float solver_rate(const SolverConfig *s, long iter)
{
    switch (s->policy) {
    case LR_FIXED: return s->base_lr;
    case LR_STEP: return s->base_lr * powf(s->gamma, (float)(iter / s->stepsize));
    case LR_INV: return s->base_lr * powf(1.0f + s->gamma * (float)iter, -s->power);
    case LR_MULTISTEP: {
        int passed = 0;
        while (passed < s->nstepvalues && s->stepvalues[passed] <= iter) passed++;
        return s->base_lr * powf(s->gamma, (float)passed);
    }
    }
    return s->base_lr;
}

void solver_update(Net *net, const SolverConfig *s, long iter)
{
    float rate = solver_rate(s, iter);
    NET_FOR_EACH_PARAM(net, l, p)
        net->be->sgd_update(p, rate * p->lr_mult, s->momentum, s->weight_decay * p->decay_mult);
}
