/*
 * manifest_check.c - what a manifest means, checked before anything runs:
 * entry paths, duplicates and overlaps, local sources confined to the base
 * directory or a trusted grant, users, groups and run_as.
 */
#include "config/manifest_internal.h"
#include "base/text_escape.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int bad_entry(const struct sbx_manifest *m, const struct manifest_entry *e,
                     sbx_error *err, const char *problem)
{
    char shown[160];
    return sbx_error_set(err, SBX_E_INVALID, "%s:%d: entry %s: %s", m->name, e->line,
                         sbxh_text_escape(shown, sizeof shown, e->path, 120), problem);
}

static const char *path_problem(const char *path)
{
    size_t n = strlen(path);
    if (n == 0)
        return "the path is empty";
    if (n > SBX_MANIFEST_PATH_MAX)
        return "the path is longer than 1024 bytes";
    if (path[0] == '/')
        return "the path is absolute (entry paths are workspace-relative)";
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return "the path holds a control character";
    for (const char *c = path; *c;) {
        const char *e = strchr(c, '/');
        size_t l = e ? (size_t)(e - c) : strlen(c);
        if (l == 2 && c[0] == '.' && c[1] == '.')
            return "the path has a \"..\" component";
        if (l == 0 || (l == 1 && c[0] == '.'))
            return "the path has an empty or \".\" component";
        c += l;
        if (*c == '/' && !*++c)
            return "the path ends with '/'";
    }
    return NULL;
}

/* Byte order with '/' first, so that a path's descendants follow it. */
static int path_cmp(const char *a, const char *b)
{
    for (;; a++, b++) {
        unsigned ca = *a == '/' ? 1 : (unsigned char)*a;
        unsigned cb = *b == '/' ? 1 : (unsigned char)*b;
        if (ca != cb || !ca)
            return (int)ca - (int)cb;
    }
}

static int by_path(const void *a, const void *b)
{
    const struct manifest_entry *const *x = a, *const *y = b;
    return path_cmp((*x)->path, (*y)->path);
}

/* No two entries at one path; no entry inside an entry that is not a
 * `dir` (its content would be overwritten, or overwrite it). */
static int check_overlaps(const struct sbx_manifest *m, sbx_error *err)
{
    size_t n = m->nentries;
    if (n < 2)
        return SBX_OK;
    const struct manifest_entry **v = malloc(n * sizeof *v);
    if (!v)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++)
        v[i] = &m->entries[i];
    qsort(v, n, sizeof *v, by_path);
    int rc = SBX_OK;
    /* the non-dir entries that contain the one being looked at: a stack of
     * ancestors along the sorted order */
    const struct manifest_entry **stack = malloc(n * sizeof *stack);
    size_t depth = 0;
    if (!stack)
        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    char msg[400], shown[160];
    for (size_t i = 0; rc == SBX_OK && i < n; i++) {
        const struct manifest_entry *e = v[i];
        if (i > 0 && !strcmp(v[i - 1]->path, e->path)) {
            snprintf(msg, sizeof msg, "the path is given twice (also at line %d)",
                     v[i - 1]->line);
            rc = bad_entry(m, e, err, msg);
            break;
        }
        while (depth > 0) {
            const char *a = stack[depth - 1]->path;
            size_t l = strlen(a);
            if (!strncmp(a, e->path, l) && e->path[l] == '/')
                break;
            depth--;
        }
        if (depth > 0 && stack[depth - 1]->type != MF_DIR) {
            snprintf(msg, sizeof msg, "lies inside entry %s (line %d), which is not a dir",
                     sbxh_text_escape(shown, sizeof shown, stack[depth - 1]->path, 120),
                     stack[depth - 1]->line);
            rc = bad_entry(m, e, err, msg);
            break;
        }
        stack[depth++] = e;
    }
    free(stack);
    free(v);
    return rc;
}

/* Whether the resolved path p is dir or below it. */
static bool under(const char *p, const char *dir)
{
    size_t l = strlen(dir);
    if (l == 1 && dir[0] == '/')
        return true;
    return !strncmp(p, dir, l) && (p[l] == '\0' || p[l] == '/');
}

