/* Finding the simulated GPU and its driver entry points (sim_driver.h). */
#include "trainer/sim_driver.h"

#include <dlfcn.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIM_LIBRARY "libcuda.so.1"
#define MODULE_FILE "trainer_sim_kernels.so"

SimDriver driver;

/* The directory of the running executable. */
static int exe_dir(char *dir, size_t size, char *err, size_t errlen)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0) {
        snprintf(err, errlen, "cannot read /proc/self/exe: %s", strerror(errno));
        return -1;
    }
    exe[n] = '\0';
    snprintf(dir, size, "%s", dirname(exe));
    return 0;
}

/* dir/name into out; -1 when it does not fit. */
static int join(char *out, size_t size, const char *dir, const char *name)
{
    int n = snprintf(out, size, "%s/%s", dir, name);
    return n >= 0 && (size_t)n < size ? 0 : -1;
}

/* Whether dir holds file; then its canonical form is in real. */
static int holds(const char *dir, const char *file, char real[PATH_MAX])
{
    char path[PATH_MAX];
    return join(path, sizeof path, dir, file) == 0 && access(path, R_OK) == 0 && realpath(dir, real);
}

/* The first of D/installed and D/built (D: the executable's directory) that holds file, in
 * canonical form; -1 with both named in err when neither does. */
static int find_beside_exe(const char *installed, const char *built, const char *file, const char *what,
                           char *found, size_t size, char *err, size_t errlen)
{
    char dir[PATH_MAX], candidate[2][PATH_MAX], real[PATH_MAX];
    if (exe_dir(dir, sizeof dir, err, errlen)) return -1;
    const char *relative[2] = {installed, built};
    for (int i = 0; i < 2; i++) {
        if (join(candidate[i], sizeof candidate[i], dir, relative[i]) == 0 && holds(candidate[i], file, real)) {
            snprintf(found, size, "%s", real);
            return 0;
        }
    }
    snprintf(err, errlen, "%s (%s) is in neither %s nor %s", what, file, candidate[0], candidate[1]);
    return -1;
}

static int sim_dir(char *dir, size_t size, char *err, size_t errlen)
{
    const char *given = getenv("LMS_SIM_DIR");
    if (!given)
        return find_beside_exe("../lib/liblms/sim", "../sim", SIM_LIBRARY, "the simulated GPU", dir, size, err,
                               errlen);
    char real[PATH_MAX];
    if (!holds(given, SIM_LIBRARY, real)) {
        snprintf(err, errlen, "LMS_SIM_DIR=%s: no %s there", given, SIM_LIBRARY);
        return -1;
    }
    snprintf(dir, size, "%s", real);
    return 0;
}

int sim_driver_module_path(char *path, size_t size, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    if (find_beside_exe("../lib/liblms", ".", MODULE_FILE, "the trainer's kernels for the simulated GPU", dir,
                        sizeof dir, err, errlen))
        return -1;
    snprintf(path, size, "%s/%s", dir, MODULE_FILE);
    return 0;
}

/* Whether LD_LIBRARY_PATH's first directory is dir. */
static int leads_library_path(const char *dir)
{
    const char *list = getenv("LD_LIBRARY_PATH");
    if (!list) return 0;
    char first[PATH_MAX], real[PATH_MAX];
    snprintf(first, sizeof first, "%.*s", (int)strcspn(list, ":;"), list);
    return realpath(first, real) && !strcmp(real, dir);
}

static int is_simulator(void *library)
{
    return dlsym(library, "sim_calls") != NULL;
}

static const char *library_path(void *library)
{
    struct link_map *map = NULL;
    return dlinfo(library, RTLD_DI_LINKMAP, &map) == 0 && map ? map->l_name : SIM_LIBRARY;
}

int sim_driver_prepare(char **argv, char *err, size_t errlen)
{
    setenv("LMS_SIM_DEVICE", "h100", 0); /* the simulator reads it at cuInit */
    char dir[PATH_MAX];
    void *loaded = dlopen(SIM_LIBRARY, RTLD_NOW | RTLD_NOLOAD);
    if (loaded) {
        int ok = is_simulator(loaded);
        if (!ok && sim_dir(dir, sizeof dir, err, errlen) == 0)
            snprintf(err, errlen,
                     "--sim: another %s (%s) was loaded before the trainer started, by a preloaded library; "
                     "start the trainer with %s first on LD_LIBRARY_PATH (lms-run --sim does)",
                     SIM_LIBRARY, library_path(loaded), dir);
        dlclose(loaded);
        return ok ? 0 : -1;
    }
    if (sim_dir(dir, sizeof dir, err, errlen)) return -1;
    if (leads_library_path(dir)) return 0;
    const char *old = getenv("LD_LIBRARY_PATH");
    char *path = malloc(strlen(dir) + (old ? strlen(old) : 0) + 2);
    if (!path) {
        snprintf(err, errlen, "out of host memory");
        return -1;
    }
    sprintf(path, "%s%s%s", dir, old && *old ? ":" : "", old ? old : "");
    setenv("LD_LIBRARY_PATH", path, 1);
    free(path);
    execv("/proc/self/exe", argv);
    snprintf(err, errlen, "cannot re-execute the trainer with LD_LIBRARY_PATH=%s: %s", getenv("LD_LIBRARY_PATH"),
             strerror(errno));
    return -1;
}

int sim_driver_open(char *err, size_t errlen)
{
    void *library = dlopen(SIM_LIBRARY, RTLD_NOW); /* open for good, as cudart keeps the driver */
    if (!library) {
        snprintf(err, errlen, "cannot load the simulated GPU: %s", dlerror());
        return -1;
    }
    if (!is_simulator(library)) {
        snprintf(err, errlen, "%s is not the simulated GPU (LD_LIBRARY_PATH=%s)", library_path(library),
                 getenv("LD_LIBRARY_PATH") ? getenv("LD_LIBRARY_PATH") : "");
        return -1;
    }
    __typeof__(cuGetProcAddress_v2) *get_proc_address =
        (__typeof__(cuGetProcAddress_v2) *)dlsym(library, "cuGetProcAddress_v2");
    if (!get_proc_address) {
        snprintf(err, errlen, "%s has no cuGetProcAddress_v2", library_path(library));
        return -1;
    }
    static const struct {
        const char *name;
        void *field; /* a function pointer of driver */
    } entries[] = {
#define SIM_DRIVER_LOOKUP(name) {#name, &driver.name},
        SIM_DRIVER_ENTRIES(SIM_DRIVER_LOOKUP)
#undef SIM_DRIVER_LOOKUP
    };
    for (size_t i = 0; i < sizeof entries / sizeof *entries; i++) {
        void *fn = NULL;
        CUdriverProcAddressQueryResult status;
        if (get_proc_address(entries[i].name, &fn, CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT, &status) !=
                CUDA_SUCCESS ||
            status != CU_GET_PROC_ADDRESS_SUCCESS || !fn) {
            snprintf(err, errlen, "the simulated GPU has no %s", entries[i].name);
            return -1;
        }
        memcpy(entries[i].field, &fn, sizeof fn);
    }
    return 0;
}

void sim_driver_check(CUresult result, const char *call, const char *file, int line)
{
    if (result == CUDA_SUCCESS) return;
    const char *name = NULL;
    if (!driver.cuGetErrorName || driver.cuGetErrorName(result, &name) != CUDA_SUCCESS) name = "an unknown error";
    fprintf(stderr, "lms-trainer: CUDA driver error %s (%d) at %s:%d: %s\n", name, (int)result, file, line, call);
    exit(1);
}
