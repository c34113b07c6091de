/*
 * pg.c - the PostgreSQL driver of the session store (libpq), for
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
 * re-established by the next call. The operations themselves are decided
 * in store/ops.c over the primitives below.
 */
#include "hex.h"
#include "store/driver.h"

#include <libpq-fe.h>
#include <pthread.h>
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

/* The rows of one result (store/driver.h). */
struct pg_cursor {
    struct sbx_store_cursor base;
    PGresult *res;
    int row; /* current row; -1 before the first */
    unsigned char *bytes; /* the last blob decoded (query cursors) */
};

/* Lock connections kept open for reuse once their locks are released. */
#define LOCK_CONN_IDLE 8

struct pg_store {
    struct sbx_store_impl impl;
    PGconn *conn;
    struct sbx_pg_dsn dsn;
    bool prepared[PS_COUNT]; /* on the current connection */
    struct pg_cursor list_cursor; /* of the list call in progress */
    char *dsn_text; /* for the session locks' own connections */
    pthread_mutex_t idle_lock; /* guards idle */
    PGconn *idle[LOCK_CONN_IDLE]; /* lock connections holding nothing */
    int nidle;
};

static const struct sbx_store_ops pg_ops;
static const struct sbx_store_prims pg_prims;

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
    sbxh_pg_dsn_scrub(msg, cap, (const char *const *)st->dsn.secrets,
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
    sbxh_pg_dsn_tidy(detail);
    const char *hint;
    int status = classify(res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL, &hint);
    bool lost = PQstatus(st->conn) == CONNECTION_BAD;
    if (lost) {
        status = SBX_E_UNAVAILABLE;
        hint = " (connection to the server lost; the next call reconnects)";
    }
    char msg[2 * SBX_ERROR_MAX + 256];
    snprintf(msg, sizeof msg, "%s: %s: %s%s", st->impl.base.label, what,
             detail[0] ? detail : "unknown error", hint);
    return report(st, status, msg, sizeof msg, err);
}

