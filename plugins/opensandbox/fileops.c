/*
 * fileops.c - SBX_CAP_FILE_OPS through execd's file API: GET
 * /directories/list (read entry by entry, listing.c), GET /files/info
 * (lstat: a symlink is reported as itself), POST /directories (MkdirAll,
 * then the mode set exactly), DELETE /files (a file), DELETE /directories
 * (RemoveAll: a directory tree without following its symlinks, or a
 * symlink itself), POST /files/mv (refuses an existing destination; a
 * replacing rename is mv -T in the sandbox, files.c).
 *
 * Confinement as for read_file (paths.c): the parent of the path is
 * resolved inside the workspace (a symlink on the way must stay inside,
 * else SBX_E_INVALID); the last component is never followed. As in
 * paths.c, a symlink swapped in by a racing process inside the sandbox
 * between the check and the call is not caught. See osb.h.
 */
#include "osb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 128

/* "755" (octal digits written as a decimal number) as 0755. */
static uint32_t mode_of(json_object *fi)
{
    json_object *m = NULL;
    if (!json_object_object_get_ex(fi, "mode", &m))
        return 0;
    int64_t v = json_object_get_int64(m);
    uint32_t out = 0, shift = 0;
    for (; v > 0 && shift < 15; v /= 10, shift += 3)
        out |= (uint32_t)(v % 10 & 7) << shift;
    return out & 07777;
}

static uint32_t type_of(const char *t)
{
    if (!t)
        return SBX_FILE_OTHER;
    if (!strcmp(t, "file"))
        return SBX_FILE_REGULAR;
    if (!strcmp(t, "directory"))
        return SBX_FILE_DIR;
    if (!strcmp(t, "symlink"))
        return SBX_FILE_SYMLINK;
    return SBX_FILE_OTHER;
}

static void info_of(json_object *fi, const char *name, struct sbx_file_info *out)
{
    uint32_t size = out->size;
    memset(out, 0, sizeof *out);
    out->size = size;
    out->type = type_of(sbxp_json_str(fi, "type"));
    out->name = name;
    json_object *sz = NULL;
    if (json_object_object_get_ex(fi, "size", &sz) && json_object_get_int64(sz) > 0)
        out->bytes = (uint64_t)json_object_get_int64(sz);
    out->mode = mode_of(fi);
    out->mtime_ns = osb_parse_time_ns(sbxp_json_str(fi, "modified_at"));
}

/* GET /files/info of one absolute path: *doc (the FileInfo, a new
 * reference) or NULL when it does not exist. */
static int lstat_abs(sbx_sandbox *sb, sbx_call *call, const char *abs, json_object **fi,
                     const char *what)
{
    *fi = NULL;
    char *e = sbxp_http_escape(abs);
    if (!e)
        return osb_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    size_t len = strlen(e) + 24;
    char *q = malloc(len);
    if (!q) {
        free(e);
        return osb_error(sb->st, call, SBX_E_NOMEM, "out of memory");
    }
    snprintf(q, len, "/files/info?path=%s", e);
    free(e);
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = osb_service_json(sb, call, &sb->execd, "GET", q, NULL, &doc, 1, &err);
    free(q);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
        return SBX_OK;
    if (rc != SBX_OK)
        return osb_service_report(sb, call, &err, "%s: looking at %s", what, abs);
    json_object *one = NULL;
    if (!doc || !json_object_object_get_ex(doc, abs, &one) ||
        !json_object_is_type(one, json_type_object)) {
        json_object_put(doc);
        return osb_error(sb->st, call, SBX_E_PROTOCOL,
                         "opensandbox: %s: GET /files/info answered without %s", what, abs);
    }
    *fi = json_object_get(one);
    json_object_put(doc);
    return SBX_OK;
}

/*
 * A workspace-relative path without following its last component: *abs
 * (malloc'd), *fi its FileInfo or NULL when it does not exist, *is_root.
 * The parent must exist unless parents_may_miss (then it is resolved like
 * a path being created: inside the workspace).
 */
