/*
 * proc_spawn.c - fork and exec one supervised process (proc_spawn.h).
 *
 * The child makes its own session (so that a signal to the process group
 * reaches the whole job, and a PTY becomes its controlling terminal:
 * TIOCSCTTY on the slave), takes the pipes or the slave as 0, 1 and 2,
 * becomes the user, changes to the working directory (after the user
 * switch, so the user's permissions apply), resets every signal 1..64 to
 * its default with the raw rt_sigaction system call (glibc's wrappers
 * refuse 32 and 33), marks every descriptor above 2 close-on-exec
 * (close_range) and clears its signal mask right before execve. A failure
 * before the exec travels back as (stage, errno) through a close-on-exec
 * pipe, which the parent reads to its end: an empty read means the exec
 * happened.
 */
#include "proc_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

/* The kernel's struct sigaction, as rt_sigaction reads it. */
struct ksigaction {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    unsigned long mask;
};

#define SPAWN_MAX_SIGNAL 64
#define DEFAULT_PATH "/usr/local/bin:/usr/bin:/bin"

static const char *env_get(char *const *env, const char *name)
{
    size_t n = strlen(name);
    for (; env && *env; env++)
        if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
            return *env + n + 1;
    return NULL;
}

/* execve argv[0], looked up in the environment's PATH (else DEFAULT_PATH)
 * when it has no '/'. Returns the errno that matters: EACCES when some
 * candidate existed but could not be run, else the last one's. */
static int exec_path(char *const *argv, char *const *env)
{
    const char *prog = argv[0];
    if (strchr(prog, '/')) {
        execve(prog, argv, env);
        return errno;
    }
    const char *path = env_get(env, "PATH");
    if (!path || !*path)
        path = DEFAULT_PATH;
    size_t plen = strlen(prog);
    int seen_eacces = 0, last = ENOENT;
    char buf[4096];
    for (const char *p = path;; p++) {
        const char *colon = strchr(p, ':');
        size_t dlen = colon ? (size_t)(colon - p) : strlen(p);
        if (dlen + 1 + plen + 1 <= sizeof buf) {
            if (dlen == 0) {
                memcpy(buf, prog, plen + 1);
            } else {
                memcpy(buf, p, dlen);
                buf[dlen] = '/';
                memcpy(buf + dlen + 1, prog, plen + 1);
            }
            execve(buf, argv, env);
            if (errno == EACCES)
                seen_eacces = 1;
            else if (errno != ENOENT && errno != ENOTDIR)
                last = errno;
        }
        if (!colon)
            break;
        p = colon;
    }
    return seen_eacces ? EACCES : last;
}

static int become(const struct sbxs_psv_user *u)
{
    if (!u)
        return 0;
    if (getuid() == u->uid && getgid() == u->gid && geteuid() == u->uid)
        return 0;
    if (u->ngroups && setgroups(u->ngroups, u->groups) != 0 && errno != EPERM)
        return -1;
    if (setgid(u->gid) != 0 || setuid(u->uid) != 0)
        return -1;
    return 0;
}

static void child(const struct sbxs_spawn_req *req, int in, int out, int err, int failfd)
    __attribute__((noreturn));
static void child(const struct sbxs_spawn_req *req, int in, int out, int err, int failfd)
{
    int stage = SBXS_SPAWN_SETUP, e = 0;
    if (setsid() < 0)
        goto fail;
    if (req->pty && ioctl(in, TIOCSCTTY, 0) != 0)
        goto fail;
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        goto fail;
    stage = SBXS_SPAWN_USER;
    if (become(req->user) != 0)
        goto fail;
    stage = SBXS_SPAWN_CWD;
    if (fchdir(req->cwd_fd) != 0)
        goto fail;
    stage = SBXS_SPAWN_SETUP;
    struct ksigaction dfl = {SIG_DFL, 0, 0, 0};
    for (int s = 1; s <= SPAWN_MAX_SIGNAL; s++)
        if (s != SIGKILL && s != SIGSTOP)
            syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof dfl.mask);
    /* failfd is close-on-exec already; so becomes everything else */
    if (syscall(SYS_close_range, 3, ~0U, 4 /* CLOSE_RANGE_CLOEXEC */) != 0)
        goto fail;
    unsigned long none = 0;
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof none);
    stage = SBXS_SPAWN_EXEC;
    e = exec_path(req->argv, req->env);
    errno = e;
