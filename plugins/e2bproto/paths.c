/*
 * paths.c - keeping file operations inside the workspace. envd resolves
 * paths itself and follows symlinks, so each component is looked at with
 * filesystem.Stat (which does not follow a final symlink) and a symlink is
 * replaced by its target only when that stays inside the workspace.
 *
 * The limit: envd's calls take paths, never handles, and follow symlinks
 * in every component (GET/POST /files, filesystem.Move), with no
 * no-follow or directory-relative form, so the check and the use are two
 * requests and a process inside the sandbox that swaps a component for a
 * symlink between them redirects the use. envd runs as root (username only
 * sets the new file's owner), so such a race can reach any path of the
 * sandbox's VM, but never the host. This guards against mistakes and hostile
 * content (symlinks that exist when the call is made), not against a
 * racing process. See e2b_core.h.
 */
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LINKS 32
#define MAX_PARTS 128

int e2b_stat(sbx_sandbox *sb, sbx_call *call, const char *abs, int *type, char *target,
             size_t cap, sbxp_http_error *err)
{
    *type = E2B_FT_NONE;
    if (target && cap)
        target[0] = '\0';
    json_object *body = json_object_new_object();
    if (!body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "path", json_object_new_string(abs));
    json_object *doc = NULL;
    int rc = e2b_envd_unary(sb, call, "filesystem.Filesystem/Stat", body, &doc, 1, err);
    json_object_put(body);
    if (rc == SBX_E_NOT_FOUND && err->http_status == 404)
        return SBX_OK;
    if (rc != SBX_OK)
        return rc;
    json_object *entry = sbxp_json_obj(doc, "entry");
    const char *t = sbxp_json_str(entry, "type");
    if (!t)
        *type = E2B_FT_OTHER;
    else if (!strcmp(t, "FILE_TYPE_FILE"))
        *type = E2B_FT_FILE;
    else if (!strcmp(t, "FILE_TYPE_DIRECTORY"))
        *type = E2B_FT_DIR;
    else if (!strcmp(t, "FILE_TYPE_SYMLINK"))
        *type = E2B_FT_LINK;
    else
        *type = E2B_FT_OTHER;
    const char *lt = sbxp_json_str(entry, "symlinkTarget");
    if (*type == E2B_FT_LINK && target && lt)
        snprintf(target, cap, "%s", lt);
    if (*type == E2B_FT_LINK && (!lt || !*lt))
        *type = E2B_FT_OTHER; /* a link we cannot follow is refused */
    json_object_put(doc);
    return SBX_OK;
}

/* Split path into parts (borrowed from buf, which is modified), applying
 * "." and "..": -1 when ".." climbs above the start, else the count. */
static int split(char *buf, char **parts, int n, int max)
{
    for (char *save = NULL, *t = strtok_r(buf, "/", &save); t;
         t = strtok_r(NULL, "/", &save)) {
        if (!strcmp(t, "."))
            continue;
        if (!strcmp(t, "..")) {
            if (n == 0)
                return -1;
            n--;
            continue;
        }
        if (n == max)
            return -1;
        parts[n++] = t;
    }
    return n;
}

/* Join ws and parts[0..n) into a malloc'd absolute path. */
static char *join(const char *ws, char **parts, int n)
{
    size_t len = strlen(ws) + 1;
    for (int i = 0; i < n; i++)
        len += strlen(parts[i]) + 1;
    char *s = malloc(len);
    if (!s)
        return NULL;
    strcpy(s, ws);
    for (int i = 0; i < n; i++) {
        strcat(s, "/");
        strcat(s, parts[i]);
    }
    return s;
}