static int locate(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                  int parents_may_miss, char **abs, json_object **fi, int *is_root)
{
    struct osb_state *st = sb->st;
    *abs = NULL;
    *fi = NULL;
    *is_root = 0;
    if (!rel)
        rel = "";
    if (rel[0] == '/')
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: %s: %s is absolute; paths are relative to the workspace",
                         what, rel);
    for (const char *p = rel; *p; p++)
        if ((unsigned char)*p < 0x20)
            return osb_error(st, call, SBX_E_INVALID, "opensandbox: %s: control character in path",
                             what);
    /* "dir/." and "dir/" name dir through itself: followed like a parent. */
    size_t rl = strlen(rel);
    int through = rl && (rel[rl - 1] == '/' || (rel[rl - 1] == '.' && (rl == 1 || rel[rl - 2] == '/')));
    /* Lexically: "." dropped, ".." may not climb above the root. */
    char *copy = strdup(rel);
    char *norm = malloc(strlen(rel) + 2);
    if (!copy || !norm) {
        free(copy);
        free(norm);
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    char *parts[MAX_DEPTH];
    int n = 0, rc = SBX_OK;
    for (char *save = NULL, *t = strtok_r(copy, "/", &save); t && rc == SBX_OK;
         t = strtok_r(NULL, "/", &save)) {
        if (!strcmp(t, "."))
            continue;
        if (!strcmp(t, "..")) {
            if (n == 0)
                rc = osb_error(st, call, SBX_E_INVALID,
                               "opensandbox: %s: %s leads out of the workspace", what, rel);
            else
                n--;
            continue;
        }
        if (n == MAX_DEPTH)
            rc = osb_error(st, call, SBX_E_INVALID, "opensandbox: %s: path too deep", what);
        else
            parts[n++] = t;
    }
    if (rc == SBX_OK && n == 0) {
        *is_root = 1;
        *abs = strdup(st->cfg.workspace);
        rc = *abs ? lstat_abs(sb, call, *abs, fi, what)
                  : osb_error(st, call, SBX_E_NOMEM, "out of memory");
        free(copy);
        free(norm);
        return rc;
    }
    if (rc == SBX_OK && through) {
        int type = OSB_FT_NONE;
        rc = osb_resolve(sb, call, what, rel, 1, abs, &type);
        if (rc == SBX_OK && type != OSB_FT_NONE)
            rc = lstat_abs(sb, call, *abs, fi, what);
        if (rc == SBX_OK && type == OSB_FT_NONE && !parents_may_miss)
            rc = osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: %s: %s does not exist", what,
                           rel);
        *is_root = rc == SBX_OK && !strcmp(*abs, st->cfg.workspace);
        free(copy);
        free(norm);
        if (rc != SBX_OK) {
            free(*abs);
            *abs = NULL;
            json_object_put(*fi);
            *fi = NULL;
        }
        return rc;
    }
    size_t o = 0;
    for (int i = 0; rc == SBX_OK && i < n - 1; i++)
        o += (size_t)sprintf(norm + o, "%s%s", i ? "/" : "", parts[i]);
    norm[o] = '\0';
    char *parent = NULL;
    int ptype = OSB_FT_NONE;
    if (rc == SBX_OK)
        rc = osb_resolve(sb, call, what, norm, 1, &parent, &ptype);
    if (rc == SBX_OK && ptype == OSB_FT_NONE && !parents_may_miss)
        rc = osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: %s: the directory of %s does not "
                                                  "exist", what, rel);
    else if (rc == SBX_OK && ptype != OSB_FT_NONE && ptype != OSB_FT_DIR)
        rc = osb_error(st, call, SBX_E_INVALID,
                       "opensandbox: %s: the parent of %s is not a directory", what, rel);
    if (rc == SBX_OK) {
        size_t len = strlen(parent) + strlen(parts[n - 1]) + 2;
        *abs = malloc(len);
        if (!*abs)
            rc = osb_error(st, call, SBX_E_NOMEM, "out of memory");
        else
            snprintf(*abs, len, "%s/%s", parent, parts[n - 1]);
    }
    if (rc == SBX_OK && ptype != OSB_FT_NONE)
        rc = lstat_abs(sb, call, *abs, fi, what);
    free(parent);
    free(copy);
    free(norm);
    if (rc != SBX_OK) {
        free(*abs);
        *abs = NULL;
        json_object_put(*fi);
        *fi = NULL;
    }
    return rc;
}

