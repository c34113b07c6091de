/*
 * fileops.c - file operations (SBX_CAP_FILE_OPS) through the toolbox's
 * files API (swagger.yaml /files...):
 *
 *   list    GET    /files?path=             [FileInfo], parsed entry by entry
 *                                           as it arrives (memory bounded by
 *                                           one entry, whatever the size)
 *   stat    GET    /files/info?path=        FileInfo (a symlink: its entry in
 *                                           the parent's listing, as the
 *                                           daemon's info follows it)
 *   mkdir   POST   /files/folder?path=&mode=, then /files/permissions
 *   remove  DELETE /files?path=&recursive=
 *   rename  POST   /files/move?source=&destination= (refuses to replace:
 *                                           rename(2) in the sandbox then)
 *
 * Every path is first resolved inside the sandbox by daytona_resolve_entry
 * (paths.c): the parent with symlinks followed and kept in the workspace,
 * the last component as it is. A FileInfo's type is its Go FileMode string
 * (mode): "d..." directory, "L..." symlink, "-..." regular, else other;
 * permissions is the octal mode, modifiedAt RFC 3339. See daytona.h.
 */

#include "daytona.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Largest single FileInfo accepted in a listing. */
#define ENTRY_MAX (64 * 1024)

/* RFC 3339 ("2026-12-03T00:04:12.123456789Z", "...+02:00") as ns since the
 * epoch; 0 when it does not parse. */
static int64_t rfc3339_ns(const char *s)
{
    if (!s)
        return 0;
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int n = 0;
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
               &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6)
        return 0;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const char *p = s + n;
    int64_t frac = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; *p >= '0' && *p <= '9'; p++)
            if (digits < 9) {
                frac = frac * 10 + (*p - '0');
                digits++;
            }
        for (; digits < 9; digits++)
            frac *= 10;
    }
    int64_t off = 0;
    if (*p == '+' || *p == '-') {
        int h = 0, m = 0;
        if (sscanf(p + 1, "%2d:%2d", &h, &m) == 2)
            off = (int64_t)(h * 3600 + m * 60) * (*p == '-' ? -1 : 1);
    }
    time_t t = timegm(&tm);
    return ((int64_t)t - off) * 1000000000LL + frac;
}

/* A FileInfo as an sbx_file_info; name borrowed from j (NULL to leave it). */
static void to_info(json_object *j, struct sbx_file_info *out, int with_name)
{
    uint32_t size = out->size;
    memset(out, 0, sizeof *out);
    out->size = size;
    const char *mode = sbxp_json_str(j, "mode");
    if (sbxp_json_bool(j, "isDir", 0) || (mode && mode[0] == 'd'))
        out->type = SBX_FILE_DIR;
    else if (mode && (mode[0] == 'L' || mode[0] == 'l'))
        out->type = SBX_FILE_SYMLINK;
    else if (!mode || mode[0] == '-')
        out->type = SBX_FILE_REGULAR;
    else
        out->type = SBX_FILE_OTHER;
    int64_t sz = sbxp_json_int(j, "size", 0);
    out->bytes = sz > 0 ? (uint64_t)sz : 0;
    const char *perm = sbxp_json_str(j, "permissions");
    out->mode = perm ? (uint32_t)strtoul(perm, NULL, 8) & 07777u : 0;
    out->mtime_ns = rfc3339_ns(sbxp_json_str(j, "modifiedAt"));
    if (with_name)
        out->name = sbxp_json_str(j, "name");
}

/* ---- streamed listing ------------------------------------------------- */

/* Parses "[ {...}, {...} ]" as it arrives, one element at a time. */
struct lister {
    json_tokener *tok;
    int state;        /* 0 before '[', 1 between elements, 2 in one, 3 done */
    size_t entry_len; /* bytes of the current element so far */
    int status;       /* a sink's stop, or SBX_E_PROTOCOL */
    char why[96];
    int (*fn)(void *ctx, json_object *entry);
    void *ctx;
};

