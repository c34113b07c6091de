/*
 * pools.c - warm pool members and sessions' sandbox keys in the store
 * (store/pools.h), over the driver's query primitive. The claim is one
 * transaction: pick a ready member (PostgreSQL skips rows another claimant
 * has locked), flip it to claimed with a conditional UPDATE, hand its
 * reference to the claimant's intent and record the sandbox key.
 */
#include "store/pools.h"
#include "store/driver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PG_NOW "(extract(epoch FROM now()) * 1000)::bigint"

static bool is_pg(struct sbx_store *s)
{
    return strcmp(sbxh_store_driver(s), "postgres") == 0;
}

/* The store clock as SQL: the server's for PostgreSQL (leases across
 * machines), the caller's for SQLite (parameter $n). */
static const char *now_sql(struct sbx_store *s, char *buf, size_t len, int n)
{
    if (is_pg(s))
        return PG_NOW;
    snprintf(buf, len, "$%d", n);
    return buf;
}

void sbxh_pool_member_clear(struct sbx_pool_member *pm)
{
    if (!pm)
        return;
    free(pm->member_key);
    free(pm->pool);
    free(pm->provider);
    free(pm->spec_hash);
    free(pm->external_id);
    free(pm->state);
    free(pm->owner);
    free(pm->claimed_by);
    memset(pm, 0, sizeof *pm);
}

void sbxh_pool_members_free(struct sbx_pool_member *v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        sbxh_pool_member_clear(&v[i]);
    free(v);
}

#define MEMBER_COLS                                                               \
    "member_key, pool, provider, spec_hash, external_id, state, owner, claimed_by, " \
    "created_at, updated_at"

static int read_member(struct sbx_store *s, struct sbx_store_cursor *c, int64_t now,
                       struct sbx_pool_member *pm, sbx_error *err)
{
    bool failed = false;
    pm->member_key = sbxh_store_strdup(c->text(c, 0), &failed);
    pm->pool = sbxh_store_strdup(c->text(c, 1), &failed);
    pm->provider = sbxh_store_strdup(c->text(c, 2), &failed);
    pm->spec_hash = sbxh_store_strdup(c->text(c, 3), &failed);
    pm->external_id = sbxh_store_strdup(c->text(c, 4), &failed);
    pm->state = sbxh_store_strdup(c->text(c, 5), &failed);
    pm->owner = sbxh_store_strdup(c->text(c, 6), &failed);
    pm->claimed_by = sbxh_store_strdup(c->text(c, 7), &failed);
    pm->created_at = c->integer(c, 8);
    pm->updated_at = c->integer(c, 9);
    pm->age_ms = now > pm->updated_at ? now - pm->updated_at : 0;
    if (failed) {
        sbxh_pool_member_clear(pm);
        return sbxh_store_nomem(s, err);
    }
    return SBX_OK;
}

/* Run one statement with the store's lock held; *affected may be NULL. */
static int exec_locked(struct sbx_store *s, const char *sql,
                       const struct sbx_store_value *p, int n, int64_t *affected,
                       sbx_error *err)
{
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s, sql, p, n, NULL, affected, err);
    return rc;
}

