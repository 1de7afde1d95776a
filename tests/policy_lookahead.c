/* The lookahead policy: it learns the iteration a training loop repeats, then evicts what is
 * needed furthest in the future (checked against a brute-force oracle that reads the real
 * future), names what to prefetch, falls back to LRU when the sequence changes (checked
 * against an LRU policy told the same) and learns again; on synthetic sequences, on one
 * recorded from the trainer under liblms, and on 10^5 calls with its cost per call. */
#include "policy/plan.h"
#include "policy/policy.h"
#include "tests/tap.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_VICTIMS 64
#define NONE SIZE_MAX

/* ---- sequences of steps ---- */

typedef struct schedule {
    lms_alloc_id *ids;   /* step after step */
    size_t *first;       /* step s uses ids[first[s]] to ids[first[s + 1] - 1] */
    size_t steps, id_count, id_cap, step_cap;
} schedule;

static void *grow(void *array, size_t *cap, size_t needed, size_t elem)
{
    if (needed <= *cap)
        return array;
    while (*cap < needed)
        *cap = *cap ? *cap * 2 : 64;
    array = realloc(array, *cap * elem);
    if (!array)
        bail_out("out of memory");
    return array;
}

static void add_step(schedule *s, const lms_alloc_id *ids, size_t count)
{
    s->ids = grow(s->ids, &s->id_cap, s->id_count + count, sizeof *s->ids);
    s->first = grow(s->first, &s->step_cap, s->steps + 2, sizeof *s->first);
    s->first[s->steps] = s->id_count;
    memcpy(s->ids + s->id_count, ids, count * sizeof *ids);
    s->id_count += count;
    s->first[++s->steps] = s->id_count;
}

/* Appends steps from to to - 1 of `from_s`, `times` times over. */
static void repeat(schedule *s, const schedule *from_s, size_t from, size_t to, size_t times)
{
    for (size_t t = 0; t < times; t++)
        for (size_t i = from; i < to; i++)
            add_step(s, from_s->ids + from_s->first[i], from_s->first[i + 1] - from_s->first[i]);
}

static void free_schedule(schedule *s) { free(s->ids); free(s->first); *s = (schedule){ 0 }; }

static int step_uses(const schedule *s, size_t step, lms_alloc_id id)
{
    for (size_t i = s->first[step]; i < s->first[step + 1]; i++)
        if (s->ids[i] == id)
            return 1;
    return 0;
}

/* ---- a cache driven the way liblms drives its policy ---- */

/* Allocations are ids 1 to ids. A step restores what it uses that is evicted (making room
 * with the policy's victims, never one the step uses), then tells the policy of each use;
 * with prefetch on, it then restores what lms_policy_prefetch_within names, in order. */
typedef struct cache {
    lms_policy *policy;
    lms_policy *shadow;          /* an lru told the same, to compare choices with; or NULL */
    const schedule *run;         /* the steps, which are also the oracle's future */
    size_t now;                  /* the step running, or run last */
    int in_step;                 /* while a step runs, what it uses is kept */
    size_t ids, capacity, resident;
    size_t *bytes;
    char *live, *in;
    char *ahead;                 /* restored and not used since */
    int prefetch, oracle, compare_shadow;
    int plan;                    /* evicts what lms_policy_evict_after_step names after each step */
    size_t *planned_at;          /* with plan: how many it named at each step */
    size_t window;               /* with prefetch: lms_policy_prefetch_within's */
    /* what happened */
    size_t restores, prefetches, evictions, planned, ooms, bad, harmful;
    size_t oracle_checked, oracle_wrong, shadow_checked, shadow_wrong;
    uint64_t choose_ns, chooses, policy_ns, uses;
} cache;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void cache_init(cache *c, const char *policy, const schedule *run, size_t ids, size_t capacity)
{
    *c = (cache){ .policy = lms_policy_create(policy), .run = run, .ids = ids, .capacity = capacity };
    c->bytes = calloc(ids + 1, sizeof *c->bytes);
    c->live = calloc(ids + 1, 1);
    c->in = calloc(ids + 1, 1);
    c->ahead = calloc(ids + 1, 1);
    if (!c->policy || !c->bytes || !c->live || !c->in || !c->ahead)
        bail_out("cannot set up a cache for %s", policy);
}

static void cache_free(cache *c)
{
    lms_policy_destroy(c->policy);
    lms_policy_destroy(c->shadow);
    free(c->bytes);
    free(c->live);
    free(c->in);
    free(c->ahead);
}

static int keep_step(void *ctx, lms_alloc_id id)
{
    const cache *c = ctx;
    return c->in_step && step_uses(c->run, c->now, id);
}

/* The oracle: the first step from `from` on that uses id; NONE when none does. */
static size_t next_use(const cache *c, lms_alloc_id id, size_t from)
{
    for (size_t t = from; t < c->run->steps; t++)
        if (step_uses(c->run, t, id))
            return t;
    return NONE;
}

typedef struct ranked { lms_alloc_id id; size_t next; } ranked;

static int furthest_first(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->next != y->next) return x->next < y->next ? 1 : -1;
    return x->id < y->id ? 1 : x->id > y->id ? -1 : 0;
}

static int soonest_first(const void *a, const void *b) { return furthest_first(b, a); }

/* Belady's choice by brute force: the resident allocations the running step does not use,
 * needed furthest in the future first (on a tie, the larger id first, as the policy breaks
 * it). Between steps, the future starts at the next. */
static size_t oracle_victims(const cache *c, size_t bytes, lms_alloc_id *victims, size_t max)
{
    ranked *r = malloc((c->ids + 1) * sizeof *r);
    size_t n = 0, count = 0, freed = 0, from = c->in_step ? c->now : c->now + 1;
    for (lms_alloc_id id = 1; id <= c->ids; id++)
        if (c->in[id] && !keep_step((void *)c, id))
            r[n++] = (ranked){ id, next_use(c, id, from) };
    qsort(r, n, sizeof *r, furthest_first);
    for (size_t i = 0; i < n && freed < bytes && count < max; i++) {
        victims[count++] = r[i].id;
        freed += c->bytes[r[i].id];
    }
    free(r);
    return count;
}

static int same(const lms_alloc_id *a, size_t n, const lms_alloc_id *b, size_t m)
{
    return n == m && memcmp(a, b, n * sizeof *a) == 0;
}

static size_t choose(cache *c, size_t bytes, lms_alloc_id *victims)
{
    uint64_t t0 = now_ns();
    size_t n = lms_policy_choose_victims(c->policy, bytes, keep_step, c, victims, MAX_VICTIMS);
    c->choose_ns += now_ns() - t0;
    c->chooses++;
    lms_alloc_id expected[MAX_VICTIMS];
    if (c->oracle) {
        c->oracle_checked++;
        c->oracle_wrong += !same(victims, n, expected, oracle_victims(c, bytes, expected, MAX_VICTIMS));
    }
    if (c->compare_shadow) {
        size_t m = lms_policy_choose_victims(c->shadow, bytes, keep_step, c, expected, MAX_VICTIMS);
        c->shadow_checked++;
        c->shadow_wrong += !same(victims, n, expected, m);
    }
    return n;
}

/* Frees room for `need` more bytes. For a prefetch needed at step `before`, a victim needed
 * no later is harm. Returns 0 when the policy has nothing left. */
static int make_room(cache *c, size_t need, size_t before)
{
    while (c->resident + need > c->capacity) {
        lms_alloc_id victims[MAX_VICTIMS];
        size_t n = choose(c, c->resident + need - c->capacity, victims);
        if (n == 0)
            return 0;
        for (size_t i = 0; i < n; i++) {
            lms_alloc_id v = victims[i];
            if (v < 1 || v > c->ids || !c->in[v] || keep_step(c, v)) {
                c->bad++;
                return 0;
            }
            size_t next = before == NONE ? NONE : next_use(c, v, c->now + 1);
            c->harmful += next != NONE && next <= before;
            c->in[v] = c->ahead[v] = 0;
            c->resident -= c->bytes[v];
            c->evictions++;
            lms_policy_evicted(c->policy, v);
            if (c->shadow) lms_policy_evicted(c->shadow, v);
        }
    }
    return 1;
}

static void restore(cache *c, lms_alloc_id id, size_t before)
{
    if (!make_room(c, c->bytes[id], before)) {
        c->ooms++;
        return;
    }
    c->in[id] = c->ahead[id] = 1;
    c->resident += c->bytes[id];
    lms_policy_restored(c->policy, id);
    if (c->shadow) lms_policy_restored(c->shadow, id);
}

