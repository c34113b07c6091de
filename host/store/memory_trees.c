/*
 * memory_trees.c - memory stores over the session store's generic
 * statements (store/memory_trees.h). Written once for both drivers: the SQL is
 * the dialect SQLite and PostgreSQL share.
 *
 * Serialization: a commit first bumps its store's version (UPDATE of the
 * memory_stores row), which takes the row lock on PostgreSQL (SQLite's
 * write transaction holds the database lock anyway), so commits to one
 * store run one after the other and each checks its preconditions against
 * what the previous one committed.
 */
#include "store/memory_trees.h"
#include "store/driver.h"
#include "base/text_escape.h"

#include "hex.h"
#include "utf8.h"

#include <openssl/evp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Chunks handed to a read's sink. */
#define READ_CHUNK (64 * 1024)
/* Conflicting paths named in a message; the rest are counted. */
#define CONFLICTS_NAMED 5

/* ---- names -------------------------------------------------------------- */

int sbxh_mstore_check_slug(const char *slug, sbx_error *err)
{
    if (!slug || !*slug)
        return sbx_error_set(err, SBX_E_INVALID, "memory store: the name is empty");
    size_t n = strlen(slug);
    char shown[96];
    if (n > SBX_MSTORE_SLUG_MAX || strspn(slug, "abcdefghijklmnopqrstuvwxyz0123456789-") != n)
        return sbx_error_set(err, SBX_E_INVALID,
                             "memory store \"%s\": a name is 1 to %d characters of "
                             "a-z, 0-9 and '-'",
                             sbxh_text_escape(shown, sizeof shown, slug, 64),
                             SBX_MSTORE_SLUG_MAX);
    return SBX_OK;
}

int sbxh_mstore_check_path(const char *path, sbx_error *err)
{
    char shown[160];
    const char *problem = NULL;
    size_t n = path ? strlen(path) : 0;
    if (!path || !*path)
        problem = "is empty";
    else if (n > SBX_MSTORE_PATH_MAX)
        problem = "is longer than 1024 bytes";
    else if (path[0] == '/')
        problem = "is absolute";
    if (!problem && !sbxs_utf8_valid(path, n))
        problem = "is not valid UTF-8";
    for (const unsigned char *p = (const unsigned char *)path; !problem && *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            problem = "holds a control character";
    /* components: no empty, "." or ".." */
    for (const char *c = path; !problem && c && *c;) {
        const char *e = strchr(c, '/');
        size_t l = e ? (size_t)(e - c) : strlen(c);
        if (l == 0 || (l == 1 && c[0] == '.') || (l == 2 && c[0] == '.' && c[1] == '.'))
            problem = "has an empty, \".\" or \"..\" component";
        c = e ? e + 1 : c + l;
        if (e && !*c)
            problem = "ends with '/'";
    }
    if (problem)
        return sbx_error_set(err, SBX_E_INVALID, "memory path \"%s\" %s",
                             sbxh_text_escape(shown, sizeof shown, path, 120), problem);
    return SBX_OK;
}

/* ---- store rows --------------------------------------------------------- */

#define INFO_COLUMNS                                                           \
    "slug, version, files, bytes, created_at, max_file_bytes, max_files, "     \
    "max_total_bytes "

static void info_from_row(struct sbx_store_cursor *c, struct sbx_mstore_info *m)
{
    memset(m, 0, sizeof *m);
    const char *slug = c->text(c, 0);
    snprintf(m->slug, sizeof m->slug, "%s", slug ? slug : "");
    m->version = c->integer(c, 1);
    m->files = c->integer(c, 2);
    m->bytes = c->integer(c, 3);
    m->created_at = c->integer(c, 4);
    m->limits.max_file_bytes = c->integer(c, 5);
    m->limits.max_files = c->integer(c, 6);
    m->limits.max_total_bytes = c->integer(c, 7);
}

static int no_store(struct sbx_store *s, const char *slug, sbx_error *err)
{
    return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: memory store '%s' does not exist",
                         s->label, slug);
}

