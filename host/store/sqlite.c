/*
 * sqlite.c - the SQLite driver of the session store: one database
 * file in WAL mode, shared by the processes of one machine.
 *
 * Every write runs in BEGIN IMMEDIATE, which takes the database's single
 * write lock up front: racing writers queue on it (for up to the lock
 * timeout, via sqlite3_busy_timeout) instead of failing later with
 * SQLITE_BUSY_SNAPSHOT, so each operation sees the state the previous one
 * committed. Statements are prepared once per connection. The operations
 * themselves are decided in store/ops.c over the primitives below.
 */
#include "store/driver.h"

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
/* Parameter ?9 of an intent query is the current time, for the age column
 * (this machine's clock is the store's clock). */
#define NOW_PARAM 9
#define INTENT_SELECT "SELECT " INTENT_COLS ", max(0, ?9 - updated_at) FROM intents "

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_VERSION] = "SELECT coalesce(max(version), 0) FROM schema_version",
    [ST_GET_BINDING] = "SELECT " BINDING_COLS BINDING_FROM " WHERE b.session_key = ?1",
    [ST_GET_INTENT] = INTENT_SELECT "WHERE session_key = ?1",
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
    [ST_LIST_INTENTS] = INTENT_SELECT "ORDER BY session_key LIMIT ?1",
    [ST_LIST_INTENTS_AFTER] = INTENT_SELECT
                              "WHERE session_key > ?2 ORDER BY session_key LIMIT ?1",
    [ST_LIST_DELETING] = "SELECT session_key FROM sessions WHERE state = 'deleting' "
                         "ORDER BY session_key LIMIT ?1",
    [ST_LIST_DELETING_AFTER] = "SELECT session_key FROM sessions "
                               "WHERE state = 'deleting' AND session_key > ?2 "
                               "ORDER BY session_key LIMIT ?1",
};

/* The rows of one statement (store/driver.h). */
struct sqlite_store;
struct sq_cursor {
    struct sbx_store_cursor base;
    struct sqlite_store *st;
    sqlite3_stmt *q;
    const char *what; /* for messages: "reading a binding" */
};

struct sqlite_store {
    struct sbx_store_impl impl;
    sqlite3 *db;
    sqlite3_stmt *stmts[ST_COUNT];
    struct sq_cursor list_cursor; /* of the list call in progress */
};

static const struct sbx_store_ops sqlite_ops;
static const struct sbx_store_prims sqlite_prims;

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
                             st->impl.base.label, what, msg,
                             st->impl.base.lock_timeout_ms);
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
        return sbx_error_set(err, status, "%s: %s: %s (%s)", st->impl.base.label, what,
                             msg, strerror(sys));
    return sbx_error_set(err, status, "%s: %s: %s", st->impl.base.label, what, msg);
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

/* ------------------------------------------------------------------------ */
/* Cursors                                                                    */
/* ------------------------------------------------------------------------ */

static int cursor_next(struct sbx_store_cursor *c, bool *row, sbx_error *err)
{
    struct sq_cursor *sc = (struct sq_cursor *)c;
    int r = sqlite3_step(sc->q);
    *row = r == SQLITE_ROW;
    if (r == SQLITE_ROW || r == SQLITE_DONE)
        return SBX_OK;
    return fail(sc->st, r, sc->what, err);
}

static const char *cursor_text(struct sbx_store_cursor *c, int col)
{
    return (const char *)sqlite3_column_text(((struct sq_cursor *)c)->q, col);
}

static int64_t cursor_integer(struct sbx_store_cursor *c, int col)
{
    return sqlite3_column_int64(((struct sq_cursor *)c)->q, col);
}

static const void *cursor_blob(struct sbx_store_cursor *c, int col, size_t *len)
{
    sqlite3_stmt *q = ((struct sq_cursor *)c)->q;
    const void *p = sqlite3_column_blob(q, col);
    *len = (size_t)sqlite3_column_bytes(q, col);
    return p ? p : (*len == 0 && sqlite3_column_type(q, col) != SQLITE_NULL ? "" : NULL);
}

/* A cursor over the rows of q, a bound statement; `what` names the read in
 * messages. */
