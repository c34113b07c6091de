/*
 * proc_client.c - requests of the process channel (proc_client.h).
 *
 * Channels are pooled: a call takes an idle one (a channel found readable
 * while idle was closed by the supervisor, or holds garbage: it is
 * dropped), sends one request and reads its answer, then gives the
 * channel back. A channel whose exchange failed midway is closed, never
 * pooled: its next bytes would be out of step. A request whose send found
 * a pooled channel already closed is sent again on a new one (nothing of
 * it reached the supervisor).
 *
 * Pipelined writes: a write to a process this client knows to be running
 * (it started it, read from it or wrote to it) is sent without waiting
 * for its answer; its channel is kept "owed" one answer. The next write
 * to that process collects the answer on the same channel before it sends
 * its own bytes (so writes stay in order and at most one is in flight per
 * process: a process that does not read its stdin still holds the
 * writer), and so do a close, the release of the client, and a call that
 * needs a channel when none is idle (only when the answer is there). An
 * answer that is an error (the process ended, closed its stdin, is
 * unknown) marks the process dead here: every later write to it fails
 * with that error, saying that an earlier write was not delivered. A read
 * that reports the end, and a close, mark it too, so a write after them
 * fails at once, without a round trip.
 */
#include "proc_client.h"

#include "agent_proto/proto.h"
#include "call_error.h"
#include "clock.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define POOL_MAX 8
#define OWED_MAX 8   /* channels owing a pipelined write's answer */
#define KNOWN_MAX 64 /* processes whose state this client remembers */
#define DEFAULT_TIMEOUT_MS 30000
/* A start's first read (AP_PS_READ, asked for a process without a PTY):
 * what it may carry, and how long the supervisor holds it for the end. A
 * quick command's output and exit status then come without a round trip;
 * the first read of a longer one waits at most this much longer. */
#define FIRST_READ_MAX (64u * 1024)
#define FIRST_READ_WAIT_MS 25u

/* An idle channel and its receive buffer (reused: no allocation per
 * answer, and the host's memory stays bounded by the pool). */
struct idle_chan {
    int fd;
    unsigned char *buf;
    size_t cap;
};

/* The terminal output that followed the last write (AP_PW_PEEK): bytes at
 * their absolute offsets in the stream, which never change, so a read
 * whose cursor falls inside is answered from here without a round trip
 * (the keystroke's echo). */
struct peek_cache {
    char id[AP_PROC_ID_MAX + 1];
    uint64_t off;
    size_t n;
    unsigned char data[AP_PW_PEEK_MAX];
};

/* A channel on which a pipelined write to id was sent, its answer not
 * read yet. */
enum { OWED_WRITE = 1, OWED_READ }; /* the answer of a write; a start's first read */
struct owed_chan {
    char id[AP_PROC_ID_MAX + 1];
    int kind;
    struct idle_chan ch;
};

/* The answer (AP_PROC_OUTPUT's payload) of a start's first read, kept
 * until the read from 0 it answers. */
struct first_read {
    char id[AP_PROC_ID_MAX + 1];
    unsigned char *p;
    uint32_t len;
};

/* What this client learnt of a process: running (a write to it may be
 * pipelined), or dead for writes (every write fails with status, msg). */
enum { K_ALIVE = 1, K_DEAD };
struct known_proc {
    char id[AP_PROC_ID_MAX + 1];
    int state;
    int status;
    int status_prio; /* how much msg says: 1 seen ended or closed, 2 a write failed */
    char msg[256];
};

struct sbxp_proc_client {
    struct sbxp_proc_client_cfg cfg;
    char *what;
    pthread_mutex_t mu;
    struct idle_chan idle[POOL_MAX];
    size_t nidle;
    struct owed_chan owed[OWED_MAX]; /* under mu, oldest first */
    size_t nowed;
    struct known_proc known[KNOWN_MAX]; /* under mu, a ring */
    size_t known_next;
    uint64_t pipelined;     /* writes sent without waiting (under mu) */
    struct first_read first; /* under mu */
    int no_first_read;       /* the supervisor predates AP_PS_READ (under mu) */
    uint64_t first_hits;     /* reads answered by a start's first read (under mu) */
    struct peek_cache peek; /* under mu */
    uint64_t peek_hits;     /* reads answered from it (under mu) */
};

/* One exchange on one channel. */
struct chan {
    struct sbxp_proc_client *cl;
    sbx_call *call;
    int fd;
    int pooled;       /* taken from the pool (not opened for this call) */
    int cancel_fd;
    int64_t deadline; /* of the answer being awaited, 0: none */
    const char *op;
    int quiet;          /* no call, and nothing to log (settling at release) */
    int need_ok;        /* a new channel whose AP_OK is still to be read */
    int eproto;         /* the supervisor answered EPROTO (AP_ERROR) */
    unsigned char *buf; /* the last frame's payload */
    size_t cap;
};

static void settle_ready(struct sbxp_proc_client *cl);
static void settle_all(struct sbxp_proc_client *cl, int64_t deadline);
static int owed_put(struct chan *ch, const char *id, int kind);
static void known_set(struct sbxp_proc_client *cl, const char *id, int state, int prio,
                      int status, const char *fmt, ...) SBX_PRINTF_LIKE(6, 7);

struct sbxp_proc_client *sbxp_proc_client_new(const struct sbxp_proc_client_cfg *cfg)
{
    struct sbxp_proc_client *cl = calloc(1, sizeof *cl);
    if (!cl)
        return NULL;
    cl->cfg = *cfg;
    cl->what = strdup(cfg->what ? cfg->what : "the process supervisor");
    if (!cl->what) {
        free(cl);
        return NULL;
    }
    cl->cfg.what = cl->what;
    if (cl->cfg.request_timeout_ms <= 0)
        cl->cfg.request_timeout_ms = DEFAULT_TIMEOUT_MS;
    pthread_mutex_init(&cl->mu, NULL);
    return cl;
}

void sbxp_proc_client_reset(struct sbxp_proc_client *cl)
{
    /* pipelined writes first: a supervisor drops a queued write whose
     * channel closes (one that ended answers at once) */
    settle_all(cl, sbxs_now_ms() + cl->cfg.request_timeout_ms);
    pthread_mutex_lock(&cl->mu);
    while (cl->nidle) {
        struct idle_chan *i = &cl->idle[--cl->nidle];
        close(i->fd);
        free(i->buf);
    }
    pthread_mutex_unlock(&cl->mu);
}

void sbxp_proc_client_free(struct sbxp_proc_client *cl)
{
    if (!cl)
        return;
    sbxp_proc_client_reset(cl);
    free(cl->first.p);
    pthread_mutex_destroy(&cl->mu);
    free(cl->what);
    free(cl);
}

static int fail(struct chan *ch, int status, const char *fmt, ...) SBX_PRINTF_LIKE(3, 4);
static int fail(struct chan *ch, int status, const char *fmt, ...)
{
    char msg[768];
    if (ch->quiet && !ch->call)
        return status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return sbxp_call_error(ch->cl->cfg.host, ch->call, status, "%s: %s: %s", ch->cl->what,
                           ch->op, msg);
}

static void drop(struct chan *ch)
{
    if (ch->fd >= 0)
        close(ch->fd);
    ch->fd = -1;
    free(ch->buf);
    ch->buf = NULL;
    ch->cap = 0;
}