static int lister_write(void *ctx, const void *data, size_t len)
{
    struct lister *l = ctx;
    const char *p = data, *end = p + len;
    while (p < end && !l->status) {
        if (l->state == 0 || l->state == 1) {
            char c = *p;
            if (c == ' ' || c == '\n' || c == '\r' || c == '\t' || (l->state == 1 && c == ',')) {
                p++;
            } else if (l->state == 0 && c == '[') {
                l->state = 1;
                p++;
            } else if (l->state == 1 && c == ']') {
                l->state = 3;
                p++;
            } else if (l->state == 1 && c == '{') {
                l->state = 2;
                l->entry_len = 0;
                json_tokener_reset(l->tok);
            } else if (l->state == 0 && c == 'n') {
                l->state = 3; /* null: an empty directory, as Go's nil slice */
                p = end;
            } else {
                l->status = SBX_E_PROTOCOL;
                snprintf(l->why, sizeof l->why, "unexpected '%c' in the listing", c);
            }
        } else if (l->state == 2) {
            json_object *o = json_tokener_parse_ex(l->tok, p, (int)(end - p));
            enum json_tokener_error e = json_tokener_get_error(l->tok);
            if (o) {
                size_t used = json_tokener_get_parse_end(l->tok);
                p += used;
                l->state = 1;
                l->status = l->fn(l->ctx, o);
                json_object_put(o);
            } else if (e == json_tokener_continue) {
                l->entry_len += (size_t)(end - p);
                p = end;
                if (l->entry_len > ENTRY_MAX) {
                    l->status = SBX_E_PROTOCOL;
                    snprintf(l->why, sizeof l->why, "an entry of the listing is over %d bytes",
                             ENTRY_MAX);
                }
            } else {
                l->status = SBX_E_PROTOCOL;
                snprintf(l->why, sizeof l->why, "the listing is not JSON: %s",
                         json_tokener_error_desc(e));
            }
        } else {
            p = end; /* trailing bytes after ']' */
        }
    }
    return l->status;
}

/* GET /files?path=abs, fn called per entry; reports its own errors except
 * a stop by fn (returned as is). */
static int list_dir(sbx_sandbox *sb, sbx_call *call, const char *what, const char *abs,
                    int (*fn)(void *ctx, json_object *entry), void *ctx)
{
    struct daytona_state *st = sb->st;
    struct lister l;
    memset(&l, 0, sizeof l);
    l.fn = fn;
    l.ctx = ctx;
    l.tok = json_tokener_new();
    char *q = daytona_tb_query("/files", "path", abs, NULL, NULL);
    if (!l.tok || !q) {
        if (l.tok)
            json_tokener_free(l.tok);
        free(q);
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    struct sbx_sink sink = SBX_SINK_INIT(&l, lister_write);
    sbxp_http_error err;
    int rc = daytona_tb_get(sb, call, q, &sink, &err);
    free(q);
    json_tokener_free(l.tok);
    if (rc != SBX_OK && err.from_callback) {
        if (l.status == SBX_E_PROTOCOL && l.why[0])
            return daytona_error(st, call, SBX_E_PROTOCOL, DT ": %s: %s", what, l.why);
        return l.status ? l.status : rc; /* the caller's sink said why */
    }
    if (rc != SBX_OK)
        return daytona_tb_report(sb, call, &err, "%s", what);
    if (l.state != 3)
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": %s: the listing ended early", what);
    return SBX_OK;
}

struct list_ctx {
    const struct sbx_file_list_sink *sink;
};

static int list_entry(void *ctx, json_object *j)
{
    struct list_ctx *c = ctx;
    struct sbx_file_info fi = {.size = sizeof fi};
    to_info(j, &fi, 1);
    if (!fi.name || !*fi.name || strchr(fi.name, '/') || !strcmp(fi.name, ".") ||
        !strcmp(fi.name, ".."))
        return 0; /* not an entry of this directory */
    return c->sink->entry(c->sink->ctx, &fi);
}

static int not_found(struct daytona_state *st, sbx_call *call, const char *what,
                     const char *path)
{
    return daytona_error(st, call, SBX_E_NOT_FOUND, DT ": %s: %s does not exist", what,
                         path && *path ? path : ".");
}

int daytona_file_list(sbx_sandbox *sb, sbx_call *call, const char *path,
                      const struct sbx_file_list_sink *sink)
{
    struct daytona_state *st = sb->st;
    char *abs = NULL;
    enum daytona_etype t;
    int rc = daytona_resolve_entry(sb, call, "file_list", path, 0, &abs, &t);
    if (rc != SBX_OK)
        return rc;
    if (t == DT_ET_MISSING || t == DT_ET_NO_PARENT)
        rc = not_found(st, call, "file_list", path);
    else if (t != DT_ET_DIR)
        rc = daytona_error(st, call, SBX_E_INVALID, DT ": file_list: %s is not a directory%s",
                           path, t == DT_ET_SYMLINK ? " (a symlink, not followed)" : "");
    else {
        struct list_ctx c = {sink};
        char what[160];
        snprintf(what, sizeof what, "file_list %s", path && *path ? path : ".");
        rc = list_dir(sb, call, what, abs, list_entry, &c);
    }
    free(abs);
    return rc;
}

/* ---- stat ------------------------------------------------------------- */

struct find_ctx {
    const char *name;
    struct sbx_file_info *out;
    int found;
};

