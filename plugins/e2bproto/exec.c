/*
 * exec.c - commands through envd's process.Process/Start, a server stream
 * of ProcessEvents (start{pid}, data{stdout|stderr}, end, keepalive) in
 * Connect envelopes. Output goes to the sinks as each envelope arrives.
 * The timeout travels as Connect-Timeout-Ms (envd ends the process at that
 * deadline) and is also kept here, so that a deadline envd misses still
 * ends in SendSignal SIGKILL; cancellation sends SIGKILL at once. stdin is
 * fed by a thread through SendInput and CloseStdin once the pid is known.
 * See e2b_core.h.
 */
#include "e2b_core.h"
#include "hex.h"
#include "exec_env.h"
#include "gosignal.h"
#include "helper_exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STDIN_CHUNK 49152
/* How long the end event may take after a kill before exec gives up. */
#define KILL_GRACE_MS 3000
/* How much later than exec's own timer envd's deadline comes. */
#define ENVD_DEADLINE_SLACK_MS 2000

struct run {
    sbx_sandbox *sb;
    sbx_call *call;
    const struct sbx_sink *out, *err;
    struct sbx_exec_result *res;
    const char *token; /* SBX_EXEC_TAG of a user command (kill.c), or NULL */
    unsigned char *dec;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t pid;
    int have_pid;
    int stop;        /* the stream is over: the feeder ends */

    int sink_rc;     /* a sink's stop status */
    int ended;       /* an end event came */
    int exited;
    int exit_code;
    char status[64];
    char end_error[256];
    int stream_end;  /* the end-of-stream envelope came */
    char err_code[64];
    char err_msg[512];

    /* stdin feeding */
    const struct sbx_source *in;
    int stop_pipe[2];
    int feed_failed;  /* the source failed: the host already knows why */
};

static int deliver(struct run *r, const struct sbx_sink *sink, uint64_t *count,
                   const char *b64, size_t inl)
{
    long n = sbxp_b64_decode(b64, inl, r->dec);
    if (n < 0)
        return SBX_E_PROTOCOL;
    *count += (uint64_t)n;
    if (n > 0 && sink && !r->sink_rc) {
        int s = sink->write(sink->ctx, r->dec, (size_t)n);
        if (s != 0)
            r->sink_rc = s;
    }
    return SBX_OK;
}

/* The hot path: a data event exactly as envd (protojson) writes it,
 * {"event":{"data":{"stdout":"<base64>"}}}, decoded straight from the
 * envelope without building a JSON tree (72 MiB of output would otherwise
 * allocate and free ~100 MiB of strings). 1 when it was one, else 0. */
static int fast_data(struct run *r, const char *p, size_t len, int *rc)
{
    static const char pre[] = "{\"event\":{\"data\":{\"";
    static const char post[] = "\"}}}";
    size_t pl = sizeof pre - 1, ql = sizeof post - 1;
    if (len < pl + ql + 10 || memcmp(p, pre, pl) != 0 || memcmp(p + len - ql, post, ql) != 0)
        return 0;
    const char *k = p + pl;
    int out;
    if (!memcmp(k, "stdout\":\"", 9))
        out = 1;
    else if (!memcmp(k, "stderr\":\"", 9))
        out = 0;
    else
        return 0;
    const char *b = k + 9, *e = p + len - ql;
    if (memchr(b, '"', (size_t)(e - b)) || memchr(b, '\\', (size_t)(e - b)))
        return 0;
    *rc = out ? deliver(r, r->out, &r->res->out_bytes, b, (size_t)(e - b))
              : deliver(r, r->err, &r->res->err_bytes, b, (size_t)(e - b));
    return 1;
}

static int on_event(struct run *r, unsigned flags, json_object *msg);

static int on_frame(void *ctx, unsigned flags, const char *payload, size_t len)
{
    struct run *r = ctx;
    int rc;
    if (!(flags & E2B_FLAG_END) && fast_data(r, payload, len, &rc))
        return rc;
    json_object *msg = e2b_json_parse(payload, len);
    if (!msg)
        return SBX_E_PROTOCOL;
    rc = on_event(r, flags, msg);
    json_object_put(msg);
    return rc;
}

