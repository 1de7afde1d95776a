/* Call stacks of allocations, for the trace and the dump of live allocations.
 *
 * A stack is captured with libunwind (loaded at run time, so liblms does not need it to
 * start; glibc's backtrace() stands in when it is missing), without the frames of the
 * object that holds this code (liblms itself), and interned: equal stacks share one id,
 * so an allocation record keeps 4 bytes. Ids stay valid until the process ends. */
#ifndef LMS_PRELOAD_STACK_H
#define LMS_PRELOAD_STACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LMS_STACK_MAX_DEPTH 64

/* Captures at most `depth` frames of the stack that led to the function calling this one
 * (that function itself and liblms's frames are left out); returns its id, 0 when depth is 0
 * or the table of stacks is full. Thread-safe. */
uint32_t lms_stack_capture(unsigned depth);

/* The frames of stack `id`: sets *pcs and returns their count (0 for an unknown id). */
size_t lms_stack_frames(uint32_t id, const uintptr_t **pcs);

/* Names a frame "symbol+0x1f (libfoo.so)", or "libfoo.so+0x1234" without a symbol.
 * Always NUL-terminates; returns the length written. */
size_t lms_stack_frame_name(uintptr_t pc, char *buf, size_t len);

/* The object (the program or a library) holding a frame's code, so that a tool can read its
 * symbols and line numbers from the file later: file addresses are pc - bias. */
typedef struct lms_stack_object {
    const void *id;            /* the same for every frame of one loaded object */
    uintptr_t bias;
    char path[4096];           /* absolute */
    char build_id[130];        /* GNU build id in hex; "" when it has none */
} lms_stack_object;
/* False when pc lies in no loaded object. */
bool lms_stack_frame_object(uintptr_t pc, lms_stack_object *object);

/* Around fork (the trace's handlers): take and give back the lock of the table of stacks. */
void lms_stack_fork_lock(void);
void lms_stack_fork_unlock(void);

#endif