static void give_back(struct chan *ch)
{
    struct sbxp_proc_client *cl = ch->cl;
    if (ch->fd < 0)
        return;
    pthread_mutex_lock(&cl->mu);
    if (cl->nidle < POOL_MAX) {
        cl->idle[cl->nidle++] = (struct idle_chan){ch->fd, ch->buf, ch->cap};
        ch->fd = -1;
        ch->buf = NULL;
        ch->cap = 0;
    }
    pthread_mutex_unlock(&cl->mu);
    drop(ch);
}

static int wait_fd(struct chan *ch, short events)
{
    for (;;) {
        int timeout = -1;
        if (ch->deadline) {
            int64_t left = ch->deadline - sbxs_now_ms();
            if (left <= 0) {
                drop(ch);
                return fail(ch, SBX_E_TIMEOUT, "no answer within the deadline");
            }
            timeout = left > 60000 ? 60000 : (int)left;
        }
        struct pollfd p[2] = {{.fd = ch->fd, .events = events},
                              {.fd = ch->cancel_fd, .events = POLLIN}};
        int r = poll(p, ch->cancel_fd >= 0 ? 2 : 1, timeout);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            drop(ch);
            return fail(ch, SBX_E_IO, "poll: %s", strerror(errno));
        }
        if (ch->cancel_fd >= 0 && (p[1].revents & POLLIN)) {
            drop(ch); /* the answer would come later: the channel is out of step */
            return sbxp_call_error(ch->cl->cfg.host, ch->call, SBX_E_CANCELLED, "%s: cancelled",
                                   ch->op);
        }
        if (p[0].revents)
            return SBX_OK;
    }
}

/* Send all of buf. *early: the channel was found closed before a byte of
 * it went out (a retry on a new channel is safe). */
static int send_all(struct chan *ch, const void *buf, size_t n, int *early)
{
    size_t off = 0;
    if (early)
        *early = 0;
    while (off < n) {
        ssize_t k = send(ch->fd, (const char *)buf + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN) {
            int rc = wait_fd(ch, POLLOUT);
            if (rc != SBX_OK)
                return rc;
            continue;
        }
        if (k < 0) {
            int e = errno;
            if (early && off == 0 && ch->pooled && (e == EPIPE || e == ECONNRESET)) {
                *early = 1;
                drop(ch);
                return SBX_E_UNAVAILABLE;
            }
            drop(ch);
            return fail(ch, SBX_E_UNAVAILABLE,
                        "the channel broke while sending (%s); the supervisor may have "
                        "ended, and its processes with it",
                        strerror(e));
        }
        off += (size_t)k;
    }
    return SBX_OK;
}

static int recv_all(struct chan *ch, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t k = recv(ch->fd, (char *)buf + got, n - got, MSG_DONTWAIT);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN) {
            int rc = wait_fd(ch, POLLIN);
            if (rc != SBX_OK)
                return rc;
            continue;
        }
        if (k <= 0) {
            int e = k < 0 ? errno : 0;
            drop(ch);
            return fail(ch, SBX_E_UNAVAILABLE,
                        "the channel ended before the answer (%s): the process supervisor "
                        "has ended (was the agent or its container killed?); the processes "
                        "it ran are gone",
                        e ? strerror(e) : "end of stream");
        }
        got += (size_t)k;
    }
    return SBX_OK;
}

/* One frame: its type and payload (in the channel's buffer, valid until
 * the next frame; at most AP_FRAME_MAX). */
static int recv_frame(struct chan *ch, int *type, unsigned char **payload, uint32_t *len)
{
    unsigned char hdr[AP_HDR_LEN];
    *payload = NULL;
    int rc = recv_all(ch, hdr, sizeof hdr);
    if (rc != SBX_OK)
        return rc;
    if (sbxs_ap_parse_header(hdr, type, len) != 0) {
        drop(ch);
        return fail(ch, SBX_E_PROTOCOL, "a frame of %u bytes is larger than allowed", *len);
    }
    if (*len > ch->cap || !ch->buf) {
        size_t cap = *len < 4096 ? 4096 : *len;
        unsigned char *b = realloc(ch->buf, cap);
        if (!b) {
            drop(ch);
            return fail(ch, SBX_E_NOMEM, "out of memory");
        }
        ch->buf = b;
        ch->cap = cap;
    }
    *payload = ch->buf;
    return *len ? recv_all(ch, *payload, *len) : SBX_OK;
}

/* The supervisor's errno and stage, as a status. */
static int status_of(uint32_t e, const char *stage)
{
    if (strcmp(stage, "id") == 0 && e == ENOENT)
        return SBX_E_NOT_FOUND;
    if (strcmp(stage, "exec") == 0)
        return e == ENOENT ? SBX_E_NO_COMMAND : e == ENOMEM ? SBX_E_NOMEM : SBX_E_NOT_EXEC;
    if (strcmp(stage, "cwd") == 0 || strcmp(stage, "user") == 0)
        return SBX_E_INVALID;
    switch (e) {
    case EINVAL:
    case EPIPE:
    case ENOTTY:
    case ENOTDIR:
    case EXDEV:
        return SBX_E_INVALID;
    case EAGAIN:
        return SBX_E_UNAVAILABLE;
    case ENOMEM:
        return SBX_E_NOMEM;
    case EPERM:
    case EACCES:
        return SBX_E_DENIED;
    case EPROTO:
    case EPROTONOSUPPORT:
        return SBX_E_PROTOCOL;
    default:
        return SBX_E_IO;
    }
}

/* An AP_ERROR payload: its status and message. 0, or -1 when malformed. */
static int error_frame(const unsigned char *p, uint32_t len, int *status, char *msg, size_t cap)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, p, len);
    uint32_t e = sbxs_ap_get_u32(&in);
    char *stage = sbxs_ap_get_str(&in), *m = sbxs_ap_get_str(&in);
    int ok = sbxs_ap_in_done(&in);
    if (ok) {
        *status = status_of(e, stage);
        snprintf(msg, cap, "%s", m);
    }
    free(stage);
    free(m);
    return ok ? 0 : -1;
}

/* An answer that is not the expected one: AP_ERROR as a status (the
 * channel stays usable unless the error is a protocol one), else a
 * protocol error. */
static int answer_error(struct chan *ch, int type, const unsigned char *p, uint32_t len)
{
    if (type != AP_ERROR) {
        drop(ch);
        return fail(ch, SBX_E_PROTOCOL, "unexpected answer frame type 0x%02x", type);
    }
    int st;
    char msg[768];
    if (error_frame(p, len, &st, msg, sizeof msg) != 0) {
        drop(ch);
        return fail(ch, SBX_E_PROTOCOL, "a malformed error frame");
    }
    if (st == SBX_E_PROTOCOL) {
        drop(ch);
        ch->eproto = 1;
    }
    return sbxp_call_error(ch->cl->cfg.host, ch->call, st, "%s: %s", ch->op, msg);
}

/* A channel for this call: an idle one, or a new one (opened, and its
 * AP_OK read). */
