/*
 * exec.c - run a command of the `local` provider and pump its I/O.
 *
 * One poll() loop serves the stdout and stderr pipes (chunks go to the
 * sinks as they arrive), the host's cancel fd, a pidfd of the leader and
 * the completion fd of the stdin feeder. stdin is streamed by the feeder
 * thread (shared/stdin_feeder.c), because the caller's source may block.
 *
 * Process tree policy: the command runs under a keeper (child.c), the
 * leader of its process group and a child subreaper, so that nothing the
 * command started keeps running once exec returns, not even what left the
 * group (setsid, double forks): every orphan of the tree is the keeper's.
 *  - Timeout, cancellation, a sink or source failure, destroy of the
 *    workspace: the keeper is told (its control pipe) and kills the tree.
 *  - Normal end: the keeper lets the rest of the tree run for 250 ms after
 *    the command exited, kills what is left and exits like the command;
 *    then the output pipes are drained until they reach EOF or
 *    LOCAL_LEADER_GRACE_MS pass. Commands that want a daemon to outlive
 *    them must use another provider.
 * The keeper is not reaped until the end, so its pid (which is the group
 * id) cannot be reused by an unrelated process in between; a keeper that
 * has not exited LOCAL_KEEPER_WAIT_MS after being told gets SIGKILL to
 * its group. After a kill, pipes still held are drained for at most
 * LOCAL_KILL_DRAIN_MS, then abandoned.
 * Running commands are registered by workspace (dev, inode) for destroy.
 * Before returning, exec also waits for a read of the stdin source that is
 * in progress (the source is borrowed for the call only).
 */
#include "local.h"

#include "clock.h"
#include "confine.h"
#include "stdin_feeder.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LOCAL_LEADER_GRACE_MS 250
#define LOCAL_KILL_DRAIN_MS 1000
#define LOCAL_KEEPER_WAIT_MS 1000
/* Poll interval when the kernel offers no pidfd to wake us on exit. */
#define LOCAL_EXIT_POLL_MS 20
/* About 34 years: longer timeouts are treated as this. */
#define LOCAL_MAX_TIMEOUT_MS (INT64_C(1) << 40)

/* Everything one running command needs; lives on exec's stack. */
struct run {
    const struct sbx_host *host;
    sbx_call *call;
    const struct sbx_exec_args *args;
    pid_t pid;          /* the keeper */
    int ctl_fd;         /* write end of the keeper's control pipe, or -1 */
    dev_t ws_dev;       /* the workspace, for destroy */
    ino_t ws_ino;
    struct run *next_running;
    int pidfd;          /* -1 when pidfd_open is unavailable */
    int out_fd, err_fd; /* parent's read ends, -1 at EOF */
    struct sbxs_feeder *feeder; /* NULL without stdin */
    int feeder_done;
    unsigned char *io_buf; /* read buffer for stdout/stderr */
    uint64_t out_bytes, err_bytes;

    int leader_exited;
    int group_killed;
    int timed_out;
    int status; /* SBX_OK, or why the command was stopped */
    int64_t grace_end, drain_end;
};

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* The commands running in this process (for destroy). */
static pthread_mutex_t running_lock = PTHREAD_MUTEX_INITIALIZER;
static struct run *running;

static void running_add(struct run *r)
{
    pthread_mutex_lock(&running_lock);
    r->next_running = running;
    running = r;
    pthread_mutex_unlock(&running_lock);
}

/* Unregister r and close its control pipe: the keeper kills the tree. */
static void running_remove(struct run *r)
{
    pthread_mutex_lock(&running_lock);
    for (struct run **p = &running; *p; p = &(*p)->next_running)
        if (*p == r) {
            *p = r->next_running;
            break;
        }
    close_fd(&r->ctl_fd);
    pthread_mutex_unlock(&running_lock);
}

void local_running_kill(dev_t dev, ino_t ino)
{
    pthread_mutex_lock(&running_lock);
    for (struct run *r = running; r; r = r->next_running)
        if (r->ws_dev == dev && r->ws_ino == ino && r->ctl_fd >= 0)
            (void)!write(r->ctl_fd, "k", 1); /* a full pipe was told already */
    pthread_mutex_unlock(&running_lock);
}