/* The row of slug (lock held). */
static int info_locked(struct sbx_store *s, const char *slug, struct sbx_mstore_info *out,
                       sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(slug)};
    struct sbx_store_cursor *c = NULL;
    int rc = sbx_store_prims_of(s)->query(s,
                             "SELECT " INFO_COLUMNS "FROM memory_stores WHERE slug = $1",
                             p, 1, &c, NULL, err);
    if (rc != SBX_OK)
        return rc;
    bool row = false;
    rc = c->next(c, &row, err);
    if (rc == SBX_OK && row)
        info_from_row(c, out);
    else if (rc == SBX_OK)
        rc = no_store(s, slug, err);
    sbx_store_prims_of(s)->query_end(s, c);
    return rc;
}

int sbxh_mstore_create(struct sbx_store *s, const char *slug,
                       const struct sbx_mstore_limits *limits, sbx_error *err)
{
    int rc = sbxh_mstore_check_slug(slug, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_mstore_limits l = limits ? *limits : (struct sbx_mstore_limits){0, 0, 0};
    if (l.max_file_bytes < 0 || l.max_files < 0 || l.max_total_bytes < 0)
        return sbx_error_set(err, SBX_E_INVALID, "memory store '%s': a limit is negative",
                             slug);
    if (!l.max_file_bytes)
        l.max_file_bytes = SBX_MSTORE_DEFAULT_FILE_BYTES;
    if (!l.max_files)
        l.max_files = SBX_MSTORE_DEFAULT_FILES;
    if (!l.max_total_bytes)
        l.max_total_bytes = SBX_MSTORE_DEFAULT_TOTAL_BYTES;
    struct sbx_store_value p[] = {SBX_SV_T(slug), SBX_SV_I(l.max_file_bytes),
                                  SBX_SV_I(l.max_files), SBX_SV_I(l.max_total_bytes),
                                  SBX_SV_I(sbx_store_wall_ms())};
    int64_t n = 0;
    pthread_mutex_lock(&s->lock);
    rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "INSERT INTO memory_stores (slug, version, files, bytes, "
                             "max_file_bytes, max_files, max_total_bytes, created_at) "
                             "VALUES ($1, 0, 0, 0, $2, $3, $4, $5) "
                             "ON CONFLICT (slug) DO NOTHING",
                             p, 5, NULL, &n, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == SBX_OK && n == 0)
        rc = sbx_error_set(err, SBX_E_EXISTS, "%s: memory store '%s' exists", s->label,
                           slug);
    return rc;
}