static int take(struct chan *ch, int fresh)
{
    struct sbxp_proc_client *cl = ch->cl;
    const struct sbx_host *h = cl->cfg.host;
    ch->cancel_fd = ch->call && h->cancel_fd ? h->cancel_fd(h, ch->call) : -1;
    ch->fd = -1;
    ch->pooled = 0;
    for (int settled = 0; !fresh;) {
        struct idle_chan i = {.fd = -1};
        pthread_mutex_lock(&cl->mu);
        if (cl->nidle)
            i = cl->idle[--cl->nidle];
        int owed = cl->nowed > 0;
        pthread_mutex_unlock(&cl->mu);
        if (i.fd < 0 && owed && !settled) {
            /* none idle: the channels whose pipelined write was answered
             * are, once the answer is read */
            settled = 1;
            settle_ready(cl);
            continue;
        }
        if (i.fd < 0)
            break;
        /* idle and readable: closed by the supervisor (or out of step) */
        struct pollfd p = {.fd = i.fd, .events = POLLIN};
        if (poll(&p, 1, 0) != 0) {
            close(i.fd);
            free(i.buf);
            continue;
        }
        ch->fd = i.fd;
        ch->buf = i.buf;
        ch->cap = i.cap;
        ch->pooled = 1;
        return SBX_OK;
    }
    ch->deadline = sbxs_now_ms() + cl->cfg.request_timeout_ms;
    int fd = -1;
    int rc = cl->cfg.open(cl->cfg.ctx, ch->call, ch->deadline, &fd);
    if (rc != SBX_OK)
        return rc;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    ch->fd = fd;
    /* the channel's AP_OK is read after the request went out (begin): the
     * supervisor finds the request waiting when it takes the channel, and
     * the call saves a round trip */
    ch->need_ok = 1;
    return SBX_OK;
}

/* The AP_OK that opens a new channel, sent before the request's answer. */
static int channel_ok(struct chan *ch)
{
    if (!ch->need_ok)
        return SBX_OK;
    ch->need_ok = 0;
    int type;
    unsigned char *p;
    uint32_t len;
    int rc = recv_frame(ch, &type, &p, &len);
    if (rc != SBX_OK)
        return rc;
    if (type != AP_OK || len != 0) {
        rc = answer_error(ch, type, p, len);
        drop(ch); /* a refused channel is closed by the other side */
    }
    return rc;
}

/* Take a channel and send the request frame (a new channel when the
 * pooled one turned out closed). */
static int begin(struct chan *ch, const unsigned char *frame, size_t n)
{
    for (int fresh = 0; fresh < 2; fresh++) {
        int rc = take(ch, fresh);
        if (rc != SBX_OK)
            return rc;
        ch->deadline = sbxs_now_ms() + ch->cl->cfg.request_timeout_ms;
        int early;
        rc = send_all(ch, frame, n, &early);
        if (rc == SBX_OK)
            return channel_ok(ch);
        if (!early)
            return rc;
    }
    return fail(ch, SBX_E_UNAVAILABLE, "the channel was closed twice");
}

/* A request answered by one frame of type want (AP_OK: empty). With
 * payload NULL the channel is given back; else *payload and *len borrow
 * the channel's buffer and the caller gives it back (give_back) when done
 * with them. On an error the channel was given back or dropped. */
static int exchange2(struct chan *ch, const unsigned char *frame, size_t n, int64_t extra_ms,
                     int want, int want2, int *got, unsigned char **payload, uint32_t *len)
{
    int rc = begin(ch, frame, n);
    if (rc != SBX_OK)
        return rc;
    ch->deadline = sbxs_now_ms() + ch->cl->cfg.request_timeout_ms + extra_ms;
    int type;
    unsigned char *p;
    uint32_t l;
    rc = recv_frame(ch, &type, &p, &l);
    if (rc != SBX_OK)
        return rc;
    if (type == want2 && want2)
        want = want2;
    if (got)
        *got = type;
    if (type != want || (want == AP_OK && l != 0)) {
        rc = answer_error(ch, type, p, l);
        give_back(ch);
        return rc;
    }
    if (payload) {
        *payload = p;
        *len = l;
    } else {
        give_back(ch);
    }
    return SBX_OK;
}

static int exchange(struct chan *ch, const unsigned char *frame, size_t n, int64_t extra_ms,
                    int want, unsigned char **payload, uint32_t *len)
{
    return exchange2(ch, frame, n, extra_ms, want, 0, NULL, payload, len);
}

static int chan_init(struct chan *ch, struct sbxp_proc_client *cl, sbx_call *call,
                     const char *op)
{
    memset(ch, 0, sizeof *ch);
    ch->cl = cl;
    ch->call = call;
    ch->fd = -1;
    ch->cancel_fd = -1;
    ch->op = op;
    return 0;
}

static int id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;
    return n > 0 && n <= AP_PROC_ID_MAX;
}

/* A request of an id and fixed fields: build into buf. */
static size_t id_frame(unsigned char *buf, size_t cap, int type, const char *id)
{
    struct ap_out o;
    sbxs_ap_out_begin(&o, buf, cap, type);
    sbxs_ap_put_str(&o, id);
    return o.len;
}

/* The start request in a new buffer (*n its length), with AP_PS_READ and
 * its fields when first_read; NULL after failing the call. */
static unsigned char *start_frame(struct chan *ch, const char *user,
                                  const struct sbx_proc_spec *spec, int first_read, size_t *n,
                                  int *rc)
{
    struct sbxp_proc_client *cl = ch->cl;
    const char *cwd = spec->cwd ? spec->cwd : "";
    if (cwd[0] == '.' && cwd[1] == '\0')
        cwd = "";
    size_t cap = AP_HDR_LEN + 4 + (user ? strlen(user) : 0) + 4 + 8 + 8 + 4 + 4 + 4 +
                 strlen(cwd) + 8 + 8;
    for (const char *const *a = spec->argv; *a; a++)
        cap += 4 + strlen(*a);
    for (const char *const *e = spec->env; e && *e; e++)
        cap += 4 + strlen(*e);
    if (cap > AP_FRAME_MAX) {
        *rc = fail(ch, SBX_E_INVALID,
             "the command line and environment are %zu bytes, more than the %u one "
             "request may hold",
             cap, AP_FRAME_MAX);
        return NULL;
    }
    unsigned char *buf = malloc(cap);
    if (!buf) {
        *rc = fail(ch, SBX_E_NOMEM, "out of memory");
        return NULL;
    }
    uint64_t bufsz = spec->buffer_bytes ? spec->buffer_bytes : cl->cfg.default_buffer;
    struct ap_out o;
    sbxs_ap_out_begin(&o, buf, cap, AP_PROC_START);
    sbxs_ap_put_str(&o, user ? user : "");
    sbxs_ap_put_u32(&o, (spec->flags & SBX_PROC_PTY ? AP_PS_PTY : 0) |
                            (first_read ? AP_PS_READ : 0));
    sbxs_ap_put_u64(&o, (uint64_t)spec->timeout_ms);
    sbxs_ap_put_u64(&o, bufsz);
    sbxs_ap_put_u32(&o, spec->rows);
    sbxs_ap_put_u32(&o, spec->cols);
    sbxs_ap_put_str(&o, cwd);
    uint32_t argc = 0, envc = 0;
    while (spec->argv[argc])
        argc++;
    while (spec->env && spec->env[envc])
        envc++;
    sbxs_ap_put_u32(&o, argc);
    for (uint32_t i = 0; i < argc; i++)
        sbxs_ap_put_str(&o, spec->argv[i]);
    sbxs_ap_put_u32(&o, envc);
    for (uint32_t i = 0; i < envc; i++)
        sbxs_ap_put_str(&o, spec->env[i]);
    if (first_read) {
        sbxs_ap_put_u32(&o, FIRST_READ_MAX);
        sbxs_ap_put_u32(&o, FIRST_READ_WAIT_MS);
    }
    *n = sbxs_ap_out_end(&o);
    if (!*n) {
        free(buf);
        *rc = fail(ch, SBX_E_INVALID, "an argument or variable is longer than %u bytes",
                   AP_STR_MAX);
        return NULL;
    }
    return buf;
}