static int exec1(struct sbx_store *s, const char *sql, const struct sbx_store_value *p,
                 int n, int64_t *affected, sbx_error *err)
{
    pthread_mutex_lock(&s->lock);
    int rc = exec_locked(s, sql, p, n, affected, err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_pool_insert(struct sbx_store *s, const char *member_key, const char *pool,
                           const char *provider, const char *spec_hash, const char *owner,
                           sbx_error *err)
{
    char nb[8], sql[512];
    const char *now = now_sql(s, nb, sizeof nb, 6);
    snprintf(sql, sizeof sql,
             "INSERT INTO pool_members (member_key, pool, provider, spec_hash, state, "
             "owner, created_at, updated_at) VALUES ($1, $2, $3, $4, 'creating', $5, "
             "%s, %s) ON CONFLICT (member_key) DO NOTHING",
             now, now);
    struct sbx_store_value p[] = {SBX_SV_T(member_key), SBX_SV_T(pool),
                                  SBX_SV_T(provider),   SBX_SV_T(spec_hash),
                                  SBX_SV_T(owner),      SBX_SV_I(sbx_store_wall_ms())};
    int64_t n = 0;
    int rc = exec1(s, sql, p, is_pg(s) ? 5 : 6, &n, err);
    if (rc == SBX_OK && n != 1)
        return sbx_error_set(err, SBX_E_EXISTS, "%s: pool member %s exists already",
                             s->label, member_key);
    return rc;
}

int sbxh_store_pool_set(struct sbx_store *s, const char *member_key, const char *owner,
                        const char *external_id, bool ready, sbx_error *err)
{
    char nb[8], sql[512];
    snprintf(sql, sizeof sql,
             "UPDATE pool_members SET external_id = coalesce($3, external_id), "
             "state = %s, updated_at = %s WHERE member_key = $1 AND owner = $2 AND "
             "state IN ('creating', 'checking')",
             ready ? "'ready'" : "state", now_sql(s, nb, sizeof nb, 4));
    struct sbx_store_value p[] = {SBX_SV_T(member_key), SBX_SV_T(owner),
                                  external_id ? SBX_SV_T(external_id)
                                              : (struct sbx_store_value){0},
                                  SBX_SV_I(sbx_store_wall_ms())};
    int64_t n = 0;
    int rc = exec1(s, sql, p, is_pg(s) ? 3 : 4, &n, err);
    if (rc == SBX_OK && n != 1)
        return sbx_error_set(err, SBX_E_DENIED,
                             "%s: pool member %s is no longer this worker's to set up",
                             s->label, member_key);
    return rc;
}

int sbxh_store_pool_take(struct sbx_store *s, const char *member_key, const char *from,
                         const char *seen_owner, const char *to, const char *owner,
                         bool *taken, sbx_error *err)
{
    *taken = false;
    char nb[8], sql[512];
    snprintf(sql, sizeof sql,
             "UPDATE pool_members SET state = $3, owner = $4, updated_at = %s "
             "WHERE member_key = $1 AND state = $2 AND ($5 = '' OR owner = $5)",
             now_sql(s, nb, sizeof nb, 6));
    struct sbx_store_value p[] = {SBX_SV_T(member_key), SBX_SV_T(from), SBX_SV_T(to),
                                  SBX_SV_T(owner),
                                  SBX_SV_T(seen_owner ? seen_owner : ""),
                                  SBX_SV_I(sbx_store_wall_ms())};
    int64_t n = 0;
    int rc = exec1(s, sql, p, is_pg(s) ? 5 : 6, &n, err);
    *taken = rc == SBX_OK && n == 1;
    return rc;
}

int sbxh_store_pool_delete(struct sbx_store *s, const char *member_key, sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(member_key)};
    return exec1(s, "DELETE FROM pool_members WHERE member_key = $1", p, 1, NULL, err);
}

/* The store clock in ms (the server's for PostgreSQL). Lock held. */
static int store_now(struct sbx_store *s, int64_t *out, sbx_error *err)
{
    *out = sbx_store_wall_ms();
    if (!is_pg(s))
        return SBX_OK;
    struct sbx_store_cursor *c = NULL;
    int rc = sbx_store_prims_of(s)->query(s, "SELECT " PG_NOW, NULL, 0, &c, NULL, err);
    bool row = false;
    if (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row)
        *out = c->integer(c, 0);
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    return rc;
}

int sbxh_store_pool_list(struct sbx_store *s, struct sbx_pool_member **out, size_t *n,
                         sbx_error *err)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&s->lock);
    int64_t now = 0;
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = store_now(s, &now, err);
    struct sbx_store_cursor *c = NULL;
    struct sbx_store_value p[] = {SBX_SV_I(SBX_STORE_POOL_LIST_MAX)};
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(s,
                                          "SELECT " MEMBER_COLS " FROM pool_members "
                                          "ORDER BY pool, created_at, member_key LIMIT $1",
                                          p, 1, &c, NULL, err);
    struct sbx_pool_member *v = NULL;
    size_t count = 0, cap = 0;
    while (rc == SBX_OK) {
        bool row = false;
        if ((rc = c->next(c, &row, err)) != SBX_OK || !row)
            break;
        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct sbx_pool_member *nv = realloc(v, ncap * sizeof *nv);
            if (!nv) {
                rc = sbxh_store_nomem(s, err);
                break;
            }
            v = nv;
            cap = ncap;
        }
        memset(&v[count], 0, sizeof v[count]);
        if ((rc = read_member(s, c, now, &v[count], err)) != SBX_OK)
            break;
        count++;
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    pthread_mutex_unlock(&s->lock);
    if (rc != SBX_OK) {
        sbxh_pool_members_free(v, count);
        return rc;
    }
    *out = v;
    *n = count;
    return SBX_OK;
}