static int on_event(struct run *r, unsigned flags, json_object *msg)
{
    if (flags & E2B_FLAG_END) {
        r->stream_end = 1;
        json_object *e = sbxp_json_obj(msg, "error");
        if (e) {
            snprintf(r->err_code, sizeof r->err_code, "%s",
                     sbxp_json_str(e, "code") ? sbxp_json_str(e, "code") : "unknown");
            snprintf(r->err_msg, sizeof r->err_msg, "%s",
                     sbxp_json_str(e, "message") ? sbxp_json_str(e, "message") : "");
        }
        return SBX_OK;
    }
    json_object *ev = sbxp_json_obj(msg, "event");
    if (!ev)
        return SBX_OK;
    json_object *o;
    /* A command still running is use: the sandbox must outlive it. Every
     * event counts, not only keepalives: envd sends none while output
     * flows, and a long flood would otherwise outlive the lifetime. The
     * extension runs on the exec's call, so a cancel interrupts it too. */
    e2b_keep_alive(r->sb, r->call);
    if (sbxp_json_obj(ev, "keepalive"))
        return SBX_OK;
    if ((o = sbxp_json_obj(ev, "start"))) {
        pthread_mutex_lock(&r->mu);
        r->pid = (uint32_t)sbxp_json_int(o, "pid", 0);
        r->have_pid = 1;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    } else if ((o = sbxp_json_obj(ev, "data"))) {
        const char *s;
        if ((s = sbxp_json_str(o, "stdout")))
            return deliver(r, r->out, &r->res->out_bytes, s, strlen(s));
        if ((s = sbxp_json_str(o, "stderr")))
            return deliver(r, r->err, &r->res->err_bytes, s, strlen(s));
    } else if ((o = sbxp_json_obj(ev, "end"))) {
        r->ended = 1;
        /* proto3 JSON leaves out zero values: exitCode 0, exited false. */
        r->exit_code = (int)sbxp_json_int(o, "exitCode", 0);
        r->exited = sbxp_json_bool(o, "exited", 0);
        snprintf(r->status, sizeof r->status, "%s",
                 sbxp_json_str(o, "status") ? sbxp_json_str(o, "status") : "");
        snprintf(r->end_error, sizeof r->end_error, "%s",
                 sbxp_json_str(o, "error") ? sbxp_json_str(o, "error") : "");
    }
    return SBX_OK;
}

/* SendSignal SIGKILL to the process. call NULL: even after cancellation. */
static void kill_process(struct run *r, sbx_call *call)
{
    pthread_mutex_lock(&r->mu);
    int have = r->have_pid;
    uint32_t pid = r->pid;
    pthread_mutex_unlock(&r->mu);
    if (!have)
        return;
    /* The tree first, while the command lives (kill.c); then SendSignal,
     * which reaches the command even where no shell could run. */
    e2b_kill_tree(r->sb, pid, r->token);
    json_object *body = json_object_new_object();
    json_object *sel = json_object_new_object();
    json_object_object_add(sel, "pid", json_object_new_int64(pid));
    json_object_object_add(body, "process", sel);
    json_object_object_add(body, "signal", json_object_new_string("SIGNAL_SIGKILL"));
    sbxp_http_error err;
    int rc = e2b_envd_unary(r->sb, call, "process.Process/SendSignal", body, NULL, 1, &err);
    json_object_put(body);
    if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
        r->sb->st->host->log(r->sb->st->host, SBX_LOG_WARN,
                             "%s: killing process %u in %s: %s", r->sb->st->cfg.provider,
                             pid, r->sb->id, err.message);
}

/* process.Process/SendInput or CloseStdin (data NULL). */
static int send_input(struct run *r, uint32_t pid, const void *data, size_t len)
{
    json_object *body = json_object_new_object();
    json_object *sel = json_object_new_object();
    json_object_object_add(sel, "pid", json_object_new_int64(pid));
    json_object_object_add(body, "process", sel);
    char *b64 = NULL;
    if (data) {
        b64 = malloc(sbxp_b64_len(len));
        if (!b64) {
            json_object_put(body);
            return SBX_E_NOMEM;
        }
        sbxp_b64_encode(data, len, b64);
        json_object *in = json_object_new_object();
        json_object_object_add(in, "stdin", json_object_new_string(b64));
        json_object_object_add(body, "input", in);
    }
    sbxp_http_error err;
    int rc = e2b_envd_unary(r->sb, NULL,
                            data ? "process.Process/SendInput" : "process.Process/CloseStdin",
                            body, NULL, 0, &err);
    json_object_put(body);
    free(b64);
    return rc;
}