fail:;
    int msg[2] = {stage, errno};
    while (write(failfd, msg, sizeof msg) < 0 && errno == EINTR)
        ;
    _exit(127);
}

static void close_pair(int p[2])
{
    if (p[0] >= 0)
        close(p[0]);
    if (p[1] >= 0)
        close(p[1]);
    p[0] = p[1] = -1;
}

int sbxs_spawn(const struct sbxs_spawn_req *req, struct sbxs_spawn_out *out, int *stage,
               int *err)
{
    int pin[2] = {-1, -1}, pout[2] = {-1, -1}, perr[2] = {-1, -1}, pfail[2] = {-1, -1};
    int master = -1, slave = -1;
    *stage = SBXS_SPAWN_SETUP;
    if (pipe2(pfail, O_CLOEXEC) != 0)
        goto fail;
    if (req->pty) {
        struct winsize ws = {.ws_row = req->rows ? req->rows : 24,
                             .ws_col = req->cols ? req->cols : 80};
        if (openpty(&master, &slave, NULL, NULL, &ws) != 0)
            goto fail;
        if (fcntl(master, F_SETFD, FD_CLOEXEC) != 0 || fcntl(slave, F_SETFD, FD_CLOEXEC) != 0)
            goto fail;
    } else if (pipe2(pin, O_CLOEXEC) != 0 || pipe2(pout, O_CLOEXEC) != 0 ||
               pipe2(perr, O_CLOEXEC) != 0) {
        goto fail;
    }
    /* every signal blocked across fork: no handler of the embedding
     * program runs in the child before it resets them */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfail[0]);
        if (req->pty) {
            close(master);
            child(req, slave, slave, slave, pfail[1]);
        }
        close(pin[1]);
        close(pout[0]);
        close(perr[0]);
        child(req, pin[0], pout[1], perr[1], pfail[1]);
    }
    int fe = errno;
    sigprocmask(SIG_SETMASK, &old, NULL);
    if (pid < 0) {
        errno = fe;
        goto fail;
    }
    close(pfail[1]);
    pfail[1] = -1;
    if (slave >= 0)
        close(slave);
    slave = -1;
    if (pin[0] >= 0) {
        close(pin[0]);
        close(pout[1]);
        close(perr[1]);
        pin[0] = pout[1] = perr[1] = -1;
    }
    int msg[2];
    ssize_t got;
    while ((got = read(pfail[0], msg, sizeof msg)) < 0 && errno == EINTR)
        ;
    close(pfail[0]);
    pfail[0] = -1;
    if (got == (ssize_t)sizeof msg) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
            ;
        *stage = msg[0];
        *err = msg[1];
        if (master >= 0)
            close(master);
        close_pair(pin);
        close_pair(pout);
        close_pair(perr);
        return -1;
    }
    out->pid = pid;
    if (req->pty) {
        fcntl(master, F_SETFL, O_NONBLOCK);
        out->in_fd = out->out_fd = master;
        out->err_fd = -1;
    } else {
        out->in_fd = pin[1];
        out->out_fd = pout[0];
        out->err_fd = perr[0];
        fcntl(out->in_fd, F_SETFL, O_NONBLOCK);
        fcntl(out->out_fd, F_SETFL, O_NONBLOCK);
        fcntl(out->err_fd, F_SETFL, O_NONBLOCK);
    }
    return 0;
fail:
    *err = errno;
    if (master >= 0)
        close(master);
    if (slave >= 0)
        close(slave);
    close_pair(pin);
    close_pair(pout);
    close_pair(perr);
    close_pair(pfail);
    return -1;
}
