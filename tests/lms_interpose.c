/* Interposition: dlsym and cuGetProcAddress hand out liblms's wrappers for the managed entry
 * points, the driver's own functions for the rest, and nothing of liblms in mode off. */
#include "tests/lms_testlib.h"

#include <dlfcn.h>
#include <string.h>
#include <sys/wait.h>

static int from_liblms(void *fn)
{
    Dl_info info;
    return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "liblms.so");
}

/* In liblms_next.so, linked after liblms: dlsym(RTLD_NEXT, name) from there. */
void *lms_next_lookup(const char *name);

static void *proc(const char *name, cuuint64_t flags)
{
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    if (cuGetProcAddress(name, &fn, 13000, flags, &status) != CUDA_SUCCESS)
        return NULL;
    return fn;
}

int main(int argc, char **argv)
{
    lms_test_with_env(argv, (const char *const[]){ "LMS_MODE=swap", NULL });
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
    if (argc > 1) /* mode off: everything is the driver's */
        return from_liblms(dlsym(cuda, "cuMemAlloc_v2")) || from_liblms(proc("cuMemAlloc", 0)) ? 1 : 0;

    plan(10);
    lms_test_context();
    ok(cuda != NULL, "libcuda.so.1 opens");
    ok(dlsym(cuda, "cuMemAlloc_v2") == (void *)cuMemAlloc_v2 && from_liblms(dlsym(cuda, "cuMemAlloc_v2")),
       "dlsym(libcuda, cuMemAlloc_v2) gives liblms's wrapper");
    ok(from_liblms(dlsym(cuda, "cuLaunchKernel_ptsz")), "per-thread variants too");
    ok(dlsym(cuda, "cuCtxGetDevice") && !from_liblms(dlsym(cuda, "cuCtxGetDevice")),
       "an entry point outside the table passes through");
    ok(from_liblms(dlsym(cuda, "cuGetProcAddress_v2")), "dlsym of cuGetProcAddress_v2 is hooked");
    ok(proc("cuMemAlloc", 0) == (void *)cuMemAlloc_v2, "cuGetProcAddress(cuMemAlloc) gives the wrapper");
    ok(from_liblms(proc("cuLaunchKernel", CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)),
       "cuGetProcAddress with the per-thread flag gives a wrapper");
    ok(proc("cuCtxGetDevice", 0) && !from_liblms(proc("cuCtxGetDevice", 0)),
       "cuGetProcAddress of an unmanaged entry point passes through");
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    ok(lms_next_lookup("puts") == dlsym(libc, "puts"),
       "dlsym(RTLD_NEXT) from a library after liblms finds the next definition after that library");
    int status = lms_test_run_self(argv, "off", (const char *const[]){ "LMS_MODE=off", NULL });
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "LMS_MODE=off hands out the driver's functions (%#x)",
       status);
    return exit_status();
}
