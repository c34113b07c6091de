/*
 * exec.c - one command, served on its connection.
 *
 * The handler process becomes a child subreaper, forks the command (a new
 * session, the configured user, the working directory opened beneath the
 * workspace, the container's environment with the request's on top) and
 * then runs one poll loop: output from the command's pipes goes out as
 * frames as it arrives (one frame in flight at a time, so a slow host
 * slows the command down instead of filling memory), stdin frames go to
 * the command's stdin, a cancel frame, a cut connection or the timeout
 * kill the whole tree (tree.c). When the leader has exited and its output
 * has ended (or LINGER_MS passed), whatever it left behind is killed too,
 * then AP_EXIT carries its wait status: an exit code, or the signal that
 * ended it.
 */

#include "agent.h"

#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

enum { STAGE_USER = 1, STAGE_CWD = 2, STAGE_EXEC = 3 };

/* How long output may stay open after the leader exited. */
#define LINGER_MS 250

struct run {
    int sock;
    pid_t leader;
    int leader_done, status;
    int out_fd, err_fd, in_fd; /* our ends, -1 once closed */
    int next_err;              /* read stderr first next time (fairness) */
    /* the frame being received */
    unsigned char rhdr[AP_HDR_LEN];
    size_t rhdr_len;
    int rtype;
    uint32_t rlen, rgot;
    unsigned char *rbuf;
    /* stdin data waiting for the command */
    unsigned char *inbuf;
    size_t in_len, in_off;
    int in_closed; /* stdin ended (or the command closed it) */
    /* the output frame in flight */
    unsigned char *obuf;
    size_t o_len, o_off;
    int timed_out, cancelled, host_gone, killed;
    int sock_eof; /* the host shut its side: a cancellation */
    int64_t leader_end; /* when the leader's exit was seen, 0 before */
};

static void reap(void *ctx)
{
    struct run *r = ctx;
    int status;
    pid_t p;
    while ((p = waitpid(-1, &status, WNOHANG)) > 0)
        if (p == r->leader) {
            r->leader_done = 1;
            r->status = status;
        }
}

static void kill_all(struct run *r)
{
    agent_tree_kill(reap, r);
    r->killed = 1;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

/* The environment: the container's (ours), the request's on top. HOME is
 * the user's from /etc/passwd unless the request sets it: the container's
 * own HOME is the agent's (root's), not the sandbox user's. */
static char **make_env(char **req, size_t nreq, const struct agent_user *u)
{
    size_t nbase = 0;
    while (environ && environ[nbase])
        nbase++;
    char **env = calloc(nbase + nreq + 2, sizeof *env);
    if (!env)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < nbase; i++) {
        size_t klen = strcspn(environ[i], "=");
        int overridden = strncmp(environ[i], "HOME=", 5) == 0;
        for (size_t j = 0; j < nreq && !overridden; j++)
            overridden = strncmp(req[j], environ[i], klen + 1) == 0;
        if (!overridden)
            env[n++] = environ[i];
    }
    int has_home = 0;
    for (size_t j = 0; j < nreq; j++) {
        env[n++] = req[j];
    }
    for (size_t i = 0; i < n; i++)
        has_home |= strncmp(env[i], "HOME=", 5) == 0;
    if (!has_home) {
        static char home[600];
        snprintf(home, sizeof home, "HOME=%s", u->home);
        env[n++] = home;
    }
    env[n] = NULL;
    return env;
}

/* In the child: become the command or report why not on errfd. */
static void child(int in, int out, int err, int errfd, int cwdfd,
                  const struct agent_user *u, char **argv, char **env)
{
    int stage = STAGE_USER;
    setsid();
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
        goto fail;
    if (agent_user_become(u) != 0)
        goto fail;
    stage = STAGE_CWD;
    if (fchdir(cwdfd) != 0)
        goto fail;
    stage = STAGE_EXEC;
    environ = env;
    execvp(argv[0], argv);
fail:;
    int msg[2] = {stage, errno};
    if (write(errfd, msg, sizeof msg) < 0)
        _exit(127);
    _exit(127);
}

static int queue_frame(struct run *r, int type, int fd)
{
    ssize_t n = read(fd, r->obuf + AP_HDR_LEN, AP_CHUNK);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return 0;
    if (n <= 0)
        return -1; /* end of this stream */
    sbxs_ap_header(r->obuf, type, (uint32_t)n);
    r->o_len = AP_HDR_LEN + (size_t)n;
    r->o_off = 0;
    return 0;
}