static void cache_alloc(cache *c, lms_alloc_id id, size_t bytes)
{
    if (!make_room(c, bytes, NONE))
        c->ooms++;
    c->bytes[id] = bytes;
    c->live[id] = c->in[id] = 1;
    c->resident += bytes;
    lms_policy_created(c->policy, id, bytes);
    if (c->shadow) lms_policy_created(c->shadow, id, bytes);
}

static void cache_release(cache *c, lms_alloc_id id)
{
    if (c->in[id])
        c->resident -= c->bytes[id];
    c->live[id] = c->in[id] = c->ahead[id] = 0;
    lms_policy_freed(c->policy, id);
    if (c->shadow) lms_policy_freed(c->shadow, id);
}

/* Creates ids 1 to ids with these sizes; with a shadow, an lru is told the same from now on. */
static void cache_fill(cache *c, const size_t *bytes, int shadow)
{
    if (shadow && !(c->shadow = lms_policy_create("lru")))
        bail_out("no lru");
    for (lms_alloc_id id = 1; id <= c->ids; id++)
        cache_alloc(c, id, bytes[id]);
}

static void prefetch(cache *c)
{
    lms_alloc_id ids[MAX_VICTIMS];
    size_t room = c->capacity > c->resident ? c->capacity - c->resident : 0;
    size_t n = lms_policy_prefetch_within(c->policy, c->now + 2, room, c->window, ids, MAX_VICTIMS);
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 1 || ids[i] > c->ids || !c->live[ids[i]] || c->in[ids[i]]) {
            c->bad++;
            continue;
        }
        restore(c, ids[i], next_use(c, ids[i], c->now + 1));
        c->prefetches++;
    }
}

/* As liblms does once a step's work is queued: evicts what the plan names. */
static void evict_planned(cache *c, size_t step)
{
    lms_alloc_id ids[MAX_VICTIMS];
    size_t n = lms_policy_evict_after_step(c->policy, c->capacity, ids, MAX_VICTIMS);
    for (size_t i = 0; i < n; i++) {
        lms_alloc_id v = ids[i];
        if (v < 1 || v > c->ids || !c->in[v]) {
            c->bad++;
            continue;
        }
        c->in[v] = c->ahead[v] = 0;
        c->resident -= c->bytes[v];
        c->evictions++;
        c->planned++;
        if (c->planned_at)
            c->planned_at[step]++;
        lms_policy_evicted(c->policy, v);
    }
}

static void run_step(cache *c, size_t step)
{
    const lms_alloc_id *ids = c->run->ids + c->run->first[step];
    size_t count = c->run->first[step + 1] - c->run->first[step];
    c->now = step;
    c->in_step = 1;
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < count; i++)
        if (c->live[ids[i]] && !c->in[ids[i]]) {
            restore(c, ids[i], NONE);
            c->restores++;
        }
    for (size_t i = 0; i < count; i++) {
        c->ahead[ids[i]] = 0;
        lms_policy_used(c->policy, ids[i], step + 1);
        if (c->shadow) lms_policy_used(c->shadow, ids[i], step + 1);
    }
    c->uses += count;
    c->in_step = 0;
    if (c->plan)
        evict_planned(c, step);
    if (c->prefetch)
        prefetch(c);
    c->policy_ns += now_ns() - t0;
}

static void run_steps(cache *c, size_t from, size_t to)
{
    for (size_t t = from; t < to; t++)
        run_step(c, t);
}

/* The resident allocations, and only those, can be chosen, each once; prefetch names only
 * evicted ones. */
static int consistent(cache *c)
{
    lms_alloc_id *all = malloc((c->ids + 1) * sizeof *all);
    char *seen = calloc(c->ids + 1, 1);
    size_t n = lms_policy_choose_victims(c->policy, SIZE_MAX, NULL, NULL, all, c->ids + 1);
    int good = 1;
    for (size_t i = 0; i < n; i++) {
        int known = all[i] >= 1 && all[i] <= c->ids;
        good &= known && c->in[all[i]] && !seen[all[i]];
        if (known) seen[all[i]] = 1;
    }
    for (lms_alloc_id id = 1; id <= c->ids; id++)
        good &= seen[id] == c->in[id];
    n = lms_policy_prefetch(c->policy, c->now + 2, all, c->ids + 1);
    for (size_t i = 0; i < n; i++)
        good &= all[i] >= 1 && all[i] <= c->ids && c->live[all[i]] && !c->in[all[i]];
    free(all);
    free(seen);
    return good;
}

static size_t prefetch_count(cache *c)
{
    lms_alloc_id ids[MAX_VICTIMS];
    return lms_policy_prefetch(c->policy, c->now + 2, ids, MAX_VICTIMS);
}

/* The oracle's prefetch after the step just run: evicted allocations by next use, soonest
 * first, cut at the first for which what is needed up to its use (the resident allocations,
 * those named before, itself) exceeds room plus the resident bytes, or for which the bytes
 * brought back ahead of need (restored and not used since, named before, itself) exceed the
 * window. */
static size_t oracle_prefetch(const cache *c, size_t room, size_t window, lms_alloc_id *out, size_t max)
{
    ranked *r = malloc((c->ids + 1) * sizeof *r);
    size_t n = 0, count = 0, listed = 0, ahead = 0;
    for (lms_alloc_id id = 1; id <= c->ids; id++)
        ahead += c->ahead[id] ? c->bytes[id] : 0;
    for (lms_alloc_id id = 1; id <= c->ids; id++)
        if (c->live[id] && !c->in[id])
            r[n++] = (ranked){ id, next_use(c, id, c->now + 1) };
    qsort(r, n, sizeof *r, soonest_first);
    for (size_t i = 0; i < n && count < max && r[i].next != NONE; i++) {
        size_t needed = listed + c->bytes[r[i].id];
        for (lms_alloc_id id = 1; id <= c->ids; id++)
            if (c->in[id] && next_use(c, id, c->now + 1) <= r[i].next)
                needed += c->bytes[id];
        if ((room != SIZE_MAX && needed > room + c->resident) ||
            (window != SIZE_MAX && ahead + listed + c->bytes[r[i].id] > window))
            break;
        out[count++] = r[i].id;
        listed += c->bytes[r[i].id];
    }
    free(r);
    return count;
}

/* ---- synthetic loops ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static size_t rnd(size_t n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (size_t)(rng % n);
}

/* An iteration of `length` steps over ids 1 to ids (ids <= length), each step using 1 to 3
 * of them, every id used; the first step uses id 1 alone and no other step does, as a loop's
 * first launch (its input) would. */
static void random_iteration(schedule *s, size_t length, size_t ids)
{
    lms_alloc_id one = 1;
    add_step(s, &one, 1);
    for (size_t t = 1; t < length; t++) {
        lms_alloc_id step[3];
        size_t count = 1 + rnd(3), n = 0;
        for (size_t i = 0; i < count; i++) {
            lms_alloc_id id = i == 0 && t < ids ? t + 1 : 2 + rnd(ids - 1);
            int dup = 0;
            for (size_t j = 0; j < n; j++)
                dup |= step[j] == id;
            if (!dup)
                step[n++] = id;
        }
        add_step(s, step, n);
    }
}

static size_t largest_step(const schedule *s, const size_t *bytes)
{
    size_t largest = 0;
    for (size_t t = 0; t < s->steps; t++) {
        size_t sum = 0;
        for (size_t i = s->first[t]; i < s->first[t + 1]; i++)
            sum += bytes[s->ids[i]];
        if (sum > largest)
            largest = sum;
    }
    return largest;
}

/* A training loop over `layers` layers: forward steps {w_i, x_i, x_i+1}, backward steps
 * {w_i, x_i, g_i+1, g_i, dw_i} in reverse, then updates {w_i, dw_i, m_i}. Returns the ids. */
static size_t training_iteration(schedule *s, size_t layers, size_t *bytes)
{
    size_t L = layers;
#define W(i) (1 + (i))
#define X(i) (1 + L + (i))
#define G(i) (2 + 2 * L + (i))
#define DW(i) (3 + 3 * L + (i))
#define M(i) (3 + 4 * L + (i))
    for (size_t i = 0; i < L; i++) {
        lms_alloc_id step[3] = { W(i), X(i), X(i + 1) };
        add_step(s, step, 3);
    }
    for (size_t i = L; i-- > 0;) {
        lms_alloc_id step[5] = { W(i), X(i), G(i + 1), G(i), DW(i) };
        add_step(s, step, 5);
    }
    for (size_t i = 0; i < L; i++) {
        lms_alloc_id step[3] = { W(i), DW(i), M(i) };
        add_step(s, step, 3);
    }
    if (bytes)
        for (size_t i = 0; i <= L; i++) {
            bytes[X(i)] = bytes[G(i)] = 4000;
            if (i < L)
                bytes[W(i)] = bytes[DW(i)] = bytes[M(i)] = 2000;
        }
    return 2 + 5 * L;
#undef W
#undef X
#undef G
#undef DW
#undef M
}

