/* Modules and libraries (sim/sim_module.h): loading, launching, unloading, handle reuse and
 * errors, through the module API, the library API and cuGetProcAddress. The modules are
 * built beside this test: sim_test_module.so and sim_test_module_other.so. */
#include "tests/sim_testing.h"
#include "sim/sim_module.h"

#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <unistd.h>

static char module_path[PATH_MAX], other_path[PATH_MAX], simulator_path[PATH_MAX];
static char log_path[] = "/tmp/sim_modules_log.XXXXXX";
static CUdeviceptr data;
static CUstream stream;

/* The test modules lie beside this program; the simulator in ../sim. */
static void find_files(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n < 0)
        bail_out("readlink /proc/self/exe failed");
    exe[n] = '\0';
    const char *dir = dirname(exe);
    snprintf(module_path, sizeof module_path, "%s/sim_test_module.so", dir);
    snprintf(other_path, sizeof other_path, "%s/sim_test_module_other.so", dir);
    snprintf(simulator_path, sizeof simulator_path, "%s/../sim/libcuda.so.1", dir);
}

static CUresult launch_scale(CUfunction f, float factor)
{
    int n = 8;
    void *params[] = {&data, &factor, &n};
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

/* Sets data to 1..8, runs scale by 2 through f, and checks the result. */
static bool scale_works(CUfunction f)
{
    float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
    CHECK_CU(cuMemcpyHtoD_v2(data, in, sizeof in));
    if (launch_scale(f, 2) != CUDA_SUCCESS)
        return false;
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK_CU(cuMemcpyDtoH_v2(out, data, sizeof out));
    return out[0] == 2 && out[7] == 16;
}

/* Whether the parameters of a CUfunction (is_function) or CUkernel lie as expected. */
static bool layout_is(const void *handle, bool is_function, const size_t *offsets,
                      const size_t *sizes, int count)
{
    for (int i = 0; i < count; i++) {
        size_t offset = 99, size = 99;
        CUresult result =
            is_function ? cuFuncGetParamInfo((CUfunction)handle, (size_t)i, &offset, &size)
                        : cuKernelGetParamInfo((CUkernel)handle, (size_t)i, &offset, &size);
        if (result != CUDA_SUCCESS || offset != offsets[i] || size != sizes[i])
            return false;
    }
    return true;
}

static void *load_without_context(void *arg)
{
    CUmodule module;
    *(CUresult *)arg = cuModuleLoad(&module, module_path);
    return NULL;
}

static double ms_since(const struct timespec *start)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - start->tv_sec) * 1e3 +
           (double)(now.tv_nsec - start->tv_nsec) / 1e6;
}

static const size_t scale_offsets[] = {0, 8, 12}, scale_sizes[] = {8, 4, 4};