/* Wait until the source has something to say, or the run is over. 1 to
 * read, 0 to stop. */
static int wait_readable(struct run *r)
{
    int fd = r->in->size >= SBX_SOURCE_SIZE_1_0 && r->in->poll_fd ? r->in->poll_fd(r->in->ctx)
                                                                    : -1;
    if (fd < 0)
        return 1; /* not pollable: read blocks, exec waits for it */
    struct pollfd p[2] = {{fd, POLLIN, 0}, {r->stop_pipe[0], POLLIN, 0}};
    for (;;) {
        int n = poll(p, 2, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || p[1].revents)
            return 0;
        if (p[0].revents)
            return 1;
    }
}

static void *feeder(void *arg)
{
    struct run *r = arg;
    pthread_mutex_lock(&r->mu);
    while (!r->have_pid && !r->stop)
        pthread_cond_wait(&r->cv, &r->mu);
    uint32_t pid = r->pid;
    int go = r->have_pid && !r->stop;
    pthread_mutex_unlock(&r->mu);
    if (!go)
        return NULL;
    unsigned char *buf = malloc(STDIN_CHUNK);
    if (!buf)
        return NULL;
    for (;;) {
        if (!wait_readable(r))
            break;
        long n = r->in->read(r->in->ctx, buf, STDIN_CHUNK);
        if (n < 0) {
            /* Never let a partial input pass for a whole one. */
            r->feed_failed = 1;
            kill_process(r, NULL);
            break;
        }
        if (n == 0) {
            send_input(r, pid, NULL, 0);
            break;
        }
        if (send_input(r, pid, buf, (size_t)n) != SBX_OK)
            break; /* the process is gone or stopped reading */
    }
    free(buf);
    return NULL;
}

/* The Start request body: cmd and args without a shell, cwd, envs (and
 * SBX_EXEC_TAG=token when token is set). */
static json_object *start_body(const struct sbx_exec_args *args, const char *cwd, int stdin_on,
                               const char *token)
{
    json_object *body = json_object_new_object();
    json_object *proc = json_object_new_object();
    json_object *av = json_object_new_array();
    if (!body || !proc || !av) {
        json_object_put(body);
        json_object_put(proc);
        json_object_put(av);
        return NULL;
    }
    json_object_object_add(proc, "cmd", json_object_new_string(args->argv[0]));
    for (size_t i = 1; args->argv[i]; i++)
        json_object_array_add(av, json_object_new_string(args->argv[i]));
    json_object_object_add(proc, "args", av);
    if (args->env || token) {
        json_object *envs = json_object_new_object();
        if (token)
            json_object_object_add(envs, "SBX_EXEC_TAG", json_object_new_string(token));
        sbxp_exec_env_json(envs, args->env);
        json_object_object_add(proc, "envs", envs);
    }
    json_object_object_add(proc, "cwd", json_object_new_string(cwd));
    json_object_object_add(body, "process", proc);
    json_object_object_add(body, "stdin", json_object_new_boolean(stdin_on));
    return body;
}

/* Map a start failure of envd (end-of-stream error without an end event). */
static int start_failure(struct run *r)
{
    struct e2b_state *st = r->sb->st;
    const char *m = r->err_msg;
    if (strstr(m, "executable file not found") || strstr(m, "no such file or directory"))
        return e2b_error(st, r->call, SBX_E_NO_COMMAND, "%s: exec: %s", st->cfg.provider, m);
    if (strstr(m, "permission denied") || strstr(m, "exec format error"))
        return e2b_error(st, r->call, SBX_E_NOT_EXEC, "%s: exec: %s", st->cfg.provider, m);
    return e2b_error(st, r->call, e2b_code_status(r->err_code), "%s: exec: envd: %s: %s",
                     st->cfg.provider, r->err_code, m);
}

