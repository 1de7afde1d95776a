/* The LRU policy chooses exact victim sequences. */
#include "policy/policy.h"
#include "tests/tap.h"

#include <stdio.h>
#include <string.h>

/* Formats victims as "a,b,c" for comparison. */
static const char *seq(const lms_alloc_id *ids, size_t n)
{
    static char buf[256];
    size_t len = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(buf + len, sizeof buf - len, "%s%llu", i ? "," : "",
                                (unsigned long long)ids[i]);
    return buf;
}

static int keep_id(void *ctx, lms_alloc_id id) { return id == *(lms_alloc_id *)ctx; }

static const char *choose(lms_policy *p, size_t bytes, lms_alloc_id *keep, size_t max)
{
    lms_alloc_id v[16];
    size_t n = lms_policy_choose_victims(p, bytes, keep ? keep_id : NULL, keep, v, max);
    return seq(v, n);
}

int main(void)
{
    plan(16);

    is_str(lms_policy_names[0], "lru", "lru is the first (default) policy");
    ok(lms_policy_create("nonesuch") == NULL, "an unknown name gives NULL");
    lms_policy *p = lms_policy_create("lru");
    ok(p != NULL, "lru is created");
    is_str(lms_policy_name(p), "lru", "it names itself");
    ok(!lms_policy_predicts(p), "it predicts nothing");

    is_str(choose(p, 1, NULL, 16), "", "no allocations: no victims");

    for (lms_alloc_id id = 1; id <= 5; id++)
        lms_policy_created(p, id, 100);
    is_str(choose(p, 250, NULL, 16), "1,2,3", "creation order: oldest first, until the bytes are met");
    is_str(choose(p, 250, NULL, 16), "1,2,3", "choosing changes nothing");

    lms_policy_used(p, 1, 1);
    lms_policy_used(p, 3, 2);
    is_str(choose(p, 500, NULL, 16), "2,4,5,1,3", "use moves to the back");
    is_str(choose(p, 500, NULL, 2), "2,4", "at most max victims");

    lms_alloc_id keep = 4;
    is_str(choose(p, 300, &keep, 16), "2,5,1", "kept allocations are skipped");

    lms_policy_evicted(p, 2);
    lms_policy_evicted(p, 5);
    lms_policy_used(p, 2, 3); /* an evicted allocation's use changes nothing */
    is_str(choose(p, 1000, NULL, 16), "4,1,3", "evicted allocations are not victims");

    lms_policy_restored(p, 5);
    is_str(choose(p, 1000, NULL, 16), "4,1,3,5", "a restore counts as the newest use");

    lms_policy_freed(p, 1);
    lms_policy_freed(p, 2);
    is_str(choose(p, 1000, NULL, 16), "4,3,5", "freed allocations are gone");

    lms_policy_created(p, 6, 1000);
    is_str(choose(p, 1000, NULL, 16), "4,3,5,6", "bytes accumulate across victims");
    is_str(choose(p, 1000, &keep, 16), "3,5,6", "keep and bytes together");

    lms_policy_destroy(p);
    return exit_status();
}