static void flush_out(struct run *r)
{
    while (r->o_off < r->o_len) {
        ssize_t k = send(r->sock, r->obuf + r->o_off, r->o_len - r->o_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            return;
        if (k < 0) {
            r->host_gone = 1;
            r->o_len = r->o_off = 0;
            return;
        }
        r->o_off += (size_t)k;
    }
    r->o_len = r->o_off = 0;
}

/* A complete frame from the host. */
static void on_frame(struct run *r)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, r->rbuf, r->rlen);
    switch (r->rtype) {
    case AP_STDIN:
        if (!r->in_closed && r->rlen) {
            memcpy(r->inbuf, r->rbuf, r->rlen);
            r->in_len = r->rlen;
            r->in_off = 0;
        }
        return;
    case AP_STDIN_END:
        r->in_closed = 1;
        if (r->in_len == 0)
            close_fd(&r->in_fd);
        return;
    case AP_SIGNAL: {
        uint32_t sig = sbxs_ap_get_u32(&in);
        if (sbxs_ap_in_done(&in) && sig > 0 && sig < NSIG && !r->leader_done)
            kill(r->leader, (int)sig);
        return;
    }
    case AP_CANCEL:
        r->cancelled = 1;
        kill_all(r);
        return;
    default:
        /* a malformed conversation: stop everything, say why */
        agent_wire_error(r->sock, EPROTO, "exec", "unexpected frame type 0x%02x during exec",
                   r->rtype);
        r->host_gone = 1;
        kill_all(r);
    }
}

/* Read what the host sent (non-blocking). */
static void read_host(struct run *r)
{
    for (;;) {
        if (r->in_len && !r->in_closed)
            return; /* stdin is full: read more once the command took it */
        ssize_t k;
        if (r->rhdr_len < AP_HDR_LEN) {
            k = recv(r->sock, r->rhdr + r->rhdr_len, AP_HDR_LEN - r->rhdr_len,
                     MSG_DONTWAIT);
        } else {
            k = r->rlen - r->rgot
                    ? recv(r->sock, r->rbuf + r->rgot, r->rlen - r->rgot, MSG_DONTWAIT)
                    : 0;
        }
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            return;
        if (k == 0 && !(r->rhdr_len == AP_HDR_LEN && r->rlen == r->rgot)) {
            /* the host shut its write side (or closed): cancel, and report
             * if it still listens */
            r->sock_eof = 1;
            if (!r->killed) {
                r->cancelled = 1;
                kill_all(r);
            }
            return;
        }
        if (k < 0) {
            r->host_gone = 1; /* the connection broke */
            return;
        }
        if (r->rhdr_len < AP_HDR_LEN) {
            r->rhdr_len += (size_t)k;
            if (r->rhdr_len < AP_HDR_LEN)
                continue;
            if (sbxs_ap_parse_header(r->rhdr, &r->rtype, &r->rlen) != 0 || r->rlen > AP_CHUNK) {
                agent_wire_error(r->sock, EPROTO, "exec", "frame longer than %u bytes",
                           AP_CHUNK);
                r->host_gone = 1;
                return;
            }
            r->rgot = 0;
        } else {
            r->rgot += (uint32_t)k;
        }
        if (r->rhdr_len == AP_HDR_LEN && r->rgot == r->rlen) {
            r->rhdr_len = 0;
            on_frame(r);
            if (r->host_gone)
                return;
        }
    }
}

