/* How calls reach liblms: the exported wrappers (programs linked against libcuda), dlsym
 * (libraries that dlopen libcuda) and cuGetProcAddress (cudart and the libraries that carry
 * a static cudart). The real functions are resolved once, from libcuda.so.1. */
#include "preload/hooks.h"
#include "preload/fork.h"

#include "preload/log.h"
#include "preload/real_dlsym.h"
#include "preload/real_driver.h"
#include "preload/residency.h"
#include "preload/trace.h"

#include "policy/policy.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct hook_entry {
    void **real;   /* where lms_real keeps the driver's function */
    void *wrapper;
} hook_entry;

static const hook_entry hooks[] = {
#define LMS_HOOK_ENTRY(symbol, prototype) { (void **)&lms_real.symbol, (void *)symbol },
    LMS_HOOK_TABLE(LMS_HOOK_ENTRY)
#undef LMS_HOOK_ENTRY
};
#define HOOK_COUNT (sizeof hooks / sizeof hooks[0])

/* Set while this thread is inside liblms's own set-up, so that dlsym calls made by the
 * loader (or libcuda's constructors) on its behalf are not intercepted again. */
static __thread int in_liblms;

static int passthrough = 1;
static atomic_int initialized;

/* LMS_TRACE and the dump signal; a trace that cannot be written ends the process, as a bad
 * option value does, before any device work. */
static void open_trace(void)
{
    lms_trace_config cfg = {
        .path = lms_opt.TRACE.text,
        .stack_depth = (unsigned)lms_opt.TRACE_STACK_DEPTH.value,
        .record_uses = lms_opt.TRACE_USES.value != 0,
        .max_bytes = lms_opt.TRACE_MAX_MB.value,
        .dump_signal = (int)lms_opt.DUMP_SIGNAL.value,
        .walk_live = lms_residency_walk_live,
        .threshold_bytes = lms_opt.THRESHOLD_KB.value,
        .exclude_bytes = lms_opt.EXCLUDE_MB.value,
        .piece_bytes = lms_opt.PIECE_MB.value,
        .policy = lms_policy_names[lms_opt.POLICY.value],
        .mode = lms_mode_names[lms_opt.MODE.value],
    };
    char err[1024];
    if (lms_trace_open(&cfg, err, sizeof err) != 0)
        lms_exit_bad_input("%s", err);
}

static void init_once(void)
{
    in_liblms = 1;
    lms_resolve_dlsym();
    lms_options_load();
    lms_options_dump();
    if (lms_real_driver_load() != 0) {
        /* Not an error: every process started under LD_PRELOAD loads liblms, shells and
         * helpers included, and a machine without a driver has nothing to manage. */
        lms_log(LMS_LOG_INFO, -1, "cannot load libcuda.so.1 (%s): passing every call through",
                dlerror());
    } else {
        passthrough = lms_opt.MODE.value == LMS_MODE_OFF;
        if (!passthrough) {
            open_trace();
            lms_residency_start();
            lms_fork_protect(); /* after open_trace: see fork.h */
        }
    }
    atomic_store(&initialized, 1);
    in_liblms = 0;
}

void lms_init(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, init_once);
}

int lms_passing_through(void)
{
    lms_init();
    return passthrough;
}

__attribute__((constructor)) static void liblms_load(void) { lms_init(); }

CUresult lms_get_proc_address_v1(const char *symbol, void **pfn, int version, cuuint64_t flags)
    __asm__("cuGetProcAddress");

void *lms_wrapper_for(void *real)
{
    if (!real || passthrough)
        return real;
    for (size_t i = 0; i < HOOK_COUNT; i++)
        if (*hooks[i].real == real)
            return hooks[i].wrapper;
    if (real == (void *)lms_real.cuGetProcAddress_v2)
        return (void *)cuGetProcAddress_v2;
    if (real == (void *)lms_real.get_proc_address_v1)
        return (void *)lms_get_proc_address_v1;
    return real;
}

/* A lookup in a handle (libcuda's): the driver's function, or liblms's wrapper for it. */
LMS_BEFORE_SANITIZERS __attribute__((visibility("hidden")))
void *lms_dlsym_handle(void *handle, const char *name)
{
    if (!lms_resolve_dlsym())
        return NULL;
    void *found = lms_real_dlsym(handle, name);
    /* Before liblms's constructor (sanitizer runtimes and the loader look symbols up that
     * early, before even thread-local storage works) nothing is intercepted yet. */
    if (!found || !atomic_load(&initialized) || in_liblms)
        return found;
    return lms_wrapper_for(found);
}

/* dlsym itself. glibc resolves RTLD_NEXT, and RTLD_DEFAULT in the caller's scope, relative to
 * the object that called dlsym, which it finds from the return address: so those lookups
 * jump to glibc's dlsym with the caller's return address in place, and find what they would
 * without liblms (liblms's exported wrappers included, for objects before it in the search
 * order). Lookups in a handle go to lms_dlsym_handle. */
#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        "dlsym:\n"
        "    endbr64\n"
        "    cmpq $-1, %rdi\n"          /* RTLD_NEXT */
        "    je 1f\n"
        "    testq %rdi, %rdi\n"        /* RTLD_DEFAULT */
        "    jne lms_dlsym_handle\n"
        "1:  movq lms_real_dlsym(%rip), %rax\n"
        "    testq %rax, %rax\n"
        "    jnz 2f\n"
        "    pushq %rdi\n"
        "    pushq %rsi\n"
        "    subq $8, %rsp\n"           /* the stack aligned for the call */
        "    call lms_resolve_dlsym\n"
        "    addq $8, %rsp\n"
        "    popq %rsi\n"
        "    popq %rdi\n"
        "    testq %rax, %rax\n"
        "    jz 3f\n"
        "2:  jmp *%rax\n"
        "3:  ret\n"
        ".size dlsym, .-dlsym\n");
#else
/* Elsewhere RTLD_NEXT resolves relative to liblms: an interposer preloaded after it finds
 * its own definition again. */
LMS_EXPORT void *dlsym(void *handle, const char *name) { return lms_dlsym_handle(handle, name); }
#endif

LMS_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                        cuuint64_t flags, CUdriverProcAddressQueryResult *status)
{
    lms_init();
    if (!lms_real.cuGetProcAddress_v2)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult result = lms_real.cuGetProcAddress_v2(symbol, pfn, version, flags, status);
    if (result == CUDA_SUCCESS && pfn)
        *pfn = lms_wrapper_for(*pfn);
    return result;
}

LMS_EXPORT CUresult lms_get_proc_address_v1(const char *symbol, void **pfn, int version,
                                            cuuint64_t flags)
{
    lms_init();
    if (!lms_real.get_proc_address_v1)
        return CUDA_ERROR_NOT_INITIALIZED;
    CUresult result = lms_real.get_proc_address_v1(symbol, pfn, version, flags);
    if (result == CUDA_SUCCESS && pfn)
        *pfn = lms_wrapper_for(*pfn);
    return result;
}