/* ---- the tests ---- */

static void test_names(void)
{
    int listed = 0;
    for (size_t i = 0; lms_policy_names[i]; i++)
        listed |= strcmp(lms_policy_names[i], "lookahead") == 0;
    ok(listed, "lookahead is among the policy names");
    is_str(lms_policy_names[0], "lru", "lru stays the default");
    lms_policy *p = lms_policy_create("lookahead");
    ok(p && strcmp(lms_policy_name(p), "lookahead") == 0, "lookahead is created and names itself");
    lms_alloc_id v[4];
    ok(p && lms_policy_choose_victims(p, 1, NULL, NULL, v, 4) == 0 && lms_policy_prefetch(p, 1, v, 4) == 0,
       "with nothing told, no victims and nothing to prefetch");
    lms_policy_destroy(p);
}

/* A sequence that never repeats: lookahead is LRU, choice for choice. */
static void test_lru_until_learned(void)
{
    schedule run = { 0 };
    size_t ids = 40, bytes[41];
    for (size_t t = 0; t < 3000; t++) {
        lms_alloc_id step[3] = { 1 + rnd(ids), 1 + rnd(ids), 1 + rnd(ids) };
        size_t n = step[1] == step[0] ? 1 : step[2] == step[0] || step[2] == step[1] ? 2 : 3;
        add_step(&run, step, n);
    }
    for (size_t id = 1; id <= ids; id++)
        bytes[id] = 100 * (1 + rnd(4));
    cache c;
    cache_init(&c, "lookahead", &run, ids, 2000);
    cache_fill(&c, bytes, 1);
    c.compare_shadow = 1;
    size_t predicted = 0;
    for (size_t t = 0; t < run.steps; t++) {
        run_step(&c, t);
        predicted += prefetch_count(&c) > 0;
    }
    ok(c.shadow_checked > 1000 && c.shadow_wrong == 0,
       "a sequence that does not repeat: every one of %zu choices is LRU's (%zu differ)", (size_t)c.shadow_checked,
       c.shadow_wrong);
    is_uint(predicted, 0, "and nothing is named for prefetch");
    is_uint(lms_policy_reuse_after_next(c.policy, 1), UINT64_MAX, "nor is how soon anything is used again");
    cache_free(&c);
    free_schedule(&run);
}

/* A cycle of four allocations in room for three: LRU evicts the one needed next every time,
 * Belady one in three. */
static void test_cycle(void)
{
    schedule iter = { 0 }, run = { 0 };
    for (lms_alloc_id id = 1; id <= 4; id++)
        add_step(&iter, &id, 1);
    repeat(&run, &iter, 0, 4, 20);
    size_t bytes[5] = { 0, 100, 100, 100, 100 };
    size_t restores[2];
    const char *names[2] = { "lru", "lookahead" };
    for (int p = 0; p < 2; p++) {
        cache c;
        cache_init(&c, names[p], &run, 4, 300);
        cache_fill(&c, bytes, 0);
        run_steps(&c, 0, run.steps - 12);
        size_t before = c.restores;
        run_steps(&c, run.steps - 12, run.steps);
        restores[p] = c.restores - before;
        cache_free(&c);
    }
    is_uint(restores[0], 12, "a cycle of 4 in room for 3: LRU restores at every step");
    is_uint(restores[1], 4, "lookahead, once it has learned the cycle, at one step in three (Belady)");

    /* Allocations the iteration never uses go first, least recently used first; then those
     * needed furthest ahead. */
    cache c;
    cache_init(&c, "lookahead", &run, 6, 1000);
    for (lms_alloc_id id = 1; id <= 4; id++)
        cache_alloc(&c, id, 100);
    run_steps(&c, 0, 38);              /* the last uses 2 */
    cache_alloc(&c, 6, 100);
    run_step(&c, 38);                  /* uses 3: next come 4, 1, 2, 3 */
    cache_alloc(&c, 5, 100);
    lms_alloc_id v[8];
    size_t n = lms_policy_choose_victims(c.policy, 450, NULL, NULL, v, 8);
    ok(n == 5 && v[0] == 6 && v[1] == 5 && v[2] == 3 && v[3] == 2 && v[4] == 1,
       "never used again first (6, idle longer than 5), then the furthest ahead: 3, 2, 1");
    cache_release(&c, 4);
    cache_release(&c, 6);
    n = lms_policy_choose_victims(c.policy, 250, NULL, NULL, v, 8);
    ok(n == 3 && v[0] == 5 && v[1] == 3 && v[2] == 2, "freed allocations are gone");
    cache_free(&c);
    free_schedule(&iter);
    free_schedule(&run);
}

/* Belady's choice and the prefetch order against the oracle on many small random loops. */
static void test_random_oracle(void)
{
    size_t trials = 300, checked = 0, wrong = 0, prefetch_checked = 0, prefetch_wrong = 0, bad = 0;
    size_t reuse_checked = 0, reuse_wrong = 0;
    for (size_t trial = 0; trial < trials; trial++) {
        size_t length = 2 + rnd(14), ids = 3 + rnd(10);
        if (ids > length)
            ids = length;
        schedule iter = { 0 }, run = { 0 };
        random_iteration(&iter, length, ids);
        size_t bytes[16], total = 0;
        for (size_t id = 1; id <= ids; id++)
            total += bytes[id] = 100 * (1 + rnd(4));
        size_t largest = largest_step(&iter, bytes);
        /* Learning takes two iterations and LMS_PERIOD_MIN_RUN steps, then one to record. */
        size_t warm = 4 + 20 / length, iterations = warm + 6;
        repeat(&run, &iter, 0, iter.steps, iterations);
        cache c;
        cache_init(&c, "lookahead", &run, ids, largest + rnd(total - largest + 1));
        cache_fill(&c, bytes, 0);
        run_steps(&c, 0, warm * length);
        c.oracle = 1;
        for (size_t t = warm * length; t < run.steps - 2 * length; t++) {
            const lms_alloc_id *used = run.ids + run.first[t];
            for (size_t i = 0; i < run.first[t + 1] - run.first[t]; i++, reuse_checked++)
                reuse_wrong += lms_policy_reuse_after_next(c.policy, used[i]) != next_use(&c, used[i], t + 1) - t;
            run_step(&c, t);
            lms_alloc_id got[16], expected[16];
            size_t room = rnd(3) ? rnd(total) : SIZE_MAX, window = rnd(3) ? rnd(total) : SIZE_MAX;
            size_t n = room == SIZE_MAX && window == SIZE_MAX
                           ? lms_policy_prefetch(c.policy, t + 2, got, 16)
                           : lms_policy_prefetch_within(c.policy, t + 2, room, window, got, 16);
            prefetch_checked++;
            prefetch_wrong += !same(got, n, expected, oracle_prefetch(&c, room, window, expected, 16));
            if (n && rnd(2)) /* brought back ahead of need: it counts against later windows */
                restore(&c, got[0], next_use(&c, got[0], t + 1));
        }
        checked += c.oracle_checked;
        wrong += c.oracle_wrong;
        bad += c.bad + !consistent(&c);
        cache_free(&c);
        free_schedule(&iter);
        free_schedule(&run);
    }
    ok(checked > 1000 && wrong == 0, "Belady's choice on %zu random loops: %zu of %zu choices differ from the oracle's",
       trials, wrong, checked);
    is_uint(prefetch_wrong, 0, "what to prefetch, in order and cut by room and window, is the oracle's in %zu cases",
            prefetch_checked);
    is_uint(bad, 0, "no victim or prefetch names an allocation it should not; the state stays consistent");
    ok(reuse_checked > 1000 && reuse_wrong == 0,
       "how soon the next step's allocations are used again after it: %zu of %zu answers differ from the oracle's",
       reuse_wrong, reuse_checked);
}

/* Appends the steps of `from` last to first. */
static void reversed(schedule *s, const schedule *from)
{
    for (size_t i = from->steps; i-- > 0;)
        repeat(s, from, i, i + 1, 1);
}

/* A loop (training), another over the same allocations (a test phase), then the first again:
 * at each change lookahead falls back to LRU at once, choice for choice, and learns anew. */