/* The index in m->roots of directory `path` (resolved), opened once. */
static int root_of(struct sbx_manifest *m, const char *path, sbx_error *err)
{
    for (size_t i = 0; i < m->nroots; i++)
        if (!strcmp(m->root_paths[i], path))
            return (int)i;
    int *r = realloc(m->roots, (m->nroots + 1) * sizeof *r);
    if (r)
        m->roots = r;
    char **rp = r ? realloc(m->root_paths, (m->nroots + 1) * sizeof *rp) : NULL;
    if (rp)
        m->root_paths = rp;
    char *copy = rp ? strdup(path) : NULL;
    if (!copy)
        return -sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    int fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        free(copy);
        return -sbx_error_set(err, SBX_E_IO, "%s: %s: %s", m->name, path, strerror(e));
    }
    m->roots[m->nroots] = fd;
    m->root_paths[m->nroots] = copy;
    return (int)m->nroots++;
}

/* Resolve a host source (local_*, a git_repo path) under base_dir or a
 * grant: *out is the resolved path (malloc'd), e->root and e->rel where
 * the apply opens it again (beneath that root, no symlinks: what was
 * checked here is what is read). want: S_IFREG, S_IFDIR. */
static int resolve_source(struct sbx_manifest *m, struct manifest_entry *e,
                          const char *source, const char *base_dir,
                          const char *const *grants, mode_t want, char **out,
                          sbx_error *err)
{
    char joined[PATH_MAX * 2], real[PATH_MAX], base_real[PATH_MAX], msg[PATH_MAX + 600];
    char shown[200], g[PATH_MAX];
    sbxh_text_escape(shown, sizeof shown, source, 160);
    if (!realpath(base_dir, base_real))
        return sbx_error_set(err, SBX_E_IO, "%s: the base directory %s cannot be "
                                            "resolved: %s",
                             m->name, base_dir, strerror(errno));
    if (source[0] == '/')
        snprintf(joined, sizeof joined, "%s", source);
    else
        snprintf(joined, sizeof joined, "%s/%s", base_real, source);
    if (!realpath(joined, real)) {
        snprintf(msg, sizeof msg, "source \"%s\" cannot be read: %s", shown,
                 strerror(errno));
        return bad_entry(m, e, err, msg);
    }
    const char *root = under(real, base_real) ? base_real : NULL;
    for (size_t i = 0; !root && grants && grants[i]; i++)
        if (realpath(grants[i], g) && under(real, g))
            root = g;
    if (!root) {
        snprintf(msg, sizeof msg,
                 "source \"%s\" is outside %s and every granted directory "
                 "(manifest.grants in the configuration)",
                 shown, base_real);
        return bad_entry(m, e, err, msg);
    }
    size_t rl = strlen(root);
    const char *rel = rl == 1 ? real + 1 : real[rl] == '/' ? real + rl + 1 : real + rl;
    int idx = root_of(m, root, err);
    if (idx < 0)
        return -idx;
    e->root = idx;
    if (!(e->rel = strdup(rel)) || !(*out = strdup(real)))
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    struct stat st;
    int fd = sbxh_manifest_open_source(m, idx, rel, O_PATH, &st);
    if (fd >= 0)
        close(fd);
    if (fd < 0 || (st.st_mode & S_IFMT) != want) {
        snprintf(msg, sizeof msg, "source \"%s\" is not a %s", shown,
                 want == S_IFDIR ? "directory" : "regular file");
        return bad_entry(m, e, err, msg);
    }
    return SBX_OK;
}

/* A git URL is a remote (scheme://, user@host:path) or a host path,
 * which is confined like a local source. */
