/* A small program on the simulator for the output tests (lms_output.py), run with
 * LMS_THRESHOLD_KB=64 LMS_EXCLUDE_MB=0 LMS_SIM_CAPACITY_MB=16.
 *   lms_workload       twelve 1 MiB buffers written, launched on, read back and freed; exits 0
 *                      when every byte read back is right.
 *   lms_workload unscanned
 *                      the same, with the driver refusing to describe the launch's parameters.
 *   lms_workload loop  the same buffers, then LOOPS rounds of a kernel on each in turn: a loop
 *                      for lookahead to learn (with LMS_SIM_CAPACITY_MB=8, four of them fit).
 *   lms_workload burst-loop
 *                      first LOOPS rounds over two of the buffers (a short loop that fits), then
 *                      BURST_LOOPS of the twelve: fewer than the statistics keep.
 *   lms_workload oom   (with LMS_MODE=cap) 1 MiB buffers until out of memory, the failing
 *                      allocation retried OOM_RETRIES times at once and once more after
 *                      OOM_PAUSE_MS; exits 0 when each of those got CUDA_ERROR_OUT_OF_MEMORY. */
#include "tests/lms_testlib.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#define MIB ((size_t)1 << 20)
#define BUFFERS 12
#define LOOPS 40
#define BURST_LOOPS 10
#define OOM_RETRIES 20
#define OOM_PAUSE_MS 2200 /* past liblms's interval between two out-of-memory dumps */

static int run_out_of_memory(void)
{
    CUdeviceptr buf[64];
    unsigned held = 0;
    while (held < 64 && cuMemAlloc(&buf[held], MIB) == CUDA_SUCCESS)
        held++;
    int ooms = 0;
    CUdeviceptr extra;
    for (int i = 0; i < OOM_RETRIES; i++)
        ooms += cuMemAlloc(&extra, MIB) == CUDA_ERROR_OUT_OF_MEMORY;
    nanosleep(&(struct timespec){ OOM_PAUSE_MS / 1000, OOM_PAUSE_MS % 1000 * 1000000L }, NULL);
    ooms += cuMemAlloc(&extra, MIB) == CUDA_ERROR_OUT_OF_MEMORY;
    for (unsigned i = 0; i < held; i++)
        CU_OK(cuMemFree(buf[i]));
    if (held == 64 || ooms != OOM_RETRIES + 1)
        fprintf(stderr, "lms_workload: %u buffers held, %d of %d retries out of memory\n", held, ooms,
                OOM_RETRIES + 1);
    return held < 64 && ooms == OOM_RETRIES + 1 ? 0 : 1;
}

int main(int argc, char **argv)
{
    static unsigned char host[MIB];
    CUdeviceptr buf[BUFFERS];
    lms_test_context();
    if (argc > 1 && strcmp(argv[1], "oom") == 0)
        return run_out_of_memory();
    for (unsigned i = 0; i < BUFFERS; i++) {
        CU_OK(cuMemAlloc(&buf[i], MIB));
        lms_test_pattern(host, MIB, i);
        CU_OK(cuMemcpyHtoD(buf[i], host, MIB));
    }
    CUfunction add = lms_test_add_kernel();
    if (argc > 1 && strcmp(argv[1], "unscanned") == 0) {
        sim_fail_calls("cuKernelGetParamInfo", 1, SIM_FAIL_FOR_GOOD, CUDA_ERROR_UNKNOWN);
        sim_fail_calls("cuFuncGetParamInfo", 1, SIM_FAIL_FOR_GOOD, CUDA_ERROR_UNKNOWN);
    }
    CU_OK(lms_test_launch(add, NULL, buf[0], MIB, 0));
    sim_clear_faults();
    int burst = argc > 1 && strcmp(argv[1], "burst-loop") == 0, loop = argc > 1 && strcmp(argv[1], "loop") == 0;
    for (int round = 0; burst && round < LOOPS; round++)
        for (unsigned i = 0; i < 2; i++)
            CU_OK(lms_test_launch(add, NULL, buf[i], MIB, 0));
    for (int round = 0; (loop || burst) && round < (burst ? BURST_LOOPS : LOOPS); round++)
        for (unsigned i = 0; i < BUFFERS; i++)
            CU_OK(lms_test_launch(add, NULL, buf[i], MIB, 0));
    int bad = 0;
    for (unsigned i = 0; i < BUFFERS; i++) {
        CU_OK(cuMemcpyDtoH(host, buf[i], MIB));
        bad += !lms_test_pattern_ok(host, MIB, i);
    }
    for (unsigned i = 0; i < BUFFERS; i++)
        CU_OK(cuMemFree(buf[i]));
    if (bad)
        fprintf(stderr, "lms_workload: %d buffers read back wrong\n", bad);
    return bad ? 1 : 0;
}