int sbxp_proc_start(struct sbxp_proc_client *cl, sbx_call *call, const char *user,
                    const struct sbx_proc_spec *spec, char id[SBX_PROC_ID_MAX])
{
    struct chan ch;
    chan_init(&ch, cl, call, "proc_start");
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return fail(&ch, SBX_E_INVALID, "no program to run");
    if (spec->flags & ~SBX_PROC_PTY)
        return fail(&ch, SBX_E_INVALID, "unknown flags 0x%x", spec->flags & ~SBX_PROC_PTY);
    if (spec->timeout_ms < 0)
        return fail(&ch, SBX_E_INVALID, "a negative timeout");
    /* not for a terminal: its first output (a prompt) must not wait */
    pthread_mutex_lock(&cl->mu);
    int first_read = !cl->no_first_read && !(spec->flags & SBX_PROC_PTY);
    pthread_mutex_unlock(&cl->mu);
    int rc;
    unsigned char *p;
    uint32_t len;
    for (;;) {
        size_t n;
        unsigned char *buf = start_frame(&ch, user, spec, first_read, &n, &rc);
        if (!buf)
            return rc;
        rc = exchange(&ch, buf, n, 0, AP_PROC_STARTED, &p, &len);
        free(buf);
        /* a supervisor that predates AP_PS_READ finds the start malformed
         * (and closes the channel): start again without it, and never ask
         * it again */
        if (rc == SBX_E_PROTOCOL && first_read && ch.eproto) {
            ch.eproto = 0;
            pthread_mutex_lock(&cl->mu);
            cl->no_first_read = 1;
            pthread_mutex_unlock(&cl->mu);
            first_read = 0;
            continue;
        }
        break;
    }
    if (rc != SBX_OK)
        return rc;
    struct ap_in in;
    sbxs_ap_in_begin(&in, p, len);
    char *got = sbxs_ap_get_str(&in);
    if (!sbxs_ap_in_done(&in) || !got || !id_ok(got)) {
        drop(&ch);
        rc = fail(&ch, SBX_E_PROTOCOL, "a malformed process id in the answer");
    } else {
        snprintf(id, SBX_PROC_ID_MAX, "%s", got);
        struct sbxp_proc_client *rd = cl->cfg.reads ? cl->cfg.reads : cl;
        known_set(rd, id, K_ALIVE, 0, SBX_OK, NULL);
        /* the first read's answer follows on this channel: owed to the
         * read from 0 that usually comes next (on the reading client) */
        ch.cl = rd;
        if (!first_read || owed_put(&ch, id, OWED_READ) != 0)
            first_read ? drop(&ch) : give_back(&ch);
    }
    free(got);
    return rc;
}

static int deliver(const struct sbx_sink *s, const unsigned char *p, size_t n)
{
    if (!n || !s || !s->write)
        return 0;
    return s->write(s->ctx, p, n);
}

/* AP_PROC_WROTE's output into the cache. 0, or -1 when malformed. */
static int store_peek(struct sbxp_proc_client *cl, const char *id, const unsigned char *p,
                      uint32_t len)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, p, len);
    uint64_t off = sbxs_ap_get_u64(&in);
    uint32_t n = sbxs_ap_get_u32(&in);
    if (in.bad || n != in.left || n > AP_PW_PEEK_MAX)
        return -1;
    pthread_mutex_lock(&cl->mu);
    snprintf(cl->peek.id, sizeof cl->peek.id, "%s", id);
    cl->peek.off = off;
    cl->peek.n = n;
    memcpy(cl->peek.data, in.p, n);
    pthread_mutex_unlock(&cl->mu);
    return 0;
}

/* AP_PROC_WROTE's output into the cache; gives the channel back. */
static int keep_peek(struct chan *ch, const char *id, const unsigned char *p, uint32_t len)
{
    if (store_peek(ch->cl, id, p, len) != 0) {
        drop(ch);
        return fail(ch, SBX_E_PROTOCOL, "a malformed write answer");
    }
    give_back(ch);
    return SBX_OK;
}

/* ---- what the client knows of a process, and pipelined writes ---------- */

/* Under mu. */
static struct known_proc *known_find(struct sbxp_proc_client *cl, const char *id)
{
    for (size_t i = 0; i < KNOWN_MAX; i++)
        if (cl->known[i].state && strcmp(cl->known[i].id, id) == 0)
            return &cl->known[i];
    return NULL;
}

/* Record that id runs (K_ALIVE) or is dead for writes (K_DEAD: status and
 * the message every later write reports). Dead is final; a later dead
 * record replaces the message only when it says more (prio). */
static void known_set(struct sbxp_proc_client *cl, const char *id, int state, int prio,
                      int status, const char *fmt, ...)
{
    pthread_mutex_lock(&cl->mu);
    struct known_proc *k = known_find(cl, id);
    if (k && k->state == K_DEAD && (state == K_ALIVE || prio < k->status_prio)) {
        pthread_mutex_unlock(&cl->mu);
        return;
    }
    if (!k) {
        k = &cl->known[cl->known_next];
        cl->known_next = (cl->known_next + 1) % KNOWN_MAX;
        snprintf(k->id, sizeof k->id, "%s", id);
    }
    k->state = state;
    k->status = status;
    k->status_prio = prio;
    k->msg[0] = '\0';
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(k->msg, sizeof k->msg, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&cl->mu);
}

/* K_ALIVE, K_DEAD (status and message copied out) or 0: unknown. */
static int known_get(struct sbxp_proc_client *cl, const char *id, int *status, char *msg,
                     size_t cap)
{
    pthread_mutex_lock(&cl->mu);
    struct known_proc *k = known_find(cl, id);
    int st = k ? k->state : 0;
    if (k && st == K_DEAD) {
        *status = k->status;
        snprintf(msg, cap, "%s", k->msg);
    }
    pthread_mutex_unlock(&cl->mu);
    return st;
}

/* Take the oldest channel owing an answer for id (any id: NULL; with
 * ready, only one whose answer has arrived). 1 when taken. */
static int owed_take(struct sbxp_proc_client *cl, const char *id, int kind, int ready,
                     struct owed_chan *out)
{
    pthread_mutex_lock(&cl->mu);
    size_t i;
    for (i = 0; i < cl->nowed; i++) {
        if (id && strcmp(cl->owed[i].id, id) != 0)
            continue;
        if (kind && cl->owed[i].kind != kind)
            continue;
        if (ready) {
            struct pollfd p = {.fd = cl->owed[i].ch.fd, .events = POLLIN};
            if (poll(&p, 1, 0) <= 0)
                continue;
        }
        break;
    }
    int got = i < cl->nowed;
    if (got) {
        *out = cl->owed[i];
        memmove(&cl->owed[i], &cl->owed[i + 1], (cl->nowed - i - 1) * sizeof cl->owed[0]);
        cl->nowed--;
    }
    pthread_mutex_unlock(&cl->mu);
    return got;
}