static bool git_remote(const char *url)
{
    if (strstr(url, "://") && strncmp(url, "file://", 7) != 0)
        return true;
    const char *colon = strchr(url, ':'), *slash = strchr(url, '/');
    return colon && (!slash || colon < slash) && strchr(url, '@');
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);
    return n > 0 && n <= 32 && ((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_') &&
           strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

static int check_accounts(const struct sbx_manifest *m, sbx_error *err)
{
    char shown[80];
    for (size_t i = 0; i < m->ngroups; i++) {
        const struct manifest_group *g = &m->groups[i];
        if (!name_ok(g->name))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "%s:%d: group \"%s\": a name is 1 to 32 of a-z, 0-9, "
                                 "'_', '-', starting with a letter or '_'",
                                 m->name, g->line,
                                 sbxh_text_escape(shown, sizeof shown, g->name, 40));
        for (size_t j = 0; j < i; j++)
            if (!strcmp(m->groups[j].name, g->name))
                return sbx_error_set(err, SBX_E_INVALID, "%s:%d: group %s is declared "
                                                         "twice (also at line %d)",
                                     m->name, g->line, g->name, m->groups[j].line);
    }
    for (size_t i = 0; i < m->nusers; i++) {
        const struct manifest_user *u = &m->users[i];
        if (!name_ok(u->name) || !strcmp(u->name, "root"))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "%s:%d: user \"%s\": a name is 1 to 32 of a-z, 0-9, "
                                 "'_', '-' (and not root)",
                                 m->name, u->line,
                                 sbxh_text_escape(shown, sizeof shown, u->name, 40));
        for (size_t j = 0; j < i; j++)
            if (!strcmp(m->users[j].name, u->name))
                return sbx_error_set(err, SBX_E_INVALID, "%s:%d: user %s is declared "
                                                         "twice (also at line %d)",
                                     m->name, u->line, u->name, m->users[j].line);
        for (size_t k = 0; k < u->ngroups; k++) {
            bool known = false;
            for (size_t j = 0; !known && j < m->ngroups; j++)
                known = !strcmp(m->groups[j].name, u->groups[k]);
            if (!known)
                return sbx_error_set(err, SBX_E_INVALID,
                                     "%s:%d: user %s: group \"%s\" is not declared "
                                     "under groups",
                                     m->name, u->line, u->name,
                                     sbxh_text_escape(shown, sizeof shown, u->groups[k],
                                                      40));
        }
    }
    if (m->run_as) {
        bool known = !strcmp(m->run_as, "root");
        for (size_t j = 0; !known && j < m->nusers; j++)
            known = !strcmp(m->users[j].name, m->run_as);
        if (!known)
            return sbx_error_set(err, SBX_E_INVALID,
                                 "%s:%d: run_as: user \"%s\" is not declared under users",
                                 m->name, m->run_as_line,
                                 sbxh_text_escape(shown, sizeof shown, m->run_as, 40));
    }
    return SBX_OK;
}

int sbxh_manifest_check(struct sbx_manifest *m, const char *base_dir,
                        const char *const *grants, sbx_error *err)
{
    int rc = check_accounts(m, err);
    for (size_t i = 0; rc == SBX_OK && i < m->nentries; i++) {
        struct manifest_entry *e = &m->entries[i];
        const char *problem = path_problem(e->path);
        if (problem)
            return bad_entry(m, e, err, problem);
        if (e->group) {
            bool known = false;
            for (size_t j = 0; !known && j < m->ngroups; j++)
                known = !strcmp(m->groups[j].name, e->group);
            if (!known)
                return bad_entry(m, e, err, "its group is not declared under groups");
        }
        if (e->type == MF_LOCAL_FILE || e->type == MF_LOCAL_DIR)
            rc = resolve_source(m, e, e->source, base_dir, grants,
                                e->type == MF_LOCAL_FILE ? S_IFREG : S_IFDIR,
                                &e->resolved, err);
        if (e->type == MF_GIT_REPO) {
            if (e->ref && (e->ref[0] == '-' || !*e->ref || strpbrk(e->ref, " \t\n")))
                return bad_entry(m, e, err, "ref must be a branch, tag or commit name");
            if (e->url[0] == '-')
                return bad_entry(m, e, err, "url must not start with '-'");
            if (!git_remote(e->url)) {
                const char *p = !strncmp(e->url, "file://", 7) ? e->url + 7 : e->url;
                rc = resolve_source(m, e, p, base_dir, grants, S_IFDIR, &e->resolved,
                                    err);
                if (rc == SBX_OK)
                    rc = sbxh_manifest_check_repo(m, e, err);
            }
        }
    }
    return rc == SBX_OK ? check_overlaps(m, err) : rc;
}

void sbxh_manifest_clear(struct sbx_manifest *m)
{
    for (size_t i = 0; i < m->nentries; i++) {
        struct manifest_entry *e = &m->entries[i];
        free(e->path);
        free(e->content);
        free(e->source);
        free(e->resolved);
        free(e->rel);
        free(e->url);
        free(e->ref);
        free(e->group);
    }
    free(m->entries);
    for (size_t i = 0; m->env && m->env[i]; i++)
        free(m->env[i]);
    free(m->env);
    for (size_t i = 0; i < m->nusers; i++) {
        free(m->users[i].name);
        for (size_t k = 0; k < m->users[i].ngroups; k++)
            free(m->users[i].groups[k]);
        free(m->users[i].groups);
    }
    free(m->users);
    for (size_t i = 0; i < m->ngroups; i++)
        free(m->groups[i].name);
    free(m->groups);
    free(m->run_as);
    for (size_t i = 0; i < m->nroots; i++) {
        close(m->roots[i]);
        free(m->root_paths[i]);
    }
    free(m->roots);
    free(m->root_paths);
    free(m->name);
    memset(m, 0, sizeof *m);
}
