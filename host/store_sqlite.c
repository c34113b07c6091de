/*
 * store_sqlite.c - the SQLite driver of the session store: one database
 * file in WAL mode, shared by the processes of one machine.
 *
 * Every write runs in BEGIN IMMEDIATE, which takes the database's single
 * write lock up front: racing writers queue on it (for up to the lock
 * timeout, via sqlite3_busy_timeout) instead of failing later with
 * SQLITE_BUSY_SNAPSHOT, so each operation sees the state the previous one
 * committed. Statements are prepared once per connection.
 */
#include "store.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum stmt_id {
    ST_BEGIN,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_VERSION,
    ST_GET_BINDING,
    ST_GET_INTENT,
    ST_SESSION_STATE,
    ST_INSERT_SESSION,
    ST_INSERT_INTENT,
    ST_TOUCH_INTENT,
    ST_UPDATE_INTENT,
    ST_SET_OWNER,
    ST_DELETE_INTENT,
    ST_BINDING_BY_EXTERNAL,
    ST_INSERT_BINDING,
    ST_FENCE,
    ST_DELETE_BINDING,
    ST_DELETE_SESSION,
    ST_LIST_BINDINGS,
    ST_LIST_BINDINGS_AFTER,
    ST_LIST_INTENTS,
    ST_LIST_INTENTS_AFTER,
    ST_LIST_DELETING,
    ST_LIST_DELETING_AFTER,
    ST_COUNT
};

#define BINDING_COLS                                                             \
    "b.session_key, b.provider, b.external_id, b.spec_hash, b.created_at, s.state"
#define BINDING_FROM " FROM bindings b JOIN sessions s ON s.session_key = b.session_key"
#define INTENT_COLS                                                              \
    "session_key, provider, owner, spec_hash, external_id, step, created_at, "   \
    "updated_at"

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_VERSION] = "SELECT coalesce(max(version), 0) FROM schema_version",
    [ST_GET_BINDING] = "SELECT " BINDING_COLS BINDING_FROM " WHERE b.session_key = ?1",
    [ST_GET_INTENT] = "SELECT " INTENT_COLS " FROM intents WHERE session_key = ?1",
    [ST_SESSION_STATE] = "SELECT state FROM sessions WHERE session_key = ?1",
    [ST_INSERT_SESSION] = "INSERT INTO sessions (session_key, state, created_at, "
                          "updated_at) VALUES (?1, 'active', ?2, ?2)",
    [ST_INSERT_INTENT] = "INSERT INTO intents (" INTENT_COLS ") "
                         "VALUES (?1, ?2, ?3, ?4, NULL, ?5, ?6, ?6)",
    [ST_TOUCH_INTENT] = "UPDATE intents SET updated_at = ?2 WHERE session_key = ?1",
    [ST_UPDATE_INTENT] = "UPDATE intents SET step = ?2, "
                         "external_id = coalesce(?3, external_id), updated_at = ?4 "
                         "WHERE session_key = ?1",
    [ST_SET_OWNER] = "UPDATE intents SET owner = ?2, updated_at = ?3 "
                     "WHERE session_key = ?1",
    [ST_DELETE_INTENT] = "DELETE FROM intents WHERE session_key = ?1",
    [ST_BINDING_BY_EXTERNAL] = "SELECT session_key FROM bindings "
                               "WHERE provider = ?1 AND external_id = ?2",
    [ST_INSERT_BINDING] = "INSERT INTO bindings (session_key, provider, external_id, "
                          "spec_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
    [ST_FENCE] = "UPDATE sessions SET state = 'deleting', updated_at = ?2 "
                 "WHERE session_key = ?1",
    [ST_DELETE_BINDING] = "DELETE FROM bindings WHERE session_key = ?1",
    [ST_DELETE_SESSION] = "DELETE FROM sessions WHERE session_key = ?1",
    [ST_LIST_BINDINGS] = "SELECT " BINDING_COLS BINDING_FROM
                         " ORDER BY b.session_key LIMIT ?1",
    [ST_LIST_BINDINGS_AFTER] = "SELECT " BINDING_COLS BINDING_FROM
                               " WHERE b.session_key > ?2"
                               " ORDER BY b.session_key LIMIT ?1",
    [ST_LIST_INTENTS] = "SELECT " INTENT_COLS " FROM intents "
                        "ORDER BY session_key LIMIT ?1",
    [ST_LIST_INTENTS_AFTER] = "SELECT " INTENT_COLS " FROM intents "
                              "WHERE session_key > ?2 ORDER BY session_key LIMIT ?1",
    [ST_LIST_DELETING] = "SELECT session_key FROM sessions WHERE state = 'deleting' "
                         "ORDER BY session_key LIMIT ?1",
    [ST_LIST_DELETING_AFTER] = "SELECT session_key FROM sessions "
                               "WHERE state = 'deleting' AND session_key > ?2 "
                               "ORDER BY session_key LIMIT ?1",
};

