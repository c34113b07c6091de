/*
 * exec.c - commands through execd's POST /command, a stream of server-sent
 * events: init (the command id), stdout/stderr (text), execution_complete
 * (exit 0) or error (evalue = the exit code), ping. Both framings the SDK
 * accepts are read: a bare JSON object per event, or "data:" lines.
 *
 * The stream itself is parsed by events.c.
 *
 * execd runs `command` with a shell; the argv is quoted into it and the
 * program replaces the shell (exec), so that a signal that kills it is
 * the command's own: execd then reports exit code -1 and the status call
 * names the signal. Cancellation and the timeout end the command through
 * DELETE /command?id= (execd kills its process group). What the command
 * leaves behind, in its group or out of it (setsid), execd does not end:
 * each command carries SBX_EXEC_TAG=<token> and exec kills what has it
 * once the command has ended (exec_tree.h).
 *
 * stdin: execd has none. When a source is given, the command opens a FIFO
 * in the sandbox (announced by a marker on stdout, which is taken out of
 * the output) and a thread streams the source into it with the multipart
 * upload; the upload stops when the command has ended. See osb.h.
 */
#include "osb.h"
#include "exec_env.h"
#include "exec_tree.h"
#include "gosignal.h"
#include "helper_exec.h"
#include "hex.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#define KILL_GRACE_MS 3000
#define READY_MARK "\036sbx:stdin-ready\036"