static void test_sequence_change(void)
{
    schedule a = { 0 }, b = { 0 }, tmp = { 0 }, run = { 0 };
    size_t ids = 12, bytes[13], total = 0;
    random_iteration(&a, 20, ids);
    random_iteration(&tmp, 13, ids);
    reversed(&b, &tmp);                /* it does not begin as a does */
    size_t la = a.steps, lb = b.steps, b_start = 10 * la, a_again = b_start + 12 * lb;
    repeat(&run, &a, 0, la, 10);
    repeat(&run, &b, 0, lb, 12);
    repeat(&run, &a, 0, la, 10);
    for (size_t id = 1; id <= ids; id++)
        total += bytes[id] = 100 * (1 + rnd(4));
    size_t largest = largest_step(&a, bytes) > largest_step(&b, bytes) ? largest_step(&a, bytes) : largest_step(&b, bytes);
    cache c;
    cache_init(&c, "lookahead", &run, ids, largest + (total - largest) / 2);
    cache_fill(&c, bytes, 1);
    /* (from, to, check): 1 the oracle's choices (the loop is known), 2 LRU's (it is not) */
    struct { size_t from, to; int check; } windows[] = {
        { 0, 6 * la, 0 }, { 6 * la, 8 * la, 1 }, { 8 * la, b_start + 1, 0 },
        { b_start + 1, b_start + lb, 2 }, { b_start + lb, b_start + 8 * lb, 0 },
        { b_start + 8 * lb, b_start + 10 * lb, 1 }, { b_start + 10 * lb, a_again + 1, 0 },
        { a_again + 1, a_again + la, 2 }, { a_again + la, a_again + 6 * la, 0 },
        { a_again + 6 * la, a_again + 8 * la, 1 }, { a_again + 8 * la, run.steps, 0 },
    };
    size_t predicted[3] = { 0 }, predicts[3] = { 0 }, steps[3] = { 0 }, period_right[3] = { 0 };
    for (size_t w = 0; w < sizeof windows / sizeof *windows; w++) {
        c.oracle = windows[w].check == 1;
        c.compare_shadow = windows[w].check == 2;
        for (size_t t = windows[w].from; t < windows[w].to; t++) {
            run_step(&c, t);
            predicted[windows[w].check] += prefetch_count(&c) > 0;
            predicts[windows[w].check] += lms_policy_predicts(c.policy) != 0;
            size_t loop = t >= b_start && t < a_again ? lb : la;
            period_right[windows[w].check] += lms_policy_period(c.policy) == (windows[w].check == 2 ? 0 : loop);
            steps[windows[w].check]++;
        }
    }
    ok(c.oracle_checked > 20 && c.oracle_wrong == 0,
       "each loop, once learned, gets Belady's choice: %zu of %zu choices differ from the oracle's",
       c.oracle_wrong, c.oracle_checked);
    ok(c.shadow_checked > 10 && c.shadow_wrong == 0,
       "right after each change it is LRU: %zu of %zu choices differ from LRU's", c.shadow_wrong, c.shadow_checked);
    ok(predicted[1] == steps[1] && predicted[2] == 0,
       "it names what to prefetch after each of the %zu steps of a known loop, after none of the %zu after a change",
       steps[1], steps[2]);
    ok(predicts[1] == steps[1] && predicts[2] == 0,
       "it says it predicts after each of the %zu steps of a known loop, after none of the %zu after a change",
       steps[1], steps[2]);
    ok(period_right[1] == steps[1] && period_right[2] == steps[2],
       "it gives the known loop's length (%zu, then %zu, then %zu again) while it predicts, 0 after a change",
       la, lb, la);
    is_uint(c.bad, 0, "no wrong victim throughout");
    cache_free(&c);
    free_schedule(&a);
    free_schedule(&b);
    free_schedule(&tmp);
    free_schedule(&run);
}

/* A step that uses all it should and one allocation more: on the H100, cuDNN's split-K
 * reduction after a weight-gradient kernel sometimes carried that kernel's input pointer in a
 * parameter it does not read, and liblms (which reads every pointer-sized word) counted it a
 * use. The loop is the same: the policy keeps it, and still predicts after such a step. A step
 * that lacks an allocation it should use is a change of loop, as before. */
static void test_stray_use(void)
{
    size_t layers = 6, bytes[3 + 5 * 6], total = 0;
    schedule one = { 0 }, run = { 0 };
    size_t ids = training_iteration(&one, layers, bytes), length = one.steps;
    for (size_t id = 1; id <= ids; id++)
        total += bytes[id];
    size_t stray_step = layers + 2;  /* a backward step */
    lms_alloc_id stray = 1 + layers;   /* the first input: used in that iteration's first step */
    repeat(&run, &one, 0, length, 8);
    for (size_t it = 0; it < 6; it++) {
        repeat(&run, &one, 0, stray_step, 1);
        lms_alloc_id with[8];
        size_t n = one.first[stray_step + 1] - one.first[stray_step];
        memcpy(with, one.ids + one.first[stray_step], n * sizeof *with);
        with[n] = stray;
        add_step(&run, with, it % 2 ? n + 1 : n);  /* every other iteration */
        repeat(&run, &one, stray_step + 1, length, 1);
    }
    size_t strays_end = run.steps;
    repeat(&run, &one, 0, stray_step, 1);
    add_step(&run, one.ids + one.first[stray_step], one.first[stray_step + 1] - one.first[stray_step] - 1);
    repeat(&run, &one, stray_step + 1, stray_step + 2, 1);  /* found out when the next step begins */
    cache c;
    cache_init(&c, "lookahead", &run, ids, total / 2);
    cache_fill(&c, bytes, 1);
    run_steps(&c, 0, 8 * length);
    size_t predicts = 0, period_right = 0, starts = 0, starts_right = 0;
    for (size_t t = 8 * length; t < strays_end; t++) {
        run_step(&c, t);
        predicts += lms_policy_predicts(c.policy) != 0;
        period_right += lms_policy_period(c.policy) == length;
        starts += lms_policy_at_iteration_start(c.policy) != 0;
        starts_right += lms_policy_at_iteration_start(c.policy) && t % length == 0;
    }
    ok(predicts == strays_end - 8 * length && period_right == predicts,
       "a step with one allocation more than the loop's keeps the loop: predicting after %zu of %zu steps, "
       "its length known after %zu", predicts, strays_end - 8 * length, period_right);
    ok(starts == 6 && starts_right == 6, "it says where each of the 6 iterations starts (%zu, %zu at a start)",
       starts, starts_right);
    run_steps(&c, strays_end, run.steps);
    ok(lms_policy_period(c.policy) == 0 && !lms_policy_predicts(c.policy),
       "a step with one allocation fewer departs from it");
    ok(consistent(&c) && c.bad == 0, "no wrong victim throughout");
    cache_free(&c);
    free_schedule(&one);
    free_schedule(&run);
}

/* An iteration with a burst inside: one layer's backward pass in 40 tiles of 5 launches each
 * over the same few allocations, as cuDNN's FFT convolution launched some 12,000 kernels an
 * iteration on the H100 (unet3d). The burst repeats every 5 steps, but the loop is the whole
 * iteration: once it has seen it twice the policy keeps it, through every burst. */
static void test_inner_burst(void)
{
    size_t layers = 6, bytes[3 + 5 * 6], total = 0;
    schedule one = { 0 }, burst = { 0 }, run = { 0 };
    size_t ids = training_iteration(&one, layers, bytes);
    for (size_t id = 1; id <= ids; id++)
        total += bytes[id];
    size_t backward_2 = layers + (layers - 1 - 2);  /* layer 2's backward step */
    lms_alloc_id w = 1 + 2, x = 1 + layers + 2, g = 2 + 2 * layers + 2, g_next = g + 1, dw = 3 + 3 * layers + 2;
    const lms_alloc_id tiles[][2] = { { x, g_next }, { g_next, 0 }, { g_next, dw }, { w, g }, { g, 0 } };
    repeat(&burst, &one, 0, backward_2 + 1, 1);
    for (size_t r = 0; r < 40; r++)
        for (size_t t = 0; t < 5; t++)
            add_step(&burst, tiles[t], tiles[t][1] ? 2 : 1);
    repeat(&burst, &one, backward_2 + 1, one.steps, 1);
    size_t length = burst.steps;
    repeat(&run, &burst, 0, length, 10);
    cache c;
    cache_init(&c, "lookahead", &run, ids, total / 2);
    cache_fill(&c, bytes, 1);
    run_steps(&c, 0, 3 * length);
    size_t predicts = 0, period_right = 0;
    for (size_t t = 3 * length; t < run.steps; t++) {
        run_step(&c, t);
        predicts += lms_policy_predicts(c.policy) != 0;
        period_right += lms_policy_period(c.policy) == length;
    }
    ok(predicts == run.steps - 3 * length && period_right == predicts,
       "an iteration of %zu steps with a burst of 40 x 5 inside: the loop is the whole iteration, kept through "
       "every burst (predicting after %zu of %zu steps, the period right after %zu)", length, predicts,
       run.steps - 3 * length, period_right);
    ok(consistent(&c) && c.bad == 0, "no wrong victim throughout");
    cache_free(&c);
    free_schedule(&one);
    free_schedule(&burst);
    free_schedule(&run);
}