int e2b_resolve(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                int allow_root, char **abs, int *type)
{
    struct e2b_state *st = sb->st;
    const char *ws = st->cfg.workspace;
    *abs = NULL;
    *type = E2B_FT_NONE;
    if (!rel || (!*rel && !allow_root))
        return e2b_error(st, call, SBX_E_INVALID, "%s: %s: empty path", st->cfg.provider,
                         what);
    size_t ol = strlen(E2B_OUTPUTS);
    if (!strncmp(rel, E2B_OUTPUTS, ol) && (rel[ol] == '/' || rel[ol] == '\0')) {
        ws = E2B_OUTPUTS;
        rel += ol;
        while (*rel == '/')
            rel++;
    }
    size_t wl = strlen(ws);
    if (rel[0] == '/')
        return e2b_error(st, call, SBX_E_INVALID,
                         "%s: %s: %s is absolute; paths are relative to the workspace",
                         st->cfg.provider, what, rel);
    for (const char *p = rel; *p; p++)
        if ((unsigned char)*p < 0x20)
            return e2b_error(st, call, SBX_E_INVALID, "%s: %s: control character in path",
                             st->cfg.provider, what);
    /* The path being resolved: what is left after the resolved prefix. */
    char *pending = strdup(rel);
    char *parts[MAX_PARTS];
    int links = 0, n = 0, rc = SBX_OK;
    if (!pending)
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    char *todo[MAX_PARTS];
    int nt = split(pending, todo, 0, MAX_PARTS);
    if (nt < 0) {
        free(pending);
        return e2b_error(st, call, SBX_E_INVALID, "%s: %s: %s leads out of the workspace",
                         st->cfg.provider, what, rel);
    }
    if (nt == 0 && !allow_root) {
        free(pending);
        return e2b_error(st, call, SBX_E_INVALID, "%s: %s: %s names the workspace itself",
                         st->cfg.provider, what, rel);
    }
    /* parts[] holds the resolved prefix, todo[] the rest; both point into
     * strings kept alive in a small arena of link targets. */
    char *arena[MAX_LINKS + 1];
    int na = 0;
    arena[na++] = pending;
    int ti = 0;
    int ftype = nt == 0 ? E2B_FT_DIR : E2B_FT_NONE;
    while (ti < nt) {
        parts[n++] = todo[ti++];
        char *cand = join(ws, parts, n);
        if (!cand) {
            rc = e2b_error(st, call, SBX_E_NOMEM, "out of memory");
            goto out;
        }
        char target[4096];
        sbxp_http_error err;
        int t;
        rc = e2b_stat(sb, call, cand, &t, target, sizeof target, &err);
        if (rc != SBX_OK) {
            rc = e2b_envd_report(sb, call, &err, "%s: looking at %s", what, cand);
            free(cand);
            goto out;
        }
        free(cand);
        if (t == E2B_FT_NONE) {
            /* The rest does not exist: no link can be on it. */
            while (ti < nt)
                parts[n++] = todo[ti++];
            ftype = E2B_FT_NONE;
            break;
        }
        if (t == E2B_FT_LINK) {
            if (++links > MAX_LINKS || na > MAX_LINKS) {
                rc = e2b_error(st, call, SBX_E_INVALID, "%s: %s: %s: too many symlinks",
                               st->cfg.provider, what, rel);
                goto out;
            }
            const char *inside;
            int base;
            if (target[0] == '/') {
                if (strncmp(target, ws, wl) != 0 || (target[wl] && target[wl] != '/')) {
                    rc = e2b_error(st, call, SBX_E_INVALID,
                                   "%s: %s: %s: a symlink leads out of the workspace",
                                   st->cfg.provider, what, rel);
                    goto out;
                }
                inside = target + wl;
                base = 0;
            } else {
                inside = target;
                base = n - 1; /* relative to the link's directory */
            }
            /* The new path: the link's target, then what was left. */
            size_t len = strlen(inside) + 2;
            for (int i = ti; i < nt; i++)
                len += strlen(todo[i]) + 1;
            char *again = malloc(len);
            if (!again) {
                rc = e2b_error(st, call, SBX_E_NOMEM, "out of memory");
                goto out;
            }
            strcpy(again, inside);
            for (int i = ti; i < nt; i++) {
                strcat(again, "/");
                strcat(again, todo[i]);
            }
            arena[na++] = again;
            /* ".." in the target may climb into the resolved prefix, never
             * above the workspace. */
            char *merged[MAX_PARTS];
            for (int i = 0; i < base; i++)
                merged[i] = parts[i];
            int m = split(again, merged, base, MAX_PARTS);
            if (m < 0) {
                rc = e2b_error(st, call, SBX_E_INVALID,
                               "%s: %s: %s: a symlink leads out of the workspace",
                               st->cfg.provider, what, rel);
                goto out;
            }
            /* Everything in merged gets checked again from the start. */
            for (int i = 0; i < m; i++)
                todo[i] = merged[i];
            nt = m;
            ti = 0;
            n = 0;
            ftype = nt == 0 ? E2B_FT_DIR : E2B_FT_NONE;
            if (nt == 0 && !allow_root) {
                rc = e2b_error(st, call, SBX_E_INVALID,
                               "%s: %s: %s resolves to the workspace itself",
                               st->cfg.provider, what, rel);
                goto out;
            }
            continue;
        }
        if (t != E2B_FT_DIR && ti < nt) {
            rc = e2b_error(st, call, SBX_E_INVALID, "%s: %s: %s: a component is not a directory",
                           st->cfg.provider, what, rel);
            goto out;
        }
        ftype = t;
    }
    *abs = join(ws, parts, n);
    *type = ftype;
    if (!*abs)
        rc = e2b_error(st, call, SBX_E_NOMEM, "out of memory");
out:
    for (int i = 0; i < na; i++)
        free(arena[i]);
    return rc;
}

int e2b_resolve_entry(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                      int allow_root, char **abs, int *type, int *parent_type)
{
    struct e2b_state *st = sb->st;
    *abs = NULL;
    *type = *parent_type = E2B_FT_NONE;
    char *copy = strdup(rel ? rel : "");
    if (!copy)
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *base = slash ? slash + 1 : copy;
    int rc;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..") ||
        (copy[0] == '/' && !strcmp(copy, E2B_OUTPUTS))) {
        /* The root, or a name that is not an entry of its parent: resolved
         * as a whole (it names a directory). */
        rc = e2b_resolve(sb, call, what, copy, allow_root, abs, type);
        *parent_type = E2B_FT_DIR;
        free(copy);
        return rc;
    }
    for (const char *p = base; *p; p++)
        if ((unsigned char)*p < 0x20) {
            free(copy);
            return e2b_error(st, call, SBX_E_INVALID, "%s: %s: control character in path",
                             st->cfg.provider, what);
        }
    char *parent = NULL;
    if (slash) {
        *slash = '\0';
        rc = e2b_resolve(sb, call, what, copy[0] ? copy : "/", 1, &parent, parent_type);
    } else {
        rc = e2b_resolve(sb, call, what, "", 1, &parent, parent_type);
    }
    if (rc != SBX_OK) {
        free(copy);
        return rc;
    }
    size_t len = strlen(parent) + strlen(base) + 2;
    *abs = malloc(len);
    if (!*abs) {
        free(parent);
        free(copy);
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    snprintf(*abs, len, "%s/%s", parent, base);
    free(parent);
    free(copy);
    if (*parent_type != E2B_FT_DIR)
        return SBX_OK; /* nothing below a missing parent */
    sbxp_http_error err;
    rc = e2b_stat(sb, call, *abs, type, NULL, 0, &err);
    if (rc != SBX_OK) {
        rc = e2b_envd_report(sb, call, &err, "%s: looking at %s", what, *abs);
        free(*abs);
        *abs = NULL;
    }
    return rc;
}
