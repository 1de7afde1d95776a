/* Pointers the host copies into device memory. A kernel that reads an array of pointers in
 * device memory (cublas*Batched takes its matrices so) uses the allocations they point to,
 * which its parameters do not show. liblms reads the words of each host-to-device copy of at
 * most LMS_POINTER_ARRAY_MAX bytes (pointer arrays are small) and remembers, for the range it
 * writes, the swappable allocations they point into; a launch whose parameters point into
 * that range uses those allocations too. Pointers that kernels or device-to-device copies
 * write are not seen. */
#ifndef LMS_PRELOAD_POINTER_ARRAYS_H
#define LMS_PRELOAD_POINTER_ARRAYS_H

#include "preload/residency.h"

#include <cuda.h>
#include <stddef.h>

#define LMS_POINTER_ARRAY_MAX ((size_t)64 << 10)

/* A copy of bytes from host memory at src to dst is issued. */
void lms_pointer_arrays_copied(CUdeviceptr dst, const void *src, size_t bytes);
/* Adds to call the allocations that the pointer arrays its references point into point to. */
void lms_pointer_arrays_expand(lms_call *call);
/* The allocation at dptr is freed: what was copied into it is forgotten. */
void lms_pointer_arrays_forget(CUdeviceptr dptr);
/* Around fork (preload/fork.c): take and give back the lock of the arrays. */
void lms_pointer_arrays_fork_lock(void);
void lms_pointer_arrays_fork_unlock(void);

#endif
