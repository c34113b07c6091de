/*
 * driver.h - what the two store drivers share (internal to the store
 * files; the session manager uses store.h only).
 *
 * A driver provides small primitives that read or write one thing inside
 * the transaction it opened (struct sbx_store_prims). The operations of
 * struct sbx_store_ops that decide something (who wins a claim, whether a
 * publish may go ahead, what a removal needs) are written once over those
 * primitives in store/ops.c; a driver's ops table points at them through
 * SBX_STORE_SHARED_OPS and keeps only open, close and schema_version.
 * store/rows.c turns rows into structs and fills pages, reading columns
 * through a driver's cursor (struct sbx_store_cursor).
 *
 * Every function returning int returns an sbx_status and fills err (when
 * not NULL) on failure, with the store's label first in the message, as
 * store.h describes.
 */
#ifndef SBX_HOST_STORE_IMPL_H
#define SBX_HOST_STORE_IMPL_H

#include "store/store.h"

#include <time.h>

/* ------------------------------------------------------------------------ */
/* Rows                                                                       */
/* ------------------------------------------------------------------------ */

/*
 * Column layouts every driver's queries return:
 *  binding row: session_key, provider, external_id, spec_hash, created_at,
 *               state of the session ('active' | 'deleting')
 *  intent row:  session_key, provider, owner, spec_hash, external_id, step,
 *               created_at, updated_at, age in ms by the store's clock at
 *               the time of reading (never negative)
 *  key row:     session_key
 */

/* The rows of one query, read forward once. A driver embeds it first in its
 * own cursor and fills the three functions. */
struct sbx_store_cursor {
    /* Advance to the next row; *row tells whether there is one. A failure
     * to read is reported as an sbx_status with err filled. */
    int (*next)(struct sbx_store_cursor *c, bool *row, sbx_error *err);
    /* Column col of the current row as text, NULL for SQL NULL. Owned by
     * the cursor, valid until next is called again. */
    const char *(*text)(struct sbx_store_cursor *c, int col);
    /* Column col of the current row as an integer, 0 for SQL NULL. */
    int64_t (*integer)(struct sbx_store_cursor *c, int col);
    /* Column col of the current row as bytes (*len of them; NULL for SQL
     * NULL). Owned by the cursor, valid until next. Only cursors of
     * prims->query have it. A driver that must decode may fail: NULL with
     * *len = SIZE_MAX. */
    const void *(*blob)(struct sbx_store_cursor *c, int col, size_t *len);
};

/* A parameter of prims->query. */
enum sbx_store_value_type {
    SBX_SV_NULL = 0,
    SBX_SV_TEXT = 1,
    SBX_SV_INT = 2,
    SBX_SV_BLOB = 3
};
struct sbx_store_value {
    int type; /* enum sbx_store_value_type */
    const char *text;
    int64_t integer;
    const void *blob;
    size_t len;
};
#define SBX_SV_T(s) ((struct sbx_store_value){.type = SBX_SV_TEXT, .text = (s)})
#define SBX_SV_I(i) ((struct sbx_store_value){.type = SBX_SV_INT, .integer = (i)})
#define SBX_SV_B(p, n) \
    ((struct sbx_store_value){.type = SBX_SV_BLOB, .blob = (p), .len = (n)})

/* The first row of c, if any, as a binding / intent; *found tells whether
 * there was one. out is filled (the caller clears it) or left cleared. */
int sbxh_store_first_binding(struct sbx_store *s, struct sbx_store_cursor *c,
                             struct sbx_binding *out, bool *found, sbx_error *err);
int sbxh_store_first_intent(struct sbx_store *s, struct sbx_store_cursor *c,
                            struct sbx_intent *out, bool *found, sbx_error *err);

/* The three list calls of store.h. */
enum sbx_store_list {
    SBX_STORE_LIST_BINDINGS,
    SBX_STORE_LIST_INTENTS,
    SBX_STORE_LIST_DELETING
};

/* Where a page goes: exactly the member matching the list is set. */
union sbx_store_page_out {
    struct sbx_binding_page *bindings;
    struct sbx_intent_page *intents;
    struct sbx_key_page *keys;
};

/* Fill a page of at most limit items from c, whose query returned up to
 * limit + 1 rows (one more tells that more follow). On failure the page is
 * freed and left zeroed. */
int sbxh_store_fill_page(struct sbx_store *s, struct sbx_store_cursor *c,
                         enum sbx_store_list which, size_t limit,
                         union sbx_store_page_out out, sbx_error *err);

/* ------------------------------------------------------------------------ */
/* Driver primitives                                                          */
/* ------------------------------------------------------------------------ */

/* A session row as the primitives see it. */
enum sbx_store_session {
    SBX_SESSION_NONE = 0,
    SBX_SESSION_ACTIVE = 1,
    SBX_SESSION_DELETING = 2
};

/*
 * What a driver does; the shared operations call these. "In a transaction"
 * means between begin and finish: the primitive relies on the isolation the
 * driver set up there (SQLite: the database write lock; PostgreSQL: the row
 * locks named below).
 */
