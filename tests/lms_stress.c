/* Randomized differential stress: alloc, free, write, launch, memset and read, with sizes
 * around the threshold, on an oversubscribed device, checked byte for byte against a plain
 * host model. Seeded and reproducible: LMS_STRESS_SEED (default 1), LMS_STRESS_OPS in each
 * backing mode (default 5 * 10^5, 10^6 in all; the sanitizer builds default to a tenth). */
#include "tests/lms_testlib.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 16
#define MAX_BYTES 6144   /* threshold 4 KiB: about a third of the allocations are swappable */

typedef struct slot {
    CUdeviceptr ptr;     /* 0: free slot */
    size_t bytes;
    unsigned char model[MAX_BYTES];
} slot;

static slot slots[SLOTS];

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const env[] = { "LMS_THRESHOLD_KB=4", "LMS_EXCLUDE_MB=0",
                                       "LMS_SIM_CAPACITY_MB=16", NULL };
    lms_test_with_env_swapping(argv, env);
    unsigned long ops = lms_test_stress_start(500000, 50000);
    plan(2);
    note("%lu operations, seed %s", ops, lms_test_stress_seed());
    lms_test_context();
    CUfunction add = lms_test_add_kernel();
    unsigned long mismatches = 0, errors = 0, reads = 0;
    static unsigned char buf[MAX_BYTES];

    for (unsigned long op = 0; op < ops; op++) {
        slot *s = &slots[lms_test_below(SLOTS)];
        unsigned kind = (unsigned)lms_test_below(100);
        if (!s->ptr) {
            s->bytes = 1 + lms_test_below(MAX_BYTES);
            if (cuMemAlloc(&s->ptr, s->bytes) != CUDA_SUCCESS) {
                errors++;
                s->ptr = 0;
                continue;
            }
            memset(s->model, 0, s->bytes);
            errors += cuMemsetD8(s->ptr, 0, s->bytes) != CUDA_SUCCESS;
            continue;
        }
        size_t off = lms_test_below(s->bytes), len = 1 + lms_test_below(s->bytes - off);
        CUresult r = CUDA_SUCCESS;
        if (kind < 5) {                       /* free */
            r = cuMemFree(s->ptr);
            s->ptr = 0;
        } else if (kind < 30) {               /* write */
            for (size_t i = 0; i < len; i++)
                buf[i] = (unsigned char)lms_test_random();
            memcpy(s->model + off, buf, len);
            r = cuMemcpyHtoD(s->ptr + off, buf, len);
        } else if (kind < 55) {               /* launch */
            int delta = (int)lms_test_below(255) + 1;
            for (size_t i = 0; i < len; i++)
                s->model[off + i] = (unsigned char)(s->model[off + i] + delta);
            r = lms_test_launch(add, NULL, s->ptr + off, len, delta);
        } else if (kind < 65) {               /* memset */
            unsigned char v = (unsigned char)lms_test_random();
            memset(s->model + off, v, len);
            r = cuMemsetD8(s->ptr + off, v, len);
        } else {                              /* read */
            r = cuMemcpyDtoH(buf, s->ptr + off, len);
            reads++;
            if (r == CUDA_SUCCESS && memcmp(buf, s->model + off, len) != 0 && mismatches++ < 5)
                diag("op %lu: read of %zu bytes at +%zu of a %zu-byte allocation differs", op, len,
                     off, s->bytes);
        }
        errors += r != CUDA_SUCCESS;
    }
    for (int i = 0; i < SLOTS; i++)
        if (slots[i].ptr)
            errors += cuMemFree(slots[i].ptr) != CUDA_SUCCESS;
    is_uint(mismatches, 0, "%lu reads match the host model", reads);
    is_uint(errors, 0, "no driver call failed");
    return exit_status();
}