struct sqlite_store {
    struct sbx_store base;
    sqlite3 *db;
    sqlite3_stmt *stmts[ST_COUNT];
};

static const struct sbx_store_ops sqlite_ops;

static struct sqlite_store *from_base(struct sbx_store *s)
{
    return (struct sqlite_store *)s;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */
/* ------------------------------------------------------------------------ */

/* Map an SQLite result code to a status and fill err. */
static int fail(struct sqlite_store *st, int rc, const char *what, sbx_error *err)
{
    const char *msg = st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
    int status;
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return sbx_error_set(err, SBX_E_UNAVAILABLE,
                             "%s: %s: %s (another process held the lock for more "
                             "than %d ms)",
                             st->base.label, what, msg, st->base.lock_timeout_ms);
    case SQLITE_CONSTRAINT:
        status = SBX_E_EXISTS;
        break;
    case SQLITE_NOMEM:
        status = SBX_E_NOMEM;
        break;
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
    case SQLITE_PROTOCOL:
        status = SBX_E_IO;
        break;
    default:
        status = SBX_E_INTERNAL;
        break;
    }
    int sys = st->db ? sqlite3_system_errno(st->db) : 0;
    if (status == SBX_E_IO && sys != 0)
        return sbx_error_set(err, status, "%s: %s: %s (%s)", st->base.label, what, msg,
                             strerror(sys));
    return sbx_error_set(err, status, "%s: %s: %s", st->base.label, what, msg);
}

/* ------------------------------------------------------------------------ */
/* Statements                                                                 */
/* ------------------------------------------------------------------------ */

/* The prepared statement id, reset and with its bindings cleared. */
static int stmt(struct sqlite_store *st, enum stmt_id id, sqlite3_stmt **out,
                sbx_error *err)
{
    if (!st->stmts[id]) {
        int rc = sqlite3_prepare_v3(st->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                    &st->stmts[id], NULL);
        if (rc != SQLITE_OK)
            return fail(st, rc, "preparing a statement", err);
    }
    sqlite3_reset(st->stmts[id]);
    sqlite3_clear_bindings(st->stmts[id]);
    *out = st->stmts[id];
    return SBX_OK;
}

/* Bind a text parameter; NULL binds SQL NULL. */
static int bind_text(sqlite3_stmt *q, int idx, const char *v)
{
    return v ? sqlite3_bind_text(q, idx, v, -1, SQLITE_STATIC) : sqlite3_bind_null(q, idx);
}

/* Run a statement that returns no rows (after binding). Returns SBX_OK and
 * leaves the statement reset. */
static int exec_done(struct sqlite_store *st, sqlite3_stmt *q, const char *what,
                     sbx_error *err)
{
    int rc = sqlite3_step(q);
    int status = rc == SQLITE_DONE ? SBX_OK : fail(st, rc, what, err);
    sqlite3_reset(q);
    return status;
}

/* Run a simple statement with only a key parameter and no rows. */
static int exec_key(struct sqlite_store *st, enum stmt_id id, const char *key,
                    const char *what, sbx_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, id, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    return exec_done(st, q, what, err);
}

static char *col_dup(sqlite3_stmt *q, int i, bool *failed)
{
    return sbx_store_strdup((const char *)sqlite3_column_text(q, i), failed);
}

static int read_binding(struct sqlite_store *st, sqlite3_stmt *q, struct sbx_binding *b,
                        sbx_error *err)
{
    bool failed = false;
    b->session_key = col_dup(q, 0, &failed);
    b->provider = col_dup(q, 1, &failed);
    b->external_id = col_dup(q, 2, &failed);
    b->spec_hash = col_dup(q, 3, &failed);
    b->created_at = sqlite3_column_int64(q, 4);
    const char *state = (const char *)sqlite3_column_text(q, 5);
    b->deleting = state && strcmp(state, "deleting") == 0;
    if (failed) {
        sbx_binding_clear(b);
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", st->base.label);
    }
    return SBX_OK;
}

static int read_intent(struct sqlite_store *st, sqlite3_stmt *q, int64_t now,
                       struct sbx_intent *in, sbx_error *err)
{
    bool failed = false;
    in->session_key = col_dup(q, 0, &failed);
    in->provider = col_dup(q, 1, &failed);
    in->owner = col_dup(q, 2, &failed);
    in->spec_hash = col_dup(q, 3, &failed);
    in->external_id = col_dup(q, 4, &failed);
    in->step = col_dup(q, 5, &failed);
    in->created_at = sqlite3_column_int64(q, 6);
    in->updated_at = sqlite3_column_int64(q, 7);
    in->age_ms = now > in->updated_at ? now - in->updated_at : 0; /* clock steps */
    if (failed) {
        sbx_intent_clear(in);
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", st->base.label);
    }
    return SBX_OK;
}

