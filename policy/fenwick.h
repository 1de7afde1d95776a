/* Sums over ranges of a fixed array of counters, each update and query in O(log n) (a Fenwick
 * tree). Arithmetic is modulo 2^64, so that adding -x (0 - x) takes x away again. */
#ifndef LMS_POLICY_FENWICK_H
#define LMS_POLICY_FENWICK_H

#include <stddef.h>
#include <stdint.h>

typedef struct lms_fenwick {
    uint64_t *tree;
    size_t size;
} lms_fenwick;

/* size counters, all 0. Returns 0 when memory is short. */
int lms_fenwick_init(lms_fenwick *f, size_t size);
void lms_fenwick_free(lms_fenwick *f);
void lms_fenwick_add(lms_fenwick *f, size_t i, uint64_t delta);
/* The sum of counters 0 to end - 1. */
uint64_t lms_fenwick_sum(const lms_fenwick *f, size_t end);

#endif
