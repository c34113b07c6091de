/*
 * toolbox.c - requests to the toolbox daemon of a sandbox (swagger.yaml),
 * at <toolboxProxyUrl>/<sandbox id>/<path> with the API key. Sandboxes
 * that share a toolboxProxyUrl (normally all of them) share one
 * connection pool. Uploads are multipart/form-data with one part, "file",
 * streamed from the caller's source between a small preamble and epilogue;
 * downloads stream into the caller's sink. See daytona.h.
 */
#include "daytona.h"

#include "hex.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int daytona_tb_setup(sbx_sandbox *sb, sbx_call *call, json_object *sandbox)
{
    struct daytona_state *st = sb->st;
    const char *url = sbxp_json_str(sandbox, "toolboxProxyUrl");
    json_object *doc = NULL;
    if (!url || !*url) {
        char path[256];
        char *e = sbxp_http_escape(sb->id);
        if (!e)
            return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
        snprintf(path, sizeof path, "/sandbox/%s/toolbox-proxy-url", e);
        free(e);
        struct sbxp_call_cancel c;
        sbxp_call_cancel_init(&c, st->host, call);
        const char *headers[] = {st->auth, NULL};
        struct sbxp_http_request req;
        memset(&req, 0, sizeof req);
        req.method = "GET";
        req.path = path;
        req.headers = headers;
        req.timeout_ms = st->cfg.request_timeout_ms;
        req.connect_timeout_ms = st->cfg.connect_timeout_ms;
        req.cancel = &c.c;
        sbxp_http_error err;
        int rc = sbxp_http_json_retry(st->api, &req, NULL, &doc, NULL, &err, &st->cfg.retry);
        if (rc != SBX_OK)
            return daytona_report(st, call, &err, "asking for the toolbox URL of %s", sb->id);
        url = sbxp_json_str(doc, "url");
        if (!url || !*url) {
            json_object_put(doc);
            return daytona_error(st, call, SBX_E_PROTOCOL, DT ": sandbox %s has no toolbox URL",
                                 sb->id);
        }
    }
    char *e = sbxp_http_escape(sb->id);
    if (!e || snprintf(sb->prefix, sizeof sb->prefix, "/%s", e) >= (int)sizeof sb->prefix) {
        free(e);
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_INVALID, DT ": sandbox id too long");
    }
    free(e);
    size_t ul = strlen(url);
    while (ul && url[ul - 1] == '/')
        ul--;
    int rc = SBX_OK;
    pthread_mutex_lock(&st->lock);
    if (!st->toolbox) {
        sbxp_http_error err;
        char *u = strndup(url, ul);
        if (!u || sbxp_http_new(u, &st->toolbox, &err) != SBX_OK) {
            free(u);
            rc = daytona_error(st, call, SBX_E_PROTOCOL, DT ": bad toolboxProxyUrl of sandbox %s",
                               sb->id);
        } else {
            st->toolbox_url = u;
        }
    }
    if (rc == SBX_OK && strlen(st->toolbox_url) == ul && !strncmp(st->toolbox_url, url, ul)) {
        sb->tb = st->toolbox;
    } else if (rc == SBX_OK) {
        char *u = strndup(url, ul);
        sbxp_http_error err;
        if (!u || sbxp_http_new(u, &sb->tb, &err) != SBX_OK)
            rc = daytona_error(st, call, SBX_E_PROTOCOL, DT ": bad toolboxProxyUrl of sandbox %s",
                               sb->id);
        else
            sb->owns_tb = 1;
        free(u);
    }
    pthread_mutex_unlock(&st->lock);
    json_object_put(doc);
    return rc;
}

/* The full toolbox path of a sandbox-relative one (malloc'd). */
static char *full_path(sbx_sandbox *sb, const char *path)
{
    size_t n = strlen(sb->prefix) + strlen(path) + 1;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s%s", sb->prefix, path);
    return p;
}

static void tb_request(sbx_sandbox *sb, struct sbxp_http_request *req, const char **headers,
                       struct sbxp_call_cancel *c, const char *method, const char *path)
{
    memset(req, 0, sizeof *req);
    headers[0] = sb->st->auth;
    headers[1] = NULL;
    req->method = method;
    req->path = path;
    req->headers = headers;
    req->connect_timeout_ms = sb->st->cfg.connect_timeout_ms;
    req->cancel = &c->c;
}