char *osb_quote(const char *s)
{
    size_t n = 3;
    for (const char *p = s; *p; p++)
        n += *p == '\'' ? 4 : 1;
    char *q = malloc(n);
    if (!q)
        return NULL;
    char *o = q;
    *o++ = '\'';
    for (const char *p = s; *p; p++) {
        if (*p == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *p;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

struct run {
    sbx_sandbox *sb;
    sbx_call *call;
    const struct sbx_sink *out, *err;
    struct sbx_exec_result *res;
    struct osb_events evs;
    int sink_rc;
    int proto_rc;
    /* outcome */
    char cid[128];
    int done;         /* execution_complete or error came */
    int exit_code;
    char evalue[256];
    /* stdin */
    int want_ready;
    size_t mark_got;  /* bytes of READY_MARK matched at the start of stdout */
    int ready;
    const struct sbx_source *in;
    char fifo[128];
    pthread_t feeder;
    int feeding;
    int stop_pipe[2];
    int feed_failed;
    atomic_int ending; /* the run is over: the upload's end is expected */
    /* osb_background: the shell text as is, with background: true */
    const char *raw;
};

static int to_sink(struct run *r, const struct sbx_sink *sink, uint64_t *count, const char *s,
                   size_t n)
{
    *count += n;
    if (n && sink && !r->sink_rc) {
        int rc = sink->write(sink->ctx, s, n);
        if (rc)
            r->sink_rc = rc;
    }
    return r->sink_rc;
}

static void start_feeder(struct run *r);

/* stdout, minus the stdin marker the wrapper prints before the program runs. */
static int on_stdout(struct run *r, const char *s, size_t n)
{
    static const char mark[] = READY_MARK;
    const size_t ml = sizeof mark - 1;
    while (r->want_ready && !r->ready && n) {
        if (*s != mark[r->mark_got]) {
            /* not the marker after all (cannot happen with our wrapper) */
            r->want_ready = 0;
            to_sink(r, r->out, &r->res->out_bytes, mark, r->mark_got);
            break;
        }
        r->mark_got++;
        s++;
        n--;
        if (r->mark_got == ml) {
            r->ready = 1;
            start_feeder(r);
        }
    }
    return to_sink(r, r->out, &r->res->out_bytes, s, n);
}

/* Output text of an event (events.c). */
static int on_output(void *ctx, int is_err, const char *text, size_t len)
{
    struct run *r = ctx;
    return is_err ? to_sink(r, r->err, &r->res->err_bytes, text, len) : on_stdout(r, text, len);
}

/* Any other event: init (the command id), execution_complete, error. */
static int on_event(void *ctx, json_object *ev)
{
    struct run *r = ctx;
    const char *type = sbxp_json_str(ev, "type");
    if (!strcmp(type, "init")) {
        const char *text = sbxp_json_str(ev, "text");
        snprintf(r->cid, sizeof r->cid, "%s", text ? text : "");
    } else if (!strcmp(type, "execution_complete")) {
        r->done = 1;
        r->exit_code = 0;
    } else if (!strcmp(type, "error")) {
        const char *v = sbxp_json_str(sbxp_json_obj(ev, "error"), "evalue");
        r->done = 1;
        snprintf(r->evalue, sizeof r->evalue, "%s", v ? v : "");
        char *end;
        long code = strtol(r->evalue, &end, 10);
        r->exit_code = end != r->evalue && !*end ? (int)code : -2;
    }
    return SBX_OK; /* ping, status, ...: nothing to do */
}

static int stream_write(void *ctx, const void *buf, size_t len)
{
    struct run *r = ctx;
    int rc = osb_events_feed(&r->evs, buf, len);
    if (rc != SBX_OK && !r->sink_rc)
        r->proto_rc = rc;
    return rc;
}

/* DELETE /command?id=<cid>. call NULL: also after a cancellation. */
static void interrupt(struct run *r)
{
    if (!r->cid[0])
        return;
    char *e = sbxp_http_escape(r->cid);
    char path[256];
    snprintf(path, sizeof path, "/command?id=%s", e ? e : "");
    free(e);
    sbxp_http_error err;
    int rc = osb_service_json(r->sb, NULL, &r->sb->execd, "DELETE", path, NULL, NULL, 1, &err);
    if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
        r->sb->st->host->log(r->sb->st->host, SBX_LOG_WARN,
                             "opensandbox: interrupting command %s in %s: %s", r->cid, r->sb->id,
                             err.message);
}

/* The upload's body: the caller's source, given up once the run is over. */
static long feed_read(void *ctx, void *buf, size_t cap)
{
    struct run *r = ctx;
    int fd = r->in->size >= SBX_SOURCE_SIZE_1_0 && r->in->poll_fd ? r->in->poll_fd(r->in->ctx) : -1;
    if (fd >= 0) {
        struct pollfd p[2] = {{fd, POLLIN, 0}, {r->stop_pipe[0], POLLIN, 0}};
        for (;;) {
            int n = poll(p, 2, -1);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0 || p[1].revents)
                return -1; /* the command ended: stop the upload */
            if (p[0].revents)
                break;
        }
    }
    long n = r->in->read(r->in->ctx, buf, cap);
    if (n < 0)
        r->feed_failed = 1;
    return n;
}

static void *feeder(void *arg)
{
    struct run *r = arg;
    struct sbx_source src = SBX_SOURCE_INIT(r, feed_read);
    sbxp_http_error err;
    /* mode 0: none sent, the FIFO keeps the 0600 mkfifo gave it. */
    int rc = osb_upload(r->sb, NULL, r->fifo, 0, &src, &err);
    if (rc != SBX_OK && r->feed_failed) {
        interrupt(r); /* never let a partial input pass for a whole one */
    } else if (rc != SBX_OK && !atomic_load(&r->ending)) {
        /* The command may wait on the FIFO for a writer that will not come
         * (or it just stopped reading and ends anyway: then this is moot). */
        r->sb->st->host->log(r->sb->st->host, SBX_LOG_INFO,
                             "opensandbox: exec in %s: streaming stdin failed: %s", r->sb->id,
                             err.message);
        interrupt(r);
    }
    return NULL;
}

static void start_feeder(struct run *r)
{
    if (pthread_create(&r->feeder, NULL, feeder, r) == 0)
        r->feeding = 1;
    else
        interrupt(r);
}

/* The shell text execd runs: cd is execd's (cwd), the program replaces
 * the shell. With stdin, the FIFO is opened first. */
static char *script(const struct sbx_exec_args *args, const char *fifo)
{
    size_t len = 256 + (fifo ? 2 * strlen(fifo) + 128 : 0);
    for (size_t i = 0; args->argv[i]; i++)
        len += strlen(args->argv[i]) * 4 + 3;
    char *s = malloc(len);
    if (!s)
        return NULL;
    size_t o = 0;
    if (fifo)
        o += (size_t)snprintf(s + o, len - o,
                              "f='%s'; mkfifo -m 600 \"$f\" || exit 125; printf '%s'; "
                              "exec 3<\"$f\"; rm -f \"$f\"; ",
                              fifo, READY_MARK);
    o += (size_t)snprintf(s + o, len - o, "exec");
    for (size_t i = 0; args->argv[i]; i++) {
        char *q = osb_quote(args->argv[i]);
        if (!q) {
            free(s);
            return NULL;
        }
        o += (size_t)snprintf(s + o, len - o, " %s", q);
        free(q);
    }
    if (fifo)
        o += (size_t)snprintf(s + o, len - o, " <&3 3<&-");
    else
        o += (size_t)snprintf(s + o, len - o, " </dev/null");
    return s;
}

static json_object *command_body(const struct sbx_exec_args *args, const char *cmd,
                                  const char *cwd, int64_t timeout_ms, const char *token,
                                  int background)
{
    json_object *body = json_object_new_object();
    if (!body)
        return NULL;
    json_object_object_add(body, "command", json_object_new_string(cmd));
    json_object_object_add(body, "cwd", json_object_new_string(cwd));
    json_object_object_add(body, "background", json_object_new_boolean(background));
    if (timeout_ms > 0)
        json_object_object_add(body, "timeout", json_object_new_int64(timeout_ms));
    json_object *envs = json_object_new_object();
    if (token)
        json_object_object_add(envs, SBXP_EXEC_TAG_VAR, json_object_new_string(token));
    if (args->env || token) {
        sbxp_exec_env_json(envs, args->env);
        json_object_object_add(body, "envs", envs);
    } else {
        json_object_put(envs);
    }
    return body;
}

/* The signal of a command execd saw killed: its status call names it. */
static int signal_of(struct run *r)
{
    char path[256];
    char *e = sbxp_http_escape(r->cid);
    snprintf(path, sizeof path, "/command/status/%s", e ? e : "");
    free(e);
    json_object *doc = NULL;
    sbxp_http_error err;
    int sig = 0;
    if (osb_service_json(r->sb, NULL, &r->sb->execd, "GET", path, NULL, &doc, 1, &err) == SBX_OK)
        sig = sbxp_go_signal_number(sbxp_json_str(doc, "error"));
    json_object_put(doc);
    return sig ? sig : 9;
}

static int run_command(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
                       const char *cwd, const char *token, struct sbx_exec_result *res,
                       const char *raw, char *cid, size_t cid_cap)
{
    struct osb_state *st = sb->st;
    struct run r;
    memset(&r, 0, sizeof r);
    atomic_init(&r.ending, 0);
    osb_events_init(&r.evs, on_output, on_event, &r);
    r.sb = sb;
    r.call = call;
    r.out = args->out;
    r.err = args->err;
    r.res = res;
    r.in = args->in;
    r.stop_pipe[0] = r.stop_pipe[1] = -1;
    r.raw = raw;
    if (args->in && !raw) {
        unsigned char rnd[8];
        if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            return osb_error(st, call, SBX_E_IO, "opensandbox: exec: no randomness");
        snprintf(r.fifo, sizeof r.fifo, "/tmp/.sbx-stdin-%02x%02x%02x%02x%02x%02x%02x%02x",
                 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        if (pipe2(r.stop_pipe, O_CLOEXEC) != 0)
            return osb_error(st, call, SBX_E_IO, "opensandbox: exec: pipe: %s", strerror(errno));
        r.want_ready = 1;
    }
    char *cmd = raw ? strdup(raw) : script(args, args->in ? r.fifo : NULL);
    /* execd's own deadline is a backstop: ours fires first and interrupts.
     * A background command's deadline is execd's only. */
    json_object *body = cmd ? command_body(args, cmd, cwd,
                                           raw ? args->timeout_ms
                                           : args->timeout_ms > 0 ? args->timeout_ms + 5000 : 0,
                                           token, raw != NULL)
                            : NULL;
    free(cmd);
    if (!body) {
        if (r.stop_pipe[0] >= 0) {
            close(r.stop_pipe[0]);
            close(r.stop_pipe[1]);
        }
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    const char *json = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    const char *hdrs[16];
    static const char *const accept[] = {"Accept: text/event-stream", NULL};
    struct sbxp_http_request req;
    osb_service_request(sb, &sb->execd, &req, hdrs, 16, accept, &c);
    req.method = "POST";
    req.path = "/command";
    req.content_type = "application/json";
    req.body = json;
    req.body_len = strlen(json);
    sbxp_http_xfer *x = NULL;
    sbxp_http_error err;
    memset(&err, 0, sizeof err);
    int killed = 0, timed_out = 0;
    int rc = sbxp_http_start(sb->execd.http, &req, &x, &err);
    json_object_put(body);
    if (rc != SBX_OK) {
        rc = osb_service_report(sb, call, &err, "exec %s", args->argv[0]);
        goto out;
    }
    struct sbx_sink sink = SBX_SINK_INIT(&r, stream_write);
    if (raw)
        sbxp_http_xfer_set_timeout(x, st->cfg.request_timeout_ms);
    else if (args->timeout_ms > 0)
        sbxp_http_xfer_set_timeout(x, args->timeout_ms);
    for (;;) {
        memset(&err, 0, sizeof err);
        int s = sbxp_http_xfer_pump(x, &sink, &err);
        if (s == SBX_OK) {
            s = osb_events_end(&r.evs);
            if (s != SBX_OK)
                rc = osb_error(st, call, SBX_E_PROTOCOL, "opensandbox: exec: malformed event");
            break;
        }
        if (err.from_callback) {
            interrupt(&r);
            rc = r.sink_rc ? r.sink_rc
                           : osb_error(st, call, r.proto_rc ? r.proto_rc : s,
                                       "opensandbox: exec: malformed event stream from %s",
                                       sb->id);
            break;
        }
        if (s == SBX_E_CANCELLED) {
            interrupt(&r);
            rc = osb_error(st, call, SBX_E_CANCELLED, "opensandbox: exec cancelled");
            break;
        }
        if (s == SBX_E_TIMEOUT && !killed && args->timeout_ms > 0 && !raw) {
            timed_out = killed = 1;
            interrupt(&r);
            sbxp_http_xfer_set_timeout(x, KILL_GRACE_MS);
            continue;
        }
        if (killed)
            break; /* execd ended or dropped the stream after the kill */
        rc = osb_service_report(sb, call, &err, "exec: reading the event stream");
        interrupt(&r);
        break;
    }
out:
    atomic_store(&r.ending, 1);
    if (r.stop_pipe[1] >= 0 && write(r.stop_pipe[1], "x", 1) < 0) {
        /* the feeder also stops when its upload fails */
    }
    if (r.feeding)
        pthread_join(r.feeder, NULL);
    if (r.want_ready && !r.ready && r.fifo[0])
        osb_remove(sb, NULL, r.fifo);
    sbxp_http_xfer_free(x);
    if (r.stop_pipe[0] >= 0) {
        close(r.stop_pipe[0]);
        close(r.stop_pipe[1]);
    }
    if (rc == SBX_OK && r.feed_failed)
        rc = SBX_E_IO; /* the source has set the call's error */
    if (rc == SBX_OK && raw) {
        /* A background command: init named it, execution_complete said it
         * started; error means it could not start. */
        if (!r.cid[0] || !r.done || r.exit_code != 0)
            rc = osb_error(st, call, SBX_E_PROTOCOL,
                           "opensandbox: starting a background command in %s: %s", sb->id,
                           r.evalue[0] ? r.evalue : "execd answered without init and "
                                                    "execution_complete");
        else
            snprintf(cid, cid_cap, "%s", r.cid);
    } else if (rc == SBX_OK) {
        res->timed_out = timed_out;
        if (timed_out) {
            res->exit_code = -1;
            res->term_signal = 9;
        } else if (!r.done) {
            rc = osb_error(st, call, SBX_E_PROTOCOL,
                           "opensandbox: exec: the event stream of %s ended without "
                           "execution_complete or error", sb->id);
        } else if (r.exit_code == -1) {
            res->exit_code = -1;
            res->term_signal = signal_of(&r);
        } else if (r.exit_code < 0) {
            rc = osb_error(st, call, SBX_E_PROTOCOL, "opensandbox: exec: execd failed: %s",
                           r.evalue);
        } else {
            res->exit_code = r.exit_code;
        }
    }
    osb_events_free(&r.evs);
    return rc;
}

int osb_exec(sbx_sandbox *sb, sbx_call *call, const struct sbx_exec_args *args,
             struct sbx_exec_result *res)
{
    struct osb_state *st = sb->st;
    if (!args->argv || !args->argv[0] || !args->argv[0][0])
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: exec: empty argv");
    char *cwd = NULL;
    if (args->cwd && *args->cwd) {
        int type;
        int rc = osb_resolve(sb, call, "exec cwd", args->cwd, 1, &cwd, &type);
        if (rc != SBX_OK)
            return rc;
        if (type != OSB_FT_DIR) {
            free(cwd);
            return osb_error(st, call, SBX_E_INVALID, "opensandbox: exec: cwd %s is not a directory",
                             args->cwd);
        }
    }
    osb_keep_alive(sb, call);
    uint32_t size = res->size;
    memset(res, 0, sizeof *res);
    res->size = size;
    char token[33];
    sbxs_random_hex(token, 16);
    int rc = run_command(sb, call, args, cwd ? cwd : st->cfg.workspace, token, res, NULL, NULL,
                         0);
    free(cwd);
    /* What the command left behind dies before exec returns, also after a
     * timeout or cancellation (execd killed the group only). */
    const char *kill_argv[] = {"sh", "-c", sbxp_exec_tree_kill_sh, "sh", token, NULL};
    int code = 0;
    if (osb_helper(sb, NULL, kill_argv, NULL, 10000, &code, NULL, 0) != SBX_OK || code != 0)
        st->host->log(st->host, SBX_LOG_WARN,
                      "opensandbox: killing what a command left in %s failed", sb->id);
    return rc;
}

int osb_sh(sbx_sandbox *sb, sbx_call *call, const char *text, const struct sbx_sink *out,
           int64_t timeout_ms, int *code, char *msg, size_t cap)
{
    const char *argv[] = {"sh", "-c", text, NULL};
    return osb_helper(sb, call, argv, out, timeout_ms, code, msg, cap);
}

int osb_helper(sbx_sandbox *sb, sbx_call *call, const char *const *argv,
               const struct sbx_sink *out, int64_t timeout_ms, int *code, char *msg, size_t cap)
{
    struct sbxp_helper_exec h;
    sbxp_helper_exec_init(&h, argv, out, timeout_ms, msg, cap);
    int rc = run_command(sb, call, &h.args, "/", NULL, &h.res, NULL, NULL, 0);
    *code = sbxp_helper_exec_code(&h);
    return rc;
}

int osb_background(sbx_sandbox *sb, sbx_call *call, const char *script_text, const char *cwd,
                   const char *const *env, int64_t timeout_ms, char *cid, size_t cap)
{
    static const char *const argv[] = {"sh", NULL};
    struct sbx_exec_args args;
    memset(&args, 0, sizeof args);
    args.size = sizeof args;
    args.argv = argv;
    args.env = env;
    args.timeout_ms = timeout_ms;
    struct sbx_exec_result res;
    memset(&res, 0, sizeof res);
    res.size = sizeof res;
    return run_command(sb, call, &args, cwd, NULL, &res, script_text, cid, cap);
}
