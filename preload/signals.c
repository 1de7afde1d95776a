#include "preload/signals.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FNS 4

static struct {
    _Atomic(lms_signal_fn) fn;
    sigset_t signals;
} registered[MAX_FNS];
static bool ours[NSIG];            /* liblms installed its handler for this signal */

static void die_by(int signal_number)
{
    struct sigaction default_action = { .sa_handler = SIG_DFL };
    sigemptyset(&default_action.sa_mask);
    sigaction(signal_number, &default_action, NULL);
    raise(signal_number);          /* SA_NODEFER: delivered at once */
}

static void on_signal(int signal_number)
{
    /* One thread does the work; others that get a signal meanwhile wait for it to end the
     * process, and a fault inside the work ends it at once. */
    static _Atomic pid_t finishing;
    pid_t self = gettid(), expected = 0;
    if (!atomic_compare_exchange_strong(&finishing, &expected, self)) {
        if (expected == self) die_by(signal_number);
        for (;;) pause();
    }
    int saved_errno = errno;
    for (size_t i = 0; i < MAX_FNS; i++) {
        lms_signal_fn fn = atomic_load(&registered[i].fn);
        if (fn && sigismember(&registered[i].signals, signal_number) == 1) fn(signal_number);
    }
    errno = saved_errno;
    die_by(signal_number);
}

void lms_signals_at_death(lms_signal_fn fn, const int *signals, size_t count)
{
    size_t slot = 0;
    while (slot < MAX_FNS && atomic_load(&registered[slot].fn) && atomic_load(&registered[slot].fn) != fn) slot++;
    if (slot == MAX_FNS) return;
    sigemptyset(&registered[slot].signals);
    for (size_t i = 0; i < count; i++) sigaddset(&registered[slot].signals, signals[i]);
    atomic_store(&registered[slot].fn, fn);
    for (size_t i = 0; i < count; i++) {
        int s = signals[i];
        struct sigaction previous;
        if (ours[s] || sigaction(s, NULL, &previous) != 0 || previous.sa_handler != SIG_DFL ||
            (previous.sa_flags & SA_SIGINFO))
            continue;
        struct sigaction action = { .sa_handler = on_signal, .sa_flags = SA_NODEFER };
        sigemptyset(&action.sa_mask);
        ours[s] = sigaction(s, &action, NULL) == 0;
    }
}

void lms_signals_forget(lms_signal_fn fn)
{
    for (size_t i = 0; i < MAX_FNS; i++)
        if (atomic_load(&registered[i].fn) == fn) atomic_store(&registered[i].fn, NULL);
    for (int s = 1; s < NSIG; s++) {
        if (!ours[s]) continue;
        bool wanted = false;
        for (size_t i = 0; i < MAX_FNS; i++)
            wanted |= atomic_load(&registered[i].fn) && sigismember(&registered[i].signals, s) == 1;
        struct sigaction current;
        if (wanted || sigaction(s, NULL, &current) != 0) continue;
        if (current.sa_handler == on_signal) signal(s, SIG_DFL);
        ours[s] = false;
    }
}

int lms_dump_signal_number(const char *name)
{
    if (!name || !*name) return -1;
    char *end;
    long number = strtol(name, &end, 10);
    if (*end != '\0') {
        if (strncmp(name, "SIG", 3) == 0) name += 3;
        number = -1;
        for (int s = 1; s < NSIG; s++) {
            const char *abbrev = sigabbrev_np(s);
            if (abbrev && strcmp(abbrev, name) == 0) { number = s; break; }
        }
    }
    /* A dump in place of a signal that stops the program would leave it unstoppable (TERM,
     * INT: the dump is taken and the program goes on), and a fault's signal must keep its
     * meaning. The list is LMS_DUMP_REFUSED_SIGNALS's. */
    static const int refused[] = { SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGALRM, SIGXCPU, SIGXFSZ,
                                   SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT, SIGKILL, SIGSTOP,
                                   SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS };
    if (number <= 0 || number >= NSIG) return -1;
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (number == refused[i]) return -1;
    return (int)number;
}
