/*
 * proc_supervisor.c - the supervisor's event loop (proc_supervisor.h):
 * the table of processes, the client connections and the process
 * requests of protocol 3 (shared/agent_proto/PROTOCOL.md).
 *
 * Every descriptor is non-blocking and one poll() waits for all of them:
 * the processes' output (always polled, so output is drained into the
 * rings whatever the readers do), their stdin while a write is queued, the
 * connections, the listening and hand-off sockets, and a signalfd for
 * SIGCHLD. A connection serves one request at a time; a request that must
 * wait (a read with nothing new yet, a write the process has not taken
 * yet) stays pending on its connection, and is answered as soon as what
 * it waits for happens: every pass of the loop looks at the pending reads
 * after draining output, so an echo is answered within the pass that
 * read it.
 *
 * Coalescing. A terminal's master gives at most one line-discipline
 * buffer (4 KiB, mostly 1 or 2 KiB) per read, and a reader that keeps up
 * with a flood would get one such read per answer: a round trip per
 * 2 KiB. So a read is held for more when what it waits on floods: the
 * stream brought at least SBXS_PSV_FLOOD_BYTES in the current and the
 * previous SBXS_PSV_FLOOD_WINDOW_US bucket (10 to 20 ms: at least
 * 0.8 MiB/s), or it did so less than SBXS_PSV_FLOOD_MEMORY_US ago and the
 * read has at least SBXS_PSV_FLOOD_CHUNK bytes to send (a flood whose
 * writer was off the CPU for longer than the window, on a loaded
 * machine, goes on; an echo or a prompt is fewer bytes). Such a read is answered once max_bytes are there, once the
 * stream or the process ends, or hold_us (4 ms) after it first had a byte
 * to send, whichever comes first. Any other read (a keystroke's echo: a
 * few bytes on a stream that was quiet) is answered in the pass that read
 * its first byte, as before, so interactive latency is untouched; a byte
 * of a flood waits at most hold_us more, far less than what a round trip
 * per 2 KiB cost its reader. There is no "gone quiet" rule: on a loaded
 * machine a flood's own chunks come milliseconds apart (the writer and
 * the supervisor wake each other per terminal read), so any short quiet
 * threshold would end most holds early.
 */
#include "proc_supervisor.h"

#include "agent_proto/proto.h"
#include "proc_ring.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define READ_DEFAULT (64u * 1024)
#define DRAIN_CHUNK (64u * 1024)
#define DRAIN_ROUNDS 16 /* reads per stream per pass: fairness between floods */
#define COMMAND_MAX 256 /* proc_list's command text */

struct conn;

/* How fast a stream brings bytes (Coalescing, above): the bytes of the
 * current and the previous SBXS_PSV_FLOOD_WINDOW_US bucket. */
struct flow {
    int64_t bucket;
    uint64_t cur, prev;
    int64_t flooded_us; /* when it last brought FLOOD_BYTES in a window, 0: never */
};

struct proc {
    struct proc *next;
    char id[24];
    uint32_t flags;      /* AP_PS_* */
    char *command;
    int64_t started_ms;  /* Unix time */
    pid_t pid;           /* leader = its process group = its session */
    int in_fd, out_fd, err_fd; /* a PTY: in_fd == out_fd, err_fd -1 */
    struct sbxs_ring out, err;
    struct flow fout, ferr;
    int leader_done, status;
    int64_t leader_end;  /* monotonic ms of the leader's exit, 0 before */
    int ended;           /* reaped and its output closed: final */
    int64_t ended_ms;
    int timed_out;
    int64_t deadline;    /* 0: none */
    int out_eof;         /* a PTY's master read EIO: no more output */
    int stdin_closed;
    unsigned char last_in; /* the last byte written (a PTY's EOF rule) */
    struct conn *wq;     /* connections with a write queued, first is written */
};

enum { C_PREAMBLE = 1, C_CHANNEL, C_READY };
enum { PEND_NONE = 0, PEND_READ, PEND_WRITE, PEND_PEEK };

struct conn {
    struct conn *next;
    int fd;
    int phase;
    int closing;         /* close once the output is sent */
    /* the frame being received */
    unsigned char hdr[AP_HDR_LEN];
    size_t hdr_got;
    int type;
    uint32_t len, got;
    unsigned char *rbuf;
    unsigned char pre[AP_PREAMBLE_LEN];
    size_t pre_got;
    /* the answer being sent */
    unsigned char *obuf;
    size_t olen, ooff;
    /* the pending request */
    int pend;
    struct proc *p;
    uint64_t rc_out, rc_err; /* read cursors */
    size_t rmax;
    int64_t rdeadline;
    int rend;            /* a start's first read: answered at the end or the deadline */
    int64_t rhold;       /* a held read's latest answer (monotonic us), 0: not held yet */
    const unsigned char *wdata; /* inside rbuf */
    size_t wlen, woff;
    int wclose, wpeek;
    uint64_t peek_from;  /* the terminal's output end when the write came */
    unsigned char eof[2];
    size_t eoflen, eofoff;
    struct conn *wnext;  /* in p->wq */
};