/* Fetch the binding of key. *found tells whether there was one. */
static int fetch_binding(struct sqlite_store *st, const char *key, struct sbx_binding *b,
                         bool *found, sbx_error *err)
{
    sqlite3_stmt *q = NULL;
    *found = false;
    int rc = stmt(st, ST_GET_BINDING, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    int s = sqlite3_step(q);
    if (s == SQLITE_ROW) {
        *found = true;
        rc = read_binding(st, q, b, err);
    } else if (s != SQLITE_DONE) {
        rc = fail(st, s, "reading a binding", err);
    }
    sqlite3_reset(q);
    return rc;
}

static int fetch_intent(struct sqlite_store *st, const char *key, struct sbx_intent *in,
                        bool *found, sbx_error *err)
{
    sqlite3_stmt *q = NULL;
    *found = false;
    int rc = stmt(st, ST_GET_INTENT, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    int s = sqlite3_step(q);
    if (s == SQLITE_ROW) {
        *found = true;
        rc = read_intent(st, q, now_ms(), in, err);
    } else if (s != SQLITE_DONE) {
        rc = fail(st, s, "reading an intent", err);
    }
    sqlite3_reset(q);
    return rc;
}

/* The state of a session: 0 none, 1 active, 2 deleting. */
enum { SESSION_NONE = 0, SESSION_ACTIVE = 1, SESSION_DELETING = 2 };

static int fetch_state(struct sqlite_store *st, const char *key, int *state,
                       sbx_error *err)
{
    sqlite3_stmt *q = NULL;
    *state = SESSION_NONE;
    int rc = stmt(st, ST_SESSION_STATE, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    int s = sqlite3_step(q);
    if (s == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(q, 0);
        *state = v && strcmp(v, "deleting") == 0 ? SESSION_DELETING : SESSION_ACTIVE;
    } else if (s != SQLITE_DONE) {
        rc = fail(st, s, "reading a session", err);
    }
    sqlite3_reset(q);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Transactions                                                               */
/* ------------------------------------------------------------------------ */

static int begin(struct sqlite_store *st, sbx_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, ST_BEGIN, &q, err);
    return rc != SBX_OK ? rc : exec_done(st, q, "starting a write transaction", err);
}

static int commit(struct sqlite_store *st, sbx_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, ST_COMMIT, &q, err);
    return rc != SBX_OK ? rc : exec_done(st, q, "committing", err);
}

/* Roll back after a failure; returns status unchanged. */
static int rollback(struct sqlite_store *st, int status)
{
    if (sqlite3_get_autocommit(st->db))
        return status; /* SQLite already ended the transaction */
    sqlite3_stmt *q = NULL;
    if (stmt(st, ST_ROLLBACK, &q, NULL) == SBX_OK)
        exec_done(st, q, "rolling back", NULL);
    return status;
}

/* Finish a transaction: commit on success, roll back otherwise. */
static int finish(struct sqlite_store *st, int status, sbx_error *err)
{
    if (status != SBX_OK)
        return rollback(st, status);
    int rc = commit(st, err);
    return rc != SBX_OK ? rollback(st, rc) : SBX_OK;
}

/* ------------------------------------------------------------------------ */
/* Messages about intents                                                     */
/* ------------------------------------------------------------------------ */

static int no_intent(struct sqlite_store *st, const char *key, sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: session %s has no provisioning intent",
                         st->base.label, lbl);
}

static int not_owner(struct sqlite_store *st, const char *key, const char *holder,
                     sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_DENIED,
                         "%s: the provisioning intent of session %s is held by "
                         "owner %s, not by the caller",
                         st->base.label, lbl, holder);
}

static int fenced(struct sqlite_store *st, const char *key, sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_DENIED,
                         "%s: session %s is being deleted; no new admissions",
                         st->base.label, lbl);
}

/* Within a transaction: the caller's intent, or NOT_FOUND/DENIED. */
static int owned_intent(struct sqlite_store *st, const char *key, const char *owner,
                        struct sbx_intent *in, sbx_error *err)
{
    bool found;
    int rc = fetch_intent(st, key, in, &found, err);
    if (rc != SBX_OK)
        return rc;
    if (!found)
        return no_intent(st, key, err);
    if (strcmp(in->owner, owner) != 0) {
        rc = not_owner(st, key, in->owner, err);
        sbx_intent_clear(in);
        return rc;
    }
    return SBX_OK;
}

/* ------------------------------------------------------------------------ */
/* Operations                                                                 */
/* ------------------------------------------------------------------------ */