static void cursor_init(struct sq_cursor *c, struct sqlite_store *st, sqlite3_stmt *q,
                        const char *what)
{
    c->base.next = cursor_next;
    c->base.text = cursor_text;
    c->base.integer = cursor_integer;
    c->base.blob = cursor_blob;
    c->st = st;
    c->q = q;
    c->what = what;
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                      */
/* ------------------------------------------------------------------------ */

static int fetch_binding(struct sbx_store *s, const char *key, struct sbx_binding *b,
                         bool *found, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    *found = false;
    int rc = stmt(st, ST_GET_BINDING, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    struct sq_cursor c;
    cursor_init(&c, st, q, "reading a binding");
    rc = sbxh_store_first_binding(s, &c.base, b, found, err);
    sqlite3_reset(q);
    return rc;
}

/* The write lock of the transaction covers every row: lock is implied. */
static int fetch_intent(struct sbx_store *s, const char *key, bool lock,
                        struct sbx_intent *in, bool *found, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    *found = false;
    int rc = stmt(st, ST_GET_INTENT, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    sqlite3_bind_int64(q, NOW_PARAM, now_ms());
    struct sq_cursor c;
    cursor_init(&c, st, q, "reading an intent");
    rc = sbxh_store_first_intent(s, &c.base, in, found, err);
    sqlite3_reset(q);
    return rc;
}

static int session_state(struct sbx_store *s, const char *key, int *state,
                         sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    *state = SBX_SESSION_NONE;
    int rc = stmt(st, ST_SESSION_STATE, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    int r = sqlite3_step(q);
    if (r == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(q, 0);
        *state = v && strcmp(v, "deleting") == 0 ? SBX_SESSION_DELETING
                                                 : SBX_SESSION_ACTIVE;
    } else if (r != SQLITE_DONE) {
        rc = fail(st, r, "reading a session", err);
    }
    sqlite3_reset(q);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Transactions                                                               */
/* ------------------------------------------------------------------------ */

static int begin(struct sbx_store *s, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
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
static int finish(struct sbx_store *s, int status, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    if (status != SBX_OK)
        return rollback(st, status);
    int rc = commit(st, err);
    return rc != SBX_OK ? rollback(st, rc) : SBX_OK;
}

/* ------------------------------------------------------------------------ */
/* Writes (inside the write transaction)                                      */
/* ------------------------------------------------------------------------ */

/* Under the database write lock the row cannot change until the commit. */
static int open_session(struct sbx_store *s, const char *key, int *state,
                        sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = session_state(s, key, state, err);
    if (rc != SBX_OK || *state != SBX_SESSION_NONE)
        return rc;
    sqlite3_stmt *q = NULL;
    if ((rc = stmt(st, ST_INSERT_SESSION, &q, err)) != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    sqlite3_bind_int64(q, 2, now_ms());
    if ((rc = exec_done(st, q, "creating the session", err)) == SBX_OK)
        *state = SBX_SESSION_ACTIVE;
    return rc;
}

static int insert_intent(struct sbx_store *s, const struct sbx_claim_request *req,
                         sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, ST_INSERT_INTENT, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, req->session_key);
    bind_text(q, 2, req->provider);
    bind_text(q, 3, req->owner);
    bind_text(q, 4, req->spec_hash);
    bind_text(q, 5, req->step);
    sqlite3_bind_int64(q, 6, now_ms());
    return exec_done(st, q, "writing the intent", err);
}

static int touch_intent(struct sbx_store *s, const char *key, struct sbx_intent *in,
                        sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int64_t now = now_ms();
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, ST_TOUCH_INTENT, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    sqlite3_bind_int64(q, 2, now);
    if ((rc = exec_done(st, q, "refreshing the intent", err)) != SBX_OK)
        return rc;
    in->updated_at = now;
    in->age_ms = 0;
    return SBX_OK;
}

static int update_intent(struct sbx_store *s, const char *key, const char *step,
                         const char *external_id, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, ST_UPDATE_INTENT, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    bind_text(q, 2, step);
    bind_text(q, 3, external_id);
    sqlite3_bind_int64(q, 4, now_ms());
    return exec_done(st, q, "updating the intent", err);
}

static int set_owner(struct sbx_store *s, const char *key, const char *owner,
                     struct sbx_intent *in, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int64_t now = now_ms();
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, ST_SET_OWNER, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    bind_text(q, 2, owner);
    sqlite3_bind_int64(q, 3, now);
    if ((rc = exec_done(st, q, "taking over the intent", err)) != SBX_OK)
        return rc;
    char *dup = strdup(owner);
    if (!dup)
        return sbxh_store_nomem(s, err);
    free(in->owner);
    in->owner = dup;
    in->updated_at = now;
    in->age_ms = 0;
    return SBX_OK;
}

static int delete_intent(struct sbx_store *s, const char *key, sbx_error *err)
{
    return exec_key(from_base(s), ST_DELETE_INTENT, key, "deleting the intent", err);
}

static int bound_key(struct sbx_store *s, const char *provider, const char *external_id,
                     char other[13], bool *found, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    *found = false;
    int rc = stmt(st, ST_BINDING_BY_EXTERNAL, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, provider);
    bind_text(q, 2, external_id);
    int r = sqlite3_step(q);
    if (r == SQLITE_ROW) {
        *found = true;
        sbxh_store_key_label((const char *)sqlite3_column_text(q, 0), other);
    } else if (r != SQLITE_DONE) {
        rc = fail(st, r, "checking the external id", err);
    }
    sqlite3_reset(q);
    return rc;
}

static int insert_binding(struct sbx_store *s, const char *key,
                          const struct sbx_intent *in, int64_t *created_at,
                          sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int64_t now = now_ms();
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, ST_INSERT_BINDING, &q, err);
    if (rc != SBX_OK)
        return rc;
    bind_text(q, 1, key);
    bind_text(q, 2, in->provider);
    bind_text(q, 3, in->external_id);
    bind_text(q, 4, in->spec_hash);
    sqlite3_bind_int64(q, 5, now);
    if ((rc = exec_done(st, q, "writing the binding", err)) == SBX_OK)
        *created_at = now;
    return rc;
}

static int fence(struct sbx_store *s, const char *key, bool *found, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = begin(s, err);
    if (rc != SBX_OK)
        return rc;
    sqlite3_stmt *q = NULL;
    if ((rc = stmt(st, ST_FENCE, &q, err)) == SBX_OK) {
        bind_text(q, 1, key);
        sqlite3_bind_int64(q, 2, now_ms());
        rc = exec_done(st, q, "fencing the session", err);
    }
    if (rc == SBX_OK)
        *found = sqlite3_changes(st->db) > 0;
    return finish(s, rc, err);
}

static int delete_session(struct sbx_store *s, const char *key, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    int rc = exec_key(st, ST_DELETE_BINDING, key, "deleting the binding", err);
    if (rc == SBX_OK)
        rc = exec_key(st, ST_DELETE_SESSION, key, "deleting the session", err);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Lists                                                                      */
/* ------------------------------------------------------------------------ */

static const struct {
    enum stmt_id first, after;
    const char *what;
} list_stmts[] = {
    [SBX_STORE_LIST_BINDINGS] = {ST_LIST_BINDINGS, ST_LIST_BINDINGS_AFTER,
                                 "listing bindings"},
    [SBX_STORE_LIST_INTENTS] = {ST_LIST_INTENTS, ST_LIST_INTENTS_AFTER,
                                "listing intents"},
    [SBX_STORE_LIST_DELETING] = {ST_LIST_DELETING, ST_LIST_DELETING_AFTER,
                                 "listing deleting sessions"},
};

/* Bind the row limit (one more than the page tells whether more follow),
 * the cursor and, for intents, the time their age is measured at. */
static int list(struct sbx_store *s, enum sbx_store_list which, const char *after,
                size_t limit, struct sbx_store_cursor **cur, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    int rc = stmt(st, after ? list_stmts[which].after : list_stmts[which].first, &q, err);
    if (rc != SBX_OK)
        return rc;
    sqlite3_bind_int64(q, 1, (sqlite3_int64)limit + 1);
    if (after)
        bind_text(q, 2, after);
    if (which == SBX_STORE_LIST_INTENTS)
        sqlite3_bind_int64(q, NOW_PARAM, now_ms());
    cursor_init(&st->list_cursor, st, q, list_stmts[which].what);
    *cur = &st->list_cursor.base;
    return SBX_OK;
}

static void list_end(struct sbx_store *s, struct sbx_store_cursor *cur)
{
    (void)s;
    sqlite3_reset(((struct sq_cursor *)cur)->q);
}

/* ------------------------------------------------------------------------ */
/* Generic statements                                                         */
/* ------------------------------------------------------------------------ */

/* Bind params to $1..$n by name: SQLite numbers "$N" parameters by first
 * appearance, which need not be N. */
static int bind_params(sqlite3_stmt *q, const struct sbx_store_value *p, int n)
{
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "$%d", i + 1);
        int idx = sqlite3_bind_parameter_index(q, name);
        if (idx == 0)
            continue;
        int r;
        switch (p[i].type) {
        case SBX_SV_TEXT:
            r = bind_text(q, idx, p[i].text);
            break;
        case SBX_SV_INT:
            r = sqlite3_bind_int64(q, idx, p[i].integer);
            break;
        case SBX_SV_BLOB:
            r = sqlite3_bind_blob64(q, idx, p[i].blob ? p[i].blob : "", p[i].len,
                                    SQLITE_STATIC);
            break;
        default:
            r = sqlite3_bind_null(q, idx);
            break;
        }
        if (r != SQLITE_OK)
            return r;
    }
    return SQLITE_OK;
}

static int query(struct sbx_store *s, const char *sql, const struct sbx_store_value *params,
                 int n, struct sbx_store_cursor **cur, int64_t *affected, sbx_error *err)
{
    struct sqlite_store *st = from_base(s);
    sqlite3_stmt *q = NULL;
    int r = sqlite3_prepare_v3(st->db, sql, -1, 0, &q, NULL);
    if (r == SQLITE_OK)
        r = bind_params(q, params, n);
    if (r != SQLITE_OK) {
        int rc = fail(st, r, "preparing a statement", err);
        sqlite3_finalize(q);
        return rc;
    }
    if (cur) {
        struct sq_cursor *c = malloc(sizeof *c);
        if (!c) {
            sqlite3_finalize(q);
            return sbxh_store_nomem(s, err);
        }
        cursor_init(c, st, q, "reading the memory store");
        *cur = &c->base;
        return SBX_OK;
    }
    r = sqlite3_step(q);
    while (r == SQLITE_ROW)
        r = sqlite3_step(q);
    int rc = r == SQLITE_DONE ? SBX_OK : fail(st, r, "writing the memory store", err);
    if (rc == SBX_OK && affected)
        *affected = sqlite3_changes64(st->db);
    sqlite3_finalize(q);
    return rc;
}

static void query_end(struct sbx_store *s, struct sbx_store_cursor *cur)
{
    (void)s;
    struct sq_cursor *c = (struct sq_cursor *)cur;
    if (!c)
        return;
    sqlite3_finalize(c->q);
    free(c);
}

/* ------------------------------------------------------------------------ */
/* Schema version                                                             */
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
    int64_t deadline = now_ms() + st->impl.base.lock_timeout_ms;
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
                                     st->impl.base.label, mode ? mode : "?");
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
    return present ? sq_schema_version(&st->impl.base, version, err) : SBX_OK;
}

/* Apply one migration unless another opener did; in its own transaction. */
static int apply_migration(struct sqlite_store *st, const struct sbx_store_migration *m,
                           sbx_error *err)
{
    int rc = begin(&st->impl.base, err);
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
        rc = sq_schema_version(&st->impl.base, &version, err);
    if (rc == SBX_OK && version > SBX_STORE_SCHEMA_VERSION)
        rc = sbxh_store_newer_schema(&st->impl.base, version, err);
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
    return finish(&st->impl.base, rc, err);
}

static int migrate(struct sqlite_store *st, sbx_error *err)
{
    int version;
    int rc = current_version(st, &version, err);
    if (rc != SBX_OK)
        return rc;
    if (version > SBX_STORE_SCHEMA_VERSION)
        return sbxh_store_newer_schema(&st->impl.base, version, err);
    size_t n;
    const struct sbx_store_migration *m = sbxh_store_migrations(&n);
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

int sbxh_store_sqlite_open(const char *path, int lock_timeout_ms, struct sbx_store **out,
                           sbx_error *err)
{
    int rc = check_parent(path, err);
    if (rc != SBX_OK)
        return rc;
    struct sqlite_store *st = calloc(1, sizeof *st);
    if (!st)
        return sbx_error_set(err, SBX_E_NOMEM, "sqlite store %s: out of memory", path);
    st->impl.base.ops = &sqlite_ops;
    st->impl.prims = &sqlite_prims;
    st->impl.base.lock_timeout_ms = lock_timeout_ms;
    size_t n = strlen(path) + sizeof "sqlite store ";
    st->impl.base.label = malloc(n);
    if (!st->impl.base.label) {
        free(st);
        return sbx_error_set(err, SBX_E_NOMEM, "sqlite store %s: out of memory", path);
    }
    snprintf(st->impl.base.label, n, "sqlite store %s", path);

    int r = sqlite3_open_v2(path, &st->db,
                            SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                SQLITE_OPEN_NOMUTEX,
                            NULL);
    if (r != SQLITE_OK) {
        rc = fail(st, r, "opening", err);
        sq_close(&st->impl.base);
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
        sq_close(&st->impl.base);
        return rc;
    }
    *out = &st->impl.base;
    return SBX_OK;
}

static const struct sbx_store_prims sqlite_prims = {
    .ready = NULL, /* one file, no connection to lose */
    .begin = begin,
    .finish = finish,
    .fetch_binding = fetch_binding,
    .fetch_intent = fetch_intent,
    .open_session = open_session,
    .lock_session = session_state,
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
};

static const struct sbx_store_ops sqlite_ops = {
    .name = "sqlite",
    .close = sq_close,
    .schema_version = sq_schema_version,
    SBX_STORE_SHARED_OPS,
};