/* Keep ch owing the answer of a write to id. 0, or -1 when the table is
 * full (the caller settles one and tries again). */
static int owed_put(struct chan *ch, const char *id, int kind)
{
    struct sbxp_proc_client *cl = ch->cl;
    pthread_mutex_lock(&cl->mu);
    int ok = cl->nowed < OWED_MAX;
    if (ok) {
        struct owed_chan *o = &cl->owed[cl->nowed++];
        snprintf(o->id, sizeof o->id, "%s", id);
        o->kind = kind;
        o->ch = (struct idle_chan){ch->fd, ch->buf, ch->cap};
        ch->fd = -1;
        ch->buf = NULL;
        ch->cap = 0;
        if (kind == OWED_WRITE)
            cl->pipelined++;
    }
    pthread_mutex_unlock(&cl->mu);
    return ok ? 0 : -1;
}

/* Read the answer owed on o into ch (which then holds the channel, in
 * step for the next request). Waits until deadline (monotonic ms; 0: the
 * answer must be there already) and the call's cancellation; when it has
 * not come by then, o is owed again and SBX_E_TIMEOUT or SBX_E_CANCELLED
 * returned (set on the call when quiet is 0). An answer that is an error
 * marks the process dead for writes (*dead set) and is SBX_OK: the
 * channel goes on. A broken channel is dropped (its error returned). */
static int settle(struct chan *ch, struct owed_chan *o, int64_t deadline, int quiet, int *dead)
{
    struct sbxp_proc_client *cl = ch->cl;
    *dead = 0;
    ch->quiet = quiet;
    ch->fd = o->ch.fd;
    ch->buf = o->ch.buf;
    ch->cap = o->ch.cap;
    ch->pooled = 1;
    for (;;) {
        int64_t left = deadline ? deadline - sbxs_now_ms() : 0;
        struct pollfd p[2] = {{.fd = ch->fd, .events = POLLIN},
                              {.fd = ch->cancel_fd, .events = POLLIN}};
        int r = poll(p, ch->cancel_fd >= 0 ? 2 : 1,
                     left <= 0 ? 0 : left > 60000 ? 60000 : (int)left);
        if (r < 0 && errno == EINTR)
            continue;
        int cancelled = r > 0 && ch->cancel_fd >= 0 && (p[1].revents & POLLIN);
        if (r > 0 && p[0].revents && !cancelled)
            break;
        if (r < 0 || cancelled || left <= 0) {
            int status = cancelled ? SBX_E_CANCELLED : SBX_E_TIMEOUT;
            if (owed_put(ch, o->id, o->kind) != 0) {
                drop(ch); /* no room: rare; its answer is lost with it */
            } else if (o->kind == OWED_WRITE) {
                pthread_mutex_lock(&cl->mu);
                cl->pipelined--; /* not a new one */
                pthread_mutex_unlock(&cl->mu);
            }
            if (quiet)
                return status;
            return fail(ch, status,
                        "%s while an earlier write to %s waits for the process to take it",
                        cancelled ? "cancelled" : "no answer within the deadline", o->id);
        }
    }
    ch->deadline = sbxs_now_ms() + cl->cfg.request_timeout_ms;
    int type;
    unsigned char *p;
    uint32_t len;
    int rc = recv_frame(ch, &type, &p, &len);
    if (rc != SBX_OK)
        return rc;
    if (o->kind == OWED_READ && type == AP_PROC_OUTPUT) {
        unsigned char *copy = malloc(len ? len : 1);
        if (!copy)
            return SBX_OK; /* not kept: the read asks */
        memcpy(copy, p, len);
        pthread_mutex_lock(&cl->mu);
        free(cl->first.p);
        snprintf(cl->first.id, sizeof cl->first.id, "%s", o->id);
        cl->first.p = copy;
        cl->first.len = len;
        pthread_mutex_unlock(&cl->mu);
        return SBX_OK;
    }
    if (o->kind == OWED_READ && type == AP_ERROR)
        return SBX_OK; /* the read will be asked and answered again */
    if (type == AP_OK && len == 0)
        return SBX_OK;
    if (type == AP_PROC_WROTE && store_peek(cl, o->id, p, len) == 0)
        return SBX_OK;
    if (type != AP_ERROR) {
        drop(ch);
        return fail(ch, SBX_E_PROTOCOL, "unexpected answer frame type 0x%02x", type);
    }
    int st;
    char msg[256];
    if (error_frame(p, len, &st, msg, sizeof msg) != 0) {
        drop(ch);
        return fail(ch, SBX_E_PROTOCOL, "a malformed error frame");
    }
    known_set(cl, o->id, K_DEAD, 2, st, "an earlier write to %s was not delivered: %s", o->id,
              msg);
    if (st == SBX_E_PROTOCOL)
        drop(ch);
    *dead = 1;
    return SBX_OK;
}

/* Collect, without waiting, the owed answers that have arrived: their
 * channels go back to the pool (an error marks its process dead). */
static void settle_ready(struct sbxp_proc_client *cl)
{
    struct owed_chan o;
    while (owed_take(cl, NULL, 0, 1, &o)) {
        struct chan ch;
        chan_init(&ch, cl, NULL, "proc_write");
        int dead;
        if (settle(&ch, &o, 0, 1, &dead) == SBX_OK)
            give_back(&ch);
    }
}

/* Collect every owed answer, waiting for each until deadline (the
 * client's release: the supervisor drops a queued write whose channel
 * closes, so it must be written first). */
static void settle_all(struct sbxp_proc_client *cl, int64_t deadline)
{
    struct owed_chan o;
    while (owed_take(cl, NULL, 0, 0, &o)) {
        struct chan ch;
        chan_init(&ch, cl, NULL, "proc_write");
        int dead, rc = settle(&ch, &o, deadline, 1, &dead);
        if (rc == SBX_E_TIMEOUT || rc == SBX_E_CANCELLED) {
            /* put back owed by settle: give up on it */
            if (owed_take(cl, o.id, o.kind, 0, &o)) {
                close(o.ch.fd);
                free(o.ch.buf);
            }
            continue;
        }
        if (rc == SBX_OK)
            give_back(&ch);
    }
}

/* A read whose cursor falls in the cached output: answered from it (the
 * state is reported running; the next read from the supervisor says
 * more). 1 when answered (*rc set), 0 to ask the supervisor. */
static int read_cached(struct sbxp_proc_client *cl, const char *id,
                       const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res,
                       int *rc)
{
    unsigned char buf[4096];
    size_t n = 0;
    uint64_t max = args->max_bytes ? args->max_bytes : 64u * 1024;
    pthread_mutex_lock(&cl->mu);
    struct peek_cache *c = &cl->peek;
    if (args->err_cursor == 0 && c->n && strcmp(c->id, id) == 0 &&
        args->out_cursor >= c->off && args->out_cursor < c->off + c->n) {
        n = (size_t)(c->off + c->n - args->out_cursor);
        if (n > max)
            n = (size_t)max;
        if (n > sizeof buf)
            n = sizeof buf;
        memcpy(buf, c->data + (args->out_cursor - c->off), n);
        cl->peek_hits++;
    }
    pthread_mutex_unlock(&cl->mu);
    if (!n)
        return 0;
    *rc = deliver(args->out, buf, n);
    if (*rc)
        return 1;
    res->state = SBX_PROC_RUNNING;
    res->out_cursor = args->out_cursor + n;
    res->err_cursor = args->err_cursor;
    res->out_lost = res->err_lost = 0;
    res->exit_code = res->term_signal = res->timed_out = res->eof = 0;
    return 1;
}

