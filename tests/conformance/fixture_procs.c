/*
 * fixture_procs.c - processes of "cfproc": host processes with a replay
 * buffer per stream, read by cursor, optionally on a PTY (openpty).
 *
 * One reader thread per process moves its output into two ring buffers
 * (the last buffer_bytes of each stream; every byte has its number, the
 * count of bytes before it) and reaps it; readers wait on one condition
 * variable. stdin is a socketpair (written with MSG_NOSIGNAL, so a reader
 * that went away is an error, never a SIGPIPE in the host), or the PTY's
 * master. Everything is process-global (see fixture_procs.h).
 */
#include "fixture_procs.h"

#include "confine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

/* How long output is drained after the process exited (what it left
 * running is then killed). */
#define DRAIN_MS 200

struct ring {
    unsigned char *buf;
    uint64_t cap;
    uint64_t total; /* bytes ever written: the number of the next one */
};

struct fxp_proc {
    struct fxp_proc *next;
    char id[48];
    char owner[SBX_KEY_HASH_LEN + 1];
    char command[256];
    uint32_t flags;
    int pty;  /* really on a PTY */
    pid_t pid;
    int in_fd;  /* socket, or the master (owned by master) */
    int out_fd; /* pipe, or the master */
    int err_fd; /* pipe, or -1 */
    int master; /* -1 without a PTY */
    pthread_mutex_t write_lock;
    struct ring out, err;
    int exited; /* the end is known and every byte is in the rings */
    int exit_code, term_signal, timed_out;
    int stdin_closed;
    int64_t deadline_ms; /* 0: none */
    int64_t started_ms;  /* Unix time */
    int kill_now;        /* destroy: kill the group, end the thread */
    unsigned readers;    /* proc_reads delivering from the rings */
    pthread_t thread;
};

static pthread_mutex_t procs_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t procs_cv = PTHREAD_COND_INITIALIZER;
static struct fxp_proc *procs_head, *procs_tail;
static unsigned procs_counter;

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#define fail(sb, call, status, ...) \
    ((sb)->host->set_error((sb)->host, (call), (status), __VA_ARGS__))

static void ring_put(struct ring *r, const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        r->buf[(r->total + i) % r->cap] = p[i];
    r->total += n;
}

