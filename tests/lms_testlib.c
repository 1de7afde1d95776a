#include "tests/lms_testlib.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Sets the list; then, unless it says otherwise, the whole simulated device is the
 * program's: the driver reserves nothing for contexts and kernels. */
static void set_env(const char *const *env)
{
    for (size_t i = 0; env && env[i]; i++) {
        char name[128];
        const char *eq = strchr(env[i], '=');
        size_t len = (size_t)(eq - env[i]);
        memcpy(name, env[i], len);
        name[len] = '\0';
        setenv(name, eq + 1, 1);
    }
    setenv("LMS_SIM_CONTEXT_RESERVE_MB", "0", 0);
    setenv("LMS_SIM_KERNEL_RESERVE_MB", "0", 0);
}

void lms_test_with_env(char **argv, const char *const *env)
{
    if (getenv("LMS_TEST_CHILD"))
        return;
    set_env(env);
    setenv("LMS_TEST_CHILD", "1", 1);
    execv("/proc/self/exe", argv);
    bail_out("cannot re-execute %s", argv[0]);
}

int lms_test_run_self(char **argv, const char *extra_arg, const char *const *env)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        set_env(env);
        setenv("LMS_TEST_CHILD", "1", 1);
        /* The child's TAP output is not ours: send it away. */
        if (!freopen("/dev/null", "w", stdout))
            _exit(127);
        if (getenv("LMS_TEST_QUIET") && !freopen("/dev/null", "w", stderr))
            _exit(127);
        char *child_argv[] = { argv[0], (char *)extra_arg, NULL };
        execv("/proc/self/exe", child_argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}

void lms_test_cases(char **argv, const lms_test_case *cases, size_t count, const char *const *common)
{
    for (size_t i = 0; i < count; i++) {
        const char *env[32];
        size_t n = 0;
        for (size_t k = 0; common && common[k]; k++)
            env[n++] = common[k];
        for (size_t k = 0; cases[i].env[k]; k++)
            env[n++] = cases[i].env[k];
        env[n] = NULL;
        int status = lms_test_run_self(argv, cases[i].name, env);
        ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (status %#x)", cases[i].what, status);
    }
}

int lms_test_run_case(const char *name, const lms_test_case *cases, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(name, cases[i].name) == 0) {
            lms_test_context();
            return cases[i].run();
        }
    fprintf(stderr, "no case named %s\n", name);
    return 2;
}

void lms_test_check(CUresult result, const char *what, const char *file, int line)
{
    if (result != CUDA_SUCCESS)
        bail_out("%s:%d: %s returned %d", file, line, what, (int)result);
}

CUcontext lms_test_context(void)
{
    CUcontext ctx;
    CUdevice dev;
    CU_OK(cuInit(0));
    CU_OK(cuDeviceGet(&dev, 0));
    CU_OK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CU_OK(cuCtxSetCurrent(ctx));
    return ctx;
}

static void fill(const sim_launch *l)
{
    uint8_t *p = *(uint8_t **)l->params[0];
    memset(p, *(int *)l->params[2], *(size_t *)l->params[1]);
}

static void add(const sim_launch *l)
{
    uint8_t *p = *(uint8_t **)l->params[0];
    size_t n = *(size_t *)l->params[1];
    int delta = *(int *)l->params[2];
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(p[i] + delta);
}

static const size_t range_params[] = { sizeof(void *), sizeof(size_t), sizeof(int) };

CUfunction lms_test_fill_kernel(void)
{
    static CUkernel k;
    if (!k)
        k = sim_register_kernel("fill", fill, 3, range_params);
    return (CUfunction)k;
}

CUfunction lms_test_add_kernel(void)
{
    static CUfunction f;
    if (!f)
        f = sim_register_function("add", add, 3, range_params);
    return f;
}

CUresult lms_test_launch(CUfunction f, CUstream stream, CUdeviceptr ptr, size_t bytes, int value)
{
    void *params[] = { &ptr, &bytes, &value };
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

static FILE *captured;
static int saved_stderr = -1;

void lms_test_stderr_begin(void)
{
    fflush(stderr);
    if (!(captured = tmpfile()) || (saved_stderr = dup(2)) < 0 || dup2(fileno(captured), 2) < 0)
        bail_out("cannot capture stderr");
}

const char *lms_test_stderr_end(void)
{
    static char text[16384];
    fflush(stderr);
    dup2(saved_stderr, 2);
    close(saved_stderr);
    rewind(captured);
    size_t n = fread(text, 1, sizeof text - 1, captured);
    text[n] = '\0';
    fclose(captured);
    return text;
}

void lms_test_pattern(unsigned char *buf, size_t bytes, unsigned seed)
{
    for (size_t i = 0; i < bytes; i++)
        buf[i] = (unsigned char)((i * 2654435761u + seed * 40503u) >> 7);
}

int lms_test_pattern_ok(const unsigned char *buf, size_t bytes, unsigned seed)
{
    for (size_t i = 0; i < bytes; i++)
        if (buf[i] != (unsigned char)((i * 2654435761u + seed * 40503u) >> 7))
            return 0;
    return 1;
}
