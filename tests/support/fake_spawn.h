/*
 * fake_spawn.h - start a fake remote service (a python3 script) as a
 * child of the test process.
 *
 * The child starts as a fresh machine's process would (every signal at its
 * default disposition, glibc's own 32 and 33 included, which only the raw
 * rt_sigaction system call can reset, and an empty mask), and it dies with
 * the thread that started it (PR_SET_PDEATHSIG): a test that crashes or
 * aborts cannot leave a fake running that holds ctest's output pipe open,
 * which would hang the whole run.
 */
#ifndef SBX_TEST_FAKE_SPAWN_H
#define SBX_TEST_FAKE_SPAWN_H

#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* fork and exec `python3 argv[1]...` (argv[0] is "python3"); the pid, or
 * -1 with errno set. */
static inline pid_t fake_spawn_python(const char *const *argv)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    struct ksa {
        void (*handler)(int);
        unsigned long flags;
        void (*restorer)(void);
        unsigned long mask;
    } dfl = {SIG_DFL, 0, 0, 0};
    for (int s = 1; s <= 64; s++)
        if (s != SIGKILL && s != SIGSTOP)
            syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127); /* the parent is already gone */
    execvp("python3", (char *const *)argv);
    _exit(127);
}

/* Stop a fake started so: SIGTERM, up to wait_ms for it to exit (it
 * deletes its sandboxes first), then SIGKILL; *pid 0 after. Nothing when
 * *pid is not positive. */
static inline void fake_reap(pid_t *pid, int wait_ms)
{
    if (*pid <= 0)
        return;
    kill(*pid, SIGTERM);
    for (int waited = 0; waited < wait_ms; waited += 20) {
        if (waitpid(*pid, NULL, WNOHANG) == *pid) {
            *pid = 0;
            return;
        }
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
    }
    kill(*pid, SIGKILL);
    waitpid(*pid, NULL, 0);
    *pid = 0;
}

#endif
