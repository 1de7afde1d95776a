/* A map from 64-bit keys to 64-bit values for the lookups a policy makes on every call: open
 * addressing with linear probing, at most half full, so that a lookup usually touches one
 * cache line (a chained table walks a list of scattered nodes). */
#ifndef LMS_POLICY_IDMAP_H
#define LMS_POLICY_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct lms_idmap_slot {
    uint64_t key, value;
    int used;
} lms_idmap_slot;

typedef struct lms_idmap {
    lms_idmap_slot *slots;
    size_t cap, count;          /* cap: a power of two, or 0 */
} lms_idmap;

/* A zeroed lms_idmap is empty. */
void lms_idmap_free(lms_idmap *map);
/* The key's slot, NULL when absent. Valid until the map changes. */
lms_idmap_slot *lms_idmap_find(const lms_idmap *map, uint64_t key);
/* Sets the key's value. Returns 0 when memory is short (the map is unchanged). */
int lms_idmap_put(lms_idmap *map, uint64_t key, uint64_t value);
void lms_idmap_remove(lms_idmap *map, uint64_t key);
/* Walks the entries: start with *at = 0; each call gives the next slot, NULL at the end. The
 * map must not change meanwhile. */
lms_idmap_slot *lms_idmap_next(const lms_idmap *map, size_t *at);

#endif