struct sbxs_psv {
    struct sbxs_psv_config cfg;
    struct proc *procs; /* start order */
    size_t nprocs;
    struct conn *conns;
    size_t nconns;
    int sfd;
    int64_t idle_since;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- answers ------------------------------------------------------------ */

static void conn_flush(struct conn *c)
{
    while (c->obuf && c->ooff < c->olen) {
        ssize_t k = send(c->fd, c->obuf + c->ooff, c->olen - c->ooff, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            return;
        if (k < 0) {
            c->closing = 2; /* broken: close now */
            break;
        }
        c->ooff += (size_t)k;
    }
    free(c->obuf);
    c->obuf = NULL;
    c->olen = c->ooff = 0;
}

/* Queue a built frame (owned) and try to send it at once. */
static void conn_send(struct conn *c, unsigned char *buf, size_t len)
{
    if (!buf || !len) {
        free(buf);
        c->closing = 2;
        return;
    }
    c->obuf = buf;
    c->olen = len;
    c->ooff = 0;
    conn_flush(c);
}

static void conn_simple(struct conn *c, int type)
{
    unsigned char *b = malloc(AP_HDR_LEN);
    if (b)
        sbxs_ap_header(b, type, 0);
    conn_send(c, b, AP_HDR_LEN);
}

static void conn_error(struct conn *c, int fatal, int e, const char *stage, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void conn_error(struct conn *c, int fatal, int e, const char *stage, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    size_t cap = AP_HDR_LEN + 4 + 4 + strlen(stage) + 4 + strlen(msg);
    unsigned char *b = malloc(cap);
    struct ap_out o;
    size_t n = 0;
    if (b) {
        sbxs_ap_out_begin(&o, b, cap, AP_ERROR);
        sbxs_ap_put_u32(&o, (uint32_t)e);
        sbxs_ap_put_str(&o, stage);
        sbxs_ap_put_str(&o, msg);
        n = sbxs_ap_out_end(&o);
    }
    if (fatal)
        c->closing = 1;
    conn_send(c, b, n);
}

/* ---- the table ---------------------------------------------------------- */

static struct proc *find(struct sbxs_psv *s, const char *id)
{
    for (struct proc *p = s->procs; p; p = p->next)
        if (strcmp(p->id, id) == 0)
            return p;
    return NULL;
}

static int referenced(const struct sbxs_psv *s, const struct proc *p)
{
    for (const struct conn *c = s->conns; c; c = c->next)
        if (c->pend && c->p == p)
            return 1;
    return 0;
}

static void proc_free(struct proc *p)
{
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->in_fd >= 0 && p->in_fd != p->out_fd)
        close(p->in_fd);
    if (p->err_fd >= 0)
        close(p->err_fd);
    sbxs_ring_free(&p->out);
    sbxs_ring_free(&p->err);
    free(p->command);
    free(p);
}

static void unlink_proc(struct sbxs_psv *s, struct proc *p)
{
    for (struct proc **pp = &s->procs; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            s->nprocs--;
            proc_free(p);
            return;
        }
}

/* Forget ended processes older than SBXS_PSV_FORGET_MS; with room wanted
 * (a start into a full table), the oldest one ended at least
 * SBXS_PSV_KEEP_MS ago too. 0 when there is room. */
static int make_room(struct sbxs_psv *s, int want)
{
    int64_t now = now_ms();
    for (struct proc *p = s->procs, *n; p; p = n) {
        n = p->next;
        if (p->ended && now - p->ended_ms >= SBXS_PSV_FORGET_MS && !referenced(s, p))
            unlink_proc(s, p);
    }
    if (!want || s->nprocs < SBXS_PSV_MAX_PROCS)
        return 0;
    struct proc *old = NULL;
    for (struct proc *p = s->procs; p; p = p->next)
        if (p->ended && now - p->ended_ms >= SBXS_PSV_KEEP_MS && !referenced(s, p) &&
            (!old || p->ended_ms < old->ended_ms))
            old = p;
    if (!old)
        return -1;
    unlink_proc(s, old);
    return 0;
}

static void close_stdin(struct proc *p)
{
    if (p->in_fd >= 0 && p->in_fd != p->out_fd)
        close(p->in_fd);
    p->in_fd = p->in_fd == p->out_fd ? p->in_fd : -1;
    p->stdin_closed = 1;
}

static void close_output(struct proc *p)
{
    if (p->out_fd >= 0) {
        if (p->in_fd == p->out_fd)
            p->in_fd = -1;
        close(p->out_fd);
        p->out_fd = -1;
    }
    if (p->err_fd >= 0)
        close(p->err_fd);
    p->err_fd = -1;
}

/* SIGKILL the process's group, and with a PTY the terminal's foreground
 * group (a job the shell started in a group of its own). */
static void kill_group(struct proc *p)
{
    if (p->ended)
        return;
    if ((p->flags & AP_PS_PTY) && p->out_fd >= 0) {
        pid_t fg = tcgetpgrp(p->out_fd);
        if (fg > 0 && fg != p->pid)
            kill(-fg, SIGKILL);
    }
    kill(-p->pid, SIGKILL);
}

static void fail_writers(struct proc *p)
{
    while (p->wq) {
        struct conn *c = p->wq;
        p->wq = c->wnext;
        c->pend = PEND_NONE;
        c->p = NULL;
        free(c->rbuf);
        c->rbuf = NULL;
        conn_error(c, 0, EPIPE, "write", "process %s %s", p->id,
                   p->ended ? "has ended" : "closed its stdin");
    }
}

/* ---- reaping and the end of a process ------------------------------------ */

static void reap(void *ctx)
{
    struct sbxs_psv *s = ctx;
    int status;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (struct proc *p = s->procs; p; p = p->next)
            if (p->pid == pid && !p->leader_done) {
                p->leader_done = 1;
                p->status = status;
                p->leader_end = now_ms();
                break;
            }
    }
}

/* Timeouts, the linger after the leader, the end. */
static void advance(struct sbxs_psv *s, struct proc *p, int64_t now)
{
    (void)s;
    if (p->ended)
        return;
    if (p->deadline && !p->leader_done && now >= p->deadline && !p->timed_out) {
        p->timed_out = 1;
        kill_group(p);
    }
    if (!p->leader_done)
        return;
    if ((p->out_fd >= 0 && !p->out_eof) || p->err_fd >= 0) {
        if (now < p->leader_end + SBXS_PSV_LINGER_MS)
            return;
        /* what still holds the output after the linger does not outlive
         * the leader; the output already read stays */
        kill(-p->pid, SIGKILL);
        close_output(p);
    } else {
        kill(-p->pid, SIGKILL); /* background jobs of the leader's group */
        close_output(p);
    }
    close_stdin(p);
    p->in_fd = -1;
    p->ended = 1;
    p->ended_ms = now;
    fail_writers(p);
}

static void flow_add(struct flow *f, size_t n)
{
    int64_t us = now_us(), b = us / SBXS_PSV_FLOOD_WINDOW_US;
    if (b != f->bucket) {
        f->prev = b == f->bucket + 1 ? f->cur : 0;
        f->cur = 0;
        f->bucket = b;
    }
    f->cur += n;
    if (f->cur + f->prev >= SBXS_PSV_FLOOD_BYTES)
        f->flooded_us = us;
}

/* Is the stream flooding at us (Coalescing), for a read with pending
 * bytes waiting on it? */
static int flow_floods(const struct flow *f, int64_t us, uint64_t pending)
{
    int64_t b = us / SBXS_PSV_FLOOD_WINDOW_US;
    uint64_t n = b == f->bucket ? f->cur + f->prev : b == f->bucket + 1 ? f->cur : 0;
    if (n >= SBXS_PSV_FLOOD_BYTES)
        return 1;
    /* a flood that paused (its writer did not get the CPU for a while)
     * and goes on: not the few bytes of an echo or a prompt */
    return pending >= SBXS_PSV_FLOOD_CHUNK && f->flooded_us &&
           us - f->flooded_us < SBXS_PSV_FLOOD_MEMORY_US;
}

/* Read what a stream holds into its ring. */
static void drain(struct proc *p, int err)
{
    static unsigned char buf[DRAIN_CHUNK];
    int *fd = err ? &p->err_fd : &p->out_fd;
    struct sbxs_ring *r = err ? &p->err : &p->out;
    for (int i = 0; i < DRAIN_ROUNDS && *fd >= 0; i++) {
        ssize_t n = read(*fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n < 0 && errno == EIO && !err && (p->flags & AP_PS_PTY)) {
            /* the slave is closed everywhere. The master stays open until
             * the leader is reaped: closing it would hang the terminal up
             * and SIGHUP a leader that closed its descriptors but has not
             * exited yet */
            p->out_eof = 1;
            return;
        }
        if (n <= 0) { /* end of the stream */
            if (err) {
                close(p->err_fd);
                p->err_fd = -1;
            } else {
                if (p->in_fd == p->out_fd)
                    p->in_fd = -1;
                close(p->out_fd);
                p->out_fd = -1;
            }
            return;
        }
        sbxs_ring_append(r, buf, (size_t)n);
        flow_add(err ? &p->ferr : &p->fout, (size_t)n);
        /* a short read took all there was: the next poll tells of more
         * (and of the end), without a read that finds nothing */
        if ((size_t)n < sizeof buf)
            return;
    }
}

/* ---- writes ------------------------------------------------------------- */

/* The terminal's EOF character for a close of a PTY's input; twice after
 * a partial line (the first only ends the line). */
static void pty_eof(struct proc *p, struct conn *c)
{
    struct termios t;
    unsigned char veof = tcgetattr(p->in_fd, &t) == 0 ? t.c_cc[VEOF] : 4;
    c->eof[0] = c->eof[1] = veof;
    c->eoflen = p->last_in == '\n' || p->last_in == veof || p->last_in == 0 ? 1 : 2;
}

static void pump_writes(struct proc *p)
{
    while (p->wq) {
        struct conn *c = p->wq;
        if (p->in_fd < 0) {
            fail_writers(p);
            return;
        }
        /* a close without bytes: the loop below must still send the EOF */
        if (c->wlen == 0 && c->wclose && !c->eoflen && (p->flags & AP_PS_PTY))
            pty_eof(p, c);
        while (c->woff < c->wlen || c->eofoff < c->eoflen) {
            int in_eof = c->woff >= c->wlen;
            const unsigned char *b = in_eof ? c->eof + c->eofoff : c->wdata + c->woff;
            size_t n = in_eof ? c->eoflen - c->eofoff : c->wlen - c->woff;
            ssize_t k = write(p->in_fd, b, n);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0 && errno == EAGAIN)
                return;
            if (k < 0) { /* the process closed its stdin */
                close_stdin(p);
                if (p->in_fd == p->out_fd)
                    p->stdin_closed = 1;
                fail_writers(p);
                return;
            }
            p->last_in = b[k - 1];
            if (in_eof)
                c->eofoff += (size_t)k;
            else
                c->woff += (size_t)k;
            if (c->woff >= c->wlen && c->wclose && !c->eoflen && (p->flags & AP_PS_PTY))
                pty_eof(p, c);
        }
        p->wq = c->wnext;
        if (c->wclose) {
            if (p->flags & AP_PS_PTY)
                p->stdin_closed = 1;
            else
                close_stdin(p);
        }
        free(c->rbuf);
        c->rbuf = NULL;
        if (c->wpeek && (p->flags & AP_PS_PTY) && !c->wclose) {
            /* answered with the output that follows (the echo), so that
             * the read after a keystroke need not ask */
            c->pend = PEND_PEEK;
            c->rdeadline = now_ms() + AP_PW_PEEK_MS;
        } else {
            c->pend = PEND_NONE;
            c->p = NULL;
            conn_simple(c, AP_OK);
        }
        if (p->stdin_closed) {
            fail_writers(p);
            return;
        }
    }
}

