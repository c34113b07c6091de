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
 *
 * The keeper: what a command leaves behind must die with it, also what
 * left its process group (setsid, double forks). So the command is not a
 * child of the host but of a keeper process (forked, single-threaded,
 * system calls only) that is the group leader and a child subreaper:
 * every orphan of the command's tree is reparented to it. The keeper
 * waits for the command; once it has exited it lets the rest of the tree
 * finish for LOCAL_KEEPER_GRACE_MS, then kills every process left
 * (SIGKILL to each of its children until it has none: the children of a
 * killed one become its children in turn) and exits the way the command
 * did (same exit code, or the same signal), which is what the host sees.
 * The host asks for the kill earlier (timeout, cancellation, destroy) by
 * writing to or closing the keeper's control pipe; a host that dies
 * closes it too. The keeper holds no descriptor but that pipe's read end
 * and a pidfd of the command, which wakes it when the command exits.
 */
#include "local.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <poll.h>
#include <time.h>
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
    int ctl_fd; /* the keeper's end of the control pipe */
};

/* How long the rest of the tree may run after the command exited. */
#define LOCAL_KEEPER_GRACE_MS 250
/* How often the keeper looks for exited children when nothing wakes it
 * (the rest of the tree after the command, or no pidfd). */
#define KEEPER_TICK_MS 20

/* In the child: only system calls, no libc state, then exec or _exit. */
static void child_run(const struct child_plan *p) __attribute__((noreturn));
static void child_run(const struct child_plan *p)
{
    struct kernel_sigaction dfl = {SIG_DFL, 0, 0, 0};
    for (int s = 1; s <= LOCAL_MAX_SIGNAL; s++)
        if (s != SIGKILL && s != SIGSTOP)
            syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
    int err = 0;
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

/* Kill every process of the tree: each child of the keeper, until there
 * is none (orphans of killed ones become children in turn). Returns when
 * wait reports no child. *cws gets the command's status if reaped here. */
static void keeper_kill_all(pid_t cmd, int *cws, int *cdone)
{
    char path[64] = "/proc/self/task/";
    /* the keeper is single-threaded: its tid is its pid */
    long self = syscall(SYS_getpid);
    char digits[24];
    int nd = 0;
    do {
        digits[nd++] = (char)('0' + self % 10);
        self /= 10;
    } while (self && nd < 23);
    size_t len = 16;
    while (nd)
        path[len++] = digits[--nd];
    static const char tail[] = "/children";
    for (size_t i = 0; i < sizeof tail; i++)
        path[len + i] = tail[i];
    for (;;) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        char buf[4096];
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0)
            close(fd);
        long pid = 0;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] >= '0' && buf[i] <= '9') {
                pid = pid * 10 + (buf[i] - '0');
            } else if (pid) {
                kill((pid_t)pid, SIGKILL);
                pid = 0;
            }
        }
        if (pid)
            kill((pid_t)pid, SIGKILL);
        /* Without /proc/<pid>/children: the command's own group at least. */
        if (n < 0)
            kill(-cmd, SIGKILL);
        int ws;
        pid_t w = waitpid(-1, &ws, 0);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return; /* ECHILD: nothing is left */
        if (w == cmd) {
            *cws = ws;
            *cdone = 1;
        }
    }
}