/* Move what fd has into r; closes fd (-1) at the end. Lock not held. */
static void pump(struct fxp_proc *p, int *fd, struct ring *r)
{
    unsigned char buf[65536];
    ssize_t n = read(*fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
        return;
    if (n <= 0) { /* EOF, or EIO from a master whose terminal closed */
        if (*fd != p->master)
            close(*fd);
        *fd = -1;
        return;
    }
    pthread_mutex_lock(&procs_lock);
    ring_put(r, buf, (size_t)n);
    pthread_cond_broadcast(&procs_cv);
    pthread_mutex_unlock(&procs_lock);
}

static int pidfd_of(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* The reader thread: output into the rings, the deadline, the end. */
static void *proc_thread(void *arg)
{
    struct fxp_proc *p = arg;
    int pidfd = pidfd_of(p->pid);
    int out = p->out_fd, err = p->err_fd;
    int reaped = 0, status = 0, timed_out = 0;
    int64_t drain_end = 0;
    for (;;) {
        int64_t now = mono_ms();
        pthread_mutex_lock(&procs_lock);
        int kill_now = p->kill_now;
        pthread_mutex_unlock(&procs_lock);
        if (!reaped && (kill_now || (p->deadline_ms && now >= p->deadline_ms))) {
            kill(-p->pid, SIGKILL);
            timed_out = !kill_now;
        }
        if (reaped && ((out < 0 && err < 0) || now >= drain_end || kill_now))
            break;
        struct pollfd pf[3] = {{out, POLLIN, 0}, {err, POLLIN, 0},
                               {reaped ? -1 : pidfd, POLLIN, 0}};
        int n = poll(pf, 3, 50);
        if (n > 0 && out >= 0 && pf[0].revents)
            pump(p, &out, &p->out);
        if (n > 0 && err >= 0 && pf[1].revents)
            pump(p, &err, &p->err);
        if (!reaped && (pidfd < 0 || (n > 0 && pf[2].revents)) &&
            waitpid(p->pid, &status, pidfd < 0 ? WNOHANG : 0) == p->pid) {
            reaped = 1;
            drain_end = mono_ms() + DRAIN_MS;
        }
    }
    /* What the process left running in its group dies with it. */
    kill(-p->pid, SIGKILL);
    if (pidfd >= 0)
        close(pidfd);
    if (out >= 0 && out != p->master)
        close(out);
    if (err >= 0)
        close(err);
    pthread_mutex_lock(&procs_lock);
    p->exited = 1;
    p->timed_out = timed_out;
    if (WIFSIGNALED(status)) {
        p->exit_code = -1;
        p->term_signal = WTERMSIG(status);
    } else {
        p->exit_code = WEXITSTATUS(status);
    }
    pthread_cond_broadcast(&procs_cv);
    pthread_mutex_unlock(&procs_lock);
    return NULL;
}

/* The process id of this sandbox (any sandbox's with FXP_IDS_UNCHECKED).
 * Lock held. */
static struct fxp_proc *find(const struct fxp_sandbox *sb, const char *id)
{
    for (struct fxp_proc *p = procs_head; p; p = p->next)
        if (!strcmp(p->id, id) && (sb->mode == FXP_IDS_UNCHECKED || !strcmp(p->owner, sb->owner)))
            return p;
    return NULL;
}

static int not_found(const struct fxp_sandbox *sb, sbx_call *call, const char *id)
{
    return fail(sb, call, SBX_E_NOT_FOUND, "cfproc: no process %.80s in this sandbox", id);
}

/* The environment: the caller's, or a PATH; TERM added on a PTY. */
static char **make_env(const char *const *env, int pty)
{
    static const char *const base[] = {"PATH=/usr/local/bin:/usr/bin:/bin", NULL};
    const char *const *e = env ? env : base;
    size_t n = 0;
    int has_term = 0;
    for (; e[n]; n++)
        has_term |= !strncmp(e[n], "TERM=", 5);
    char **out = calloc(n + 2, sizeof *out);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++)
        out[i] = (char *)e[i];
    if (pty && !has_term)
        out[n++] = (char *)"TERM=xterm-256color";
    return out;
}

/* The working directory, opened confined (O_PATH): -errno on failure. */
static int open_cwd(const char *root, const char *cwd)
{
    int rootfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0)
        return -errno;
    if (!cwd || !*cwd || !strcmp(cwd, "."))
        return rootfd;
    int rc = sbxp_confine_check_path(cwd);
    int fd = rc < 0 ? rc : sbxp_confine_open(rootfd, cwd, O_PATH | O_DIRECTORY, 0);
    close(rootfd);
    return fd;
}

