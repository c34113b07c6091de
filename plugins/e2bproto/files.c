/*
 * files.c - read_file and write_file through envd's /files endpoint,
 * streamed both ways. A write goes to a temporary name beside the target,
 * gets its mode (chmod in the sandbox: envd has no call for it) and is
 * renamed over the target with filesystem.Move, so readers see the old
 * content or the new, never a part. See e2b_core.h.
 */
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int e2b_mkdir(sbx_sandbox *sb, sbx_call *call, const char *abs, sbxp_http_error *err)
{
    json_object *body = json_object_new_object();
    if (!body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "path", json_object_new_string(abs));
    int rc = e2b_envd_unary(sb, call, "filesystem.Filesystem/MakeDir", body, NULL, 1, err);
    json_object_put(body);
    return rc == SBX_E_EXISTS ? SBX_OK : rc;
}

int e2b_remove(sbx_sandbox *sb, sbx_call *call, const char *abs, sbxp_http_error *err)
{
    json_object *body = json_object_new_object();
    if (!body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "path", json_object_new_string(abs));
    int rc = e2b_envd_unary(sb, call, "filesystem.Filesystem/Remove", body, NULL, 1, err);
    json_object_put(body);
    return rc == SBX_E_NOT_FOUND ? SBX_OK : rc;
}

/* "/files?path=<abs>&username=<user>" (malloc'd) or NULL. */
static char *files_path(const char *abs, const char *user)
{
    char *p = sbxp_http_escape(abs), *u = sbxp_http_escape(user);
    char *out = NULL;
    if (p && u) {
        size_t len = strlen(p) + strlen(u) + 32;
        out = malloc(len);
        if (out)
            snprintf(out, len, "/files?path=%s&username=%s", p, u);
    }
    free(p);
    free(u);
    return out;
}

/* A /files request with the handle's headers. */
static void files_request(sbx_sandbox *sb, struct sbxp_http_request *req,
                          struct e2b_headers *hs, struct sbxp_call_cancel *c, const char *method,
                          const char *path)
{
    memset(req, 0, sizeof *req);
    e2b_envd_headers(sb, hs);
    req->method = method;
    req->path = path;
    req->headers = hs->v;
    req->connect_timeout_ms = sb->st->cfg.connect_timeout_ms;
    req->cancel = &c->c;
}

