/*
 * store_pg.c - the PostgreSQL driver of the session store (libpq), for
 * several workers on several machines.
 *
 * Transactions run at READ COMMITTED. Writers that concern one key
 * serialize on row locks: claim, publish and remove lock the session row
 * (SELECT ... FOR UPDATE) before looking at the intent and binding, and
 * update/takeover/release lock the intent row. Because READ COMMITTED
 * gives each statement a fresh snapshot, a claimant that waited for the
 * lock sees what the previous holder committed. Locks are always taken in
 * the order session row, then intent row, so no two operations deadlock.
 * lock_timeout bounds every wait; an expired wait is SBX_E_UNAVAILABLE.
 *
 * Times come from the server's clock (now()), so leases mean the same on
 * every worker. A lost connection is reported as SBX_E_UNAVAILABLE and
 * re-established by the next call.
 */
#include "store.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Milliseconds since the epoch at the start of the current transaction. */
#define NOW_MS "(extract(epoch FROM now()) * 1000)::bigint"

/* Key of the advisory lock that serializes migrations ("sbxstore"). */
#define MIGRATION_LOCK "8314340299349389925"

#define BINDING_SQL                                                              \
    "SELECT b.session_key, b.provider, b.external_id, b.spec_hash, b.created_at, " \
    "s.state FROM bindings b JOIN sessions s ON s.session_key = b.session_key "
/* The age uses the wall clock at the time of reading: now() is the start of
 * this transaction, which may precede a write it waited for. */
#define INTENT_SQL                                                               \
    "SELECT session_key, provider, owner, spec_hash, external_id, step, "        \
    "created_at, updated_at, greatest(0, "                                       \
    "(extract(epoch FROM clock_timestamp()) * 1000)::bigint - updated_at) "      \
    "FROM intents "

/* Statements on the lookup paths, prepared once per connection: planning
 * the join costs more than executing it. */
enum pg_stmt { PS_GET_BINDING, PS_GET_INTENT, PS_COUNT };

static const struct {
    const char *name;
    const char *sql;
} pg_stmts[PS_COUNT] = {
    [PS_GET_BINDING] = {"sbx_get_binding", BINDING_SQL "WHERE b.session_key = $1"},
    [PS_GET_INTENT] = {"sbx_get_intent", INTENT_SQL "WHERE session_key = $1"},
};

struct pg_store {
    struct sbx_store base;
    PGconn *conn;
    struct sbx_pg_dsn dsn;
    bool prepared[PS_COUNT]; /* on the current connection */
};

static const struct sbx_store_ops pg_ops;

static struct pg_store *from_base(struct sbx_store *s)
{
    return (struct pg_store *)s;
}

/* ------------------------------------------------------------------------ */
/* Errors                                                                     */
/* ------------------------------------------------------------------------ */

/* Set err from a finished message, after removing any secret from it. */
static int report(struct pg_store *st, int status, char *msg, size_t cap, sbx_error *err)
{
    sbx_pg_dsn_scrub(msg, cap, (const char *const *)st->dsn.secrets,
                     sizeof st->dsn.secrets / sizeof st->dsn.secrets[0]);
    return sbx_error_set(err, status, "%s", msg);
}

/* Status for an SQLSTATE. */
static int classify(const char *state, const char **hint)
{
    *hint = "";
    if (!state)
        return SBX_E_INTERNAL;
    if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0) {
        *hint = " (concurrent update; retry)";
        return SBX_E_UNAVAILABLE;
    }
    if (strcmp(state, "55P03") == 0 || strcmp(state, "57014") == 0) {
        *hint = " (another worker held the lock for longer than the lock timeout)";
        return SBX_E_UNAVAILABLE;
    }
    if (strncmp(state, "08", 2) == 0 || strncmp(state, "53", 2) == 0 ||
        strncmp(state, "57P", 3) == 0)
        return SBX_E_UNAVAILABLE;
    if (strcmp(state, "23505") == 0)
        return SBX_E_EXISTS;
    if (strcmp(state, "23503") == 0)
        return SBX_E_NOT_FOUND;
    if (strncmp(state, "28", 2) == 0 || strcmp(state, "42501") == 0)
        return SBX_E_DENIED;
    if (strcmp(state, "3D000") == 0)
        return SBX_E_CONFIG;
    if (strncmp(state, "58", 2) == 0)
        return SBX_E_IO;
    return SBX_E_INTERNAL;
}

