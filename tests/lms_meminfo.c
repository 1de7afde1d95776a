/* In swap mode cuMemGetInfo reports the cache's capacity, device plus host backing; an arena
 * allocator that takes 75 % of it at once (XLA's default) asks for one block larger than the
 * device's soft limit. With host VMM it starts in host memory and works; without, it can
 * never be resident, and fails at once with a log line that says why. */
#include "tests/lms_testlib.h"

#include <string.h>
#include <unistd.h>

/* 75 % of what cuMemGetInfo reports, as XLA asks; alloc's result, the log lines it wrote. */
static CUresult alloc_arena(CUdeviceptr *p, size_t *bytes, const char **log)
{
    size_t free_bytes, total;
    EXPECT(cuMemGetInfo(&free_bytes, &total) == CUDA_SUCCESS);
    EXPECT(total == (size_t)64 << 20); /* the soft limit plus LMS_HOST_LIMIT_MB */
    *bytes = total / 4 * 3;
    alarm(20); /* a hang fails the test */
    lms_test_stderr_begin();
    CUresult r = cuMemAlloc(p, *bytes);
    *log = lms_test_stderr_end();
    alarm(0);
    return r;
}

static int with_host_vmm(void)
{
    CUdeviceptr p;
    size_t bytes;
    const char *log;
    EXPECT(alloc_arena(&p, &bytes, &log) == CUDA_SUCCESS);
    static unsigned char host[4096];
    EXPECT(cuMemsetD8(p, 5, bytes) == CUDA_SUCCESS);
    EXPECT(cuMemcpyDtoH(host, p + bytes - sizeof host, sizeof host) == CUDA_SUCCESS);
    EXPECT(host[0] == 5 && host[sizeof host - 1] == 5);
    return 0;
}

static int without_host_vmm(void)
{
    CUdeviceptr p;
    size_t bytes;
    const char *log;
    EXPECT(alloc_arena(&p, &bytes, &log) == CUDA_ERROR_OUT_OF_MEMORY);
    EXPECT(strstr(log, "soft limit") && strstr(log, "cuMemGetInfo"));
    return 0;
}

static const lms_test_case cases[] = {
    { "host-vmm", "with host VMM, a block of 75 % of cuMemGetInfo's total is usable", with_host_vmm,
      { "LMS_SIM_HOST_VMM=1", NULL } },
    { "no-host-vmm", "without, it fails at once, with a log line naming the soft limit and "
      "cuMemGetInfo", without_host_vmm, { "LMS_SIM_HOST_VMM=0", NULL } },
};
#define CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    static const char *const common[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16",
                                          "LMS_HOST_LIMIT_MB=48", NULL };
    return lms_test_main(argc, argv, cases, CASES, common);
}
