/* Shared by the liblms tests that run on the simulated GPU: they link liblms.so ahead
 * of the simulator's libcuda.so.1, so the program's driver calls reach liblms's wrappers. */
#ifndef LMS_TESTS_LMS_TESTLIB_H
#define LMS_TESTS_LMS_TESTLIB_H

#include "sim/sim.h"
#include "tests/tap.h"

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Every test runs in both backing modes of the simulated GPU, host-located VMM on and off
 * (LMS_SIM_HOST_VMM=1, 0; only the one the environment names when it names one), and each
 * TAP line ends with the mode it ran in: "[host VMM on]", "[host VMM off]".
 *
 * liblms reads its options when it loads: unless this process already runs with them, runs
 * the program (argv[0] must work) again once in each mode with the NULL-terminated
 * "NAME=value" list set, relays its TAP with the mode named, and exits. Unless the list sets
 * LMS_SIM_CONTEXT_RESERVE_MB or LMS_SIM_KERNEL_RESERVE_MB, the simulated driver reserves no
 * device memory for itself: all of it is the program's. A list that names LMS_SIM_HOST_VMM
 * runs in that mode only. */
void lms_test_with_env(char **argv, const char *const *env);
/* The same, and after each mode's run one more test: liblms's own statistics (LMS_STATS=json)
 * count swaps out, and bytes copied back in. */
void lms_test_with_env_swapping(char **argv, const char *const *env);
/* Runs a TAP test program (command[0], found in PATH, with command as its argv) once in each
 * mode, relays its TAP with the mode named, and exits: for the script tests that run programs
 * under liblms. */
void lms_test_in_both_modes(char **command) __attribute__((noreturn));
/* In a run: whether host-located VMM is on. */
int lms_test_host_vmm(void);

/* Runs argv[0] again as a child with extra_arg as argv[1] and the env list set; returns its
 * wait status. Its stdout is discarded; so is its stderr when the list sets LMS_TEST_QUIET. */
int lms_test_run_self(char **argv, const char *extra_arg, const char *const *env);

/* Cases that each run as a child of their own, with their own environment (liblms reads
 * its options when it loads). run is called in the child after lms_test_context; it returns
 * 0 when the case holds, and says why not on stderr (EXPECT does). */
typedef struct lms_test_case {
    const char *name, *what;
    int (*run)(void);
    const char *env[8];
} lms_test_case;
/* The main of a test made of cases: with a case's name as argv[1] (the child), runs that
 * case and returns its result; else one TAP test per case and mode, each run with common's
 * variables and then its own. A case whose list (or common) names LMS_SIM_HOST_VMM runs in
 * that mode only. */
int lms_test_main(int argc, char **argv, const lms_test_case *cases, size_t count, const char *const *common);

/* Inside a case: returns 1 with the file, line and condition unless cond holds. */
#define EXPECT(cond)                                                             \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);  \
            return 1;                                                            \
        }                                                                        \
    } while (0)

/* Bails out unless the call succeeded. */
#define CU_OK(expr) lms_test_check((expr), #expr, __FILE__, __LINE__)
void lms_test_check(CUresult result, const char *what, const char *file, int line);

/* cuInit, the first device's primary context made current. */
CUcontext lms_test_context(void);

/* Kernels on the simulator. fill(ptr, bytes, value): every byte = value;
 * add(ptr, bytes, delta): every byte += delta; both over a uint8_t range. */
CUfunction lms_test_fill_kernel(void);
CUfunction lms_test_add_kernel(void);
/* The same kernel with a fourth parameter, a pointer it does not read: a word a library left
 * in a kernel's parameters (cuDNN's split-K reduction on the H100). */
CUfunction lms_test_add_spare_kernel(void);
CUresult lms_test_launch(CUfunction f, CUstream stream, CUdeviceptr ptr, size_t bytes, int value);
/* Allocates count buffers of bytes each (bailing out on failure), every byte set to value
 * unless value < 0. */
void lms_test_alloc_buffers(CUdeviceptr *bufs, int count, size_t bytes, int value);
/* Ends the capture on stream and instantiates its graph (no flags) into exec. */
CUresult lms_test_end_capture(CUstream stream, CUgraphExec *exec);

/* What the process writes to stderr between the two calls (liblms's log lines) is kept, not
 * shown; lms_test_stderr_end returns it (NUL-terminated, valid until the next begin). */
void lms_test_stderr_begin(void);
const char *lms_test_stderr_end(void);

/* Fills host memory with the pattern seed gives; checks it back. */
void lms_test_pattern(unsigned char *buf, size_t bytes, unsigned seed);

/* The differential stresses' reproducible randomness: seeds it from LMS_STRESS_SEED (default 1)
 * and returns how many operations to make: LMS_STRESS_OPS, else `plain`, or `sanitized` in a
 * sanitizer build (SANITIZE set). */
unsigned long lms_test_stress_start(unsigned long plain, unsigned long sanitized);
/* The seed's text, for the stresses' notes. */
const char *lms_test_stress_seed(void);
/* The next number of the seeded sequence (xorshift64), and one below n from it. */
uint64_t lms_test_random(void);
size_t lms_test_below(size_t n);
int lms_test_pattern_ok(const unsigned char *buf, size_t bytes, unsigned seed);

#endif
