/* A small program on the double for the output tests (lms_output.py): twelve 1 MiB
 * buffers on a 16 MiB device written, launched on, read back and freed. Exits 0 when every
 * byte read back is right. Run with LMS_THRESHOLD_KB=64 CUDADOUBLE_CAPACITY_MB=16. */
#include "tests/lms_testlib.h"

#include <stdio.h>

#define MIB ((size_t)1 << 20)
#define BUFFERS 12

int main(void)
{
    static unsigned char host[MIB];
    CUdeviceptr buf[BUFFERS];
    lms_test_context();
    for (unsigned i = 0; i < BUFFERS; i++) {
        CU_OK(cuMemAlloc(&buf[i], MIB));
        lms_test_pattern(host, MIB, i);
        CU_OK(cuMemcpyHtoD(buf[i], host, MIB));
    }
    CU_OK(lms_test_launch(lms_test_add_kernel(), NULL, buf[0], MIB, 0));
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
