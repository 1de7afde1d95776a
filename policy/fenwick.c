/* Fenwick tree (see fenwick.h): tree[i - 1] holds the sum of the counters i - lowbit(i) to
 * i - 1, lowbit(i) being the lowest set bit of i. */
#include "policy/fenwick.h"

#include <stdlib.h>

int lms_fenwick_init(lms_fenwick *f, size_t size)
{
    f->tree = calloc(size ? size : 1, sizeof *f->tree);
    f->size = f->tree ? size : 0;
    return f->tree != NULL;
}

void lms_fenwick_free(lms_fenwick *f)
{
    free(f->tree);
    *f = (lms_fenwick){ 0 };
}

void lms_fenwick_add(lms_fenwick *f, size_t i, uint64_t delta)
{
    for (size_t n = i + 1; n <= f->size; n += n & -n)
        f->tree[n - 1] += delta;
}

uint64_t lms_fenwick_sum(const lms_fenwick *f, size_t end)
{
    uint64_t sum = 0;
    for (size_t n = end; n > 0; n -= n & -n)
        sum += f->tree[n - 1];
    return sum;
}
