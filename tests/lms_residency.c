/* Evict and restore through the simulator: data intact at a stable pointer, the threshold,
 * whole-allocation writes, the host-mapped fallback for missed pointers, unmap ordering
 * against queued work, and fault injection at each driver call liblms makes. */
#include "tests/lms_testlib.h"

#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define BUFFERS 24           /* 24 x 2 MiB handles on a 16 MiB device: 3x oversubscribed */
#define BUFFER_BYTES MIB

static CUdeviceptr buf[BUFFERS];
static unsigned char host[BUFFER_BYTES];

/* A kernel that finds its buffer through a host struct: the launch hook never sees it. */
typedef struct hidden_ref {
    CUdeviceptr ptr;
    size_t bytes;
    uint64_t sum;
} hidden_ref;

static void sum_hidden(const sim_launch *l)
{
    hidden_ref *ref = *(hidden_ref **)l->params[0];
    const unsigned char *p = (const unsigned char *)(uintptr_t)ref->ptr;
    uint64_t sum = 0;
    for (size_t i = 0; i < ref->bytes; i++)
        sum += p[i];
    ref->sum = sum;
}

/* Sleeps, then sums its buffer into *out: its last use is long after its launch returns. */
static void slow_sum(const sim_launch *l)
{
    usleep(100 * 1000);
    const unsigned char *p = *(const unsigned char **)l->params[0];
    size_t n = *(size_t *)l->params[1];
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += p[i];
    **(uint64_t **)l->params[2] = sum;
}

static uint64_t pattern_sum(unsigned seed)
{
    lms_test_pattern(host, BUFFER_BYTES, seed);
    uint64_t sum = 0;
    for (size_t i = 0; i < BUFFER_BYTES; i++)
        sum += host[i];
    return sum;
}

static void write_all(void)
{
    for (unsigned i = 0; i < BUFFERS; i++) {
        lms_test_pattern(host, BUFFER_BYTES, i);
        CU_OK(cuMemcpyHtoD(buf[i], host, BUFFER_BYTES));
    }
}

/* How many buffers read back as pattern(i) + delta. */
static unsigned count_intact(int delta)
{
    unsigned intact = 0;
    static unsigned char want[BUFFER_BYTES];
    for (unsigned i = 0; i < BUFFERS; i++) {
        lms_test_pattern(want, BUFFER_BYTES, i);
        for (size_t k = 0; k < BUFFER_BYTES; k++)
            want[k] = (unsigned char)(want[k] + delta);
        if (cuMemcpyDtoH(host, buf[i], BUFFER_BYTES) == CUDA_SUCCESS &&
            memcmp(host, want, BUFFER_BYTES) == 0)
            intact++;
    }
    return intact;
}

/* The child of the fallback test: reads an evicted buffer through a pointer liblms never
 * saw. Exits 0 when the sum is right. */
