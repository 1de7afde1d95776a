#include "preload/real_dlsym.h"

#include <dlfcn.h>
#include <stddef.h>

__attribute__((visibility("hidden"))) lms_dlsym_fn lms_real_dlsym;

/* glibc's dlsym, by version: ours is unversioned, so a versioned lookup never finds it. That
 * works from RTLD_DEFAULT too, which is needed while a sanitizer runtime initializes. */
LMS_BEFORE_SANITIZERS static void *libc_dlsym(void *handle, const char *version)
{
    return dlvsym(handle, "dlsym", version);
}

LMS_BEFORE_SANITIZERS __attribute__((visibility("hidden"))) lms_dlsym_fn lms_resolve_dlsym(void)
{
    if (!lms_real_dlsym)
        lms_real_dlsym = (lms_dlsym_fn)libc_dlsym(RTLD_NEXT, "GLIBC_2.34");
    if (!lms_real_dlsym)
        lms_real_dlsym = (lms_dlsym_fn)libc_dlsym(RTLD_NEXT, "GLIBC_2.2.5");
    if (!lms_real_dlsym)
        lms_real_dlsym = (lms_dlsym_fn)libc_dlsym(RTLD_DEFAULT, "GLIBC_2.34");
    if (!lms_real_dlsym)
        lms_real_dlsym = (lms_dlsym_fn)libc_dlsym(RTLD_DEFAULT, "GLIBC_2.2.5");
    return lms_real_dlsym;
}

void *lms_libc_dlsym(void *handle, const char *name)
{
    lms_dlsym_fn real = lms_resolve_dlsym();
    return real ? real(handle, name) : NULL;
}