/* Prefetched allocations that the program then does not use (its loop changed) or frees cost
 * nothing but the copy: the policy stays consistent and learns the new loop. */
static void test_wrong_prefetch(void)
{
    schedule a = { 0 }, b = { 0 }, run = { 0 };
    size_t ids = 12, bytes[13], total = 0;
    random_iteration(&a, 20, ids);
    random_iteration(&b, 9, 6);        /* ids 1 to 6 only */
    repeat(&run, &a, 0, a.steps, 7);
    repeat(&run, &a, 0, a.steps / 2, 1);
    size_t change = run.steps;
    repeat(&run, &b, 0, b.steps, 14);
    for (size_t id = 1; id <= ids; id++)
        total += bytes[id] = 100 * (1 + rnd(4));
    size_t b_total = 0;
    for (size_t id = 1; id <= 6; id++)
        b_total += bytes[id];
    size_t capacity = largest_step(&b, bytes) + (b_total - largest_step(&b, bytes)) / 2;
    cache c;
    cache_init(&c, "lookahead", &run, ids, capacity > largest_step(&a, bytes) ? capacity : largest_step(&a, bytes));
    cache_fill(&c, bytes, 0);
    run_steps(&c, 0, change);
    c.window = SIZE_MAX;
    prefetch(&c);
    ok(c.prefetches > 0 && c.bad == 0 && consistent(&c), "%zu allocations prefetched for the loop learned",
       c.prefetches);
    int steady = 1;
    for (size_t t = change; t < change + 3 * b.steps; t++) {
        run_step(&c, t);
        steady &= consistent(&c);
    }
    ok(steady && c.bad == 0, "the loop changes: the prefetched are not used, and every step leaves the state consistent");
    for (lms_alloc_id id = 7; id <= ids; id++)
        cache_release(&c, id);
    ok(consistent(&c), "freeing them (resident or not) leaves it consistent");
    c.ids = 6; /* the oracle looks at the live ones only */
    run_steps(&c, change + 3 * b.steps, run.steps - 4 * b.steps);
    c.oracle = 1;
    run_steps(&c, run.steps - 4 * b.steps, run.steps - 2 * b.steps);
    ok(c.bad == 0 && c.oracle_checked > 0 && c.oracle_wrong == 0 && consistent(&c),
       "the new loop is learned: %zu of %zu choices differ from the oracle's", c.oracle_wrong, c.oracle_checked);
    cache_free(&c);
    free_schedule(&a);
    free_schedule(&b);
    free_schedule(&run);
}

/* Restoring what prefetch_within names, in order, never evicts what is needed sooner. With a
 * window of a few allocations it takes the restores off the steps for a few more copies;
 * without one it fills the cache with what is needed soon and evicts more for it. */
static void test_prefetch_no_harm(void)
{
    schedule iter = { 0 }, run = { 0 };
    size_t bytes[2 + 5 * 30 + 1], total = 0;
    size_t ids = training_iteration(&iter, 30, bytes);
    for (size_t id = 1; id <= ids; id++)
        total += bytes[id];
    repeat(&run, &iter, 0, iter.steps, 12);
    size_t windows[3] = { 0, 4 * 4000, SIZE_MAX }; /* none, four of the largest, no limit */
    size_t demand[3], moved[3], harmful = 0, bad = 0;
    for (int w = 0; w < 3; w++) {
        cache c;
        cache_init(&c, "lookahead", &run, ids, total * 2 / 5);
        cache_fill(&c, bytes, 0);
        run_steps(&c, 0, 6 * iter.steps);
        c.prefetch = 1;
        c.window = windows[w];
        size_t restores = c.restores, prefetches = c.prefetches;
        run_steps(&c, 6 * iter.steps, run.steps);
        demand[w] = c.restores - restores;
        moved[w] = demand[w] + c.prefetches - prefetches;
        harmful += c.harmful;
        bad += c.bad + c.ooms;
        cache_free(&c);
    }
    diag("a training loop in 40%% of its memory, 6 iterations: restores on demand, in all: %zu, %zu without "
         "prefetch; %zu, %zu with a window of 4 allocations; %zu, %zu without a window",
         demand[0], moved[0], demand[1], moved[1], demand[2], moved[2]);
    ok(harmful == 0 && bad == 0, "no eviction to make room for a prefetch takes what is needed sooner");
    ok(demand[1] <= demand[0] / 10 && moved[1] <= moved[0] * 11 / 10,
       "a window of 4 allocations takes %zu of %zu restores off the steps for %zu more copies",
       demand[0] - demand[1], demand[0], moved[1] - moved[0]);
    free_schedule(&iter);
    free_schedule(&run);
}

/* ---- a recorded sequence ---- */

typedef struct event { char op; lms_alloc_id id; size_t bytes; } event; /* 'a', 'f' or 'u' */

typedef struct recorded {
    schedule steps;     /* the u lines */
    event *events;
    size_t count, cap, ids;
    size_t *bytes;      /* each allocation's size */
} recorded;

static int read_recorded(recorded *r, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        if (line[0] != 'a' && line[0] != 'f' && line[0] != 'u')
            continue;
        r->events = grow(r->events, &r->cap, r->count + 1, sizeof *r->events);
        event *e = &r->events[r->count++];
        char *p = line + 1, *end;
        *e = (event){ .op = line[0] };
        if (line[0] == 'u') {
            lms_alloc_id ids[512];
            size_t n = 0;
            for (unsigned long long v; n < 512 && (v = strtoull(p, &end, 10), end != p); p = end)
                ids[n++] = v;
            add_step(&r->steps, ids, n);
        } else {
            e->id = strtoull(p, &end, 10);
            e->bytes = strtoull(end, NULL, 10);
            if (e->id > r->ids)
                r->ids = e->id;
        }
    }
    fclose(f);
    r->bytes = calloc(r->ids + 1, sizeof *r->bytes);
    for (size_t i = 0; i < r->count; i++)
        if (r->events[i].op == 'a')
            r->bytes[r->events[i].id] = r->events[i].bytes;
    return r->bytes != NULL;
}

/* Replays the recording; counts the steps after which the policy named something to
 * prefetch, and the stretches of them. */
static void replay_recorded(cache *c, const recorded *r, size_t *predicted, size_t *stretches)
{
    size_t step = 0;
    int was = 0;
    *predicted = *stretches = 0;
    for (size_t i = 0; i < r->count; i++) {
        const event *e = &r->events[i];
        if (e->op == 'a') {
            cache_alloc(c, e->id, e->bytes);
        } else if (e->op == 'f') {
            cache_release(c, e->id);
        } else {
            run_step(c, step++);
            int is = prefetch_count(c) > 0;
            *predicted += is;
            *stretches += is && !was;
            was = is;
        }
    }
}

/* The trainer's own sequence: twelve iterations of cifar10_quick with a test phase after six
 * and at the end. */
static void test_recorded(void)
{
    const char *dir = getenv("LMS_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/policy_lookahead_trainer.seq", dir ? dir : ".");
    recorded r = { 0 };
    if (!read_recorded(&r, path)) {
        ok(0, "cannot read %s", path);
        skip(1, "no recording");
        return;
    }
    size_t live = 0, peak = 0;
    for (size_t i = 0; i < r.count; i++) {
        live += r.events[i].op == 'a' ? r.events[i].bytes : 0;
        live -= r.events[i].op == 'f' ? r.bytes[r.events[i].id] : 0;
        peak = live > peak ? live : peak;
    }
    size_t capacity = largest_step(&r.steps, r.bytes);
    capacity = capacity > peak * 7 / 10 ? capacity : peak * 7 / 10;
    size_t restores[2], predicted[2], stretches[2], bad = 0;
    const char *names[2] = { "lru", "lookahead" };
    for (int p = 0; p < 2; p++) {
        cache c;
        cache_init(&c, names[p], &r.steps, r.ids, capacity);
        replay_recorded(&c, &r, &predicted[p], &stretches[p]);
        restores[p] = c.restores;
        bad += c.bad + c.ooms + !consistent(&c);
        cache_free(&c);
    }
    diag("recorded trainer run: %zu steps, peak %zu bytes, cache of 70%%: restores lru %zu, lookahead %zu; "
         "lookahead predicting after %zu steps in %zu stretches", r.steps.steps, peak, restores[0],
         restores[1], predicted[1], stretches[1]);
    ok(bad == 0 && stretches[1] == 2, "the recorded run: each training phase learned, dropped at its test phase");
    ok(restores[1] < restores[0], "lookahead restores less than LRU on it (%zu against %zu)", restores[1], restores[0]);
    free_schedule(&r.steps);
    free(r.events);
    free(r.bytes);
}

/* ---- the plan: Belady's evictions, each right after the last use before it ---- */