struct sbx_store_prims {
    /* Make the store usable for a read outside a transaction (reconnect
     * after a lost connection). NULL when there is nothing to do. */
    int (*ready)(struct sbx_store *s, sbx_error *err);
    /* Start a write transaction. */
    int (*begin)(struct sbx_store *s, sbx_error *err);
    /* End it: commit when status is SBX_OK, roll back otherwise. Returns
     * the final status (a failed commit is reported through err). */
    int (*finish)(struct sbx_store *s, int status, sbx_error *err);

    /* The binding of key, with its session's state; *found tells whether
     * there is one. */
    int (*fetch_binding)(struct sbx_store *s, const char *key, struct sbx_binding *out,
                         bool *found, sbx_error *err);
    /* The intent of key; lock: hold its row until finish (in a transaction). */
    int (*fetch_intent)(struct sbx_store *s, const char *key, bool lock,
                        struct sbx_intent *out, bool *found, sbx_error *err);

    /* In a transaction: create the session row of key when it is missing,
     * lock it, and give its state (ACTIVE or DELETING). */
    int (*open_session)(struct sbx_store *s, const char *key, int *state, sbx_error *err);
    /* In a transaction: lock the session row of key and give its state
     * (NONE when there is no row). */
    int (*lock_session)(struct sbx_store *s, const char *key, int *state, sbx_error *err);

    /* In a transaction: write a new intent from req (no external id). */
    int (*insert_intent)(struct sbx_store *s, const struct sbx_claim_request *req,
                         sbx_error *err);
    /* In a transaction: refresh the lease of the intent `in` read for key;
     * afterwards `in` shows the stored row. */
    int (*touch_intent)(struct sbx_store *s, const char *key, struct sbx_intent *in,
                        sbx_error *err);
    /* In a transaction: set step and (when not NULL) external_id, and
     * refresh the lease. */
    int (*update_intent)(struct sbx_store *s, const char *key, const char *step,
                         const char *external_id, sbx_error *err);
    /* In a transaction: give the intent `in` read for key to owner and
     * refresh its lease; afterwards `in` shows the stored row. */
    int (*set_owner)(struct sbx_store *s, const char *key, const char *owner,
                     struct sbx_intent *in, sbx_error *err);
    /* In a transaction: delete the intent of key. */
    int (*delete_intent)(struct sbx_store *s, const char *key, sbx_error *err);

    /* In a transaction: the session bound to (provider, external_id), as a
     * key label (sbxh_store_key_label); *found tells whether there is one. */
    int (*bound_key)(struct sbx_store *s, const char *provider, const char *external_id,
                     char other[13], bool *found, sbx_error *err);
    /* In a transaction: write the binding of key from the intent `in`;
     * *created_at receives its stored creation time. */
    int (*insert_binding)(struct sbx_store *s, const char *key,
                          const struct sbx_intent *in, int64_t *created_at,
                          sbx_error *err);

    /* Mark the session row of key deleting, atomically on its own; *found
     * tells whether there was a row. */
    int (*fence)(struct sbx_store *s, const char *key, bool *found, sbx_error *err);
    /* In a transaction: delete the binding (if any) and the session row. */
    int (*delete_session)(struct sbx_store *s, const char *key, sbx_error *err);

    /* Start a list query returning up to limit + 1 rows after `after` (NULL:
     * from the start) in byte order of session_key, with the columns of
     * `which`. The cursor is the driver's; list_end releases it. */
    int (*list)(struct sbx_store *s, enum sbx_store_list which, const char *after,
                size_t limit, struct sbx_store_cursor **cur, sbx_error *err);
    void (*list_end)(struct sbx_store *s, struct sbx_store_cursor *cur);

    /* Run one statement written in the SQL both dialects share, with
     * parameters $1..$n (n <= 16). With cur NULL the statement's rows are
     * not wanted; *affected (when not NULL) receives the number of rows
     * changed. With cur, rows are read through *cur until query_end (one
     * query cursor at a time). Inside a transaction or on its own. */
    int (*query)(struct sbx_store *s, const char *sql,
                 const struct sbx_store_value *params, int n,
                 struct sbx_store_cursor **cur, int64_t *affected, sbx_error *err);
    void (*query_end)(struct sbx_store *s, struct sbx_store_cursor *cur);

    /* Session locks (store/session_activity.c) on a server: NULL for a
     * driver whose locks are file locks. lock_conn_open gives a connection
     * of the caller's own (the store's lock is not needed); lock_conn_call
     * runs one enum sbx_store_lock_call on lock number id there (*result:
     * the server's answer); lock_conn_close ends or, with reuse and
     * nothing held, keeps it for the next lock. */
    int (*lock_conn_open)(struct sbx_store *s, void **conn, sbx_error *err);
    int (*lock_conn_call)(struct sbx_store *s, void *conn, int call, int64_t id,
                          bool *result, sbx_error *err);
    void (*lock_conn_close)(struct sbx_store *s, void *conn, bool reuse);
};