static void module_api(void)
{
    CUmodule module, again;
    CUfunction scale, same, slow;
    is_int(cuModuleLoad(&module, module_path), CUDA_SUCCESS, "cuModuleLoad of a module");
    CHECK_CU(cuModuleGetFunction(&scale, module, "scale"));
    CHECK_CU(cuModuleGetFunction(&same, module, "scale"));
    ok(same == scale, "cuModuleGetFunction gives the same handle twice");
    const char *name = NULL;
    CHECK_CU(cuFuncGetName(&name, scale));
    is_str(name, "scale", "cuFuncGetName names it");
    ok(layout_is(scale, true, scale_offsets, scale_sizes, 3),
       "cuFuncGetParamInfo gives the module's layout");
    is_int(cuKernelGetName(&name, (CUkernel)scale), CUDA_ERROR_INVALID_HANDLE,
           "a module's function is a CUfunction: cuKernelGetName answers INVALID_HANDLE");
    ok(scale_works(scale), "the function launches and runs");

    is_int(cuModuleLoadData(&again, module_path), CUDA_SUCCESS,
           "cuModuleLoadData with the path as its image");
    CHECK_CU(cuModuleGetFunction(&same, again, "scale"));
    ok(again != module && same != scale, "a second load has handles of its own");
    CHECK_CU(cuModuleUnload(again));

    /* Unloading waits for the module's launches already queued. */
    int value = 7, stored = 0;
    CUdeviceptr out = data;
    void *params[] = {&out, &value};
    CHECK_CU(cuModuleGetFunction(&slow, module, "slow_store"));
    CHECK_CU(cuMemsetD32_v2(data, 0, 1));
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    CHECK_CU(cuLaunchKernel(slow, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL));
    is_int(cuModuleUnload(module), CUDA_SUCCESS, "cuModuleUnload with a slow launch queued");
    double waited = ms_since(&start);
    ok(waited >= 150, "it waited for the launch (%.0f ms)", waited);
    is_int(cuStreamQuery(stream), CUDA_SUCCESS, "the stream is idle when it returns");
    CHECK_CU(cuMemcpyDtoH_v2(&stored, data, sizeof stored));
    is_int(stored, 7, "and the kernel ran to its end");

    /* The handles are dead... */
    is_int(cuFuncGetName(&name, scale), CUDA_ERROR_INVALID_HANDLE,
           "after unload: cuFuncGetName answers INVALID_HANDLE");
    is_int(launch_scale(scale, 2), CUDA_ERROR_INVALID_HANDLE,
           "launching an unloaded function: INVALID_HANDLE");
    is_int(cuModuleGetFunction(&same, module, "scale"), CUDA_ERROR_INVALID_HANDLE,
           "cuModuleGetFunction on an unloaded module: INVALID_HANDLE");
    is_int(cuModuleUnload(module), CUDA_ERROR_INVALID_HANDLE, "unloading it twice: INVALID_HANDLE");

    /* ...until the next load gets them back, naming other kernels. */
    CUmodule other;
    CUfunction add;
    CHECK_CU(cuModuleLoad(&other, other_path));
    ok(other == module, "the next load gets the freed module handle back");
    CHECK_CU(cuModuleGetFunction(&add, other, "add"));
    ok(add == scale, "and its first kernel the freed function handle");
    CHECK_CU(cuFuncGetName(&name, add));
    is_str(name, "add", "which now names the new kernel");
    const size_t add_offsets[] = {0, 8, 16}, add_sizes[] = {4, 8, 8};
    ok(layout_is(add, true, add_offsets, add_sizes, 3), "with the new kernel's layout");
    is_int(cuModuleGetFunction(&same, other, "scale"), CUDA_ERROR_NOT_FOUND,
           "the old kernel's name: NOT_FOUND");
    double doubles[2] = {1.5, 2.5};
    CHECK_CU(cuMemcpyHtoD_v2(data, doubles, sizeof doubles));
    int n = 2;
    double addend = 1;
    void *add_params[] = {&n, &addend, &data};
    CHECK_CU(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, stream, add_params, NULL));
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK_CU(cuMemcpyDtoH_v2(doubles, data, sizeof doubles));
    ok(doubles[0] == 2.5 && doubles[1] == 3.5, "and launches as the new kernel");
    CHECK_CU(cuModuleUnload(other));
}

static void errors(void)
{
    CUmodule module;
    CUfunction f;
    CUkernel k;
    char missing[PATH_MAX + 16];
    snprintf(missing, sizeof missing, "%s.missing", module_path);
    is_int(cuModuleLoad(&module, missing), CUDA_ERROR_FILE_NOT_FOUND,
           "a missing file: FILE_NOT_FOUND");
    ok(file_mentions(log_path, missing), "with a log line naming the path");
    is_int(cuModuleLoad(&module, simulator_path), CUDA_ERROR_INVALID_IMAGE,
           "a shared object without a module table: INVALID_IMAGE");
    ok(file_mentions(log_path, simulator_path), "with a log line naming the path");
    char text[] = "/tmp/sim_modules_text.XXXXXX";
    int fd = mkstemp(text);
    if (fd < 0 || write(fd, "not a module\n", 13) != 13)
        bail_out("cannot write %s", text);
    close(fd);
    is_int(cuModuleLoad(&module, text), CUDA_ERROR_INVALID_IMAGE,
           "a file that is not a shared object: INVALID_IMAGE");
    unlink(text);
    const unsigned char cubin[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0x33, 0};
    is_int(cuModuleLoadData(&module, cubin), CUDA_ERROR_INVALID_IMAGE,
           "an image that is not a path (a real cubin): INVALID_IMAGE");
    const char *error_name = NULL;
    CHECK_CU(cuGetErrorName(CUDA_ERROR_INVALID_IMAGE, &error_name));
    is_str(error_name, "CUDA_ERROR_INVALID_IMAGE", "cuGetErrorName knows INVALID_IMAGE");

    CHECK_CU(cuModuleLoad(&module, module_path));
    is_int(cuModuleGetFunction(&f, module, "no_such_kernel"), CUDA_ERROR_NOT_FOUND,
           "an unknown kernel name: NOT_FOUND");
    ok(file_mentions(log_path, "no_such_kernel"), "with a log line naming it");
    is_int(cuModuleGetFunction(&f, (CUmodule)&f, "scale"), CUDA_ERROR_INVALID_HANDLE,
           "an unknown module handle: INVALID_HANDLE");
    is_int(cuLibraryGetKernel(&k, (CUlibrary)module, "scale"), CUDA_ERROR_INVALID_HANDLE,
           "a module is not a library: INVALID_HANDLE");
    is_int(cuModuleGetFunction(NULL, module, "scale"), CUDA_ERROR_INVALID_VALUE,
           "no place for the handle: INVALID_VALUE");
    is_int(cuModuleLoad(NULL, module_path), CUDA_ERROR_INVALID_VALUE,
           "cuModuleLoad without a place for the module: INVALID_VALUE");
    CUresult without_context = CUDA_SUCCESS;
    pthread_t thread;
    pthread_create(&thread, NULL, load_without_context, &without_context);
    pthread_join(thread, NULL);
    is_int(without_context, CUDA_ERROR_INVALID_CONTEXT,
           "cuModuleLoad without a current context: INVALID_CONTEXT");
    CHECK_CU(cuModuleUnload(module));
}