/* ---- reads -------------------------------------------------------------- */

static void exit_info(const struct proc *p, uint32_t *flags, uint32_t *code, uint32_t *sig)
{
    *flags = p->timed_out ? AP_PR_TIMED_OUT : 0;
    *code = *sig = 0;
    if (!p->ended)
        return;
    if (WIFSIGNALED(p->status)) {
        *flags |= AP_PR_SIGNALED;
        *code = (uint32_t)-1;
        *sig = (uint32_t)WTERMSIG(p->status);
    } else {
        *code = (uint32_t)WEXITSTATUS(p->status);
    }
}

static void answer_read(struct conn *c)
{
    struct proc *p = c->p;
    /* room for what is there (not rmax: a keystroke's answer is a few
     * bytes, and 2 x 256 KiB would be an mmap and munmap per answer) */
    uint64_t po = sbxs_ring_pending(&p->out, c->rc_out), pe = sbxs_ring_pending(&p->err, c->rc_err);
    size_t cap = AP_HDR_LEN + 16 + 40 + (po < c->rmax ? (size_t)po : c->rmax) +
                 (pe < c->rmax ? (size_t)pe : c->rmax);
    unsigned char *b = malloc(cap);
    if (!b) {
        c->pend = PEND_NONE;
        conn_error(c, 1, ENOMEM, "read", "out of memory");
        return;
    }
    uint32_t flags, code, sig;
    exit_info(p, &flags, &code, &sig);
    uint64_t oc = c->rc_out, ec = c->rc_err, olost, elost;
    /* the layout is fixed: fill the data in place */
    size_t at = AP_HDR_LEN + 16;
    unsigned char *ohead = b + at;
    size_t on = sbxs_ring_read(&p->out, &oc, ohead + 20, c->rmax, &olost);
    at += 20 + on;
    unsigned char *ehead = b + at;
    size_t en = sbxs_ring_read(&p->err, &ec, ehead + 20, c->rmax, &elost);
    at += 20 + en;
    if (p->ended && oc >= sbxs_ring_end(&p->out) && ec >= sbxs_ring_end(&p->err))
        flags |= AP_PR_EOF;
    struct ap_out o;
    sbxs_ap_out_begin(&o, b, cap, AP_PROC_OUTPUT);
    sbxs_ap_put_u32(&o, p->ended ? AP_PROC_EXITED : AP_PROC_RUNNING);
    sbxs_ap_put_u32(&o, flags);
    sbxs_ap_put_u32(&o, code);
    sbxs_ap_put_u32(&o, sig);
    sbxs_ap_put_u64(&o, oc);
    sbxs_ap_put_u64(&o, olost);
    sbxs_ap_put_u32(&o, (uint32_t)on);
    o.len += on;
    sbxs_ap_put_u64(&o, ec);
    sbxs_ap_put_u64(&o, elost);
    sbxs_ap_put_u32(&o, (uint32_t)en);
    o.len += en;
    size_t n = sbxs_ap_out_end(&o);
    c->pend = PEND_NONE;
    c->p = NULL;
    c->rend = 0;
    c->rhold = 0;
    conn_send(c, b, n);
}

/* AP_PROC_WROTE: what the terminal wrote since the write came. */
static void answer_peek(struct conn *c)
{
    struct proc *p = c->p;
    uint64_t from = c->peek_from, lost;
    size_t cap = AP_HDR_LEN + 12 + AP_PW_PEEK_MAX;
    unsigned char *b = malloc(cap);
    c->pend = PEND_NONE;
    c->p = NULL;
    if (!b) {
        conn_simple(c, AP_OK);
        return;
    }
    size_t n = sbxs_ring_read(&p->out, &from, b + AP_HDR_LEN + 12, AP_PW_PEEK_MAX, &lost);
    struct ap_out o;
    sbxs_ap_out_begin(&o, b, cap, AP_PROC_WROTE);
    sbxs_ap_put_u64(&o, from - n);
    sbxs_ap_put_u32(&o, (uint32_t)n);
    o.len += n;
    conn_send(c, b, sbxs_ap_out_end(&o));
}

