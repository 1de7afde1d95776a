#include "preload/real_driver.h"

#include "preload/real_dlsym.h"

#include <dlfcn.h>

lms_driver lms_real;

int lms_real_driver_load(void)
{
    void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!cuda)
        return -1;
#define LMS_RESOLVE(symbol) lms_real.symbol = (__typeof__(lms_real.symbol))lms_libc_dlsym(cuda, #symbol);
#define LMS_RESOLVE_HOOK(symbol, prototype) LMS_RESOLVE(symbol)
    LMS_HOOK_TABLE(LMS_RESOLVE_HOOK)
    LMS_DRIVER_TABLE(LMS_RESOLVE)
#undef LMS_RESOLVE_HOOK
#undef LMS_RESOLVE
    lms_real.get_proc_address_v1 =
        (__typeof__(lms_real.get_proc_address_v1))lms_libc_dlsym(cuda, "cuGetProcAddress");
    return 0;
}
