/* One iteration of a learned sequence (see iteration.h). */
#include "policy/iteration.h"

#include <stdlib.h>

void lms_iteration_clear(lms_iteration *it)
{
    lms_idmap_free(&it->by_id);
    free(it->uses);
    free(it->ids);
    free(it->first);
    free(it->positions);
    *it = (lms_iteration){ 0 };
}

/* Makes room for `more` elements in an array that doubles. */
static int reserve(void **array, size_t *cap, size_t used, size_t more, size_t elem)
{
    if (used + more <= *cap)
        return 1;
    size_t cap_new = *cap ? *cap : 64;
    while (cap_new < used + more)
        cap_new *= 2;
    void *grown = realloc(*array, cap_new * elem);
    if (!grown)
        return 0;
    *array = grown;
    *cap = cap_new;
    return 1;
}

int lms_iteration_add_step(lms_iteration *it, const lms_alloc_id *ids, size_t count)
{
    if (it->id_count + count > LMS_ITERATION_MAX_IDS ||
        !reserve((void **)&it->ids, &it->id_cap, it->id_count, count, sizeof *it->ids) ||
        !reserve((void **)&it->first, &it->first_cap, it->length, 2, sizeof *it->first))
        return 0;
    it->first[it->length] = it->id_count;
    for (size_t i = 0; i < count; i++)
        it->ids[it->id_count++] = ids[i];
    it->first[++it->length] = it->id_count;
    return 1;
}

int lms_iteration_index(lms_iteration *it)
{
    size_t n = it->id_count ? it->id_count : 1, distinct = 0;
    it->positions = malloc(n * sizeof *it->positions);
    it->uses = malloc(n * sizeof *it->uses);
    if (!it->positions || !it->uses)
        return 0;
    /* Count each allocation's uses, give each its slice, then fill the slices in step order. */
    for (size_t i = 0; i < it->id_count; i++) {
        const lms_idmap_slot *s = lms_idmap_find(&it->by_id, it->ids[i]);
        if (s) {
            it->uses[s->value].count++;
            continue;
        }
        if (!lms_idmap_put(&it->by_id, it->ids[i], distinct))
            return 0;
        it->uses[distinct++] = (lms_iteration_uses){ .count = 1 };
    }
    uint32_t *next = it->positions;
    for (size_t u = 0; u < distinct; u++) {
        it->uses[u].positions = next;
        next += it->uses[u].count;
        it->uses[u].count = 0;
    }
    for (size_t s = 0; s < it->length; s++)
        for (size_t i = it->first[s]; i < it->first[s + 1]; i++) {
            lms_iteration_uses *u = &it->uses[lms_idmap_find(&it->by_id, it->ids[i])->value];
            u->positions[u->count++] = (uint32_t)s;
        }
    it->distinct = distinct;
    return 1;
}

size_t lms_iteration_step_size(const lms_iteration *it, uint64_t position)
{
    return it->first[position + 1] - it->first[position];
}

const lms_iteration_uses *lms_iteration_find(const lms_iteration *it, lms_alloc_id id)
{
    const lms_idmap_slot *s = lms_idmap_find(&it->by_id, id);
    return s ? &it->uses[s->value] : NULL;
}

size_t lms_iteration_first_use(const lms_iteration_uses *uses, uint64_t position)
{
    size_t lo = 0, hi = uses->count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (uses->positions[mid] < position) lo = mid + 1; else hi = mid;
    }
    return lo;
}

uint64_t lms_iteration_until_next(const lms_iteration *it, const lms_iteration_uses *uses,
                                  uint64_t position, int *used_here)
{
    size_t lo = lms_iteration_first_use(uses, position);
    *used_here = lo < uses->count && uses->positions[lo] == position;
    size_t next = lo + (size_t)*used_here;
    return next < uses->count ? uses->positions[next] - position
                              : uses->positions[0] + it->length - position;
}