static int sq_schema_version(struct sbx_store *s, int *out, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, ST_VERSION, &q, err);
    if (rc != SBX_OK)
        return rc;
    int r = sqlite3_step(q);
    if (r == SQLITE_ROW)
        *out = sqlite3_column_int(q, 0);
    else
        rc = fail(st, r, "reading the schema version", err);
    sqlite3_reset(q);
    return rc;
}

static int sq_get_binding(struct sbx_store *s, const char *key, struct sbx_binding *out,
                          sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    bool found;
    int rc = fetch_binding(st, key, out, &found, err);
    if (rc == SBX_OK && !found) {
        char lbl[13];
        sbx_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: session %s has no binding",
                             s->label, lbl);
    }
    return rc;
}

static int sq_get_intent(struct sbx_store *s, const char *key, struct sbx_intent *out,
                         sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    bool found;
    int rc = fetch_intent(st, key, out, &found, err);
    if (rc == SBX_OK && !found)
        return no_intent(st, key, err);
    return rc;
}

/* The claim, inside the write transaction. */
static int claim_locked(struct sqlite_store *st, const struct sbx_claim_request *req,
                        struct sbx_claim *out, sbx_error *err)
{
    int64_t now = now_ms();
    int state;
    int rc = fetch_state(st, req->session_key, &state, err);
    if (rc != SBX_OK)
        return rc;
    if (state == SESSION_DELETING)
        return fenced(st, req->session_key, err);
    sqlite3_stmt *q = NULL;
    if (state == SESSION_NONE) {
        if ((rc = stmt(st, ST_INSERT_SESSION, &q, err)) != SBX_OK)
            return rc;
        bind_text(q, 1, req->session_key);
        sqlite3_bind_int64(q, 2, now);
        if ((rc = exec_done(st, q, "creating the session", err)) != SBX_OK)
            return rc;
    }

    bool found;
    if ((rc = fetch_binding(st, req->session_key, &out->binding, &found, err)) != SBX_OK)
        return rc;
    if (found) {
        out->outcome = SBX_CLAIM_BOUND;
        return SBX_OK;
    }
    if ((rc = fetch_intent(st, req->session_key, &out->intent, &found, err)) != SBX_OK)
        return rc;
    if (found) {
        if (strcmp(out->intent.owner, req->owner) != 0) {
            out->outcome = SBX_CLAIM_HELD;
            return SBX_OK;
        }
        /* Already ours: refresh the lease. */
        if ((rc = stmt(st, ST_TOUCH_INTENT, &q, err)) != SBX_OK)
            return rc;
        bind_text(q, 1, req->session_key);
        sqlite3_bind_int64(q, 2, now);
        if ((rc = exec_done(st, q, "refreshing the intent", err)) != SBX_OK)
            return rc;
        out->intent.updated_at = now;
        out->intent.age_ms = 0;
        out->outcome = SBX_CLAIM_WON;
        return SBX_OK;
    }

    if ((rc = stmt(st, ST_INSERT_INTENT, &q, err)) != SBX_OK)
        return rc;
    bind_text(q, 1, req->session_key);
    bind_text(q, 2, req->provider);
    bind_text(q, 3, req->owner);
    bind_text(q, 4, req->spec_hash);
    bind_text(q, 5, req->step);
    sqlite3_bind_int64(q, 6, now);
    if ((rc = exec_done(st, q, "writing the intent", err)) != SBX_OK)
        return rc;
    /* Read it back so the caller gets exactly what is stored. */
    if ((rc = fetch_intent(st, req->session_key, &out->intent, &found, err)) != SBX_OK)
        return rc;
    if (!found)
        return sbx_error_set(err, SBX_E_INTERNAL, "%s: the new intent vanished",
                             st->base.label);
    out->outcome = SBX_CLAIM_WON;
    return SBX_OK;
}

static int sq_claim(struct sbx_store *s, const struct sbx_claim_request *req,
                    struct sbx_claim *out, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    rc = finish(st, claim_locked(st, req, out, err), err);
    if (rc != SBX_OK)
        sbx_claim_clear(out);
    return rc;
}

static int sq_update_intent(struct sbx_store *s, const char *key, const char *owner,
                            const char *step, const char *external_id, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_intent in = {0};
    rc = owned_intent(st, key, owner, &in, err);
    sbx_intent_clear(&in);
    sqlite3_stmt *q = NULL;
    if (rc == SBX_OK && (rc = stmt(st, ST_UPDATE_INTENT, &q, err)) == SBX_OK) {
        bind_text(q, 1, key);
        bind_text(q, 2, step);
        bind_text(q, 3, external_id);
        sqlite3_bind_int64(q, 4, now_ms());
        rc = exec_done(st, q, "updating the intent", err);
    }
    return finish(st, rc, err);
}

