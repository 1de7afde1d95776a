/* A module for the simulated GPU, loaded by tests/sim_modules.c. Built twice: as
 * sim_test_module.so, and with SIM_TEST_MODULE_OTHER as sim_test_module_other.so, whose one
 * kernel has another name and layout, to be loaded into the handles the first one freed.
 *
 * The table is not const: the test opens this object too and breaks the table on purpose,
 * to see the loader reject it. */
#include "sim/sim_module.h"

#include <time.h>

#ifndef SIM_TEST_MODULE_OTHER

/* scale(float *data, float factor, int n): data[i] *= factor for i < n. */
static void scale(const sim_launch *launch)
{
    float *data = *(float **)launch->params[0];
    float factor = *(float *)launch->params[1];
    int n = *(int *)launch->params[2];
    for (int i = 0; i < n; i++)
        data[i] *= factor;
}

static void scale_cost(const sim_launch *launch, sim_kernel_cost *cost)
{
    int n = *(int *)launch->params[2];
    cost->flops = n;
    cost->bytes[0] = 2.0 * sizeof(float) * n;
    cost->written[0] = sizeof(float) * (double)n; /* in place: each value read, then written */
    cost->extent[0] = sizeof(float) * (double)n;
}

/* sum(const float *data, int n, float *out): *out = the sum of data[i] for i < n; reads
 * data, and writes one value. */
static void sum(const sim_launch *launch)
{
    const float *data = *(const float **)launch->params[0];
    int n = *(int *)launch->params[1];
    float total = 0;
    for (int i = 0; i < n; i++)
        total += data[i];
    **(float **)launch->params[2] = total;
}

static void sum_cost(const sim_launch *launch, sim_kernel_cost *cost)
{
    int n = *(int *)launch->params[1];
    cost->flops = n;
    cost->bytes[0] = cost->extent[0] = sizeof(float) * (double)n;
    cost->bytes[2] = cost->written[2] = cost->extent[2] = sizeof(float);
}

/* slow_store(int *out, int value): *out = value, after 200 ms. */
static void slow_store(const sim_launch *launch)
{
    struct timespec t = {0, 200 * 1000 * 1000};
    nanosleep(&t, NULL);
    **(int **)launch->params[0] = *(int *)launch->params[1];
}

static const size_t scale_sizes[] = {sizeof(float *), sizeof(float), sizeof(int)};
static const size_t sum_sizes[] = {sizeof(float *), sizeof(int), sizeof(float *)};
static const size_t slow_store_sizes[] = {sizeof(int *), sizeof(int)};

static const sim_module_kernel kernels[] = {
    {"scale", scale, 3, scale_sizes, scale_cost},
    {"slow_store", slow_store, 2, slow_store_sizes, NULL},
    {"sum", sum, 3, sum_sizes, sum_cost},
};

#else

/* add(int n, double addend, double *data): data[i] += addend for i < n. */
static void add(const sim_launch *launch)
{
    int n = *(int *)launch->params[0];
    double addend = *(double *)launch->params[1];
    double *data = *(double **)launch->params[2];
    for (int i = 0; i < n; i++)
        data[i] += addend;
}

static const size_t add_sizes[] = {sizeof(int), sizeof(double), sizeof(double *)};

static const sim_module_kernel kernels[] = {
    {"add", add, 3, add_sizes, NULL},
};

#endif

sim_module sim_module_table = {SIM_MODULE_ABI, sizeof kernels / sizeof kernels[0], kernels};