/* May a read's pending bytes on this stream wait for more (Coalescing)?
 * Not once max_bytes are there, nor after the stream's end. */
static int stream_holds(const struct proc *p, int err, uint64_t pending, size_t rmax,
                        int64_t us)
{
    int open = err ? p->err_fd >= 0 : p->out_fd >= 0 && !p->out_eof;
    return pending < rmax && open && flow_floods(err ? &p->ferr : &p->fout, us, pending);
}

/* Is a pending read to be answered now? A read held for more bytes gets
 * c->rhold, its latest answer. */
static int read_ready(const struct sbxs_psv *s, struct conn *c, int64_t now)
{
    const struct proc *p = c->p;
    if (c->rend)
        return p->ended || now >= c->rdeadline;
    if (p->ended || now >= c->rdeadline || c->rc_out < sbxs_ring_start(&p->out) ||
        c->rc_err < sbxs_ring_start(&p->err))
        return 1;
    uint64_t po = sbxs_ring_pending(&p->out, c->rc_out);
    uint64_t pe = sbxs_ring_pending(&p->err, c->rc_err);
    if (!po && !pe)
        return 0;
    if (s->cfg.hold_us < 0)
        return 1;
    int64_t us = now_us();
    if ((po && !stream_holds(p, 0, po, c->rmax, us)) ||
        (pe && !stream_holds(p, 1, pe, c->rmax, us)))
        return 1;
    if (!c->rhold)
        c->rhold = us + (s->cfg.hold_us ? s->cfg.hold_us : SBXS_PSV_HOLD_US);
    return us >= c->rhold;
}



/* ---- requests ----------------------------------------------------------- */

static char *join_command(char *const *argv)
{
    char *s = malloc(COMMAND_MAX + 1);
    if (!s)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; argv[i] && n < COMMAND_MAX; i++) {
        if (i)
            s[n++] = ' ';
        size_t l = strlen(argv[i]);
        if (l > COMMAND_MAX - n)
            l = COMMAND_MAX - n;
        memcpy(s + n, argv[i], l);
        n += l;
    }
    s[n > COMMAND_MAX ? COMMAND_MAX : n] = '\0';
    return s;
}

static int env_has(char *const *env, size_t n, const char *name)
{
    size_t l = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (strncmp(env[i], name, l) == 0 && env[i][l] == '=')
            return 1;
    return 0;
}

/* base_env overlaid by the request's, then HOME (the user's, unless the
 * request sets one) and (a PTY) TERM when neither has them. The strings
 * are borrowed (home: the caller's buffer; term: static). */
static char **make_env(const struct sbxs_psv *s, char **req, size_t nreq,
                       const struct sbxs_psv_user *u, int pty, char *home, size_t homecap)
{
    char *const *base = s->cfg.base_env;
    size_t nbase = 0;
    while (base && base[nbase])
        nbase++;
    char **env = calloc(nbase + nreq + 3, sizeof *env);
    if (!env)
        return NULL;
    size_t n = 0;
    for (size_t i = 0; i < nbase; i++) {
        size_t klen = strcspn(base[i], "=");
        /* the base's HOME is the supervisor's: the user's own replaces it */
        int over = u && u->home[0] && strncmp(base[i], "HOME=", 5) == 0;
        for (size_t j = 0; j < nreq && !over; j++)
            over = strncmp(req[j], base[i], klen + 1) == 0;
        if (!over)
            env[n++] = base[i];
    }
    for (size_t j = 0; j < nreq; j++)
        env[n++] = req[j];
    if (u && u->home[0] && !env_has(env, n, "HOME")) {
        snprintf(home, homecap, "HOME=%s", u->home);
        env[n++] = home;
    }
    if (pty && !env_has(env, n, "TERM"))
        env[n++] = (char *)"TERM=xterm-256color";
    env[n] = NULL;
    return env;
}

static void free_strv(char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

static int open_cwd(int root, const char *cwd)
{
    if (!cwd[0])
        return fcntl(root, F_DUPFD_CLOEXEC, 0);
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, root, cwd, &how, sizeof how);
    return (int)fd;
}