/* A loop of one-allocation steps, `order` (ids 1 to `ids`, 100 bytes each), in room for
 * `room` bytes, `loops` times over: the restores of its last `measured` loops, without the
 * plan ([0]) and with it ([1]), and with it, how many the plan evicted after each step of the
 * last loop (planned_last: one per step). Returns whether the plan was made and named only
 * resident allocations, and room never ran out. */
static int loop_restores(const lms_alloc_id *order, size_t steps, size_t ids, size_t room, size_t loops,
                         size_t measured, size_t restores[2], size_t *planned_last)
{
    schedule iter = { 0 }, run = { 0 };
    for (size_t i = 0; i < steps; i++)
        add_step(&iter, &order[i], 1);
    repeat(&run, &iter, 0, steps, loops);
    size_t *bytes = calloc(ids + 1, sizeof *bytes);
    for (size_t id = 1; id <= ids; id++)
        bytes[id] = 100;
    int planned_well = 0;
    for (int with_plan = 0; with_plan < 2; with_plan++) {
        cache c;
        cache_init(&c, "lookahead", &run, ids, room);
        c.plan = with_plan;
        c.planned_at = calloc(run.steps, sizeof *c.planned_at);
        cache_fill(&c, bytes, 0);
        run_steps(&c, 0, run.steps - measured * steps);
        size_t before = c.restores;
        run_steps(&c, run.steps - measured * steps, run.steps);
        restores[with_plan] = c.restores - before;
        if (with_plan) {
            for (size_t k = 0; k < steps; k++)
                planned_last[k] = c.planned_at[run.steps - steps + k];
            planned_well = c.bad == 0 && c.ooms == 0 && lms_policy_plans(c.policy);
        }
        free(c.planned_at);
        cache_free(&c);
    }
    free(bytes);
    free_schedule(&iter);
    free_schedule(&run);
    return planned_well;
}

/* Steps {1}, {2}, {3}, {2} in room for two: Belady's choice evicts 1 when 3 comes (needed
 * last), and 3 when 1 comes back: the plan evicts 1 after its use at step 0, and 3 after its
 * use at step 2, and no more is restored than without it. */
static void test_plan_small(void)
{
    const lms_alloc_id order[4] = { 1, 2, 3, 2 };
    size_t restores[2], planned[4];
    ok(loop_restores(order, 4, 3, 200, 12, 1, restores, planned),
       "the plan is made, and names only resident allocations");
    ok(planned[0] == 1 && planned[1] == 0 && planned[2] == 1 && planned[3] == 0,
       "the plan evicts after steps 0 and 2 of the loop: %zu %zu %zu %zu", planned[0], planned[1], planned[2], planned[3]);
    is_uint(restores[1], restores[0], "and restores as often as Belady's choice at need (2 a loop)");
}

/* Steps {1}, {2}, {3}, {4} in room for three. Belady's choice at need keeps a different pair
 * each loop, in a cycle of three loops that restores 4 allocations in all (133 bytes a loop).
 * The evictions of one loop, repeated every loop, restore 2 a loop: the plan follows the
 * replay's whole cycle, a loop of it after another, and restores as little. */
static void test_plan_cycle(void)
{
    const lms_alloc_id order[4] = { 1, 2, 3, 4 };
    size_t restores[2], planned[4];
    ok(loop_restores(order, 4, 4, 300, 30, 12, restores, planned), "a loop larger than the room gets a plan");
    is_uint(restores[0], 16, "Belady's choice at need restores 16 allocations in 12 loops");
    is_uint(restores[1], restores[0], "and so does the plan, which follows the cycle of its choices");
}

/* A training loop in 40% of its memory: the plan moves no more than Belady's choice at need,
 * and evicts most of it early; a loop with a step larger than the room gets a plan too. */
static void test_plan_training(void)
{
    schedule iter = { 0 }, run = { 0 };
    size_t layers = 50, ids = training_iteration(&iter, layers, NULL);
    size_t *bytes = calloc(ids + 1, sizeof *bytes), total = 0;
    training_iteration(&run, layers, bytes);
    for (size_t id = 1; id <= ids; id++)
        total += bytes[id];
    repeat(&run, &iter, 0, iter.steps, 5);
    size_t moved[2], planned = 0, evictions = 0;
    for (int with_plan = 0; with_plan < 2; with_plan++) {
        cache c;
        cache_init(&c, "lookahead", &run, ids, total * 2 / 5);
        c.plan = with_plan;
        cache_fill(&c, bytes, 0);
        run_steps(&c, 0, run.steps - iter.steps);
        size_t restores = c.restores, planned_before = c.planned, evictions_before = c.evictions;
        run_steps(&c, run.steps - iter.steps, run.steps);
        moved[with_plan] = c.restores - restores;
        if (with_plan) {
            planned = c.planned - planned_before;
            evictions = c.evictions - evictions_before;
            ok(c.bad == 0 && c.ooms == 0 && consistent(&c), "a training loop under the plan stays consistent");
        }
        cache_free(&c);
    }
    ok(moved[1] <= moved[0] && planned * 2 > evictions,
       "its plan restores no more than Belady's choice at need (%zu against %zu a loop), and %zu of its %zu "
       "evictions are planned", moved[1], moved[0], planned, evictions);
    cache c;
    cache_init(&c, "lookahead", &run, ids, largest_step(&iter, bytes) - 1);
    c.plan = 1;
    cache_fill(&c, bytes, 0);
    run_steps(&c, 0, run.steps);
    ok(c.planned > 0 && c.bad == 0 && lms_policy_plans(c.policy),
       "in less room than its largest step, the loop gets a plan all the same, which evicts only resident "
       "allocations (%zu planned evictions)", c.planned);
    cache_free(&c);
    free(bytes);
    free_schedule(&iter);
    free_schedule(&run);
}

/* ---- the plan, with the iteration's times ---- */

/* The allocation each use of the plan evicts after, as "id@position ...", an iteration of its
 * cycle after another, separated by " / ". */
static void plan_evictions(const lms_iteration *it, const lms_plan *p, char *out, size_t size)
{
    out[0] = 0;
    for (uint64_t copy = 0; copy < p->period; copy++) {
        const char *separator = copy ? " / " : "";
        for (size_t i = 0; i < it->id_count; i++) {
            size_t u = lms_idmap_find(&it->by_id, it->ids[i])->value;
            const lms_iteration_uses *uses = &it->uses[u];
            size_t step = 0;
            while (it->first[step + 1] <= i)
                step++;
            if (lms_plan_evicts_after(p, it, uses, step, copy)) {
                snprintf(out + strlen(out), size - strlen(out), "%s%llu@%zu", separator, (unsigned long long)it->ids[i], step);
                separator = " ";
            }
        }
    }
}

/* A candidate's rule (plan.h): Belady's where idle_copies is 0. */
typedef struct plan_rule {
    double idle_copies;
    int from_cycle;
} plan_rule;

/* The plans, as plan_evictions says them, of a loop of `steps` steps of one or two allocations
 * of 100 bytes each (a second id of 0: none), step s taking took_ns[s] (NULL: 10 ns each) and
 * a copy 15, in room for `capacity` bytes: one per rule. */
static void loop_plans(const lms_alloc_id (*loop)[2], const uint64_t *took_ns, size_t steps, uint64_t capacity,
                       const plan_rule *rules, size_t count, char (*said)[64])
{
    lms_iteration it = { 0 };
    uint64_t bytes[8], ends[8];
    if (steps > 8)
        bail_out("a loop of more than 8 steps");
    for (size_t s = 0; s < steps; s++) {
        lms_iteration_add_step(&it, loop[s], loop[s][1] ? 2 : 1);
        ends[s] = (s ? ends[s - 1] : 0) + (took_ns ? took_ns[s] : 10);
    }
    if (!lms_iteration_index(&it) || it.distinct > 8)
        bail_out("cannot index the loop");
    for (size_t u = 0; u < it.distinct; u++)
        bytes[u] = 100;
    for (size_t k = 0; k < count; k++) {
        lms_plan p = { 0 };
        lms_plan_times times = { ends, 0.15, rules[k].idle_copies, rules[k].from_cycle };
        if (!lms_plan_make(&p, &it, bytes, capacity, rules[k].idle_copies > 0 ? &times : NULL))
            bail_out("no plan");
        plan_evictions(&it, &p, said[k], sizeof said[k]);
        lms_plan_free(&p);
    }
    lms_iteration_clear(&it);
}

