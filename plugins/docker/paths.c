/*
 * paths.c - keeping file operations inside the workspace.
 *
 * Two layers. First a lexical check of the caller's path (relative, no
 * "..", no control bytes). Then, because the sandbox may have planted
 * symlinks, every existing component is looked at inside the container with
 * HEAD /containers/{id}/archive, whose X-Docker-Container-Path-Stat header
 * carries the fully resolved target of a symlink; a target outside the
 * workspace is refused. A process inside the container racing us could swap
 * a component between the check and the transfer; it can only reach files of
 * its own container that way, never the host's (the daemon resolves every
 * path within the container's root).
 *
 * With sbx-agent only the first layer is here (docker_path_rooted: the
 * workspace or the outputs root and the lexical check); the agent opens
 * the path beneath that root itself (openat2 RESOLVE_BENEATH, agent/files.c).
 */
#include "docker.h"

#include <openssl/evp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PATH_MAX_LEN 4096

int docker_path_check(struct docker_state *st, sbx_call *call, const char *what,
                      const char *path, int allow_root, char **out)
{
    *out = NULL;
    if (!path)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: %s: no path given", what);
    size_t len = strlen(path);
    if (len > PATH_MAX_LEN)
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: %s: path longer than %d bytes", what,
                                   PATH_MAX_LEN);
    if (path[0] == '/')
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: %s \"%.200s\": absolute paths are not "
                                   "allowed; give a path relative to the workspace",
                                   what, path);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
            return st->host->set_error(st->host, call, SBX_E_INVALID,
                                       "docker: %s: path contains a control "
                                       "character",
                                       what);
    char *norm = malloc(len + 1);
    if (!norm)
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    size_t used = 0;
    const char *p = path;
    while (*p) {
        size_t n = strcspn(p, "/");
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            free(norm);
            return st->host->set_error(st->host, call, SBX_E_INVALID,
                                       "docker: %s \"%.200s\": \"..\" is not "
                                       "allowed; the path must stay inside the "
                                       "workspace",
                                       what, path);
        }
        if (n > 255) {
            free(norm);
            return st->host->set_error(st->host, call, SBX_E_INVALID,
                                       "docker: %s: a path component is longer "
                                       "than 255 bytes",
                                       what);
        }
        if (n > 0 && !(n == 1 && p[0] == '.')) {
            if (used)
                norm[used++] = '/';
            memcpy(norm + used, p, n);
            used += n;
        }
        p += n;
        if (*p == '/')
            p++;
    }
    norm[used] = '\0';
    if (!used && !allow_root) {
        free(norm);
        return st->host->set_error(st->host, call, SBX_E_INVALID,
                                   "docker: %s \"%.200s\" names the workspace root, "
                                   "not a file",
                                   what, path);
    }
    *out = norm;
    return SBX_OK;
}

int docker_stat_parse(const char *value, struct docker_stat *out)
{
    size_t len = strlen(value);
    if (len == 0 || len > 16384 || len % 4 != 0)
        return -1;
    unsigned char *raw = malloc(len / 4 * 3 + 1);
    if (!raw)
        return -1;
    int n = EVP_DecodeBlock(raw, (const unsigned char *)value, (int)len);
    if (n < 0) {
        free(raw);
        return -1;
    }
    /* EVP_DecodeBlock keeps the zero bytes that padding stands for */
    while (n > 0 && raw[n - 1] == '\0')
        n--;
    json_tokener *tok = json_tokener_new();
    json_object *obj = tok ? json_tokener_parse_ex(tok, (const char *)raw, n) : NULL;
    if (tok)
        json_tokener_free(tok);
    free(raw);
    if (!obj || !json_object_is_type(obj, json_type_object)) {
        json_object_put(obj);
        return -1;
    }
    out->exists = 1;
    out->mode = (uint32_t)sbxp_json_int(obj, "mode", 0);
    out->size = sbxp_json_int(obj, "size", 0);
    const char *lt = sbxp_json_str(obj, "linkTarget");
    snprintf(out->link_target, sizeof out->link_target, "%s", lt ? lt : "");
    json_object_put(obj);
    return 0;
}

struct stat_hdr {
    struct docker_stat *st;
    int seen;
    int bad;
};

static int on_stat_header(void *ctx, const char *name, const char *value)
{
    struct stat_hdr *h = ctx;
    if (strcasecmp(name, "X-Docker-Container-Path-Stat") == 0) {
        h->seen = 1;
        if (docker_stat_parse(value, h->st) != 0)
            h->bad = 1;
    }
    return 0;
}