/* ---- list -------------------------------------------------------------- */

struct list_ctx {
    sbx_sandbox *sb;
    sbx_call *call;
    const struct sbx_file_list_sink *sink;
};

static int on_entry(void *ctx, json_object *fi)
{
    struct list_ctx *l = ctx;
    const struct sbx_host *host = l->sb->st->host;
    if (host->cancelled && host->cancelled(host, l->call))
        return osb_error(l->sb->st, l->call, SBX_E_CANCELLED, "opensandbox: file_list cancelled");
    const char *path = sbxp_json_str(fi, "path");
    const char *name = path ? strrchr(path, '/') : NULL;
    name = name ? name + 1 : path;
    if (!name || !*name || !strcmp(name, ".") || !strcmp(name, ".."))
        return SBX_OK;
    struct sbx_file_info info;
    info.size = sizeof info;
    info_of(fi, name, &info);
    return l->sink->entry(l->sink->ctx, &info);
}

int osb_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                  const struct sbx_file_list_sink *sink)
{
    struct osb_state *st = sb->st;
    char *abs;
    json_object *fi;
    int root;
    int rc = locate(sb, call, "file_list", path, 0, &abs, &fi, &root);
    if (rc != SBX_OK)
        return rc;
    if (!fi)
        rc = osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: file_list: %s does not exist",
                       path);
    else if (type_of(sbxp_json_str(fi, "type")) != SBX_FILE_DIR)
        rc = osb_error(st, call, SBX_E_INVALID, "opensandbox: file_list: %s is not a directory",
                       path);
    json_object_put(fi);
    if (rc == SBX_OK) {
        osb_keep_alive(sb, call);
        struct list_ctx l = {sb, call, sink};
        sbxp_http_error err;
        rc = osb_list_dir(sb, call, abs, 1, on_entry, &l, &err);
        if (rc != SBX_OK && !err.from_callback)
            rc = osb_service_report(sb, call, &err, "file_list %s", path ? path : "");
    }
    free(abs);
    return rc;
}

/* ---- stat -------------------------------------------------------------- */

int osb_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path, struct sbx_file_info *out)
{
    char *abs;
    json_object *fi;
    int root;
    int rc = locate(sb, call, "file_stat", path, 0, &abs, &fi, &root);
    if (rc != SBX_OK)
        return rc;
    if (!fi)
        rc = osb_error(sb->st, call, SBX_E_NOT_FOUND, "opensandbox: file_stat: %s does not exist",
                       path);
    else
        info_of(fi, NULL, out);
    json_object_put(fi);
    free(abs);
    return rc;
}

/* ---- mkdir ------------------------------------------------------------- */

int osb_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                   uint32_t flags)
{
    struct osb_state *st = sb->st;
    if (mode & ~0777u)
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: file_mkdir: mode %o has bits outside 0777", mode);
    if (flags & ~SBX_MKDIR_PARENTS)
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: file_mkdir: unknown flags");
    if (!mode)
        mode = 0755;
    int parents = (flags & SBX_MKDIR_PARENTS) != 0;
    char *abs;
    json_object *fi;
    int root;
    int rc = locate(sb, call, "file_mkdir", path, parents, &abs, &fi, &root);
    if (rc != SBX_OK)
        return rc;
    if (fi) {
        int dir = type_of(sbxp_json_str(fi, "type")) == SBX_FILE_DIR;
        if (!(dir && parents))
            rc = osb_error(st, call, SBX_E_EXISTS, "opensandbox: file_mkdir: %s exists",
                           root ? "the workspace" : path);
    } else {
        osb_keep_alive(sb, call);
        sbxp_http_error err;
        rc = osb_mkdir_mode(sb, call, abs, mode, &err);
        if (rc != SBX_OK)
            rc = osb_service_report(sb, call, &err, "file_mkdir %s", path);
    }
    json_object_put(fi);
    free(abs);
    return rc;
}

/* ---- remove ------------------------------------------------------------ */

static int first_entry(void *ctx, json_object *fi)
{
    (void)fi;
    *(int *)ctx = 1;
    return SBX_E_EXISTS; /* one is enough */
}