/* Report a failed statement. res may be NULL. */
static int query_error(struct pg_store *st, const PGresult *res, const char *what,
                       sbx_error *err)
{
    char detail[SBX_ERROR_MAX];
    const char *primary = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    snprintf(detail, sizeof detail, "%s",
             primary ? primary : PQerrorMessage(st->conn));
    sbx_pg_dsn_tidy(detail);
    const char *hint;
    int status = classify(res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL, &hint);
    bool lost = PQstatus(st->conn) == CONNECTION_BAD;
    if (lost) {
        status = SBX_E_UNAVAILABLE;
        hint = " (connection to the server lost; the next call reconnects)";
    }
    char msg[2 * SBX_ERROR_MAX + 256];
    snprintf(msg, sizeof msg, "%s: %s: %s%s", st->base.label, what,
             detail[0] ? detail : "unknown error", hint);
    return report(st, status, msg, sizeof msg, err);
}

/* Report a connection that could not be (re)established. */
static int connect_error(struct pg_store *st, const char *what, sbx_error *err)
{
    char detail[SBX_ERROR_MAX];
    snprintf(detail, sizeof detail, "%s",
             st->conn ? PQerrorMessage(st->conn) : "out of memory");
    sbx_pg_dsn_tidy(detail);
    int status = SBX_E_UNAVAILABLE;
    if (!st->conn)
        status = SBX_E_NOMEM;
    else if (PQconnectionNeedsPassword(st->conn))
        status = SBX_E_DENIED;
    char msg[2 * SBX_ERROR_MAX + 256];
    snprintf(msg, sizeof msg, "%s: %s: %s", st->base.label, what, detail);
    return report(st, status, msg, sizeof msg, err);
}

/* ------------------------------------------------------------------------ */
/* Statements                                                                 */
/* ------------------------------------------------------------------------ */

/* Run one statement with text parameters. On success *res (when res is not
 * NULL) holds the result for the caller to PQclear. */
static int run(struct pg_store *st, const char *sql, int n, const char *const *params,
               PGresult **res, const char *what, sbx_error *err)
{
    if (res)
        *res = NULL;
    PGresult *r = PQexecParams(st->conn, sql, n, NULL, params, NULL, NULL, 0);
    ExecStatusType t = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (t == PGRES_COMMAND_OK || t == PGRES_TUPLES_OK) {
        if (res)
            *res = r;
        else
            PQclear(r);
        return SBX_OK;
    }
    int rc = query_error(st, r, what, err);
    PQclear(r);
    return rc;
}

/* Run a prepared statement whose only parameter is the key, preparing it
 * first when this connection has not seen it. */
static int run_prepared(struct pg_store *st, enum pg_stmt id, const char *key,
                        PGresult **res, const char *what, sbx_error *err)
{
    *res = NULL;
    if (!st->prepared[id]) {
        PGresult *r = PQprepare(st->conn, pg_stmts[id].name, pg_stmts[id].sql, 1, NULL);
        if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
            int rc = query_error(st, r, what, err);
            PQclear(r);
            return rc;
        }
        PQclear(r);
        st->prepared[id] = true;
    }
    const char *p[1] = {key};
    PGresult *r = PQexecPrepared(st->conn, pg_stmts[id].name, 1, p, NULL, NULL, 0);
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK) {
        *res = r;
        return SBX_OK;
    }
    int rc = query_error(st, r, what, err);
    PQclear(r);
    return rc;
}

/* Run a statement whose only parameter is the key and that returns no rows;
 * *affected (when not NULL) receives the number of rows changed. */
static int run_key(struct pg_store *st, const char *sql, const char *key, long *affected,
                   const char *what, sbx_error *err)
{
    PGresult *r = NULL;
    const char *p[1] = {key};
    int rc = run(st, sql, 1, p, &r, what, err);
    if (rc == SBX_OK) {
        if (affected)
            *affected = strtol(PQcmdTuples(r), NULL, 10);
        PQclear(r);
    }
    return rc;
}

static char *val_dup(const PGresult *r, int row, int col, bool *failed)
{
    if (PQgetisnull(r, row, col))
        return NULL;
    return sbx_store_strdup(PQgetvalue(r, row, col), failed);
}

