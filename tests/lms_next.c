/* A second interposer for lms_interpose, linked after liblms as if preloaded after it: like
 * any interposer, it reaches the function it wraps through dlsym(RTLD_NEXT). */
#include <dlfcn.h>

int puts(const char *s);

/* glibc finds the caller of dlsym from the return address: a volatile result keeps the
 * call from becoming a tail call, which would make the caller this library's caller. */
void *lms_next_lookup(const char *name)
{
    void *volatile found = dlsym(RTLD_NEXT, name);
    return found;
}

int puts(const char *s)
{
    int (*next)(const char *) = (int (*)(const char *))lms_next_lookup("puts");
    return next(s);
}
