#include "trainer/spawn.h"
#include "trainer/ranks.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Each rank's view of CUDA, comma-separated by local rank: handed from the trainer that starts
 * the ranks to the ranks, through mpirun's environment. */
#define RANK_DEVICES "LMS_TRAINER_RANK_DEVICES"

/* "--gpu 0,1" or "--gpu all", for messages. */
static void gpu_flag(const Config *cfg, char *buf, size_t size)
{
    int n = snprintf(buf, size, "--gpu %s", cfg->ngpus ? "" : "all");
    for (int i = 0; i < cfg->ngpus && n < (int)size; i++)
        n += snprintf(buf + n, size - (size_t)n, "%s%d", i ? "," : "", cfg->gpus[i]);
}

/* Entry `index` of a comma-separated list ("" past its end). */
static void list_entry(const char *list, int index, char *buf, size_t size)
{
    for (int i = 0; i < index && *list; i++) list += strcspn(list, ",") + (list[strcspn(list, ",")] == ',');
    snprintf(buf, size, "%.*s", (int)strcspn(list, ","), list);
}

/* The name CUDA_VISIBLE_DEVICES gives device `index` of this process's view, as the view of a
 * rank: the index itself where the variable is unset. */
static void view_entry(int index, char *buf, size_t size)
{
    const char *view = getenv("CUDA_VISIBLE_DEVICES");
    if (view) list_entry(view, index, buf, size);
    else snprintf(buf, size, "%d", index);
}

/* RANK_DEVICES for cfg's devices, or NULL (out of memory). */
static char *rank_devices(const Config *cfg)
{
    size_t size = (size_t)cfg->ngpus * 64 + 1, n = 0;
    char *list = malloc(size);
    for (int i = 0; list && i < cfg->ngpus; i++) {
        char entry[64];
        view_entry(cfg->gpus[i], entry, sizeof entry);
        n += (size_t)snprintf(list + n, size - n, "%s%s", i ? "," : "", entry);
    }
    return list;
}

/* mpirun -np N [-x LD_PRELOAD=...] TRAINER ARGS... --gpu 0: the added flag overrides the list
 * (the last --gpu counts), before any "--" that ends the options. */
static char **mpirun_argv(int ranks, const char *preload, const char *exe, char **argv, char *count,
                          size_t count_size)
{
    int argc = 0;
    while (argv[argc]) argc++;
    char **args = calloc((size_t)argc + 8, sizeof *args);
    if (!args) return NULL;
    snprintf(count, count_size, "%d", ranks);
    int n = 0, i = 1;
    args[n++] = "mpirun";
    args[n++] = "-np";
    args[n++] = count;
    if (preload) {
        args[n++] = "-x";
        args[n++] = (char *)preload;
    }
    args[n++] = (char *)exe;
    for (; i < argc && strcmp(argv[i], "--"); i++) args[n++] = argv[i];
    args[n++] = "--gpu";
    args[n++] = "0";
    for (; i < argc; i++) args[n++] = argv[i];
    return args;
}

int spawn_ranks(Config *cfg, int visible, char **argv, char *err, size_t errlen)
{
    char flag[CONFIG_MAX_GPUS * 12 + 8];
    gpu_flag(cfg, flag, sizeof flag);
    if (!cfg->ngpus) {
        if (visible <= 0) {
            snprintf(err, errlen, "--gpu all: no CUDA device is visible");
            return -1;
        }
        cfg->ngpus = visible < CONFIG_MAX_GPUS ? visible : CONFIG_MAX_GPUS;
        for (int i = 0; i < cfg->ngpus; i++) cfg->gpus[i] = i;
    }
    for (int i = 0; i < cfg->ngpus; i++)
        if (visible >= 0 && cfg->gpus[i] >= visible) {
            snprintf(err, errlen, "%s: device %d is not visible (this node shows %d CUDA device%s)", flag,
                     cfg->gpus[i], visible, visible == 1 ? "" : "s");
            return -1;
        }
    cfg->gpu = cfg->gpus[0];
    if (cfg->ngpus == 1) return 0;
    if (!ranks_built_with_mpi()) {
        snprintf(err, errlen, "%s: one rank per device needs MPI, but this trainer was built without it (install "
                 "Open MPI, libopenmpi-dev, and rebuild)", flag);
        return -1;
    }
    if (geteuid() == 0 && !(getenv("OMPI_ALLOW_RUN_AS_ROOT") && getenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"))) {
        snprintf(err, errlen, "%s: mpirun refuses to start ranks as root unless OMPI_ALLOW_RUN_AS_ROOT=1 and "
                 "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are set", flag);
        return -1;
    }
    char exe[PATH_MAX], count[16], *preload = NULL;
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[len > 0 ? len : 0] = '\0';
    /* The preloaded libraries (liblms) go to the ranks alone: in mpirun they would count
     * nothing, print empty statistics and take the name of this process's files (%p). */
    int preload_failed = getenv("LD_PRELOAD") && asprintf(&preload, "LD_PRELOAD=%s", getenv("LD_PRELOAD")) < 0;
    if (preload_failed) preload = NULL; /* asprintf leaves it undefined */
    char *devices = cfg->sim ? NULL : rank_devices(cfg);
    char **args = len > 0 && !preload_failed ? mpirun_argv(cfg->ngpus, preload, exe, argv, count, sizeof count) : NULL;
    if (args && (cfg->sim || (devices && !setenv(RANK_DEVICES, devices, 1)))) {
        unsetenv("LD_PRELOAD");
        fflush(NULL);
        execvp("mpirun", args);
        snprintf(err, errlen, "%s: cannot start Open MPI's mpirun: %s%s", flag, strerror(errno),
                 errno == ENOENT ? " (not on PATH; make deps installs it)" : "");
    } else {
        snprintf(err, errlen, "%s: cannot start the ranks: %s", flag, strerror(errno));
    }
    free(args);
    free(devices);
    free(preload);
    return -1;
}

void spawn_take_device(void)
{
    const char *devices = getenv(RANK_DEVICES), *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!devices || !local) return;
    char view[64];
    list_entry(devices, atoi(local), view, sizeof view);
    setenv("CUDA_VISIBLE_DEVICES", view, 1);
    unsetenv(RANK_DEVICES); /* what the rank starts is not one of the ranks */
}
