/*
 * paths.c - keeping file operations inside the workspace. execd follows
 * symlinks, so the path and every prefix of it are looked at with one GET
 * /files/info; when all exist and none is a symlink the path is as
 * written. Otherwise (a symlink on the way, or a part that does not exist
 * yet) realpath -m in the sandbox resolves it and the result must still lie
 * inside the workspace. A symlink swapped in between the check and the use
 * is not caught: this guards against mistakes and hostile content, not
 * against a racing process inside the sandbox. See osb.h.
 */
#include "osb.h"

#include "text_sink.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PARTS 128

static int type_of(const char *t)
{
    if (!t)
        return OSB_FT_OTHER;
    if (!strcmp(t, "file"))
        return OSB_FT_FILE;
    if (!strcmp(t, "directory"))
        return OSB_FT_DIR;
    if (!strcmp(t, "symlink"))
        return OSB_FT_LINK;
    return OSB_FT_OTHER;
}

/* GET /files/info?path=p1&path=p2...: the types in order; SBX_E_NOT_FOUND
 * when one is missing. */
static int info(sbx_sandbox *sb, sbx_call *call, char **paths, int n, int *types,
                sbxp_http_error *err)
{
    size_t len = 32;
    char **esc = calloc((size_t)n, sizeof *esc);
    if (!esc)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    int rc = SBX_OK;
    for (int i = 0; i < n && rc == SBX_OK; i++) {
        esc[i] = sbxp_http_escape(paths[i]);
        if (!esc[i])
            rc = sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
        else
            len += strlen(esc[i]) + 6;
    }
    char *q = rc == SBX_OK ? malloc(len) : NULL;
    if (rc == SBX_OK && !q)
        rc = sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    if (rc == SBX_OK) {
        size_t o = (size_t)snprintf(q, len, "/files/info");
        for (int i = 0; i < n; i++)
            o += (size_t)snprintf(q + o, len - o, "%cpath=%s", i ? '&' : '?', esc[i]);
        json_object *doc = NULL;
        rc = osb_service_json(sb, call, &sb->execd, "GET", q, NULL, &doc, 1, err);
        for (int i = 0; rc == SBX_OK && i < n; i++) {
            json_object *fi = NULL;
            if (!doc || !json_object_object_get_ex(doc, paths[i], &fi))
                rc = sbxp_http_fail(err, SBX_E_PROTOCOL, "GET /files/info: %s missing from the answer",
                                    paths[i]);
            else
                types[i] = type_of(sbxp_json_str(fi, "type"));
        }
        json_object_put(doc);
    }
    for (int i = 0; i < n; i++)
        free(esc[i]);
    free(esc);
    free(q);
    return rc;
}

/* Inside root (root itself when allow_root)? */
static int inside(const char *p, const char *root, int allow_root)
{
    size_t l = strlen(root);
    return !strncmp(p, root, l) && (p[l] == '/' || (allow_root && p[l] == '\0'));
}

/* realpath -m in the sandbox, then the type of what it names. */
static int slow_path(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                     const char *root, int allow_root, char **abs, int *type)
{
    struct osb_state *st = sb->st;
    char *q = osb_quote(*abs);
    if (!q)
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    size_t len = strlen(q) + 32;
    char *text = malloc(len);
    if (!text) {
        free(q);
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    snprintf(text, len, "exec realpath -m -- %s", q);
    free(q);
    char answer[4096];
    struct sbxp_text_sink cap;
    sbxp_text_sink_init(&cap, answer, sizeof answer);
    char msg[256];
    int code = -1;
    int rc = osb_sh(sb, call, text, &cap.sink, 30000, &code, msg, sizeof msg);
    free(text);
    if (rc != SBX_OK)
        return rc;
    if (code != 0)
        return osb_error(st, call, SBX_E_IO, "opensandbox: %s: resolving %s: %s", what, rel, msg);
    cap.buf[strcspn(cap.buf, "\n")] = '\0';
    if (!inside(cap.buf, root, allow_root))
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: %s: %s: a symlink leads out of the workspace", what, rel);
    char *resolved = strdup(cap.buf);
    if (!resolved)
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    free(*abs);
    *abs = resolved;
    sbxp_http_error err;
    int t = OSB_FT_NONE;
    char *one[1] = {resolved};
    rc = info(sb, call, one, 1, &t, &err);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404) {
        *type = OSB_FT_NONE;
        return SBX_OK;
    }
    if (rc != SBX_OK)
        return osb_service_report(sb, call, &err, "%s: looking at %s", what, resolved);
    *type = t;
    return SBX_OK;
}