/* In the child: every signal at its default, an empty mask. */
static void reset_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    for (int s = 1; s < 65; s++)
        (void)sigaction(s, &sa, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

int fxp_proc_start(const struct fxp_sandbox *sb, sbx_call *call,
                   const struct sbx_proc_spec *spec, char id[SBX_PROC_ID_MAX])
{
    int want_pty = (spec->flags & SBX_PROC_PTY) != 0;
    int pty = want_pty && sb->mode != FXP_PTY_NOT_TERMINAL;
    uint64_t cap = spec->buffer_bytes ? spec->buffer_bytes : SBX_PROC_BUFFER_DEFAULT;
    if (sb->mode == FXP_BUFFER_GROWS)
        cap = (uint64_t)64 << 20; /* the defect; its pages are touched as written */
    if (cap > ((uint64_t)64 << 20))
        return fail(sb, call, SBX_E_INVALID, "cfproc: a replay buffer above 64 MiB");
    int dirfd = open_cwd(sb->root, spec->cwd);
    if (dirfd < 0)
        return fail(sb, call, dirfd == -ENOENT || dirfd == -ENOTDIR || dirfd == -EXDEV ||
                                      dirfd == -ELOOP
                                  ? SBX_E_INVALID
                                  : SBX_E_IO,
                    "cfproc: cwd %.200s: %s", spec->cwd ? spec->cwd : "", strerror(-dirfd));
    struct fxp_proc *p = calloc(1, sizeof *p);
    char **env = make_env(spec->env, want_pty);
    if (p) {
        p->out.buf = malloc(cap);
        p->err.buf = malloc(cap);
    }
    int sv[2] = {-1, -1}, po[2] = {-1, -1}, pe[2] = {-1, -1}, ep[2] = {-1, -1};
    int master = -1, slave = -1, rc = SBX_OK;
    if (!p || !env || !p->out.buf || !p->err.buf) {
        rc = fail(sb, call, SBX_E_NOMEM, "cfproc: out of memory");
        goto out;
    }
    p->out.cap = p->err.cap = cap;
    p->master = -1;
    p->err_fd = -1;
    if (pipe2(ep, O_CLOEXEC) < 0)
        goto io;
    if (pty) {
        struct winsize ws = {spec->rows ? spec->rows : 24, spec->cols ? spec->cols : 80, 0, 0};
        if (openpty(&master, &slave, NULL, NULL, &ws) < 0)
            goto io;
        fcntl(master, F_SETFD, FD_CLOEXEC);
        fcntl(slave, F_SETFD, FD_CLOEXEC);
        fcntl(master, F_SETFL, O_NONBLOCK);
    } else {
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
            pipe2(po, O_CLOEXEC) < 0 || (!want_pty && pipe2(pe, O_CLOEXEC) < 0))
            goto io;
        fcntl(sv[0], F_SETFL, O_NONBLOCK);
    }
    pid_t pid = fork();
    if (pid < 0)
        goto io;
    if (pid == 0) {
        if (pty) {
            setsid();
            if (ioctl(slave, TIOCSCTTY, 0) < 0 || dup2(slave, 0) < 0 || dup2(slave, 1) < 0 ||
                dup2(slave, 2) < 0)
                _exit(126);
        } else {
            setpgid(0, 0);
            /* "on a PTY" without one (the defect): one stream still */
            if (dup2(sv[1], 0) < 0 || dup2(po[1], 1) < 0 ||
                dup2(want_pty ? po[1] : pe[1], 2) < 0)
                _exit(126);
        }
        reset_signals();
        if (fchdir(dirfd) < 0)
            _exit(126);
        execvpe(spec->argv[0], (char *const *)spec->argv, env);
        int e = errno;
        ssize_t w = write(ep[1], &e, sizeof e);
        (void)w;
        _exit(127);
    }
    close(ep[1]);
    ep[1] = -1;
    int child_errno = 0;
    ssize_t got;
    while ((got = read(ep[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR)
        ;
    if (got == (ssize_t)sizeof child_errno) {
        waitpid(pid, NULL, 0);
        rc = fail(sb, call, child_errno == ENOENT ? SBX_E_NO_COMMAND : SBX_E_NOT_EXEC,
                  "cfproc: %.200s: %s", spec->argv[0], strerror(child_errno));
        goto out;
    }
    /* Started: the process is the group leader (or session leader). */
    p->pid = pid;
    p->pty = pty;
    p->flags = spec->flags;
    if (pty) {
        close(slave);
        slave = -1;
        p->master = p->in_fd = p->out_fd = master;
        master = -1;
    } else {
        p->in_fd = sv[0];
        p->out_fd = po[0];
        p->err_fd = want_pty ? -1 : pe[0];
        sv[0] = po[0] = pe[0] = -1;
    }
    pthread_mutex_init(&p->write_lock, NULL);
    p->deadline_ms = spec->timeout_ms > 0 ? mono_ms() + spec->timeout_ms : 0;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    p->started_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    size_t used = 0;
    for (size_t i = 0; spec->argv[i] && used + 1 < sizeof p->command; i++)
        used += (size_t)snprintf(p->command + used, sizeof p->command - used, "%s%s",
                                 i ? " " : "", spec->argv[i]);
    snprintf(p->owner, sizeof p->owner, "%s", sb->owner);
    uint32_t rnd = 0;
    if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        rnd = (uint32_t)mono_ms();
    pthread_mutex_lock(&procs_lock);
    snprintf(p->id, sizeof p->id, "fxp-%u-%08x", ++procs_counter, rnd);
    if (procs_tail)
        procs_tail->next = p;
    else
        procs_head = p;
    procs_tail = p;
    pthread_mutex_unlock(&procs_lock);
    memcpy(id, p->id, strlen(p->id) + 1);
    if (sb->mode == FXP_ID_MALFORMED)
        memcpy(id, "fxp/../1", 9); /* the defect */
    if (pthread_create(&p->thread, NULL, proc_thread, p) != 0) {
        /* unlikely; the process is killed, its entry says it ended */
        kill(-pid, SIGKILL);
        waitpid(pid, NULL, 0);
        pthread_mutex_lock(&procs_lock);
        p->exited = 1;
        p->exit_code = -1;
        p->term_signal = SIGKILL;
        p->thread = pthread_self();
        pthread_mutex_unlock(&procs_lock);
    }
    p = NULL; /* in the list now */
    goto out;
io:
    rc = sb->host->set_error(sb->host, call, SBX_E_IO, "cfproc: starting %.200s: %s",
                             spec->argv[0], strerror(errno));
out:
    close(dirfd);
    free(env);
    int fds[] = {sv[0], sv[1], po[0], po[1], pe[0], pe[1], ep[0], ep[1], master, slave};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (p) {
        free(p->out.buf);
        free(p->err.buf);
        free(p);
    }
    return rc;
}

/* Write all of data to fd, waiting while it is full; honours cancellation. */
static int write_all(const struct fxp_sandbox *sb, sbx_call *call, struct fxp_proc *p,
                     const unsigned char *data, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = p->pty ? write(p->in_fd, data + off, len - off)
                           : send(p->in_fd, data + off, len - off, MSG_NOSIGNAL);
        if (w > 0) {
            off += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno != EAGAIN)
            return fail(sb, call, SBX_E_INVALID, "cfproc: process %.80s no longer reads its "
                                                 "input: %s",
                        p->id, strerror(errno));
        if (sb->host->cancelled(sb->host, call))
            return fail(sb, call, SBX_E_CANCELLED, "cfproc: write to %.80s cancelled",
                        p->id);
        struct pollfd pf = {p->in_fd, POLLOUT, 0};
        poll(&pf, 1, 50);
        pthread_mutex_lock(&procs_lock);
        int ended = p->exited;
        pthread_mutex_unlock(&procs_lock);
        if (ended)
            return fail(sb, call, SBX_E_INVALID, "cfproc: process %.80s ended", p->id);
    }
    return SBX_OK;
}

int fxp_proc_write(const struct fxp_sandbox *sb, sbx_call *call, const char *id,
                   const void *data, size_t len, uint32_t flags)
{
    pthread_mutex_lock(&procs_lock);
    struct fxp_proc *p = find(sb, id);
    int ended = p ? p->exited : 0;
    pthread_mutex_unlock(&procs_lock);
    if (!p)
        return not_found(sb, call, id);
    if (ended)
        return fail(sb, call, SBX_E_INVALID, "cfproc: process %.80s has ended", id);
    pthread_mutex_lock(&p->write_lock);
    int rc = SBX_OK;
    if (p->stdin_closed)
        rc = fail(sb, call, SBX_E_INVALID, "cfproc: stdin of %.80s is closed", id);
    if (rc == SBX_OK && len)
        rc = write_all(sb, call, p, data, len);
    if (rc == SBX_OK && (flags & SBX_PROC_WRITE_CLOSE)) {
        if (p->pty) {
            /* the terminal's EOF character, at the start of a line */
            struct termios tio;
            unsigned char eof = 4;
            if (tcgetattr(p->master, &tio) == 0 && tio.c_cc[VEOF])
                eof = tio.c_cc[VEOF];
            rc = write_all(sb, call, p, &eof, 1);
        } else {
            shutdown(p->in_fd, SHUT_WR);
        }
        if (rc == SBX_OK)
            p->stdin_closed = 1;
    }
    pthread_mutex_unlock(&p->write_lock);
    return rc;
}

/* Where a read of r from cursor (at most max bytes) starts (*from), how
 * many bytes it delivers (*n) and how many it counts lost, per the
 * contract or per the defects; *end is the stream's end as numbered for
 * the reader. -1 for a cursor past the end. Lock held. */
static int ring_plan(const struct ring *r, int mode, uint64_t cursor, uint64_t max,
                     uint64_t *from, uint64_t *n, uint64_t *lost, uint64_t *end)
{
    uint64_t kept = r->total < r->cap ? r->total : r->cap;
    uint64_t oldest = r->total - kept;
    uint64_t avail;
    *end = r->total;
    if (mode == FXP_BUFFER_DROPS_SILENTLY) {
        /* The defect: the stream is whatever the buffer still holds,
         * numbered from its oldest byte; nothing is ever lost. */
        if (cursor > kept)
            return -1;
        *from = oldest + cursor;
        *lost = 0;
        *end = kept;
        avail = kept - cursor;
    } else {
        if (cursor > r->total)
            return -1;
        *lost = cursor < oldest ? oldest - cursor : 0;
        *from = cursor + *lost;
        avail = r->total - *from;
        if (mode == FXP_CURSOR_REPEATS) /* the defect: a little again */
            *from = *from >= oldest + 16 ? *from - 16 : oldest;
    }
    *n = avail < max ? avail : max;
    return 0;
}

/*
 * Deliver n bytes of r from `from` on to sink in pieces, each copied under
 * the lock while it is still in the buffer (a writer may overwrite the
 * rest meanwhile: delivery then stops short, and the cursor says so).
 * Returns the bytes delivered; *rc the sink's status.
 */
static uint64_t ring_deliver(struct ring *r, uint64_t from, uint64_t n,
                             const struct sbx_sink *sink, int *rc)
{
    unsigned char buf[65536];
    uint64_t done = 0;
    while (done < n && *rc == SBX_OK) {
        uint64_t k = n - done < sizeof buf ? n - done : sizeof buf;
        pthread_mutex_lock(&procs_lock);
        uint64_t kept = r->total < r->cap ? r->total : r->cap;
        int gone = from + done < r->total - kept;
        for (uint64_t i = 0; !gone && i < k; i++)
            buf[i] = r->buf[(from + done + i) % r->cap];
        pthread_mutex_unlock(&procs_lock);
        if (gone)
            break;
        if (sink)
            *rc = sink->write(sink->ctx, buf, (size_t)k);
        done += k;
    }
    return done;
}

static int has_news(const struct fxp_proc *p, const struct sbx_proc_read_args *a)
{
    return p->exited || p->out.total > a->out_cursor || p->err.total > a->err_cursor;
}

int fxp_proc_read(const struct fxp_sandbox *sb, sbx_call *call, const char *id,
                  const struct sbx_proc_read_args *a, struct sbx_proc_read_result *res)
{
    uint64_t max = a->max_bytes ? a->max_bytes : (uint64_t)64 << 10;
    int64_t deadline = mono_ms() + a->wait_ms;
    pthread_mutex_lock(&procs_lock);
    struct fxp_proc *p = find(sb, id);
    while (p && !has_news(p, a) && mono_ms() < deadline) {
        if (sb->host->cancelled(sb->host, call)) {
            pthread_mutex_unlock(&procs_lock);
            return fail(sb, call, SBX_E_CANCELLED, "cfproc: read of %.80s cancelled", id);
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t left = deadline - mono_ms();
        long step = left < 50 ? (long)(left > 0 ? left : 1) : 50;
        ts.tv_nsec += step * 1000000L;
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&procs_cv, &procs_lock, &ts);
    }
    if (!p) {
        pthread_mutex_unlock(&procs_lock);
        return not_found(sb, call, id);
    }
    uint64_t ofrom = 0, on = 0, oend = 0, efrom = 0, en = 0, eend = 0;
    int r1 = ring_plan(&p->out, sb->mode, a->out_cursor, max, &ofrom, &on, &res->out_lost,
                       &oend);
    int r2 = r1 ? 0
                : ring_plan(&p->err, sb->mode, a->err_cursor, max, &efrom, &en,
                            &res->err_lost, &eend);
    int exited = p->exited;
    res->state = exited ? SBX_PROC_EXITED : SBX_PROC_RUNNING;
    res->exit_code = exited ? p->exit_code : 0;
    res->term_signal = exited ? p->term_signal : 0;
    res->timed_out = exited ? p->timed_out : 0;
    p->readers++; /* destroy waits for the reads that are delivering */
    pthread_mutex_unlock(&procs_lock);
    int rc = SBX_OK;
    if (r1 || r2) {
        rc = fail(sb, call, SBX_E_INVALID, "cfproc: a cursor of %.80s is past the end of "
                                           "its stream",
                  id);
    } else {
        on = ring_deliver(&p->out, ofrom, on, a->out, &rc);
        en = ring_deliver(&p->err, efrom, en, a->err, &rc);
        /* the defect of cursor_skips: one byte more than delivered */
        res->out_cursor = a->out_cursor + res->out_lost + on +
                          (sb->mode == FXP_CURSOR_SKIPS && on);
        res->err_cursor = a->err_cursor + res->err_lost + en;
        res->eof = exited && res->out_cursor == oend && res->err_cursor == eend;
    }
    pthread_mutex_lock(&procs_lock);
    p->readers--;
    pthread_cond_broadcast(&procs_cv);
    pthread_mutex_unlock(&procs_lock);
    return rc;
}

int fxp_proc_signal(const struct fxp_sandbox *sb, sbx_call *call, const char *id, int signo)
{
    pthread_mutex_lock(&procs_lock);
    struct fxp_proc *p = find(sb, id);
    int rc = SBX_OK;
    if (!p) {
        rc = -1;
    } else if (!p->exited) {
        pid_t group = p->pid;
        if (p->pty) {
            pid_t fg = tcgetpgrp(p->master);
            if (fg > 0)
                group = fg;
        }
        if (kill(-group, signo) < 0 && errno == EINVAL)
            rc = -2;
    }
    pthread_mutex_unlock(&procs_lock);
    if (rc == -1)
        return not_found(sb, call, id);
    if (rc == -2)
        return fail(sb, call, SBX_E_INVALID, "cfproc: not a signal for %.80s", id);
    return SBX_OK;
}

int fxp_proc_resize(const struct fxp_sandbox *sb, sbx_call *call, const char *id,
                    uint16_t rows, uint16_t cols)
{
    pthread_mutex_lock(&procs_lock);
    struct fxp_proc *p = find(sb, id);
    int rc = !p ? -1 : !(p->flags & SBX_PROC_PTY) ? -2 : 0;
    if (rc == 0 && p->pty && !p->exited) {
        struct winsize ws = {rows, cols, 0, 0};
        if (ioctl(p->master, TIOCSWINSZ, &ws) < 0)
            rc = -3;
    }
    pthread_mutex_unlock(&procs_lock);
    if (rc == -1)
        return not_found(sb, call, id);
    if (rc == -2)
        return fail(sb, call, SBX_E_INVALID, "cfproc: process %.80s has no terminal", id);
    if (rc == -3)
        return fail(sb, call, SBX_E_IO, "cfproc: resizing %.80s: %s", id, strerror(errno));
    return SBX_OK;
}

int fxp_proc_list(const struct fxp_sandbox *sb, sbx_call *call,
                  const struct sbx_proc_list_sink *sink)
{
    (void)call;
    size_t n = 0, cap = 0;
    struct {
        struct sbx_proc_info info;
        char id[48], command[256];
    } *v = NULL;
    int rc = SBX_OK;
    pthread_mutex_lock(&procs_lock);
    for (struct fxp_proc *p = procs_head; p && rc == SBX_OK; p = p->next) {
        if (strcmp(p->owner, sb->owner))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            void *nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                rc = SBX_E_NOMEM;
                break;
            }
            v = nv;
        }
        memset(&v[n], 0, sizeof v[n]);
        memcpy(v[n].id, p->id, sizeof v[n].id);
        memcpy(v[n].command, p->command, sizeof v[n].command);
        v[n].info.size = sizeof v[n].info;
        v[n].info.flags = p->flags;
        v[n].info.state = p->exited ? SBX_PROC_EXITED : SBX_PROC_RUNNING;
        v[n].info.exit_code = p->exit_code;
        v[n].info.term_signal = p->term_signal;
        v[n].info.started_ms = p->started_ms;
        n++;
    }
    pthread_mutex_unlock(&procs_lock);
    for (size_t i = 0; i < n && rc == SBX_OK; i++) {
        v[i].info.id = v[i].id;
        v[i].info.command = v[i].command;
        rc = sink->entry(sink->ctx, &v[i].info);
    }
    free(v);
    return rc;
}

