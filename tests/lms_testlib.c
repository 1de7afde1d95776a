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

/* ---- both backing modes ---- */

typedef struct backing_mode {
    const char *host_vmm; /* LMS_SIM_HOST_VMM */
    const char *label;    /* at the end of each TAP line */
} backing_mode;

static const backing_mode modes[] = { { "1", "host VMM on" }, { "0", "host VMM off" } };
#define MODES (sizeof modes / sizeof modes[0])

/* The value a "NAME=value" list gives name, or NULL. */
static const char *listed(const char *const *env, const char *name)
{
    size_t len = strlen(name);
    for (size_t k = 0; env && env[k]; k++)
        if (strncmp(env[k], name, len) == 0 && env[k][len] == '=')
            return env[k] + len + 1;
    return NULL;
}

/* Whether a run goes in mode: yes, unless the lists (the first that names one) or else the
 * environment name the other. */
static int mode_wanted(const backing_mode *mode, const char *const *env, const char *const *more)
{
    const char *chosen = listed(env, "LMS_SIM_HOST_VMM");
    if (!chosen)
        chosen = listed(more, "LMS_SIM_HOST_VMM");
    if (!chosen)
        chosen = getenv("LMS_SIM_HOST_VMM");
    return !chosen || strcmp(chosen, mode->host_vmm) == 0;
}

int lms_test_host_vmm(void)
{
    const char *value = getenv("LMS_SIM_HOST_VMM");
    return !value || strcmp(value, "0") != 0;
}

/* Copies one mode's TAP from `in` into ours, the mode named on each line; counts the tests
 * it ran, those that failed, and the plan. */
static void relay(FILE *in, const char *label, int *planned, int *ran, int *failed)
{
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, in) > 0) {
        line[strcspn(line, "\n")] = '\0';
        int count;
        int pass = strncmp(line, "ok ", 3) == 0;
        if (sscanf(line, "1..%d", &count) == 1) {
            *planned = count;
            const char *skip_all = strstr(line, "# SKIP ");
            if (skip_all)
                skip(1, "%s [%s]", skip_all + 7, label);
        } else if (pass || strncmp(line, "not ok ", 7) == 0) {
            const char *rest = line + (pass ? 3 : 7);
            rest += strspn(rest, "0123456789");
            const char *skipped = strstr(rest, "# skip ");
            ++*ran;
            *failed += !pass;
            if (pass && skipped)
                skip(1, "%s [%s]", skipped + 7, label);
            else
                ok(pass, "%s [%s]", rest + (strncmp(rest, " - ", 3) == 0 ? 3 : 0), label);
        } else if (strncmp(line, "Bail out!", 9) == 0) {
            ok(0, "%s [%s]", line, label);
        } else if (line[0] == '#') {
            note("%s [%s]", line + strspn(line, "# "), label);
        } else if (line[0]) {
            diag("%s [%s]", line, label);
        }
    }
    free(line);
}

/* Where a run's liblms statistics go: pid is "%p" for liblms, or the run's pid. */
static void stats_file(char *path, size_t size, const char *pid)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, size, "%s/lms-test-stats.%s.json", tmp && *tmp ? tmp : "/tmp", pid);
}

/* The statistics liblms wrote at a run's exit (LMS_STATS=json): true when it swapped
 * out, and copied bytes back in (a restore for a write of the whole allocation copies none). */
static int swapped_both_ways(const char *json, const char *label)
{
    unsigned long long out = 0, out_bytes = 0, in = 0, in_bytes = 0;
    const char *o = strstr(json, "\"swapped_out\":"), *i = strstr(json, "\"swapped_in\":");
    int read = o && i && sscanf(o, "\"swapped_out\":{\"count\":%llu,\"bytes\":%llu", &out, &out_bytes) == 2 &&
               sscanf(i, "\"swapped_in\":{\"count\":%llu,\"bytes\":%llu", &in, &in_bytes) == 2;
    return ok(read && out > 0 && in_bytes > 0,
              "liblms's statistics: %llu swaps out (%llu bytes), %llu back in (%llu bytes copied) [%s]", out,
              out_bytes, in, in_bytes, label);
}

/* Runs program (argv its arguments, argv[0] included) in one mode, its stdout ours through
 * relay; env: the list to set (NULL: the environment as it is). */
static void run_mode(const char *program, char **argv, const char *const *env, const backing_mode *mode,
                     int check_swaps)
{
    int out[2];
    fflush(stdout);
    if (pipe(out) != 0)
        bail_out("cannot make a pipe");
    pid_t pid = fork();
    if (pid == 0) {
        close(out[0]);
        if (dup2(out[1], STDOUT_FILENO) < 0)
            _exit(127);
        if (env)
            set_env(env);
        setenv("LMS_SIM_HOST_VMM", mode->host_vmm, 1);
        setenv("LMS_TEST_CHILD", "1", 1);
        if (check_swaps) {
            char path[4096];
            stats_file(path, sizeof path, "%p");
            setenv("LMS_STATS", "json", 1);
            setenv("LMS_STATS_FILE", path, 1);
        }
        execvp(program, argv);
        _exit(127);
    }
    close(out[1]);
    FILE *in = fdopen(out[0], "r");
    if (pid < 0 || !in)
        bail_out("cannot run %s in mode %s", argv[0], mode->label);
    int planned = -1, ran = 0, failed = 0, status = 0;
    relay(in, mode->label, &planned, &ran, &failed);
    fclose(in);
    waitpid(pid, &status, 0);
    int clean = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || failed);
    if (!clean || ran != planned)
        ok(0, "the run ended cleanly, every planned test run (status %#x, %d of %d) [%s]", status, ran, planned,
           mode->label);
    if (!check_swaps)
        return;
    char pid_text[24], path[4096], json[4096] = "";
    snprintf(pid_text, sizeof pid_text, "%d", (int)pid);
    stats_file(path, sizeof path, pid_text);
    FILE *f = fopen(path, "r");
    if (f) {
        json[fread(json, 1, sizeof json - 1, f)] = '\0';
        fclose(f);
        unlink(path);
    }
    if (clean && ran == planned)
        swapped_both_ways(json, mode->label);
}

