/* A program finds the simulator the way cudart finds the driver: dlopen("libcuda.so.1") on
 * LD_LIBRARY_PATH, dlsym(cuGetProcAddress_v2), then cuGetProcAddress for each entry point.
 * This test is not linked with the simulator; it re-executes itself with LD_LIBRARY_PATH set. */
#include "tests/sim_testing.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

typedef CUresult (*get_proc_address_fn)(const char *, void **, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult *);

static get_proc_address_fn get_proc_address;
static void *libcuda;

/* The entry point cuGetProcAddress gives for (name, version, flags); NULL on failure. */
static void *fetch(const char *name, int version, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    if (get_proc_address(name, &fn, version, flags, &status) != CUDA_SUCCESS ||
        status != CU_GET_PROC_ADDRESS_SUCCESS)
        return NULL;
    return fn;
}

static void check_lookup(const char *name, int version, cuuint64_t flags, const char *expected)
{
    void *fn = fetch(name, version, flags);
    ok(fn && fn == dlsym(libcuda, expected), "cuGetProcAddress(\"%s\", %d%s) gives %s", name,
       version, flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM ? ", per-thread" : "",
       expected);
}

static void check_not_found(const char *name, int version, CUdriverProcAddressQueryResult want,
                            const char *why)
{
    void *fn = &fn;
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult result = get_proc_address(name, &fn, version, 0, &status);
    ok(result == CUDA_ERROR_NOT_FOUND && status == want && fn == NULL,
       "%s: NOT_FOUND, status %d (got %d, status %d)", why, (int)want, (int)result, (int)status);
}

/* Re-runs this program with the simulator's directory on LD_LIBRARY_PATH and a log file. */
static void reexec_with_library_path(char **argv)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
        bail_out("readlink /proc/self/exe failed");
    exe[n] = '\0';
    char dir[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/../sim", dirname(strdup(exe)));
    setenv("LD_LIBRARY_PATH", dir, 1);
    char log[] = "/tmp/sim_loading_log.XXXXXX";
    int fd = mkstemp(log);
    if (fd < 0)
        bail_out("mkstemp failed");
    close(fd);
    setenv("LMS_SIM_LOG", log, 1);
    setenv("SIM_LOADING_CHILD", "1", 1);
    execv(exe, argv);
    bail_out("execv %s failed", exe);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (!getenv("SIM_LOADING_CHILD"))
        reexec_with_library_path(argv);
    plan(20);

    libcuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!libcuda)
        bail_out("dlopen(libcuda.so.1) with LD_LIBRARY_PATH=%s: %s", getenv("LD_LIBRARY_PATH"),
                 dlerror());
    ok(dlsym(libcuda, "sim_calls") != NULL, "dlopen(\"libcuda.so.1\") found the simulator");
    get_proc_address = (get_proc_address_fn)dlsym(libcuda, "cuGetProcAddress_v2");
    if (!get_proc_address)
        bail_out("no cuGetProcAddress_v2 in the simulator");

    check_not_found("", 0, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, "the empty first request");
    check_not_found("cuNoSuchEntryPoint", 13000, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND,
                    "an unknown name");
    check_not_found("cuMemAlloc", 3000, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT,
                    "cuMemAlloc for CUDA 3.0 (the simulator has only _v2)");
    check_lookup("cuGetProcAddress", 13000, 0, "cuGetProcAddress_v2");
    check_lookup("cuGetProcAddress", 11030, 0, "cuGetProcAddress");
    check_lookup("cuMemAlloc", 13000, 0, "cuMemAlloc_v2");
    check_lookup("cuCtxSynchronize", 12080, 0, "cuCtxSynchronize");
    check_lookup("cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2");
    check_lookup("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuMemcpyHtoD_v2");
    check_lookup("cuMemcpyHtoD", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                 "cuMemcpyHtoD_v2_ptds");
    check_lookup("cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                 "cuLaunchKernel_ptsz");
    check_lookup("cuMemMap", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemMap");
    void *fn;
    is_int(get_proc_address("cuMemAlloc", &fn, 13000, 4, NULL), CUDA_ERROR_INVALID_VALUE,
           "unknown flags: INVALID_VALUE");

    /* Use what was fetched. */
    CUresult (*init)(unsigned) = fetch("cuInit", 13000, 0);
    CUresult (*retain)(CUcontext *, CUdevice) = fetch("cuDevicePrimaryCtxRetain", 13000, 0);
    CUresult (*set_current)(CUcontext) = fetch("cuCtxSetCurrent", 13000, 0);
    CUresult (*mem_alloc)(CUdeviceptr *, size_t) = fetch("cuMemAlloc", 13000, 0);
    CUresult (*htod)(CUdeviceptr, const void *, size_t) = fetch("cuMemcpyHtoD", 13000, 0);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t) =
        fetch("cuMemcpyDtoH", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
    CUresult (*mem_free)(CUdeviceptr) = fetch("cuMemFree", 13000, 0);
    if (!init || !retain || !set_current || !mem_alloc || !htod || !dtoh || !mem_free)
        bail_out("an entry point was not found");
    CUcontext ctx;
    CUdeviceptr dev;
    const char text[] = "through cuGetProcAddress";
    char back[sizeof text] = "";
    CHECK_CU(init(0));
    CHECK_CU(retain(&ctx, 0));
    CHECK_CU(set_current(ctx));
    CHECK_CU(mem_alloc(&dev, sizeof text));
    CHECK_CU(htod(dev, text, sizeof text));
    CHECK_CU(dtoh(back, dev, sizeof text));
    CHECK_CU(mem_free(dev));
    is_str(back, text, "fetched entry points allocate and copy");

    /* An entry point cuda.h declares but the simulator does not implement. */
    unsigned long (*unsupported_calls)(void) =
        (unsigned long (*)(void))dlsym(libcuda, "sim_unsupported_calls");
    unsigned long before = unsupported_calls();
    CUresult (*array_create)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *) =
        fetch("cuArrayCreate", 13000, 0);
    ok(array_create != NULL, "an unimplemented entry of cuda.h is found (as a stub)");
    ok(dlsym(libcuda, "cuArrayCreate_v2") == NULL, "but not exported for direct linking");
    CUarray array;
    CUDA_ARRAY_DESCRIPTOR desc = {16, 16, CU_AD_FORMAT_FLOAT, 1};
    is_int(array_create ? array_create(&array, &desc) : CUDA_SUCCESS, CUDA_ERROR_NOT_SUPPORTED,
           "calling it answers NOT_SUPPORTED");
    is_uint(unsupported_calls(), before + 1, "and counts as an unsupported call");
    ok(file_mentions(getenv("LMS_SIM_LOG"), "cuArrayCreate"), "and leaves a line naming it in LMS_SIM_LOG");

    unlink(getenv("LMS_SIM_LOG"));
    return exit_status();
}
