#include "preload/fork.h"

#include "preload/graphs.h"
#include "preload/pointer_arrays.h"
#include "preload/residency.h"

#include <pthread.h>
#include <stddef.h>

/* Each module's locks, outermost first: a lock of one module is only ever taken while
 * holding locks of modules above it (the residency locks, every device's, the table's and
 * the host backing pool's, in that order, are held while graphs record a capture's uses;
 * launches learn their parameter layout before the residency locks). */
static const struct {
    void (*lock)(void);
    void (*unlock)(void);
} modules[] = {
    { lms_residency_fork_lock, lms_residency_fork_unlock },
    { lms_graphs_fork_lock, lms_graphs_fork_unlock },
    { lms_launch_scan_fork_lock, lms_launch_scan_fork_unlock },
    { lms_pointer_arrays_fork_lock, lms_pointer_arrays_fork_unlock }, /* taken alone */
};
#define MODULE_COUNT (sizeof modules / sizeof *modules)

static void lock_all(void)
{
    for (size_t i = 0; i < MODULE_COUNT; i++)
        modules[i].lock();
}

static void unlock_all(void)
{
    for (size_t i = MODULE_COUNT; i-- > 0;)
        modules[i].unlock();
}

void lms_fork_protect(void)
{
    pthread_atfork(lock_all, unlock_all, unlock_all);
}