static void do_start(struct sbxs_psv *s, struct conn *c, struct ap_in *in)
{
    char *user = sbxs_ap_get_str(in);
    uint32_t flags = sbxs_ap_get_u32(in);
    uint64_t timeout_ms = sbxs_ap_get_u64(in);
    uint64_t bufsz = sbxs_ap_get_u64(in);
    uint32_t rows = sbxs_ap_get_u32(in), cols = sbxs_ap_get_u32(in);
    char *cwd = sbxs_ap_get_str(in);
    uint32_t argc = sbxs_ap_get_u32(in);
    char **argv = NULL, **envr = NULL;
    uint32_t envc = 0, gotargs = 0, gotenv = 0;
    if (!in->bad && argc > 0 && argc <= 65536 && (argv = calloc(argc + 1, sizeof *argv))) {
        for (; gotargs < argc && !in->bad; gotargs++)
            argv[gotargs] = sbxs_ap_get_str(in);
        envc = sbxs_ap_get_u32(in);
        if (!in->bad && envc <= 65536 && (envr = calloc(envc + 1, sizeof *envr)))
            for (; gotenv < envc && !in->bad; gotenv++) {
                envr[gotenv] = sbxs_ap_get_str(in);
                if (envr[gotenv] && (!strchr(envr[gotenv], '=') || envr[gotenv][0] == '='))
                    in->bad = 1;
            }
    }
    /* AP_PS_READ: the first read's fields */
    uint32_t read_max = 0, read_wait = 0;
    if (flags & AP_PS_READ) {
        read_max = sbxs_ap_get_u32(in);
        read_wait = sbxs_ap_get_u32(in);
    }
    int fd_cwd = -1;
    char **env = NULL;
    if (!sbxs_ap_in_done(in) || !argv || !envr || !argv[0] || !argv[0][0] || !user || !cwd ||
        (flags & ~(AP_PS_PTY | AP_PS_READ)) || rows > 65535 || cols > 65535 ||
        read_wait > AP_PS_READ_WAIT_MAX) {
        conn_error(c, 1, EPROTO, "start", "malformed start request");
        goto out;
    }
    if (bufsz > SBXS_PSV_BUFFER_MAX) {
        conn_error(c, 0, EINVAL, "start",
                   "a replay buffer of %llu bytes is larger than the %u bytes allowed",
                   (unsigned long long)bufsz, SBXS_PSV_BUFFER_MAX);
        goto out;
    }
    if (make_room(s, 1) != 0) {
        conn_error(c, 0, EAGAIN, "start",
                   "%d processes are kept (running, or ended less than %d minutes ago): "
                   "no room for another",
                   SBXS_PSV_MAX_PROCS, SBXS_PSV_KEEP_MS / 60000);
        goto out;
    }
    struct sbxs_psv_user u, *up = NULL;
    char msg[256] = "";
    if (s->cfg.resolve_user) {
        if (s->cfg.resolve_user(s->cfg.ctx, user, &u, msg, sizeof msg) != 0) {
            conn_error(c, 0, EINVAL, "user", "%s", msg[0] ? msg : "unknown user");
            goto out;
        }
        up = &u;
    } else if (user[0]) {
        conn_error(c, 0, EINVAL, "user",
                   "user %s: this supervisor runs processes as its own user only", user);
        goto out;
    }
    fd_cwd = open_cwd(s->cfg.root_fd, cwd);
    if (fd_cwd < 0) {
        int e = errno;
        conn_error(c, 0, e, "cwd", "working directory %s: %s", cwd,
                   e == EXDEV ? "leads out of the workspace" : strerror(e));
        goto out;
    }
    char home[600];
    env = make_env(s, envr, envc, up, flags & AP_PS_PTY, home, sizeof home);
    struct proc *p = calloc(1, sizeof *p);
    char *command = join_command(argv);
    if (!env || !p || !command) {
        free(p);
        free(command);
        conn_error(c, 0, ENOMEM, "start", "out of memory");
        goto out;
    }
    struct sbxs_spawn_req req = {.argv = argv, .env = env, .cwd_fd = fd_cwd, .user = up,
                                 .pty = (flags & AP_PS_PTY) != 0, .rows = (uint16_t)rows,
                                 .cols = (uint16_t)cols};
    struct sbxs_spawn_out so;
    int stage, e;
    if (sbxs_spawn(&req, &so, &stage, &e) != 0) {
        free(p);
        free(command);
        const char *st = stage == SBXS_SPAWN_USER  ? "user"
                         : stage == SBXS_SPAWN_CWD ? "cwd"
                         : stage == SBXS_SPAWN_EXEC ? "exec"
                                                    : "start";
        conn_error(c, 0, e, st, "%s: %s", stage == SBXS_SPAWN_EXEC ? argv[0] : st,
                   strerror(e));
        goto out;
    }
    unsigned char rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
        /* never a guessable id: without randomness, no process */
        kill(-so.pid, SIGKILL);
        close(so.out_fd);
        if (so.in_fd != so.out_fd)
            close(so.in_fd);
        if (so.err_fd >= 0)
            close(so.err_fd);
        free(p);
        free(command);
        conn_error(c, 0, EIO, "start", "no random bytes for an id");
        goto out;
    }
    snprintf(p->id, sizeof p->id, "p%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
             rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    p->flags = flags & AP_PS_PTY;
    p->command = command;
    p->started_ms = unix_ms();
    p->pid = so.pid;
    p->in_fd = so.in_fd;
    p->out_fd = so.out_fd;
    p->err_fd = so.err_fd;
    uint64_t cap = bufsz ? bufsz : s->cfg.default_buffer ? s->cfg.default_buffer
                                                        : SBXS_PSV_BUFFER_DEFAULT;
    sbxs_ring_init(&p->out, (size_t)cap);
    sbxs_ring_init(&p->err, (size_t)cap);
    p->deadline = timeout_ms ? now_ms() + (int64_t)timeout_ms : 0;
    p->last_in = '\n';
    struct proc **tail = &s->procs;
    while (*tail)
        tail = &(*tail)->next;
    *tail = p;
    s->nprocs++;
    size_t idl = strlen(p->id);
    unsigned char *b = malloc(AP_HDR_LEN + 4 + idl);
    struct ap_out o;
    size_t n = 0;
    if (b) {
        sbxs_ap_out_begin(&o, b, AP_HDR_LEN + 4 + idl, AP_PROC_STARTED);
        sbxs_ap_put_str(&o, p->id);
        n = sbxs_ap_out_end(&o);
    }
    conn_send(c, b, n);
    if ((flags & AP_PS_READ) && !c->closing) {
        /* the first read, pending on this channel behind the id: answered
         * by the loop (once the id is sent) as a read from 0, at the end or
         * after its wait (not at the first output: an answer about a
         * process that has ended is final, so the client may keep it) */
        c->pend = PEND_READ;
        c->p = p;
        c->rc_out = c->rc_err = 0;
        c->rmax = read_max == 0 ? READ_DEFAULT : read_max > AP_PROC_READ_MAX ? AP_PROC_READ_MAX
                                                                             : read_max;
        c->rdeadline = now_ms() + read_wait;
        c->rend = 1;
        c->rhold = 0;
    }
out:
    if (fd_cwd >= 0)
        close(fd_cwd);
    free(env);
    free(user);
    free(cwd);
    free_strv(argv, gotargs);
    free_strv(envr, gotenv);
}

/* The id field of a request on an existing process: the process, or NULL
 * after answering. */
static struct proc *request_proc(struct sbxs_psv *s, struct conn *c, struct ap_in *in,
                                 const char *stage)
{
    char *id = sbxs_ap_get_str(in);
    if (!id) {
        conn_error(c, 1, EPROTO, stage, "malformed %s request", stage);
        return NULL;
    }
    struct proc *p = strlen(id) <= AP_PROC_ID_MAX ? find(s, id) : NULL;
    if (!p)
        conn_error(c, 0, ENOENT, "id", "no process %.*s in this sandbox", 130, id);
    free(id);
    return p;
}

static void do_write(struct sbxs_psv *s, struct conn *c, struct ap_in *in)
{
    struct proc *p = request_proc(s, c, in, "write");
    if (!p)
        return;
    uint32_t flags = sbxs_ap_get_u32(in);
    if (in->bad || (flags & ~(AP_PW_CLOSE | AP_PW_PEEK))) {
        conn_error(c, 1, EPROTO, "write", "malformed write request");
        return;
    }
    if (p->ended || p->stdin_closed || p->in_fd < 0) {
        conn_error(c, 0, EPIPE, "write", "process %s %s", p->id,
                   p->ended ? "has ended" : "has its stdin closed");
        return;
    }
    c->pend = PEND_WRITE;
    c->p = p;
    c->wdata = in->p;
    c->wlen = in->left;
    c->woff = 0;
    c->wclose = (flags & AP_PW_CLOSE) != 0;
    c->wpeek = (flags & AP_PW_PEEK) != 0;
    c->peek_from = sbxs_ring_end(&p->out);
    c->eoflen = c->eofoff = 0;
    c->wnext = NULL;
    struct conn **t = &p->wq;
    while (*t)
        t = &(*t)->wnext;
    *t = c; /* c->rbuf stays: wdata points into it */
}