static int64_t val_int(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

static int read_binding(struct pg_store *st, const PGresult *r, int row,
                        struct sbx_binding *b, sbx_error *err)
{
    bool failed = false;
    b->session_key = val_dup(r, row, 0, &failed);
    b->provider = val_dup(r, row, 1, &failed);
    b->external_id = val_dup(r, row, 2, &failed);
    b->spec_hash = val_dup(r, row, 3, &failed);
    b->created_at = val_int(r, row, 4);
    b->deleting = strcmp(PQgetvalue(r, row, 5), "deleting") == 0;
    if (failed) {
        sbx_binding_clear(b);
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", st->base.label);
    }
    return SBX_OK;
}

static int read_intent(struct pg_store *st, const PGresult *r, int row,
                       struct sbx_intent *in, sbx_error *err)
{
    bool failed = false;
    in->session_key = val_dup(r, row, 0, &failed);
    in->provider = val_dup(r, row, 1, &failed);
    in->owner = val_dup(r, row, 2, &failed);
    in->spec_hash = val_dup(r, row, 3, &failed);
    in->external_id = val_dup(r, row, 4, &failed);
    in->step = val_dup(r, row, 5, &failed);
    in->created_at = val_int(r, row, 6);
    in->updated_at = val_int(r, row, 7);
    in->age_ms = val_int(r, row, 8);
    if (failed) {
        sbx_intent_clear(in);
        return sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", st->base.label);
    }
    return SBX_OK;
}

static int fetch_binding(struct pg_store *st, const char *key, struct sbx_binding *b,
                         bool *found, sbx_error *err)
{
    PGresult *r = NULL;
    *found = false;
    int rc = run_prepared(st, PS_GET_BINDING, key, &r, "reading a binding", err);
    if (rc != SBX_OK)
        return rc;
    if (PQntuples(r) == 1) {
        *found = true;
        rc = read_binding(st, r, 0, b, err);
    }
    PQclear(r);
    return rc;
}

/* Fetch the intent of key; lock: take its row lock (inside a transaction). */
static int fetch_intent(struct pg_store *st, const char *key, bool lock,
                        struct sbx_intent *in, bool *found, sbx_error *err)
{
    PGresult *r = NULL;
    const char *p[1] = {key};
    *found = false;
    int rc = lock ? run(st, INTENT_SQL "WHERE session_key = $1 FOR UPDATE", 1, p, &r,
                        "reading an intent", err)
                  : run_prepared(st, PS_GET_INTENT, key, &r, "reading an intent", err);
    if (rc != SBX_OK)
        return rc;
    if (PQntuples(r) == 1) {
        *found = true;
        rc = read_intent(st, r, 0, in, err);
    }
    PQclear(r);
    return rc;
}

enum { SESSION_NONE = 0, SESSION_ACTIVE = 1, SESSION_DELETING = 2 };

/* Lock the session row of key and read its state. */
static int lock_session(struct pg_store *st, const char *key, int *state, sbx_error *err)
{
    PGresult *r = NULL;
    const char *p[1] = {key};
    *state = SESSION_NONE;
    int rc = run(st, "SELECT state FROM sessions WHERE session_key = $1 FOR UPDATE", 1,
                 p, &r, "locking the session", err);
    if (rc != SBX_OK)
        return rc;
    if (PQntuples(r) == 1)
        *state = strcmp(PQgetvalue(r, 0, 0), "deleting") == 0 ? SESSION_DELETING
                                                               : SESSION_ACTIVE;
    PQclear(r);
    return SBX_OK;
}

/* ------------------------------------------------------------------------ */
/* Connection and transactions                                                */
/* ------------------------------------------------------------------------ */

/* Per-connection settings, after every (re)connect. */
static int setup_session(struct pg_store *st, sbx_error *err)
{
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%dms", st->base.lock_timeout_ms);
    const char *p[1] = {timeout};
    return run(st, "SELECT set_config('lock_timeout', $1, false)", 1, p, NULL,
               "configuring the connection", err);
}

/* Make sure the connection is usable: reconnect after a loss, and end a
 * transaction a failed call may have left open. */
static int ready(struct pg_store *st, sbx_error *err)
{
    if (PQstatus(st->conn) != CONNECTION_OK) {
        /* A new server session has none of the prepared statements. */
        memset(st->prepared, 0, sizeof st->prepared);
        PQreset(st->conn);
        if (PQstatus(st->conn) != CONNECTION_OK)
            return connect_error(st, "reconnecting", err);
        return setup_session(st, err);
    }
    if (PQtransactionStatus(st->conn) != PQTRANS_IDLE)
        PQclear(PQexec(st->conn, "ROLLBACK"));
    return SBX_OK;
}

static int begin(struct pg_store *st, sbx_error *err)
{
    int rc = ready(st, err);
    return rc != SBX_OK ? rc : run(st, "BEGIN", 0, NULL, NULL, "starting a transaction", err);
}

/* Commit on success, roll back otherwise; returns the final status. */
static int finish(struct pg_store *st, int status, sbx_error *err)
{
    if (status == SBX_OK)
        status = run(st, "COMMIT", 0, NULL, NULL, "committing", err);
    if (PQstatus(st->conn) == CONNECTION_OK &&
        PQtransactionStatus(st->conn) != PQTRANS_IDLE)
        PQclear(PQexec(st->conn, "ROLLBACK"));
    return status;
}

/* ------------------------------------------------------------------------ */
/* Messages about intents                                                     */
/* ------------------------------------------------------------------------ */

static int no_intent(struct pg_store *st, const char *key, sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: session %s has no provisioning intent",
                         st->base.label, lbl);
}