static int takeover_locked(struct sqlite_store *st, const char *key, const char *owner,
                           int64_t lease_ms, struct sbx_intent *out, sbx_error *err)
{
    bool found;
    int rc = fetch_intent(st, key, out, &found, err);
    if (rc != SBX_OK)
        return rc;
    if (!found)
        return no_intent(st, key, err);
    if (strcmp(out->owner, owner) != 0 && out->age_ms < lease_ms) {
        char lbl[13];
        sbx_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_EXISTS,
                             "%s: the provisioning intent of session %s is held by "
                             "owner %s, updated %lld ms ago (lease %lld ms)",
                             st->base.label, lbl, out->owner, (long long)out->age_ms,
                             (long long)lease_ms);
    }
    int64_t now = now_ms();
    sqlite3_stmt *q = NULL;
    if ((rc = stmt(st, ST_SET_OWNER, &q, err)) != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    bind_text(q, 2, owner);
    sqlite3_bind_int64(q, 3, now);
    if ((rc = exec_done(st, q, "taking over the intent", err)) != SBX_OK)
        return rc;
    char *dup = strdup(owner);
    if (!dup)
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", st->base.label);
    free(out->owner);
    out->owner = dup;
    out->updated_at = now;
    out->age_ms = 0;
    return SBX_OK;
}

static int sq_takeover_intent(struct sbx_store *s, const char *key, const char *owner,
                              int64_t lease_ms, struct sbx_intent *out, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    rc = finish(st, takeover_locked(st, key, owner, lease_ms, out, err), err);
    if (rc != SBX_OK)
        sbx_intent_clear(out);
    return rc;
}

static int sq_release_intent(struct sbx_store *s, const char *key, const char *owner,
                             sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_intent in = {0};
    rc = owned_intent(st, key, owner, &in, err);
    sbx_intent_clear(&in);
    if (rc == SBX_OK)
        rc = exec_key(st, ST_DELETE_INTENT, key, "deleting the intent", err);
    return finish(st, rc, err);
}

static int publish_locked(struct sqlite_store *st, const char *key, const char *owner,
                          struct sbx_binding *out, sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    struct sbx_intent in = {0};
    int rc = owned_intent(st, key, owner, &in, err);
    if (rc != SBX_OK)
        return rc;
    int state;
    bool found;
    sqlite3_stmt *q = NULL;
    if ((rc = fetch_state(st, key, &state, err)) != SBX_OK)
        goto out;
    if (state == SESSION_DELETING) {
        rc = fenced(st, key, err);
        goto out;
    }
    if (!in.external_id) {
        rc = sbx_error_set(err, SBX_E_INVALID,
                           "%s: the intent of session %s has no external id yet; "
                           "record it before publishing",
                           st->base.label, lbl);
        goto out;
    }
    if ((rc = fetch_binding(st, key, out, &found, err)) != SBX_OK)
        goto out;
    if (found) {
        sbx_binding_clear(out);
        rc = sbx_error_set(err, SBX_E_EXISTS, "%s: session %s already has a binding",
                           st->base.label, lbl);
        goto out;
    }
    if ((rc = stmt(st, ST_BINDING_BY_EXTERNAL, &q, err)) != SBX_OK)
        goto out;
    bind_text(q, 1, in.provider);
    bind_text(q, 2, in.external_id);
    int r = sqlite3_step(q);
    if (r == SQLITE_ROW) {
        char other[13];
        sbx_store_key_label((const char *)sqlite3_column_text(q, 0), other);
        rc = sbx_error_set(err, SBX_E_EXISTS,
                           "%s: %s resource %s is already bound to session %s",
                           st->base.label, in.provider, in.external_id, other);
    } else if (r != SQLITE_DONE) {
        rc = fail(st, r, "checking the external id", err);
    }
    sqlite3_reset(q);
    if (rc != SBX_OK)
        goto out;

    int64_t now = now_ms();
    if ((rc = stmt(st, ST_INSERT_BINDING, &q, err)) != SBX_OK)
        goto out;
    bind_text(q, 1, key);
    bind_text(q, 2, in.provider);
    bind_text(q, 3, in.external_id);
    bind_text(q, 4, in.spec_hash);
    sqlite3_bind_int64(q, 5, now);
    if ((rc = exec_done(st, q, "writing the binding", err)) != SBX_OK)
        goto out;
    if ((rc = exec_key(st, ST_DELETE_INTENT, key, "deleting the intent", err)) != SBX_OK)
        goto out;
    /* Hand the binding over: the strings move from the intent. */
    out->session_key = in.session_key;
    out->provider = in.provider;
    out->external_id = in.external_id;
    out->spec_hash = in.spec_hash;
    out->created_at = now;
    out->deleting = false;
    in.session_key = in.provider = in.external_id = in.spec_hash = NULL;
out:
    sbx_intent_clear(&in);
    return rc;
}