/* The keeper (see the top of the file). Never returns. */
static void keeper_run(const struct child_plan *p) __attribute__((noreturn));
static void keeper_run(const struct child_plan *p)
{
    /* A host that ignores SIGCHLD would make wait lose the status. */
    struct kernel_sigaction dfl = {SIG_DFL, 0, 0, 0};
    syscall(SYS_rt_sigaction, SIGCHLD, &dfl, NULL, sizeof dfl.mask);
    int err = 0;
    if (setpgid(0, 0) != 0 || prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0)
        err = errno;
    pid_t cmd = -1;
    if (!err) {
        cmd = vfork();
        if (cmd == 0)
            child_run(p);
        if (cmd < 0)
            err = errno;
    }
    if (err) {
        while (write(p->err_fd, &err, sizeof err) < 0 && errno == EINTR)
            ;
        _exit(127);
    }
    /* Keep only the control pipe: the host's other descriptors (other
     * commands' pipes among them) must not stay open in here. */
    int keep = p->ctl_fd;
    if (keep > 0)
        syscall(SYS_close_range, 0, (unsigned)keep - 1, 0);
    syscall(SYS_close_range, (unsigned)keep + 1, ~0U, 0);

    /* A pidfd of the command wakes the keeper the moment it exits, so a
     * short command costs no polling tick; without one (kernels before
     * 5.3) the keeper looks every KEEPER_TICK_MS. */
#ifdef SYS_pidfd_open
    int cmd_fd = (int)syscall(SYS_pidfd_open, cmd, 0);
#else
    int cmd_fd = -1;
#endif
    int cws = 0, cdone = 0;
    int64_t grace_end = 0;
    for (;;) {
        int ws;
        pid_t w;
        while ((w = waitpid(-1, &ws, WNOHANG)) > 0)
            if (w == cmd) {
                cws = ws;
                cdone = 1;
                grace_end = sbxs_now_ms() + LOCAL_KEEPER_GRACE_MS;
            }
        if (w < 0 && errno == ECHILD)
            break; /* the whole tree has ended by itself */
        if (cdone && sbxs_now_ms() >= grace_end)
            break;
        struct pollfd pfd[2] = {{keep, POLLIN, 0}, {cmd_fd, POLLIN, 0}};
        int waiting_for_cmd = !cdone && cmd_fd >= 0;
        if (poll(pfd, waiting_for_cmd ? 2 : 1, waiting_for_cmd ? -1 : KEEPER_TICK_MS) > 0 &&
            pfd[0].revents)
            break; /* the host asks for the kill, or is gone */
    }
    keeper_kill_all(cmd, &cws, &cdone);
    if (!cdone || WIFEXITED(cws))
        _exit(cdone ? WEXITSTATUS(cws) : 127);
    /* Die of the command's signal, without a core file of the keeper. */
    int sig = WTERMSIG(cws);
    struct rlimit none = {0, 0};
    setrlimit(RLIMIT_CORE, &none);
    syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof dfl.mask);
    unsigned long mask = ~0UL & ~(1UL << (sig - 1));
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, sizeof mask);
    kill((pid_t)syscall(SYS_getpid), sig);
    _exit(128 + sig);
}

/* Fork the keeper; separate so that nothing the child could clobber lives
 * in the caller's frame. Returns the pid, or -1. */
static pid_t start(const struct child_plan *p) __attribute__((noinline));
static pid_t start(const struct child_plan *p)
{
    pid_t pid = fork();
    if (pid == 0)
        keeper_run(p);
    return pid;
}

int local_child_start(const char *prog, char *const *argv, char *const *envp,
                      int cwd_fd, const int stdio_fds[3], pid_t *pid_out, int *ctl_out)
{
    int pipefd[2], ctl[2];
    if (pipe2(ctl, O_CLOEXEC) != 0)
        return errno;
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        int e = errno;
        close(ctl[0]);
        close(ctl[1]);
        return e;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    struct child_plan plan = {prog, argv, envp, cwd_fd, stdio_fds, pipefd[1], ctl[0]};
    pid_t pid = start(&plan);
    int fork_err = pid < 0 ? errno : 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    close(pipefd[1]);
    close(ctl[0]);
    if (pid < 0) {
        close(pipefd[0]);
        close(ctl[1]);
        return fork_err;
    }
    int err = 0;
    ssize_t n;
    while ((n = read(pipefd[0], &err, sizeof err)) < 0 && errno == EINTR)
        ;
    close(pipefd[0]);
    if (n == (ssize_t)sizeof err && err != 0) {
        /* exec failed: the keeper is exiting; reap it now */
        close(ctl[1]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        return err;
    }
    *pid_out = pid;
    *ctl_out = ctl[1];
    return 0;
}