/* The replay itself, on the loop below from step 0, each step taking 10 ns and a copy out 15.
 * Five allocations in room for four: Belady's plan evicts 5 after step 1 and 1 after step 4,
 * then 4 after step 3, in a cycle of two iterations (three restores in two, as Belady's choice
 * at need). Wanting victims idle for one copy's time, it evicts 2 after step 0 instead (needed
 * as soon as 5, and idle longer), every iteration (a plan with times repeats one); for two
 * copies' time, few are idle enough and the plan evicts more. */
static void test_plan_victims(void)
{
    const lms_alloc_id loop[5][2] = { { 5, 2 }, { 5 }, { 4, 3 }, { 4 }, { 1 } };
    const plan_rule rules[3] = { { 0, 0 }, { 1, 0 }, { 2, 0 } };
    char said[3][64];
    loop_plans(loop, NULL, 5, 400, rules, 3, said);
    is_str(said[0], "5@1 1@4 / 4@3", "Belady's plan: 5 after step 1 and 1 after step 4, then 4 after step 3");
    is_str(said[1], "2@0", "victims idle for one copy: 2 after step 0, every iteration");
    is_str(said[2], "5@1 3@2 1@4", "victims idle for two: three evictions");
}

/* A timed plan keeps one iteration's evictions, every iteration; which iteration decides how
 * many. Four allocations, room for three, steps {2, 1} {4} {1, 3} {3, 1} of 10 ns each, a copy
 * out 15 ns. Belady's plan evicts 2 after step 0 and 3 after step 3, then 4 after step 1, in a
 * cycle of two iterations: three restores in two. From an empty device, victims idle for a
 * copy's time leave 1, 4 and 3 resident after the first iteration; the second evicts 4 to bring
 * 2 back (3 has not been idle that long), then 3 for 4 and 2 for 3: three restores, every
 * iteration. From the first iteration of Belady's cycle, which begins with 1, 2 and 3 resident,
 * the same rule evicts 3 for 4 and 2 for 3: 1 and 4 stay, and two are restored an iteration. */
static void test_plan_from_cycle(void)
{
    const lms_alloc_id loop[4][2] = { { 2, 1 }, { 4 }, { 1, 3 }, { 3, 1 } };
    const plan_rule rules[3] = { { 0, 0 }, { 1, 0 }, { 1, 1 } };
    char said[3][64];
    loop_plans(loop, NULL, 4, 300, rules, 3, said);
    is_str(said[0], "2@0 3@3 / 4@1", "Belady's plan: 2 and 3, then 4, in a cycle of two iterations");
    is_str(said[1], "2@0 4@1 3@3", "victims idle for a copy, from the second iteration: 2, 4 and 3");
    is_str(said[2], "2@0 3@3", "from the first of Belady's cycle: 2 and 3, every iteration");
}

/* A plan with times brings back, during a long step, what the next steps need, into room made
 * from an allocation idle long before and needed much later, as conv1's output comes back
 * during conv1's backward pass in training. Steps {1, 2} 20 ns, {1, 3} 10, {3} 60, {4, 3} 10,
 * {5} 10, {5, 2} 50, a copy 15 ns, room for four of the five. 1 is idle from step 1 to the
 * next iteration's step 0; Belady's choice brings it back there, into the room of 5, needed
 * furthest ahead (at step 4) and idle for a copy's time by the end of step 0: but 5 is in use
 * until step 5 ends, so 1's copy in waits for 5's copy out. The link idles during step 5,
 * which ends within four copies of 1's need: 1 comes back then, into the room of 4, idle since
 * step 3 and needed only at step 3, 90 ns after 1. */
static void test_plan_restore_ahead(void)
{
    const lms_alloc_id loop[6][2] = { { 1, 2 }, { 1, 3 }, { 3 }, { 4, 3 }, { 5 }, { 5, 2 } };
    const uint64_t took_ns[6] = { 20, 10, 60, 10, 10, 50 };
    const plan_rule rules[2] = { { 0, 0 }, { 1, 0 } };
    char said[2][64];
    loop_plans(loop, took_ns, 6, 400, rules, 2, said);
    is_str(said[0], "1@1 5@5 / 4@3", "Belady's plan: 1 after step 1, and 5 after step 5 to bring it back");
    is_str(said[1], "1@1 4@3", "with times: 4 after step 3 instead, and 1 comes back during step 5");
}

/* Steps {5, 2}, {5}, {4, 3}, {4}, {1} in room for four. Each step takes 10 ns and a copy out
 * 15 (0.15 ns a byte). Belady's plan evicts the victim needed furthest ahead right after its
 * last use, never 2 after step 0; replayed from step 0, it evicts 5 after step 1, idle for
 * less than a copy's time when the room is needed at step 4, where a plan that wants its
 * victims idle for one copy evicts 2 after step 0 instead. On this "device", iterations that
 * evict after step 0 take 50 ns, the others 60: once each candidate has been timed, a plan
 * that does is kept. */
static void test_plan_timed(void)
{
    schedule iter = { 0 }, run = { 0 };
    const lms_alloc_id loop[5][2] = { { 5, 2 }, { 5 }, { 4, 3 }, { 4 }, { 1 } };
    for (int i = 0; i < 5; i++)
        add_step(&iter, loop[i], loop[i][1] ? 2 : 1);
    repeat(&run, &iter, 0, 5, 40);
    size_t bytes[6] = { 0, 100, 100, 100, 100, 100 };
    cache c;
    cache_init(&c, "lookahead", &run, 5, 400);
    c.plan = 1;
    c.planned_at = calloc(run.steps, sizeof *c.planned_at);
    cache_fill(&c, bytes, 0);
    uint64_t generation = 0, previous = 0;
    size_t wanted = 0, timed_from = 0, starts = 0, started = 0, last_start = 0, belady_loops = 0;
    int given = 0;
    for (size_t t = 0; t < run.steps; t++) {
        run_step(&c, t);
        if (!given && !wanted && (wanted = lms_policy_steps_to_time(c.policy, &generation)))
            timed_from = t + 1;
        else if (!given && wanted && t + 1 == timed_from + wanted) {
            uint64_t *took = malloc(wanted * sizeof *took);
            for (size_t i = 0; i < wanted; i++)
                took[i] = 10;
            lms_policy_step_times(c.policy, generation + 1, took, wanted, 0.15);
            lms_policy_step_times(c.policy, generation, took, wanted - 1, 0.15);
            uint64_t again;
            ok(lms_policy_steps_to_time(c.policy, &again) == wanted && again == generation,
               "times for another iteration, or of another length, are ignored");
            lms_policy_step_times(c.policy, generation, took, wanted, 0.15);
            ok(lms_policy_steps_to_time(c.policy, &again) == 0, "once given, no more times are wanted");
            free(took);
            given = 1;
            for (size_t k = 0; k + 5 <= t; k += 5)
                belady_loops += c.planned_at[k] == 0 && c.planned_at[k + 1] + c.planned_at[k + 2] + c.planned_at[k + 3] +
                                                            c.planned_at[k + 4] > 0;
        }
        uint64_t ordinal = lms_policy_iteration_begins(c.policy);
        if (ordinal) {
            int after_step_0 = 0;
            for (size_t k = started; k < t; k++)
                after_step_0 |= k % 5 == 0 && c.planned_at[k];
            if (previous)
                lms_policy_iteration_took(c.policy, previous, after_step_0 ? 50 : 60);
            previous = ordinal;
            started = last_start = t;
            starts++;
        }
    }
    size_t last = run.steps - 5;
    ok(given && belady_loops > 0, "before the times, Belady's plan evicts, never after step 0 (%zu loops)", belady_loops);
    ok(starts >= 8 && last_start < last, "the candidates are timed, over %zu iterations, and then no more", starts);
    ok(c.planned_at[last] == 1 && c.bad == 0 && consistent(&c), "the plan kept evicts after step 0");
    free(c.planned_at);
    cache_free(&c);
    lms_policy *lru = lms_policy_create("lru");
    ok(lms_policy_steps_to_time(lru, &generation) == 0 && lms_policy_iteration_begins(lru) == 0,
       "lru wants no times");
    lms_policy_destroy(lru);
    free_schedule(&iter);
    free_schedule(&run);
}

/* Steps {1}, {2}, {3}, {4} in room for three, 60 iterations, on a "device" whose iterations
 * take 1 ms a restore, times `roomless` while the policy keeps no room free ahead of its
 * restores (lms_policy_room_to_keep). Writes the line that says which plan was kept into
 * `line`, and returns the room asked for at the end. */