int docker_stat_path(sbx_sandbox *sb, sbx_call *call, const char *abs_path,
                     struct docker_stat *out, sbxp_http_error *err)
{
    struct docker_state *st = sb->st;
    memset(out, 0, sizeof *out);
    char *esc = sbxp_http_escape(abs_path);
    if (!esc)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    char path[PATH_MAX_LEN * 3 + 256];
    int bad = docker_path(st, path, sizeof path, "/containers/%s/archive?path=%s",
                          sb->id, esc);
    free(esc);
    if (bad)
        return sbxp_http_fail(err, SBX_E_INVALID, "path too long");
    struct sbxp_call_cancel dc;
    sbxp_call_cancel_init(&dc, st->host, call);
    struct stat_hdr h = {out, 0, 0};
    struct sbxp_http_request req = {0};
    req.method = "HEAD";
    req.path = path;
    req.cancel = &dc.c;
    req.on_header = on_stat_header;
    req.header_ctx = &h;
    req.timeout_ms = st->cfg.request_timeout_ms;
    long status = 0;
    int rc = sbxp_http_request(st->http, &req, NULL, &status, err);
    if (rc == SBX_E_NOT_FOUND) {
        /* a missing path; a missing container says so in the body, but HEAD
         * has none: tell them apart by asking for the container */
        json_object *info = NULL;
        sbxp_http_error e2;
        int rc2 = docker_json(st, call, "GET", NULL, &info, &e2, "/containers/%s/json",
                              sb->id);
        json_object_put(info);
        if (rc2 == SBX_E_NOT_FOUND)
            return sbxp_http_fail(err, SBX_E_NOT_FOUND,
                                 "container %.12s no longer exists", sb->id);
        memset(out, 0, sizeof *out);
        return SBX_OK;
    }
    if (rc != SBX_OK)
        return rc;
    if (!h.seen || h.bad)
        return sbxp_http_fail(err, SBX_E_PROTOCOL,
                             "HEAD archive: missing or malformed path stat header");
    return SBX_OK;
}

static int inside(const char *root, const char *p)
{
    size_t n = strlen(root);
    return strncmp(p, root, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

int docker_path_rooted(sbx_sandbox *sb, sbx_call *call, const char *what,
                       const char *path, const char **root, char **rel)
{
    struct docker_state *st = sb->st;
    size_t n = strlen(DOCKER_OUTPUTS);
    *root = DOCKER_WORKSPACE;
    if (path && strncmp(path, DOCKER_OUTPUTS, n) == 0 &&
        (path[n] == '/' || path[n] == '\0')) {
        if (!sb->outputs_src)
            return st->host->set_error(st->host, call, SBX_E_UNSUPPORTED,
                                       "docker: %s \"%.200s\": container %.12s was "
                                       "created without the %s mount",
                                       what, path, sb->id, DOCKER_OUTPUTS);
        *root = DOCKER_OUTPUTS;
        path += n;
        while (*path == '/')
            path++;
    }
    return docker_path_check(st, call, what, path, 0, rel);
}

int docker_resolve(sbx_sandbox *sb, sbx_call *call, const char *root, const char *rel,
                   char **resolved, size_t *existing, struct docker_stat *fst)
{
    struct docker_state *st = sb->st;
    *resolved = NULL;
    *existing = 0;
    memset(fst, 0, sizeof *fst);
    size_t cap = PATH_MAX_LEN * 2 + strlen(root) + 2;
    char *cur = malloc(cap);
    if (!cur)
        return st->host->set_error(st->host, call, SBX_E_NOMEM, "out of memory");
    snprintf(cur, cap, "%s", root);
    const char *p = rel;
    size_t count = 0;
    while (*p) {
        size_t n = strcspn(p, "/");
        size_t used = strlen(cur);
        if (used + 1 + n + 1 > cap) {
            free(cur);
            return st->host->set_error(st->host, call, SBX_E_INVALID,
                                       "docker: path \"%.200s\" resolves to a path "
                                       "that is too long",
                                       rel);
        }
        cur[used] = '/';
        memcpy(cur + used + 1, p, n);
        cur[used + 1 + n] = '\0';
        p += n;
        if (*p == '/')
            p++;
        int last = *p == '\0';

        struct docker_stat s;
        sbxp_http_error err;
        int rc = docker_stat_path(sb, call, cur, &s, &err);
        if (rc != SBX_OK) {
            free(cur);
            return docker_report(st, call, &err, "looking up \"%.200s\"", rel);
        }
        if (!s.exists) {
            /* the rest does not exist yet: append it unresolved */
            if (*p) {
                used = strlen(cur);
                if (used + 1 + strlen(p) + 1 > cap) {
                    free(cur);
                    return st->host->set_error(st->host, call, SBX_E_INVALID,
                                               "docker: path too long");
                }
                snprintf(cur + used, cap - used, "/%s", p);
            }
            *resolved = cur;
            *existing = count;
            return SBX_OK;
        }
        count++;
        if (s.mode & DOCKER_MODE_SYMLINK) {
            if (!s.link_target[0] || !inside(root, s.link_target)) {
                free(cur);
                return st->host->set_error(st->host, call, SBX_E_INVALID,
                                           "docker: \"%.200s\": a symlink in the "
                                           "path leads out of %s (to %.200s)",
                                           rel, root,
                                           s.link_target[0] ? s.link_target : "?");
            }
            snprintf(cur, cap, "%s", s.link_target);
            /* what the link points at */
            rc = docker_stat_path(sb, call, cur, &s, &err);
            if (rc != SBX_OK) {
                free(cur);
                return docker_report(st, call, &err, "looking up \"%.200s\"", rel);
            }
            if (!s.exists) {
                if (*p) {
                    used = strlen(cur);
                    snprintf(cur + used, cap - used, "/%s", p);
                }
                *resolved = cur;
                *existing = count - 1;
                return SBX_OK;
            }
        }
        if (!last && !(s.mode & DOCKER_MODE_DIR)) {
            free(cur);
            return st->host->set_error(st->host, call, SBX_E_INVALID,
                                       "docker: \"%.200s\": a component of the path "
                                       "is not a directory",
                                       rel);
        }
        if (last)
            *fst = s;
    }
    *resolved = cur;
    *existing = count;
    return SBX_OK;
}