/* A graph captured before an unload must not replay the dead kernel. */
static void graphs(void)
{
    CUmodule module;
    CUfunction scale;
    CUgraph graph;
    CUgraphExec exec, exec2;
    CHECK_CU(cuModuleLoad(&module, module_path));
    CHECK_CU(cuModuleGetFunction(&scale, module, "scale"));
    CHECK_CU(cuStreamBeginCapture_v2(stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK_CU(launch_scale(scale, 2));
    CHECK_CU(cuStreamEndCapture(stream, &graph));
    CHECK_CU(cuGraphInstantiateWithFlags(&exec, graph, 0));
    is_int(cuGraphLaunch(exec, stream), CUDA_SUCCESS, "a graph launching a module's kernel");
    CHECK_CU(cuStreamSynchronize(stream));
    CHECK_CU(cuModuleUnload(module));
    is_int(cuGraphLaunch(exec, stream), CUDA_ERROR_INVALID_HANDLE,
           "launched after the module is unloaded: INVALID_HANDLE");
    is_int(cuGraphInstantiateWithFlags(&exec2, graph, 0), CUDA_ERROR_INVALID_HANDLE,
           "instantiated after: INVALID_HANDLE");
    CHECK_CU(cuGraphExecDestroy(exec));
    CHECK_CU(cuGraphDestroy(graph));
}

static void library_api(void)
{
    CUlibrary library, again;
    CUkernel scale, same;
    CUfunction function, function_again;
    is_int(cuLibraryLoadFromFile(&library, module_path, NULL, NULL, 0, NULL, NULL, 0),
           CUDA_SUCCESS, "cuLibraryLoadFromFile");
    CHECK_CU(cuLibraryGetKernel(&scale, library, "scale"));
    CHECK_CU(cuLibraryGetKernel(&same, library, "scale"));
    ok(same == scale, "cuLibraryGetKernel gives the same handle twice");
    const char *name = NULL;
    CHECK_CU(cuKernelGetName(&name, scale));
    is_str(name, "scale", "cuKernelGetName names it");
    ok(layout_is(scale, false, scale_offsets, scale_sizes, 3),
       "cuKernelGetParamInfo gives the module's layout");
    is_int(cuFuncGetName(&name, (CUfunction)scale), CUDA_ERROR_INVALID_HANDLE,
           "a library's kernel is a CUkernel: cuFuncGetName answers INVALID_HANDLE");
    ok(scale_works((CUfunction)scale), "the CUkernel launches as a CUfunction");
    CHECK_CU(cuKernelGetFunction(&function, scale));
    CHECK_CU(cuKernelGetFunction(&function_again, scale));
    CHECK_CU(cuFuncGetName(&name, function));
    ok((void *)function != (void *)scale && function_again == function && !strcmp(name, "scale"),
       "cuKernelGetFunction gives one CUfunction of its own, named like the kernel");
    ok(scale_works(function), "which launches too");
    is_int(cuModuleUnload((CUmodule)library), CUDA_ERROR_INVALID_HANDLE,
           "a library is not a module: INVALID_HANDLE");
    is_int(cuLibraryLoadData(&again, module_path, NULL, NULL, 0, NULL, NULL, 0), CUDA_SUCCESS,
           "cuLibraryLoadData with the path as its code");
    ok(again != library, "a library of its own");
    CHECK_CU(cuLibraryUnload(again));

    is_int(cuLibraryUnload(library), CUDA_SUCCESS, "cuLibraryUnload");
    is_int(cuKernelGetName(&name, scale), CUDA_ERROR_INVALID_HANDLE,
           "after unload: the CUkernel is dead");
    is_int(cuFuncGetName(&name, function), CUDA_ERROR_INVALID_HANDLE, "and its CUfunction");
    is_int(launch_scale((CUfunction)scale, 2), CUDA_ERROR_INVALID_HANDLE,
           "launching it: INVALID_HANDLE");
    is_int(cuLibraryUnload(library), CUDA_ERROR_INVALID_HANDLE, "unloading twice: INVALID_HANDLE");
    CHECK_CU(cuLibraryLoadFromFile(&again, module_path, NULL, NULL, 0, NULL, NULL, 0));
    CHECK_CU(cuLibraryGetKernel(&same, again, "scale"));
    ok(again == library && same == scale, "loaded again: the same library and kernel handles");
    CHECK_CU(cuLibraryUnload(again));
}

static void through_get_proc_address(void)
{
    static const struct {
        const char *name;
        void *fn;
    } entries[] = {
        {"cuModuleLoad", (void *)cuModuleLoad},
        {"cuModuleLoadData", (void *)cuModuleLoadData},
        {"cuModuleGetFunction", (void *)cuModuleGetFunction},
        {"cuModuleUnload", (void *)cuModuleUnload},
        {"cuLibraryLoadFromFile", (void *)cuLibraryLoadFromFile},
        {"cuLibraryLoadData", (void *)cuLibraryLoadData},
        {"cuLibraryGetKernel", (void *)cuLibraryGetKernel},
        {"cuLibraryUnload", (void *)cuLibraryUnload},
        {"cuKernelGetFunction", (void *)cuKernelGetFunction},
    };
    bool all = true;
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) {
        void *fn = NULL;
        all = all && cuGetProcAddress_v2(entries[i].name, &fn, 13000, 0, NULL) == CUDA_SUCCESS &&
              fn == entries[i].fn;
    }
    ok(all, "cuGetProcAddress gives the module and library entry points, not stubs");
    void *load, *get, *unload;
    CHECK_CU(cuGetProcAddress_v2("cuModuleLoad", &load, 13000, 0, NULL));
    CHECK_CU(cuGetProcAddress_v2("cuModuleGetFunction", &get, 13000, 0, NULL));
    CHECK_CU(cuGetProcAddress_v2("cuModuleUnload", &unload, 13000, 0, NULL));
    CUmodule module;
    CUfunction scale;
    CHECK_CU(((CUresult(*)(CUmodule *, const char *))load)(&module, module_path));
    CHECK_CU(((CUresult(*)(CUfunction *, CUmodule, const char *))get)(&scale, module, "scale"));
    ok(scale_works(scale), "a module loaded through them runs");
    CHECK_CU(((CUresult(*)(CUmodule))unload)(module));
}

/* The test opens the module too (dlopen hands both the same copy) and breaks its table. */
static void bad_tables(void)
{
    void *object = dlopen(module_path, RTLD_NOW | RTLD_LOCAL);
    sim_module *table = object ? dlsym(object, SIM_MODULE_SYMBOL) : NULL;
    if (!table)
        bail_out("no %s in %s", SIM_MODULE_SYMBOL, module_path);
    CUmodule module;
    table->abi = SIM_MODULE_ABI + 98;
    is_int(cuModuleLoad(&module, module_path), CUDA_ERROR_INVALID_IMAGE,
           "a table of another ABI: INVALID_IMAGE");
    char abi[32];
    snprintf(abi, sizeof abi, "ABI %d", SIM_MODULE_ABI + 98);
    ok(file_mentions(log_path, abi), "with a log line saying so (%s)", abi);
    table->abi = SIM_MODULE_ABI;

    const sim_module_kernel *kernels = table->kernels;
    size_t sizes[SIM_MAX_KERNEL_PARAMS + 1] = {0};
    sim_module_kernel bad[2] = {kernels[0], kernels[0]};
    table->kernels = bad;
    bad[1].name = "many";
    bad[1].param_count = SIM_MAX_KERNEL_PARAMS + 1;
    bad[1].param_sizes = sizes;
    is_int(cuModuleLoad(&module, module_path), CUDA_ERROR_INVALID_IMAGE,
           "a kernel of more than SIM_MAX_KERNEL_PARAMS parameters: INVALID_IMAGE");
    bad[1] = kernels[0];
    is_int(cuModuleLoad(&module, module_path), CUDA_ERROR_INVALID_IMAGE,
           "two kernels of one name: INVALID_IMAGE");
    table->kernels = kernels;
    is_int(cuModuleLoad(&module, module_path), CUDA_SUCCESS, "the table mended, it loads");
    CHECK_CU(cuModuleUnload(module));
    dlclose(object);
}

int main(void)
{
    plan(64);
    find_files();
    int fd = mkstemp(log_path);
    if (fd < 0)
        bail_out("mkstemp failed");
    close(fd);
    setenv("LMS_SIM_LOG", log_path, 1);
    CUmodule module;
    is_int(cuModuleLoad(&module, module_path), CUDA_ERROR_NOT_INITIALIZED,
           "cuModuleLoad before cuInit: NOT_INITIALIZED");
    sim_setup(16 << 20);
    CHECK_CU(cuMemAlloc_v2(&data, 64));
    CHECK_CU(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    module_api();
    errors();
    graphs();
    library_api();
    through_get_proc_address();
    bad_tables();

    CHECK_CU(cuStreamDestroy_v2(stream));
    CHECK_CU(cuMemFree_v2(data));
    unlink(log_path);
    return exit_status();
}