static int find_entry(void *ctx, json_object *j)
{
    struct find_ctx *f = ctx;
    const char *n = sbxp_json_str(j, "name");
    if (f->found || !n || strcmp(n, f->name) != 0)
        return 0;
    to_info(j, f->out, 0);
    f->found = 1;
    return 0;
}

int daytona_file_stat(sbx_sandbox *sb, sbx_call *call, const char *path,
                      struct sbx_file_info *out)
{
    struct daytona_state *st = sb->st;
    char *abs = NULL;
    enum daytona_etype t;
    int rc = daytona_resolve_entry(sb, call, "file_stat", path, 0, &abs, &t);
    if (rc != SBX_OK)
        return rc;
    if (t == DT_ET_MISSING || t == DT_ET_NO_PARENT) {
        free(abs);
        return not_found(st, call, "file_stat", path);
    }
    sbxp_http_error err;
    if (t == DT_ET_SYMLINK) {
        /* The daemon's info follows a symlink; its parent's listing shows
         * the link itself. */
        char *slash = strrchr(abs, '/');
        *slash = '\0';
        struct find_ctx f = {slash + 1, out, 0};
        rc = list_dir(sb, call, "file_stat", abs[0] ? abs : "/", find_entry, &f);
        if (rc == SBX_OK && !f.found)
            rc = not_found(st, call, "file_stat", path);
        free(abs);
        return rc;
    }
    char *q = daytona_tb_query("/files/info", "path", abs, NULL, NULL);
    free(abs);
    if (!q)
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    json_object *doc = NULL;
    rc = daytona_tb_json(sb, call, "GET", q, NULL, &doc, 1, st->cfg.request_timeout_ms, &err);
    free(q);
    if (rc == SBX_E_NOT_FOUND && err.http_status == 404) {
        json_object_put(doc);
        return not_found(st, call, "file_stat", path);
    }
    if (rc != SBX_OK) {
        json_object_put(doc);
        return daytona_tb_report(sb, call, &err, "file_stat %s", path);
    }
    if (!doc || !json_object_is_type(doc, json_type_object)) {
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": file_stat: not a FileInfo");
    }
    to_info(doc, out, 0);
    json_object_put(doc);
    return SBX_OK;
}

/* ---- mkdir, remove, rename ------------------------------------------- */

static int mkdir_one(sbx_sandbox *sb, sbx_call *call, const char *abs, unsigned mode,
                     const char *path)
{
    sbxp_http_error err;
    int rc = daytona_tb_mkdir(sb, call, abs, mode, &err);
    if (rc == SBX_OK)
        rc = daytona_tb_chmod(sb, call, abs, mode, &err); /* the daemon's umask */
    if (rc != SBX_OK)
        return daytona_tb_report(sb, call, &err, "file_mkdir %s", path);
    return SBX_OK;
}

int daytona_file_mkdir(sbx_sandbox *sb, sbx_call *call, const char *path, unsigned mode,
                       uint32_t flags)
{
    struct daytona_state *st = sb->st;
    if (mode & ~0777u)
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": file_mkdir: mode %o has bits outside 0777", mode);
    if (mode == 0)
        mode = 0755;
    int parents = (flags & SBX_MKDIR_PARENTS) != 0;
    char *abs = NULL;
    enum daytona_etype t;
    int rc = daytona_resolve_entry(sb, call, "file_mkdir", path, 0, &abs, &t);
    if (rc != SBX_OK)
        return rc;
    if (t == DT_ET_DIR && parents)
        rc = SBX_OK;
    else if (t != DT_ET_MISSING && t != DT_ET_NO_PARENT)
        rc = daytona_error(st, call, SBX_E_EXISTS, DT ": file_mkdir: %s exists",
                           path && *path ? path : ".");
    else if (t == DT_ET_NO_PARENT && !parents)
        rc = daytona_error(st, call, SBX_E_NOT_FOUND,
                           DT ": file_mkdir: the parent of %s does not exist", path);
    else {
        if (t == DT_ET_NO_PARENT) {
            /* The folder call makes every missing parent with the mode it
             * is given: the parents first, 0755. */
            char *slash = strrchr(abs, '/');
            *slash = '\0';
            sbxp_http_error err;
            rc = daytona_tb_mkdir(sb, call, abs, 0755, &err);
            *slash = '/';
            if (rc != SBX_OK)
                rc = daytona_tb_report(sb, call, &err, "file_mkdir %s: its parents", path);
        }
        if (rc == SBX_OK)
            rc = mkdir_one(sb, call, abs, mode, path);
    }
    free(abs);
    return rc;
}