static int not_owner(struct pg_store *st, const char *key, const char *holder,
                     sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_DENIED,
                         "%s: the provisioning intent of session %s is held by "
                         "owner %s, not by the caller",
                         st->base.label, lbl, holder);
}

static int fenced(struct pg_store *st, const char *key, sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_DENIED,
                         "%s: session %s is being deleted; no new admissions",
                         st->base.label, lbl);
}

/* Within a transaction: lock and return the caller's intent. */
static int owned_intent(struct pg_store *st, const char *key, const char *owner,
                        struct sbx_intent *in, sbx_error *err)
{
    bool found;
    int rc = fetch_intent(st, key, true, in, &found, err);
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

static int pg_schema_version(struct sbx_store *s, int *out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = ready(st, err);
    PGresult *r = NULL;
    if (rc == SBX_OK)
        rc = run(st, "SELECT coalesce(max(version), 0) FROM schema_version", 0, NULL, &r,
                 "reading the schema version", err);
    if (rc == SBX_OK) {
        *out = (int)val_int(r, 0, 0);
        PQclear(r);
    }
    return rc;
}

static int pg_get_binding(struct sbx_store *s, const char *key, struct sbx_binding *out,
                          sbx_error *err)
{
    struct pg_store *st = from_base(s);
    bool found = false;
    int rc = ready(st, err);
    if (rc == SBX_OK)
        rc = fetch_binding(st, key, out, &found, err);
    if (rc == SBX_OK && !found) {
        char lbl[13];
        sbx_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: session %s has no binding",
                             s->label, lbl);
    }
    return rc;
}

static int pg_get_intent(struct sbx_store *s, const char *key, struct sbx_intent *out,
                         sbx_error *err)
{
    struct pg_store *st = from_base(s);
    bool found = false;
    int rc = ready(st, err);
    if (rc == SBX_OK)
        rc = fetch_intent(st, key, false, out, &found, err);
    if (rc == SBX_OK && !found)
        return no_intent(st, key, err);
    return rc;
}

