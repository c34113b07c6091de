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
#define DEFAULT_TIMEOUT_MS 30000

/* An idle channel and its receive buffer (reused: no allocation per
 * answer, and the host's memory stays bounded by the pool). */
struct idle_chan {
    int fd;
    unsigned char *buf;
    size_t cap;
};

struct sbxp_proc_client {
    struct sbxp_proc_client_cfg cfg;
    char *what;
    pthread_mutex_t mu;
    struct idle_chan idle[POOL_MAX];
    size_t nidle;
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
    unsigned char *buf; /* the last frame's payload */
    size_t cap;
};

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
    pthread_mutex_destroy(&cl->mu);
    free(cl->what);
    free(cl);
}

static int fail(struct chan *ch, int status, const char *fmt, ...) SBX_PRINTF_LIKE(3, 4);
static int fail(struct chan *ch, int status, const char *fmt, ...)
{
    char msg[768];
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

/* An answer that is not the expected one: AP_ERROR as a status (the
 * channel stays usable unless the error is a protocol one), else a
 * protocol error. */
static int answer_error(struct chan *ch, int type, const unsigned char *p, uint32_t len)
{
    if (type != AP_ERROR) {
        drop(ch);
        return fail(ch, SBX_E_PROTOCOL, "unexpected answer frame type 0x%02x", type);
    }
    struct ap_in in;
    sbxs_ap_in_begin(&in, p, len);
    uint32_t e = sbxs_ap_get_u32(&in);
    char *stage = sbxs_ap_get_str(&in), *msg = sbxs_ap_get_str(&in);
    int rc;
    if (!sbxs_ap_in_done(&in)) {
        drop(ch);
        rc = fail(ch, SBX_E_PROTOCOL, "a malformed error frame");
    } else {
        int st = status_of(e, stage);
        if (st == SBX_E_PROTOCOL)
            drop(ch);
        rc = sbxp_call_error(ch->cl->cfg.host, ch->call, st, "%s: %s", ch->op, msg);
    }
    free(stage);
    free(msg);
    return rc;
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
    while (!fresh) {
        struct idle_chan i = {.fd = -1};
        pthread_mutex_lock(&cl->mu);
        if (cl->nidle)
            i = cl->idle[--cl->nidle];
        pthread_mutex_unlock(&cl->mu);
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
    int type;
    unsigned char *p;
    uint32_t len;
    rc = recv_frame(ch, &type, &p, &len);
    if (rc != SBX_OK)
        return rc;
    if (type != AP_OK || len != 0)
        rc = answer_error(ch, type, p, len);
    if (rc != SBX_OK)
        drop(ch);
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
        if (rc == SBX_OK || !early)
            return rc;
    }
    return fail(ch, SBX_E_UNAVAILABLE, "the channel was closed twice");
}

/* A request answered by one frame of type want (AP_OK: empty). With
 * payload NULL the channel is given back; else *payload and *len borrow
 * the channel's buffer and the caller gives it back (give_back) when done
 * with them. On an error the channel was given back or dropped. */
static int exchange(struct chan *ch, const unsigned char *frame, size_t n, int64_t extra_ms,
                    int want, unsigned char **payload, uint32_t *len)
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
    const char *cwd = spec->cwd ? spec->cwd : "";
    if (cwd[0] == '.' && cwd[1] == '\0')
        cwd = "";
    size_t cap = AP_HDR_LEN + 4 + (user ? strlen(user) : 0) + 4 + 8 + 8 + 4 + 4 + 4 +
                 strlen(cwd) + 8;
    for (const char *const *a = spec->argv; *a; a++)
        cap += 4 + strlen(*a);
    for (const char *const *e = spec->env; e && *e; e++)
        cap += 4 + strlen(*e);
    if (cap > AP_FRAME_MAX)
        return fail(&ch, SBX_E_INVALID,
                    "the command line and environment are %zu bytes, more than the %u one "
                    "request may hold",
                    cap, AP_FRAME_MAX);
    unsigned char *buf = malloc(cap);
    if (!buf)
        return fail(&ch, SBX_E_NOMEM, "out of memory");
    uint64_t bufsz = spec->buffer_bytes ? spec->buffer_bytes : cl->cfg.default_buffer;
    struct ap_out o;
    sbxs_ap_out_begin(&o, buf, cap, AP_PROC_START);
    sbxs_ap_put_str(&o, user ? user : "");
    sbxs_ap_put_u32(&o, spec->flags & SBX_PROC_PTY ? AP_PS_PTY : 0);
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
    size_t n = sbxs_ap_out_end(&o);
    if (!n) {
        free(buf);
        return fail(&ch, SBX_E_INVALID, "an argument or variable is longer than %u bytes",
                    AP_STR_MAX);
    }
    unsigned char *p;
    uint32_t len;
    int rc = exchange(&ch, buf, n, 0, AP_PROC_STARTED, &p, &len);
    free(buf);
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
        give_back(&ch);
    }
    free(got);
    return rc;
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
        struct ap_out o;
        sbxs_ap_out_begin(&o, buf, AP_HDR_LEN + 4 + idl + 4 + chunk, AP_PROC_WRITE);
        sbxs_ap_put_str(&o, id);
        sbxs_ap_put_u32(&o, last && (flags & SBX_PROC_WRITE_CLOSE) ? AP_PW_CLOSE : 0);
        sbxs_ap_put_bytes(&o, d + off, n);
        size_t fl = sbxs_ap_out_end(&o);
        rc = exchange(&ch, buf, fl, 0, AP_OK, NULL, NULL);
        off += n;
    } while (rc == SBX_OK && off < len);
    free(buf);
    return rc;
}

static int deliver(const struct sbx_sink *s, const unsigned char *p, size_t n)
{
    if (!n || !s || !s->write)
        return 0;
    return s->write(s->ctx, p, n);
}

int sbxp_proc_read(struct sbxp_proc_client *cl, sbx_call *call, const char *id,
                   const struct sbx_proc_read_args *args, struct sbx_proc_read_result *res)
{
    struct chan ch;
    chan_init(&ch, cl, call, "proc_read");
    if (!id_ok(id))
        return fail(&ch, SBX_E_NOT_FOUND, "no such process");
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
        oc != args->out_cursor + olost + on || ec != args->err_cursor + elost + en) {
        drop(&ch);
        return fail(&ch, SBX_E_PROTOCOL, "a malformed read answer");
    }
    rc = deliver(args->out, od, on);
    if (!rc)
        rc = deliver(args->err, ed, en);
    give_back(&ch);
    if (rc)
        return rc;
    res->state = state == AP_PROC_EXITED ? SBX_PROC_EXITED : SBX_PROC_RUNNING;
    res->out_cursor = oc;
    res->err_cursor = ec;
    res->out_lost = olost;
    res->err_lost = elost;
    res->exit_code = state == AP_PROC_EXITED ? (int)(int32_t)code : 0;
    res->term_signal = (fl & AP_PR_SIGNALED) ? (int)sig : 0;
    res->timed_out = (fl & AP_PR_TIMED_OUT) != 0;
    res->eof = (fl & AP_PR_EOF) != 0;
    return SBX_OK;
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
