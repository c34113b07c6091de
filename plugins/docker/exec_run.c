/*
 * exec_run.c - one exec from create to inspect.
 *
 *   1. POST /containers/{id}/exec (a tagged environment for a command that
 *      may have to be killed), within the request deadline;
 *   2. POST /exec/{id}/start on a hijacked connection, its response
 *      headers within the request deadline (or the command's own);
 *   3. the stdin feeder thread, and reading the output until the stream
 *      ends. The read waits at most until the command's deadline, and a
 *      stream silent for a request timeout makes us ping the daemon: one
 *      that does not answer is lost (SBX_E_UNAVAILABLE) instead of waited
 *      for forever;
 *   4. on timeout, cancellation, a refusing sink or a lost daemon: stop the
 *      command as its spec says (kill its processes on the killer's thread,
 *      or end its input), and keep draining the output meanwhile, until the
 *      stream ends or the kill deadline (kill_timeout) passes, whichever
 *      comes first: the return never waits for more than that;
 *   5. after a normal end, GET /exec/{id}/json for the exit code. An exec
 *      that never got a process (Pid 0 with an exit code recorded) could
 *      not start: what it wrote on stdout is the daemon's message. Then
 *      the killer kills what a killable command left behind.
 */
#include "exec_internal.h"
#include "stdin_feeder.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#define READ_CHUNK (64 * 1024)

enum stop_reason {
    STOP_NONE,    /* the stream ended: the command exited */
    STOP_TIMEOUT, /* the command's deadline passed */
    STOP_CANCEL,  /* the caller cancelled */
    STOP_SINK,    /* a sink refused data */
    STOP_FAILED   /* the daemon failed or stopped answering (message kept) */
};

struct run {
    sbx_sandbox *sb;
    struct docker_state *st;
    sbx_call *call;
    const struct exec_spec *spec;
    struct exec_outcome *oc;
    char eid[65];
    char tag_env[EXEC_TAG_ENV_LEN];
    int64_t deadline;          /* the command's (absolute), 0: none */
    struct sbxp_call_cancel dc;   /* cancellation of the start and the read */
    int cancel_off;            /* the stop has begun: no more cancelling */
    char start_path[256];
    struct sbxp_http_request req;
    sbxp_http_xfer *x;
    struct sbxs_feeder *feeder; /* NULL without stdin */
    struct exec_demux demux;
    char *buf;
    int fail_status;           /* STOP_FAILED: the status and why */
    char fail_msg[768];
};

/* The time left for a request: the request timeout, cut to what is left
 * of the spec's deadline (at least 1 ms). */
static int64_t request_budget(const struct run *r)
{
    int64_t t = r->st->cfg.request_timeout_ms;
    if (r->spec->deadline) {
        int64_t left = r->spec->deadline - docker_now_ms();
        if (left < t)
            t = left > 0 ? left : 1;
    }
    return t;
}

static void fail(struct run *r, int status, const char *fmt, ...) SBX_PRINTF_LIKE(3, 4);

static void fail(struct run *r, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->fail_msg, sizeof r->fail_msg, fmt, ap);
    va_end(ap);
    r->fail_status = status;
}

/* ---- 1. create ------------------------------------------------------- */

static json_object *str_array(const char *const *v, const char *extra)
{
    json_object *a = json_object_new_array();
    for (size_t i = 0; a && v && v[i]; i++)
        json_object_array_add(a, json_object_new_string(v[i]));
    if (a && extra)
        json_object_array_add(a, json_object_new_string(extra));
    return a;
}