int osb_resolve(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                int allow_root, char **abs, int *type)
{
    struct osb_state *st = sb->st;
    const char *root = st->cfg.workspace;
    *abs = NULL;
    *type = OSB_FT_NONE;
    if (!rel || (!*rel && !allow_root))
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: %s: empty path", what);
    size_t ol = strlen(OSB_OUTPUTS);
    if (!strncmp(rel, OSB_OUTPUTS, ol) && (rel[ol] == '/' || rel[ol] == '\0')) {
        root = OSB_OUTPUTS;
        rel += ol;
        while (*rel == '/')
            rel++;
    }
    if (rel[0] == '/')
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: %s: %s is absolute; paths are relative to the workspace",
                         what, rel);
    for (const char *p = rel; *p; p++)
        if ((unsigned char)*p < 0x20)
            return osb_error(st, call, SBX_E_INVALID, "opensandbox: %s: control character in path",
                             what);
    /* Lexically: ".." may not climb above the root. */
    char *copy = strdup(rel);
    if (!copy)
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    char *parts[MAX_PARTS];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(copy, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (!strcmp(t, "."))
            continue;
        if (!strcmp(t, "..")) {
            if (n == 0) {
                free(copy);
                return osb_error(st, call, SBX_E_INVALID,
                                 "opensandbox: %s: %s leads out of the workspace", what, rel);
            }
            n--;
            continue;
        }
        if (n == MAX_PARTS) {
            free(copy);
            return osb_error(st, call, SBX_E_INVALID, "opensandbox: %s: path too deep", what);
        }
        parts[n++] = t;
    }
    if (n == 0 && !allow_root) {
        free(copy);
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: %s: %s names the workspace itself",
                         what, rel);
    }
    /* The root and every prefix, the full path last. */
    char *prefixes[MAX_PARTS + 1];
    int np = 0, rc = SBX_OK;
    size_t len = strlen(root) + 1;
    for (int i = 0; i < n; i++)
        len += strlen(parts[i]) + 1;
    for (int i = 0; i <= n && rc == SBX_OK; i++) {
        char *p = malloc(len);
        if (!p) {
            rc = osb_error(st, call, SBX_E_NOMEM, "out of memory");
            break;
        }
        strcpy(p, root);
        for (int j = 0; j < i; j++) {
            strcat(p, "/");
            strcat(p, parts[j]);
        }
        prefixes[np++] = p;
    }
    free(copy);
    if (rc == SBX_OK) {
        *abs = strdup(prefixes[np - 1]);
        if (!*abs)
            rc = osb_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    int types[MAX_PARTS + 1];
    sbxp_http_error err;
    int fast = 0;
    if (rc == SBX_OK) {
        int r2 = info(sb, call, prefixes, np, types, &err);
        if (r2 == SBX_OK) {
            fast = 1;
            for (int i = 0; i < np - 1; i++)
                if (types[i] != OSB_FT_DIR)
                    fast = 0;
            if (types[np - 1] == OSB_FT_LINK)
                fast = 0;
            *type = types[np - 1];
        } else if (!(r2 == SBX_E_NOT_FOUND && err.http_status == 404)) {
            rc = osb_service_report(sb, call, &err, "%s: looking at %s", what, rel);
        }
    }
    if (rc == SBX_OK && !fast)
        rc = slow_path(sb, call, what, rel, root, allow_root, abs, type);
    for (int i = 0; i < np; i++)
        free(prefixes[i]);
    if (rc != SBX_OK) {
        free(*abs);
        *abs = NULL;
    }
    return rc;
}
