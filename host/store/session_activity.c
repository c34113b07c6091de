/*
 * session_activity.c - when each session was last used and whether it is
 * paused (table session_activity, schema 7), the use locks that keep the
 * idle evictor away from a session whose command is running, and the count
 * of a provider's sandboxes behind max_sandboxes.
 *
 * Session locks (the use lock, the memory lock) are held across processes
 * without a row to clean up after a crash: the kernel or the server drops
 * them with their holder.
 *  - SQLite: an open-file-description lock (F_OFD_SETLK) on one byte of
 *    the file "<database>-use.lock", at an offset taken from the key's
 *    hash and the lock's kind. Each lock opens the file anew, so two
 *    holders in one process conflict like two processes do.
 *  - PostgreSQL: a session-level advisory lock (pg_try_advisory_lock
 *    [_shared]) with the same number, on a connection of the lock's own
 *    (store/pg.c keeps a few idle ones for reuse): two holders in one
 *    process conflict like two machines do, and a reconnect of the
 *    store's shared connection drops nothing. A lost lock connection
 *    drops the lock; the holder learns it at its next call.
 * Commands hold the use lock shared; the evictor tries it exclusive,
 * without waiting, and skips a session it cannot get. The memory lock
 * (sessions/memory_hooks.c) and the key lock (sessions/key_lock.c, taken
 * on PostgreSQL only) are the same objects with another kind.
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

/* ---- session locks ---------------------------------------------------- */

struct sbx_store_lock {
    struct sbx_store *s;
    int fd;     /* SQLite: the lock file */
    void *conn; /* PostgreSQL: the lock's own connection */
    int64_t id; /* the lock's number */
    int mode;   /* enum sbx_store_lock_mode held now */
};

/* A session's number: the first 15 hex digits of the key's hash (positive,
 * small enough for an off_t and a PostgreSQL bigint), with the kind in the
 * two bits above them (USE keeps the bare number). */
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

