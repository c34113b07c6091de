/*
 * files.c - read_file and write_file through execd, streamed both ways:
 * GET /files/download into the sink; POST /files/upload as multipart
 * form data, a metadata part (FileMetadata: path, mode) and then the file
 * part fed from the source as it is read. A write goes to a temporary
 * name beside the target and is renamed over it only after the upload
 * completed, so readers see the old content or the new: POST /files/mv
 * for a new file, mv -T in the sandbox over an existing one (execd's mv
 * refuses an existing destination, utils.go RenameFile).
 * See osb.h.
 */
#include "osb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

int osb_mkdirs(sbx_sandbox *sb, sbx_call *call, const char *abs, sbxp_http_error *err)
{
    return osb_mkdir_mode(sb, call, abs, 0755, err);
}

int osb_mkdir_mode(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
                   sbxp_http_error *err)
{
    json_object *body = json_object_new_object();
    json_object *perm = json_object_new_object();
    if (!body || !perm) {
        json_object_put(body);
        json_object_put(perm);
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    }
    /* Permission.mode is the octal digits as a decimal number (755). */
    char octal[16];
    snprintf(octal, sizeof octal, "%o", mode & 0777u);
    json_object_object_add(perm, "mode", json_object_new_int(atoi(octal)));
    json_object_object_add(body, abs, perm);
    int rc = osb_service_json(sb, call, &sb->execd, "POST", "/directories", body, NULL, 1, err);
    json_object_put(body);
    return rc;
}

int osb_remove(sbx_sandbox *sb, sbx_call *call, const char *abs)
{
    char *e = sbxp_http_escape(abs);
    if (!e)
        return SBX_E_NOMEM;
    size_t len = strlen(e) + 16;
    char *path = malloc(len);
    int rc = SBX_E_NOMEM;
    if (path) {
        snprintf(path, len, "/files?path=%s", e);
        sbxp_http_error err;
        rc = osb_service_json(sb, call, &sb->execd, "DELETE", path, NULL, NULL, 1, &err);
        if (rc == SBX_E_NOT_FOUND)
            rc = SBX_OK;
    }
    free(path);
    free(e);
    return rc;
}

int osb_download(sbx_sandbox *sb, sbx_call *call, const char *abs, const char *what,
                 const struct sbx_sink *sink)
{
    struct osb_state *st = sb->st;
    char *e = sbxp_http_escape(abs);
    if (!e)
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    size_t len = strlen(e) + 32;
    char *path = malloc(len);
    if (!path) {
        free(e);
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    snprintf(path, len, "/files/download?path=%s", e);
    free(e);
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    const char *hdrs[16];
    struct sbxp_http_request req;
    osb_service_request(sb, &sb->execd, &req, hdrs, 16, NULL, &c);
    req.method = "GET";
    req.path = path;
    req.stall_timeout_ms = st->cfg.request_timeout_ms;
    sbxp_http_error err;
    memset(&err, 0, sizeof err);
    int rc = sbxp_http_request(sb->execd.http, &req, sink, NULL, &err);
    free(path);
    if (rc == SBX_OK || err.from_callback)
        return rc;
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404) {
        /* execd's 404 for a missing file, or the sandbox gone? */
        json_object *doc = NULL;
        sbxp_http_error e2;
        if (osb_api_get(st, NULL, sb->id, &doc, &e2) == SBX_E_NOT_FOUND)
            return osb_error(st, call, SBX_E_NOT_FOUND,
                             "opensandbox: %s: sandbox %s no longer exists", what, sb->id);
        json_object_put(doc);
        return osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: %s does not exist", what);
    }
    return osb_service_report(sb, call, &err, "%s", what);
}

