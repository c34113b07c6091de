/*
 * session_activity.c - when each session was last used and whether it is
 * paused (table session_activity, schema 7), the use locks that keep the
 * idle evictor away from a session whose command is running, and the count
 * of a provider's sandboxes behind max_sandboxes.
 *
 * Use locks are held across processes without a row to clean up after a
 * crash: the kernel or the server drops them with their holder.
 *  - SQLite: an open-file-description lock (F_OFD_SETLK) on one byte of
 *    the file "<database>-use.lock", at an offset taken from the key's
 *    hash. Each lock opens the file anew, so two holders in one process
 *    conflict like two processes do.
 *  - PostgreSQL: a session-level advisory lock on the store's connection
 *    (pg_try_advisory_lock[_shared]) keyed by the key's hash. A lost
 *    connection drops it (the evictor may then see the session as free);
 *    holders in one process share the connection and so do not conflict
 *    with each other.
 * Commands hold the lock shared; the evictor tries it exclusive, without
 * waiting, and skips a session it cannot get.
 */
#include "store/driver.h"

#include "sbx/provider.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool is_pg(struct sbx_store *s)
{
    return strcmp(s->ops->name, "postgres") == 0;
}

/* ---- last use and the paused mark ------------------------------------- */

int sbxh_store_activity_touch(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(key), SBX_SV_I(sbx_store_wall_ms())};
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "INSERT INTO session_activity (session_key, last_used_at, "
                             "paused) VALUES ($1, $2, 0) ON CONFLICT (session_key) DO "
                             "UPDATE SET last_used_at = excluded.last_used_at, paused = 0",
                             p, 2, NULL, NULL, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_activity_set_paused(struct sbx_store *s, const char *key, bool paused,
                                   sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(key), SBX_SV_I(sbx_store_wall_ms()),
                                  SBX_SV_I(paused ? 1 : 0)};
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    /* a pause keeps the last use (the idle clock goes on towards
     * idle_destroy); a resume is a use */
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             paused ? "INSERT INTO session_activity (session_key, "
                                      "last_used_at, paused) VALUES ($1, $2, $3) ON "
                                      "CONFLICT (session_key) DO UPDATE SET paused = "
                                      "excluded.paused"
                                    : "INSERT INTO session_activity (session_key, "
                                      "last_used_at, paused) VALUES ($1, $2, $3) ON "
                                      "CONFLICT (session_key) DO UPDATE SET paused = "
                                      "excluded.paused, last_used_at = "
                                      "excluded.last_used_at",
                             p, 3, NULL, NULL, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_activity_get(struct sbx_store *s, const char *key,
                            struct sbx_store_activity *out, bool *found, sbx_error *err)
{
    memset(out, 0, sizeof *out);
    *found = false;
    struct sbx_store_value p[] = {SBX_SV_T(key)};
    struct sbx_store_cursor *c = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "SELECT last_used_at, paused FROM session_activity WHERE "
                             "session_key = $1",
                             p, 1, &c, NULL, err);
    bool row = false;
    if (rc == SBX_OK)
        rc = c->next(c, &row, err);
    if (rc == SBX_OK && row) {
        out->last_used_at = c->integer(c, 0);
        out->paused = c->integer(c, 1) != 0;
        *found = true;
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_activity_drop(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(key)};
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                             "DELETE FROM session_activity WHERE session_key = $1", p, 1,
                             NULL, NULL, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

/* ---- use locks -------------------------------------------------------- */

struct sbx_store_use_lock {
    int fd;         /* SQLite: the lock file, -1 for PostgreSQL */
    int64_t id;     /* the lock's number */
    bool exclusive;
};

/* A lock number from the key's hash: its first 15 hex digits (positive,
 * and small enough for an off_t and a PostgreSQL bigint). */
static int64_t lock_id(const char *key)
{
    char hash[SBX_KEY_HASH_LEN + 1];
    sbx_key_hash(key, hash);
    hash[15] = '\0';
    return (int64_t)strtoll(hash, NULL, 16);
}

/* The lock file beside the SQLite database (PRAGMA database_list). */
static int lock_file(struct sbx_store *s, char *out, size_t cap, sbx_error *err)
{
    struct sbx_store_cursor *c = NULL;
    int rc = sbx_store_prims_of(s)->query(s, "PRAGMA database_list", NULL, 0, &c, NULL,
                                          err);
    bool row = false;
    out[0] = '\0';
    while (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row) {
        const char *name = c->text(c, 1), *file = c->text(c, 2);
        if (name && !strcmp(name, "main") && file && file[0])
            snprintf(out, cap, "%s-use.lock", file);
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    if (rc == SBX_OK && !out[0])
        rc = sbx_error_set(err, SBX_E_INTERNAL, "%s: the database has no file name",
                           s->label);
    return rc;
}

static int sqlite_lock(struct sbx_store *s, struct sbx_store_use_lock *l, bool *got,
                       sbx_error *err)
{
    char path[PATH_MAX + 16];
    int rc = lock_file(s, path, sizeof path, err);
    if (rc != SBX_OK)
        return rc;
    l->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (l->fd < 0)
        return sbx_error_set(err, SBX_E_IO, "%s: cannot open the use lock file: %s",
                             s->label, strerror(errno));
    struct flock fl = {0};
    fl.l_type = l->exclusive ? F_WRLCK : F_RDLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)l->id;
    fl.l_len = 1;
    if (fcntl(l->fd, F_OFD_SETLK, &fl) == 0) {
        *got = true;
        return SBX_OK;
    }
    int e = errno;
    close(l->fd);
    l->fd = -1;
    if (e == EAGAIN || e == EACCES)
        return SBX_OK;
    return sbx_error_set(err, SBX_E_IO, "%s: cannot take a use lock: %s", s->label,
                         strerror(e));
}

static int pg_lock(struct sbx_store *s, struct sbx_store_use_lock *l, bool *got,
                   sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_I(l->id)};
    struct sbx_store_cursor *c = NULL;
    int rc = sbx_store_prims_of(s)->query(s,
                                          l->exclusive
                                              ? "SELECT pg_try_advisory_lock($1::bigint)::int"
                                              : "SELECT pg_try_advisory_lock_shared("
                                                "$1::bigint)::int",
                                          p, 1, &c, NULL, err);
    bool row = false;
    if (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row)
        *got = c->integer(c, 0) != 0;
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    return rc;
}

