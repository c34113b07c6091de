/*
 * child.c - start one program as a new process, the way exec promises:
 * its own process group, the pipes as stdio, the workspace as cwd, no other
 * descriptor, an empty signal mask and EVERY signal at its default
 * disposition.
 *
 * Why not posix_spawn: glibc's leaves the two signals it reserves for
 * itself (32 and 33) ignored in the child, and an ignored disposition
 * survives exec, so commands started with it do not start at the default
 * (ABI: "every signal at its default disposition"). The same technique is
 * used here as there: vfork (the child borrows the parent's memory and
 * runs only system calls until it execs), every signal blocked around it
 * so no handler of the host can run in the child, and dispositions reset
 * with the raw rt_sigaction system call, which accepts 32 and 33 too. An
 * exec failure travels back through a close-on-exec pipe as an errno.
 */
#include "local.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* The kernel's struct sigaction (what rt_sigaction reads): handler, flags,
 * restorer, mask. */
struct kernel_sigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

/* Highest signal number on Linux (_NSIG - 1 of the kernel). */
#define LOCAL_MAX_SIGNAL 64

struct child_plan {
    const char *prog;
    char *const *argv, *const *envp;
    int cwd_fd;
    const int *stdio;
    int err_fd;
};

/* In the child: only system calls, no libc state, then exec or _exit. */
static void child_run(const struct child_plan *p) __attribute__((noreturn));
static void child_run(const struct child_plan *p)
{
    struct kernel_sigaction dfl = {SIG_DFL, 0, 0, 0};
    for (int s = 1; s <= LOCAL_MAX_SIGNAL; s++)
        if (s != SIGKILL && s != SIGSTOP)
            syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
    int err = 0;
    if (setpgid(0, 0) != 0)
        err = errno;
    for (int i = 0; i < 3 && !err; i++)
        if (dup2(p->stdio[i], i) < 0)
            err = errno;
    if (!err && fchdir(p->cwd_fd) != 0)
        err = errno;
    /* Nothing of the host reaches the command, even descriptors another
     * library opened without O_CLOEXEC; err_fd is already close-on-exec. */
    if (!err && syscall(SYS_close_range, 3, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */) != 0)
        err = errno;
    if (!err) {
        unsigned long none = 0;
        syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
        execve(p->prog, p->argv, p->envp);
        err = errno;
    }
    while (write(p->err_fd, &err, sizeof err) < 0 && errno == EINTR)
        ;
    _exit(127);
}

/* Fork with vfork; separate so that nothing the child could clobber lives
 * in the caller's frame. Returns the pid, or -1. */
static pid_t start(const struct child_plan *p) __attribute__((noinline));
static pid_t start(const struct child_plan *p)
{
    pid_t pid = vfork();
    if (pid == 0)
        child_run(p);
    return pid;
}

int local_child_start(const char *prog, char *const *argv, char *const *envp,
                      int cwd_fd, const int stdio_fds[3], pid_t *pid_out)
{
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0)
        return errno;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    struct child_plan plan = {prog, argv, envp, cwd_fd, stdio_fds, pipefd[1]};
    pid_t pid = start(&plan);
    int fork_err = pid < 0 ? errno : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(pipefd[1]);
    if (pid < 0) {
        close(pipefd[0]);
        return fork_err;
    }
    int err = 0;
    ssize_t n;
    while ((n = read(pipefd[0], &err, sizeof err)) < 0 && errno == EINTR)
        ;
    close(pipefd[0]);
    if (n == (ssize_t)sizeof err && err != 0) {
        /* exec failed: the child is exiting; reap it now */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return err;
    }
    *pid_out = pid;
    return 0;
}