static int claim_locked(struct pg_store *st, const struct sbx_claim_request *req,
                        struct sbx_claim *out, sbx_error *err)
{
    const char *key = req->session_key;
    const char *pk[1] = {key};
    int state = SESSION_NONE;
    int rc = SBX_OK;
    /* Create the row if needed, then lock it. A concurrent remove can
     * delete it between the two statements; then go round again. */
    for (int attempt = 0; attempt < 5 && state == SESSION_NONE; attempt++) {
        rc = run(st,
                 "INSERT INTO sessions (session_key, state, created_at, updated_at) "
                 "VALUES ($1, 'active', " NOW_MS ", " NOW_MS ") "
                 "ON CONFLICT (session_key) DO NOTHING",
                 1, pk, NULL, "creating the session", err);
        if (rc == SBX_OK)
            rc = lock_session(st, key, &state, err);
        if (rc != SBX_OK)
            return rc;
    }
    if (state == SESSION_NONE) {
        char lbl[13];
        sbx_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_UNAVAILABLE,
                             "%s: session %s is being removed concurrently; retry",
                             st->base.label, lbl);
    }
    if (state == SESSION_DELETING)
        return fenced(st, key, err);

    bool found;
    if ((rc = fetch_binding(st, key, &out->binding, &found, err)) != SBX_OK)
        return rc;
    if (found) {
        out->outcome = SBX_CLAIM_BOUND;
        return SBX_OK;
    }
    if ((rc = fetch_intent(st, key, true, &out->intent, &found, err)) != SBX_OK)
        return rc;
    if (found && strcmp(out->intent.owner, req->owner) != 0) {
        out->outcome = SBX_CLAIM_HELD;
        return SBX_OK;
    }
    if (found) {
        /* Already ours: refresh the lease. */
        rc = run_key(st, "UPDATE intents SET updated_at = " NOW_MS " WHERE session_key = $1",
                     key, NULL, "refreshing the intent", err);
    } else {
        const char *p[5] = {key, req->provider, req->owner, req->spec_hash, req->step};
        rc = run(st,
                 "INSERT INTO intents (session_key, provider, owner, spec_hash, "
                 "external_id, step, created_at, updated_at) "
                 "VALUES ($1, $2, $3, $4, NULL, $5, " NOW_MS ", " NOW_MS ")",
                 5, p, NULL, "writing the intent", err);
    }
    if (rc != SBX_OK)
        return rc;
    /* Read it back so the caller gets exactly what is stored. */
    sbx_intent_clear(&out->intent);
    if ((rc = fetch_intent(st, key, false, &out->intent, &found, err)) != SBX_OK)
        return rc;
    if (!found)
        return sbx_error_set(err, SBX_E_INTERNAL, "%s: the new intent vanished",
                             st->base.label);
    out->outcome = SBX_CLAIM_WON;
    return SBX_OK;
}

static int pg_claim(struct sbx_store *s, const struct sbx_claim_request *req,
                    struct sbx_claim *out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    rc = finish(st, claim_locked(st, req, out, err), err);
    if (rc != SBX_OK)
        sbx_claim_clear(out);
    return rc;
}

static int pg_update_intent(struct sbx_store *s, const char *key, const char *owner,
                            const char *step, const char *external_id, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_intent in = {0};
    rc = owned_intent(st, key, owner, &in, err);
    sbx_intent_clear(&in);
    if (rc == SBX_OK) {
        const char *p[3] = {key, step, external_id};
        rc = run(st,
                 "UPDATE intents SET step = $2, external_id = coalesce($3, external_id), "
                 "updated_at = " NOW_MS " WHERE session_key = $1",
                 3, p, NULL, "updating the intent", err);
    }
    return finish(st, rc, err);
}

static int takeover_locked(struct pg_store *st, const char *key, const char *owner,
                           int64_t lease_ms, struct sbx_intent *out, sbx_error *err)
{
    bool found;
    int rc = fetch_intent(st, key, true, out, &found, err);
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
    const char *p[2] = {key, owner};
    rc = run(st,
             "UPDATE intents SET owner = $2, updated_at = " NOW_MS
             " WHERE session_key = $1",
             2, p, NULL, "taking over the intent", err);
    if (rc != SBX_OK)
        return rc;
    sbx_intent_clear(out);
    if ((rc = fetch_intent(st, key, false, out, &found, err)) != SBX_OK)
        return rc;
    return found ? SBX_OK : no_intent(st, key, err);
}

static int pg_takeover_intent(struct sbx_store *s, const char *key, const char *owner,
                              int64_t lease_ms, struct sbx_intent *out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    rc = finish(st, takeover_locked(st, key, owner, lease_ms, out, err), err);
    if (rc != SBX_OK)
        sbx_intent_clear(out);
    return rc;
}

static int pg_release_intent(struct sbx_store *s, const char *key, const char *owner,
                             sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_intent in = {0};
    rc = owned_intent(st, key, owner, &in, err);
    sbx_intent_clear(&in);
    if (rc == SBX_OK)
        rc = run_key(st, "DELETE FROM intents WHERE session_key = $1", key, NULL,
                     "deleting the intent", err);
    return finish(st, rc, err);
}