static int exec_create(struct run *r)
{
    struct docker_state *st = r->st;
    const struct exec_spec *spec = r->spec;
    json_object *body = json_object_new_object();
    if (!body)
        return docker_error(st, r->call, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "AttachStdin", json_object_new_boolean(spec->in != NULL));
    json_object_object_add(body, "AttachStdout", json_object_new_boolean(1));
    json_object_object_add(body, "AttachStderr", json_object_new_boolean(1));
    json_object_object_add(body, "Tty", json_object_new_boolean(0));
    json_object_object_add(body, "Cmd", str_array(spec->argv, NULL));
    json_object_object_add(body, "Env",
                           str_array(spec->env, r->tag_env[0] ? r->tag_env : NULL));
    if (spec->workdir)
        json_object_object_add(body, "WorkingDir", json_object_new_string(spec->workdir));
    if (spec->user)
        json_object_object_add(body, "User", json_object_new_string(spec->user));
    json_object *resp = NULL;
    sbxp_http_error err;
    int rc = docker_json_within(st, spec->cancellable ? r->call : NULL,
                                request_budget(r), "POST", body, &resp, &err,
                                "/containers/%s/exec", r->sb->id);
    /* Paused without this provider's marker (docker pause from outside):
     * the daemon says so; resume and ask once more (pause.c). */
    if (rc != SBX_OK && err.http_status == 409 && strstr(err.message, "is paused") &&
        docker_resume(r->sb, r->call) == SBX_OK)
        rc = docker_json_within(st, spec->cancellable ? r->call : NULL, request_budget(r),
                                "POST", body, &resp, &err, "/containers/%s/exec",
                                r->sb->id);
    json_object_put(body);
    if (rc != SBX_OK) {
        /* 404: the container is gone; 409: it is not running (or paused) */
        if (err.http_status == 404)
            return docker_error(st, r->call, SBX_E_NOT_FOUND,
                                "docker: container %.12s no longer exists", r->sb->id);
        if (err.http_status == 409)
            return docker_error(st, r->call, SBX_E_UNAVAILABLE,
                                "docker: container %.12s is not running (%s); attach "
                                "again to restart it",
                                r->sb->id, err.message);
        return docker_report(st, r->call, &err, "creating an exec in container %.12s",
                             r->sb->id);
    }
    const char *id = sbxp_json_str(resp, "Id");
    if (!id || strlen(id) >= sizeof r->eid) {
        json_object_put(resp);
        return docker_error(st, r->call, SBX_E_PROTOCOL,
                            "docker: exec create answered without an Id");
    }
    snprintf(r->eid, sizeof r->eid, "%s", id);
    json_object_put(resp);
    return SBX_OK;
}

/* ---- 2. start -------------------------------------------------------- */

static int exec_cancel_check(void *ctx)
{
    struct run *r = ctx;
    if (r->cancel_off || !r->dc.call)
        return 0;
    return r->dc.host->cancelled && r->dc.host->cancelled(r->dc.host, r->dc.call);
}

/* SBX_OK with the stream open, or the reason to stop before it opened. */
static enum stop_reason exec_start(struct run *r, int *rc)
{
    struct docker_state *st = r->st;
    docker_path(st, r->start_path, sizeof r->start_path, "/exec/%s/start", r->eid);
    static const char start_body[] = "{\"Detach\":false,\"Tty\":false}";
    sbxp_call_cancel_init(&r->dc, st->host, r->spec->cancellable ? r->call : NULL);
    r->dc.c.check = exec_cancel_check;
    r->dc.c.ctx = r;
    r->req.method = "POST";
    r->req.path = r->start_path;
    r->req.content_type = "application/json";
    r->req.body = start_body;
    r->req.body_len = sizeof start_body - 1;
    r->req.hijack = 1;
    r->req.cancel = &r->dc.c;
    int64_t headers = request_budget(r);
    int64_t now = docker_now_ms();
    if (r->deadline && r->deadline - now < headers)
        headers = r->deadline > now ? r->deadline - now : 1;
    r->req.timeout_ms = headers;
    sbxp_http_error err;
    *rc = sbxp_http_start(st->http, &r->req, &r->x, &err);
    if (*rc == SBX_OK)
        return STOP_NONE;
    /* the command may run already: stop it as for any other reason */
    if (*rc == SBX_E_CANCELLED)
        return STOP_CANCEL;
    if (*rc == SBX_E_TIMEOUT && r->deadline && docker_now_ms() >= r->deadline)
        return STOP_TIMEOUT;
    if (*rc == SBX_E_TIMEOUT)
        fail(r, SBX_E_TIMEOUT,
             "docker: starting exec %.12s: %s (the daemon did not answer within %lld "
             "ms; providers.docker.request_timeout)",
             r->eid, err.message, (long long)headers);
    else
        fail(r, *rc, "docker: starting exec %.12s: %s", r->eid, err.message);
    return STOP_FAILED;
}