static double run_plan_trial(double roomless, char *line, size_t size, size_t *bad)
{
    schedule iter = { 0 }, run = { 0 };
    lms_alloc_id order[4] = { 1, 2, 3, 4 };
    for (int i = 0; i < 4; i++)
        add_step(&iter, &order[i], 1);
    repeat(&run, &iter, 0, 4, 60);
    size_t bytes[5] = { 0, 100, 100, 100, 100 };
    cache c;
    cache_init(&c, "lookahead", &run, 4, 300);
    c.plan = 1;
    cache_fill(&c, bytes, 0);
    uint64_t generation = 0, previous = 0;
    size_t wanted = 0, timed_from = 0, restores_then = 0;
    double room_then = 0;
    int given = 0;
    snprintf(line, size, "%s", "");
    for (size_t t = 0; t < run.steps; t++) {
        run_step(&c, t);
        if (!given && !wanted && (wanted = lms_policy_steps_to_time(c.policy, &generation))) {
            timed_from = t + 1;
        } else if (!given && wanted && t + 1 == timed_from + wanted) {
            const uint64_t took[4] = { 10, 10, 10, 10 };
            lms_policy_step_times(c.policy, generation, took, wanted, 0.15);
            given = 1;
        }
        uint64_t ordinal = lms_policy_iteration_begins(c.policy);
        if (ordinal) {
            double ms = (double)(c.restores - restores_then) * (room_then > 0 ? 1 : roomless);
            if (previous)
                lms_policy_iteration_took(c.policy, previous, (uint64_t)(ms * 1e6));
            previous = ordinal;
            restores_then = c.restores;
            room_then = lms_policy_room_to_keep(c.policy);
        }
        char said[256];
        if (lms_policy_plan_chosen(c.policy, said, sizeof said))
            snprintf(line, size, "%s", said);
    }
    double room = lms_policy_room_to_keep(c.policy);
    *bad = c.bad;
    cache_free(&c);
    free_schedule(&iter);
    free_schedule(&run);
    return room;
}

/* Belady's plan restores 4 in its cycle of three iterations, 1 or 2 in each: it is timed over
 * the whole cycle (1.333 ms), and kept against the plans with times, which repeat one
 * iteration's evictions, and against itself with no room kept free, as fast. */
static void test_plan_timed_cycle(void)
{
    char line[256];
    size_t bad;
    double room = run_plan_trial(1, line, sizeof line, &bad);
    ok(strstr(line, "kept Belady's plan (iterations timed: Belady's 1.333 ms, over its cycle of 3;") == line &&
           strstr(line, "; with no room kept free 1.333 ms)") && room > 0 && bad == 0,
       "Belady's plan is timed over its cycle, and kept: %s", line);
}

/* The trial's last candidate is its fastest plan with no room kept free ahead of restores:
 * kept where the device runs it faster, and then the policy asks for no room. */
static void test_plan_without_room(void)
{
    char line[256];
    size_t bad;
    double room = run_plan_trial(0.5, line, sizeof line, &bad);
    ok(strstr(line, "kept Belady's plan with no room kept free (iterations timed: Belady's 1.333 ms") == line &&
           strstr(line, "; with no room kept free 0.667 ms)") && room == 0 && bad == 0,
       "the fastest plan without room kept free is kept where it is faster, and no room is asked for: %s", line);
    room = run_plan_trial(2, line, sizeof line, &bad);
    ok(strstr(line, "kept Belady's plan (") == line && room > 0 && bad == 0, "and not where it is slower: %s", line);
}

/* ---- cost ---- */

typedef struct measured { size_t restores, last_restores, predicted; double choose_ns, use_ns; } measured;

/* Runs `iterations` of a training loop of `layers` layers in 40% of its memory. */
static measured run_training(const char *policy, size_t layers, size_t iterations, int with_plan)
{
    schedule iter = { 0 }, run = { 0 };
    size_t ids = training_iteration(&iter, layers, NULL);
    size_t *bytes = calloc(ids + 1, sizeof *bytes), total = 0;
    training_iteration(&run, layers, bytes);
    for (size_t id = 1; id <= ids; id++)
        total += bytes[id];
    repeat(&run, &iter, 0, iter.steps, iterations - 1);
    cache c;
    cache_init(&c, policy, &run, ids, total * 2 / 5);
    c.plan = with_plan;
    cache_fill(&c, bytes, 0);
    run_steps(&c, 0, run.steps - iter.steps);
    size_t before = c.restores;
    run_steps(&c, run.steps - iter.steps, run.steps);
    measured m = { .restores = c.restores, .last_restores = c.restores - before,
                   .predicted = prefetch_count(&c), .choose_ns = (double)c.choose_ns / (c.chooses ? c.chooses : 1),
                   .use_ns = (double)c.policy_ns / c.uses };
    if (c.bad || c.ooms)
        m.restores = NONE;
    cache_free(&c);
    free(bytes);
    free_schedule(&iter);
    free_schedule(&run);
    return m;
}

/* 10^5 calls and more: what a choice and a step cost. Timings are diagnostics only. */
static void test_cost(void)
{
    measured lru = run_training("lru", 1000, 10, 0), la = run_training("lookahead", 1000, 10, 0);
    diag("training loop, 1000 layers (11000 uses an iteration), 10 iterations: lru %.0f ns per choice, "
         "%.0f ns per use; lookahead %.0f ns per choice, %.0f ns per use (restores, evictions and uses "
         "told, over uses)", lru.choose_ns, lru.use_ns, la.choose_ns, la.use_ns);
    ok(la.restores != NONE && la.predicted > 0 && la.last_restores < lru.last_restores,
       "110000 uses: lookahead learns the loop and restores less in its last iteration (%zu against LRU's %zu)",
       la.last_restores, lru.last_restores);
    lru = run_training("lru", 9000, 4, 0);
    la = run_training("lookahead", 9000, 4, 0);
    diag("training loop, 9000 layers (99000 uses in 27000 steps an iteration), 4 iterations: lru %.0f ns per "
         "choice, %.0f ns per use; lookahead %.0f ns per choice, %.0f ns per use", lru.choose_ns, lru.use_ns,
         la.choose_ns, la.use_ns);
    ok(la.restores != NONE && la.predicted > 0 && la.last_restores < lru.last_restores,
       "an iteration of 99000 uses: learned by the fourth (%zu restores in it against LRU's %zu)",
       la.last_restores, lru.last_restores);
    measured planned = run_training("lookahead", 9000, 4, 1);
    diag("the same with the plan (made once, a replay up to its cycle, then asked after every step): "
         "%.0f ns per use", planned.use_ns);
    ok(planned.restores != NONE && planned.last_restores <= la.last_restores,
       "with the plan, the fourth iteration restores no more (%zu against %zu)", planned.last_restores,
       la.last_restores);

    /* A timed plan of that iteration: each candidate is made once, when its trial begins. */
    schedule iter = { 0 };
    size_t ids = training_iteration(&iter, 9000, NULL);
    size_t *sizes = calloc(ids + 1, sizeof *sizes), total = 0;
    schedule sized = { 0 };
    training_iteration(&sized, 9000, sizes);
    lms_iteration it = { 0 };
    for (size_t t = 0; t < iter.steps; t++)
        lms_iteration_add_step(&it, iter.ids + iter.first[t], iter.first[t + 1] - iter.first[t]);
    uint64_t *bytes = calloc(ids + 1, sizeof *bytes), *ends = calloc(iter.steps, sizeof *ends);
    if (!sizes || !bytes || !ends || !lms_iteration_index(&it))
        bail_out("out of memory");
    for (size_t i = 0; i < it.id_count; i++) {
        size_t u = lms_idmap_find(&it.by_id, it.ids[i])->value;
        bytes[u] = sizes[it.ids[i]];
    }
    for (size_t u = 0; u < it.distinct; u++)
        total += bytes[u];
    for (size_t t = 0; t < iter.steps; t++)
        ends[t] = 1000 * (t + 1);
    lms_plan p = { 0 };
    lms_plan_times times = { ends, 1e-3, 1, 0 };
    uint64_t t0 = now_ns();
    int made = lms_plan_make(&p, &it, bytes, total * 2 / 5, &times);
    diag("its plan with times, victims idle for a copy's time: made in %.1f ms", (now_ns() - t0) / 1e6);
    ok(made && lms_plan_applies(&p), "the timed plan of an iteration of 27000 steps is made");
    lms_plan_free(&p);
    lms_iteration_clear(&it);
    free(bytes);
    free(ends);
    free(sizes);
    free_schedule(&iter);
    free_schedule(&sized);
}

int main(void)
{
    plan(65);
    test_names();
    test_lru_until_learned();
    test_cycle();
    test_random_oracle();
    test_sequence_change();
    test_stray_use();
    test_inner_burst();
    test_wrong_prefetch();
    test_prefetch_no_harm();
    test_recorded();
    test_plan_small();
    test_plan_cycle();
    test_plan_training();
    test_plan_victims();
    test_plan_from_cycle();
    test_plan_restore_ahead();
    test_plan_timed();
    test_plan_timed_cycle();
    test_plan_without_room();
    test_cost();
    return exit_status();
}
