/* Modules and libraries: kernels loaded from host shared objects (sim/sim_module.h), as the
 * real driver loads cubins.
 *
 * cuModuleLoad (into the current context) and cuLibraryLoadFromFile (context-independent)
 * dlopen the object and make a kernel slot (kernels.c) for every kernel of its table: a
 * CUfunction for a module, a CUkernel for a library. The "image" of cuModuleLoadData and
 * cuLibraryLoadData is a path too. Unloading waits for the launches of the module's kernels
 * already queued, then frees their slots and the module's own: like kernel slots, module
 * slots are handed out again, the last freed first, as the real driver may reuse a handle. */
#include "sim/sim_internal.h"

#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct cd_module {
    bool live;                  /* false: a free slot, or being unloaded */
    bool is_library;            /* CUlibrary, else CUmodule */
    char *path;
    void *object;               /* from dlopen */
    const sim_module *table;
    cd_kernel **kernels;        /* [table->kernel_count], in table order */
    struct cd_module *next;     /* every slot, live or free */
    struct cd_module *next_free;
} cd_module;

static cd_module *modules, *free_modules;

/* What is wrong with a module's table, in why[]; false when nothing is. */
static bool table_is_bad(const sim_module *table, char *why, size_t size)
{
    if (table->abi != SIM_MODULE_ABI) {
        snprintf(why, size, "ABI %u, expected %u", table->abi, SIM_MODULE_ABI);
        return true;
    }
    if (table->kernel_count < 0 || (table->kernel_count > 0 && !table->kernels)) {
        snprintf(why, size, "no table of %d kernels", table->kernel_count);
        return true;
    }
    for (int i = 0; i < table->kernel_count; i++) {
        const sim_module_kernel *k = &table->kernels[i];
        if (!k->name || !k->fn) {
            snprintf(why, size, "kernel %d has no name or no function", i);
            return true;
        }
        if (k->param_count < 0 || k->param_count > SIM_MAX_KERNEL_PARAMS ||
            (k->param_count > 0 && !k->param_sizes)) {
            snprintf(why, size, "kernel %s has %d parameters, at most %d allowed", k->name,
                     k->param_count, SIM_MAX_KERNEL_PARAMS);
            return true;
        }
        for (int j = 0; j < i; j++) {
            if (!strcmp(table->kernels[j].name, k->name)) {
                snprintf(why, size, "two kernels are named %s", k->name);
                return true;
            }
        }
    }
    return false;
}

/* Whether an image is a path, and not a real cubin or fatbin (cudart hands its fatbins to
 * cuLibraryLoadData): printable text, short enough. */
static bool is_path(const char *image)
{
    size_t n = 0;
    while (n < PATH_MAX && image[n] && isprint((unsigned char)image[n]))
        n++;
    return n > 0 && !image[n];
}

/* Opens the object at path and reads its table: FILE_NOT_FOUND, or INVALID_IMAGE for
 * anything that is not a module of this ABI; each with a log line naming the path. */