/* ---- 3. read --------------------------------------------------------- */

static int started(void *ctx)
{
    struct run *r = ctx;
    int pid = 0, running = 0, code = -1;
    sbxp_http_error err;
    if (docker_exec_inspect_once(r->st, r->eid, r->st->cfg.request_timeout_ms, &pid, &running,
                          &code, &err) != SBX_OK)
        return 1; /* cannot tell: never hold output back on a guess */
    return pid != 0 || running || code < 0;
}

/* A stream that said nothing for a request timeout: is the daemon still
 * there? SBX_OK, or STOP_FAILED with the reason kept. */
static int still_answering(struct run *r)
{
    sbxp_http_error err;
    int rc = docker_ping(r->st, r->st->cfg.request_timeout_ms, &err);
    if (rc == SBX_OK)
        return SBX_OK;
    fail(r, rc == SBX_E_TIMEOUT ? SBX_E_UNAVAILABLE : rc,
         "docker: the daemon at %s stopped answering during exec %.12s of %s: %s",
         r->st->cfg.host, r->eid, r->spec->argv[0], err.message);
    return rc;
}

static enum stop_reason read_stream(struct run *r)
{
    for (;;) {
        int64_t now = docker_now_ms();
        int64_t slice = r->st->cfg.request_timeout_ms;
        if (r->deadline) {
            if (now >= r->deadline)
                return STOP_TIMEOUT;
            if (r->deadline - now < slice)
                slice = r->deadline - now;
        }
        sbxp_http_xfer_set_timeout(r->x, slice);
        size_t got = 0;
        sbxp_http_error err;
        int rc = sbxp_http_xfer_read(r->x, r->buf, READ_CHUNK, &got, &err);
        if (rc == SBX_OK && got == 0)
            return STOP_NONE;
        if (rc == SBX_OK) {
            int s = docker_exec_demux_feed(&r->demux, r->buf, got);
            if (s < 0) {
                fail(r, SBX_E_PROTOCOL, "docker: malformed output stream from exec %.12s",
                     r->eid);
                return STOP_FAILED;
            }
            if (s > 0) {
                r->oc->sink_status = s;
                return STOP_SINK;
            }
            continue;
        }
        if (rc == SBX_E_CANCELLED)
            return STOP_CANCEL;
        if (rc == SBX_E_TIMEOUT) {
            if (r->deadline && docker_now_ms() >= r->deadline)
                return STOP_TIMEOUT;
            if (still_answering(r) == SBX_OK)
                continue;
            return STOP_FAILED;
        }
        fail(r, err.status, "docker: reading the output of exec %.12s: %s", r->eid,
             err.message);
        return STOP_FAILED;
    }
}

/* ---- 4. stop --------------------------------------------------------- */

/* Read what the stream still brings until it ends or the deadline. */
static void drain(struct run *r, int64_t deadline)
{
    if (!r->x || !r->buf)
        return;
    for (;;) {
        int64_t left = deadline - docker_now_ms();
        if (left <= 0)
            return;
        sbxp_http_xfer_set_timeout(r->x, left);
        size_t got = 0;
        sbxp_http_error err;
        if (sbxp_http_xfer_read(r->x, r->buf, READ_CHUNK, &got, &err) != SBX_OK ||
            got == 0)
            return;
        if (docker_exec_demux_feed(&r->demux, r->buf, got) != 0)
            r->demux.discard = 1;
    }
}