/* The body sink of the Start stream: bytes into the envelope decoder. */
struct frame_sink {
    struct run *r;
    struct e2b_frames fr;
    int status; /* the decoder's failure, SBX_E_PROTOCOL etc. */
};

static int frame_write(void *ctx, const void *buf, size_t len)
{
    struct frame_sink *fs = ctx;
    int rc = e2b_frames_feed(&fs->fr, buf, len, on_frame, fs->r);
    if (rc == SBX_OK && fs->r->sink_rc)
        rc = fs->r->sink_rc; /* a caller's sink stopped: stop the transfer */
    if (rc != SBX_OK && !fs->r->sink_rc)
        fs->status = rc;
    return rc;
}

/*
 * Read the stream to its end, pushing it through the decoder as it arrives
 * (push mode: curl hands each piece straight over, nothing is parked).
 * Handles timeout (kill, then drain), cancellation (kill, return) and a
 * sink's stop (kill, return its status).
 */
static int pump(struct run *r, sbxp_http_xfer *x, int64_t timeout_ms, int *timed_out)
{
    struct e2b_state *st = r->sb->st;
    struct frame_sink fs = {r, {{0}, 0, NULL, 0, 0, 0, 0}, 0};
    e2b_frames_init(&fs.fr);
    struct sbx_sink sink = SBX_SINK_INIT(&fs, frame_write);
    int rc = SBX_OK, killed = 0;
    if (timeout_ms > 0)
        sbxp_http_xfer_set_timeout(x, timeout_ms);
    for (;;) {
        sbxp_http_error err;
        memset(&err, 0, sizeof err);
        int s = sbxp_http_xfer_pump(x, &sink, &err);
        if (s == SBX_OK) {
            if (e2b_frames_partial(&fs.fr))
                rc = e2b_error(st, r->call, SBX_E_PROTOCOL,
                               "%s: exec: the output stream of %s ended inside an envelope",
                               st->cfg.provider, r->sb->id);
            else if (!fs.fr.ended && !killed)
                rc = e2b_error(st, r->call, SBX_E_PROTOCOL,
                               "%s: exec: the output stream of %s ended without its "
                               "end-of-stream envelope",
                               st->cfg.provider, r->sb->id);
            break;
        }
        if (err.from_callback) {
            kill_process(r, NULL);
            if (r->sink_rc)
                rc = r->sink_rc; /* the sink has set the call's error */
            else
                rc = e2b_error(st, r->call, fs.status ? fs.status : s,
                               "%s: exec: malformed output stream from %s", st->cfg.provider,
                               r->sb->id);
            break;
        }
        if (s == SBX_E_CANCELLED) {
            kill_process(r, NULL);
            rc = e2b_error(st, r->call, SBX_E_CANCELLED, "%s: exec cancelled", st->cfg.provider);
            break;
        }
        if (s == SBX_E_TIMEOUT && !killed && timeout_ms > 0) {
            *timed_out = 1;
            killed = 1;
            kill_process(r, r->call);
            sbxp_http_xfer_set_timeout(x, KILL_GRACE_MS);
            continue;
        }
        if (s == SBX_E_TIMEOUT && killed) {
            st->host->log(st->host, SBX_LOG_WARN,
                          "%s: exec in %s: no end event %d s after the kill; giving up",
                          st->cfg.provider, r->sb->id, KILL_GRACE_MS / 1000);
            break;
        }
        if (s == SBX_E_PROTOCOL && killed)
            break; /* envd dropped the stream after the kill */
        rc = e2b_envd_report(r->sb, r->call, &err, "exec: reading the output stream");
        if (!killed)
            kill_process(r, NULL);
        break;
    }
    e2b_frames_free(&fs.fr);
    return rc;
}