/* The channel for a write to id: the one owing the answer of the last
 * pipelined write to it, once that answer is in (SBX_OK with *have set),
 * or none (*have 0). An answer that says the earlier write failed is
 * this write's error. */
static int write_channel(struct chan *ch, const char *id, int *have)
{
    struct sbxp_proc_client *cl = ch->cl;
    const struct sbx_host *h = cl->cfg.host;
    struct owed_chan o;
    *have = 0;
    ch->cancel_fd = ch->call && h->cancel_fd ? h->cancel_fd(h, ch->call) : -1;
    while (owed_take(cl, id, OWED_WRITE, 0, &o)) {
        if (*have) /* a second owed channel (writes from two threads) */
            give_back(ch);
        *have = 0;
        int dead;
        int rc = settle(ch, &o, sbxs_now_ms() + cl->cfg.request_timeout_ms, 0, &dead);
        if (rc != SBX_OK)
            return rc;
        if (dead) {
            int st = SBX_E_INVALID;
            char msg[256] = "";
            known_get(cl, id, &st, msg, sizeof msg);
            give_back(ch);
            return fail(ch, st, "%s", msg);
        }
        *have = ch->fd >= 0;
    }
    return SBX_OK;
}

int sbxp_proc_write(struct sbxp_proc_client *cl, sbx_call *call, const char *id,
                    const void *data, size_t len, uint32_t flags)
{
    struct chan ch;
    chan_init(&ch, cl, call, "proc_write");
    if (!id_ok(id))
        return fail(&ch, SBX_E_NOT_FOUND, "no such process");
    if (flags & ~SBX_PROC_WRITE_CLOSE)
        return fail(&ch, SBX_E_INVALID, "unknown flags 0x%x", flags & ~SBX_PROC_WRITE_CLOSE);
    int kst = SBX_E_INVALID;
    char kmsg[256] = "";
    int known = known_get(cl, id, &kst, kmsg, sizeof kmsg);
    if (known == K_DEAD) /* seen ended or closed, or an earlier write failed */
        return fail(&ch, kst, "%s", kmsg);
    size_t idl = strlen(id);
    size_t chunk = AP_CHUNK;
    unsigned char *buf = malloc(AP_HDR_LEN + 4 + idl + 4 + chunk);
    if (!buf)
        return fail(&ch, SBX_E_NOMEM, "out of memory");
    const unsigned char *d = data;
    size_t off = 0;
    int rc = SBX_OK;
    do {
        size_t n = len - off < chunk ? len - off : chunk;
        int last = off + n >= len;
        int closing = last && (flags & SBX_PROC_WRITE_CLOSE);
        /* pipelined: sent without waiting for the answer, which the next
         * write collects; a close, and a write to a process not known to
         * run here (an id of another session fails at once), wait */
        int pipe_it = known == K_ALIVE && !closing;
        struct ap_out o;
        sbxs_ap_out_begin(&o, buf, AP_HDR_LEN + 4 + idl + 4 + chunk, AP_PROC_WRITE);
        sbxs_ap_put_str(&o, id);
        uint32_t wf = closing ? AP_PW_CLOSE : last && !pipe_it ? AP_PW_PEEK : 0;
        sbxs_ap_put_u32(&o, wf);
        sbxs_ap_put_bytes(&o, d + off, n);
        size_t fl = sbxs_ap_out_end(&o);
        int have = 0;
        rc = write_channel(&ch, id, &have);
        if (rc != SBX_OK)
            break;
        if (have) {
            ch.deadline = sbxs_now_ms() + cl->cfg.request_timeout_ms;
            rc = send_all(&ch, buf, fl, NULL);
        } else {
            rc = begin(&ch, buf, fl);
        }
        if (rc != SBX_OK)
            break;
        if (pipe_it) {
            while (owed_put(&ch, id, OWED_WRITE) != 0) {
                /* the table is full: settle the oldest (waiting) */
                struct owed_chan old;
                if (!owed_take(cl, NULL, 0, 0, &old))
                    continue;
                struct chan oc;
                chan_init(&oc, cl, NULL, "proc_write");
                int dead;
                if (settle(&oc, &old, sbxs_now_ms() + cl->cfg.request_timeout_ms, 1, &dead) ==
                    SBX_OK)
                    give_back(&oc);
            }
        } else {
            ch.deadline = sbxs_now_ms() + cl->cfg.request_timeout_ms + AP_PW_PEEK_MS;
            int type;
            unsigned char *p = NULL;
            uint32_t plen = 0;
            rc = recv_frame(&ch, &type, &p, &plen);
            if (rc != SBX_OK)
                break;
            if (type == AP_PROC_WROTE && (wf & AP_PW_PEEK)) {
                rc = keep_peek(&ch, id, p, plen);
            } else if (type == AP_OK && plen == 0) {
                give_back(&ch);
            } else {
                int st;
                char msg[256];
                if (type == AP_ERROR && error_frame(p, plen, &st, msg, sizeof msg) == 0 &&
                    (st == SBX_E_INVALID || st == SBX_E_NOT_FOUND))
                    known_set(cl, id, K_DEAD, 1, st, "%s", msg); /* ended, closed, unknown */
                rc = answer_error(&ch, type, p, plen);
                give_back(&ch);
            }
            if (rc != SBX_OK)
                break;
            if (closing)
                known_set(cl, id, K_DEAD, 1, SBX_E_INVALID, "process %s has its stdin closed", id);
            else
                known = K_ALIVE, known_set(cl, id, K_ALIVE, 0, SBX_OK, NULL);
        }
        off += n;
    } while (off < len);
    free(buf);
    return rc;
}

/* An AP_PROC_OUTPUT payload answering a read from args' cursors of at
 * most max bytes per stream: checked, at most lim bytes per stream
 * delivered to the sinks (lim < max: the rest is left for the next read,
 * the cursors say where), *res filled, *got the bytes delivered. SBX_OK,
 * a sink's status, or TAKE_MALFORMED (nothing delivered). */
