/* Binary heap with removal and a walk in order (see heap.h). */
#include "policy/heap.h"

#include <stdlib.h>

static int before(int largest_first, const lms_heap_node *a, const lms_heap_node *b)
{
    if (a->key != b->key)
        return largest_first ? a->key > b->key : a->key < b->key;
    return largest_first ? a->tie > b->tie : a->tie < b->tie;
}

/* The sifts serve the heap, whose nodes record their slots (track), and the walk's frontier,
 * which holds the same nodes without owning their slots. */
static void place(lms_heap_node **a, size_t i, lms_heap_node *n, int track)
{
    a[i] = n;
    if (track)
        n->slot = i;
}

static void sift_up(lms_heap_node **a, size_t i, int largest_first, int track)
{
    lms_heap_node *n = a[i];
    while (i > 0 && before(largest_first, n, a[(i - 1) / 2])) {
        place(a, i, a[(i - 1) / 2], track);
        i = (i - 1) / 2;
    }
    place(a, i, n, track);
}

static void sift_down(lms_heap_node **a, size_t count, size_t i, int largest_first, int track)
{
    lms_heap_node *n = a[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= count)
            break;
        if (c + 1 < count && before(largest_first, a[c + 1], a[c]))
            c++;
        if (!before(largest_first, a[c], n))
            break;
        place(a, i, a[c], track);
        i = c;
    }
    place(a, i, n, track);
}

/* Puts n at slot i of a heap of count nodes, where it may have to rise or sink. */
static void settle(lms_heap_node **a, size_t count, size_t i, lms_heap_node *n, int largest_first, int track)
{
    place(a, i, n, track);
    if (i > 0 && before(largest_first, n, a[(i - 1) / 2]))
        sift_up(a, i, largest_first, track);
    else
        sift_down(a, count, i, largest_first, track);
}

int lms_heap_push(lms_heap *h, lms_heap_node *n)
{
    n->slot = LMS_HEAP_OUT;
    if (h->count == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 64;
        lms_heap_node **grown = realloc(h->nodes, cap * sizeof *grown);
        if (!grown)
            return 0;
        h->nodes = grown;
        h->cap = cap;
    }
    h->nodes[h->count] = n;
    sift_up(h->nodes, h->count++, h->largest_first, 1);
    return 1;
}

void lms_heap_update(lms_heap *h, lms_heap_node *n)
{
    if (n->slot != LMS_HEAP_OUT)
        settle(h->nodes, h->count, n->slot, n, h->largest_first, 1);
}

void lms_heap_remove(lms_heap *h, lms_heap_node *n)
{
    size_t i = n->slot;
    if (i == LMS_HEAP_OUT)
        return;
    n->slot = LMS_HEAP_OUT;
    lms_heap_node *last = h->nodes[--h->count];
    if (i < h->count)
        settle(h->nodes, h->count, i, last, h->largest_first, 1);
}

void lms_heap_clear(lms_heap *h)
{
    for (size_t i = 0; i < h->count; i++)
        h->nodes[i]->slot = LMS_HEAP_OUT;
    h->count = 0;
}

void lms_heap_free(lms_heap *h)
{
    lms_heap_clear(h);
    free(h->nodes);
    h->nodes = NULL;
    h->cap = 0;
}

int lms_heap_walk_start(lms_heap_walk *w, const lms_heap *heap)
{
    /* The frontier holds nodes not walked yet: never more than the heap has. */
    if (w->cap < heap->count) {
        lms_heap_node **grown = realloc(w->frontier, heap->count * sizeof *grown);
        if (!grown)
            return 0;
        w->frontier = grown;
        w->cap = heap->count;
    }
    w->heap = heap;
    w->count = 0;
    if (heap->count)
        w->frontier[w->count++] = heap->nodes[0];
    return 1;
}

lms_heap_node *lms_heap_walk_next(lms_heap_walk *w)
{
    if (w->count == 0)
        return NULL;
    /* Next comes the first of the frontier; its children in the heap join the frontier. */
    int largest_first = w->heap->largest_first;
    lms_heap_node *top = w->frontier[0];
    w->frontier[0] = w->frontier[--w->count];
    if (w->count)
        sift_down(w->frontier, w->count, 0, largest_first, 0);
    for (size_t c = 2 * top->slot + 1; c <= 2 * top->slot + 2 && c < w->heap->count; c++) {
        w->frontier[w->count] = w->heap->nodes[c];
        sift_up(w->frontier, w->count++, largest_first, 0);
    }
    return top;
}

void lms_heap_walk_free(lms_heap_walk *w)
{
    free(w->frontier);
    *w = (lms_heap_walk){ 0 };
}