/* One command: everything exec and the helper share. */
static int run_command(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                       const char *cwd, const char *user, const char *token,
                       struct sbx_exec_result *res)
{
    struct e2b_state *st = sb->st;
    struct run r;
    memset(&r, 0, sizeof r);
    r.sb = sb;
    r.call = call;
    r.out = args->out;
    r.err = args->err;
    r.res = res;
    r.token = token;
    r.in = args->in;
    r.stop_pipe[0] = r.stop_pipe[1] = -1;
    r.dec = malloc(E2B_FRAME_MAX);
    json_object *body = start_body(args, cwd, args->in != NULL, token);
    size_t blen = 0;
    unsigned char *env = body ? e2b_envelope(body, 0, &blen) : NULL;
    json_object_put(body);
    if (!r.dec || !env) {
        free(r.dec);
        free(env);
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);

    char deadline[64] = "";
    struct e2b_headers hs = {{NULL}, 0};
    e2b_headers_add(&hs, "Connect-Protocol-Version: 1");
    /* Keepalives come often enough to extend the TTL in time during a long
     * command (e2b_keep_alive extends once half of it has passed). */
    char ka[64];
    int64_t ka_s = st->cfg.lifetime_s / 4;
    snprintf(ka, sizeof ka, "Keepalive-Ping-Interval: %lld",
             (long long)(ka_s < 1 ? 1 : ka_s > 50 ? 50 : ka_s));
    e2b_headers_add(&hs, ka);
    if (args->timeout_ms > 0) {
        /* envd's deadline is the backstop: exec's own timer fires first,
         * while the command still lives and its tree can be found. */
        snprintf(deadline, sizeof deadline, "Connect-Timeout-Ms: %lld",
                 (long long)args->timeout_ms + ENVD_DEADLINE_SLACK_MS);
        e2b_headers_add(&hs, deadline);
    }
    /* Another user than the configured one: its own basic auth line. */
    char auth[200] = "";
    if (user) {
        char up[96], b64[160];
        snprintf(up, sizeof up, "%s:", user);
        sbxp_b64_encode(up, strlen(up), b64);
        snprintf(auth, sizeof auth, "Authorization: Basic %s", b64);
    }
    struct e2b_headers all = {{NULL}, 0};
    e2b_envd_headers(sb, &all);
    for (size_t i = 0; i < all.n; i++)
        e2b_headers_add(&hs, user && all.v[i] == sb->auth ? auth : all.v[i]);
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    struct sbxp_http_request req;
    memset(&req, 0, sizeof req);
    req.method = "POST";
    req.path = "/process.Process/Start";
    req.headers = hs.v;
    req.content_type = "application/connect+json";
    req.body = env;
    req.body_len = blen;
    req.connect_timeout_ms = st->cfg.connect_timeout_ms;
    req.cancel = &c.c;