#define TAKE_MALFORMED (-0x7fff)
static int take_output(struct sbxp_proc_client *cl, const char *id,
                       const struct sbx_proc_read_args *args, uint64_t max, uint64_t lim,
                       const unsigned char *p, uint32_t len, struct sbx_proc_read_result *res,
                       uint64_t *got)
{
    struct ap_in in;
    sbxs_ap_in_begin(&in, p, len);
    uint32_t state = sbxs_ap_get_u32(&in), fl = sbxs_ap_get_u32(&in);
    uint32_t code = sbxs_ap_get_u32(&in), sig = sbxs_ap_get_u32(&in);
    uint64_t oc = sbxs_ap_get_u64(&in), olost = sbxs_ap_get_u64(&in);
    uint32_t on = sbxs_ap_get_u32(&in);
    const unsigned char *od = in.p;
    if (!in.bad && on <= in.left) {
        in.p += on;
        in.left -= on;
    } else {
        in.bad = 1;
    }
    uint64_t ec = sbxs_ap_get_u64(&in), elost = sbxs_ap_get_u64(&in);
    uint32_t en = sbxs_ap_get_u32(&in);
    const unsigned char *ed = in.p;
    if (!in.bad && en == in.left)
        in.left = 0;
    else
        in.bad = 1;
    if (!sbxs_ap_in_done(&in) || state > AP_PROC_EXITED || on > max || en > max ||
        oc != args->out_cursor + olost + on || ec != args->err_cursor + elost + en)
        return TAKE_MALFORMED;
    int whole = on <= lim && en <= lim;
    if (on > lim) {
        oc -= on - lim;
        on = (uint32_t)lim;
    }
    if (en > lim) {
        ec -= en - lim;
        en = (uint32_t)lim;
    }
    *got = on + en;
    int rc = deliver(args->out, od, on);
    if (!rc)
        rc = deliver(args->err, ed, en);
    if (rc)
        return rc;
    if (state == AP_PROC_EXITED)
        known_set(cl, id, K_DEAD, 1, SBX_E_INVALID, "process %s has ended", id);
    else
        known_set(cl, id, K_ALIVE, 0, SBX_OK, NULL);
    res->state = state == AP_PROC_EXITED ? SBX_PROC_EXITED : SBX_PROC_RUNNING;
    res->out_cursor = oc;
    res->err_cursor = ec;
    res->out_lost = olost;
    res->err_lost = elost;
    res->exit_code = state == AP_PROC_EXITED ? (int)(int32_t)code : 0;
    res->term_signal = (fl & AP_PR_SIGNALED) ? (int)sig : 0;
    res->timed_out = (fl & AP_PR_TIMED_OUT) != 0;
    res->eof = whole && (fl & AP_PR_EOF) != 0;
    return SBX_OK;
}

/* A read from 0 answered by the start's first read (AP_PS_READ), which
 * waits on the start's channel (at most the read's wait for it). 1 when
 * answered (*rc set); 0 to ask the supervisor. An answer of nothing from
 * a process still running is not used: the read waits for more. */
static int read_first(struct sbxp_proc_client *cl, sbx_call *call, const char *id,
                      const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res,
                      int *rc)
{
    if (args->out_cursor != 0 || args->err_cursor != 0)
        return 0;
    unsigned char *fp = NULL;
    uint32_t flen = 0;
    for (int tries = 0; tries < 2 && !fp; tries++) {
        pthread_mutex_lock(&cl->mu);
        if (cl->first.p && strcmp(cl->first.id, id) == 0) {
            fp = cl->first.p;
            flen = cl->first.len;
            cl->first.p = NULL;
        }
        pthread_mutex_unlock(&cl->mu);
        struct owed_chan o;
        if (fp || tries || !owed_take(cl, id, OWED_READ, 0, &o))
            break;
        struct chan ch;
        chan_init(&ch, cl, call, "proc_read");
        const struct sbx_host *h = cl->cfg.host;
        ch.cancel_fd = call && h->cancel_fd ? h->cancel_fd(h, call) : -1;
        int dead;
        /* it comes FIRST_READ_WAIT_MS after the start at the latest */
        uint32_t w = args->wait_ms < FIRST_READ_WAIT_MS + 25 ? args->wait_ms
                                                              : FIRST_READ_WAIT_MS + 25;
        int st = settle(&ch, &o, w ? sbxs_now_ms() + w : 0, 1, &dead);
        if (st == SBX_E_CANCELLED) {
            *rc = sbxp_call_error(h, call, SBX_E_CANCELLED, "proc_read: cancelled");
            return 1;
        }
        if (st != SBX_OK)
            return 0; /* not answered in the read's wait (still owed), or broken */
        give_back(&ch);
    }
    if (!fp)
        return 0;
    /* only an answer about a process that has ended is kept (it is final:
     * a read from 0 now would be answered the same); a running one's may
     * be old, the read asks */
    struct ap_in st;
    sbxs_ap_in_begin(&st, fp, flen);
    if (sbxs_ap_get_u32(&st) != AP_PROC_EXITED || st.bad) {
        free(fp);
        return 0;
    }
    uint64_t lim = args->max_bytes ? args->max_bytes : 64u * 1024, got = 0;
    struct sbx_proc_read_result r = *res;
    int trc = take_output(cl, id, args, FIRST_READ_MAX, lim, fp, flen, &r, &got);
    free(fp);
    if (trc == TAKE_MALFORMED) {
        struct chan ch;
        chan_init(&ch, cl, call, "proc_read");
        *rc = fail(&ch, SBX_E_PROTOCOL, "a malformed first read answer");
        return 1;
    }
    *res = r;
    *rc = trc;
    pthread_mutex_lock(&cl->mu);
    cl->first_hits++;
    pthread_mutex_unlock(&cl->mu);
    return 1;
}

int sbxp_proc_read(struct sbxp_proc_client *cl, sbx_call *call, const char *id,
                   const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res)
{
    struct chan ch;
    chan_init(&ch, cl, call, "proc_read");
    if (!id_ok(id))
        return fail(&ch, SBX_E_NOT_FOUND, "no such process");
    int crc;
    if (read_cached(cl, id, args, res, &crc))
        return crc;
    int64_t t0 = sbxs_now_ms();
    if (read_first(cl, call, id, args, res, &crc))
        return crc;
    /* what read_first waited counts against the wait */
    struct sbx_proc_read_args a = *args;
    int64_t spent = sbxs_now_ms() - t0;
    a.wait_ms = spent >= (int64_t)a.wait_ms ? 0 : a.wait_ms - (uint32_t)spent;
    args = &a;
    unsigned char buf[AP_HDR_LEN + 4 + AP_PROC_ID_MAX + 8 + 8 + 4 + 4];
    size_t n = id_frame(buf, sizeof buf, AP_PROC_READ, id);
    struct ap_out o = {.buf = buf, .cap = sizeof buf, .len = n};
    uint64_t max = args->max_bytes ? args->max_bytes : 64u * 1024;
    sbxs_ap_put_u64(&o, args->out_cursor);
    sbxs_ap_put_u64(&o, args->err_cursor);
    sbxs_ap_put_u32(&o, max > AP_PROC_READ_MAX ? AP_PROC_READ_MAX : (uint32_t)max);
    sbxs_ap_put_u32(&o, args->wait_ms);
    n = sbxs_ap_out_end(&o);
    unsigned char *p;
    uint32_t len;
    int rc = exchange(&ch, buf, n, args->wait_ms, AP_PROC_OUTPUT, &p, &len);
    if (rc != SBX_OK)
        return rc;
    uint64_t got;
    rc = take_output(cl, id, args, max, max, p, len, res, &got);
    if (rc == TAKE_MALFORMED) {
        drop(&ch);
        return fail(&ch, SBX_E_PROTOCOL, "a malformed read answer");
    }
    give_back(&ch);
    return rc;
}

