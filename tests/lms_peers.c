/* On two devices that can reach each other, a swappable allocation of one is open to the
 * other, as cuMemAlloc memory is to a peer: at allocation, on host backing while evicted, and
 * after a restore. */
#include "tests/lms_testlib.h"

#define MIB ((size_t)1 << 20)
#define OTHERS 10 /* 20 MiB of handles on a 16 MiB device */

static unsigned long long access_of(CUdeviceptr p, int device)
{
    unsigned long long flags = 0;
    CUmemLocation where = { CU_MEM_LOCATION_TYPE_DEVICE, device };
    return cuMemGetAccess(&flags, &where, p) == CUDA_SUCCESS ? flags : 0;
}

/* Copies buf into dst on a stream of the peer's context: the copy checks that the peer may
 * read buf. */
static int peer_reads(CUcontext peer, CUcontext own, CUdeviceptr buf, CUdeviceptr dst, unsigned char value)
{
    static unsigned char host[MIB];
    CUstream s;
    EXPECT(cuCtxSetCurrent(peer) == CUDA_SUCCESS);
    EXPECT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS);
    EXPECT(cuMemcpyDtoDAsync(dst, buf, MIB, s) == CUDA_SUCCESS);
    EXPECT(cuStreamSynchronize(s) == CUDA_SUCCESS);
    EXPECT(cuStreamDestroy(s) == CUDA_SUCCESS);
    EXPECT(cuMemcpyDtoH(host, dst, MIB) == CUDA_SUCCESS);
    EXPECT(host[0] == value && host[MIB - 1] == value);
    return cuCtxSetCurrent(own) == CUDA_SUCCESS ? 0 : 1;
}

int main(int argc, char **argv)
{
    (void)argc;
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16",
                                       "LMS_SIM_DEVICES=2", NULL };
    lms_test_with_env(argv, env);
    plan(4);
    CUcontext own = lms_test_context(), peer;
    CUdevice second;
    CU_OK(cuDeviceGet(&second, 1));
    CU_OK(cuDevicePrimaryCtxRetain(&peer, second));
    CUdeviceptr dst, buf, other[OTHERS];
    CU_OK(cuCtxSetCurrent(peer));
    CU_OK(cuMemAlloc(&dst, 4096 * 256));
    CU_OK(cuCtxSetCurrent(own));
    CU_OK(cuMemAlloc(&buf, MIB));
    CU_OK(cuMemsetD8(buf, 7, MIB));
    ok(access_of(buf, 1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE && peer_reads(peer, own, buf, dst, 7) == 0,
       "a swappable allocation is open to the peer device");

    for (int i = 0; i < OTHERS; i++) {
        CU_OK(cuMemAlloc(&other[i], MIB));
        CU_OK(cuMemsetD8(other[i], 0, MIB));
    }
    if (lms_test_host_vmm())
        ok(access_of(buf, 1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
           "and so is its host backing, mapped at its address while it is evicted");
    else
        skip(1, "without host VMM nothing is mapped at an evicted allocation's address");
    CU_OK(cuMemsetD8(buf, 9, MIB));
    ok(access_of(buf, 1) == CU_MEM_ACCESS_FLAGS_PROT_READWRITE, "and so is its device memory after a restore");
    ok(peer_reads(peer, own, buf, dst, 9) == 0, "the peer reads it there");
    return exit_status();
}