    sbxp_http_xfer *x = NULL;
    sbxp_http_error err;
    memset(&err, 0, sizeof err);
    int rc = e2b_wake(sb, call, &err);
    if (rc == SBX_OK)
        rc = sbxp_http_start(sb->envd, &req, &x, &err);
    /* The proxy answered (nothing started): run it once the sandbox is
     * resumed. */
    if (rc != SBX_OK && e2b_envd_resume(sb, call, &err) == SBX_OK)
        rc = sbxp_http_start(sb->envd, &req, &x, &err);
    pthread_t th;
    int feeding = 0;
    if (rc != SBX_OK) {
        rc = e2b_envd_report(sb, call, &err, "exec %s", args->argv[0]);
        goto out;
    }
    if (args->in) {
        if (pipe2(r.stop_pipe, O_CLOEXEC) != 0) {
            rc = e2b_error(st, call, SBX_E_IO, "%s: exec: pipe: %s", st->cfg.provider,
                           strerror(errno));
            goto out;
        }
        if (pthread_create(&th, NULL, feeder, &r) != 0) {
            rc = e2b_error(st, call, SBX_E_INTERNAL, "%s: exec: cannot start a thread",
                           st->cfg.provider);
            goto out;
        }
        feeding = 1;
    }
    int timed_out = 0;
    rc = pump(&r, x, args->timeout_ms, &timed_out);
    if (feeding) {
        pthread_mutex_lock(&r.mu);
        r.stop = 1;
        pthread_cond_broadcast(&r.cv);
        pthread_mutex_unlock(&r.mu);
        if (write(r.stop_pipe[1], "x", 1) < 0) {
            /* the feeder also stops on its own when its calls fail */
        }
        pthread_join(th, NULL);
        feeding = 0;
    }
    if (rc != SBX_OK)
        goto out;
    if (r.feed_failed) {
        rc = SBX_E_IO; /* the source has set the call's error */
        goto out;
    }
    if (!strcmp(r.err_code, "deadline_exceeded") && args->timeout_ms > 0)
        timed_out = 1;
    res->timed_out = timed_out;
    if (r.ended) {
        if (r.exited) {
            res->exit_code = r.exit_code;
            res->term_signal = 0;
        } else {
            res->exit_code = -1;
            res->term_signal = sbxp_go_signal_number(r.status);
            if (!res->term_signal)
                res->term_signal = 9;
        }
    } else if (timed_out) {
        res->exit_code = -1;
        res->term_signal = 9;
    } else if (r.err_code[0]) {
        rc = start_failure(&r);
    } else {
        rc = e2b_error(st, call, SBX_E_PROTOCOL, "%s: exec: the stream ended without an end event",
                       st->cfg.provider);
    }
    /* What the command left behind dies before exec returns (kill.c). */
    if (token && r.ended && r.have_pid)
        e2b_kill_tree(sb, r.pid, token);
out:
    if (feeding) {
        pthread_mutex_lock(&r.mu);
        r.stop = 1;
        pthread_cond_broadcast(&r.cv);
        pthread_mutex_unlock(&r.mu);
        pthread_join(th, NULL);
    }
    sbxp_http_xfer_free(x);
    if (r.stop_pipe[0] >= 0) {
        close(r.stop_pipe[0]);
        close(r.stop_pipe[1]);
    }
    pthread_mutex_destroy(&r.mu);
    pthread_cond_destroy(&r.cv);
    free(r.dec);
    free(env);
    return rc;
}

int e2b_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
             struct sbx_exec_result *res)
{
    struct e2b_state *st = sb->st;
    if (!args->argv || !args->argv[0] || !args->argv[0][0])
        return e2b_error(st, call, SBX_E_INVALID, "%s: exec: empty argv", st->cfg.provider);
    char *cwd = NULL;
    if (args->cwd && *args->cwd) {
        int type;
        int rc = e2b_resolve(sb, call, "exec cwd", args->cwd, 1, &cwd, &type);
        if (rc != SBX_OK)
            return rc;
        if (type != E2B_FT_DIR) {
            free(cwd);
            return e2b_error(st, call, SBX_E_INVALID, "%s: exec: cwd %s is not a directory",
                             st->cfg.provider, args->cwd);
        }
    }
    e2b_keep_alive(sb, call);
    uint32_t size = res->size;
    memset(res, 0, sizeof *res);
    res->size = size;
    char token[33];
    sbxs_random_hex(token, 16);
    int rc = run_command(sb, call, args, cwd ? cwd : st->cfg.workspace, NULL, token, res);
    free(cwd);
    return rc;
}

int e2b_exec_helper_as(sbx_sandbox *sb, sbx_call *call, const char *user, const char *cwd,
                       const char *const *argv, const struct sbx_sink *out,
                       int64_t timeout_ms, int *exit_code, char *msg, size_t cap)
{
    struct sbxp_helper_exec h;
    sbxp_helper_exec_init(&h, argv, out, timeout_ms, msg, cap);
    int rc = run_command(sb, call, &h.args, cwd ? cwd : sb->st->cfg.workspace, user, NULL,
                         &h.res);
    *exit_code = rc == SBX_OK ? sbxp_helper_exec_code(&h) : h.res.exit_code;
    return rc;
}

int e2b_exec_helper(sbx_sandbox *sb, sbx_call *call, const char *cwd,
                    const char *const *argv, int *exit_code, char *msg, size_t cap)
{
    return e2b_exec_helper_as(sb, call, NULL, cwd, argv, NULL, 30000, exit_code, msg, cap);
}

int e2b_exec_run(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                 const char *cwd, struct sbx_exec_result *res)
{
    return run_command(sb, call, args, cwd ? cwd : sb->st->cfg.workspace, NULL, NULL, res);
}
