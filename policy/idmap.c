/* Open-addressing map (see idmap.h). */
#include "policy/idmap.h"

#include "policy/mix.h"

#include <stdlib.h>

void lms_idmap_free(lms_idmap *map)
{
    free(map->slots);
    *map = (lms_idmap){ 0 };
}

lms_idmap_slot *lms_idmap_find(const lms_idmap *map, uint64_t key)
{
    if (map->cap == 0)
        return NULL;
    for (size_t i = lms_mix64(key) & (map->cap - 1);; i = (i + 1) & (map->cap - 1)) {
        lms_idmap_slot *s = &map->slots[i];
        if (!s->used)
            return NULL;
        if (s->key == key)
            return s;
    }
}

/* Places a key known to be absent; there is room. */
static lms_idmap_slot *place(lms_idmap *map, uint64_t key)
{
    size_t i = lms_mix64(key) & (map->cap - 1);
    while (map->slots[i].used)
        i = (i + 1) & (map->cap - 1);
    map->count++;
    return &map->slots[i];
}

static int grow(lms_idmap *map)
{
    size_t cap = map->cap ? map->cap * 2 : 64;
    lms_idmap_slot *old = map->slots, *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return 0;
    size_t old_cap = map->cap;
    *map = (lms_idmap){ .slots = slots, .cap = cap };
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].used)
            *place(map, old[i].key) = old[i];
    free(old);
    return 1;
}

int lms_idmap_put(lms_idmap *map, uint64_t key, uint64_t value)
{
    lms_idmap_slot *s = lms_idmap_find(map, key);
    if (!s) {
        if (2 * (map->count + 1) > map->cap && !grow(map))
            return 0;
        s = place(map, key);
    }
    *s = (lms_idmap_slot){ .key = key, .value = value, .used = 1 };
    return 1;
}

void lms_idmap_remove(lms_idmap *map, uint64_t key)
{
    lms_idmap_slot *s = lms_idmap_find(map, key);
    if (!s)
        return;
    /* Backward shift: later keys of the run move up into the hole unless that would put them
     * before their home slot, so that no lookup stops at a hole it should have passed. */
    size_t mask = map->cap - 1, hole = (size_t)(s - map->slots);
    for (size_t i = (hole + 1) & mask; map->slots[i].used; i = (i + 1) & mask) {
        size_t home = lms_mix64(map->slots[i].key) & mask;
        if (((i - home) & mask) >= ((i - hole) & mask)) {
            map->slots[hole] = map->slots[i];
            hole = i;
        }
    }
    map->slots[hole].used = 0;
    map->count--;
}

lms_idmap_slot *lms_idmap_next(const lms_idmap *map, size_t *at)
{
    while (*at < map->cap)
        if (map->slots[(*at)++].used)
            return &map->slots[*at - 1];
    return NULL;
}
