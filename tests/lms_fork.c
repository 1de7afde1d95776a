/* fork() from one thread while others allocate, launch, copy and free, with a trace
 * recorded (so stacks are captured and every launch writes an event): each child must find
 * liblms's locks (and the simulator's) free, use the library (query memory, allocate, launch)
 * and exit normally, instead of deadlocking on a lock a parent thread held at fork. The
 * device has room for everything: in the child, an eviction would wait for the copy stream,
 * whose thread (in the simulator, as the real driver's work) stayed with the parent. */
#include "tests/lms_testlib.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)
#define WORKERS 3
#ifdef __SANITIZE_THREAD__
#define FORKS 8 /* a fork under ThreadSanitizer takes about a second */
#else
#define FORKS 30
#endif
#define CHILD_SECONDS 20 /* a child still running then is deadlocked */

static CUcontext ctx;
static CUfunction fill;
static atomic_bool forks_done;
static atomic_int rounds; /* done by all workers while the forks happened */
static pid_t parent_pid;

/* LeakSanitizer asks this at exit. In a child, what the parent's threads held (on stacks that
 * were not forked) looks leaked: check the parent only. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void) { return getpid() != parent_pid; }

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    static __thread unsigned char got[MIB];
    long wrong = 0;
    CU_OK(cuCtxSetCurrent(ctx));
    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    CUdeviceptr keep[4];
    for (int i = 0; i < 4; i++)
        CU_OK(cuMemAlloc(&keep[i], MIB));
    for (int round = 0; !atomic_load(&forks_done); round++) {
        CUdeviceptr buf;
        int value = (t * 31 + round) & 0xff;
        CU_OK(cuMemAlloc(&buf, MIB));
        CU_OK(lms_test_launch(fill, stream, buf, MIB, value));
        CU_OK(lms_test_launch(fill, stream, keep[round % 4], MIB, value));
        CU_OK(cuMemcpyDtoHAsync(got, buf, MIB, stream));
        CU_OK(cuStreamSynchronize(stream));
        for (size_t i = 0; i < MIB; i++)
            wrong += got[i] != value;
        CU_OK(cuMemFree(buf));
        atomic_fetch_add(&rounds, 1);
    }
    for (int i = 0; i < 4; i++)
        CU_OK(cuMemFree(keep[i]));
    CU_OK(cuStreamDestroy(stream));
    return (void *)(intptr_t)wrong;
}

/* A short pause, so that the workers get on between two forks. */
static void sleep_ms_between_forks(void)
{
    nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
}

/* In the child: the stream's worker thread was not forked, so the launch is queued and never
 * runs; nothing here waits for it. Exits 0 when every call succeeded. */
static void child(CUstream stream)
{
    alarm(CHILD_SECONDS);
    if (!freopen("/dev/null", "w", stdout)) /* the TAP output is the parent's */
        _exit(126);
    size_t free_bytes, total_bytes;
    CUdeviceptr small;
    int failures = (cuMemGetInfo(&free_bytes, &total_bytes) != CUDA_SUCCESS) +
                   (cuMemAlloc(&small, 4096) != CUDA_SUCCESS);
    failures += failures == 0 && lms_test_launch(fill, stream, small, 4096, 1) != CUDA_SUCCESS;
    exit(failures);
}

/* Forks FORKS times while the workers run; returns how many children exited normally. */
static void *forker(void *unused)
{
    (void)unused;
    intptr_t clean_exits = 0;
    CU_OK(cuCtxSetCurrent(ctx));
    CUstream stream;
    CU_OK(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    while (atomic_load(&rounds) < WORKERS) /* the workers are under way */
        sleep_ms_between_forks();
    for (int i = 0; i < FORKS; i++) {
        sleep_ms_between_forks();
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            child(stream);
        int status = 0;
        if (pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0)
            clean_exits++;
        else if (pid > 0)
            diag("child %d: %s %d", i, WIFSIGNALED(status) ? "killed by signal" : "exit status",
                 WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        else
            diag("fork failed");
    }
    atomic_store(&forks_done, true);
    CU_OK(cuStreamDestroy(stream));
    return (void *)clean_exits;
}

int main(int argc, char **argv)
{
    (void)argc;
    const char *build = getenv("LMS_BUILD_DIR");
    static char trace_path[4096], trace_env[4200];
    snprintf(trace_env, sizeof trace_env, "LMS_TRACE=%s/tests/lms_fork.%%p.json", build ? build : "build");
    const char *const env[] = { "LMS_THRESHOLD_KB=64", "LMS_EXCLUDE_MB=0", "LMS_SIM_CAPACITY_MB=64",
                                "LMS_TRACE_USES=1", trace_env, NULL };
    lms_test_with_env(argv, env);
    snprintf(trace_path, sizeof trace_path, "%s/tests/lms_fork.%d.json", build ? build : "build", (int)getpid());
    plan(WORKERS + 2);
    parent_pid = getpid();
    ctx = lms_test_context();
    fill = lms_test_fill_kernel();

    pthread_t workers[WORKERS], fork_thread;
    for (int t = 0; t < WORKERS; t++)
        pthread_create(&workers[t], NULL, worker, (void *)(intptr_t)t);
    pthread_create(&fork_thread, NULL, forker, NULL);
    void *clean_exits;
    pthread_join(fork_thread, &clean_exits);
    int rounds_during_forks = atomic_load(&rounds);
    for (int t = 0; t < WORKERS; t++) {
        void *wrong;
        pthread_join(workers[t], &wrong);
        is_int((intptr_t)wrong, 0, "worker %d: every byte it read back is right", t);
    }
    ok(rounds_during_forks > WORKERS, "the workers allocated, launched and freed meanwhile (%d rounds)",
       rounds_during_forks);
    is_int((intptr_t)clean_exits, FORKS, "every child used the library and exited normally within %d s",
           CHILD_SECONDS);
    unlink(trace_path); /* the trace is only there to take its locks; its footer comes at exit */
    return exit_status();
}