int e2b_read_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_sink *sink)
{
    struct e2b_state *st = sb->st;
    char *abs = NULL;
    int type;
    e2b_keep_alive(sb, call);
    int rc = e2b_resolve(sb, call, "read_file", path, 0, &abs, &type);
    if (rc != SBX_OK)
        return rc;
    if (type == E2B_FT_NONE) {
        rc = e2b_error(st, call, SBX_E_NOT_FOUND, "%s: read_file: %s does not exist",
                       st->cfg.provider, path);
        goto out;
    }
    if (type != E2B_FT_FILE) {
        rc = e2b_error(st, call, SBX_E_INVALID, "%s: read_file: %s is not a regular file",
                       st->cfg.provider, path);
        goto out;
    }
    char *rp = files_path(abs, st->cfg.user);
    if (!rp) {
        rc = e2b_error(st, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    struct e2b_headers hs = {{NULL}, 0};
    struct sbxp_http_request req;
    files_request(sb, &req, &hs, &c, "GET", rp);
    sbxp_http_error err;
    memset(&err, 0, sizeof err);
    rc = e2b_wake(sb, call, &err);
    if (rc == SBX_OK)
        rc = sbxp_http_request(sb->envd, &req, sink, NULL, &err);
    /* An error status delivers nothing to the sink: safe to repeat. */
    if (rc != SBX_OK && e2b_envd_resume(sb, call, &err) == SBX_OK)
        rc = sbxp_http_request(sb->envd, &req, sink, NULL, &err);
    free(rp);
    if (rc != SBX_OK && err.from_callback)
        goto out; /* the sink said why */
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
        rc = e2b_error(st, call, SBX_E_NOT_FOUND, "%s: read_file: %s does not exist",
                       st->cfg.provider, path);
    else if (rc != SBX_OK)
        rc = e2b_envd_report(sb, call, &err, "read_file %s", path);
out:
    free(abs);
    return rc;
}

/* The temporary name beside abs: "<dir>/.<base>.sbx-<hex>". */
static char *temp_name(const char *abs)
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return NULL;
    const char *slash = strrchr(abs, '/');
    size_t dl = (size_t)(slash - abs);
    size_t len = strlen(abs) + 32;
    char *t = malloc(len);
    if (!t)
        return NULL;
    int n = snprintf(t, len, "%.*s/.%s.sbx-", (int)dl, abs, slash + 1);
    for (size_t i = 0; i < sizeof r; i++)
        n += snprintf(t + n, len - (size_t)n, "%02x", r[i]);
    return t;
}

/* filesystem.Move from -> to (rename, replacing to). */
static int move_path(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                     sbxp_http_error *err)
{
    json_object *body = json_object_new_object();
    if (!body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "source", json_object_new_string(from));
    json_object_object_add(body, "destination", json_object_new_string(to));
    int rc = e2b_envd_unary(sb, call, "filesystem.Filesystem/Move", body, NULL, 0, err);
    json_object_put(body);
    return rc;
}

int e2b_files_upload(sbx_sandbox *sb, sbx_call *call, const char *abs, const char *user,
                     const struct sbx_source *src, sbxp_http_error *err)
{
    struct e2b_state *st = sb->st;
    char *rp = files_path(abs, user ? user : st->cfg.user);
    if (!rp)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    struct e2b_headers hs = {{NULL}, 0};
    struct sbxp_http_request req;
    files_request(sb, &req, &hs, &c, "POST", rp);
    req.content_type = "application/octet-stream";
    req.body_src = src;
    req.body_src_len = -1;
    if (src->size >= SBX_SOURCE_SIZE_1_0 && src->length) {
        int64_t l = src->length(src->ctx);
        if (l >= 0)
            req.body_src_len = l;
    }
    memset(err, 0, sizeof *err);
    /* The body streams from src and cannot be sent twice: resume first
     * (a sandbox paused elsewhere was resumed by the path checks that
     * precede every upload). */
    int rc = e2b_wake(sb, call, err);
    if (rc == SBX_OK)
        rc = sbxp_http_request(sb->envd, &req, NULL, NULL, err);
    free(rp);
    return rc;
}

int e2b_write_file(sbx_sandbox *sb, sbx_call *call, const char *path,
                   const struct sbx_source *src, unsigned mode)
{
    struct e2b_state *st = sb->st;
    if (mode & ~0777u)
        return e2b_error(st, call, SBX_E_INVALID, "%s: write_file: mode %o has bits outside 0777",
                         st->cfg.provider, mode);
    if (mode == 0)
        mode = 0644;
    char *abs = NULL, *tmp = NULL;
    int type;
    e2b_keep_alive(sb, call);
    int rc = e2b_resolve(sb, call, "write_file", path, 0, &abs, &type);
    if (rc != SBX_OK)
        return rc;
    if (type != E2B_FT_NONE && type != E2B_FT_FILE) {
        rc = e2b_error(st, call, SBX_E_INVALID, "%s: write_file: %s is not a regular file",
                       st->cfg.provider, path);
        goto out;
    }
    /* envd writes as root: without this check a write would change a
     * published skill, which the sandbox's own commands cannot. */
    if (e2b_in_skill(sb, abs)) {
        rc = e2b_error(st, call, SBX_E_INVALID,
                       "%s: write_file: %s is part of a published skill (read-only; "
                       "install a new version instead)",
                       st->cfg.provider, path);
        goto out;
    }
    tmp = temp_name(abs);
    if (!tmp) {
        rc = e2b_error(st, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    sbxp_http_error err;
    rc = e2b_files_upload(sb, call, tmp, NULL, src, &err);
    if (rc != SBX_OK) {
        sbxp_http_error e2;
        e2b_remove(sb, NULL, tmp, &e2);
        if (!err.from_callback)
            rc = e2b_envd_report(sb, call, &err, "write_file %s", path);
        goto out;
    }
    /* chmod by name inside the directory: the command sees the sandbox's
     * file system, whatever the path looks like from envd. */
    char mbuf[8], msg[256];
    snprintf(mbuf, sizeof mbuf, "%04o", mode);
    char *slash = strrchr(tmp, '/');
    *slash = '\0';
    const char *chmod_argv[] = {"chmod", mbuf, slash + 1, NULL};
    int code = -1;
    rc = e2b_exec_helper(sb, call, tmp[0] ? tmp : "/", chmod_argv, &code, msg, sizeof msg);
    *slash = '/';
    if (rc == SBX_OK && code != 0)
        rc = e2b_error(st, call, SBX_E_IO, "%s: write_file %s: chmod failed: %s",
                       st->cfg.provider, path, msg);
    if (rc == SBX_OK) {
        rc = move_path(sb, call, tmp, abs, &err);
        if (rc != SBX_OK)
            rc = e2b_envd_report(sb, call, &err, "write_file %s: renaming into place", path);
    }
    if (rc != SBX_OK) {
        sbxp_http_error e2;
        e2b_remove(sb, NULL, tmp, &e2);
    }
out:
    free(tmp);
    free(abs);
    return rc;
}

int e2b_files_get(sbx_sandbox *sb, sbx_call *call, const char *abs,
                  const struct sbx_sink *sink, sbxp_http_error *err)
{
    struct e2b_state *st = sb->st;
    char *rp = files_path(abs, st->cfg.user);
    if (!rp)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    struct e2b_headers hs = {{NULL}, 0};
    struct sbxp_http_request req;
    files_request(sb, &req, &hs, &c, "GET", rp);
    req.timeout_ms = st->cfg.request_timeout_ms;
    memset(err, 0, sizeof *err);
    int rc = e2b_wake(sb, call, err);
    if (rc != SBX_OK) {
        free(rp);
        return rc;
    }
    rc = sbxp_http_request(sb->envd, &req, sink, NULL, err);
    if (rc != SBX_OK && !err->from_callback && err->http_status != 404 &&
        e2b_envd_resume(sb, call, err) == SBX_OK)
        rc = sbxp_http_request(sb->envd, &req, sink, NULL, err);
    free(rp);
    return rc;
}