static int sq_publish(struct sbx_store *s, const char *key, const char *owner,
                      struct sbx_binding *out, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    rc = finish(st, publish_locked(st, key, owner, out, err), err);
    if (rc != SBX_OK)
        sbx_binding_clear(out);
    return rc;
}

static int sq_fence(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    sqlite3_stmt *q = NULL;
    if ((rc = stmt(st, ST_FENCE, &q, err)) == SBX_OK) {
        bind_text(q, 1, key);
        sqlite3_bind_int64(q, 2, now_ms());
        rc = exec_done(st, q, "fencing the session", err);
    }
    if (rc == SBX_OK && sqlite3_changes(st->db) == 0) {
        char lbl[13];
        sbx_store_key_label(key, lbl);
        rc = sbx_error_set(err, SBX_E_NOT_FOUND, "%s: no session %s to delete",
                           s->label, lbl);
    }
    return finish(st, rc, err);
}

static int remove_locked(struct sqlite_store *st, const char *key, sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    int state;
    int rc = fetch_state(st, key, &state, err);
    if (rc != SBX_OK)
        return rc;
    if (state == SESSION_NONE)
        return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: no session %s", st->base.label,
                             lbl);
    if (state != SESSION_DELETING)
        return sbx_error_set(err, SBX_E_DENIED,
                             "%s: session %s is not fenced; fence it before removing it",
                             st->base.label, lbl);
    struct sbx_intent in = {0};
    bool found;
    if ((rc = fetch_intent(st, key, &in, &found, err)) != SBX_OK)
        return rc;
    if (found) {
        rc = sbx_error_set(err, SBX_E_UNAVAILABLE,
                           "%s: session %s still has a provisioning intent held by "
                           "owner %s (updated %lld ms ago); it must be released or "
                           "taken over and cleaned first",
                           st->base.label, lbl, in.owner, (long long)in.age_ms);
        sbx_intent_clear(&in);
        return rc;
    }
    if ((rc = exec_key(st, ST_DELETE_BINDING, key, "deleting the binding", err)) != SBX_OK)
        return rc;
    return exec_key(st, ST_DELETE_SESSION, key, "deleting the session", err);
}

static int sq_remove_session(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    return finish(st, remove_locked(st, key, err), err);
}

/* Start a list query: bind the page size (one extra row tells whether more
 * follow) and the cursor. */
static int list_start(struct sqlite_store *st, enum stmt_id first, enum stmt_id after_id,
                      const char *after, size_t limit, sqlite3_stmt **q, sbx_error *err)
{
    int rc = stmt(st, after ? after_id : first, q, err);
    if (rc != SBX_OK)
        return rc;
    sqlite3_bind_int64(*q, 1, (sqlite3_int64)limit + 1);
    if (after)
        bind_text(*q, 2, after);
    return SBX_OK;
}

static int sq_list_bindings(struct sbx_store *s, const char *after, size_t limit,
                            struct sbx_binding_page *out, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    int rc = list_start(st, ST_LIST_BINDINGS, ST_LIST_BINDINGS_AFTER, after, limit, &q, err);
    if (rc != SBX_OK)
        return rc;
    out->items = calloc(limit, sizeof *out->items);
    if (!out->items)
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    int r;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        if (out->count == limit) {
            out->more = true;
            break;
        }
        if ((rc = read_binding(st, q, &out->items[out->count], err)) != SBX_OK)
            break;
        out->count++;
    }
    if (rc == SBX_OK && r != SQLITE_ROW && r != SQLITE_DONE)
        rc = fail(st, r, "listing bindings", err);
    sqlite3_reset(q);
    if (rc != SBX_OK)
        sbx_binding_page_free(out);
    return rc;
}

static int sq_list_intents(struct sbx_store *s, const char *after, size_t limit,
                           struct sbx_intent_page *out, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    int rc = list_start(st, ST_LIST_INTENTS, ST_LIST_INTENTS_AFTER, after, limit, &q, err);
    if (rc != SBX_OK)
        return rc;
    out->items = calloc(limit, sizeof *out->items);
    if (!out->items)
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    int64_t now = now_ms();
    int r;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        if (out->count == limit) {
            out->more = true;
            break;
        }
        if ((rc = read_intent(st, q, now, &out->items[out->count], err)) != SBX_OK)
            break;
        out->count++;
    }
    if (rc == SBX_OK && r != SQLITE_ROW && r != SQLITE_DONE)
        rc = fail(st, r, "listing intents", err);
    sqlite3_reset(q);
    if (rc != SBX_OK)
        sbx_intent_page_free(out);
    return rc;
}