int daytona_file_remove(sbx_sandbox *sb, sbx_call *call, const char *path, uint32_t flags)
{
    struct daytona_state *st = sb->st;
    char *abs = NULL;
    enum daytona_etype t;
    int recursive = (flags & SBX_REMOVE_RECURSIVE) != 0;
    int rc = daytona_resolve_entry(sb, call, "file_remove", path, !recursive, &abs, &t);
    if (rc != SBX_OK)
        return rc;
    sbxp_http_error err;
    if (!strcmp(abs, st->cfg.workspace))
        rc = daytona_error(st, call, SBX_E_INVALID,
                           DT ": file_remove: the workspace root cannot be removed");
    else if (t == DT_ET_MISSING || t == DT_ET_NO_PARENT)
        rc = not_found(st, call, "file_remove", path);
    else if (t == DT_ET_DIR && !recursive)
        rc = daytona_error(st, call, SBX_E_EXISTS,
                           DT ": file_remove: directory %s is not empty (remove it recursively)",
                           path);
    else {
        /* A directory goes with recursive=true (empty, or asked for); the
         * daemon removes a symlink as itself, never what it points to. */
        int dir = t == DT_ET_DIR || t == DT_ET_EMPTY_DIR;
        char *q = daytona_tb_query("/files", "path", abs, dir ? "recursive" : NULL,
                                   dir ? "true" : NULL);
        rc = q ? daytona_tb_json(sb, call, "DELETE", q, NULL, NULL, 1, st->cfg.request_timeout_ms,
                                 &err)
               : sbxp_http_fail(&err, SBX_E_NOMEM, "out of memory");
        free(q);
        if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
            rc = not_found(st, call, "file_remove", path);
        else if (rc != SBX_OK)
            rc = daytona_tb_report(sb, call, &err, "file_remove %s", path);
    }
    free(abs);
    return rc;
}

int daytona_file_rename(sbx_sandbox *sb, sbx_call *call, const char *from, const char *to,
                        uint32_t flags)
{
    struct daytona_state *st = sb->st;
    char *a = NULL, *b = NULL;
    enum daytona_etype ta, tb;
    int rc = daytona_resolve_entry(sb, call, "file_rename", from, 0, &a, &ta);
    if (rc == SBX_OK)
        rc = daytona_resolve_entry(sb, call, "file_rename", to, 0, &b, &tb);
    if (rc != SBX_OK)
        goto out;
    if (!strcmp(a, st->cfg.workspace) || !strcmp(b, st->cfg.workspace)) {
        rc = daytona_error(st, call, SBX_E_INVALID,
                           DT ": file_rename: the workspace root cannot be renamed");
        goto out;
    }
    if (ta == DT_ET_MISSING || ta == DT_ET_NO_PARENT) {
        rc = not_found(st, call, "file_rename", from);
        goto out;
    }
    if (tb == DT_ET_NO_PARENT) {
        rc = daytona_error(st, call, SBX_E_NOT_FOUND,
                           DT ": file_rename: the directory of %s does not exist", to);
        goto out;
    }
    if (!strcmp(a, b))
        goto out; /* rename(2) of a path onto itself does nothing */
    if (tb != DT_ET_MISSING && (flags & SBX_RENAME_NOREPLACE)) {
        rc = daytona_error(st, call, SBX_E_EXISTS, DT ": file_rename: %s exists", to);
        goto out;
    }
    sbxp_http_error err;
    rc = tb == DT_ET_MISSING ? daytona_tb_move(sb, call, a, b, &err) : SBX_E_EXISTS;
    if (rc == SBX_E_EXISTS && !(flags & SBX_RENAME_NOREPLACE)) {
        /* The daemon's move does not replace: rename(2) in the sandbox
         * (mv -T on one file system), which does. */
        const char *argv[] = {"mv", "-fT", "--", a, b, NULL};
        char msg[256];
        int code = -1;
        rc = daytona_exec_helper(sb, call, "/", argv, NULL, st->cfg.request_timeout_ms, &code, msg,
                                 sizeof msg);
        if (rc == SBX_OK && code != 0)
            rc = daytona_error(st, call, SBX_E_INVALID, DT ": file_rename %s to %s: %s", from, to,
                               msg);
    } else if (rc == SBX_E_EXISTS) {
        rc = daytona_error(st, call, SBX_E_EXISTS, DT ": file_rename: %s exists", to);
    } else if (rc == SBX_E_NOT_FOUND && err.http_status == 404) {
        rc = not_found(st, call, "file_rename", from);
    } else if (rc != SBX_OK) {
        rc = daytona_tb_report(sb, call, &err, "file_rename %s to %s", from, to);
    }
out:
    free(a);
    free(b);
    return rc;
}