static void do_read(struct sbxs_psv *s, struct conn *c, struct ap_in *in)
{
    struct proc *p = request_proc(s, c, in, "read");
    if (!p)
        return;
    uint64_t oc = sbxs_ap_get_u64(in), ec = sbxs_ap_get_u64(in);
    uint32_t max = sbxs_ap_get_u32(in), wait = sbxs_ap_get_u32(in);
    if (!sbxs_ap_in_done(in)) {
        conn_error(c, 1, EPROTO, "read", "malformed read request");
        return;
    }
    if (oc > sbxs_ring_end(&p->out) || ec > sbxs_ring_end(&p->err)) {
        int out = oc > sbxs_ring_end(&p->out);
        conn_error(c, 0, EINVAL, "read",
                   "cursor %llu is past the end of %s (%llu bytes so far)",
                   (unsigned long long)(out ? oc : ec), out ? "stdout" : "stderr",
                   (unsigned long long)sbxs_ring_end(out ? &p->out : &p->err));
        return;
    }
    c->pend = PEND_READ;
    c->p = p;
    c->rc_out = oc;
    c->rc_err = ec;
    c->rmax = max == 0 ? READ_DEFAULT : max > AP_PROC_READ_MAX ? AP_PROC_READ_MAX : max;
    c->rdeadline = now_ms() + wait;
    c->rhold = 0;
    if (read_ready(s, c, now_ms()))
        answer_read(c);
}

static void do_signal(struct sbxs_psv *s, struct conn *c, struct ap_in *in)
{
    struct proc *p = request_proc(s, c, in, "signal");
    if (!p)
        return;
    uint32_t sig = sbxs_ap_get_u32(in);
    if (!sbxs_ap_in_done(in)) {
        conn_error(c, 1, EPROTO, "signal", "malformed signal request");
        return;
    }
    if (sig < 1 || sig > 64) {
        conn_error(c, 0, EINVAL, "signal", "signal %u is not a Linux signal number (1..64)",
                   sig);
        return;
    }
    if (!p->leader_done && !p->ended) {
        pid_t g = p->pid;
        if ((p->flags & AP_PS_PTY) && p->out_fd >= 0) {
            pid_t fg = tcgetpgrp(p->out_fd);
            if (fg > 0)
                g = fg;
        }
        if (kill(-g, (int)sig) != 0 && errno != ESRCH && g != p->pid)
            kill(-p->pid, (int)sig);
    }
    conn_simple(c, AP_OK);
}

static void do_resize(struct sbxs_psv *s, struct conn *c, struct ap_in *in)
{
    struct proc *p = request_proc(s, c, in, "resize");
    if (!p)
        return;
    uint32_t rows = sbxs_ap_get_u32(in), cols = sbxs_ap_get_u32(in);
    if (!sbxs_ap_in_done(in)) {
        conn_error(c, 1, EPROTO, "resize", "malformed resize request");
        return;
    }
    if (!(p->flags & AP_PS_PTY)) {
        conn_error(c, 0, ENOTTY, "resize", "process %s has no terminal", p->id);
        return;
    }
    if (rows < 1 || cols < 1 || rows > 65535 || cols > 65535) {
        conn_error(c, 0, EINVAL, "resize", "a terminal of %u x %u is not 1..65535 each", rows,
                   cols);
        return;
    }
    struct winsize ws = {.ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols};
    /* an ended process's terminal is gone: nothing to resize */
    if (p->out_fd >= 0 && ioctl(p->out_fd, TIOCSWINSZ, &ws) != 0) {
        conn_error(c, 0, errno, "resize", "TIOCSWINSZ: %s", strerror(errno));
        return;
    }
    conn_simple(c, AP_OK);
}

static void do_list(struct sbxs_psv *s, struct conn *c, struct ap_in *in)
{
    if (!sbxs_ap_in_done(in)) {
        conn_error(c, 1, EPROTO, "list", "malformed list request");
        return;
    }
    size_t cap = AP_HDR_LEN;
    for (struct proc *p = s->procs; p; p = p->next)
        cap += AP_HDR_LEN + 4 + strlen(p->id) + 5 * 4 + 8 + 4 + strlen(p->command);
    unsigned char *b = malloc(cap);
    if (!b) {
        conn_error(c, 0, ENOMEM, "list", "out of memory");
        return;
    }
    size_t at = 0;
    for (struct proc *p = s->procs; p; p = p->next) {
        uint32_t flags, code, sig;
        exit_info(p, &flags, &code, &sig);
        struct ap_out o;
        sbxs_ap_out_begin(&o, b + at, cap - at, AP_PROC_ENTRY);
        sbxs_ap_put_str(&o, p->id);
        sbxs_ap_put_u32(&o, p->flags);
        sbxs_ap_put_u32(&o, p->ended ? AP_PROC_EXITED : AP_PROC_RUNNING);
        sbxs_ap_put_u32(&o, flags);
        sbxs_ap_put_u32(&o, code);
        sbxs_ap_put_u32(&o, sig);
        sbxs_ap_put_u64(&o, (uint64_t)p->started_ms);
        sbxs_ap_put_str(&o, p->command);
        at += sbxs_ap_out_end(&o);
    }
    sbxs_ap_header(b + at, AP_OK, 0);
    conn_send(c, b, at + AP_HDR_LEN);
}

void sbxs_psv_kill_all(struct sbxs_psv *s)
{
    for (struct proc *p = s->procs; p; p = p->next)
        if (!p->leader_done)
            kill_group(p);
    if (s->cfg.kill_tree)
        s->cfg.kill_tree(s->cfg.ctx, reap, s);
    /* the leaders die at once: wait for them (bounded), so that an answer
     * to kill-all means they are gone */
    int64_t end = now_ms() + 2000;
    for (;;) {
        reap(s);
        int left = 0;
        for (struct proc *p = s->procs; p; p = p->next)
            left |= !p->leader_done;
        if (!left || now_ms() >= end)
            break;
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    int64_t now = now_ms();
    for (struct proc *p = s->procs; p; p = p->next)
        if (p->leader_done && !p->ended) {
            p->leader_end = now - SBXS_PSV_LINGER_MS;
            advance(s, p, now);
        }
}

/* A whole frame from a ready connection. */
static void dispatch(struct sbxs_psv *s, struct conn *c)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, c->rbuf, c->len);
    switch (c->type) {
    case AP_PROC_START:
        do_start(s, c, &in);
        break;
    case AP_PROC_WRITE:
        do_write(s, c, &in);
        break;
    case AP_PROC_READ:
        do_read(s, c, &in);
        break;
    case AP_PROC_SIGNAL:
        do_signal(s, c, &in);
        break;
    case AP_PROC_RESIZE:
        do_resize(s, c, &in);
        break;
    case AP_PROC_LIST:
        do_list(s, c, &in);
        break;
    case AP_PROC_KILL_ALL:
        if (!sbxs_ap_in_done(&in)) {
            conn_error(c, 1, EPROTO, "kill", "malformed kill-all request");
            break;
        }
        sbxs_psv_kill_all(s);
        conn_simple(c, AP_OK);
        break;
    default:
        conn_error(c, 1, EPROTO, "request", "unknown process request type 0x%02x", c->type);
    }
    if (c->pend != PEND_WRITE) {
        free(c->rbuf);
        c->rbuf = NULL;
    } else {
        pump_writes(c->p);
    }
}

/* ---- connections -------------------------------------------------------- */