/* The intent of key must be owner's: its reference and step set. */
static int set_intent_ref(struct sbx_store *s, const char *key, const char *owner,
                          const char *external_id, const char *step, sbx_error *err)
{
    char nb[8], sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE intents SET external_id = $2, step = $3, updated_at = %s "
             "WHERE session_key = $1 AND owner = $4",
             now_sql(s, nb, sizeof nb, 5));
    struct sbx_store_value p[] = {SBX_SV_T(key),
                                  external_id ? SBX_SV_T(external_id)
                                              : (struct sbx_store_value){0},
                                  SBX_SV_T(step), SBX_SV_T(owner),
                                  SBX_SV_I(sbx_store_wall_ms())};
    int64_t n = 0;
    int rc = sbx_store_prims_of(s)->query(s, sql, p, is_pg(s) ? 4 : 5, NULL, &n, err);
    if (rc == SBX_OK && n != 1) {
        char lbl[13];
        sbxh_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_DENIED,
                             "%s: the provisioning intent of session %s is not held "
                             "by the caller",
                             s->label, lbl);
    }
    return rc;
}

static int claim_tx(struct sbx_store *s, const char *pool, const char *key,
                    const char *owner, struct sbx_pool_member *out, bool *found,
                    sbx_error *err)
{
    const struct sbx_store_prims *pr = sbx_store_prims_of(s);
    int64_t now = 0;
    int rc = store_now(s, &now, err);
    /* A few tries: with PostgreSQL a row may be taken between the SELECT
     * and the UPDATE by a claimant that did not lock it yet. */
    for (int attempt = 0; rc == SBX_OK && attempt < 8; attempt++) {
        struct sbx_store_value p[] = {SBX_SV_T(pool)};
        struct sbx_store_cursor *c = NULL;
        rc = pr->query(s,
                       is_pg(s) ? "SELECT " MEMBER_COLS " FROM pool_members WHERE pool = $1 "
                                  "AND state = 'ready' AND external_id IS NOT NULL "
                                  "ORDER BY created_at, member_key LIMIT 1 "
                                  "FOR UPDATE SKIP LOCKED"
                                : "SELECT " MEMBER_COLS " FROM pool_members WHERE pool = $1 "
                                  "AND state = 'ready' AND external_id IS NOT NULL "
                                  "ORDER BY created_at, member_key LIMIT 1",
                       p, 1, &c, NULL, err);
        bool row = false;
        if (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row)
            rc = read_member(s, c, now, out, err);
        if (c)
            pr->query_end(s, c);
        if (rc != SBX_OK || !row)
            return rc;
        char nb[8], sql[256];
        snprintf(sql, sizeof sql,
                 "UPDATE pool_members SET state = 'claimed', claimed_by = $2, "
                 "updated_at = %s WHERE member_key = $1 AND state = 'ready'",
                 now_sql(s, nb, sizeof nb, 3));
        struct sbx_store_value u[] = {SBX_SV_T(out->member_key), SBX_SV_T(key),
                                      SBX_SV_I(sbx_store_wall_ms())};
        int64_t n = 0;
        if ((rc = pr->query(s, sql, u, is_pg(s) ? 2 : 3, NULL, &n, err)) != SBX_OK)
            return rc;
        if (n != 1) {
            sbxh_pool_member_clear(out);
            continue;
        }
        if ((rc = set_intent_ref(s, key, owner, out->external_id, "pool", err)) != SBX_OK)
            return rc;
        struct sbx_store_value k[] = {SBX_SV_T(key), SBX_SV_T(out->member_key),
                                      SBX_SV_T(pool), SBX_SV_I(sbx_store_wall_ms())};
        rc = pr->query(s,
                       "INSERT INTO session_sandboxes (session_key, sandbox_key, pool, "
                       "updated_at) VALUES ($1, $2, $3, $4) ON CONFLICT (session_key) "
                       "DO UPDATE SET sandbox_key = excluded.sandbox_key, "
                       "pool = excluded.pool, updated_at = excluded.updated_at",
                       k, 4, NULL, NULL, err);
        if (rc == SBX_OK)
            *found = true;
        return rc;
    }
    return rc;
}