static void stop_exec(struct run *r, enum stop_reason why)
{
    struct exec_outcome *oc = r->oc;
    oc->timed_out = why == STOP_TIMEOUT;
    oc->cancelled = why == STOP_CANCEL;
    /* output that comes after a timeout is still the command's; after a
     * cancellation or a failure nobody wants it */
    r->demux.discard = why != STOP_TIMEOUT;
    /* from here on the cancellation has been acted upon: the fd would only
     * wake the drain's poll again and again */
    r->cancel_off = 1;
    r->dc.c.fd = -1;
    sbxs_feeder_stop(r->feeder);
    int64_t deadline = docker_now_ms() + r->st->cfg.kill_timeout_ms;
    if (r->spec->deadline && r->spec->deadline < deadline)
        deadline = r->spec->deadline;
    struct exec_killer k;
    int killing = r->spec->stop == EXEC_STOP_KILL && r->eid[0];
    if (killing)
        docker_exec_killer_start(&k, r->sb, r->tag_env, r->eid, deadline);
    drain(r, deadline);
    if (killing) {
        docker_exec_killer_join(&k);
        if (!k.ok) {
            oc->kill_failed = 1;
            snprintf(oc->kill_msg, sizeof oc->kill_msg, "%s", k.msg);
        }
    }
}

/* ---- 5. inspect ------------------------------------------------------ */

int docker_exec_inspect_once(struct docker_state *st, const char *eid, int64_t timeout_ms,
                      int *pid, int *running, int *exit_code, sbxp_http_error *err)
{
    json_object *info = NULL;
    int rc = docker_json_within(st, NULL, timeout_ms, "GET", NULL, &info, err,
                                "/exec/%s/json", eid);
    if (rc != SBX_OK)
        return rc;
    *pid = (int)sbxp_json_int(info, "Pid", 0);
    *running = sbxp_json_bool(info, "Running", 0);
    json_object *ec;
    *exit_code = json_object_object_get_ex(info, "ExitCode", &ec) &&
                         json_object_is_type(ec, json_type_int)
                     ? json_object_get_int(ec)
                     : -1;
    json_object_put(info);
    return SBX_OK;
}

/* The exit code, once recorded: the stream can end a moment before the
 * daemon has noted the exit. */
static int exec_wait_exit(struct run *r, int *pid, int *code)
{
    struct docker_state *st = r->st;
    int64_t until = docker_now_ms() + st->cfg.request_timeout_ms;
    long delay_us = 500;
    for (;;) {
        int running = 0;
        sbxp_http_error err;
        int rc = docker_exec_inspect_once(st, r->eid, request_budget(r), pid, &running, code,
                                   &err);
        if (rc != SBX_OK)
            return docker_report(st, r->call, &err, "inspecting exec %.12s", r->eid);
        if (!running && *code >= 0)
            return SBX_OK;
        if (docker_now_ms() >= until)
            return docker_error(st, r->call, SBX_E_PROTOCOL,
                                "docker: exec %.12s ended its output but the daemon "
                                "did not report its exit code within %lld ms",
                                r->eid, (long long)st->cfg.request_timeout_ms);
        struct timespec ts = {0, delay_us * 1000};
        nanosleep(&ts, NULL);
        if (delay_us < 100000)
            delay_us *= 2;
    }
}

/* ---- the whole ------------------------------------------------------- */