/* The calls of prims->lock_conn_call. */
enum sbx_store_lock_call {
    SBX_STORE_LOCK_TRY_EXCLUSIVE,
    SBX_STORE_LOCK_TRY_SHARED,
    SBX_STORE_LOCK_DROP_EXCLUSIVE,
    SBX_STORE_LOCK_DROP_SHARED
};

/* The base of a driver's store: drivers embed it first (instead of struct
 * sbx_store) so the shared operations find the primitives. */
struct sbx_store_impl {
    struct sbx_store base;
    const struct sbx_store_prims *prims;
};

/* The driver's primitives of s. */
static inline const struct sbx_store_prims *sbx_store_prims_of(struct sbx_store *s)
{
    return ((struct sbx_store_impl *)s)->prims;
}

/* The driver's readiness check (a lost connection re-opened), if it has
 * one. The store's lock is held. */
static inline int sbx_store_ready(struct sbx_store *s, sbx_error *err)
{
    const struct sbx_store_prims *p = sbx_store_prims_of(s);
    return p->ready ? p->ready(s, err) : SBX_OK;
}

/* Wall-clock milliseconds since the epoch, for the rows' timestamps. */
static inline int64_t sbx_store_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ------------------------------------------------------------------------ */
/* Shared operations (store/ops.c)                                            */
/* ------------------------------------------------------------------------ */

/* Implementations of the struct sbx_store_ops entries of the same names. */
int sbxh_store_shared_get_binding(struct sbx_store *s, const char *key,
                                  struct sbx_binding *out, sbx_error *err);
int sbxh_store_shared_get_intent(struct sbx_store *s, const char *key,
                                 struct sbx_intent *out, sbx_error *err);
int sbxh_store_shared_claim(struct sbx_store *s, const struct sbx_claim_request *req,
                            struct sbx_claim *out, sbx_error *err);
int sbxh_store_shared_update_intent(struct sbx_store *s, const char *key,
                                    const char *owner, const char *step,
                                    const char *external_id, sbx_error *err);
int sbxh_store_shared_takeover_intent(struct sbx_store *s, const char *key,
                                      const char *owner, int64_t lease_ms,
                                      struct sbx_intent *out, sbx_error *err);
int sbxh_store_shared_release_intent(struct sbx_store *s, const char *key,
                                     const char *owner, sbx_error *err);
int sbxh_store_shared_publish(struct sbx_store *s, const char *key, const char *owner,
                              struct sbx_binding *out, sbx_error *err);
int sbxh_store_shared_fence(struct sbx_store *s, const char *key, sbx_error *err);
int sbxh_store_shared_remove_session(struct sbx_store *s, const char *key,
                                     sbx_error *err);
int sbxh_store_shared_list_bindings(struct sbx_store *s, const char *after, size_t limit,
                                    struct sbx_binding_page *out, sbx_error *err);
int sbxh_store_shared_list_intents(struct sbx_store *s, const char *after, size_t limit,
                                   struct sbx_intent_page *out, sbx_error *err);
int sbxh_store_shared_list_deleting(struct sbx_store *s, const char *after, size_t limit,
                                    struct sbx_key_page *out, sbx_error *err);

/* The shared entries of a driver's struct sbx_store_ops initializer. */
#define SBX_STORE_SHARED_OPS                                                     \
    .get_binding = sbxh_store_shared_get_binding,                                 \
    .get_intent = sbxh_store_shared_get_intent, .claim = sbxh_store_shared_claim,  \
    .update_intent = sbxh_store_shared_update_intent,                             \
    .takeover_intent = sbxh_store_shared_takeover_intent,                         \
    .release_intent = sbxh_store_shared_release_intent,                           \
    .publish = sbxh_store_shared_publish, .fence = sbxh_store_shared_fence,        \
    .remove_session = sbxh_store_shared_remove_session,                           \
    .list_bindings = sbxh_store_shared_list_bindings,                             \
    .list_intents = sbxh_store_shared_list_intents,                               \
    .list_deleting = sbxh_store_shared_list_deleting

/* ------------------------------------------------------------------------ */
/* Messages both drivers give (store/ops.c)                                   */
/* ------------------------------------------------------------------------ */

/* SBX_E_NOT_FOUND: key has no provisioning intent. */
int sbxh_store_no_intent(struct sbx_store *s, const char *key, sbx_error *err);

/* SBX_E_INTERNAL: a row written in this transaction (`what`: "intent",
 * "binding") cannot be read back. */
int sbxh_store_vanished(struct sbx_store *s, const char *what, sbx_error *err);

/* SBX_E_NOMEM (store/values.c, which rows.c calls too). */
int sbxh_store_nomem(struct sbx_store *s, sbx_error *err);

/* SBX_E_CONFIG: the database holds a schema newer than this build. */
int sbxh_store_newer_schema(struct sbx_store *s, int version, sbx_error *err);

#endif /* SBX_HOST_STORE_IMPL_H */