int osb_read_file(sbx_sandbox *sb, sbx_call *call, const char *path, const struct sbx_sink *sink)
{
    struct osb_state *st = sb->st;
    char *abs = NULL;
    int type;
    int rc = osb_resolve(sb, call, "read_file", path, 0, &abs, &type);
    if (rc != SBX_OK)
        return rc;
    if (type == OSB_FT_NONE)
        rc = osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: read_file: %s does not exist", path);
    else if (type != OSB_FT_FILE)
        rc = osb_error(st, call, SBX_E_INVALID, "opensandbox: read_file: %s is not a regular file",
                       path);
    else {
        char what[512];
        snprintf(what, sizeof what, "read_file %s", path);
        osb_keep_alive(sb, call);
        rc = osb_download(sb, call, abs, what, sink);
    }
    free(abs);
    return rc;
}

/* The multipart body: head (boundary, metadata part, file part header),
 * the source's bytes, tail (closing boundary). */
struct mp {
    const struct sbx_source *src;
    char head[2048];
    size_t head_len, head_off;
    char tail[128];
    size_t tail_len, tail_off;
    int src_done;
};

static long mp_read(void *ctx, void *buf, size_t cap)
{
    struct mp *m = ctx;
    if (m->head_off < m->head_len) {
        size_t n = m->head_len - m->head_off < cap ? m->head_len - m->head_off : cap;
        memcpy(buf, m->head + m->head_off, n);
        m->head_off += n;
        return (long)n;
    }
    if (!m->src_done) {
        long n = m->src->read(m->src->ctx, buf, cap);
        if (n != 0)
            return n; /* data, or -1: the source has said why */
        m->src_done = 1;
    }
    size_t n = m->tail_len - m->tail_off < cap ? m->tail_len - m->tail_off : cap;
    memcpy(buf, m->tail + m->tail_off, n);
    m->tail_off += n;
    return (long)n;
}

int osb_upload(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
               const struct sbx_source *src, sbxp_http_error *err)
{
    struct osb_state *st = sb->st;
    unsigned char rnd[12];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return sbxp_http_fail(err, SBX_E_IO, "no randomness for a multipart boundary");
    char boundary[64] = "sbx-";
    for (size_t i = 0; i < sizeof rnd; i++)
        snprintf(boundary + 4 + 2 * i, 3, "%02x", rnd[i]);
    json_object *meta = json_object_new_object();
    if (!meta)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(meta, "path", json_object_new_string(abs));
    /* FileMetadata.mode is the octal digits as a decimal number (644). */
    if (mode) {
        char octal[16];
        snprintf(octal, sizeof octal, "%o", mode);
        json_object_object_add(meta, "mode", json_object_new_int(atoi(octal)));
    }
    struct mp m;
    memset(&m, 0, sizeof m);
    m.src = src;
    int n = snprintf(m.head, sizeof m.head,
                     "--%s\r\nContent-Disposition: form-data; name=\"metadata\"\r\n"
                     "Content-Type: application/json\r\n\r\n%s\r\n"
                     "--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"file\"\r\n"
                     "Content-Type: application/octet-stream\r\n\r\n",
                     boundary, json_object_to_json_string_ext(meta, JSON_C_TO_STRING_PLAIN),
                     boundary);
    json_object_put(meta);
    if (n < 0 || (size_t)n >= sizeof m.head)
        return sbxp_http_fail(err, SBX_E_INVALID, "path too long for an upload");
    m.head_len = (size_t)n;
    m.tail_len = (size_t)snprintf(m.tail, sizeof m.tail, "\r\n--%s--\r\n", boundary);
    char ctype[128];
    snprintf(ctype, sizeof ctype, "multipart/form-data; boundary=%s", boundary);
    struct sbx_source body = SBX_SOURCE_INIT(&m, mp_read);
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    const char *hdrs[16];
    struct sbxp_http_request req;
    osb_service_request(sb, &sb->execd, &req, hdrs, 16, NULL, &c);
    req.method = "POST";
    req.path = "/files/upload";
    req.content_type = ctype;
    req.body_src = &body;
    req.body_src_len = -1;
    if (src->size >= SBX_SOURCE_SIZE_1_0 && src->length) {
        int64_t l = src->length(src->ctx);
        if (l >= 0)
            req.body_src_len = (int64_t)m.head_len + l + (int64_t)m.tail_len;
    }
    req.stall_timeout_ms = st->cfg.request_timeout_ms;
    memset(err, 0, sizeof *err);
    return sbxp_http_request(sb->execd.http, &req, NULL, NULL, err);
}