void fxp_procs_signal(const char *owner, int signo)
{
    pthread_mutex_lock(&procs_lock);
    for (struct fxp_proc *p = procs_head; p; p = p->next)
        if (!strcmp(p->owner, owner) && !p->exited)
            kill(-p->pid, signo);
    pthread_mutex_unlock(&procs_lock);
}

void fxp_procs_destroy(const char *owner, int mode)
{
    if (mode == FXP_SURVIVES_DESTROY)
        return; /* the defect: running and listed after destroy */
    for (;;) {
        struct fxp_proc *victim = NULL, *prev = NULL;
        pthread_mutex_lock(&procs_lock);
        for (struct fxp_proc *p = procs_head; p; prev = p, p = p->next)
            if (!strcmp(p->owner, owner)) {
                victim = p;
                break;
            }
        if (victim) {
            /* out of the list at once: its id is gone for every reader */
            if (prev)
                prev->next = victim->next;
            else
                procs_head = victim->next;
            if (procs_tail == victim)
                procs_tail = prev;
            victim->kill_now = 1;
            kill(-victim->pid, SIGKILL);
        }
        pthread_mutex_unlock(&procs_lock);
        if (!victim)
            return;
        if (!pthread_equal(victim->thread, pthread_self()))
            pthread_join(victim->thread, NULL);
        pthread_mutex_lock(&procs_lock);
        while (victim->readers)
            pthread_cond_wait(&procs_cv, &procs_lock);
        pthread_mutex_unlock(&procs_lock);
        /* no reader can hold it: each looks it up under the lock, and the
         * ones writing hold write_lock */
        pthread_mutex_lock(&victim->write_lock);
        pthread_mutex_unlock(&victim->write_lock);
        if (victim->in_fd >= 0 && victim->in_fd != victim->master)
            close(victim->in_fd);
        if (victim->master >= 0)
            close(victim->master);
        pthread_mutex_destroy(&victim->write_lock);
        free(victim->out.buf);
        free(victim->err.buf);
        free(victim);
    }
}