static void kill_group(struct run *r)
{
    if (!r->group_killed) {
        running_remove(r);
        r->group_killed = 1;
        r->drain_end = sbxs_now_ms() + LOCAL_KILL_DRAIN_MS;
    }
}

static int leader_has_exited(pid_t pid);

/* After kill_group: give the keeper LOCAL_KEEPER_WAIT_MS to kill the tree
 * and exit, then SIGKILL its group (a keeper stopped by the command). */
static void wait_keeper(struct run *r)
{
    int64_t end = sbxs_now_ms() + LOCAL_KEEPER_WAIT_MS;
    while (!leader_has_exited(r->pid)) {
        int64_t left = end - sbxs_now_ms();
        if (left <= 0) {
            (void)kill(-r->pid, SIGKILL);
            return;
        }
        if (r->pidfd >= 0) {
            struct pollfd p = {r->pidfd, POLLIN, 0};
            (void)poll(&p, 1, (int)left);
        } else {
            struct timespec ts = {0, LOCAL_EXIT_POLL_MS * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
}

/* Has the leader exited? Checked without reaping it (WNOWAIT). */
static int leader_has_exited(pid_t pid)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        return errno == ECHILD; /* reaped behind our back: SIGCHLD ignored */
    return si.si_pid == pid;
}

/* Move fd above the standard streams so the child's dup2 actions cannot
 * clobber one another (the host may have closed its own 0, 1 or 2). */
static int fd_above_stdio(int fd)
{
    if (fd > 2)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    int err = errno;
    close(fd);
    errno = err;
    return moved;
}

/* Bytes a command's pipes hold: bulk output (a tar of the workspace) moves
 * in larger steps than the default 64 KiB with fewer wake-ups. Best
 * effort: the limit of /proc/sys/fs/pipe-max-size may refuse it. */
#define LOCAL_PIPE_SIZE (1024 * 1024)

/* pipe2(O_CLOEXEC) with both ends above 2. */
static int make_pipe(int fds[2])
{
    if (pipe2(fds, O_CLOEXEC) < 0)
        return -1;
    (void)fcntl(fds[0], F_SETPIPE_SZ, LOCAL_PIPE_SIZE);
    for (int i = 0; i < 2; i++) {
        fds[i] = fd_above_stdio(fds[i]);
        if (fds[i] < 0) {
            close_fd(&fds[1 - i]);
            return -1;
        }
    }
    return 0;
}

/* One of the output pipes is readable: pass a chunk to its sink. */
static void drain_output(struct run *r, int *fd, const struct sbx_sink *sink,
                         uint64_t *count)
{
    ssize_t n = read(*fd, r->io_buf, LOCAL_CHUNK);
    if (n < 0) {
        if (errno != EINTR && errno != EAGAIN)
            close_fd(fd);
        return;
    }
    if (n == 0) {
        close_fd(fd);
        return;
    }
    *count += (uint64_t)n;
    if (sink != NULL && r->status == SBX_OK) {
        int rc = sink->write(sink->ctx, r->io_buf, (size_t)n);
        if (rc != 0) {
            r->status = rc;
            kill_group(r);
        }
    }
}

static int cancel_requested(const struct run *r)
{
    return r->host->cancelled != NULL && r->host->cancelled(r->host, r->call);
}

/* The poll loop. Returns when output is complete, or the command was
 * stopped (r->status != SBX_OK), or the post-kill drain time is over. */
static void pump(struct run *r)
{
    const struct sbx_exec_args *a = r->args;
    int cancel_fd = r->host->cancel_fd != NULL
                        ? r->host->cancel_fd(r->host, r->call)
                        : -1;
    /* Timeouts beyond LOCAL_MAX_TIMEOUT_MS are clamped (no overflow). */
    int64_t timeout = a->timeout_ms < LOCAL_MAX_TIMEOUT_MS
                          ? a->timeout_ms
                          : LOCAL_MAX_TIMEOUT_MS;
    int64_t deadline = timeout > 0 ? sbxs_now_ms() + timeout : -1;

    for (;;) {
        if (!r->leader_exited && leader_has_exited(r->pid)) {
            r->leader_exited = 1;
            r->grace_end = sbxs_now_ms() + LOCAL_LEADER_GRACE_MS;
        }
        if (r->status != SBX_OK)
            return; /* stopped: the output is no longer wanted */
        if (r->leader_exited && r->out_fd < 0 && r->err_fd < 0)
            return;

        int64_t now = sbxs_now_ms();
        if (!r->group_killed) {
            if (cancel_requested(r)) {
                r->status = SBX_E_CANCELLED;
                kill_group(r);
                return;
            }
            if (!r->leader_exited && deadline >= 0 && now >= deadline) {
                r->timed_out = 1;
                kill_group(r);
            } else if (r->leader_exited && now >= r->grace_end) {
                kill_group(r);
            }
        } else if (now >= r->drain_end) {
            return;
        }

        struct pollfd pfd[5];
        int n = 0, i_feed = -1, i_out = -1, i_err = -1, i_cancel = -1;
        if (r->feeder != NULL && !r->feeder_done) {
            i_feed = n;
            pfd[n++] = (struct pollfd){
                .fd = sbxs_feeder_done_fd(r->feeder), .events = POLLIN};
        }
        if (r->out_fd >= 0) {
            i_out = n;
            pfd[n++] = (struct pollfd){.fd = r->out_fd, .events = POLLIN};
        }
        if (r->err_fd >= 0) {
            i_err = n;
            pfd[n++] = (struct pollfd){.fd = r->err_fd, .events = POLLIN};
        }
        if (cancel_fd >= 0 && !r->group_killed) {
            i_cancel = n;
            pfd[n++] = (struct pollfd){.fd = cancel_fd, .events = POLLIN};
        }
        if (r->pidfd >= 0 && !r->leader_exited)
            pfd[n++] = (struct pollfd){.fd = r->pidfd, .events = POLLIN};

        int64_t until = -1;
        if (r->group_killed)
            until = r->drain_end;
        else if (r->leader_exited)
            until = r->grace_end;
        else if (deadline >= 0)
            until = deadline;
        int64_t left = until < 0 ? -1 : (until > now ? until - now : 0);
        int wait_ms = left > INT_MAX ? INT_MAX : (int)left;
        if (!r->leader_exited && r->pidfd < 0 &&
            (wait_ms < 0 || wait_ms > LOCAL_EXIT_POLL_MS))
            wait_ms = LOCAL_EXIT_POLL_MS;

        if (poll(pfd, (nfds_t)n, wait_ms) < 0) {
            if (errno == EINTR)
                continue;
            r->status = r->host->set_error(r->host, r->call, SBX_E_IO,
                                           "local: poll failed: %s",
                                           strerror(errno));
            kill_group(r);
            return;
        }
        if (i_cancel >= 0 && (pfd[i_cancel].revents & (POLLIN | POLLERR))) {
            r->status = SBX_E_CANCELLED;
            kill_group(r);
            return;
        }
        /* A hung-up or closed cancel fd can never fire: stop polling it
         * rather than spin on it. */
        if (i_cancel >= 0 && (pfd[i_cancel].revents & (POLLHUP | POLLNVAL)))
            cancel_fd = -1;
        if (i_feed >= 0 && pfd[i_feed].revents != 0) {
            r->feeder_done = 1;
            if (sbxs_feeder_failed(r->feeder)) {
                /* The host has set the call's error already. */
                r->status = SBX_E_IO;
                kill_group(r);
                return;
            }
        }
        if (i_out >= 0 && pfd[i_out].revents != 0 && r->out_fd >= 0)
            drain_output(r, &r->out_fd, a->out, &r->out_bytes);
        if (i_err >= 0 && pfd[i_err].revents != 0 && r->err_fd >= 0)
            drain_output(r, &r->err_fd, a->err, &r->err_bytes);
    }
}

/* Reap the leader (only it: never wait(-1)). Returns its wait status, or -1
 * when it was reaped elsewhere. */
static int reap_leader(pid_t pid)
{
    int ws = 0;
    for (;;) {
        if (waitpid(pid, &ws, 0) == pid)
            return ws;
        if (errno != EINTR)
            return -1;
    }
}

/* Open the directory the command starts in: the workspace or a
 * workspace-relative path below it. Returns an fd (owned by the caller),
 * or -1 with the error set in *rc. */
static int open_cwd(sbx_sandbox *sb, sbx_call *call, const char *cwd, int *rc)
{
    const struct sbx_host *host = sb->st->host;
    struct stat st;
    if (fstat(sb->dirfd, &st) == 0 && st.st_nlink == 0) {
        *rc = host->set_error(host, call, SBX_E_NOT_FOUND,
                              "local: workspace '%s' was removed", sb->path);
        return -1;
    }
    if (cwd == NULL || cwd[0] == '\0')
        cwd = ".";
    int fd = sbxp_confine_check_path(cwd);
    if (fd == 0)
        fd = sbxp_confine_open(sb->dirfd, cwd, O_PATH | O_DIRECTORY, 0);
    if (fd >= 0)
        return fd;
    switch (-fd) {
    case EXDEV:
    case ELOOP:
        *rc = host->set_error(host, call, SBX_E_INVALID,
                              "local: cwd '%s' leads out of the workspace",
                              cwd);
        break;
    case ENOENT:
        *rc = host->set_error(host, call, SBX_E_INVALID,
                              "local: cwd '%s' does not exist in the "
                              "workspace",
                              cwd);
        break;
    case ENOTDIR:
        *rc = host->set_error(host, call, SBX_E_INVALID,
                              "local: cwd '%s' is not a directory", cwd);
        break;
    case ENOSYS:
        *rc = host->set_error(host, call, SBX_E_UNSUPPORTED,
                              "local: the kernel lacks openat2 (Linux 5.6 "
                              "or newer is required)");
        break;
    default:
        *rc = host->set_error(host, call, SBX_E_IO,
                              "local: cannot open cwd '%s': %s", cwd,
                              strerror(-fd));
    }
    return -1;
}

/* Validate what the host passed. */
static int check_args(const struct sbx_host *host, sbx_call *call,
                      const struct sbx_exec_args *a,
                      const struct sbx_exec_result *res)
{
    const size_t args_1_0 = offsetof(struct sbx_exec_args, err) +
                            sizeof a->err;
    if (a == NULL || a->size < args_1_0 || res == NULL ||
        res->size < sizeof *res)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: exec: missing or short arguments");
    if (a->argv == NULL || a->argv[0] == NULL || a->argv[0][0] == '\0')
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: exec: empty command");
    if (a->timeout_ms < 0)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: exec: negative timeout %lld ms",
                               (long long)a->timeout_ms);
    if (a->in != NULL && a->in->read == NULL)
        return host->set_error(host, call, SBX_E_INVALID,
                               "local: exec: stdin source without read");
    return SBX_OK;
}

int local_exec(sbx_sandbox *sb, sbx_call *call,
               const struct sbx_exec_args *args, struct sbx_exec_result *res)
{
    const struct sbx_host *host = sb->st->host;
    int rc = check_args(host, call, args, res);
    if (rc != SBX_OK)
        return rc;
    res->exit_code = -1;
    res->term_signal = 0;
    res->timed_out = 0;
    res->out_bytes = 0;
    res->err_bytes = 0;

    if (host->cancelled != NULL && host->cancelled(host, call))
        return host->set_error(host, call, SBX_E_CANCELLED,
                               "local: command '%s' cancelled before it "
                               "started",
                               args->argv[0]);
    int cwd_fd = open_cwd(sb, call, args->cwd, &rc);
    if (cwd_fd < 0)
        return rc;

    struct run r = {
        .host = host, .call = call, .args = args, .pid = -1, .pidfd = -1,
        .ctl_fd = -1, .out_fd = -1, .err_fd = -1, .status = SBX_OK,
    };
    struct stat ws_st;
    if (fstat(sb->dirfd, &ws_st) == 0) {
        r.ws_dev = ws_st.st_dev;
        r.ws_ino = ws_st.st_ino;
    }
    int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1};
    r.io_buf = malloc(LOCAL_CHUNK);
    if (r.io_buf == NULL) {
        rc = host->set_error(host, call, SBX_E_NOMEM, "local: out of memory");
        goto out;
    }
    if (make_pipe(in_p) < 0 || make_pipe(out_p) < 0 || make_pipe(err_p) < 0) {
        rc = host->set_error(host, call, SBX_E_IO,
                             "local: cannot create pipes: %s",
                             strerror(errno));
        goto out;
    }
    /* Only the parent's end of stdin is non-blocking: the command sees an
     * ordinary blocking pipe. */
    if (fcntl(in_p[1], F_SETFL, O_NONBLOCK) < 0) {
        rc = host->set_error(host, call, SBX_E_IO,
                             "local: cannot set up stdin: %s",
                             strerror(errno));
        goto out;
    }

    static const char *const no_env[] = {NULL};
    const int child_fds[3] = {in_p[0], out_p[1], err_p[1]};
    int pid = -1;
    rc = local_spawn(host, call, args->argv,
                     args->env != NULL ? args->env : no_env, cwd_fd,
                     child_fds, &pid, &r.ctl_fd);
    if (rc != SBX_OK)
        goto out;
    r.pid = pid;
    running_add(&r);
    close_fd(&in_p[0]);
    close_fd(&out_p[1]);
    close_fd(&err_p[1]);
    r.out_fd = out_p[0];
    out_p[0] = -1;
    r.err_fd = err_p[0];
    err_p[0] = -1;
    if (args->in == NULL) {
        close_fd(&in_p[1]); /* empty stdin */
    } else {
        int err = sbxs_feeder_start(&r.feeder, args->in, in_p[1], 0, LOCAL_CHUNK);
        in_p[1] = -1; /* consumed */
        if (err != 0) {
            rc = host->set_error(host, call, SBX_E_NOMEM,
                                 "local: cannot start feeding stdin of "
                                 "'%s': %s",
                                 args->argv[0], strerror(err));
            kill_group(&r);
            wait_keeper(&r);
            reap_leader(r.pid);
            goto out;
        }
    }

    /* A pidfd is always close-on-exec. Without one (kernel < 5.3) the loop
     * polls the leader's state periodically. */
    long pidfd = syscall(SYS_pidfd_open, pid, 0);
    r.pidfd = pidfd >= 0 ? (int)pidfd : -1;

    pump(&r);
    kill_group(&r); /* nothing of the command outlives exec */
    wait_keeper(&r);
    /* Waits for a source read in progress: the source is borrowed. */
    if (sbxs_feeder_finish(r.feeder, NULL) && r.status == SBX_OK)
        r.status = SBX_E_IO; /* the source failed; its message is set */
    r.feeder = NULL;
    int ws = reap_leader(r.pid);

    res->out_bytes = r.out_bytes;
    res->err_bytes = r.err_bytes;
    if (r.timed_out) {
        res->timed_out = 1;
        res->exit_code = -1;
        res->term_signal = SIGKILL;
    } else if (ws != -1 && WIFEXITED(ws)) {
        res->exit_code = WEXITSTATUS(ws);
    } else if (ws != -1 && WIFSIGNALED(ws)) {
        res->term_signal = WTERMSIG(ws);
    }
    rc = r.status;
    if (rc == SBX_E_CANCELLED)
        rc = host->set_error(host, call, SBX_E_CANCELLED,
                             "local: command '%s' cancelled", args->argv[0]);

out:
    close_fd(&r.pidfd);
    close_fd(&r.out_fd);
    close_fd(&r.err_fd);
    for (int i = 0; i < 2; i++) {
        close_fd(&in_p[i]);
        close_fd(&out_p[i]);
        close_fd(&err_p[i]);
    }
    if (cwd_fd >= 0)
        close(cwd_fd);
    free(r.io_buf);
    return rc;
}