static int publish_locked(struct pg_store *st, const char *key, const char *owner,
                          struct sbx_binding *out, sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    int state;
    int rc = lock_session(st, key, &state, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_intent in = {0};
    if ((rc = owned_intent(st, key, owner, &in, err)) != SBX_OK)
        return rc;
    bool found;
    PGresult *r = NULL;
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
    const char *pe[2] = {in.provider, in.external_id};
    rc = run(st, "SELECT session_key FROM bindings WHERE provider = $1 AND external_id = $2",
             2, pe, &r, "checking the external id", err);
    if (rc != SBX_OK)
        goto out;
    if (PQntuples(r) > 0) {
        char other[13];
        sbx_store_key_label(PQgetvalue(r, 0, 0), other);
        rc = sbx_error_set(err, SBX_E_EXISTS,
                           "%s: %s resource %s is already bound to session %s",
                           st->base.label, in.provider, in.external_id, other);
        goto out;
    }
    PQclear(r);
    r = NULL;
    /* Another key may publish the same external id concurrently: the
     * unique constraint decides then (SQLSTATE 23505 -> SBX_E_EXISTS). */
    const char *pb[4] = {key, in.provider, in.external_id, in.spec_hash};
    rc = run(st,
             "INSERT INTO bindings (session_key, provider, external_id, spec_hash, "
             "created_at) VALUES ($1, $2, $3, $4, " NOW_MS ")",
             4, pb, NULL, "writing the binding", err);
    if (rc == SBX_OK)
        rc = run_key(st, "DELETE FROM intents WHERE session_key = $1", key, NULL,
                     "deleting the intent", err);
    if (rc == SBX_OK && (rc = fetch_binding(st, key, out, &found, err)) == SBX_OK &&
        !found)
        rc = sbx_error_set(err, SBX_E_INTERNAL, "%s: the new binding vanished",
                           st->base.label);
out:
    PQclear(r);
    sbx_intent_clear(&in);
    return rc;
}

static int pg_publish(struct sbx_store *s, const char *key, const char *owner,
                      struct sbx_binding *out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    rc = finish(st, publish_locked(st, key, owner, out, err), err);
    if (rc != SBX_OK)
        sbx_binding_clear(out);
    return rc;
}

static int pg_fence(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = ready(st, err);
    long n = 0;
    if (rc == SBX_OK)
        rc = run_key(st,
                     "UPDATE sessions SET state = 'deleting', updated_at = " NOW_MS
                     " WHERE session_key = $1",
                     key, &n, "fencing the session", err);
    if (rc == SBX_OK && n == 0) {
        char lbl[13];
        sbx_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: no session %s to delete",
                             s->label, lbl);
    }
    return rc;
}

static int remove_locked(struct pg_store *st, const char *key, sbx_error *err)
{
    char lbl[13];
    sbx_store_key_label(key, lbl);
    int state;
    int rc = lock_session(st, key, &state, err);
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
    if ((rc = fetch_intent(st, key, false, &in, &found, err)) != SBX_OK)
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
    rc = run_key(st, "DELETE FROM bindings WHERE session_key = $1", key, NULL,
                 "deleting the binding", err);
    if (rc == SBX_OK)
        rc = run_key(st, "DELETE FROM sessions WHERE session_key = $1", key, NULL,
                     "deleting the session", err);
    return rc;
}

static int pg_remove_session(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = begin(st, err);
    if (rc != SBX_OK)
        return rc;
    return finish(st, remove_locked(st, key, err), err);
}

/* Run a page query: $1 is the row limit (one more than the page, to learn
 * whether more follow), $2 the cursor when there is one. */
static int list_query(struct pg_store *st, const char *first_sql, const char *after_sql,
                      const char *after, size_t limit, PGresult **r, const char *what,
                      sbx_error *err)
{
    int rc = ready(st, err);
    if (rc != SBX_OK)
        return rc;
    char lim[32];
    snprintf(lim, sizeof lim, "%zu", limit + 1);
    const char *p[2] = {lim, after};
    return run(st, after ? after_sql : first_sql, after ? 2 : 1, p, r, what, err);
}

static int pg_list_bindings(struct sbx_store *s, const char *after, size_t limit,
                            struct sbx_binding_page *out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    PGresult *r = NULL;
    int rc = list_query(st, BINDING_SQL "ORDER BY b.session_key LIMIT $1",
                        BINDING_SQL "WHERE b.session_key > $2 "
                                    "ORDER BY b.session_key LIMIT $1",
                        after, limit, &r, "listing bindings", err);
    if (rc != SBX_OK)
        return rc;
    size_t rows = (size_t)PQntuples(r);
    out->more = rows > limit;
    size_t n = out->more ? limit : rows;
    out->items = calloc(n ? n : 1, sizeof *out->items);
    if (!out->items)
        rc = sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    for (size_t i = 0; rc == SBX_OK && i < n; i++)
        if ((rc = read_binding(st, r, (int)i, &out->items[i], err)) == SBX_OK)
            out->count++;
    PQclear(r);
    if (rc != SBX_OK)
        sbx_binding_page_free(out);
    return rc;
}