/* Report a connection that could not be (re)established. */
static int connect_error(struct pg_store *st, const char *what, sbx_error *err)
{
    char detail[SBX_ERROR_MAX];
    snprintf(detail, sizeof detail, "%s",
             st->conn ? PQerrorMessage(st->conn) : "out of memory");
    sbxh_pg_dsn_tidy(detail);
    int status = SBX_E_UNAVAILABLE;
    if (!st->conn)
        status = SBX_E_NOMEM;
    else if (PQconnectionNeedsPassword(st->conn))
        status = SBX_E_DENIED;
    char msg[2 * SBX_ERROR_MAX + 256];
    snprintf(msg, sizeof msg, "%s: %s: %s", st->impl.base.label, what, detail);
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

static int64_t val_int(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? 0 : strtoll(PQgetvalue(r, row, col), NULL, 10);
}

/* ------------------------------------------------------------------------ */
/* Cursors                                                                    */
/* ------------------------------------------------------------------------ */

static int cursor_next(struct sbx_store_cursor *c, bool *row, sbx_error *err)
{
    (void)err; /* the rows are already in the result */
    struct pg_cursor *pc = (struct pg_cursor *)c;
    pc->row++;
    *row = pc->row < PQntuples(pc->res);
    return SBX_OK;
}

static const char *cursor_text(struct sbx_store_cursor *c, int col)
{
    struct pg_cursor *pc = (struct pg_cursor *)c;
    if (PQgetisnull(pc->res, pc->row, col))
        return NULL;
    return PQgetvalue(pc->res, pc->row, col);
}

static int64_t cursor_integer(struct sbx_store_cursor *c, int col)
{
    struct pg_cursor *pc = (struct pg_cursor *)c;
    return val_int(pc->res, pc->row, col);
}

/* A cursor over the rows of res, before its first row. */
static void cursor_init(struct pg_cursor *c, PGresult *res)
{
    c->base.next = cursor_next;
    c->base.text = cursor_text;
    c->base.integer = cursor_integer;
    c->res = res;
    c->row = -1;
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                      */
/* ------------------------------------------------------------------------ */

static int fetch_binding(struct sbx_store *s, const char *key, struct sbx_binding *b,
                         bool *found, sbx_error *err)
{
    PGresult *r = NULL;
    *found = false;
    int rc = run_prepared(from_base(s), PS_GET_BINDING, key, &r, "reading a binding",
                          err);
    if (rc != SBX_OK)
        return rc;
    struct pg_cursor c;
    cursor_init(&c, r);
    rc = sbxh_store_first_binding(s, &c.base, b, found, err);
    PQclear(r);
    return rc;
}

/* Fetch the intent of key; lock: take its row lock (inside a transaction). */
static int fetch_intent(struct sbx_store *s, const char *key, bool lock,
                        struct sbx_intent *in, bool *found, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    PGresult *r = NULL;
    const char *p[1] = {key};
    *found = false;
    int rc = lock ? run(st, INTENT_SQL "WHERE session_key = $1 FOR UPDATE", 1, p, &r,
                        "reading an intent", err)
                  : run_prepared(st, PS_GET_INTENT, key, &r, "reading an intent", err);
    if (rc != SBX_OK)
        return rc;
    struct pg_cursor c;
    cursor_init(&c, r);
    rc = sbxh_store_first_intent(s, &c.base, in, found, err);
    PQclear(r);
    return rc;
}

/* Lock the session row of key and read its state. */
static int lock_session(struct sbx_store *s, const char *key, int *state, sbx_error *err)
{
    PGresult *r = NULL;
    const char *p[1] = {key};
    *state = SBX_SESSION_NONE;
    int rc = run(from_base(s),
                 "SELECT state FROM sessions WHERE session_key = $1 FOR UPDATE", 1, p,
                 &r, "locking the session", err);
    if (rc != SBX_OK)
        return rc;
    if (PQntuples(r) == 1)
        *state = strcmp(PQgetvalue(r, 0, 0), "deleting") == 0 ? SBX_SESSION_DELETING
                                                               : SBX_SESSION_ACTIVE;
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
    snprintf(timeout, sizeof timeout, "%dms", st->impl.base.lock_timeout_ms);
    const char *p[1] = {timeout};
    return run(st, "SELECT set_config('lock_timeout', $1, false)", 1, p, NULL,
               "configuring the connection", err);
}

/* Make sure the connection is usable: reconnect after a loss, and end a
 * transaction a failed call may have left open. */
static int ready(struct sbx_store *s, sbx_error *err)
{
    struct pg_store *st = from_base(s);
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

static int begin(struct sbx_store *s, sbx_error *err)
{
    int rc = ready(s, err);
    return rc != SBX_OK ? rc
                        : run(from_base(s), "BEGIN", 0, NULL, NULL,
                              "starting a transaction", err);
}

/* Commit on success, roll back otherwise; returns the final status. */
static int finish(struct sbx_store *s, int status, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    if (status == SBX_OK)
        status = run(st, "COMMIT", 0, NULL, NULL, "committing", err);
    if (PQstatus(st->conn) == CONNECTION_OK &&
        PQtransactionStatus(st->conn) != PQTRANS_IDLE)
        PQclear(PQexec(st->conn, "ROLLBACK"));
    return status;
}

/* ------------------------------------------------------------------------ */
/* Writes (inside a transaction)                                              */
/* ------------------------------------------------------------------------ */

/* Create the row if needed, then lock it. A concurrent remove can delete it
 * between the two statements; then go round again. */
static int open_session(struct sbx_store *s, const char *key, int *state,
                        sbx_error *err)
{
    const char *pk[1] = {key};
    *state = SBX_SESSION_NONE;
    for (int attempt = 0; attempt < 5 && *state == SBX_SESSION_NONE; attempt++) {
        int rc = run(from_base(s),
                     "INSERT INTO sessions (session_key, state, created_at, updated_at) "
                     "VALUES ($1, 'active', " NOW_MS ", " NOW_MS ") "
                     "ON CONFLICT (session_key) DO NOTHING",
                     1, pk, NULL, "creating the session", err);
        if (rc == SBX_OK)
            rc = lock_session(s, key, state, err);
        if (rc != SBX_OK)
            return rc;
    }
    if (*state == SBX_SESSION_NONE) {
        char lbl[13];
        sbxh_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_UNAVAILABLE,
                             "%s: session %s is being removed concurrently; retry",
                             s->label, lbl);
    }
    return SBX_OK;
}

static int insert_intent(struct sbx_store *s, const struct sbx_claim_request *req,
                         sbx_error *err)
{
    const char *p[5] = {req->session_key, req->provider, req->owner, req->spec_hash,
                        req->step};
    return run(from_base(s),
               "INSERT INTO intents (session_key, provider, owner, spec_hash, "
               "external_id, step, created_at, updated_at) "
               "VALUES ($1, $2, $3, $4, NULL, $5, " NOW_MS ", " NOW_MS ")",
               5, p, NULL, "writing the intent", err);
}

/* Read back the intent just written, as the server stored it. */
static int reread_intent(struct sbx_store *s, const char *key, struct sbx_intent *in,
                         bool *found, sbx_error *err)
{
    sbxh_intent_clear(in);
    return fetch_intent(s, key, false, in, found, err);
}

static int touch_intent(struct sbx_store *s, const char *key, struct sbx_intent *in,
                        sbx_error *err)
{
    bool found;
    int rc = run_key(from_base(s),
                     "UPDATE intents SET updated_at = " NOW_MS " WHERE session_key = $1",
                     key, NULL, "refreshing the intent", err);
    if (rc == SBX_OK && (rc = reread_intent(s, key, in, &found, err)) == SBX_OK && !found)
        rc = sbxh_store_vanished(s, "intent", err);
    return rc;
}

static int update_intent(struct sbx_store *s, const char *key, const char *step,
                         const char *external_id, sbx_error *err)
{
    const char *p[3] = {key, step, external_id};
    return run(from_base(s),
               "UPDATE intents SET step = $2, external_id = coalesce($3, external_id), "
               "updated_at = " NOW_MS " WHERE session_key = $1",
               3, p, NULL, "updating the intent", err);
}

static int set_owner(struct sbx_store *s, const char *key, const char *owner,
                     struct sbx_intent *in, sbx_error *err)
{
    bool found;
    const char *p[2] = {key, owner};
    int rc = run(from_base(s),
                 "UPDATE intents SET owner = $2, updated_at = " NOW_MS
                 " WHERE session_key = $1",
                 2, p, NULL, "taking over the intent", err);
    if (rc == SBX_OK && (rc = reread_intent(s, key, in, &found, err)) == SBX_OK && !found)
        rc = sbxh_store_no_intent(s, key, err);
    return rc;
}

static int delete_intent(struct sbx_store *s, const char *key, sbx_error *err)
{
    return run_key(from_base(s), "DELETE FROM intents WHERE session_key = $1", key, NULL,
                   "deleting the intent", err);
}

static int bound_key(struct sbx_store *s, const char *provider, const char *external_id,
                     char other[13], bool *found, sbx_error *err)
{
    PGresult *r = NULL;
    const char *p[2] = {provider, external_id};
    *found = false;
    int rc = run(from_base(s),
                 "SELECT session_key FROM bindings "
                 "WHERE provider = $1 AND external_id = $2",
                 2, p, &r, "checking the external id", err);
    if (rc != SBX_OK)
        return rc;
    if (PQntuples(r) > 0) {
        *found = true;
        sbxh_store_key_label(PQgetvalue(r, 0, 0), other);
    }
    PQclear(r);
    return SBX_OK;
}

/* Another key may insert the same external id concurrently: the unique
 * constraint decides then (SQLSTATE 23505 -> SBX_E_EXISTS). */
static int insert_binding(struct sbx_store *s, const char *key,
                          const struct sbx_intent *in, int64_t *created_at,
                          sbx_error *err)
{
    PGresult *r = NULL;
    const char *p[4] = {key, in->provider, in->external_id, in->spec_hash};
    int rc = run(from_base(s),
                 "INSERT INTO bindings (session_key, provider, external_id, spec_hash, "
                 "created_at) VALUES ($1, $2, $3, $4, " NOW_MS ") RETURNING created_at",
                 4, p, &r, "writing the binding", err);
    if (rc != SBX_OK)
        return rc;
    *created_at = val_int(r, 0, 0);
    PQclear(r);
    return SBX_OK;
}

/* One statement: atomic without a transaction. */
static int fence(struct sbx_store *s, const char *key, bool *found, sbx_error *err)
{
    long n = 0;
    int rc = ready(s, err);
    if (rc == SBX_OK)
        rc = run_key(from_base(s),
                     "UPDATE sessions SET state = 'deleting', updated_at = " NOW_MS
                     " WHERE session_key = $1",
                     key, &n, "fencing the session", err);
    *found = n > 0;
    return rc;
}

static int delete_session(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = run_key(st, "DELETE FROM bindings WHERE session_key = $1", key, NULL,
                     "deleting the binding", err);
    if (rc == SBX_OK)
        rc = run_key(st, "DELETE FROM sessions WHERE session_key = $1", key, NULL,
                     "deleting the session", err);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Lists                                                                      */
/* ------------------------------------------------------------------------ */

/* $1 is the row limit (one more than the page, to learn whether more
 * follow), $2 the cursor when there is one. */
static const struct {
    const char *first_sql, *after_sql, *what;
} list_sql[] = {
    [SBX_STORE_LIST_BINDINGS] = {BINDING_SQL "ORDER BY b.session_key LIMIT $1",
                                 BINDING_SQL "WHERE b.session_key > $2 "
                                             "ORDER BY b.session_key LIMIT $1",
                                 "listing bindings"},
    [SBX_STORE_LIST_INTENTS] = {INTENT_SQL "ORDER BY session_key LIMIT $1",
                                INTENT_SQL "WHERE session_key > $2 "
                                           "ORDER BY session_key LIMIT $1",
                                "listing intents"},
    [SBX_STORE_LIST_DELETING] = {"SELECT session_key FROM sessions "
                                 "WHERE state = 'deleting' ORDER BY session_key LIMIT $1",
                                 "SELECT session_key FROM sessions "
                                 "WHERE state = 'deleting' AND session_key > $2 "
                                 "ORDER BY session_key LIMIT $1",
                                 "listing deleting sessions"},
};

static int list(struct sbx_store *s, enum sbx_store_list which, const char *after,
                size_t limit, struct sbx_store_cursor **cur, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = ready(s, err);
    if (rc != SBX_OK)
        return rc;
    char lim[32];
    snprintf(lim, sizeof lim, "%zu", limit + 1);
    const char *p[2] = {lim, after};
    PGresult *r = NULL;
    rc = run(st, after ? list_sql[which].after_sql : list_sql[which].first_sql,
             after ? 2 : 1, p, &r, list_sql[which].what, err);
    if (rc != SBX_OK)
        return rc;
    cursor_init(&st->list_cursor, r);
    *cur = &st->list_cursor.base;
    return SBX_OK;
}

static void list_end(struct sbx_store *s, struct sbx_store_cursor *cur)
{
    (void)s;
    struct pg_cursor *pc = (struct pg_cursor *)cur;
    PQclear(pc->res);
    pc->res = NULL;
}

/* ------------------------------------------------------------------------ */
/* Generic statements                                                         */
/* ------------------------------------------------------------------------ */

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* bytea comes back in the server's hex output format ("\x0a1b..."). */
static const void *query_blob(struct sbx_store_cursor *c, int col, size_t *len)
{
    struct pg_cursor *pc = (struct pg_cursor *)c;
    *len = 0;
    if (PQgetisnull(pc->res, pc->row, col))
        return NULL;
    const char *v = PQgetvalue(pc->res, pc->row, col);
    size_t n = strlen(v);
    free(pc->bytes);
    pc->bytes = NULL;
    if (n < 2 || v[0] != '\\' || v[1] != 'x' || n % 2) {
        *len = SIZE_MAX; /* bytea_output is not hex */
        return NULL;
    }
    pc->bytes = malloc(n / 2 + 1);
    if (!pc->bytes) {
        *len = SIZE_MAX;
        return NULL;
    }
    for (size_t i = 2; i < n; i += 2) {
        int hi = hex_digit(v[i]), lo = hex_digit(v[i + 1]);
        if (hi < 0 || lo < 0) {
            *len = SIZE_MAX;
            return NULL;
        }
        pc->bytes[(i - 2) / 2] = (unsigned char)(hi << 4 | lo);
    }
    *len = (n - 2) / 2;
    return pc->bytes;
}

static int query(struct sbx_store *s, const char *sql, const struct sbx_store_value *params,
                 int n, struct sbx_store_cursor **cur, int64_t *affected, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    /* ready() would roll back an open transaction: only reconnect a lost
     * connection here. */
    if (PQstatus(st->conn) != CONNECTION_OK) {
        int rc = ready(s, err);
        if (rc != SBX_OK)
            return rc;
    }
    if (n > 16)
        return sbx_error_set(err, SBX_E_INTERNAL, "%s: too many parameters",
                             s->label);
    const char *p[16];
    char ints[16][24];
    char *owned[16] = {NULL};
    int rc = SBX_OK;
    for (int i = 0; i < n && rc == SBX_OK; i++) {
        switch (params[i].type) {
        case SBX_SV_TEXT:
            p[i] = params[i].text;
            break;
        case SBX_SV_INT:
            snprintf(ints[i], sizeof ints[i], "%lld", (long long)params[i].integer);
            p[i] = ints[i];
            break;
        case SBX_SV_BLOB:
            /* bytea's hex input format */
            owned[i] = malloc(2 * params[i].len + 3);
            if (!owned[i]) {
                rc = sbxh_store_nomem(s, err);
                break;
            }
            owned[i][0] = '\\';
            owned[i][1] = 'x';
            sbxs_hex(params[i].blob, params[i].len, owned[i] + 2);
            p[i] = owned[i];
            break;
        default:
            p[i] = NULL;
            break;
        }
    }
    PGresult *r = NULL;
    if (rc == SBX_OK)
        rc = run(st, sql, n, p, &r, cur ? "reading the memory store"
                                        : "writing the memory store", err);
    for (int i = 0; i < n; i++)
        free(owned[i]);
    if (rc != SBX_OK)
        return rc;
    if (affected)
        *affected = strtoll(PQcmdTuples(r), NULL, 10);
    if (!cur) {
        PQclear(r);
        return SBX_OK;
    }
    struct pg_cursor *c = calloc(1, sizeof *c);
    if (!c) {
        PQclear(r);
        return sbxh_store_nomem(s, err);
    }
    cursor_init(c, r);
    c->base.blob = query_blob;
    *cur = &c->base;
    return SBX_OK;
}

static void query_end(struct sbx_store *s, struct sbx_store_cursor *cur)
{
    (void)s;
    struct pg_cursor *c = (struct pg_cursor *)cur;
    if (!c)
        return;
    PQclear(c->res);
    free(c->bytes);
    free(c);
}

/* ------------------------------------------------------------------------ */
/* Schema version                                                             */
/* ------------------------------------------------------------------------ */

static int pg_schema_version(struct sbx_store *s, int *out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    int rc = ready(s, err);
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

/* ------------------------------------------------------------------------ */
/* Opening and migrations                                                     */
/* ------------------------------------------------------------------------ */

static void pg_close(struct sbx_store *s)
{
    struct pg_store *st = from_base(s);
    if (st->conn)
        PQfinish(st->conn);
    for (int i = 0; i < st->nidle; i++)
        PQfinish(st->idle[i]);
    if (st->dsn_text) {
        explicit_bzero(st->dsn_text, strlen(st->dsn_text));
        free(st->dsn_text);
    }
    pthread_mutex_destroy(&st->idle_lock);
    sbxh_pg_dsn_free(&st->dsn);
    free(st);
}

/* libpq prints server notices to stderr by default ("relation already
 * exists, skipping"); the store has nothing to say there. */
static void ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
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
    return present ? pg_schema_version(&st->impl.base, version, err) : SBX_OK;
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
        rc = sbxh_store_newer_schema(&st->impl.base, version, err);
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
    return finish(&st->impl.base, rc, err);
}

static int migrate(struct pg_store *st, sbx_error *err)
{
    int version;
    int rc = peek_version(st, &version, err);
    if (rc != SBX_OK)
        return rc;
    if (version > SBX_STORE_SCHEMA_VERSION)
        return sbxh_store_newer_schema(&st->impl.base, version, err);
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
    const struct sbx_store_migration *m = sbxh_store_migrations(&n);
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

int sbxh_store_pg_open(const char *dsn, int lock_timeout_ms, struct sbx_store **out,
                       sbx_error *err)
{
    struct pg_store *st = calloc(1, sizeof *st);
    if (!st)
        return sbx_error_set(err, SBX_E_NOMEM, "postgres store: out of memory");
    int rc = sbxh_pg_dsn_parse(dsn, &st->dsn, err);
    if (rc != SBX_OK) {
        free(st);
        return rc;
    }
    pthread_mutex_init(&st->idle_lock, NULL);
    st->impl.base.ops = &pg_ops;
    st->impl.prims = &pg_prims;
    if (!(st->dsn_text = strdup(dsn))) {
        pg_close(&st->impl.base);
        return sbx_error_set(err, SBX_E_NOMEM, "postgres store: out of memory");
    }
    st->impl.base.label = st->dsn.label;
    st->impl.base.lock_timeout_ms = lock_timeout_ms;

    /* Defaults first: the expanded connection string overrides them. */
    const char *keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *vals[] = {"5", "sbx", dsn, NULL};
    st->conn = PQconnectdbParams(keys, vals, 1);
    if (!st->conn || PQstatus(st->conn) != CONNECTION_OK) {
        rc = connect_error(st, "cannot connect", err);
        pg_close(&st->impl.base);
        return rc;
    }
    PQsetNoticeProcessor(st->conn, ignore_notice, NULL);
    rc = setup_session(st, err);
    if (rc == SBX_OK)
        rc = migrate(st, err);
    if (rc != SBX_OK) {
        pg_close(&st->impl.base);
        return rc;
    }
    *out = &st->impl.base;
    return SBX_OK;
}

/* ------------------------------------------------------------------------ */
/* Session locks' connections                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Session-level advisory locks live on a connection of their own, one per
 * held lock: on the store's shared connection every thread of the process
 * would hold them together (a server session never conflicts with itself)
 * and a reconnect would drop them silently. The server releases them when
 * the connection ends, so a worker that dies (kill -9, a lost machine once
 * TCP keepalives give up on it) leaves nothing locked.
 */
static int lock_conn_open(struct sbx_store *s, void **out, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    PGconn *c = NULL;
    pthread_mutex_lock(&st->idle_lock);
    if (st->nidle)
        c = st->idle[--st->nidle];
    pthread_mutex_unlock(&st->idle_lock);
    if (c && PQstatus(c) == CONNECTION_OK) {
        *out = c;
        return SBX_OK;
    }
    if (c)
        PQfinish(c);
    /* keepalives: a worker machine that vanishes is noticed by the server
     * (tcp_keepalives_*) within about 30 s instead of hours */
    /* and libpq's own (keepalives_*): a lock call on a connection whose
     * server vanished fails within about 30 s instead of hanging */
    const char *keys[] = {"connect_timeout", "application_name", "keepalives",
                          "keepalives_idle", "keepalives_interval", "keepalives_count",
                          "dbname", NULL};
    const char *vals[] = {"5", "sbx-lock", "1", "10", "5", "4", st->dsn_text, NULL};
    c = PQconnectdbParams(keys, vals, 1);
    if (!c || PQstatus(c) != CONNECTION_OK) {
        char detail[SBX_ERROR_MAX];
        snprintf(detail, sizeof detail, "%s", c ? PQerrorMessage(c) : "out of memory");
        sbxh_pg_dsn_tidy(detail);
        if (c)
            PQfinish(c);
        char msg[2 * SBX_ERROR_MAX + 256];
        snprintf(msg, sizeof msg, "%s: cannot open a connection for session locks: %s",
                 s->label, detail);
        return report(st, SBX_E_UNAVAILABLE, msg, sizeof msg, err);
    }
    PQsetNoticeProcessor(c, ignore_notice, NULL);
    PGresult *r = PQexec(c, "SELECT set_config('tcp_keepalives_idle', '10', false), "
                            "set_config('tcp_keepalives_interval', '5', false), "
                            "set_config('tcp_keepalives_count', '4', false)");
    PQclear(r); /* best effort: a Unix socket has no keepalives */
    *out = c;
    return SBX_OK;
}

static const char *const lock_calls[] = {
    [SBX_STORE_LOCK_TRY_EXCLUSIVE] = "SELECT pg_try_advisory_lock($1::bigint)::int",
    [SBX_STORE_LOCK_TRY_SHARED] = "SELECT pg_try_advisory_lock_shared($1::bigint)::int",
    [SBX_STORE_LOCK_DROP_EXCLUSIVE] = "SELECT pg_advisory_unlock($1::bigint)::int",
    [SBX_STORE_LOCK_DROP_SHARED] = "SELECT pg_advisory_unlock_shared($1::bigint)::int",
};

static int lock_conn_call(struct sbx_store *s, void *conn, int call, int64_t id,
                          bool *result, sbx_error *err)
{
    struct pg_store *st = from_base(s);
    PGconn *c = conn;
    char idt[24];
    snprintf(idt, sizeof idt, "%lld", (long long)id);
    const char *p[1] = {idt};
    PGresult *r = PQexecParams(c, lock_calls[call], 1, NULL, p, NULL, NULL, 0);
    int rc = SBX_OK;
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        char detail[SBX_ERROR_MAX];
        snprintf(detail, sizeof detail, "%s", PQerrorMessage(c));
        sbxh_pg_dsn_tidy(detail);
        char msg[2 * SBX_ERROR_MAX + 256];
        snprintf(msg, sizeof msg, "%s: session lock: %s", s->label,
                 detail[0] ? detail : "no result");
        rc = report(st, SBX_E_UNAVAILABLE, msg, sizeof msg, err);
    } else {
        *result = strcmp(PQgetvalue(r, 0, 0), "1") == 0;
    }
    PQclear(r);
    return rc;
}

static void lock_conn_close(struct sbx_store *s, void *conn, bool reuse)
{
    struct pg_store *st = from_base(s);
    PGconn *c = conn;
    if (!c)
        return;
    if (reuse && PQstatus(c) == CONNECTION_OK &&
        PQtransactionStatus(c) == PQTRANS_IDLE) {
        pthread_mutex_lock(&st->idle_lock);
        if (st->nidle < LOCK_CONN_IDLE) {
            st->idle[st->nidle++] = c;
            c = NULL;
        }
        pthread_mutex_unlock(&st->idle_lock);
    }
    if (c)
        PQfinish(c);
}

static const struct sbx_store_prims pg_prims = {
    .ready = ready,
    .begin = begin,
    .finish = finish,
    .fetch_binding = fetch_binding,
    .fetch_intent = fetch_intent,
    .open_session = open_session,
    .lock_session = lock_session,
    .insert_intent = insert_intent,
    .touch_intent = touch_intent,
    .update_intent = update_intent,
    .set_owner = set_owner,
    .delete_intent = delete_intent,
    .bound_key = bound_key,
    .insert_binding = insert_binding,
    .fence = fence,
    .delete_session = delete_session,
    .list = list,
    .list_end = list_end,
    .query = query,
    .query_end = query_end,
    .lock_conn_open = lock_conn_open,
    .lock_conn_call = lock_conn_call,
    .lock_conn_close = lock_conn_close,
};

static const struct sbx_store_ops pg_ops = {
    .name = "postgres",
    .close = pg_close,
    .schema_version = pg_schema_version,
    SBX_STORE_SHARED_OPS,
};
