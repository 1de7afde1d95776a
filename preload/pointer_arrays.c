#include "preload/pointer_arrays.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* A device range that a copy from the host filled with pointers into swappable allocations. */
typedef struct pointer_array {
    CUdeviceptr dst;
    size_t bytes;
    uint64_t *targets; /* the allocations (their bases) it points into, once each */
    size_t count;
} pointer_array;

static pointer_array *arrays; /* sorted by dst; they do not overlap */
static size_t array_count, array_cap;
static atomic_size_t known;   /* array_count, read without the lock by every launch */
static pthread_mutex_t arrays_lock = PTHREAD_MUTEX_INITIALIZER;

void lms_pointer_arrays_fork_lock(void) { pthread_mutex_lock(&arrays_lock); }
void lms_pointer_arrays_fork_unlock(void) { pthread_mutex_unlock(&arrays_lock); }

/* The first array that ends after addr. */
static size_t first_ending_after(CUdeviceptr addr)
{
    size_t lo = 0, hi = array_count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (arrays[mid].dst + arrays[mid].bytes <= addr) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* Forgets the arrays that overlap [dst, dst + bytes): what is written there now replaces them. */
static size_t forget_range(CUdeviceptr dst, size_t bytes)
{
    size_t first = first_ending_after(dst), last = first;
    while (last < array_count && arrays[last].dst < dst + bytes)
        free(arrays[last++].targets);
    if (last > first) /* arrays may still be NULL: memmove must not see it */
        memmove(&arrays[first], &arrays[last], (array_count - last) * sizeof *arrays);
    array_count -= last - first;
    atomic_store(&known, array_count);
    return first;
}

/* The distinct allocations that the 8-byte-aligned words of the copy point into. */
static size_t targets_of(CUdeviceptr dst, const unsigned char *src, size_t bytes, uint64_t *targets)
{
    size_t words = 0;
    for (size_t k = (8 - dst % 8) % 8; k + 8 <= bytes; k += 8)
        memcpy(&targets[words++], src + k, sizeof *targets);
    size_t found = lms_allocation_bases(targets, words, targets), kept = 0;
    for (size_t i = 0; i < found; i++) {
        size_t j = 0;
        while (j < kept && targets[j] != targets[i])
            j++;
        if (j == kept)
            targets[kept++] = targets[i];
    }
    return kept;
}

void lms_pointer_arrays_copied(CUdeviceptr dst, const void *src, size_t bytes)
{
    if (!src || bytes < 8 || bytes > LMS_POINTER_ARRAY_MAX)
        return;
    uint64_t *targets = malloc(bytes / 8 * sizeof *targets);
    size_t count = targets ? targets_of(dst, src, bytes, targets) : 0;
    pthread_mutex_lock(&arrays_lock);
    size_t at = forget_range(dst, bytes);
    if (count && array_count == array_cap) {
        size_t cap = array_cap ? array_cap * 2 : 16;
        pointer_array *grown = realloc(arrays, cap * sizeof *grown);
        if (grown) {
            arrays = grown;
            array_cap = cap;
        }
    }
    if (count && array_count < array_cap) {
        memmove(&arrays[at + 1], &arrays[at], (array_count - at) * sizeof *arrays);
        arrays[at] = (pointer_array){ dst, bytes, targets, count };
        atomic_store(&known, ++array_count);
        targets = NULL;
    }
    pthread_mutex_unlock(&arrays_lock);
    free(targets);
}

void lms_pointer_arrays_expand(lms_call *call)
{
    if (atomic_load(&known) == 0)
        return;
    pthread_mutex_lock(&arrays_lock);
    size_t refs = call->ref_count; /* what the call itself references, not what this adds */
    for (size_t r = 0; r < refs; r++) {
        lms_ref ref = call->refs[r];
        for (size_t i = first_ending_after(ref.addr); i < array_count && arrays[i].dst < ref.addr + ref.bytes; i++)
            for (size_t t = 0; t < arrays[i].count; t++)
                lms_call_ref(call, (CUdeviceptr)arrays[i].targets[t], 1, 0);
    }
    pthread_mutex_unlock(&arrays_lock);
}

void lms_pointer_arrays_forget(CUdeviceptr dptr)
{
    if (atomic_load(&known) == 0)
        return;
    lms_allocation a;
    size_t bytes = lms_allocation_at(dptr, &a) && a.base == dptr ? a.size : 1;
    pthread_mutex_lock(&arrays_lock);
    forget_range(dptr, bytes);
    pthread_mutex_unlock(&arrays_lock);
}