static struct conn *conn_add(struct sbxs_psv *s, int fd, int phase)
{
    struct conn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return NULL;
    }
    c->fd = fd;
    c->phase = phase;
    c->next = s->conns;
    s->conns = c;
    s->nconns++;
    return c;
}

static void conn_drop(struct sbxs_psv *s, struct conn *c)
{
    if (c->pend == PEND_WRITE && c->p)
        for (struct conn **q = &c->p->wq; *q; q = &(*q)->wnext)
            if (*q == c) {
                *q = c->wnext;
                break;
            }
    for (struct conn **q = &s->conns; *q; q = &(*q)->next)
        if (*q == c) {
            *q = c->next;
            break;
        }
    s->nconns--;
    close(c->fd);
    free(c->rbuf);
    free(c->obuf);
    free(c);
}

/* Read what the client sent: the preamble, then frames (one request at a
 * time). -1: drop the connection. */
static int conn_read(struct sbxs_psv *s, struct conn *c)
{
    for (;;) {
        if (c->pend || c->obuf || c->closing)
            return 0;
        ssize_t k;
        if (c->phase == C_PREAMBLE)
            k = recv(c->fd, c->pre + c->pre_got, sizeof c->pre - c->pre_got, MSG_DONTWAIT);
        else if (c->hdr_got < AP_HDR_LEN)
            k = recv(c->fd, c->hdr + c->hdr_got, AP_HDR_LEN - c->hdr_got, MSG_DONTWAIT);
        else
            k = recv(c->fd, c->rbuf + c->got, c->len - c->got, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN)
            return 0;
        if (k <= 0)
            return -1; /* gone (a client between requests closes so) */
        if (c->phase == C_PREAMBLE) {
            c->pre_got += (size_t)k;
            if (c->pre_got < sizeof c->pre)
                continue;
            uint32_t v;
            if (sbxs_ap_parse_preamble(c->pre, &v) != 0) {
                conn_error(c, 1, EPROTO, "preamble", "not an sbx-agent client (bad magic)");
                return 0;
            }
            if (v < 3) {
                conn_error(c, 1, EPROTONOSUPPORT, "preamble",
                           "the process supervisor speaks protocol %u, the client %u", AP_VERSION,
                           v);
                return 0;
            }
            c->phase = C_CHANNEL;
            continue;
        }
        if (c->hdr_got < AP_HDR_LEN) {
            c->hdr_got += (size_t)k;
            if (c->hdr_got < AP_HDR_LEN)
                continue;
            if (sbxs_ap_parse_header(c->hdr, &c->type, &c->len) != 0) {
                conn_error(c, 1, EPROTO, "frame", "frame longer than %u bytes", AP_FRAME_MAX);
                return 0;
            }
            c->got = 0;
            c->rbuf = malloc(c->len ? c->len : 1);
            if (!c->rbuf)
                return -1;
            if (c->len)
                continue;
        } else {
            c->got += (uint32_t)k;
            if (c->got < c->len)
                continue;
        }
        c->hdr_got = 0;
        if (c->phase == C_CHANNEL) {
            /* AP_PROC_CHANNEL: its user field (protocol 3) and nothing else */
            struct ap_in in;
            sbxs_ap_in_begin(&in, c->rbuf, c->len);
            char *u = sbxs_ap_get_str(&in);
            int ok = c->type == AP_PROC_CHANNEL && u && sbxs_ap_in_done(&in);
            free(u);
            free(c->rbuf);
            c->rbuf = NULL;
            if (!ok) {
                conn_error(c, 1, EPROTO, "request", "expected a process channel request");
                return 0;
            }
            c->phase = C_READY;
            conn_simple(c, AP_OK);
            continue;
        }
        dispatch(s, c);
    }
}