int sbxh_store_use_lock(struct sbx_store *s, const char *key, bool exclusive,
                        struct sbx_store_use_lock **out, sbx_error *err)
{
    *out = NULL;
    struct sbx_store_use_lock *l = calloc(1, sizeof *l);
    if (!l)
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    l->fd = -1;
    l->id = lock_id(key);
    l->exclusive = exclusive;
    bool got = false;
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = is_pg(s) ? pg_lock(s, l, &got, err) : sqlite_lock(s, l, &got, err);
    pthread_mutex_unlock(&s->lock);
    if (rc == SBX_OK && !got) {
        char lbl[13];
        sbxh_store_key_label(key, lbl);
        rc = sbx_error_set(err, SBX_E_EXISTS, "%s: session %s is in use", s->label, lbl);
    }
    if (rc != SBX_OK) {
        free(l);
        return rc;
    }
    *out = l;
    return SBX_OK;
}

void sbxh_store_use_unlock(struct sbx_store *s, struct sbx_store_use_lock *l)
{
    if (!l)
        return;
    if (l->fd >= 0) {
        close(l->fd); /* drops the OFD lock */
    } else {
        struct sbx_store_value p[] = {SBX_SV_I(l->id)};
        struct sbx_store_cursor *c = NULL;
        sbx_error ignored;
        pthread_mutex_lock(&s->lock);
        int rc = sbx_store_prims_of(s)->query(s,
                                              l->exclusive
                                                  ? "SELECT pg_advisory_unlock($1::bigint)"
                                                  : "SELECT pg_advisory_unlock_shared("
                                                    "$1::bigint)",
                                              p, 1, &c, NULL, &ignored);
        bool row;
        if (rc == SBX_OK)
            c->next(c, &row, &ignored);
        if (c)
            sbx_store_prims_of(s)->query_end(s, c);
        pthread_mutex_unlock(&s->lock);
    }
    free(l);
}

/* ---- max_sandboxes ---------------------------------------------------- */

/*
 * Warm pool members of the provider that count against max_sandboxes:
 * every member not yet claimed (a claimed one is counted by its session's
 * intent or binding). When `pool` is given, also how many of that pool's
 * members are ready: the admission about to claim one of them.
 */
