/* glibc's dlsym, found from under liblms's own: interpose.c exports a dlsym in front of glibc's,
 * which every dlsym call in the process reaches, liblms's own calls included. Code below the
 * interposition (the real driver, the trace, the stacks) looks symbols up with glibc's. */
#ifndef LMS_PRELOAD_REAL_DLSYM_H
#define LMS_PRELOAD_REAL_DLSYM_H

/* Runs before a sanitizer runtime has set itself up (it calls dlsym first): not instrumented. */
#define LMS_BEFORE_SANITIZERS __attribute__((no_sanitize("address", "thread", "undefined")))

typedef void *(*lms_dlsym_fn)(void *, const char *);

/* glibc's dlsym once lms_resolve_dlsym has found it; interpose.c's dlsym reads it from assembly. */
extern lms_dlsym_fn lms_real_dlsym;

/* Keeps nothing on the stack (interpose.c's dlsym calls it from assembly). Returns glibc's
 * dlsym, or NULL. */
lms_dlsym_fn lms_resolve_dlsym(void);

/* `name` looked up by glibc's dlsym in `handle`: NULL where it is not there, or where glibc's
 * dlsym cannot be found. */
void *lms_libc_dlsym(void *handle, const char *name);

#endif