int sbxh_store_lock_open(struct sbx_store *s, const char *key, int kind,
                         struct sbx_store_lock **out, sbx_error *err)
{
    *out = NULL;
    struct sbx_store_lock *l = calloc(1, sizeof *l);
    if (!l)
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    l->s = s;
    l->fd = -1;
    l->id = lock_id(key) | ((int64_t)kind << 60);
    const struct sbx_store_prims *p = sbx_store_prims_of(s);
    int rc;
    if (p->lock_conn_open) {
        rc = p->lock_conn_open(s, &l->conn, err);
    } else {
        char path[PATH_MAX + 16];
        pthread_mutex_lock(&s->lock);
        rc = sbx_store_ready(s, err);
        if (rc == SBX_OK)
            rc = lock_file(s, path, sizeof path, err);
        pthread_mutex_unlock(&s->lock);
        /* each object opens the file anew: its own open file description */
        if (rc == SBX_OK &&
            (l->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
            rc = sbx_error_set(err, SBX_E_IO, "%s: cannot open the lock file: %s",
                               s->label, strerror(errno));
    }
    if (rc != SBX_OK) {
        free(l);
        return rc;
    }
    *out = l;
    return SBX_OK;
}

static int file_try(struct sbx_store_lock *l, int mode, bool *got, sbx_error *err)
{
    struct flock fl = {0};
    fl.l_type = mode == SBX_STORE_EXCLUSIVE ? F_WRLCK
                : mode == SBX_STORE_SHARED  ? F_RDLCK
                                            : F_UNLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = (off_t)l->id;
    fl.l_len = 1;
    /* a conversion on one description is atomic */
    if (fcntl(l->fd, F_OFD_SETLK, &fl) == 0) {
        *got = true;
        return SBX_OK;
    }
    int e = errno;
    if (e == EAGAIN || e == EACCES)
        return SBX_OK;
    return sbx_error_set(err, SBX_E_IO, "%s: session lock: %s", l->s->label, strerror(e));
}

/* On the server a session's own locks never conflict with each other: the
 * new mode is taken first, then the old one dropped (so EXCLUSIVE to
 * SHARED has no gap). */
static int server_try(struct sbx_store_lock *l, int mode, bool *got, sbx_error *err)
{
    const struct sbx_store_prims *p = sbx_store_prims_of(l->s);
    bool ok = true;
    int rc = SBX_OK;
    if (mode != SBX_STORE_UNLOCKED)
        rc = p->lock_conn_call(l->s, l->conn,
                               mode == SBX_STORE_EXCLUSIVE ? SBX_STORE_LOCK_TRY_EXCLUSIVE
                                                           : SBX_STORE_LOCK_TRY_SHARED,
                               l->id, &ok, err);
    if (rc != SBX_OK || !ok)
        return rc;
    if (l->mode != SBX_STORE_UNLOCKED)
        rc = p->lock_conn_call(l->s, l->conn,
                               l->mode == SBX_STORE_EXCLUSIVE ? SBX_STORE_LOCK_DROP_EXCLUSIVE
                                                              : SBX_STORE_LOCK_DROP_SHARED,
                               l->id, &ok, err);
    if (rc == SBX_OK)
        *got = true;
    return rc;
}

int sbxh_store_lock_try(struct sbx_store_lock *l, int mode, bool *got, sbx_error *err)
{
    *got = false;
    if (mode == l->mode) {
        *got = true;
        return SBX_OK;
    }
    int rc = l->conn ? server_try(l, mode, got, err) : file_try(l, mode, got, err);
    if (rc != SBX_OK) {
        /* the connection may be gone, and the server's locks with it: hold
         * nothing from here on (a file lock is left as it was) */
        if (l->conn) {
            l->mode = SBX_STORE_UNLOCKED;
            sbx_store_prims_of(l->s)->lock_conn_close(l->s, l->conn, false);
            l->conn = NULL;
            l->fd = -2; /* neither: every further call fails */
        }
        return rc;
    }
    if (*got)
        l->mode = mode;
    return SBX_OK;
}

void sbxh_store_lock_close(struct sbx_store_lock *l)
{
    if (!l)
        return;
    if (l->conn) {
        bool got = l->mode == SBX_STORE_UNLOCKED;
        sbx_error ignored;
        if (!got && server_try(l, SBX_STORE_UNLOCKED, &got, &ignored) != SBX_OK)
            got = false;
        /* a connection that still holds something is ended, never reused */
        sbx_store_prims_of(l->s)->lock_conn_close(l->s, l->conn, got);
    } else if (l->fd >= 0) {
        close(l->fd); /* drops the OFD lock */
    }
    free(l);
}

bool sbxh_store_locks_on_server(struct sbx_store *s)
{
    return sbx_store_prims_of(s)->lock_conn_open != NULL;
}

/* ---- use locks -------------------------------------------------------- */

struct sbx_store_use_lock {
    struct sbx_store_lock *l;
};

int sbxh_store_use_lock(struct sbx_store *s, const char *key, bool exclusive,
                        struct sbx_store_use_lock **out, sbx_error *err)
{
    *out = NULL;
    struct sbx_store_use_lock *u = calloc(1, sizeof *u);
    if (!u)
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    bool got = false;
    int rc = sbxh_store_lock_open(s, key, SBX_STORE_LOCK_USE, &u->l, err);
    if (rc == SBX_OK)
        rc = sbxh_store_lock_try(u->l, exclusive ? SBX_STORE_EXCLUSIVE : SBX_STORE_SHARED,
                                 &got, err);
    if (rc == SBX_OK && !got) {
        char lbl[13];
        sbxh_store_key_label(key, lbl);
        rc = sbx_error_set(err, SBX_E_EXISTS, "%s: session %s is in use", s->label, lbl);
    }
    if (rc != SBX_OK) {
        sbxh_store_lock_close(u->l);
        free(u);
        return rc;
    }
    *out = u;
    return SBX_OK;
}

void sbxh_store_use_unlock(struct sbx_store *s, struct sbx_store_use_lock *u)
{
    (void)s;
    if (!u)
        return;
    sbxh_store_lock_close(u->l);
    free(u);
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
