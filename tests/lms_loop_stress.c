/* Differential stress of the settings for a training loop (LMS_POLICY=lookahead,
 * LMS_PIECE_MB, LMS_MAP_EVICTED=0): a loop of launches, copies in and reads back over
 * allocations of several pieces each, on an oversubscribed device, repeated until the policy
 * has learnt it and prefetches, evicts ahead and restores piece by piece; every so often the
 * loop changes (prefetches then turn out wrong, the policy falls back to LRU and relearns).
 * Every byte read back is checked against a host model. Seeded and reproducible:
 * LMS_STRESS_SEED (default 1), LMS_STRESS_OPS in each backing mode (default 4000; the
 * sanitizer builds default to a quarter). */
#include "tests/lms_testlib.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((size_t)1 << 20)
#define BUFFERS 8          /* 3 to 6 MiB each, in 2 MiB pieces: about 36 MiB on a 16 MiB device */
#define LOOP_OPS 16        /* a loop's length */
#define CHANGE_EVERY 40    /* loops before it changes */
#define SPAN 4096          /* bytes an op touches, at an offset anywhere in its buffer */

typedef enum { LAUNCH, WRITE, READ } op_kind;

typedef struct op {
    op_kind kind;
    unsigned buffer;
    size_t offset;
    int value;
} op;

static CUdeviceptr dev[BUFFERS];
static size_t bytes[BUFFERS];
static unsigned char *model[BUFFERS];
static op loop[LOOP_OPS];

static void new_loop(void)
{
    for (unsigned i = 0; i < LOOP_OPS; i++) {
        unsigned b = (unsigned)lms_test_below(BUFFERS);
        loop[i] = (op){ (op_kind)lms_test_below(3), b, lms_test_below(bytes[b] - SPAN),
                        1 + (int)lms_test_below(200) };
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16",
                                       "LMS_POLICY=lookahead", "LMS_PIECE_MB=2", "LMS_MAP_EVICTED=0", NULL };
    lms_test_with_env_swapping(argv, env);
    unsigned long ops = lms_test_stress_start(4000, 1000);
    plan(2);
    note("%lu operations in loops of %d that change every %d loops, seed %s", ops, LOOP_OPS, CHANGE_EVERY,
         lms_test_stress_seed());
    lms_test_context();
    CUfunction add = lms_test_add_kernel();
    for (unsigned b = 0; b < BUFFERS; b++) {
        bytes[b] = 3 * MIB + lms_test_below(3 * MIB);
        model[b] = malloc(bytes[b]);
        if (!model[b])
            bail_out("out of host memory");
        lms_test_pattern(model[b], bytes[b], b);
        CU_OK(cuMemAlloc(&dev[b], bytes[b]));
        CU_OK(cuMemcpyHtoD(dev[b], model[b], bytes[b]));
    }
    unsigned long mismatches = 0, errors = 0, reads = 0;
    static unsigned char host[SPAN];
    for (unsigned long n = 0; n < ops; n++) {
        if (n % ((unsigned long)LOOP_OPS * CHANGE_EVERY) == 0)
            new_loop();
        const op *o = &loop[n % LOOP_OPS];
        unsigned char *m = model[o->buffer] + o->offset;
        CUdeviceptr p = dev[o->buffer] + o->offset;
        switch (o->kind) {
        case LAUNCH: /* adds value to each byte: a pointer into the allocation holds all of it */
            if (lms_test_launch(add, NULL, p, SPAN, o->value) != CUDA_SUCCESS) {
                errors++;
                break;
            }
            for (size_t i = 0; i < SPAN; i++)
                m[i] = (unsigned char)(m[i] + o->value);
            break;
        case WRITE: /* a range: only the pieces it overlaps */
            for (size_t i = 0; i < SPAN; i++)
                host[i] = (unsigned char)(o->value + i + n);
            if (cuMemcpyHtoD(p, host, SPAN) != CUDA_SUCCESS) {
                errors++;
                break;
            }
            memcpy(m, host, SPAN);
            break;
        case READ:
            reads++;
            if (cuMemcpyDtoH(host, p, SPAN) != CUDA_SUCCESS)
                errors++;
            else
                mismatches += memcmp(host, m, SPAN) != 0;
            break;
        }
    }
    for (unsigned b = 0; b < BUFFERS; b++) { /* every byte, at the end */
        unsigned char *whole = malloc(bytes[b]);
        if (!whole || cuMemcpyDtoH(whole, dev[b], bytes[b]) != CUDA_SUCCESS)
            errors++;
        else
            mismatches += memcmp(whole, model[b], bytes[b]) != 0;
        free(whole);
        CU_OK(cuMemFree(dev[b]));
        free(model[b]);
    }
    ok(errors == 0, "%lu operations: no call failed (%lu did)", ops, errors);
    ok(mismatches == 0, "%lu reads and every buffer at the end match the host model (%lu mismatches)",
       reads, mismatches);
    return exit_status();
}
