/*
 * paths.c - keeping file operations inside the workspace. The toolbox
 * follows symlinks and its file info does not say whether an entry is
 * one, so a path is resolved inside the sandbox by `realpath -m` (every
 * symlink followed, missing tails allowed) in one helper command, and
 * refused when the result leaves its root. A symlink swapped in between
 * the check and the use is not caught: the sandbox is the agent's own;
 * this guards against mistakes and hostile content, not against a racing
 * process inside it. See daytona.h.
 */
#include "daytona.h"

#include "confine.h"
#include "utf8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int daytona_sh_quote(char **buf, size_t *len, size_t *cap, const char *s)
{
    size_t need = *len + 4 * strlen(s) + 4;
    if (need > *cap) {
        size_t nc = *cap ? *cap : 256;
        while (nc < need)
            nc *= 2;
        char *nb = realloc(*buf, nc);
        if (!nb)
            return -1;
        *buf = nb;
        *cap = nc;
    }
    char *o = *buf + *len;
    if (*len)
        *o++ = ' ';
    *o++ = '\'';
    for (; *s; s++) {
        if (*s == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *s;
        }
    }
    *o++ = '\'';
    *o = '\0';
    *len = (size_t)(o - *buf);
    return 0;
}

/* $1 root, $2 path: prints "<t> <resolved>", t in d f o n; exit 4 when
 * the resolved path is outside the root. */
static const char RESOLVE_SH[] =
    "x=$(realpath -m -- \"$1\" \"$2\") || exit 3; r=${x%%\n*}; p=${x#*\n}; "
    "case \"$p\" in \"$r\"|\"$r\"/*) ;; *) exit 4;; esac; "
    "if [ -d \"$p\" ]; then t=d; elif [ -f \"$p\" ]; then t=f; "
    "elif [ -e \"$p\" ] || [ -L \"$p\" ]; then t=o; else t=n; fi; "
    "printf '%s %s' \"$t\" \"$p\"";

struct grab {
    char buf[4200];
    size_t len;
    int over;
};

static int grab_write(void *ctx, const void *data, size_t len)
{
    struct grab *g = ctx;
    if (g->len + len >= sizeof g->buf) {
        g->over = 1;
        return 0;
    }
    memcpy(g->buf + g->len, data, len);
    g->len += len;
    g->buf[g->len] = '\0';
    return 0;
}

int daytona_resolve(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                    int allow_root, char **abs, int *type)
{
    struct daytona_state *st = sb->st;
    *abs = NULL;
    *type = DT_FT_NONE;
    if (!rel)
        rel = "";
    const char *root = st->cfg.workspace;
    size_t ol = strlen(DT_OUTPUTS);
    if (rel[0] == '/') {
        if (strncmp(rel, DT_OUTPUTS, ol) != 0 || (rel[ol] != '/' && rel[ol] != '\0'))
            return daytona_error(st, call, SBX_E_INVALID,
                                 DT ": %s: %s is absolute (paths are relative to the workspace)",
                                 what, rel);
        root = DT_OUTPUTS;
        rel += ol;
        while (*rel == '/')
            rel++;
    }
    if (!*rel && !allow_root)
        return daytona_error(st, call, SBX_E_INVALID, DT ": %s: empty path", what);
    if (*rel && sbxp_confine_check_path(rel) != 0)
        return daytona_error(st, call, SBX_E_INVALID, DT ": %s: %s leads out of the workspace",
                             what, rel);
    if (strchr(rel, '\n'))
        return daytona_error(st, call, SBX_E_INVALID, DT ": %s: a path has no line breaks", what);
    if (!sbxs_utf8_valid(rel, strlen(rel)))
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": %s: the path is not valid UTF-8 (the toolbox takes commands and "
                           "names as JSON text)",
                        what);
    size_t n = strlen(root) + strlen(rel) + 2;
    char *lex = malloc(n);
    if (!lex)
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    snprintf(lex, n, "%s%s%s", root, *rel ? "/" : "", rel);
    const char *argv[] = {"sh", "-c", RESOLVE_SH, "sbx", root, lex, NULL};
    struct grab g;
    memset(&g, 0, sizeof g);
    int code = -1;
    char msg[256];
    /* Its answer is one short line: the session's JSON carries it, unless
     * it is not valid UTF-8; then through a file, byte-exact. */
    int rc = daytona_exec_small(sb, call, "/", argv, st->cfg.request_timeout_ms, &code, g.buf,
                                sizeof g.buf, msg, sizeof msg);
    if (rc == SBX_E_EXISTS) {
        struct sbx_sink out = SBX_SINK_INIT(&g, grab_write);
        rc = daytona_exec_helper(sb, call, "/", argv, &out, st->cfg.request_timeout_ms, &code, msg,
                                 sizeof msg);
    }
    free(lex);
    if (rc != SBX_OK)
        return rc;
    g.len = strlen(g.buf);
    if (g.len && g.buf[g.len - 1] == '\n')
        g.buf[--g.len] = '\0'; /* the toolbox logs output by lines */
    if (code == 4)
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": %s: %s leads out of the workspace (through a symlink)", what,
                             rel);
    if (code != 0 || g.over || g.len < 3 || g.buf[1] != ' ' || g.buf[2] != '/')
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": %s: resolving %s failed (exit %d): %s",
                             what, rel, code, msg);
    if (!allow_root && !strcmp(g.buf + 2, root))
        return daytona_error(st, call, SBX_E_INVALID, DT ": %s: %s is the root directory", what,
                             rel);
    switch (g.buf[0]) {
    case 'd': *type = DT_FT_DIR; break;
    case 'f': *type = DT_FT_FILE; break;
    case 'o': *type = DT_FT_OTHER; break;
    default: *type = DT_FT_NONE; break;
    }
    *abs = strdup(g.buf + 2);
    return *abs ? SBX_OK : daytona_error(st, call, SBX_E_NOMEM, "out of memory");
}