int sbxh_store_pool_claim(struct sbx_store *s, const char *pool, const char *session_key,
                          const char *owner, struct sbx_pool_member *out, bool *found,
                          sbx_error *err)
{
    *found = false;
    memset(out, 0, sizeof *out);
    const struct sbx_store_prims *pr = sbx_store_prims_of(s);
    pthread_mutex_lock(&s->lock);
    int rc = pr->begin(s, err);
    if (rc == SBX_OK)
        rc = pr->finish(s, claim_tx(s, pool, session_key, owner, out, found, err), err);
    pthread_mutex_unlock(&s->lock);
    if (rc != SBX_OK || !*found) {
        *found = false;
        sbxh_pool_member_clear(out);
    }
    return rc;
}

static int unclaim_tx(struct sbx_store *s, const char *key, const char *owner,
                      const char *member_key, sbx_error *err)
{
    const struct sbx_store_prims *pr = sbx_store_prims_of(s);
    int rc = set_intent_ref(s, key, owner, NULL, "claimed", err);
    /* back into `checking`, the caller's: it destroys it next, and a crash
     * before that leaves it to reconcile */
    char nb[8], sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE pool_members SET state = 'checking', owner = $2, claimed_by = NULL, "
             "updated_at = %s WHERE member_key = $1",
             now_sql(s, nb, sizeof nb, 3));
    struct sbx_store_value p[] = {SBX_SV_T(member_key), SBX_SV_T(owner),
                                  SBX_SV_I(sbx_store_wall_ms())};
    struct sbx_store_value k[] = {SBX_SV_T(key)};
    if (rc == SBX_OK)
        rc = pr->query(s, sql, p, is_pg(s) ? 2 : 3, NULL, NULL, err);
    if (rc == SBX_OK)
        rc = pr->query(s, "DELETE FROM session_sandboxes WHERE session_key = $1", k, 1,
                       NULL, NULL, err);
    return rc;
}

int sbxh_store_pool_unclaim(struct sbx_store *s, const char *session_key,
                            const char *owner, const char *member_key, sbx_error *err)
{
    const struct sbx_store_prims *pr = sbx_store_prims_of(s);
    pthread_mutex_lock(&s->lock);
    int rc = pr->begin(s, err);
    if (rc == SBX_OK)
        rc = pr->finish(s, unclaim_tx(s, session_key, owner, member_key, err), err);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_sandbox_key(struct sbx_store *s, const char *session_key, char *out,
                           bool *found, sbx_error *err)
{
    *found = false;
    out[0] = '\0';
    struct sbx_store_value p[] = {SBX_SV_T(session_key)};
    struct sbx_store_cursor *c = NULL;
    pthread_mutex_lock(&s->lock);
    int rc = sbx_store_ready(s, err);
    if (rc == SBX_OK)
        rc = sbx_store_prims_of(s)->query(
            s, "SELECT sandbox_key FROM session_sandboxes WHERE session_key = $1", p, 1,
            &c, NULL, err);
    bool row = false;
    if (rc == SBX_OK && (rc = c->next(c, &row, err)) == SBX_OK && row) {
        const char *k = c->text(c, 0);
        if (k && strlen(k) <= SBX_STORE_KEY_MAX) {
            memcpy(out, k, strlen(k) + 1);
            *found = true;
        }
    }
    if (c)
        sbx_store_prims_of(s)->query_end(s, c);
    pthread_mutex_unlock(&s->lock);
    return rc;
}

int sbxh_store_drop_sandbox_key(struct sbx_store *s, const char *session_key,
                                sbx_error *err)
{
    struct sbx_store_value p[] = {SBX_SV_T(session_key)};
    return exec1(s, "DELETE FROM session_sandboxes WHERE session_key = $1", p, 1, NULL,
                 err);
}
