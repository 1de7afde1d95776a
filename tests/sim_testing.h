/* Shared set-up of the simulator's own tests (tests/sim_*.c). */
#ifndef LMS_TESTS_SIM_TESTING_H
#define LMS_TESTS_SIM_TESTING_H

#include "sim/calibration.h"
#include "sim/sim.h"
#include "sim/sim_module.h"
#include "tests/tap.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Stops the test with the failing call's text, file and line. */
#define CHECK_CU(call)                                                                       \
    do {                                                                                     \
        CUresult check_result_ = (call);                                                     \
        if (check_result_ != CUDA_SUCCESS)                                                   \
            bail_out("%s:%d: %s returned %d", __FILE__, __LINE__, #call, (int)check_result_); \
    } while (0)

/* cuInit with a device of `capacity` bytes, its primary context current on this thread. */
static inline CUcontext sim_setup(size_t capacity)
{
    sim_set_capacity(0, capacity);
    CHECK_CU(cuInit(0));
    CUcontext ctx;
    CHECK_CU(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK_CU(cuCtxSetCurrent(ctx));
    return ctx;
}

/* Whether a line of the file (a LMS_SIM_LOG) contains word; false when it cannot be read. */
static inline bool file_mentions(const char *path, const char *word)
{
    FILE *f = path ? fopen(path, "r") : NULL;
    char line[512];
    bool found = false;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, word) != NULL;
    if (f)
        fclose(f);
    return found;
}

static inline void sleep_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

#endif