_Noreturn static void in_both_modes(const char *program, char **argv, const char *const *env, int check_swaps)
{
    for (size_t m = 0; m < MODES; m++)
        if (mode_wanted(&modes[m], env, NULL))
            run_mode(program, argv, env, &modes[m], check_swaps);
    done_testing();
    exit(exit_status());
}

static void with_env(char **argv, const char *const *env, int check_swaps)
{
    if (!getenv("LMS_TEST_CHILD"))
        in_both_modes("/proc/self/exe", argv, env ? env : (const char *const[]){ NULL }, check_swaps);
}

void lms_test_in_both_modes(char **command) { in_both_modes(command[0], command, NULL, 0); }

void lms_test_with_env(char **argv, const char *const *env) { with_env(argv, env, 0); }

void lms_test_with_env_swapping(char **argv, const char *const *env) { with_env(argv, env, 1); }

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

static void test_cases(char **argv, const lms_test_case *cases, size_t count, const char *const *common)
{
    int runs = 0;
    for (size_t m = 0; m < MODES; m++)
        for (size_t i = 0; i < count; i++)
            runs += mode_wanted(&modes[m], cases[i].env, common);
    plan(runs);
    for (size_t m = 0; m < MODES; m++) {
        char mode_env[32];
        snprintf(mode_env, sizeof mode_env, "LMS_SIM_HOST_VMM=%s", modes[m].host_vmm);
        for (size_t i = 0; i < count; i++) {
            if (!mode_wanted(&modes[m], cases[i].env, common))
                continue;
            const char *env[32];
            size_t n = 0;
            env[n++] = mode_env;
            for (size_t k = 0; common && common[k]; k++)
                env[n++] = common[k];
            for (size_t k = 0; cases[i].env[k]; k++)
                env[n++] = cases[i].env[k];
            env[n] = NULL;
            int status = lms_test_run_self(argv, cases[i].name, env);
            ok(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s (status %#x) [%s]", cases[i].what, status,
               modes[m].label);
        }
    }
}

static int run_case(const char *name, const lms_test_case *cases, size_t count)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(name, cases[i].name) == 0) {
            lms_test_context();
            return cases[i].run();
        }
    fprintf(stderr, "no case named %s\n", name);
    return 2;
}

int lms_test_main(int argc, char **argv, const lms_test_case *cases, size_t count, const char *const *common)
{
    if (argc > 1)
        return run_case(argv[1], cases, count);
    test_cases(argv, cases, count, common);
    return exit_status();
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

CUfunction lms_test_add_spare_kernel(void)
{
    static const size_t params[] = { sizeof(void *), sizeof(size_t), sizeof(int), sizeof(void *) };
    static CUfunction f;
    if (!f)
        f = sim_register_function("add_with_spare", add, 4, params);
    return f;
}

CUresult lms_test_launch(CUfunction f, CUstream stream, CUdeviceptr ptr, size_t bytes, int value)
{
    void *params[] = { &ptr, &bytes, &value };
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, stream, params, NULL);
}

void lms_test_alloc_buffers(CUdeviceptr *bufs, int count, size_t bytes, int value)
{
    for (int i = 0; i < count; i++) {
        CU_OK(cuMemAlloc(&bufs[i], bytes));
        if (value >= 0)
            CU_OK(cuMemsetD8(bufs[i], (unsigned char)value, bytes));
    }
}

CUresult lms_test_end_capture(CUstream stream, CUgraphExec *exec)
{
    CUgraph graph;
    CUresult r = cuStreamEndCapture(stream, &graph);
    return r == CUDA_SUCCESS ? cuGraphInstantiateWithFlags(exec, graph, 0) : r;
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

static uint64_t stress_rng;

const char *lms_test_stress_seed(void)
{
    return getenv("LMS_STRESS_SEED") ? getenv("LMS_STRESS_SEED") : "1";
}

unsigned long lms_test_stress_start(unsigned long plain, unsigned long sanitized)
{
    stress_rng = strtoull(lms_test_stress_seed(), NULL, 10) * 0x9E3779B97F4A7C15ull | 1;
    const char *sanitize = getenv("SANITIZE");
    return getenv("LMS_STRESS_OPS") ? strtoul(getenv("LMS_STRESS_OPS"), NULL, 10)
                                    : sanitize && *sanitize ? sanitized : plain;
}

uint64_t lms_test_random(void)
{
    stress_rng ^= stress_rng << 13;
    stress_rng ^= stress_rng >> 7;
    stress_rng ^= stress_rng << 17;
    return stress_rng;
}

size_t lms_test_below(size_t n) { return (size_t)(lms_test_random() % n); }