/* The SDK version from which the toolbox answers session commands with
 * stdout and stderr apart (apps/daemon session handlers: >= 0.167.0). */
#define SPLIT_SDK_HEADER "X-Daytona-SDK-Version: 0.190.1"

static int tb_json(sbx_sandbox *sb, sbx_call *call, const char *method, const char *path,
                   json_object *body, json_object **out, int idempotent, int64_t timeout_ms,
                   const char *extra, sbxp_http_error *err)
{
    char *fp = full_path(sb, path);
    if (!fp)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, sb->st->host, call);
    const char *headers[3];
    struct sbxp_http_request req;
    tb_request(sb, &req, headers, &c, method, fp);
    headers[1] = extra;
    headers[2] = NULL;
    req.timeout_ms = timeout_ms;
    int rc = daytona_wake(sb, call, err);
    if (rc == SBX_OK)
        rc = sbxp_http_json_retry(sb->tb, &req, body, out, NULL, err,
                                  idempotent ? &sb->st->cfg.retry : NULL);
    /* Refused by the proxy for a sandbox that does not run: the request
     * never reached the toolbox, so it is repeated once it runs again. */
    if (rc != SBX_OK && daytona_revive(sb, call, err) == SBX_OK)
        rc = sbxp_http_json_retry(sb->tb, &req, body, out, NULL, err,
                                  idempotent ? &sb->st->cfg.retry : NULL);
    free(fp);
    return rc;
}

int daytona_tb_json(sbx_sandbox *sb, sbx_call *call, const char *method, const char *path,
                    json_object *body, json_object **out, int idempotent, int64_t timeout_ms,
                    sbxp_http_error *err)
{
    return tb_json(sb, call, method, path, body, out, idempotent, timeout_ms, NULL, err);
}

int daytona_tb_json_split(sbx_sandbox *sb, sbx_call *call, const char *path, json_object *body,
                          json_object **out, int64_t timeout_ms, sbxp_http_error *err)
{
    return tb_json(sb, call, "POST", path, body, out, 0, timeout_ms, SPLIT_SDK_HEADER, err);
}

char *daytona_tb_query(const char *path, const char *name, const char *value, const char *name2,
                       const char *value2)
{
    char *a = sbxp_http_escape(value), *b = value2 ? sbxp_http_escape(value2) : NULL;
    char *out = NULL;
    if (a && (!value2 || b)) {
        size_t n = strlen(path) + strlen(name) + strlen(a) + (b ? strlen(b) + strlen(name2) : 0) +
                   8;
        out = malloc(n);
        if (out && b)
            snprintf(out, n, "%s?%s=%s&%s=%s", path, name, a, name2, b);
        else if (out)
            snprintf(out, n, "%s?%s=%s", path, name, a);
    }
    free(a);
    free(b);
    return out;
}

int daytona_tb_download(sbx_sandbox *sb, sbx_call *call, const char *abs,
                        const struct sbx_sink *sink, sbxp_http_error *err)
{
    char *q = daytona_tb_query("/files/download", "path", abs, NULL, NULL);
    if (!q)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    int rc = daytona_tb_get(sb, call, q, sink, err);
    free(q);
    return rc;
}

int daytona_tb_get(sbx_sandbox *sb, sbx_call *call, const char *path,
                   const struct sbx_sink *sink, sbxp_http_error *err)
{
    char *fp = full_path(sb, path);
    if (!fp)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, sb->st->host, call);
    const char *headers[2];
    struct sbxp_http_request req;
    tb_request(sb, &req, headers, &c, "GET", fp);
    /* A body may be large: no whole-request deadline, but a stalled one
     * fails. */
    req.stall_timeout_ms = sb->st->cfg.request_timeout_ms;
    memset(err, 0, sizeof *err);
    int rc = daytona_wake(sb, call, err);
    if (rc == SBX_OK)
        rc = sbxp_http_request(sb->tb, &req, sink, NULL, err);
    /* An error status delivers nothing to the sink: safe to repeat. */
    if (rc != SBX_OK && daytona_revive(sb, call, err) == SBX_OK)
        rc = sbxp_http_request(sb->tb, &req, sink, NULL, err);
    free(fp);
    return rc;
}