static void accept_conns(struct sbxs_psv *s)
{
    for (int i = 0; i < 64; i++) {
        int fd = accept4(s->cfg.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        if (s->nconns >= SBXS_PSV_MAX_CONNS || (s->cfg.auth && s->cfg.auth(s->cfg.ctx, fd) != 0)) {
            unsigned char b[128];
            struct ap_out o;
            sbxs_ap_out_begin(&o, b, sizeof b, AP_ERROR);
            sbxs_ap_put_u32(&o, s->nconns >= SBXS_PSV_MAX_CONNS ? EAGAIN : EPERM);
            sbxs_ap_put_str(&o, "connect");
            sbxs_ap_put_str(&o, s->nconns >= SBXS_PSV_MAX_CONNS ? "too many connections"
                                                                : "connection refused");
            size_t n = sbxs_ap_out_end(&o);
            if (send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
                /* best effort */
            }
            close(fd);
            continue;
        }
        struct conn *c = conn_add(s, fd, C_PREAMBLE);
        if (c) {
            unsigned char *pre = malloc(AP_PREAMBLE_LEN);
            if (pre)
                sbxs_ap_preamble(pre, AP_VERSION);
            conn_send(c, pre, AP_PREAMBLE_LEN);
        }
    }
}

/* A connection passed by descriptor (SCM_RIGHTS), past its channel
 * request. */
static int take_handoff(struct sbxs_psv *s)
{
    for (int i = 0; i < 64; i++) {
        char byte;
        struct iovec iov = {&byte, 1};
        union {
            struct cmsghdr h;
            char buf[CMSG_SPACE(sizeof(int))];
        } u;
        struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                           .msg_controllen = sizeof u.buf};
        ssize_t n = recvmsg(s->cfg.handoff_fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return 0;
        if (n <= 0)
            return -1;
        struct cmsghdr *h = CMSG_FIRSTHDR(&m);
        if (!h || h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS ||
            h->cmsg_len != CMSG_LEN(sizeof(int)))
            continue;
        int fd;
        memcpy(&fd, CMSG_DATA(h), sizeof fd);
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        if (s->nconns >= SBXS_PSV_MAX_CONNS) {
            close(fd);
            continue;
        }
        struct conn *c = conn_add(s, fd, C_READY);
        if (c)
            conn_simple(c, AP_OK);
    }
    return 0;
}

/* ---- the loop ----------------------------------------------------------- */

struct sbxs_psv *sbxs_psv_new(const struct sbxs_psv_config *cfg)
{
    struct sbxs_psv *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->cfg = *cfg;
    s->sfd = -1;
    return s;
}

enum { W_SIG = 1, W_LISTEN, W_HANDOFF, W_STOP, W_OUT, W_ERR, W_IN, W_PTY, W_CONN };

int sbxs_psv_run(struct sbxs_psv *s)
{
    signal(SIGPIPE, SIG_IGN);
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    if (s->sfd < 0)
        s->sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (s->sfd < 0)
        return -1;
    if (s->cfg.listen_fd >= 0)
        fcntl(s->cfg.listen_fd, F_SETFL, fcntl(s->cfg.listen_fd, F_GETFL) | O_NONBLOCK);
    s->idle_since = now_ms();
    struct pollfd *pf = NULL;
    struct {
        int kind;
        void *ptr;
    } *who = NULL;
    size_t cap = 0;
    int64_t last_forget = now_ms(), last_reap = 0;
    int child_event = 1;
    for (;;) {
        int64_t now = now_ms();
        /* waitpid when SIGCHLD came (and once a second, whatever the
         * signalfd said): not a system call on every keystroke */
        if (child_event || now - last_reap >= 1000) {
            reap(s);
            child_event = 0;
            last_reap = now;
        }
        for (struct proc *p = s->procs; p; p = p->next)
            advance(s, p, now);
        /* answer the reads that can be answered, drop broken connections */
        for (struct conn *c = s->conns, *n; c; c = n) {
            n = c->next;
            if (c->pend == PEND_READ && !c->obuf && read_ready(s, c, now))
                answer_read(c);
            else if (c->pend == PEND_PEEK && !c->obuf &&
                     (c->p->ended || now >= c->rdeadline ||
                      sbxs_ring_end(&c->p->out) > c->peek_from))
                answer_peek(c);
            if (c->closing == 2 || (c->closing && !c->obuf))
                conn_drop(s, c);
        }
        if (now - last_forget > 60000) {
            make_room(s, 0);
            last_forget = now;
        }
        if (s->nprocs || s->nconns)
            s->idle_since = now;
        else if (s->cfg.idle_exit_ms && now - s->idle_since >= s->cfg.idle_exit_ms)
            break;
        size_t need = 4 + 2 * s->nprocs + s->nconns;
        if (need > cap) {
            size_t nc = need * 2;
            void *a = realloc(pf, nc * sizeof *pf), *b2 = NULL;
            if (a)
                pf = a;
            if (a)
                b2 = realloc(who, nc * sizeof *who);
            if (!a || !b2) {
                struct timespec ts = {0, 10 * 1000 * 1000};
                nanosleep(&ts, NULL);
                continue;
            }
            who = b2;
            cap = nc;
        }
        nfds_t np = 0;
#define ADD(fd_, ev_, kind_, ptr_)                                                         \
    do {                                                                                   \
        pf[np] = (struct pollfd){.fd = (fd_), .events = (short)(ev_)};                     \
        who[np].kind = (kind_);                                                            \
        who[np].ptr = (ptr_);                                                              \
        np++;                                                                              \
    } while (0)
        ADD(s->sfd, POLLIN, W_SIG, NULL);
        if (s->cfg.listen_fd >= 0)
            ADD(s->cfg.listen_fd, POLLIN, W_LISTEN, NULL);
        if (s->cfg.handoff_fd >= 0)
            ADD(s->cfg.handoff_fd, POLLIN, W_HANDOFF, NULL);
        if (s->cfg.stop_fd >= 0)
            ADD(s->cfg.stop_fd, POLLIN, W_STOP, NULL);
        int64_t wake = 0; /* monotonic us */
#define WAKE_US(t_)                                                                        \
    do {                                                                                   \
        if (!wake || (t_) < wake)                                                          \
            wake = (t_);                                                                   \
    } while (0)
#define WAKE(t_) WAKE_US((t_) * 1000)
        for (struct proc *p = s->procs; p; p = p->next) {
            if (p->ended)
                continue;
            int writing = p->wq && p->in_fd >= 0;
            if (p->flags & AP_PS_PTY) {
                if (p->out_fd >= 0 && !p->out_eof)
                    ADD(p->out_fd, POLLIN | (writing ? POLLOUT : 0), W_PTY, p);
            } else {
                if (p->out_fd >= 0)
                    ADD(p->out_fd, POLLIN, W_OUT, p);
                if (p->err_fd >= 0)
                    ADD(p->err_fd, POLLIN, W_ERR, p);
                if (writing)
                    ADD(p->in_fd, POLLOUT, W_IN, p);
            }
            if (p->deadline && !p->leader_done && !p->timed_out)
                WAKE(p->deadline);
            if (p->leader_done)
                WAKE(p->leader_end + SBXS_PSV_LINGER_MS);
        }
        for (struct conn *c = s->conns; c; c = c->next) {
            short ev = c->obuf ? POLLOUT : c->pend ? POLLRDHUP : POLLIN;
            ADD(c->fd, ev, W_CONN, c);
            if (c->pend == PEND_READ || c->pend == PEND_PEEK)
                WAKE(c->rdeadline);
            if (c->pend == PEND_READ && c->rhold && !c->obuf)
                WAKE_US(c->rhold);
        }
        if (s->cfg.idle_exit_ms && !s->nprocs && !s->nconns)
            WAKE(s->idle_since + s->cfg.idle_exit_ms);
        if (s->nprocs)
            WAKE(last_forget + 60001);
        if (s->nprocs)
            WAKE(last_reap + 1000);
        struct timespec ts, *tsp = NULL;
        if (wake) {
            int64_t left = wake - now_us();
            left = left < 0 ? 0 : left > 60000000 ? 60000000 : left;
            ts.tv_sec = (time_t)(left / 1000000);
            ts.tv_nsec = (long)(left % 1000000) * 1000;
            tsp = &ts;
        }
        int r = ppoll(pf, np, tsp, NULL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            break;
        for (nfds_t i = 0; i < np; i++) {
            short re = pf[i].revents;
            if (!re)
                continue;
            struct proc *p = who[i].ptr;
            struct conn *c = who[i].ptr;
            switch (who[i].kind) {
            case W_SIG: {
                struct signalfd_siginfo si;
                while (read(s->sfd, &si, sizeof si) == (ssize_t)sizeof si)
                    ;
                child_event = 1;
                break;
            }
            case W_LISTEN:
                accept_conns(s);
                break;
            case W_HANDOFF:
                if (take_handoff(s) != 0)
                    s->cfg.handoff_fd = -1; /* its sender is gone */
                break;
            case W_STOP:
                goto done;
            case W_OUT:
            case W_PTY:
                if (who[i].kind == W_PTY && (re & POLLOUT))
                    pump_writes(p);
                if (re & (POLLIN | POLLHUP | POLLERR))
                    drain(p, 0);
                break;
            case W_ERR:
                drain(p, 1);
                break;
            case W_IN:
                pump_writes(p);
                break;
            case W_CONN:
                if (re & POLLOUT)
                    conn_flush(c);
                if ((re & (POLLERR | POLLHUP | POLLRDHUP)) && c->pend)
                    c->closing = 2; /* a client that gives up a wait closes */
                else if (re & (POLLERR | POLLHUP))
                    c->closing = 2;
                else if ((re & POLLIN) && conn_read(s, c) != 0)
                    c->closing = 2;
                break;
            }
        }
    }
done:
    free(pf);
    free(who);
    return 0;
}

void sbxs_psv_free(struct sbxs_psv *s)
{
    if (!s)
        return;
    sbxs_psv_kill_all(s);
    while (s->conns)
        conn_drop(s, s->conns);
    while (s->procs)
        unlink_proc(s, s->procs);
    if (s->sfd >= 0)
        close(s->sfd);
    free(s);
}
