/*
 * files.c - read_file and write_file through sandboxd's REST filesystem
 * API (/v1/files/{path}, the whole relative path one segment with '/' as
 * %2F), reached through the router on sandboxd's REST port.
 *
 * Confinement is sandboxd's (every path is resolved with its symlinks and
 * refused with 403 unless it stays below --root-dir); this side refuses
 * what is malformed before sending anything: absolute paths, "..", empty
 * or "." segments, control characters. A GET of a directory answers a
 * JSON listing: it is recognised by its content type and refused
 * (SBX_E_INVALID) before a byte reaches the sink. A PUT is atomic in
 * sandboxd (temporary file and rename, parents made), with mode as its
 * `mode` query.
 */
#include "k8s.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int k8s_check_path(sbx_sandbox *sb, sbx_call *call, const char *what, const char *path)
{
    struct k8s_state *st = sb->st;
    if (!path || !*path)
        return k8s_error(st, call, SBX_E_INVALID, "k8s: %s: empty path", what);
    if (path[0] == '/')
        return k8s_error(st, call, SBX_E_INVALID,
                         "k8s: %s: \"%s\" is absolute (paths are workspace-relative)", what,
                         path);
    if (strlen(path) > 4096)
        return k8s_error(st, call, SBX_E_INVALID, "k8s: %s: path too long", what);
    const char *p = path;
    while (*p) {
        size_t n = strcspn(p, "/");
        if ((n == 2 && p[0] == '.' && p[1] == '.'))
            return k8s_error(st, call, SBX_E_INVALID, "k8s: %s: \"%s\" leaves the workspace",
                             what, path);
        p += n;
        if (*p == '/')
            p++;
    }
    for (p = path; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return k8s_error(st, call, SBX_E_INVALID, "k8s: %s: control character in path",
                             what);
    return SBX_OK;
}

/* "/v1/files/<escaped>" plus query (may be NULL); malloc'd. */
static char *file_path(const char *rel, const char *query)
{
    /* "./a" and "a//b" name the same file: drop what adds nothing */
    char norm[4200];
    size_t o = 0;
    const char *p = rel;
    while (*p && o < sizeof norm - 1) {
        size_t n = strcspn(p, "/");
        if (n && !(n == 1 && p[0] == '.')) {
            if (o)
                norm[o++] = '/';
            if (o + n >= sizeof norm)
                return NULL;
            memcpy(norm + o, p, n);
            o += n;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    norm[o] = '\0';
    char *esc = sbxp_http_escape(norm);
    if (!esc)
        return NULL;
    size_t len = strlen(esc) + (query ? strlen(query) : 0) + 16;
    char *out = malloc(len);
    if (out)
        snprintf(out, len, "/v1/files/%s%s%s", esc, query ? "?" : "", query ? query : "");
    free(esc);
    return out;
}

/* The router's headers for the REST port. */
struct rest_hdrs {
    char id[300], ns[300], port[64];
    const char *list[6];
};

static void rest_headers(sbx_sandbox *sb, struct rest_hdrs *h)
{
    k8s_route_headers(sb, sb->st->cfg.rest_port, h->id, sizeof h->id, h->ns, sizeof h->ns,
                      h->port, sizeof h->port);
    size_t n = 0;
    h->list[n++] = h->id;
    h->list[n++] = h->ns;
    h->list[n++] = h->port;
    if (sb->st->router_auth)
        h->list[n++] = sb->st->router_auth;
    h->list[n] = NULL;
}

/* A failed file request as the call's error: 403 (outside the root) and
 * 400 are SBX_E_INVALID, 404 SBX_E_NOT_FOUND. */
static int file_error(sbx_sandbox *sb, sbx_call *call, const char *what, const char *path,
                      const sbxp_http_error *err)
{
    int st = err->status;
    if (err->http_status == 403)
        return k8s_error(sb->st, call, SBX_E_INVALID,
                         "k8s: %s %s: refused by sandboxd (outside the workspace, or not "
                         "permitted): %s",
                         what, path, err->message);
    if (err->http_status == 404)
        return k8s_error(sb->st, call, SBX_E_NOT_FOUND, "k8s: %s %s: no such file", what, path);
    if (err->http_status == 400 || err->http_status == 409)
        st = SBX_E_INVALID;
    if (err->from_callback)
        return err->status;
    return k8s_error(sb->st, call, st, "k8s: %s %s: %s", what, path, err->message);
}

/* How long read_file waits for sandboxd's first answer before it asks
 * whether the path is a regular file. */
#define HEADERS_MS 1000

struct type_check {
    int is_json;
};

static int on_type(void *ctx, const char *name, const char *value)
{
    struct type_check *t = ctx;
    if (strcasecmp(name, "Content-Type") == 0)
        t->is_json = strncasecmp(value, "application/json", 16) == 0;
    return 0;
}

/* GET /v1/files/<path> up to the headers: *x, and whether it is a
 * directory's listing (JSON). */
static int file_get(sbx_sandbox *sb, sbx_call *call, const char *method, const char *path,
                    int64_t timeout_ms, struct sbxp_http_request *req, struct rest_hdrs *h,
                    struct sbxp_call_cancel *cc, struct type_check *t, sbxp_http_xfer **x,
                    sbxp_http_error *err)
{
    rest_headers(sb, h);
    sbxp_call_cancel_init(cc, sb->st->host, call);
    memset(req, 0, sizeof *req);
    memset(t, 0, sizeof *t);
    req->method = method;
    req->path = file_path(path, NULL);
    if (!req->path)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    req->headers = h->list;
    req->on_header = on_type;
    req->header_ctx = t;
    req->timeout_ms = timeout_ms;
    req->stall_timeout_ms = sb->st->cfg.request_timeout_ms;
    req->connect_timeout_ms = sb->st->cfg.connect_timeout_ms;
    req->cancel = call ? &cc->c : NULL;
    int rc = sbxp_http_start(sb->st->rest, req, x, err);
    if (rc != SBX_OK) {
        free((char *)req->path);
        req->path = NULL;
    }
    return rc;
}

int k8s_is_dir(sbx_sandbox *sb, const char *path)
{
    struct sbxp_http_request req;
    struct rest_hdrs h;
    struct sbxp_call_cancel cc;
    struct type_check t;
    sbxp_http_xfer *x = NULL;
    sbxp_http_error err;
    if (file_get(sb, NULL, "HEAD", path, HEADERS_MS, &req, &h, &cc, &t, &x, &err) != SBX_OK)
        return 0;
    sbxp_http_xfer_free(x);
    free((char *)req.path);
    return t.is_json;
}

int k8s_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_sink *sink)
{
    int rc = k8s_check_path(sb, call, "read_file", path);
    if (rc != SBX_OK)
        return rc;
    struct sbxp_http_request req;
    struct rest_hdrs h;
    struct sbxp_call_cancel cc;
    struct type_check t;
    sbxp_http_xfer *x = NULL;
    sbxp_http_error err;
    /* sandboxd opens the file before it answers: on a FIFO without a
     * writer it never does. Headers that do not come quickly make us ask
     * what the path is; anything but a regular file is refused. */
    rc = file_get(sb, call, "GET", path, HEADERS_MS, &req, &h, &cc, &t, &x, &err);
    if (rc == SBX_E_TIMEOUT) {
        if (!k8s_is_regular(sb, path))
            return k8s_error(sb->st, call, SBX_E_INVALID,
                             "k8s: read_file %s: not a regular file (a FIFO, socket or device)",
                             path);
        rc = file_get(sb, call, "GET", path, 0, &req, &h, &cc, &t, &x, &err);
    }
    if (rc != SBX_OK)
        return file_error(sb, call, "read_file", path, &err);
    sbxp_http_xfer_set_timeout(x, 0);
    if (t.is_json) {
        /* a listing: nothing reaches the sink */
        sbxp_http_xfer_free(x);
        free((char *)req.path);
        return k8s_error(sb->st, call, SBX_E_INVALID, "k8s: read_file %s: a directory", path);
    }
    rc = sbxp_http_xfer_pump(x, sink, &err);
    sbxp_http_xfer_free(x);
    free((char *)req.path);
    if (rc != SBX_OK)
        return file_error(sb, call, "read_file", path, &err);
    return SBX_OK;
}

int k8s_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                   const struct sbx_source *src, unsigned mode)
{
    if (mode & ~0777u)
        return k8s_error(sb->st, call, SBX_E_INVALID,
                         "k8s: write_file %s: mode %#o has bits outside 0777", path ? path : "",
                         mode);
    int rc = k8s_check_path(sb, call, "write_file", path);
    if (rc != SBX_OK)
        return rc;
    char q[32];
    snprintf(q, sizeof q, "mode=0%03o", mode ? mode : 0644u);
    char *p = file_path(path, q);
    if (!p)
        return k8s_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    struct rest_hdrs h;
    rest_headers(sb, &h);
    struct sbxp_call_cancel cc;
    sbxp_call_cancel_init(&cc, sb->st->host, call);
    int64_t len = -1;
    if (src->size >= offsetof(struct sbx_source, length) + sizeof(void *) && src->length)
        len = src->length(src->ctx);
    struct sbxp_http_request req = {0};
    req.method = "PUT";
    req.path = p;
    req.headers = h.list;
    req.content_type = "application/octet-stream";
    req.body_src = src;
    req.body_src_len = len;
    req.stall_timeout_ms = sb->st->cfg.request_timeout_ms;
    req.connect_timeout_ms = sb->st->cfg.connect_timeout_ms;
    req.cancel = &cc.c;
    sbxp_http_error err;
    rc = sbxp_http_request(sb->st->rest, &req, NULL, NULL, &err);
    free(p);
    if (rc != SBX_OK)
        return file_error(sb, call, "write_file", path, &err);
    return SBX_OK;
}