int osb_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to, int to_exists,
               const char *what)
{
    if (!to_exists) {
        json_object *body = json_object_new_array();
        json_object *it = json_object_new_object();
        if (!body || !it) {
            json_object_put(body);
            json_object_put(it);
            return osb_error(sb->st, call, SBX_E_NOMEM, "out of memory");
        }
        json_object_object_add(it, "src", json_object_new_string(from));
        json_object_object_add(it, "dest", json_object_new_string(to));
        json_object_array_add(body, it);
        sbxp_http_error err;
        int rc = osb_service_json(sb, call, &sb->execd, "POST", "/files/mv", body, NULL, 0, &err);
        json_object_put(body);
        return rc == SBX_OK ? SBX_OK : osb_service_report(sb, call, &err, "%s", what);
    }
    /* execd's mv refuses an existing destination: rename(2) in the sandbox
     * (-T: never into a directory of that name). */
    const char *argv[] = {"mv", "-f", "-T", "--", from, to, NULL};
    char msg[256];
    int code = 0;
    int rc = osb_helper(sb, call, argv, NULL, 30000, &code, msg, sizeof msg);
    if (rc == SBX_OK && code != 0)
        rc = osb_error(sb->st, call, SBX_E_IO, "opensandbox: %s: mv failed (%d): %s", what, code,
                       msg);
    return rc;
}

/* "<dir>/.<base>.sbx-<hex>" beside abs. */
static char *temp_name(const char *abs)
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return NULL;
    const char *slash = strrchr(abs, '/');
    size_t len = strlen(abs) + 32;
    char *t = malloc(len);
    if (!t)
        return NULL;
    int n = snprintf(t, len, "%.*s/.%s.sbx-", (int)(slash - abs), abs, slash + 1);
    for (size_t i = 0; i < sizeof r; i++)
        n += snprintf(t + n, len - (size_t)n, "%02x", r[i]);
    return t;
}

int osb_write_file(sbx_sandbox *sb, sbx_call *call, const char *path, const struct sbx_source *src,
                   unsigned mode)
{
    struct osb_state *st = sb->st;
    if (mode & ~0777u)
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: write_file: mode %o has bits outside 0777", mode);
    if (mode == 0)
        mode = 0644;
    char *abs = NULL, *tmp = NULL;
    int type;
    int rc = osb_resolve(sb, call, "write_file", path, 0, &abs, &type);
    if (rc != SBX_OK)
        return rc;
    sbxp_http_error err;
    if (type != OSB_FT_NONE && type != OSB_FT_FILE) {
        rc = osb_error(st, call, SBX_E_INVALID, "opensandbox: write_file: %s is not a regular file",
                       path);
        goto out;
    }
    osb_keep_alive(sb, call);
    tmp = temp_name(abs);
    if (!tmp) {
        rc = osb_error(st, call, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    if (type == OSB_FT_NONE) {
        char *slash = strrchr(abs, '/');
        *slash = '\0';
        rc = osb_mkdirs(sb, call, abs, &err);
        *slash = '/';
        if (rc != SBX_OK) {
            rc = osb_service_report(sb, call, &err, "write_file %s: creating its directory", path);
            goto out;
        }
    }
    rc = osb_upload(sb, call, tmp, mode, src, &err);
    if (rc == SBX_OK) {
        char what[512];
        snprintf(what, sizeof what, "write_file %s: renaming into place", path);
        rc = osb_rename(sb, call, tmp, abs, type == OSB_FT_FILE, what);
    } else {
        rc = osb_service_report(sb, call, &err, "write_file %s", path);
    }
    if (rc != SBX_OK)
        osb_remove(sb, NULL, tmp);
out:
    free(tmp);
    free(abs);
    return rc;
}