/* The multipart body: preamble, the caller's bytes, epilogue. */
struct multipart {
    char pre[256];
    size_t pre_len, pre_off;
    char post[64];
    size_t post_len, post_off;
    const struct sbx_source *src;
    int src_done;
};

static long mp_read(void *ctx, void *buf, size_t cap)
{
    struct multipart *m = ctx;
    if (m->pre_off < m->pre_len) {
        size_t n = m->pre_len - m->pre_off < cap ? m->pre_len - m->pre_off : cap;
        memcpy(buf, m->pre + m->pre_off, n);
        m->pre_off += n;
        return (long)n;
    }
    if (!m->src_done) {
        long n = m->src->read(m->src->ctx, buf, cap);
        if (n < 0)
            return -1;
        if (n > 0)
            return n;
        m->src_done = 1;
    }
    size_t n = m->post_len - m->post_off < cap ? m->post_len - m->post_off : cap;
    memcpy(buf, m->post + m->post_off, n);
    m->post_off += n;
    return (long)n;
}

int daytona_tb_upload(sbx_sandbox *sb, sbx_call *call, const char *abs,
                      const struct sbx_source *src, sbxp_http_error *err)
{
    char bnd[40];
    sbxs_random_hex(bnd, 16);
    struct multipart m;
    memset(&m, 0, sizeof m);
    m.src = src;
    const char *base = strrchr(abs, '/');
    base = base ? base + 1 : abs;
    /* The file name is informative only (the path is in the query); keep
     * it free of quotes and line breaks. */
    char fname[96];
    size_t fl = 0;
    for (const char *p = base; *p && fl < sizeof fname - 1; p++)
        fname[fl++] = (*p == '"' || *p == '\\' || (unsigned char)*p < 0x20) ? '_' : *p;
    fname[fl] = '\0';
    m.pre_len = (size_t)snprintf(m.pre, sizeof m.pre,
                                 "--%s\r\nContent-Disposition: form-data; name=\"file\"; "
                                 "filename=\"%s\"\r\nContent-Type: application/octet-stream\r\n\r\n",
                                 bnd, fname);
    m.post_len = (size_t)snprintf(m.post, sizeof m.post, "\r\n--%s--\r\n", bnd);
    struct sbx_source body = SBX_SOURCE_INIT(&m, mp_read);
    char ctype[96];
    snprintf(ctype, sizeof ctype, "multipart/form-data; boundary=%s", bnd);

    char *q = daytona_tb_query("/files/upload", "path", abs, NULL, NULL);
    char *fp = q ? full_path(sb, q) : NULL;
    free(q);
    if (!fp)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, sb->st->host, call);
    const char *headers[2];
    struct sbxp_http_request req;
    tb_request(sb, &req, headers, &c, "POST", fp);
    req.content_type = ctype;
    req.body_src = &body;
    req.body_src_len = -1;
    if (src->size >= SBX_SOURCE_SIZE_1_0 && src->length) {
        int64_t l = src->length(src->ctx);
        if (l >= 0)
            req.body_src_len = (int64_t)(m.pre_len + m.post_len) + l;
    }
    req.stall_timeout_ms = sb->st->cfg.request_timeout_ms;
    memset(err, 0, sizeof *err);
    /* The body streams from src and cannot be sent twice: start first (a
     * sandbox stopped elsewhere was started by the path checks that
     * precede every upload). */
    int rc = daytona_wake(sb, call, err);
    if (rc == SBX_OK)
        rc = sbxp_http_request(sb->tb, &req, NULL, NULL, err);
    free(fp);
    return rc;
}

struct membuf {
    const unsigned char *p;
    size_t len, off;
};

static long mem_read(void *ctx, void *buf, size_t cap)
{
    struct membuf *m = ctx;
    size_t n = m->len - m->off < cap ? m->len - m->off : cap;
    memcpy(buf, m->p + m->off, n);
    m->off += n;
    return (long)n;
}

static int64_t mem_length(void *ctx)
{
    struct membuf *m = ctx;
    return (int64_t)(m->len - m->off);
}

int daytona_tb_upload_mem(sbx_sandbox *sb, sbx_call *call, const char *abs, const void *data,
                          size_t len, sbxp_http_error *err)
{
    struct membuf m = {data, len, 0};
    struct sbx_source src = SBX_SOURCE_INIT(&m, mem_read);
    src.length = mem_length;
    return daytona_tb_upload(sb, call, abs, &src, err);
}