static int delete_path(sbx_sandbox *sb, sbx_call *call, const char *route, const char *abs,
                       sbxp_http_error *err)
{
    char *e = sbxp_http_escape(abs);
    if (!e)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    size_t len = strlen(e) + 32;
    char *q = malloc(len);
    int rc = q ? SBX_OK : sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    if (q) {
        snprintf(q, len, "%s?path=%s", route, e);
        rc = osb_service_json(sb, call, &sb->execd, "DELETE", q, NULL, NULL, 1, err);
    }
    free(q);
    free(e);
    return rc;
}

int osb_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags)
{
    struct osb_state *st = sb->st;
    if (flags & ~SBX_REMOVE_RECURSIVE)
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: file_remove: unknown flags");
    char *abs;
    json_object *fi;
    int root;
    int rc = locate(sb, call, "file_remove", path, 0, &abs, &fi, &root);
    if (rc != SBX_OK)
        return rc;
    uint32_t type = fi ? type_of(sbxp_json_str(fi, "type")) : 0;
    json_object_put(fi);
    sbxp_http_error err;
    if (root)
        rc = osb_error(st, call, SBX_E_INVALID,
                       "opensandbox: file_remove: the workspace itself cannot be removed");
    else if (!type)
        rc = osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: file_remove: %s does not exist",
                       path);
    else if (type == SBX_FILE_DIR && !(flags & SBX_REMOVE_RECURSIVE)) {
        int any = 0;
        rc = osb_list_dir(sb, call, abs, 1, first_entry, &any, &err);
        if (any)
            rc = osb_error(st, call, SBX_E_EXISTS,
                           "opensandbox: file_remove: %s is a directory with entries (remove "
                           "it recursively)", path);
        else if (rc != SBX_OK)
            rc = osb_service_report(sb, call, &err, "file_remove %s", path);
    }
    if (rc == SBX_OK) {
        osb_keep_alive(sb, call);
        /* DELETE /files follows a symlink (os.Stat first); RemoveAll
         * removes the link itself, and a tree without following links. */
        rc = delete_path(sb, call, type == SBX_FILE_REGULAR || type == SBX_FILE_OTHER
                                        ? "/files" : "/directories", abs, &err);
        if (rc != SBX_OK)
            rc = osb_service_report(sb, call, &err, "file_remove %s", path);
    }
    free(abs);
    return rc;
}

/* ---- rename ------------------------------------------------------------ */

int osb_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                    uint32_t flags)
{
    struct osb_state *st = sb->st;
    if (flags & ~SBX_RENAME_NOREPLACE)
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: file_rename: unknown flags");
    char *src = NULL, *dst = NULL;
    json_object *sfi = NULL, *dfi = NULL;
    int sroot, droot;
    int rc = locate(sb, call, "file_rename", from, 0, &src, &sfi, &sroot);
    if (rc == SBX_OK)
        rc = locate(sb, call, "file_rename", to, 0, &dst, &dfi, &droot);
    if (rc == SBX_OK && (sroot || droot))
        rc = osb_error(st, call, SBX_E_INVALID,
                       "opensandbox: file_rename: the workspace itself cannot be renamed");
    else if (rc == SBX_OK && !sfi)
        rc = osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: file_rename: %s does not exist",
                       from);
    else if (rc == SBX_OK && dfi && (flags & SBX_RENAME_NOREPLACE))
        rc = osb_error(st, call, SBX_E_EXISTS, "opensandbox: file_rename: %s exists", to);
    if (rc == SBX_OK && strcmp(src, dst)) {
        osb_keep_alive(sb, call);
        char what[512];
        snprintf(what, sizeof what, "file_rename %s to %s", from, to);
        /* execd's mv follows a symlink source (os.Stat): a symlink is
         * renamed as itself with mv -T in the sandbox. */
        int link = type_of(sbxp_json_str(sfi, "type")) == SBX_FILE_SYMLINK;
        rc = osb_rename(sb, call, src, dst, dfi != NULL || link, what);
    }
    json_object_put(sfi);
    json_object_put(dfi);
    free(src);
    free(dst);
    return rc;
}