int sbxp_proc_signal(struct sbxp_proc_client *cl, sbx_call *call, const char *id, int signo)
{
    struct chan ch;
    chan_init(&ch, cl, call, "proc_signal");
    if (!id_ok(id))
        return fail(&ch, SBX_E_NOT_FOUND, "no such process");
    if (signo < 1 || signo > 64)
        return fail(&ch, SBX_E_INVALID, "%d is not a signal number (1 to 64)", signo);
    unsigned char buf[AP_HDR_LEN + 4 + AP_PROC_ID_MAX + 4];
    size_t n = id_frame(buf, sizeof buf, AP_PROC_SIGNAL, id);
    struct ap_out o = {.buf = buf, .cap = sizeof buf, .len = n};
    sbxs_ap_put_u32(&o, (uint32_t)signo);
    n = sbxs_ap_out_end(&o);
    return exchange(&ch, buf, n, 0, AP_OK, NULL, NULL);
}

int sbxp_proc_resize(struct sbxp_proc_client *cl, sbx_call *call, const char *id,
                     uint16_t rows, uint16_t cols)
{
    struct chan ch;
    chan_init(&ch, cl, call, "proc_resize");
    if (!id_ok(id))
        return fail(&ch, SBX_E_NOT_FOUND, "no such process");
    unsigned char buf[AP_HDR_LEN + 4 + AP_PROC_ID_MAX + 8];
    size_t n = id_frame(buf, sizeof buf, AP_PROC_RESIZE, id);
    struct ap_out o = {.buf = buf, .cap = sizeof buf, .len = n};
    sbxs_ap_put_u32(&o, rows);
    sbxs_ap_put_u32(&o, cols);
    n = sbxs_ap_out_end(&o);
    return exchange(&ch, buf, n, 0, AP_OK, NULL, NULL);
}

int sbxp_proc_kill_all(struct sbxp_proc_client *cl, sbx_call *call)
{
    struct chan ch;
    chan_init(&ch, cl, call, "kill-all");
    unsigned char buf[AP_HDR_LEN];
    sbxs_ap_header(buf, AP_PROC_KILL_ALL, 0);
    return exchange(&ch, buf, sizeof buf, 3000, AP_OK, NULL, NULL);
}

int sbxp_proc_list(struct sbxp_proc_client *cl, sbx_call *call,
                   const struct sbx_proc_list_sink *sink)
{
    struct chan ch;
    chan_init(&ch, cl, call, "proc_list");
    unsigned char buf[AP_HDR_LEN];
    sbxs_ap_header(buf, AP_PROC_LIST, 0);
    int rc = begin(&ch, buf, sizeof buf);
    int stop = 0;
    while (rc == SBX_OK) {
        int type;
        unsigned char *p;
        uint32_t len;
        ch.deadline = sbxs_now_ms() + cl->cfg.request_timeout_ms;
        rc = recv_frame(&ch, &type, &p, &len);
        if (rc != SBX_OK)
            return rc;
        if (type == AP_OK && len == 0) {
            give_back(&ch);
            return stop;
        }
        if (type != AP_PROC_ENTRY) {
            rc = answer_error(&ch, type, p, len);
            give_back(&ch);
            return rc;
        }
        struct ap_in in;
        sbxs_ap_in_begin(&in, p, len);
        char *pid = sbxs_ap_get_str(&in);
        uint32_t pflags = sbxs_ap_get_u32(&in), state = sbxs_ap_get_u32(&in);
        uint32_t fl = sbxs_ap_get_u32(&in), code = sbxs_ap_get_u32(&in);
        uint32_t sig = sbxs_ap_get_u32(&in);
        uint64_t started = sbxs_ap_get_u64(&in);
        char *cmd = sbxs_ap_get_str(&in);
        if (!sbxs_ap_in_done(&in) || !pid || !id_ok(pid) || !cmd || state > AP_PROC_EXITED) {
            free(pid);
            free(cmd);
            drop(&ch);
            return fail(&ch, SBX_E_PROTOCOL, "a malformed list entry");
        }
        struct sbx_proc_info info = {
            .size = sizeof info,
            .flags = (pflags & AP_PS_PTY) ? SBX_PROC_PTY : 0,
            .id = pid,
            .command = cmd,
            .state = state == AP_PROC_EXITED ? SBX_PROC_EXITED : SBX_PROC_RUNNING,
            .exit_code = state == AP_PROC_EXITED ? (int)(int32_t)code : 0,
            .term_signal = (fl & AP_PR_SIGNALED) ? (int)sig : 0,
            .started_ms = (int64_t)started,
        };
        /* a sink that stops: the rest is read (and dropped) to keep the
         * channel in step */
        if (!stop)
            stop = sink->entry(sink->ctx, &info);
        free(pid);
        free(cmd);
    }
    return rc;
}

uint64_t sbxp_proc_client_first_hits(struct sbxp_proc_client *cl)
{
    pthread_mutex_lock(&cl->mu);
    uint64_t n = cl->first_hits;
    pthread_mutex_unlock(&cl->mu);
    return n;
}

uint64_t sbxp_proc_client_pipelined(struct sbxp_proc_client *cl)
{
    pthread_mutex_lock(&cl->mu);
    uint64_t n = cl->pipelined;
    pthread_mutex_unlock(&cl->mu);
    return n;
}

uint64_t sbxp_proc_client_echo_hits(struct sbxp_proc_client *cl)
{
    pthread_mutex_lock(&cl->mu);
    uint64_t n = cl->peek_hits;
    pthread_mutex_unlock(&cl->mu);
    return n;
}

int sbxp_proc_handshake(int fd, int64_t deadline, char *msg, size_t cap)
{
    unsigned char out[AP_PREAMBLE_LEN + AP_HDR_LEN + 4], pre[AP_PREAMBLE_LEN];
    sbxs_ap_preamble(out, AP_VERSION);
    sbxs_ap_header(out + AP_PREAMBLE_LEN, AP_PROC_CHANNEL, 4);
    memset(out + AP_PREAMBLE_LEN + AP_HDR_LEN, 0, 4); /* user "" */
    size_t off = 0, got = 0;
    while (off < sizeof out || got < sizeof pre) {
        int64_t left = deadline ? deadline - sbxs_now_ms() : 60000;
        if (left <= 0) {
            snprintf(msg, cap, "no preamble from the supervisor in time");
            return -1;
        }
        struct pollfd p = {.fd = fd, .events = (short)(off < sizeof out ? POLLOUT : POLLIN)};
        if (poll(&p, 1, left > 60000 ? 60000 : (int)left) < 0 && errno != EINTR) {
            snprintf(msg, cap, "poll: %s", strerror(errno));
            return -1;
        }
        ssize_t k;
        if (off < sizeof out) {
            k = send(fd, out + off, sizeof out - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (k > 0)
                off += (size_t)k;
        } else {
            k = recv(fd, pre + got, sizeof pre - got, MSG_DONTWAIT);
            if (k == 0) {
                snprintf(msg, cap, "the supervisor closed the connection");
                return -1;
            }
            if (k > 0)
                got += (size_t)k;
        }
        if (k < 0 && errno != EAGAIN && errno != EINTR) {
            snprintf(msg, cap, "%s", strerror(errno));
            return -1;
        }
    }
    uint32_t v;
    if (sbxs_ap_parse_preamble(pre, &v) != 0 || v < 3) {
        snprintf(msg, cap, "the peer is not a process supervisor of protocol 3 or later");
        return -1;
    }
    return 0;
}