static int pool_members(struct sbx_store *s, const char *provider, const char *pool,
                        int64_t *n, int64_t *ready, sbx_error *err)
{
    const struct sbx_store_prims *p = sbx_store_prims_of(s);
    struct sbx_store_value v[] = {SBX_SV_T(provider), SBX_SV_T(pool ? pool : "")};
    struct sbx_store_cursor *c = NULL;
    int rc = p->query(s,
                      "SELECT (SELECT count(*) FROM pool_members WHERE provider = $1 "
                      "AND state <> 'claimed'), (SELECT count(*) FROM pool_members "
                      "WHERE provider = $1 AND pool = $2 AND state = 'ready')",
                      v, 2, &c, NULL, err);
    bool row = false;
    *n = *ready = 0;
    if (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row) {
        *n = c->integer(c, 0);
        *ready = pool ? c->integer(c, 1) : 0;
    }
    if (c)
        p->query_end(s, c);
    return rc;
}

/* Under READ COMMITTED two claims could both count max - 1: one
 * transaction-level advisory lock per provider makes them take turns
 * (SQLite's BEGIN IMMEDIATE already does). */
static int quota_lock_tx(struct sbx_store *s, const char *provider, sbx_error *err)
{
    if (!is_pg(s))
        return SBX_OK;
    const struct sbx_store_prims *p = sbx_store_prims_of(s);
    struct sbx_store_value v[] = {SBX_SV_I(lock_id(provider))};
    struct sbx_store_cursor *c = NULL;
    int rc = p->query(s, "SELECT pg_advisory_xact_lock($1::bigint)::text", v, 1, &c, NULL,
                      err);
    bool row;
    if (rc == SBX_OK)
        rc = c->next(c, &row, err);
    if (c)
        p->query_end(s, c);
    return rc;
}

/* The provider's bindings and intents plus its unclaimed pool members. */
static int count_sandboxes(struct sbx_store *s, const char *provider, const char *pool,
                           int64_t *n, int64_t *ready, sbx_error *err)
{
    const struct sbx_store_prims *p = sbx_store_prims_of(s);
    struct sbx_store_value v[] = {SBX_SV_T(provider)};
    struct sbx_store_cursor *c = NULL;
    int rc = p->query(s,
                      "SELECT (SELECT count(*) FROM bindings WHERE provider = $1) + "
                      "(SELECT count(*) FROM intents WHERE provider = $1)",
                      v, 1, &c, NULL, err);
    bool row = false;
    *n = 0;
    if (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row)
        *n = c->integer(c, 0);
    if (c)
        p->query_end(s, c);
    int64_t pooled = 0;
    if (rc == SBX_OK)
        rc = pool_members(s, provider, pool, &pooled, ready, err);
    *n += pooled;
    return rc;
}

static int over_limit(const char *provider, int64_t max, int64_t n, sbx_error *err)
{
    return sbx_error_set(err, SBX_E_UNAVAILABLE,
                         "provider \"%s\" has reached max_sandboxes (%lld): %lld "
                         "sandboxes exist or are being made; delete a session or "
                         "raise providers.%s.max_sandboxes",
                         provider, (long long)max, (long long)n, provider);
}

int sbxh_store_quota_check_tx(struct sbx_store *s, const char *provider, const char *pool,
                              int64_t max, sbx_error *err)
{
    int64_t n = 0, ready = 0;
    int rc = quota_lock_tx(s, provider, err);
    if (rc == SBX_OK)
        rc = count_sandboxes(s, provider, pool, &n, &ready, err);
    if (rc != SBX_OK)
        return rc;
    /* an admission that will take a ready member adds no sandbox (the
     * member stops counting when claimed, its intent starts); if the
     * member is gone by then, sbxh_store_quota_recheck decides */
    if (n - (ready > 0 ? 1 : 0) >= max)
        return over_limit(provider, max, n, err);
    return SBX_OK;
}

int sbxh_store_quota_recheck(struct sbx_store *s, const char *provider, int64_t max,
                             sbx_error *err)
{
    const struct sbx_store_prims *p = sbx_store_prims_of(s);
    int64_t n = 0, ready = 0;
    pthread_mutex_lock(&s->lock);
    int rc = p->begin(s, err);
    if (rc == SBX_OK) {
        int trc = quota_lock_tx(s, provider, err);
        if (trc == SBX_OK)
            trc = count_sandboxes(s, provider, NULL, &n, &ready, err);
        rc = p->finish(s, trc, err);
    }
    pthread_mutex_unlock(&s->lock);
    if (rc != SBX_OK)
        return rc;
    /* the caller's own intent is among the n */
    return n > max ? over_limit(provider, max, n, err) : SBX_OK;
}

int sbxh_store_quota_count(struct sbx_store *s, const char *provider, int64_t *n,
                           sbx_error *err)
{
    int64_t ready = 0;
    pthread_mutex_lock(&s->lock);
    int rc = count_sandboxes(s, provider, NULL, n, &ready, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}