int sbxh_mstore_delete(struct sbx_store *s, const char *slug, sbx_error *err)
{
    int rc = sbxh_mstore_check_slug(slug, err);
    if (rc != SBX_OK)
        return rc;
    static const char *const deletes[] = {
        "DELETE FROM memory_heads WHERE slug = $1",
        "DELETE FROM memory_versions WHERE slug = $1",
        "DELETE FROM memory_commits WHERE slug = $1",
        "DELETE FROM memory_stores WHERE slug = $1",
    };
    struct sbx_store_value p[] = {SBX_SV_T(slug)};
    int64_t n = 0;
    pthread_mutex_lock(&s->lock);
    rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->begin(s, err);
    if (rc == SBX_OK) {
        for (size_t i = 0; rc == SBX_OK && i < sizeof deletes / sizeof *deletes; i++)
            rc = sbx_store_prims_of(s)->query(s, deletes[i], p, 1, NULL, &n, err);
        if (rc == SBX_OK && n == 0)
            rc = no_store(s, slug, err);
        rc = sbx_store_prims_of(s)->finish(s, rc, err);
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_mstore_info(struct sbx_store *s, const char *slug, struct sbx_mstore_info *out,
                     sbx_error *err)
{
    int rc = sbxh_mstore_check_slug(slug, err);
    if (rc != SBX_OK)
        return rc;
    pthread_mutex_lock(&s->lock);
    rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = info_locked(s, slug, out, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_mstore_list(struct sbx_store *s,
                     int (*each)(void *ud, const struct sbx_mstore_info *m,
                                 sbx_error *err),
                     void *ud, sbx_error *err)
{
    struct sbx_store_cursor *c = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s, "SELECT " INFO_COLUMNS "FROM memory_stores ORDER BY slug",
                             NULL, 0, &c, NULL, err);
    for (bool row = true; rc == SBX_OK && row;) {
        rc = c->next(c, &row, err);
        if (rc == SBX_OK && row) {
            struct sbx_mstore_info m;
            info_from_row(c, &m);
            rc = each(ud, &m, err);
        }
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- listings ----------------------------------------------------------- */

/* Columns: path, version, deleted, sha256, size[, author, created_at]. */
static int each_file(struct sbx_store_cursor *c, bool with_log, sbx_mstore_each each,
                     void *ud, sbx_error *err)
{
    int rc = SBX_OK;
    for (bool row = true; rc == SBX_OK && row;) {
        rc = c->next(c, &row, err);
        if (rc != SBX_OK || !row)
            break;
        struct sbx_mstore_file f = {
            .path = c->text(c, 0),
            .version = c->integer(c, 1),
            .deleted = c->integer(c, 2) != 0,
            .sha256 = c->text(c, 3),
            .size = c->integer(c, 4),
            .author = with_log ? c->text(c, 5) : NULL,
            .created_at = with_log ? c->integer(c, 6) : 0,
        };
        rc = each(ud, &f, err);
    }
    return rc;
}

/* Run a listing query over a store that must exist (lock held). */
static int listing(struct sbx_store *s, const char *slug, int64_t at, const char *sql,
                   const struct sbx_store_value *p, int n, bool with_log,
                   sbx_mstore_each each, void *ud, sbx_error *err)
{
    struct sbx_mstore_info m;
    int rc = info_locked(s, slug, &m, err);
    if (rc != SBX_OK)
        return rc;
    if (at < 0 || at > m.version)
        return sbx_error_set(err, SBX_E_NOT_FOUND,
                             "%s: memory store '%s' has no version %lld (its latest is "
                             "%lld)",
                             s->label, slug, (long long)at, (long long)m.version);
    struct sbx_store_cursor *c = NULL;
    rc = sbx_store_prims_of(s)->query(s, sql, p, n, &c, NULL, err);
    if (rc != SBX_OK)
        return rc;
    rc = each_file(c, with_log, each, ud, err);
    sbx_store_prims_of(s)->query_end(s, c);
    return rc;
}

int sbxh_mstore_heads(struct sbx_store *s, const char *slug, int64_t at,
                      sbx_mstore_each each, void *ud, sbx_error *err)
{
    int rc = sbxh_mstore_check_slug(slug, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_store_value p[] = {SBX_SV_T(slug), SBX_SV_I(at)};
    const char *sql =
        at == 0 ? "SELECT path, version, deleted, sha256, size FROM memory_heads "
                  "WHERE slug = $1 AND deleted = 0 ORDER BY path"
                : "SELECT v.path, v.version, v.deleted, v.sha256, v.size "
                  "FROM memory_versions v WHERE v.slug = $1 AND v.deleted = 0 "
                  "AND v.version = (SELECT max(w.version) FROM memory_versions w "
                  "WHERE w.slug = $1 AND w.path = v.path AND w.version <= $2) "
                  "ORDER BY v.path";
    pthread_mutex_lock(&s->lock);
    rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = listing(s, slug, at, sql, p, at == 0 ? 1 : 2, false, each, ud, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_mstore_log(struct sbx_store *s, const char *slug, const char *path,
                    sbx_mstore_each each, void *ud, sbx_error *err)
{
    int rc = sbxh_mstore_check_slug(slug, err);
    if (rc == SBX_OK && path)
        rc = sbxh_mstore_check_path(path, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_store_value p[] = {SBX_SV_T(slug), SBX_SV_T(path)};
    const char *sql =
        path ? "SELECT v.path, v.version, v.deleted, v.sha256, v.size, c.author, "
               "c.created_at FROM memory_versions v JOIN memory_commits c "
               "ON c.slug = v.slug AND c.version = v.version "
               "WHERE v.slug = $1 AND v.path = $2 ORDER BY v.version DESC"
             : "SELECT v.path, v.version, v.deleted, v.sha256, v.size, c.author, "
               "c.created_at FROM memory_versions v JOIN memory_commits c "
               "ON c.slug = v.slug AND c.version = v.version "
               "WHERE v.slug = $1 ORDER BY v.version DESC, v.path";
    pthread_mutex_lock(&s->lock);
    rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = listing(s, slug, 0, sql, p, path ? 2 : 1, true, each, ud, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_mstore_read(struct sbx_store *s, const char *slug, const char *path, int64_t at,
                     const struct sbx_sink *sink, int64_t *version, sbx_error *err)
{
    int rc = sbxh_mstore_check_slug(slug, err);
    if (rc == SBX_OK)
        rc = sbxh_mstore_check_path(path, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_store_value p[] = {SBX_SV_T(slug), SBX_SV_T(path),
                                  SBX_SV_I(at ? at : INT64_MAX)};
    struct sbx_store_cursor *c = NULL;
    struct sbx_mstore_info m;
    char shown[160];
    pthread_mutex_lock(&s->lock);
    rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = info_locked(s, slug, &m, err);
    if (rc == SBX_OK && (at < 0 || at > m.version))
        rc = sbx_error_set(err, SBX_E_NOT_FOUND, "%s: memory store '%s' has no version %lld",
                           s->label, slug, (long long)at);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "SELECT version, deleted, content FROM memory_versions "
                             "WHERE slug = $1 AND path = $2 AND version <= $3 "
                             "ORDER BY version DESC LIMIT 1",
                             p, 3, &c, NULL, err);
    bool row = false;
    if (rc == SBX_OK)
        rc = c->next(c, &row, err);
    if (rc == SBX_OK && (!row || c->integer(c, 1)))
        rc = sbx_error_set(err, SBX_E_NOT_FOUND, "memory store '%s': no file \"%s\"%s",
                           slug, sbxh_text_escape(shown, sizeof shown, path, 120),
                           at ? " at that version" : "");
    if (rc == SBX_OK) {
        if (version)
            *version = c->integer(c, 0);
        size_t len = 0;
        const unsigned char *data = c->blob(c, 2, &len);
        if (len == SIZE_MAX)
            rc = sbx_error_set(err, SBX_E_PROTOCOL, "%s: the content of \"%s\" cannot "
                                                    "be decoded",
                               s->label, shown);
        for (size_t off = 0; rc == SBX_OK && off < len; off += READ_CHUNK) {
            size_t n = len - off < READ_CHUNK ? len - off : READ_CHUNK;
            if (sink->write(sink->ctx, data + off, n) != 0)
                rc = sbx_error_set(err, SBX_E_IO, "memory store '%s': writing \"%s\" "
                                                  "out failed",
                                   slug, sbxh_text_escape(shown, sizeof shown, path, 120));
        }
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- commits ------------------------------------------------------------ */

struct commit_run {
    struct sbx_store *s;
    const struct sbx_mstore_commit *c;
    struct sbx_mstore_info m; /* counters updated as changes apply */
    int64_t version;          /* of this commit */
    size_t *order;            /* changes sorted by path */
};

static int by_path(const void *a, const void *b, void *ctx)
{
    const struct sbx_mstore_commit *c = ctx;
    return strcmp(c->changes[*(const size_t *)a].path,
                  c->changes[*(const size_t *)b].path);
}

/* Every path valid and named once; order[] gets the changes by path. */
static int check_changes(const struct sbx_mstore_commit *c, size_t *order, sbx_error *err)
{
    for (size_t i = 0; i < c->nchanges; i++) {
        int rc = sbxh_mstore_check_path(c->changes[i].path, err);
        if (rc != SBX_OK)
            return rc;
        if (c->changes[i].base < SBX_MSTORE_ANY_BASE)
            return sbx_error_set(err, SBX_E_INVALID, "memory commit: a base version is "
                                                     "negative");
        order[i] = i;
    }
    qsort_r(order, c->nchanges, sizeof *order, by_path, (void *)c);
    char shown[160];
    for (size_t i = 1; i < c->nchanges; i++)
        if (!strcmp(c->changes[order[i]].path, c->changes[order[i - 1]].path))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "memory commit: \"%s\" is changed twice",
                                 sbxh_text_escape(shown, sizeof shown,
                                                  c->changes[order[i]].path, 120));
    return SBX_OK;
}

/* The head of path: *version 0 when it never existed; *live, *size. */
static int head_of(struct commit_run *r, const char *path, int64_t *version, bool *live,
                   int64_t *size, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(r->c->slug), SBX_SV_T(path)};
    struct sbx_store_cursor *cur = NULL;
    int rc = sbx_store_prims_of(r->s)->query(r->s,
                                "SELECT version, deleted, size FROM memory_heads "
                                "WHERE slug = $1 AND path = $2",
                                p, 2, &cur, NULL, err);
    if (rc != SBX_OK)
        return rc;
    bool row = false;
    rc = cur->next(cur, &row, err);
    *version = row ? cur->integer(cur, 0) : 0;
    *live = row && cur->integer(cur, 1) == 0;
    *size = row ? cur->integer(cur, 2) : 0;
    sbx_store_prims_of(r->s)->query_end(r->s, cur);
    return rc;
}

/* Check every precondition; the paths whose head moved go to conflicts.
 * Counters drop what the changes replace or remove. */
static int check_heads(struct commit_run *r, size_t **conflicts, size_t *nconflicts,
                       sbx_error *err)
{
    size_t nbad = 0, *bad = NULL;
    char names[CONFLICTS_NAMED * 130] = "";
    char shown[160];
    for (size_t k = 0; k < r->c->nchanges; k++) {
        size_t i = r->order[k];
        const struct sbx_mstore_change *ch = &r->c->changes[i];
        int64_t head, size;
        bool live;
        int rc = head_of(r, ch->path, &head, &live, &size, err);
        if (rc != SBX_OK) {
            free(bad);
            return rc;
        }
        if (ch->base != SBX_MSTORE_ANY_BASE && ch->base != head) {
            size_t *nb = realloc(bad, (nbad + 1) * sizeof *bad);
            if (!nb) {
                free(bad);
                return sbxh_store_nomem(r->s, err);
            }
            bad = nb;
            bad[nbad++] = i;
            if (nbad <= CONFLICTS_NAMED) {
                size_t l = strlen(names);
                snprintf(names + l, sizeof names - l, "%s\"%s\"", nbad > 1 ? ", " : "",
                         sbxh_text_escape(shown, sizeof shown, ch->path, 120));
            }
            continue;
        }
        if (ch->remove && !live) {
            free(bad);
            return sbx_error_set(err, SBX_E_NOT_FOUND,
                                 "memory store '%s': no file \"%s\" to remove",
                                 r->c->slug,
                                 sbxh_text_escape(shown, sizeof shown, ch->path, 120));
        }
        if (live) {
            r->m.files--;
            r->m.bytes -= size;
        }
    }
    if (nbad == 0)
        return SBX_OK;
    int rc = sbx_error_set(err, SBX_E_EXISTS,
                           "memory store '%s': conflict: %s%s changed since the "
                           "version this commit is based on; nothing was written",
                           r->c->slug, names,
                           nbad > CONFLICTS_NAMED ? " and more" : "");
    if (conflicts) {
        *conflicts = bad;
        *nconflicts = nbad;
    } else {
        free(bad);
    }
    return rc;
}

/* Write one version of path and make it the head. */
static int write_version(struct commit_run *r, const char *path, bool deleted,
                         const char *sha, const void *data, size_t len, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(r->c->slug), SBX_SV_T(path),
                                  SBX_SV_I(r->version), SBX_SV_I(deleted ? 1 : 0),
                                  sha ? SBX_SV_T(sha) : (struct sbx_store_value){0},
                                  SBX_SV_I((int64_t)len),
                                  deleted ? (struct sbx_store_value){0}
                                          : SBX_SV_B(data, len)};
    int rc = sbx_store_prims_of(r->s)->query(r->s,
                                "INSERT INTO memory_versions (slug, path, version, "
                                "deleted, sha256, size, content) "
                                "VALUES ($1, $2, $3, $4, $5, $6, $7)",
                                p, 7, NULL, NULL, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(r->s)->query(r->s,
                                "INSERT INTO memory_heads (slug, path, version, deleted, "
                                "sha256, size) VALUES ($1, $2, $3, $4, $5, $6) "
                                "ON CONFLICT (slug, path) DO UPDATE SET "
                                "version = excluded.version, deleted = excluded.deleted, "
                                "sha256 = excluded.sha256, size = excluded.size",
                                p, 6, NULL, NULL, err);
    return rc;
}

static int over_limit(struct commit_run *r, const char *path, const char *what,
                      long long limit, sbx_error *err)
{
    char shown[160];
    return sbx_error_set(err, SBX_E_INVALID,
                         "memory store '%s': \"%s\": %s (limit %lld); nothing was "
                         "written",
                         r->c->slug, sbxh_text_escape(shown, sizeof shown, path, 120),
                         what, limit);
}

/* One file's new content: loaded, limited, hashed, written. */
static int write_file(struct commit_run *r, size_t i, sbx_error *err)
{
    const struct sbx_mstore_change *ch = &r->c->changes[i];
    const void *data = NULL;
    size_t len = 0;
    int rc = r->c->load(r->c->ud, i, &data, &len, err);
    if (rc != SBX_OK)
        return rc;
    const struct sbx_mstore_limits *l = &r->m.limits;
    if ((int64_t)len > l->max_file_bytes)
        rc = over_limit(r, ch->path, "the file is too large",
                        (long long)l->max_file_bytes, err);
    else if (r->m.files + 1 > l->max_files)
        rc = over_limit(r, ch->path, "one file too many for the store",
                        (long long)l->max_files, err);
    else if (r->m.bytes + (int64_t)len > l->max_total_bytes)
        rc = over_limit(r, ch->path, "the store would grow past its total size",
                        (long long)l->max_total_bytes, err);
    unsigned char md[32];
    char sha[65];
    if (rc == SBX_OK && EVP_Digest(data, len, md, NULL, EVP_sha256(), NULL) != 1)
        rc = sbx_error_set(err, SBX_E_INTERNAL, "memory commit: SHA-256 failed");
    if (rc == SBX_OK) {
        sbxs_hex(md, sizeof md, sha);
        rc = write_version(r, ch->path, false, sha, data, len, err);
    }
    if (rc == SBX_OK) {
        r->m.files++;
        r->m.bytes += (int64_t)len;
    }
    if (r->c->unload)
        r->c->unload(r->c->ud, i);
    return rc;
}

/* Inside the transaction: lock the store row, check, write. */
static int commit_locked(struct commit_run *r, size_t **conflicts, size_t *nconflicts,
                         sbx_error *err)
{
    struct sbx_store *s = r->s;
    struct sbx_store_value p[] = {SBX_SV_T(r->c->slug)};
    int64_t n = 0;
    int rc = sbx_store_prims_of(s)->query(s, "UPDATE memory_stores SET version = version + 1 "
                                "WHERE slug = $1",
                             p, 1, NULL, &n, err);
    if (rc == SBX_OK && n == 0)
        rc = no_store(s, r->c->slug, err);
    if (rc == SBX_OK)
        rc = info_locked(s, r->c->slug, &r->m, err);
    if (rc != SBX_OK)
        return rc;
    r->version = r->m.version;
    if ((rc = check_heads(r, conflicts, nconflicts, err)) != SBX_OK)
        return rc;
    struct sbx_store_value cp[] = {SBX_SV_T(r->c->slug), SBX_SV_I(r->version),
                                   SBX_SV_T(r->c->author),
                                   SBX_SV_I((int64_t)r->c->nchanges), SBX_SV_I(sbx_store_wall_ms())};
    rc = sbx_store_prims_of(s)->query(s, "INSERT INTO memory_commits (slug, version, author, changes, "
                            "created_at) VALUES ($1, $2, $3, $4, $5)",
                         cp, 5, NULL, NULL, err);
    /* Removals first: the limits then see the space they free. */
    for (size_t k = 0; rc == SBX_OK && k < r->c->nchanges; k++) {
        const struct sbx_mstore_change *ch = &r->c->changes[r->order[k]];
        if (ch->remove)
            rc = write_version(r, ch->path, true, NULL, NULL, 0, err);
    }
    for (size_t k = 0; rc == SBX_OK && k < r->c->nchanges; k++)
        if (!r->c->changes[r->order[k]].remove)
            rc = write_file(r, r->order[k], err);
    struct sbx_store_value up[] = {SBX_SV_T(r->c->slug), SBX_SV_I(r->m.files),
                                   SBX_SV_I(r->m.bytes)};
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s, "UPDATE memory_stores SET files = $2, bytes = $3 "
                                "WHERE slug = $1",
                             up, 3, NULL, NULL, err);
    return rc;
}

int sbxh_mstore_commit(struct sbx_store *s, const struct sbx_mstore_commit *c,
                       int64_t *version, size_t **conflicts, size_t *nconflicts,
                       sbx_error *err)
{
    if (conflicts)
        *conflicts = NULL;
    if (nconflicts)
        *nconflicts = 0;
    if (!c || !c->author || !*c->author || strlen(c->author) > SBX_STORE_NAME_MAX)
        return sbx_error_set(err, SBX_E_INVALID, "memory commit: no author given");
    int rc = sbxh_mstore_check_slug(c->slug, err);
    if (rc != SBX_OK)
        return rc;
    if (c->nchanges == 0) {
        struct sbx_mstore_info m;
        rc = sbxh_mstore_info(s, c->slug, &m, err);
        if (rc == SBX_OK && version)
            *version = m.version;
        return rc;
    }
    if (!c->changes || !c->load)
        return sbx_error_set(err, SBX_E_INVALID, "memory commit: no changes or loader");
    struct commit_run r = {.s = s, .c = c};
    r.order = malloc(c->nchanges * sizeof *r.order);
    if (!r.order)
        return sbxh_store_nomem(s, err);
    rc = check_changes(c, r.order, err);
    if (rc == SBX_OK) {
        pthread_mutex_lock(&s->lock);
        rc = sbx_store_ready(s, err);
        if (rc == SBX_OK && (rc = sbx_store_prims_of(s)->begin(s, err)) == SBX_OK) {
            rc = commit_locked(&r, conflicts, nconflicts, err);
            rc = sbx_store_prims_of(s)->finish(s, rc, err);
        }
        pthread_mutex_unlock(&s->lock);
    }
    free(r.order);
    if (rc == SBX_OK && version)
        *version = r.version;
    return rc;
}

int sbxh_mstore_head(struct sbx_store *s, const char *slug, const char *path, int64_t at,
                     int64_t *version, bool *live, char sha256[65], sbx_error *err)
{
    *version = 0;
    *live = false;
    sha256[0] = '\0';
    struct sbx_store_value p[] = {SBX_SV_T(slug), SBX_SV_T(path), SBX_SV_I(at)};
    struct sbx_store_cursor *cur = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             at > 0 ? "SELECT version, deleted, sha256 FROM memory_versions "
                                      "WHERE slug = $1 AND path = $2 AND version <= $3 "
                                      "ORDER BY version DESC LIMIT 1"
                                    : "SELECT version, deleted, sha256 FROM memory_heads "
                                      "WHERE slug = $1 AND path = $2",
                             p, at > 0 ? 3 : 2, &cur, NULL, err);
    bool row = false;
    if (rc == SBX_OK && (rc = cur->next(cur, &row, err)) == SBX_OK && row) {
        *version = cur->integer(cur, 0);
        *live = cur->integer(cur, 1) == 0;
        const char *h = cur->text(cur, 2);
        snprintf(sha256, 65, "%s", h ? h : "");
    }
    if (cur)
        sbx_store_prims_of(s)->query_end(s, cur);
    pthread_mutex_unlock(&s->lock);
    return rc;
}
