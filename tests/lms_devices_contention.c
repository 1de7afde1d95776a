/* Per-device locks: a thread that waits inside liblms for an eviction on device 0 (its copy
 * out waits for a kernel that runs until the test opens a gate) does not stop another
 * thread's allocation and launch on device 1, whether the waiting call is on device 0 alone
 * or also touches device 1 (a copy between the two). With one lock for every device the
 * second thread waits for the gate, which only opens once it has returned: a watchdog fails
 * the case instead of letting it hang. */
#include "tests/lms_testlib.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define WATCHDOG_S 10

static atomic_int gate_open;
static CUcontext ctx0, ctx1;
static CUdeviceptr source_on_1, filled_on_1; /* the waiter's and the worker's */

/* gate(ptr): runs until the test opens the gate, then sets *ptr to 1. */
static void gate_fn(const sim_launch *launch)
{
    while (!atomic_load(&gate_open))
        usleep(1000);
    **(unsigned char **)launch->params[0] = 1;
}

static void watchdog(int signal_number)
{
    (void)signal_number;
    static const char message[] = "a launch on device 1 waited while another thread waited for an "
                                  "eviction on device 0: the watchdog stopped the case\n";
    ssize_t ignored = write(STDERR_FILENO, message, sizeof message - 1);
    (void)ignored;
    _exit(1);
}

/* Both devices' contexts, and two buffers of 1 MiB of zeros on device 1. */
static void two_devices(void)
{
    ctx0 = lms_test_context();
    CUdevice second;
    CU_OK(cuDeviceGet(&second, 1));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx1, second));
    CU_OK(cuCtxSetCurrent(ctx1));
    CU_OK(cuMemAlloc(&source_on_1, MIB));
    CU_OK(cuMemsetD8(source_on_1, 0, MIB));
    CU_OK(cuMemAlloc(&filled_on_1, MIB));
    CU_OK(cuCtxSetCurrent(ctx0));
}

/* busy's last use on device 0: the gate kernel, which sets its first byte once open. */
static void launch_gate(CUdeviceptr busy)
{
    size_t sizes[] = { sizeof(void *) };
    CUfunction gate = (CUfunction)sim_register_kernel("gate", gate_fn, 1, sizes);
    void *params[] = { &busy };
    CU_OK(cuLaunchKernel(gate, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
}

/* An allocation and a launch on device 1, which has room. */
static void *works_on_device_1(void *unused)
{
    (void)unused;
    CUdeviceptr p;
    CU_OK(cuCtxSetCurrent(ctx1));
    CUresult r = cuMemAlloc(&p, MIB);
    if (r == CUDA_SUCCESS)
        r = lms_test_launch(lms_test_fill_kernel(), NULL, filled_on_1, MIB, 5);
    return (void *)(intptr_t)r;
}

/* Starts `waiter`, which blocks inside liblms until the gate opens, lets device 1 work
 * meanwhile, then opens the gate. Returns 0 when both threads' calls succeeded, device 1's
 * while the gate was still shut, and its kernel ran. */
static int device_1_works_while(void *(*waiter)(void *))
{
    signal(SIGALRM, watchdog);
    alarm(WATCHDOG_S);
    pthread_t waiting, working;
    void *waited, *worked;
    pthread_create(&waiting, NULL, waiter, NULL);
    usleep(200 * 1000); /* for the waiter to reach its wait: the case holds either way */
    pthread_create(&working, NULL, works_on_device_1, NULL);
    pthread_join(working, &worked);
    EXPECT((intptr_t)worked == CUDA_SUCCESS);
    atomic_store(&gate_open, 1);
    pthread_join(waiting, &waited);
    alarm(0);
    EXPECT((intptr_t)waited == CUDA_SUCCESS);
    static unsigned char host[MIB];
    CU_OK(cuCtxSetCurrent(ctx1));
    CU_OK(cuMemcpyDtoH(host, filled_on_1, MIB));
    EXPECT(host[0] == 5 && host[MIB - 1] == 5);
    CU_OK(cuCtxSetCurrent(ctx0));
    return 0;
}

/* Whether busy holds 3 in every byte but its first, which the gate kernel set to 1. */
static int gate_wrote(CUdeviceptr busy, size_t bytes)
{
    static unsigned char host[16 * MIB];
    CU_OK(cuMemcpyDtoH(host, busy, bytes));
    EXPECT(host[0] == 1 && host[1] == 3 && host[bytes - 1] == 3);
    return 0;
}

/* Needs 12 MiB of the 16 MiB of device 0: the 12 MiB the gate kernel uses must go. */
static void *allocates_on_device_0(void *unused)
{
    (void)unused;
    CUdeviceptr p;
    CU_OK(cuCtxSetCurrent(ctx0));
    CUresult r = cuMemAlloc(&p, 12 * MIB);
    if (r == CUDA_SUCCESS)
        r = cuMemFree(p);
    return (void *)(intptr_t)r;
}

static int allocation(void)
{
    two_devices();
    CUdeviceptr busy;
    CU_OK(cuMemAlloc(&busy, 12 * MIB));
    CU_OK(cuMemsetD8(busy, 3, 12 * MIB));
    launch_gate(busy);
    EXPECT(device_1_works_while(allocates_on_device_0) == 0);
    return gate_wrote(busy, 12 * MIB);
}

static CUdeviceptr evicted_on_device_0;

/* A copy from device 1 into an allocation of device 0 that is evicted: its restore needs the
 * room the gate kernel's allocation holds. The call holds both devices. */
static void *copies_between_devices(void *unused)
{
    (void)unused;
    CU_OK(cuCtxSetCurrent(ctx0));
    return (void *)(intptr_t)cuMemcpyDtoD(evicted_on_device_0, source_on_1, MIB);
}

static int copy_between_devices(void)
{
    two_devices();
    CUdeviceptr busy;
    CU_OK(cuMemAlloc(&evicted_on_device_0, 4 * MIB));
    CU_OK(cuMemsetD8(evicted_on_device_0, 4, 4 * MIB));
    CU_OK(cuMemAlloc(&busy, 14 * MIB)); /* evicts the 4 MiB: 18 MiB do not fit in 16 */
    CU_OK(cuMemsetD8(busy, 3, 14 * MIB));
    launch_gate(busy);
    EXPECT(device_1_works_while(copies_between_devices) == 0);
    EXPECT(gate_wrote(busy, 14 * MIB) == 0);
    static unsigned char host[4 * MIB];
    CU_OK(cuMemcpyDtoH(host, evicted_on_device_0, 4 * MIB));
    EXPECT(host[MIB - 1] == 0 && host[MIB] == 4 && host[4 * MIB - 1] == 4);
    return 0;
}

static const lms_test_case cases[] = {
    { "allocation", "device 1 allocates and launches while an allocation on device 0 waits for an eviction",
      allocation, { NULL } },
    { "copy", "and while a copy from device 1 to device 0 waits for one on device 0",
      copy_between_devices, { NULL } },
};
#define CASES (sizeof cases / sizeof cases[0])

int main(int argc, char **argv)
{
    static const char *const common[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=16",
                                          "LMS_SIM_DEVICES=2", NULL };
    return lms_test_main(argc, argv, cases, CASES, common);
}