/* After the stream: tear down, then what the outcome says. */
static int finish(struct run *r, enum stop_reason why)
{
    struct exec_outcome *oc = r->oc;
    if (r->x) {
        /* wake the feeder if it still waits (the command exited early) */
        sbxs_feeder_stop(r->feeder);
        int sock = sbxp_http_xfer_socket(r->x);
        if (sock >= 0)
            shutdown(sock, SHUT_RDWR);
    }
    int complete = 0;
    oc->source_failed = sbxs_feeder_finish(r->feeder, &complete);
    r->feeder = NULL;
    oc->input_complete = complete || !r->spec->in;
    sbxp_http_xfer_free(r->x);
    r->x = NULL;
    if (why == STOP_FAILED) {
        if (oc->kill_failed)
            return docker_error(r->st, r->call, r->fail_status,
                                "%s; its processes could not all be killed: %s",
                                r->fail_msg, oc->kill_msg);
        return docker_error(r->st, r->call, r->fail_status, "%s", r->fail_msg);
    }
    if (why != STOP_NONE) {
        oc->exit_code = -1;
        oc->term_signal = 9;
        return SBX_OK;
    }
    int pid = 0, code = -1;
    int rc = exec_wait_exit(r, &pid, &code);
    if (rc != SBX_OK)
        return rc;
    oc->start_failed = pid == 0;
    int s = docker_exec_demux_finish(&r->demux, oc->start_failed);
    if (!oc->start_failed && r->demux.daemon_text && r->spec->out &&
        r->spec->out->write && oc->start_msg[0]) {
        /* the daemon said "not started" mid-stream and then recorded a
         * process after all: what was held is output, never dropped */
        size_t n = strlen(oc->start_msg);
        oc->out_bytes += n;
        if (!s)
            s = r->spec->out->write(r->spec->out->ctx, oc->start_msg, n);
        oc->start_msg[0] = '\0';
    }
    if (s != 0 && !oc->sink_status)
        oc->sink_status = s;
    if (oc->start_failed) {
        oc->start_exit = code;
        size_t n = strlen(oc->start_msg);
        while (n && (oc->start_msg[n - 1] == '\n' || oc->start_msg[n - 1] == '\r'))
            oc->start_msg[--n] = '\0';
    }
    oc->exit_code = code;
    oc->term_signal = 0;
    /* What the command left behind (a background job, a setsid'd double
     * fork) dies before exec returns: the killer finds it by tag and
     * session as after a timeout. */
    if (!oc->start_failed && r->spec->stop == EXEC_STOP_KILL && r->tag_env[0] && r->eid[0]) {
        struct exec_killer k;
        docker_exec_killer_start(&k, r->sb, r->tag_env, r->eid,
                          docker_now_ms() + r->st->cfg.kill_timeout_ms);
        docker_exec_killer_join(&k);
        if (!k.ok)
            r->st->host->log(r->st->host, SBX_LOG_WARN,
                             "docker: what exec %.12s left behind could not all be "
                             "killed: %s",
                             r->eid, k.msg);
    }
    return SBX_OK;
}

int docker_exec_run(sbx_sandbox *sb, sbx_call *call, const struct exec_spec *spec,
             struct exec_outcome *oc)
{
    memset(oc, 0, sizeof *oc);
    struct run r;
    memset(&r, 0, sizeof r);
    r.sb = sb;
    r.st = sb->st;
    r.call = call;
    r.spec = spec;
    r.oc = oc;
    if (spec->stop == EXEC_STOP_KILL) {
        char tag[33];
        docker_random_hex(tag, 16);
        snprintf(r.tag_env, sizeof r.tag_env, "%s=%s", DOCKER_EXEC_TAG_VAR, tag);
    }
    r.demux.spec = spec;
    r.demux.oc = oc;
    r.demux.started = started;
    r.demux.started_ctx = &r;
    int rc = exec_create(&r);
    if (rc != SBX_OK)
        return rc;
    if (spec->timeout_ms > 0)
        r.deadline = docker_now_ms() + spec->timeout_ms;
    if (spec->deadline && (!r.deadline || spec->deadline < r.deadline))
        r.deadline = spec->deadline;

    enum stop_reason why = exec_start(&r, &rc);
    if (why == STOP_NONE) {
        r.buf = malloc(READ_CHUNK);
        int sock = sbxp_http_xfer_socket(r.x);
        if (!r.buf) {
            fail(&r, SBX_E_NOMEM, "out of memory");
            why = STOP_FAILED;
        } else if (spec->in) {
            if (sock < 0 || sbxs_feeder_start(&r.feeder, spec->in, sock,
                                              SBXS_FEED_SOCKET, FEED_CHUNK) != 0) {
                fail(&r, SBX_E_INTERNAL, "docker: cannot start the stdin feeder");
                why = STOP_FAILED;
            }
        } else if (sock >= 0) {
            shutdown(sock, SHUT_WR); /* an empty stdin */
        }
        if (why == STOP_NONE)
            why = read_stream(&r);
    }
    if (why != STOP_NONE)
        stop_exec(&r, why);
    rc = finish(&r, why);
    free(r.buf);
    return rc;
}