static void feed_stdin(struct run *r)
{
    while (r->in_fd >= 0 && r->in_off < r->in_len) {
        ssize_t k = write(r->in_fd, r->inbuf + r->in_off, r->in_len - r->in_off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            return;
        if (k < 0) { /* the command closed its stdin: drop the rest */
            close_fd(&r->in_fd);
            r->in_closed = 1;
            break;
        }
        r->in_off += (size_t)k;
    }
    if (r->in_off >= r->in_len) {
        r->in_len = r->in_off = 0;
        if (r->in_closed)
            close_fd(&r->in_fd);
    }
}

static void send_exit(struct run *r)
{
    unsigned char buf[64];
    struct ap_out o;
    uint32_t flags = 0, code = 0, sig = 0;
    if (WIFSIGNALED(r->status)) {
        flags |= AP_EXIT_SIGNALED;
        sig = (uint32_t)WTERMSIG(r->status);
    } else {
        code = (uint32_t)WEXITSTATUS(r->status);
    }
    if (r->timed_out)
        flags |= AP_EXIT_TIMED_OUT;
    if (r->cancelled)
        flags |= AP_EXIT_CANCELLED;
    sbxs_ap_out_begin(&o, buf, sizeof buf, AP_EXIT);
    sbxs_ap_put_u32(&o, flags);
    sbxs_ap_put_u32(&o, code);
    sbxs_ap_put_u32(&o, sig);
    size_t n = sbxs_ap_out_end(&o);
    agent_wire_write_full(r->sock, buf, n);
}

static void loop(struct run *r, int sfd, int64_t deadline)
{
    for (;;) {
        if (r->host_gone && !r->killed)
            kill_all(r);
        if (!r->host_gone && r->o_len)
            flush_out(r);
        if (r->host_gone)
            r->o_len = r->o_off = 0; /* nobody to send to: drain and drop */
        if (r->leader_done && r->out_fd < 0 && r->err_fd < 0 && !r->o_len)
            return;
        if (deadline && !r->killed && sbxs_now_ms() >= deadline) {
            r->timed_out = 1;
            kill_all(r);
        }
        /* as the local provider does: once the leader has exited, what it
         * left holding the output gets LINGER_MS to finish, then the tree
         * is killed (its output up to then is still delivered) */
        if (r->leader_done && !r->leader_end)
            r->leader_end = sbxs_now_ms();
        if (r->leader_end && !r->killed && sbxs_now_ms() >= r->leader_end + LINGER_MS)
            kill_all(r);
        struct pollfd p[5];
        int np = 0, i_sock = -1, i_out = -1, i_err = -1, i_in = -1;
        p[np] = (struct pollfd){.fd = sfd, .events = POLLIN};
        np++;
        if (!r->host_gone && !(r->sock_eof && !r->o_len)) {
            short ev = 0;
            if (!(r->in_len && !r->in_closed) && !r->sock_eof)
                ev |= POLLIN;
            if (r->o_len)
                ev |= POLLOUT;
            p[np] = (struct pollfd){.fd = r->sock, .events = ev};
            i_sock = np++;
        }
        if (!r->o_len && r->out_fd >= 0) {
            p[np] = (struct pollfd){.fd = r->out_fd, .events = POLLIN};
            i_out = np++;
        }
        if (!r->o_len && r->err_fd >= 0) {
            p[np] = (struct pollfd){.fd = r->err_fd, .events = POLLIN};
            i_err = np++;
        }
        if (r->in_fd >= 0 && r->in_len) {
            p[np] = (struct pollfd){.fd = r->in_fd, .events = POLLOUT};
            i_in = np++;
        }
        int timeout = -1;
        int64_t wake = 0;
        if (deadline && !r->killed)
            wake = deadline;
        if (r->leader_end && !r->killed && (!wake || r->leader_end + LINGER_MS < wake))
            wake = r->leader_end + LINGER_MS;
        if (wake) {
            int64_t left = wake - sbxs_now_ms();
            timeout = left < 0 ? 0 : left > 60000 ? 60000 : (int)left;
        }
        if (poll(p, (nfds_t)np, timeout) < 0 && errno != EINTR)
            return;
        if (p[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) == sizeof si)
                ;
            reap(r);
        }
        if (i_sock >= 0 && (p[i_sock].revents & (POLLIN | POLLHUP | POLLERR)) && !r->sock_eof)
            read_host(r);
        else if (i_sock >= 0 && (p[i_sock].revents & (POLLHUP | POLLERR)))
            r->host_gone = 1;
        if (i_in >= 0 && p[i_in].revents)
            feed_stdin(r);
        int first_err = r->next_err;
        int idx[2] = {first_err ? i_err : i_out, first_err ? i_out : i_err};
        for (int k = 0; k < 2 && !r->o_len; k++) {
            int i = idx[k];
            if (i < 0 || !p[i].revents)
                continue;
            int is_err = i == i_err;
            int *fd = is_err ? &r->err_fd : &r->out_fd;
            if (queue_frame(r, is_err ? AP_STDERR : AP_STDOUT, *fd) != 0)
                close_fd(fd);
            r->next_err = !is_err;
        }
    }
}