/* A bodiless toolbox call on a query path. */
static int simple(sbx_sandbox *sb, sbx_call *call, const char *method, char *q, int idempotent,
                  sbxp_http_error *err)
{
    if (!q)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    int rc = daytona_tb_json(sb, call, method, q, NULL, NULL, idempotent,
                             sb->st->cfg.request_timeout_ms, err);
    free(q);
    return rc;
}

int daytona_tb_mkdir(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
                     sbxp_http_error *err)
{
    char m[8];
    snprintf(m, sizeof m, "%04o", mode);
    int rc =
        simple(sb, call, "POST", daytona_tb_query("/files/folder", "path", abs, "mode", m), 1, err);
    return rc == SBX_E_EXISTS ? SBX_OK : rc;
}

int daytona_tb_chmod(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
                     sbxp_http_error *err)
{
    char m[8];
    snprintf(m, sizeof m, "%04o", mode);
    return simple(sb, call, "POST", daytona_tb_query("/files/permissions", "path", abs, "mode", m),
                  1, err);
}

int daytona_tb_move(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                    sbxp_http_error *err)
{
    return simple(sb, call, "POST",
                  daytona_tb_query("/files/move", "source", from, "destination", to), 0, err);
}

int daytona_tb_remove(sbx_sandbox *sb, sbx_call *call, const char *abs, int recursive,
                      sbxp_http_error *err)
{
    int rc = simple(sb, call, "DELETE",
                    daytona_tb_query("/files", "path", abs, recursive ? "recursive" : NULL,
                                     recursive ? "true" : NULL),
                    1, err);
    return rc == SBX_E_NOT_FOUND ? SBX_OK : rc;
}

int daytona_tb_session_create(sbx_sandbox *sb, sbx_call *call, const char *sid, const char *what)
{
    sbxp_http_error err;
    json_object *body = json_object_new_object();
    if (!body)
        return daytona_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "sessionId", json_object_new_string(sid));
    int rc = daytona_tb_json(sb, call, "POST", "/process/session", body, NULL, 1,
                             sb->st->cfg.request_timeout_ms, &err);
    json_object_put(body);
    if (rc == SBX_E_EXISTS)
        rc = SBX_OK; /* a retry after a lost answer */
    if (rc != SBX_OK)
        return daytona_tb_report(sb, call, &err, "exec %s: creating a session", what);
    return SBX_OK;
}

void daytona_tb_session_delete(sbx_sandbox *sb, const char *sid)
{
    char path[128];
    snprintf(path, sizeof path, "/process/session/%s", sid);
    sbxp_http_error err;
    int rc = daytona_tb_json(sb, NULL, "DELETE", path, NULL, NULL, 1,
                             sb->st->cfg.request_timeout_ms, &err);
    if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
        sb->st->host->log(sb->st->host, SBX_LOG_WARN, DT ": deleting session %s of %s: %s", sid,
                          sb->id, err.message);
}

int daytona_tb_report(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err, const char *fmt, ...)
{
    struct daytona_state *st = sb->st;
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (err->status != SBX_E_CANCELLED && !err->from_callback &&
        (err->http_status == 400 || err->http_status == 404 || err->http_status == 409 ||
         err->http_status == 410 || err->http_status >= 500 || err->status == SBX_E_UNAVAILABLE)) {
        /* The proxy refuses calls to a sandbox that is not running (one
         * that stopped after auto_stop_minutes idle, say) or gone. */
        json_object *doc = NULL;
        sbxp_http_error e2;
        int rc = daytona_api_get(st, NULL, sb->id, &doc, &e2);
        const char *s = rc == SBX_OK ? sbxp_json_str(doc, "state") : NULL;
        int gone = rc == SBX_E_NOT_FOUND || (s && !strcmp(s, "destroyed"));
        int down = s && strcmp(s, "started") != 0;
        char state[64];
        snprintf(state, sizeof state, "%s", s ? s : "");
        json_object_put(doc);
        if (gone)
            return daytona_error(st, call, SBX_E_NOT_FOUND, DT ": %s: sandbox %s no longer exists",
                                 what, sb->id);
        if (down)
            return daytona_error(st, call, SBX_E_UNAVAILABLE, DT ": %s: sandbox %s is %s", what,
                                 sb->id, state);
    }
    return daytona_report(st, call, err, "%s", what);
}