static int missed_pointer_child(void)
{
    lms_test_context();
    size_t sizes[] = { sizeof(void *) };
    CUkernel k = sim_register_kernel("sum_hidden", sum_hidden, 1, sizes);
    for (unsigned i = 0; i < BUFFERS; i++)
        CU_OK(cuMemAlloc(&buf[i], BUFFER_BYTES));
    write_all(); /* buffer 0, written first, is evicted by the end */
    hidden_ref ref = { buf[0], BUFFER_BYTES, 0 };
    hidden_ref *refp = &ref;
    void *params[] = { &refp };
    CU_OK(cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    CU_OK(cuCtxSynchronize());
    return ref.sum == pattern_sum(0) ? 0 : 1;
}

/* Clears the fault set for the nth call of point after `calls` of them; returns whether that
 * call was made, and so failed. */
static int clear_fault(const char *point, unsigned long calls, unsigned long nth)
{
    int reached = sim_calls(point) - calls >= nth;
    sim_clear_faults();
    return reached;
}

/* Fails the nth call of `point` from now while buffers move and one is allocated and freed,
 * then clears the fault; true when the fault was reached and no byte was lost (the results
 * are on stderr otherwise). */
static int survives_fault(const char *point, unsigned long nth)
{
    write_all();
    unsigned long calls = sim_calls(point);
    sim_fail_call(point, nth, CUDA_ERROR_UNKNOWN);
    CUresult results[5];
    lms_test_pattern(host, BUFFER_BYTES, 0);
    results[0] = cuMemcpyHtoD(buf[0], host, BUFFER_BYTES);
    results[1] = lms_test_launch(lms_test_add_kernel(), NULL, buf[1], BUFFER_BYTES, 0);
    results[2] = cuMemcpyDtoH(host, buf[2], BUFFER_BYTES);
    /* Of another size than the last time: no spare handle fits it, one that does not goes. */
    static unsigned turn;
    CUdeviceptr extra = 0;
    results[3] = cuMemAlloc(&extra, (turn++ % 2 ? 5 : 3) * MIB);
    results[4] = results[3] == CUDA_SUCCESS ? cuMemFree(extra) : CUDA_SUCCESS;
    int reached = clear_fault(point, calls, nth);
    CU_OK(cuCtxSynchronize());
    unsigned intact = count_intact(0);
    if (intact != BUFFERS || !reached)
        fprintf(stderr, "fault at %s call %lu (%s): results %d %d %d %d %d, %u of %u buffers intact\n", point, nth,
                reached ? "reached" : "never reached", results[0], results[1], results[2], results[3], results[4],
                intact, BUFFERS);
    return intact == BUFFERS && reached;
}

/* The child of the event faults test: the first calls of cuEventQuery and cuEventSynchronize
 * fail, one at a time. Exits 0 when no byte was lost. */
static int event_faults_child(void)
{
    lms_test_context();
    for (unsigned i = 0; i < BUFFERS; i++)
        CU_OK(cuMemAlloc(&buf[i], BUFFER_BYTES));
    int lost = 0;
    for (unsigned long nth = 1; nth <= 3; nth++)
        lost += !survives_fault("cuEventQuery", nth) + !survives_fault("cuEventSynchronize", nth);
    return lost ? 1 : 0;
}

/* The child of the release fault test, on a device of three 2 MiB handles: the first release
 * of a device handle fails once. Exits 0 when at most one call failed and every buffer holds
 * what it should: the handle that was not released is not lost to liblms. */
static int release_fault_child(void)
{
    lms_test_context();
    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    enum { N = 5 };
    for (unsigned i = 0; i < N; i++) {
        CU_OK(cuMemAlloc(&buf[i], BUFFER_BYTES));
        lms_test_pattern(host, BUFFER_BYTES, i);
        CU_OK(cuMemcpyHtoD(buf[i], host, BUFFER_BYTES));
    }
    /* The device is full of resident buffers and spare handles: a small allocation releases
     * a spare, and that fails. */
    sim_fail_call("cuMemRelease", 1, CUDA_ERROR_UNKNOWN);
    CUdeviceptr small;
    int failures = cuMemAlloc(&small, 4096) != CUDA_SUCCESS;
    if (failures)
        CU_OK(cuMemAlloc(&small, 4096));
    if (sim_calls("cuMemRelease") == 0)
        bail_out("no device handle was released");
    for (unsigned round = 0; round < 3; round++)
        for (unsigned i = 0; i < N; i++) {
            lms_test_pattern(host, BUFFER_BYTES, i);
            failures += cuMemcpyHtoD(buf[i], host, BUFFER_BYTES) != CUDA_SUCCESS;
            failures += cuMemcpyDtoDAsync(buf[(i + 1) % N], buf[i], BUFFER_BYTES, stream) != CUDA_SUCCESS;
            failures += cuStreamSynchronize(stream) != CUDA_SUCCESS;
        }
    for (unsigned i = 0; i < N; i++)
        CU_OK(cuMemFree(buf[i]));
    CU_OK(cuMemFree(small));
    if (failures > 1)
        fprintf(stderr, "%d calls failed after one failed cuMemRelease\n", failures);
    return failures > 1;
}

/* The swap copies are the last point: device to device through host-located VMM, else
 * through pinned memory (the copy out). */
static const char *const fault_points[] = {
    "cuMemCreate", "cuMemMap", "cuMemSetAccess", "cuMemUnmap", "cuMemAddressReserve",
    "cuStreamWaitEvent", "cuEventRecord", "cuEventQuery", "cuEventSynchronize",
    "cuMemRelease", "cuMemAddressFree", "cuMemcpyDtoDAsync_v2",
};
#define FAULT_POINTS (sizeof fault_points / sizeof fault_points[0])

int main(int argc, char **argv)
{
    static const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0",
                                       "LMS_SIM_CAPACITY_MB=16", NULL };
    lms_test_with_env(argv, env);
    if (argc > 1 && strcmp(argv[1], "missed-pointer") == 0)
        return missed_pointer_child();
    if (argc > 1 && strcmp(argv[1], "release-fault") == 0)
        return release_fault_child();
    if (argc > 1 && strcmp(argv[1], "event-faults") == 0)
        return event_faults_child();

    plan(16 + (int)FAULT_POINTS);
    lms_test_context();

    /* Stable pointers, intact data. */
    for (unsigned i = 0; i < BUFFERS; i++)
        CU_OK(cuMemAlloc(&buf[i], BUFFER_BYTES));
    unsigned long unmaps = sim_calls("cuMemUnmap");
    write_all();
    ok(sim_calls("cuMemUnmap") > unmaps, "writing 48 MiB into a 16 MiB device evicts");
    ok(sim_device_used(0) <= 16 * MIB, "device use %zu stays within the 16 MiB soft limit",
       sim_device_used(0));
    is_uint(count_intact(0), BUFFERS, "every buffer reads back intact at its original pointer");
    unsigned long creates = sim_calls("cuMemCreate");
    write_all();
    is_uint(sim_calls("cuMemCreate") - creates, 0,
            "another pass over every buffer creates no handle: device handles and host backing are reused");

    /* Launches restore what they use: CUfunction (add) and CUkernel (fill) handles. */
    for (unsigned i = 0; i < BUFFERS; i++)
        CU_OK(lms_test_launch(lms_test_add_kernel(), NULL, buf[i], BUFFER_BYTES, 3));
    CU_OK(cuCtxSynchronize());
    is_uint(count_intact(3), BUFFERS, "a kernel on each evicted buffer sees and updates its data");
    CU_OK(lms_test_launch(lms_test_fill_kernel(), NULL, buf[0], BUFFER_BYTES, 7));
    CU_OK(cuMemcpyDtoH(host, buf[0], BUFFER_BYTES));
    ok(host[0] == 7 && host[BUFFER_BYTES - 1] == 7, "a CUkernel launch is scanned too");
    write_all();

    /* The threshold: below it a plain allocation, at it a swappable one. */
    unsigned long plain = sim_calls("cuMemAlloc_v2"), reserved = sim_calls("cuMemAddressReserve");
    CUdeviceptr small, large;
    CU_OK(cuMemAlloc(&small, 64 * 1024 - 1));
    ok(sim_calls("cuMemAlloc_v2") == plain + 1 && sim_calls("cuMemAddressReserve") == reserved,
       "LMS_THRESHOLD_KB - 1 byte: a plain allocation");
    plain = sim_calls("cuMemAlloc_v2");
    CU_OK(cuMemAlloc(&large, 64 * 1024));
    ok(sim_calls("cuMemAlloc_v2") == plain && sim_calls("cuMemAddressReserve") > reserved,
       "LMS_THRESHOLD_KB exactly: a swappable allocation (its own address range)");
    CU_OK(cuMemFree(small));
    CU_OK(cuMemFree(large));

    /* A memset of the whole of an evicted buffer needs no restore copy: the only bytes copied
     * are those of the buffer evicted to make room. Buffer 0 is the least recently used. */
    write_all();
    size_t copied = sim_bytes_copied();
    CU_OK(cuMemsetD8(buf[0], 0x5a, BUFFER_BYTES));
    is_uint(sim_bytes_copied() - copied, BUFFER_BYTES,
            "a whole-allocation memset restores nothing (one eviction copied)");
    CU_OK(cuMemcpyDtoH(host, buf[0], BUFFER_BYTES));
    ok(host[0] == 0x5a && host[BUFFER_BYTES - 1] == 0x5a, "and its bytes are the memset's");

    /* A whole-allocation write that the driver refuses leaves the old bytes, not those of the
     * handle the evicted buffer got back. */
    write_all();
    sim_fail_call("cuMemcpyDtoD", 1, CUDA_ERROR_INVALID_VALUE);
    CUresult refused = cuMemcpyDtoD(buf[0], buf[1], BUFFER_BYTES);
    sim_clear_faults();
    ok(refused == CUDA_ERROR_INVALID_VALUE && count_intact(0) == BUFFERS,
       "a failed copy over the whole of an evicted buffer leaves every buffer intact (result %d)", refused);
    write_all();

    /* Unmap never before the last use: the slow kernel still reads buffer 1 when the writes
     * below evict it; the simulator would fault if its mapping went first. */
    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    size_t sizes[] = { sizeof(void *), sizeof(size_t), sizeof(void *) };
    CUkernel slow = sim_register_kernel("slow_sum", slow_sum, 3, sizes);
    CUdeviceptr result;
    CU_OK(cuMemAlloc(&result, sizeof(uint64_t)));
    size_t n = BUFFER_BYTES;
    void *params[] = { &buf[1], &n, &result };
    CU_OK(cuLaunchKernel((CUfunction)slow, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
    for (unsigned i = 2; i < BUFFERS; i++) {
        lms_test_pattern(host, BUFFER_BYTES, i);
        CU_OK(cuMemcpyHtoD(buf[i], host, BUFFER_BYTES));
    }
    CU_OK(cuStreamSynchronize(stream));
    uint64_t sum = 0;
    CU_OK(cuMemcpyDtoH(&sum, result, sizeof sum));
    is_uint(sum, pattern_sum(1), "the queued kernel read buffer 1 intact although it was evicted meanwhile");
    is_uint(count_intact(0), BUFFERS, "and every buffer is still intact");

    /* A pointer the launch hook never saw still reads right data, through host-located
     * memory mapped at the evicted buffer's address; without it the kernel crashes. */
    static const char *const quiet[] = { "LMS_TEST_QUIET=1", NULL };
    int status = lms_test_run_self(argv, "missed-pointer", lms_test_host_vmm() ? NULL : quiet);
    if (lms_test_host_vmm())
        ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "a kernel reads an evicted buffer through a missed pointer (status %#x)", status);
    else
        ok(WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0),
           "a kernel that reads an evicted buffer through a missed pointer crashes or reads wrong data "
           "(status %#x)", status);

    /* Fault injection: each driver call liblms makes fails once while buffers move; the
     * program sees a CUDA error or success, never a crash, and no byte is lost. */
    for (size_t f = 0; f < FAULT_POINTS; f++) {
        const char *point = f + 1 < FAULT_POINTS || lms_test_host_vmm() ? fault_points[f] : "cuMemcpyDtoHAsync_v2";
        ok(survives_fault(point, 1), "fault at %s", point);
    }
    /* Without host VMM nothing hides an unmap before the copy out has completed. */
    status = lms_test_run_self(argv, "event-faults", NULL);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a failed event query or wait is not taken for a completed eviction (status %#x)", status);
    static const char *const small_device[] = { "LMS_SIM_CAPACITY_MB=6", NULL };
    status = lms_test_run_self(argv, "release-fault", small_device);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "a device handle whose release failed once is released later, not lost (status %#x)", status);

    for (unsigned i = 0; i < BUFFERS; i++)
        CU_OK(cuMemFree(buf[i]));
    CU_OK(cuMemFree(result));
    CU_OK(cuStreamDestroy(stream));
    return exit_status();
}