void agent_exec_serve(int sock, const unsigned char *req, uint32_t len, const char *user)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, req, len);
    uint64_t timeout_ms = sbxs_ap_get_u64(&in);
    char *cwd = sbxs_ap_get_str(&in);
    uint32_t argc = sbxs_ap_get_u32(&in);
    char **argv = NULL, **reqenv = NULL;
    uint32_t envc = 0;
    if (!in.bad && argc > 0 && argc <= 65536 && (argv = calloc(argc + 1, sizeof *argv))) {
        for (uint32_t i = 0; i < argc && !in.bad; i++)
            argv[i] = sbxs_ap_get_str(&in);
        envc = sbxs_ap_get_u32(&in);
        if (!in.bad && envc <= 65536 && (reqenv = calloc(envc + 1, sizeof *reqenv)))
            for (uint32_t i = 0; i < envc && !in.bad; i++) {
                reqenv[i] = sbxs_ap_get_str(&in);
                if (reqenv[i] && (!strchr(reqenv[i], '=') || reqenv[i][0] == '='))
                    in.bad = 1;
            }
    }
    if (!sbxs_ap_in_done(&in) || !argv || !reqenv || !argv[0] || !argv[0][0]) {
        agent_wire_error(sock, EPROTO, "exec", "malformed exec request");
        return;
    }
    struct agent_user u;
    char msg[256];
    if (agent_user_resolve(user[0] ? user : agent_cfg.user, &u, msg, sizeof msg) != 0) {
        agent_wire_error(sock, EINVAL, "user", "%s", msg);
        return;
    }
    int rootfd = agent_files_open_root(sock, agent_cfg.roots[0]);
    if (rootfd < 0)
        return;
    /* close-on-exec like every descriptor here: dup() would hand the
     * workspace directory to the command */
    int cwdfd = cwd[0] ? agent_beneath(rootfd, cwd, O_PATH | O_DIRECTORY | O_CLOEXEC, 0)
                       : fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
    if (cwdfd < 0) {
        int e = errno;
        agent_wire_error(sock, e, "cwd", "working directory %s: %s", cwd,
                   e == EXDEV ? "leads out of the workspace" : strerror(e));
        return;
    }
    char **env = make_env(reqenv, envc, &u);
    int pin[2], pout[2], perr[2], pfail[2];
    if (!env || pipe2(pin, O_CLOEXEC) || pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC) ||
        pipe2(pfail, O_CLOEXEC)) {
        agent_wire_error(sock, errno, "exec", "cannot make pipes: %s", strerror(errno));
        return;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    sigset_t chld, old;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    int64_t start = sbxs_now_ms();
    pid_t pid = fork();
    if (pid == 0)
        child(pin[0], pout[1], perr[1], pfail[1], cwdfd, &u, argv, env);
    int fe = errno;
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    close(pfail[1]);
    close(cwdfd);
    close(rootfd);
    if (pid < 0 || sfd < 0) {
        agent_wire_error(sock, fe, "exec", "cannot fork: %s", strerror(fe));
        return;
    }
    int fail[2];
    ssize_t got;
    while ((got = read(pfail[0], fail, sizeof fail)) < 0 && errno == EINTR)
        ;
    close(pfail[0]);
    if (got == (ssize_t)sizeof fail) {
        waitpid(pid, NULL, 0);
        const char *stage = fail[0] == STAGE_USER  ? "user"
                            : fail[0] == STAGE_CWD ? "cwd"
                                                   : "exec";
        agent_wire_error(sock, fail[1], stage, "%s: %s", fail[0] == STAGE_EXEC ? argv[0] : stage,
                   strerror(fail[1]));
        return;
    }
    struct run r = {.sock = sock, .leader = pid, .out_fd = pout[0], .err_fd = perr[0],
                    .in_fd = pin[1]};
    r.rbuf = malloc(AP_CHUNK);
    r.inbuf = malloc(AP_CHUNK);
    r.obuf = malloc(AP_HDR_LEN + AP_CHUNK);
    if (!r.rbuf || !r.inbuf || !r.obuf) {
        kill_all(&r);
        agent_wire_error(sock, ENOMEM, "exec", "out of memory");
        return;
    }
    fcntl(r.in_fd, F_SETFL, O_NONBLOCK);
    fcntl(r.out_fd, F_SETFL, O_NONBLOCK);
    fcntl(r.err_fd, F_SETFL, O_NONBLOCK);
    int64_t deadline = timeout_ms ? start + (int64_t)timeout_ms : 0;
    loop(&r, sfd, deadline);
    if (!r.leader_done) { /* poll failed: do not leave it running */
        kill_all(&r);
        while (!r.leader_done && waitpid(pid, &r.status, 0) == pid)
            r.leader_done = 1;
    }
    kill_all(&r); /* what the command left behind does not outlive it */
    close_fd(&r.in_fd);
    if (!r.host_gone)
        send_exit(&r);
    sigprocmask(SIG_SETMASK, &old, NULL);
}