static int sq_list_deleting(struct sbx_store *s, const char *after, size_t limit,
                            struct sbx_key_page *out, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    int rc = list_start(st, ST_LIST_DELETING, ST_LIST_DELETING_AFTER, after, limit, &q, err);
    if (rc != SBX_OK)
        return rc;
    out->keys = calloc(limit, sizeof *out->keys);
    if (!out->keys)
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    int r;
    while ((r = sqlite3_step(q)) == SQLITE_ROW) {
        if (out->count == limit) {
            out->more = true;
            break;
        }
        bool failed = false;
        out->keys[out->count] = col_dup(q, 0, &failed);
        if (failed) {
            rc = sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
            break;
        }
        out->count++;
    }
    if (rc == SBX_OK && r != SQLITE_ROW && r != SQLITE_DONE)
        rc = fail(st, r, "listing deleting sessions", err);
    sqlite3_reset(q);
    if (rc != SBX_OK)
        sbx_key_page_free(out);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Opening and migrations                                                     */
/* ------------------------------------------------------------------------ */

static void sq_close(struct sbx_store *s)
{
    struct sqlite_store *st = from_base(s);
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(st->stmts[i]);
    sqlite3_close(st->db);
    free(s->label);
    free(st);
}

/* Run a pragma or other one-off statement with sqlite3_exec. */
static int exec_sql(struct sqlite_store *st, const char *sql, const char *what,
                    sbx_error *err)
{
    int rc = sqlite3_exec(st->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? SBX_OK : fail(st, rc, what, err);
}

/*
 * Switch to WAL. The switch needs a lock no other connection holds; when
 * several processes open a new file at once it can report SQLITE_BUSY
 * without waiting, so retry until the lock timeout.
 */
static int enable_wal(struct sqlite_store *st, sbx_error *err)
{
    int64_t deadline = now_ms() + st->base.lock_timeout_ms;
    for (;;) {
        sqlite3_stmt *q = NULL;
        int rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode = WAL", -1, &q, NULL);
        if (rc == SQLITE_OK) {
            rc = sqlite3_step(q);
            if (rc == SQLITE_ROW) {
                const char *mode = (const char *)sqlite3_column_text(q, 0);
                bool wal = mode && strcmp(mode, "wal") == 0;
                sqlite3_finalize(q);
                if (wal)
                    return SBX_OK;
                return sbx_error_set(err, SBX_E_IO,
                                     "%s: cannot switch the database to WAL mode "
                                     "(journal mode stays '%s')",
                                     st->base.label, mode ? mode : "?");
            }
        }
        sqlite3_finalize(q);
        if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED)
            return fail(st, rc, "enabling WAL mode", err);
        if (now_ms() >= deadline)
            return fail(st, rc, "enabling WAL mode", err);
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The current schema version; 0 when the schema_version table is absent. */
static int current_version(struct sqlite_store *st, int *version, sbx_error *err)
{
    sqlite3_stmt *q = NULL;
    int rc = sqlite3_prepare_v2(st->db,
                                "SELECT count(*) FROM sqlite_master "
                                "WHERE type = 'table' AND name = 'schema_version'",
                                -1, &q, NULL);
    int r = rc == SQLITE_OK ? sqlite3_step(q) : rc;
    bool present = r == SQLITE_ROW && sqlite3_column_int(q, 0) > 0;
    sqlite3_finalize(q);
    if (r != SQLITE_ROW)
        return fail(st, r, "reading the schema", err);
    *version = 0;
    return present ? sq_schema_version(&st->base, version, err) : SBX_OK;
}

static int newer_schema(struct sqlite_store *st, int version, sbx_error *err)
{
    return sbx_error_set(err, SBX_E_CONFIG,
                         "%s: schema version %d is newer than this sbx supports (%d); "
                         "use a newer sbx",
                         st->base.label, version, SBX_STORE_SCHEMA_VERSION);
}

/* Apply one migration unless another opener did; in its own transaction. */
static int apply_migration(struct sqlite_store *st, const struct sbx_store_migration *m,
                           sbx_error *err)
{
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    rc = exec_sql(st,
                  "CREATE TABLE IF NOT EXISTS schema_version ("
                  "  version INTEGER NOT NULL PRIMARY KEY,"
                  "  name TEXT NOT NULL,"
                  "  applied_at INTEGER NOT NULL)",
                  "creating schema_version", err);
    int version = 0;
    if (rc == SBX_OK)
        rc = sq_schema_version(&st->base, &version, err);
    if (rc == SBX_OK && version > SBX_STORE_SCHEMA_VERSION)
        rc = newer_schema(st, version, err);
    if (rc == SBX_OK && version < m->version) {
        char what[96];
        snprintf(what, sizeof what, "applying migration %d (%s)", m->version, m->name);
        rc = exec_sql(st, m->sqlite_sql, what, err);
        sqlite3_stmt *q = NULL;
        if (rc == SBX_OK) {
            int p = sqlite3_prepare_v2(st->db,
                                       "INSERT INTO schema_version (version, name, "
                                       "applied_at) VALUES (?1, ?2, ?3)",
                                       -1, &q, NULL);
            if (p == SQLITE_OK) {
                sqlite3_bind_int(q, 1, m->version);
                bind_text(q, 2, m->name);
                sqlite3_bind_int64(q, 3, now_ms());
                p = sqlite3_step(q);
            }
            if (p != SQLITE_DONE)
                rc = fail(st, p, what, err);
            sqlite3_finalize(q);
        }
    }
    return finish(st, rc, err);
}

static int migrate(struct sqlite_store *st, sbx_error *err)
{
    int version;
    int rc = current_version(st, &version, err);
    if (rc != SBX_OK)
        return rc;
    if (version > SBX_STORE_SCHEMA_VERSION)
        return newer_schema(st, version, err);
    size_t n;
    const struct sbx_store_migration *m = sbx_store_migrations(&n);
    for (size_t i = 0; i < n; i++) {
        if (m[i].version <= version)
            continue;
        if ((rc = apply_migration(st, &m[i], err)) != SBX_OK)
            return rc;
    }
    return SBX_OK;
}

/* A clear message for a file that cannot be opened: say which part of the
 * path is the problem. */
static int check_parent(const char *path, sbx_error *err)
{
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path)
        return SBX_OK;
    size_t len = (size_t)(slash - path);
    char *dir = strndup(path, len);
    if (!dir)
        return sbx_error_set(err, SBX_E_NOMEM, "sqlite store %s: out of memory", path);
    struct stat sb;
    int rc = SBX_OK;
    if (stat(dir, &sb) != 0)
        rc = sbx_error_set(err, SBX_E_IO, "sqlite store %s: directory %s: %s", path, dir,
                           strerror(errno));
    else if (!S_ISDIR(sb.st_mode))
        rc = sbx_error_set(err, SBX_E_IO, "sqlite store %s: %s is not a directory", path,
                           dir);
    free(dir);
    return rc;
}

int sbx_store_sqlite_open(const char *path, int lock_timeout_ms, struct sbx_store **out,
                          sbx_error *err)
{
    int rc = check_parent(path, err);
    if (rc != SBX_OK)
        return rc;
    struct sqlite_store *st = calloc(1, sizeof *st);
    if (!st)
        return sbx_error_set(err, SBX_E_NOMEM, "sqlite store %s: out of memory", path);
    st->base.ops = &sqlite_ops;
    st->base.lock_timeout_ms = lock_timeout_ms;
    size_t n = strlen(path) + sizeof "sqlite store ";
    st->base.label = malloc(n);
    if (!st->base.label) {
        free(st);
        return sbx_error_set(err, SBX_E_NOMEM, "sqlite store %s: out of memory", path);
    }
    snprintf(st->base.label, n, "sqlite store %s", path);

    int r = sqlite3_open_v2(path, &st->db,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                SQLITE_OPEN_NOMUTEX,
                            NULL);
    if (r != SQLITE_OK) {
        rc = fail(st, r, "opening", err);
        sq_close(&st->base);
        return rc;
    }
    sqlite3_extended_result_codes(st->db, 1);
    sqlite3_busy_timeout(st->db, lock_timeout_ms);
    /* foreign_keys is per connection and off by default; synchronous=FULL
     * makes a committed binding survive a power loss, not only a crash. */
    rc = exec_sql(st, "PRAGMA foreign_keys = ON", "enabling foreign keys", err);
    if (rc == SBX_OK)
        rc = enable_wal(st, err);
    if (rc == SBX_OK)
        rc = exec_sql(st, "PRAGMA synchronous = FULL", "setting synchronous", err);
    /* Reads through a memory map: a lookup that misses SQLite's own page
     * cache costs a page-cache access instead of a pread, so lookup cost
     * stays flat as the number of sessions grows (bench/store). SQLite
     * still writes with pwrite; the map only needs address space. */
    if (rc == SBX_OK)
        rc = exec_sql(st, "PRAGMA mmap_size = 268435456", "setting mmap_size", err);
    if (rc == SBX_OK)
        rc = migrate(st, err);
    if (rc != SBX_OK) {
        sq_close(&st->base);
        return rc;
    }
    *out = &st->base;
    return SBX_OK;
}

static const struct sbx_store_ops sqlite_ops = {
    .name = "sqlite",
    .close = sq_close,
    .schema_version = sq_schema_version,
    .get_binding = sq_get_binding,
    .get_intent = sq_get_intent,
    .claim = sq_claim,
    .update_intent = sq_update_intent,
    .takeover_intent = sq_takeover_intent,
    .release_intent = sq_release_intent,
    .publish = sq_publish,
    .fence = sq_fence,
    .remove_session = sq_remove_session,
    .list_bindings = sq_list_bindings,
    .list_intents = sq_list_intents,
    .list_deleting = sq_list_deleting,
};