/* $1 root, $2 the lexical path (root or root/...), $3 1 to tell an empty
 * directory: resolves the parent (every symlink followed) and keeps the
 * last component as it is; prints "<t> <path>", t in l (symlink), d
 * (directory), e (empty directory, with $3), f, o, n (missing, its parent
 * a directory), p (the parent missing or not a directory); exit 4 when
 * the parent leads out of the root. */
static const char ENTRY_SH[] =
    "r=$(realpath -m -- \"$1\") || exit 3; "
    "if [ \"$2\" = \"$1\" ]; then p=$r; else "
    "b=${2##*/}; x=$(realpath -m -- \"${2%/*}\") || exit 3; "
    "case \"$x\" in \"$r\"|\"$r\"/*) ;; *) exit 4;; esac; "
    "if [ \"$b\" = . ]; then p=$x; else p=$x/$b; fi; fi; "
    "if [ -L \"$p\" ]; then t=l; elif [ -d \"$p\" ]; then t=d; "
    "if [ \"$3\" = 1 ] && [ -z \"$(find \"$p\" -mindepth 1 -maxdepth 1 -print -quit 2>/dev/null)\" ]; "
    "then t=e; fi; "
    "elif [ -f \"$p\" ]; then t=f; elif [ -e \"$p\" ]; then t=o; "
    "elif [ -d \"${p%/*}/\" ]; then t=n; else t=p; fi; "
    "printf '%s %s' \"$t\" \"$p\"";

int daytona_resolve_entry(sbx_sandbox *sb, sbx_call *call, const char *what, const char *rel,
                          int want_empty, char **abs, enum daytona_etype *type)
{
    struct daytona_state *st = sb->st;
    const char *root = st->cfg.workspace;
    *abs = NULL;
    *type = DT_ET_MISSING;
    if (!rel)
        rel = "";
    if (rel[0] == '/')
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": %s: %s is absolute (paths are relative to the workspace)", what,
                             rel);
    if (strchr(rel, '\n'))
        return daytona_error(st, call, SBX_E_INVALID, DT ": %s: a path has no line breaks", what);
    if (!sbxs_utf8_valid(rel, strlen(rel)))
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": %s: the path is not valid UTF-8 (the toolbox takes commands and "
                                "names as JSON text)",
                             what);
    /* root + "/" + the components, without "." and empty ones; ".." is
     * refused wherever it is. */
    size_t n = strlen(root) + strlen(rel) + 4;
    char *lex = malloc(n);
    if (!lex)
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    size_t len = (size_t)snprintf(lex, n, "%s", root);
    for (const char *p = rel; *p;) {
        const char *s = p;
        while (*p && *p != '/')
            p++;
        size_t cl = (size_t)(p - s);
        while (*p == '/')
            p++;
        if (cl == 0 || (cl == 1 && s[0] == '.'))
            continue;
        if (cl == 2 && s[0] == '.' && s[1] == '.') {
            free(lex);
            return daytona_error(st, call, SBX_E_INVALID, DT ": %s: %s has a \"..\" component",
                                 what, rel);
        }
        lex[len++] = '/';
        memcpy(lex + len, s, cl);
        len += cl;
        lex[len] = '\0';
    }
    /* "a/" and "a/." name what a leads to: its last component is then
     * followed (and confined) like a parent */
    size_t rl = strlen(rel);
    if (len > strlen(root) &&
        (rel[rl - 1] == '/' || (rel[rl - 1] == '.' && (rl == 1 || rel[rl - 2] == '/')))) {
        lex[len++] = '/';
        lex[len++] = '.';
        lex[len] = '\0';
    }
    const char *argv[] = {"sh", "-c", ENTRY_SH, "sbx", root, lex, want_empty ? "1" : "0", NULL};
    struct grab g;
    memset(&g, 0, sizeof g);
    int code = -1;
    char msg[256];
    int rc = daytona_exec_small(sb, call, "/", argv, st->cfg.request_timeout_ms, &code, g.buf,
                                sizeof g.buf, msg, sizeof msg);
    if (rc == SBX_E_EXISTS) {
        struct sbx_sink out = SBX_SINK_INIT(&g, grab_write);
        rc = daytona_exec_helper(sb, call, "/", argv, &out, st->cfg.request_timeout_ms, &code, msg,
                                 sizeof msg);
    }
    free(lex);
    if (rc != SBX_OK)
        return rc;
    g.len = strlen(g.buf);
    if (g.len && g.buf[g.len - 1] == '\n')
        g.buf[--g.len] = '\0';
    if (code == 4)
        return daytona_error(st, call, SBX_E_INVALID,
                             DT ": %s: %s leads out of the workspace (through a symlink)", what,
                             rel);
    if (code != 0 || g.over || g.len < 3 || g.buf[1] != ' ' || g.buf[2] != '/')
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": %s: resolving %s failed (exit %d): %s",
                             what, rel, code, msg);
    switch (g.buf[0]) {
    case 'l': *type = DT_ET_SYMLINK; break;
    case 'd': *type = DT_ET_DIR; break;
    case 'e': *type = DT_ET_EMPTY_DIR; break;
    case 'f': *type = DT_ET_FILE; break;
    case 'o': *type = DT_ET_OTHER; break;
    case 'n': *type = DT_ET_MISSING; break;
    default: *type = DT_ET_NO_PARENT; break;
    }
    *abs = strdup(g.buf + 2);
    return *abs ? SBX_OK : daytona_error(st, call, SBX_E_NOMEM, "out of memory");
}