static int pg_list_intents(struct sbx_store *s, const char *after, size_t limit,
                           struct sbx_intent_page *out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    PGresult *r = NULL;
    int rc = list_query(st, INTENT_SQL "ORDER BY session_key LIMIT $1",
                        INTENT_SQL "WHERE session_key > $2 ORDER BY session_key LIMIT $1",
                        after, limit, &r, "listing intents", err);
    if (rc != SBX_OK)
        return rc;
    size_t rows = (size_t)PQntuples(r);
    out->more = rows > limit;
    size_t n = out->more ? limit : rows;
    out->items = calloc(n ? n : 1, sizeof *out->items);
    if (!out->items)
        rc = sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    for (size_t i = 0; rc == SBX_OK && i < n; i++)
        if ((rc = read_intent(st, r, (int)i, &out->items[i], err)) == SBX_OK)
            out->count++;
    PQclear(r);
    if (rc != SBX_OK)
        sbx_intent_page_free(out);
    return rc;
}

static int pg_list_deleting(struct sbx_store *s, const char *after, size_t limit,
                            struct sbx_key_page *out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    PGresult *r = NULL;
    int rc = list_query(st,
                        "SELECT session_key FROM sessions WHERE state = 'deleting' "
                        "ORDER BY session_key LIMIT $1",
                        "SELECT session_key FROM sessions WHERE state = 'deleting' "
                        "AND session_key > $2 ORDER BY session_key LIMIT $1",
                        after, limit, &r, "listing deleting sessions", err);
    if (rc != SBX_OK)
        return rc;
    size_t rows = (size_t)PQntuples(r);
    out->more = rows > limit;
    size_t n = out->more ? limit : rows;
    out->keys = calloc(n ? n : 1, sizeof *out->keys);
    if (!out->keys)
        rc = sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
    for (size_t i = 0; rc == SBX_OK && i < n; i++) {
        bool failed = false;
        out->keys[i] = val_dup(r, (int)i, 0, &failed);
        if (failed)
            rc = sbx_error_set(err, SBX_E_NOMEM, "%s: out of memory", s->label);
        else
            out->count++;
    }
    PQclear(r);
    if (rc != SBX_OK)
        sbx_key_page_free(out);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Opening and migrations                                                     */
/* ------------------------------------------------------------------------ */

static void pg_close(struct sbx_store *s)
{
    struct pg_store *st = from_base(s);
    if (st->conn)
        PQfinish(st->conn);
    sbx_pg_dsn_free(&st->dsn);
    free(st);
}

/* libpq prints server notices to stderr by default ("relation already
 * exists, skipping"); the store has nothing to say there. */
static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static int newer_schema(struct pg_store *st, int version, sbx_error *err)
{
    return sbx_error_set(err, SBX_E_CONFIG,
                         "%s: schema version %d is newer than this sbx supports (%d); "
                         "use a newer sbx",
                         st->base.label, version, SBX_STORE_SCHEMA_VERSION);
}

/* The schema version without taking any lock; 0 when there is no schema. */
static int peek_version(struct pg_store *st, int *version, sbx_error *err)
{
    PGresult *r = NULL;
    *version = 0;
    int rc = run(st, "SELECT to_regclass('schema_version') IS NOT NULL", 0, NULL, &r,
                 "reading the schema", err);
    if (rc != SBX_OK)
        return rc;
    bool present = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    PQclear(r);
    return present ? pg_schema_version(&st->base, version, err) : SBX_OK;
}

/* Apply one migration unless another opener did; in its own transaction. */
static int apply_migration(struct pg_store *st, const struct sbx_store_migration *m,
                           sbx_error *err)
{
    int rc = run(st, "BEGIN", 0, NULL, NULL, "starting a migration", err);
    if (rc != SBX_OK)
        return rc;
    rc = run(st,
             "CREATE TABLE IF NOT EXISTS schema_version ("
             "  version INTEGER NOT NULL PRIMARY KEY,"
             "  name TEXT NOT NULL,"
             "  applied_at BIGINT NOT NULL)",
             0, NULL, NULL, "creating schema_version", err);
    int version = 0;
    PGresult *r = NULL;
    if (rc == SBX_OK &&
        (rc = run(st, "SELECT coalesce(max(version), 0) FROM schema_version", 0, NULL,
                  &r, "reading the schema version", err)) == SBX_OK) {
        version = (int)val_int(r, 0, 0);
        PQclear(r);
    }
    if (rc == SBX_OK && version > SBX_STORE_SCHEMA_VERSION)
        rc = newer_schema(st, version, err);
    if (rc == SBX_OK && version < m->version) {
        char what[96];
        snprintf(what, sizeof what, "applying migration %d (%s)", m->version, m->name);
        /* Several statements: the simple-query protocol runs them all. */
        PGresult *mr = PQexec(st->conn, m->pg_sql);
        if (!mr || PQresultStatus(mr) != PGRES_COMMAND_OK)
            rc = query_error(st, mr, what, err);
        PQclear(mr);
        if (rc == SBX_OK) {
            char v[16];
            snprintf(v, sizeof v, "%d", m->version);
            const char *p[2] = {v, m->name};
            rc = run(st,
                     "INSERT INTO schema_version (version, name, applied_at) "
                     "VALUES ($1, $2, " NOW_MS ")",
                     2, p, NULL, what, err);
        }
    }
    return finish(st, rc, err);
}

static int migrate(struct pg_store *st, sbx_error *err)
{
    int version;
    int rc = peek_version(st, &version, err);
    if (rc != SBX_OK)
        return rc;
    if (version > SBX_STORE_SCHEMA_VERSION)
        return newer_schema(st, version, err);
    if (version == SBX_STORE_SCHEMA_VERSION)
        return SBX_OK;
    /* Openers on several machines may race here: the advisory lock lets one
     * at a time look at the version and apply what is missing. It is a
     * session lock, released below or when the connection closes. */
    rc = run(st, "SELECT pg_advisory_lock(" MIGRATION_LOCK ")", 0, NULL, NULL,
             "waiting for the migration lock", err);
    if (rc != SBX_OK)
        return rc;
    size_t n;
    const struct sbx_store_migration *m = sbx_store_migrations(&n);
    for (size_t i = 0; rc == SBX_OK && i < n; i++)
        if (m[i].version > version)
            rc = apply_migration(st, &m[i], err);
    sbx_error scratch;
    int urc = run(st, "SELECT pg_advisory_unlock(" MIGRATION_LOCK ")", 0, NULL, NULL,
                  "releasing the migration lock", &scratch);
    if (rc == SBX_OK && urc != SBX_OK) {
        if (err)
            *err = scratch;
        rc = urc;
    }
    return rc;
}

int sbx_store_pg_open(const char *dsn, int lock_timeout_ms, struct sbx_store **out,
                      sbx_error *err)
{
    struct pg_store *st = calloc(1, sizeof *st);
    if (!st)
        return sbx_error_set(err, SBX_E_NOMEM, "postgres store: out of memory");
    int rc = sbx_pg_dsn_parse(dsn, &st->dsn, err);
    if (rc != SBX_OK) {
        free(st);
        return rc;
    }
    st->base.ops = &pg_ops;
    st->base.label = st->dsn.label;
    st->base.lock_timeout_ms = lock_timeout_ms;

    /* Defaults first: the expanded connection string overrides them. */
    const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *vals[] = {"5", "sbx", dsn, NULL};
    st->conn = PQconnectdbParams(keys, vals, 1);
    if (!st->conn || PQstatus(st->conn) != CONNECTION_OK) {
        rc = connect_error(st, "cannot connect", err);
        pg_close(&st->base);
        return rc;
    }
    PQsetNoticeProcessor(st->conn, ignore_notice, NULL);
    rc = setup_session(st, err);
    if (rc == SBX_OK)
        rc = migrate(st, err);
    if (rc != SBX_OK) {
        pg_close(&st->base);
        return rc;
    }
    *out = &st->base;
    return SBX_OK;
}

static const struct sbx_store_ops pg_ops = {
    .name = "postgres",
    .close = pg_close,
    .schema_version = pg_schema_version,
    .get_binding = pg_get_binding,
    .get_intent = pg_get_intent,
    .claim = pg_claim,
    .update_intent = pg_update_intent,
    .takeover_intent = pg_takeover_intent,
    .release_intent = pg_release_intent,
    .publish = pg_publish,
    .fence = pg_fence,
    .remove_session = pg_remove_session,
    .list_bindings = pg_list_bindings,
    .list_intents = pg_list_intents,
    .list_deleting = pg_list_deleting,
};