static CUresult open_object(const char *path, const char *entry, void **object,
                            const sim_module **table)
{
    if (!is_path(path)) {
        cd_log("%s: the image is not a path (the simulator loads host modules by path, not "
               "cubins): CUDA_ERROR_INVALID_IMAGE", entry);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    if (access(path, R_OK) != 0) {
        cd_log("%s(%s): %s: CUDA_ERROR_FILE_NOT_FOUND", entry, path, strerror(errno));
        return CUDA_ERROR_FILE_NOT_FOUND;
    }
    /* dlopen looks for a name without a slash on the library path; the driver opens a
     * module file relative to the working directory. */
    char *local = malloc(strlen(path) + 3);
    if (!local)
        return CUDA_ERROR_OUT_OF_MEMORY;
    sprintf(local, "%s%s", strchr(path, '/') ? "" : "./", path);
    *object = dlopen(local, RTLD_NOW | RTLD_LOCAL);
    free(local);
    if (!*object) {
        cd_log("%s(%s): not a module: %s: CUDA_ERROR_INVALID_IMAGE", entry, path, dlerror());
        return CUDA_ERROR_INVALID_IMAGE;
    }
    char why[160] = "no symbol " SIM_MODULE_SYMBOL;
    *table = dlsym(*object, SIM_MODULE_SYMBOL);
    if (!*table || table_is_bad(*table, why, sizeof why)) {
        cd_log("%s(%s): not a module: %s: CUDA_ERROR_INVALID_IMAGE", entry, path, why);
        dlclose(*object);
        return CUDA_ERROR_INVALID_IMAGE;
    }
    return CUDA_SUCCESS;
}

/* Gives back what a module slot holds, and the slot. */
static void free_module_locked(cd_module *m)
{
    free(m->path);
    free(m->kernels);
    m->live = false;
    m->next_free = free_modules;
    free_modules = m;
}

static CUresult add_module_locked(const char *path, bool is_library, void *object,
                                  const sim_module *table, cd_module **out)
{
    cd_module *m = free_modules;
    if (m) {
        free_modules = m->next_free;
    } else {
        if (!(m = calloc(1, sizeof *m)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        m->next = modules;
        modules = m;
    }
    m->live = true;
    m->is_library = is_library;
    m->object = object;
    m->table = table;
    m->path = strdup(path);
    m->kernels = calloc((size_t)table->kernel_count + 1, sizeof *m->kernels);
    int made = 0;
    while (m->path && m->kernels && made < table->kernel_count &&
           (m->kernels[made] = cd_kernel_add_locked(&table->kernels[made], !is_library)))
        made++;
    if (!m->path || !m->kernels || made < table->kernel_count) {
        cd_kernels_remove_locked(m->kernels, made);
        free_module_locked(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = m;
    return CUDA_SUCCESS;
}

static CUresult load(void *handle, const char *path, bool is_library, const char *entry)
{
    if (!handle || !path)
        return CUDA_ERROR_INVALID_VALUE;
    if (!is_library) {
        cd_ctx *ctx;
        CUresult result = cd_current_ctx(&ctx);
        if (result != CUDA_SUCCESS)
            return result;
    }
    void *object;
    const sim_module *table;
    CUresult result = open_object(path, entry, &object, &table);
    if (result != CUDA_SUCCESS)
        return result;
    cd_module *m;
    pthread_mutex_lock(&cd.lock);
    result = add_module_locked(path, is_library, object, table, &m);
    pthread_mutex_unlock(&cd.lock);
    if (result != CUDA_SUCCESS) {
        dlclose(object);
        return result;
    }
    if (is_library)
        *(CUlibrary *)handle = (CUlibrary)m;
    else
        *(CUmodule *)handle = (CUmodule)m;
    return CUDA_SUCCESS;
}

static cd_module *find_module_locked(const void *handle, bool is_library, const char *entry)
{
    for (cd_module *m = modules; m; m = m->next)
        if ((const void *)m == handle && m->live && m->is_library == is_library)
            return m;
    cd_log("%s: %p is not a loaded %s: CUDA_ERROR_INVALID_HANDLE", entry, handle,
           is_library ? "library" : "module");
    return NULL;
}

static CUresult get_kernel(const void *handle, bool is_library, const char *name,
                           cd_kernel **kernel, const char *entry)
{
    CUresult result = CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&cd.lock);
    const cd_module *m = find_module_locked(handle, is_library, entry);
    for (int i = 0; m && i < m->table->kernel_count; i++) {
        if (!strcmp(m->table->kernels[i].name, name)) {
            *kernel = m->kernels[i];
            result = CUDA_SUCCESS;
        }
    }
    if (m && result != CUDA_SUCCESS) {
        cd_log("%s: no kernel %s in %s: CUDA_ERROR_NOT_FOUND", entry, name, m->path);
        result = CUDA_ERROR_NOT_FOUND;
    }
    pthread_mutex_unlock(&cd.lock);
    return result;
}

/* Waits for the queued launches of the module's kernels, then frees it: its handles, and
 * those of its kernels, are dead from then on, until a later load is given them again. */
static CUresult unload(const void *handle, bool is_library, const char *entry)
{
    pthread_mutex_lock(&cd.lock);
    cd_module *m = find_module_locked(handle, is_library, entry);
    void *object = m ? m->object : NULL;
    if (m) {
        m->live = false; /* a second unload meanwhile finds nothing */
        while (cd_kernels_queued_locked(m->kernels, m->table->kernel_count))
            pthread_cond_wait(&cd.progress, &cd.lock);
        /* In virtual time the launches' ends are not kept per module: wait for the device. */
        for (int d = 0; d < cd.device_count; d++)
            cd_host_wait_until(cd_device_vt_end_locked(d));
        cd_kernels_remove_locked(m->kernels, m->table->kernel_count);
        free_module_locked(m);
    }
    pthread_mutex_unlock(&cd.lock);
    if (!object)
        return CUDA_ERROR_INVALID_HANDLE;
    dlclose(object);
    return CUDA_SUCCESS;
}

CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    CD_ENTER("cuModuleLoad");
    return load(module, fname, false, "cuModuleLoad");
}

CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    CD_ENTER("cuModuleLoadData");
    return load(module, image, false, "cuModuleLoadData");
}

CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    CD_ENTER("cuModuleGetFunction");
    if (!hfunc || !name)
        return CUDA_ERROR_INVALID_VALUE;
    cd_ctx *ctx;
    cd_kernel *function;
    CUresult result = cd_current_ctx(&ctx);
    if (result == CUDA_SUCCESS)
        result = get_kernel(hmod, false, name, &function, "cuModuleGetFunction");
    if (result == CUDA_SUCCESS)
        *hfunc = (CUfunction)function;
    return result;
}

CUresult cuModuleUnload(CUmodule hmod)
{
    CD_ENTER("cuModuleUnload");
    cd_ctx *ctx;
    CUresult result = cd_current_ctx(&ctx);
    if (result != CUDA_SUCCESS)
        return result;
    return unload(hmod, false, "cuModuleUnload");
}

/* JIT and library options are accepted and ignored: there is nothing to compile. */
CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName, CUjit_option *jitOptions,
                               void **jitOptionsValues, unsigned int numJitOptions,
                               CUlibraryOption *libraryOptions, void **libraryOptionValues,
                               unsigned int numLibraryOptions)
{
    CD_ENTER("cuLibraryLoadFromFile");
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    return load(library, fileName, true, "cuLibraryLoadFromFile");
}

CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
                           void **jitOptionsValues, unsigned int numJitOptions,
                           CUlibraryOption *libraryOptions, void **libraryOptionValues,
                           unsigned int numLibraryOptions)
{
    CD_ENTER("cuLibraryLoadData");
    (void)jitOptions, (void)jitOptionsValues, (void)numJitOptions;
    (void)libraryOptions, (void)libraryOptionValues, (void)numLibraryOptions;
    return load(library, code, true, "cuLibraryLoadData");
}

CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
    CD_ENTER("cuLibraryGetKernel");
    if (!pKernel || !name)
        return CUDA_ERROR_INVALID_VALUE;
    cd_kernel *kernel;
    CUresult result = get_kernel(library, true, name, &kernel, "cuLibraryGetKernel");
    if (result == CUDA_SUCCESS)
        *pKernel = (CUkernel)kernel;
    return result;
}

CUresult cuLibraryUnload(CUlibrary library)
{
    CD_ENTER("cuLibraryUnload");
    return unload(library, true, "cuLibraryUnload");
}
