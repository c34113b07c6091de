/*
 * store.h - the durable state of sessions: sessions, provisioning intents
 * and bindings, behind one interface with two drivers (SQLite, PostgreSQL).
 *
 * Internal to libsbx. The session manager is the only user. Every operation
 * is atomic: it runs in one database transaction, so N processes (on one
 * machine with SQLite, on several with PostgreSQL) can race on one session
 * key and the store decides the winner. See docs/STORE.md for the schema
 * and the life cycle of intents, bindings and fencing.
 *
 * Model:
 *  - session row:  session_key, state (active | deleting), created_at.
 *  - intent:       at most one per key; who is provisioning it (owner), for
 *                  which provider and spec, the external id once the
 *                  provider's create returned, and the step reached.
 *  - binding:      at most one per key; (provider, external_id) is unique.
 * An intent and a binding always have a session row.
 *
 * Conventions:
 *  - Every function returning int returns an sbx_status and fills err
 *    (when not NULL) on failure. Status codes used:
 *      SBX_E_INVALID      a bad argument (the message names it),
 *      SBX_E_NOT_FOUND    no such session / binding / intent,
 *      SBX_E_EXISTS       a uniqueness conflict, or an intent held by another
 *                         owner whose lease has not expired,
 *      SBX_E_DENIED       the session is fenced for deletion, or the caller
 *                         is not the owner of the intent it names,
 *      SBX_E_UNAVAILABLE  transient: database locked or busy beyond the
 *                         lock timeout, connection lost or refused,
 *                         serialization failure, deadlock. Retry later.
 *      SBX_E_CONFIG       unknown driver, malformed DSN, schema newer than
 *                         this build,
 *      SBX_E_IO           the database file cannot be opened/written,
 *      SBX_E_NOMEM, SBX_E_INTERNAL.
 *  - Messages name a session by the first 12 hex digits of sbx_key_hash,
 *    never by the raw key, and never contain a DSN password.
 *  - Strings passed in are borrowed for the call. Structs filled through an
 *    out-pointer own their strings; release them with the matching *_clear
 *    or *_free function (safe on zeroed structs, and after failures).
 *  - Times are milliseconds since the Unix epoch by the store's clock (the
 *    server's clock for PostgreSQL, so leases work across machines).
 *  - A store may be used from several threads (calls are serialized). It
 *    must not be used in a child process after fork; open a new one there.
 */
#ifndef SBX_HOST_STORE_H
#define SBX_HOST_STORE_H

#include <sbx/sbx.h>

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Schema version this build creates and understands. */
#define SBX_STORE_SCHEMA_VERSION 7

/* Default wait for a lock held by another writer before SBX_E_UNAVAILABLE. */
#define SBX_STORE_LOCK_TIMEOUT_MS 5000

/* Limits checked on every argument (bytes, excluding the NUL). */
#define SBX_STORE_KEY_MAX 1024      /* session_key, external_id */
#define SBX_STORE_NAME_MAX 256      /* provider, owner, spec_hash */
#define SBX_STORE_STEP_MAX 64       /* intent step */
#define SBX_STORE_PAGE_MAX 1000     /* largest page a list call returns */

/* A published binding: the session's one logical sandbox. */
struct sbx_binding {
    char *session_key;
    char *provider;
    char *external_id;
    char *spec_hash;    /* NULL when none was recorded */
    int64_t created_at; /* ms */
    bool deleting;      /* the session is fenced for deletion */
};

/* A provisioning intent. */
struct sbx_intent {
    char *session_key;
    char *provider;
    char *owner;        /* token of the worker holding it */
    char *spec_hash;    /* NULL when none */
    char *external_id;  /* NULL until the provider's create returned */
    char *step;         /* free-form step name chosen by the session manager */
    int64_t created_at; /* ms */
    int64_t updated_at; /* ms: last claim, update or takeover */
    int64_t age_ms;     /* store clock minus updated_at, when it was read */
};

/* What sbxh_store_claim found. */
enum sbx_claim_outcome {
    SBX_CLAIM_WON = 1,   /* the caller holds the intent (new, or already its own) */
    SBX_CLAIM_HELD = 2,  /* another owner holds it: claim.intent is theirs */
    SBX_CLAIM_BOUND = 3  /* a binding exists: claim.binding; no intent taken */
};

struct sbx_claim {
    int outcome;                /* enum sbx_claim_outcome */
    struct sbx_intent intent;   /* WON: the caller's; HELD: the holder's */
    struct sbx_binding binding; /* BOUND only */
};

/* What to claim. spec_hash may be NULL; step NULL means "claimed". */
struct sbx_claim_request {
    const char *session_key;
    const char *provider;
    const char *owner;
    const char *spec_hash;
    const char *step;
    /* When > 0: a new intent is refused (SBX_E_UNAVAILABLE naming the
     * provider and the limit) when the provider's bindings and intents
     * (and pool members) already number this many, counted in the claim's
     * transaction (sbxh_store_quota_check_tx). */
    int64_t max_sandboxes;
    /* The warm pool whose ready member this admission will try to claim,
     * or NULL (see sbxh_store_quota_check_tx). */
    const char *pool;
};

/* One page of a list call. `more` is true when rows follow the last item:
 * pass the last item's session_key as `after` to get the next page. */
struct sbx_binding_page {
    struct sbx_binding *items;
    size_t count;
    bool more;
};
struct sbx_intent_page {
    struct sbx_intent *items;
    size_t count;
    bool more;
};
struct sbx_key_page {
    char **keys;
    size_t count;
    bool more;
};

/* Options of sbxh_store_open_with; zero-initialize and set size. */
struct sbx_store_options {
    uint32_t size;
    int lock_timeout_ms; /* 0: SBX_STORE_LOCK_TIMEOUT_MS */
};

struct sbx_store;

/* ------------------------------------------------------------------------ */
/* Opening                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * Open a store and apply pending migrations (each in its own transaction;
 * concurrent openers are safe). driver: "sqlite" (target: a file path; the
 * file is created, its directory must exist) or "postgres" (target: a libpq
 * connection string or URI, from config store.dsn or SBX_STORE_DSN).
 * Errors: SBX_E_INVALID (NULL/empty target), SBX_E_CONFIG (unknown driver,
 * malformed DSN, schema version newer than SBX_STORE_SCHEMA_VERSION),
 * SBX_E_UNAVAILABLE (server unreachable, locked), SBX_E_IO, SBX_E_DENIED
 * (the server wants a password that was not given).
 */
int sbxh_store_open(const char *driver, const char *target, struct sbx_store **out,
                    sbx_error *err);
int sbxh_store_open_with(const char *driver, const char *target,
                         const struct sbx_store_options *opts, struct sbx_store **out,
                         sbx_error *err);

/* Close a store. NULL is ignored. */
void sbxh_store_close(struct sbx_store *s);

/* "sqlite" or "postgres". */
const char *sbxh_store_driver(const struct sbx_store *s);

/* The highest migration applied (SBX_STORE_SCHEMA_VERSION after open). */
int sbxh_store_schema_version(struct sbx_store *s, int *out, sbx_error *err);

/* A fresh owner token "realm:pid:start:random" identifying this worker
 * process (realm and start time as in process_id.h); writes at most len
 * bytes including the NUL. */
void sbxh_store_owner_token(char *buf, size_t len);

/* ------------------------------------------------------------------------ */
/* Operations                                                                 */
/* ------------------------------------------------------------------------ */

/* The binding of a key, with the session's fencing state.
 * SBX_E_NOT_FOUND when the key has no binding. */
int sbxh_store_get_binding(struct sbx_store *s, const char *session_key,
                           struct sbx_binding *out, sbx_error *err);

/* The intent of a key. SBX_E_NOT_FOUND when there is none. */
int sbxh_store_get_intent(struct sbx_store *s, const char *session_key,
                          struct sbx_intent *out, sbx_error *err);

/*
 * Claim the provisioning intent of a key, creating the session row when
 * needed. Exactly one of N racing claimants gets SBX_CLAIM_WON; the others
 * get SBX_CLAIM_HELD with the holder's intent (owner, age, external_id).
 * When a binding exists the result is SBX_CLAIM_BOUND and nothing changes.
 * Claiming an intent the caller already owns is SBX_CLAIM_WON and refreshes
 * it. A stale intent is not taken over here: see sbxh_store_takeover_intent.
 * SBX_E_DENIED when the session is fenced for deletion.
 */
int sbxh_store_claim(struct sbx_store *s, const struct sbx_claim_request *req,
                     struct sbx_claim *out, sbx_error *err);

/*
 * Record progress on an intent the caller owns: set its step and, when
 * external_id is not NULL, its external id; refreshes updated_at (so this
 * is also the heartbeat that keeps the lease). SBX_E_NOT_FOUND when the
 * key has no intent, SBX_E_DENIED when another owner holds it now.
 */
int sbxh_store_update_intent(struct sbx_store *s, const char *session_key,
                             const char *owner, const char *step,
                             const char *external_id, sbx_error *err);

/*
 * Take over an intent whose last update is at least lease_ms old (or that
 * the caller already owns), whatever the session's state: the owner becomes
 * `owner`, everything else is kept and returned in *out so the new owner can
 * complete or destroy what the previous one left (external_id). The
 * reconciler uses this. SBX_E_NOT_FOUND when there is no intent,
 * SBX_E_EXISTS when another owner's lease is still running.
 */
int sbxh_store_takeover_intent(struct sbx_store *s, const char *session_key,
                               const char *owner, int64_t lease_ms,
                               struct sbx_intent *out, sbx_error *err);

/*
 * Drop an intent the caller owns (a loser or a failed provisioning cleaned
 * up its resource). The session row stays. SBX_E_NOT_FOUND, SBX_E_DENIED
 * as for update.
 */
int sbxh_store_release_intent(struct sbx_store *s, const char *session_key,
                              const char *owner, sbx_error *err);

/*
 * Publish the binding of an intent the caller owns, in one transaction:
 * insert the binding from the intent (provider, external_id, spec_hash) and
 * delete the intent. On any failure nothing changes and the intent stays.
 * SBX_E_INVALID when no external_id was recorded, SBX_E_DENIED when the
 * session is fenced or the intent has another owner, SBX_E_NOT_FOUND when
 * there is no intent, SBX_E_EXISTS when the key already has a binding or
 * (provider, external_id) is bound to another key. out may be NULL.
 */
int sbxh_store_publish(struct sbx_store *s, const char *session_key,
                       const char *owner, struct sbx_binding *out, sbx_error *err);

/*
 * Fence a session for deletion: its state becomes `deleting`; from then on
 * claims and publishes for the key are refused (SBX_E_DENIED) and the
 * binding reads back with deleting = true. Idempotent.
 * SBX_E_NOT_FOUND when the key has no session row (nothing to delete).
 */
int sbxh_store_fence(struct sbx_store *s, const char *session_key, sbx_error *err);

/*
 * Finish a deletion: remove the binding (if any) and the session row, in
 * one transaction. The caller destroyed the provider resource first.
 * SBX_E_DENIED when the session is not fenced, SBX_E_UNAVAILABLE when an
 * intent is still held for the key (its owner must release it or it must
 * be taken over and cleaned first), SBX_E_NOT_FOUND when there is no
 * session row.
 */
int sbxh_store_remove_session(struct sbx_store *s, const char *session_key,
                              sbx_error *err);

/*
 * List bindings in ascending byte order of session_key (strcmp order, the
 * same on both drivers), starting after `after` (NULL: from the start), at
 * most `limit` (1..SBX_STORE_PAGE_MAX) per page. Free with
 * sbxh_binding_page_free.
 */
int sbxh_store_list_bindings(struct sbx_store *s, const char *after, size_t limit,
                             struct sbx_binding_page *out, sbx_error *err);

/* List intents (for the reconciler), paged like sbxh_store_list_bindings. */
int sbxh_store_list_intents(struct sbx_store *s, const char *after, size_t limit,
                            struct sbx_intent_page *out, sbx_error *err);

/* List the keys of sessions fenced for deletion, paged the same way. */
int sbxh_store_list_deleting(struct sbx_store *s, const char *after, size_t limit,
                             struct sbx_key_page *out, sbx_error *err);

/* Releasing results. All accept zeroed structs and leave them zeroed. */
void sbxh_binding_clear(struct sbx_binding *b);
void sbxh_intent_clear(struct sbx_intent *i);
void sbxh_claim_clear(struct sbx_claim *c);
void sbxh_binding_page_free(struct sbx_binding_page *p);
void sbxh_intent_page_free(struct sbx_intent_page *p);
void sbxh_key_page_free(struct sbx_key_page *p);

/* ------------------------------------------------------------------------ */
/* Driver interface (store.c dispatches; store/sqlite.c, store/pg.c)          */
/* ------------------------------------------------------------------------ */

/*
 * Operations of one driver. store.c validates arguments, holds the store's
 * mutex and clears the out-structs before calling; a driver returns an
 * sbx_status, fills err and leaves out-structs either filled or cleared.
 */
struct sbx_store_ops {
    const char *name;
    void (*close)(struct sbx_store *s);
    int (*schema_version)(struct sbx_store *s, int *out, sbx_error *err);
    int (*get_binding)(struct sbx_store *s, const char *key, struct sbx_binding *out,
                       sbx_error *err);
    int (*get_intent)(struct sbx_store *s, const char *key, struct sbx_intent *out,
                      sbx_error *err);
    int (*claim)(struct sbx_store *s, const struct sbx_claim_request *req,
                 struct sbx_claim *out, sbx_error *err);
    int (*update_intent)(struct sbx_store *s, const char *key, const char *owner,
                         const char *step, const char *external_id, sbx_error *err);
    int (*takeover_intent)(struct sbx_store *s, const char *key, const char *owner,
                           int64_t lease_ms, struct sbx_intent *out, sbx_error *err);
    int (*release_intent)(struct sbx_store *s, const char *key, const char *owner,
                          sbx_error *err);
    int (*publish)(struct sbx_store *s, const char *key, const char *owner,
                   struct sbx_binding *out, sbx_error *err);
    int (*fence)(struct sbx_store *s, const char *key, sbx_error *err);
    int (*remove_session)(struct sbx_store *s, const char *key, sbx_error *err);
    int (*list_bindings)(struct sbx_store *s, const char *after, size_t limit,
                         struct sbx_binding_page *out, sbx_error *err);
    int (*list_intents)(struct sbx_store *s, const char *after, size_t limit,
                        struct sbx_intent_page *out, sbx_error *err);
    int (*list_deleting)(struct sbx_store *s, const char *after, size_t limit,
                         struct sbx_key_page *out, sbx_error *err);
};

/* The common part of every driver's store; drivers embed it first. */
struct sbx_store {
    const struct sbx_store_ops *ops;
    pthread_mutex_t lock;
    char *label;         /* "sqlite store /path" or "postgres store host=..."
                            (no password): prefix of every message */
    int lock_timeout_ms;
};

/* Driver constructors: fill *out with a store whose base the driver
 * allocated (ops, label, lock_timeout_ms set; store.c initializes the
 * mutex) and whose schema is migrated. */
int sbxh_store_sqlite_open(const char *path, int lock_timeout_ms,
                           struct sbx_store **out, sbx_error *err);
int sbxh_store_pg_open(const char *dsn, int lock_timeout_ms, struct sbx_store **out,
                       sbx_error *err);

/* One schema migration: the same version and tables in both dialects. */
struct sbx_store_migration {
    int version;
    const char *name;
    const char *sqlite_sql; /* several statements */
    const char *pg_sql;     /* several statements */
};

/* The migrations in version order (1, 2, ...); *count receives their number,
 * whose last version is SBX_STORE_SCHEMA_VERSION. */
const struct sbx_store_migration *sbxh_store_migrations(size_t *count);

/* A PostgreSQL connection string as the store sees it (store/pg_dsn.c). */
struct sbx_pg_dsn {
    char *label;       /* "postgres store host=... port=... dbname=... user=..." */
    char *secrets[2];  /* password, sslpassword when given (else NULL) */
};

/* Parse dsn (key=value string, URI, or a bare database name) with libpq's
 * parser. SBX_E_CONFIG when malformed: the message keeps libpq's reason but
 * none of the quoted fragments of the string. Free with sbxh_pg_dsn_free,
 * which also wipes the secrets. */
int sbxh_pg_dsn_parse(const char *dsn, struct sbx_pg_dsn *out, sbx_error *err);
void sbxh_pg_dsn_free(struct sbx_pg_dsn *d);

/* Replace every occurrence of each non-empty secret in msg (a buffer of cap
 * bytes) with "***". */
void sbxh_pg_dsn_scrub(char *msg, size_t cap, const char *const *secrets, size_t nsecrets);

/* Replace the content of every "quoted" fragment of msg with "...", except
 * connection keywords, identifiers written as keys in dsn ("passwrd=") and
 * lone separators. */
void sbxh_pg_dsn_scrub_quoted(char *msg, size_t cap, const char *dsn);

/* Fold libpq's multi-line messages onto one line and trim the end. */
void sbxh_pg_dsn_tidy(char *msg);

/* The short form of a key for messages: the first 12 hex digits of its
 * sbx_key_hash. */
void sbxh_store_key_label(const char *key, char out[13]);

/* strdup that maps NULL to NULL; sets *failed on allocation failure. */
char *sbxh_store_strdup(const char *s, bool *failed);

/*
 * The manifest digest a session was provisioned with and its run_as (NULL
 * / "" when none) (store/manifest_digests.c): set (replacing), get (*found false
 * when none; run_as may be NULL), drop (none is fine).
 */
int sbxh_store_set_manifest(struct sbx_store *s, const char *key, const char *digest,
                            const char *run_as, sbx_error *err);
int sbxh_store_get_manifest(struct sbx_store *s, const char *key, char digest[65],
                            char run_as[SBX_USER_NAME_MAX + 1], bool *found,
                            sbx_error *err);
int sbxh_store_drop_manifest(struct sbx_store *s, const char *key, sbx_error *err);

/*
 * Last use and the paused mark of sessions (store/session_activity.c).
 * touch: last use = now, paused cleared (a use resumes). set_paused: the
 * mark; clearing it counts as a use. get: *found false when the session
 * has no row (made before schema 7, or never used since). drop: forget.
 */
struct sbx_store_activity {
    int64_t last_used_at; /* ms */
    bool paused;
};
int sbxh_store_activity_touch(struct sbx_store *s, const char *key, sbx_error *err);
int sbxh_store_activity_set_paused(struct sbx_store *s, const char *key, bool paused,
                                   sbx_error *err);
int sbxh_store_activity_get(struct sbx_store *s, const char *key,
                            struct sbx_store_activity *out, bool *found, sbx_error *err);
int sbxh_store_activity_drop(struct sbx_store *s, const char *key, sbx_error *err);

/*
 * Session locks (store/session_activity.c), held across processes and, on
 * PostgreSQL, machines, and dropped with their holder (a process that
 * dies, a connection that ends): SQLite, an OFD lock on a byte of a file
 * beside the database; PostgreSQL, a session-level advisory lock on a
 * connection of the lock's own. Each lock object is a holder of its own:
 * two in one process conflict like two processes do. One kind per use:
 *  - USE: commands hold it shared, the idle evictor tries it exclusive;
 *  - MEMORY: the memory stores' steps around commands (exclusive to
 *    refresh or write back, shared while a command runs);
 *  - KEY: a provider create or destroy of the key, exclusive (taken by
 *    sessions/key_lock.c on PostgreSQL only: on SQLite the workers are
 *    one machine's processes and libsbx's in-process key lock plus the
 *    intent suffice).
 * Each kind has numbers of its own (the kind in the bits above the key's),
 * so the three locks of one session never conflict with each other.
 * sbxh_store_lock_try changes the mode (UNLOCKED, SHARED, EXCLUSIVE)
 * without waiting: *got false (mode unchanged) when a conflicting holder
 * has it. EXCLUSIVE to SHARED never lets another exclusive holder in
 * between. A failed call (a lost connection) may have lost the lock: the
 * object then holds nothing. Close releases what it holds (NULL ignored).
 */
enum sbx_store_lock_kind {
    SBX_STORE_LOCK_USE = 0,
    SBX_STORE_LOCK_MEMORY = 1,
    SBX_STORE_LOCK_KEY = 2
};
enum sbx_store_lock_mode {
    SBX_STORE_UNLOCKED = 0,
    SBX_STORE_SHARED = 1,
    SBX_STORE_EXCLUSIVE = 2
};
struct sbx_store_lock;
int sbxh_store_lock_open(struct sbx_store *s, const char *key, int kind,
                         struct sbx_store_lock **out, sbx_error *err);
int sbxh_store_lock_try(struct sbx_store_lock *l, int mode, bool *got, sbx_error *err);
void sbxh_store_lock_close(struct sbx_store_lock *l);
/* Whether the store's session locks are held by a server (PostgreSQL:
 * shared by workers on many machines) rather than by file locks. */
bool sbxh_store_locks_on_server(struct sbx_store *s);

/*
 * A session's use lock (kind USE) taken in one call: never waits,
 * SBX_E_EXISTS when a conflicting holder has it. Release with
 * sbxh_store_use_unlock (NULL is ignored).
 */
struct sbx_store_use_lock;
int sbxh_store_use_lock(struct sbx_store *s, const char *key, bool exclusive,
                        struct sbx_store_use_lock **out, sbx_error *err);
void sbxh_store_use_unlock(struct sbx_store *s, struct sbx_store_use_lock *l);

/* In a claim's transaction: SBX_OK when the provider has fewer than max
 * sandboxes (bindings, intents, unclaimed pool members; one ready member
 * of `pool`, when given, not counted: the admission will claim it), else
 * SBX_E_UNAVAILABLE naming the provider and the limit. */
int sbxh_store_quota_check_tx(struct sbx_store *s, const char *provider, const char *pool,
                              int64_t max, sbx_error *err);

/* After an admission that counted on one of `pool`'s ready members found
 * none left to claim (another admission took it): in its own transaction,
 * SBX_OK when the provider's sandboxes, the caller's intent among them,
 * are at most max; else SBX_E_UNAVAILABLE (the caller drops its intent and
 * fails rather than create over the limit). */
/* The provider's sandboxes as max_sandboxes counts them (bindings,
 * intents, unclaimed pool members), outside any transaction: a pool refill
 * stops at the limit. */
int sbxh_store_quota_count(struct sbx_store *s, const char *provider, int64_t *n,
                           sbx_error *err);

int sbxh_store_quota_recheck(struct sbx_store *s, const char *provider, int64_t max,
                             sbx_error *err);

/* Writeback state of a session's memory attachment (store/memory_attachments.c). */
enum sbx_store_memory_state {
    SBX_STORE_MEMORY_CLEAN = 0,    /* the mount holds what was committed */
    SBX_STORE_MEMORY_DIRTY = 1,    /* a command may have changed it: write back */
    SBX_STORE_MEMORY_CONFLICT = 2  /* a writeback was refused: changes kept */
};

/* One attachment row: the mount was last loaded from store version
 * `baseline` (per-path preconditions are the heads at that version). */
struct sbx_store_memory_row {
    char slug[64];
    int access;     /* enum sbx_memory_access */
    int64_t baseline;
    int state;      /* enum sbx_store_memory_state */
};

/* Record a session's attachments (replacing any), all clean at baseline
 * -1 ("never loaded"). */
int sbxh_store_memory_set(struct sbx_store *s, const char *key,
                          const struct sbx_store_memory_row *rows, size_t n,
                          sbx_error *err);
/* The attachments of a session in slug order: *out malloc'd (NULL when
 * none), *n entries. */
int sbxh_store_memory_get(struct sbx_store *s, const char *key,
                          struct sbx_store_memory_row **out, size_t *n, sbx_error *err);
/* Update one attachment's baseline and state. */
int sbxh_store_memory_update(struct sbx_store *s, const char *key, const char *slug,
                             int64_t baseline, int state, sbx_error *err);
/* Forget a session's attachments. */
int sbxh_store_memory_drop(struct sbx_store *s, const char *key, sbx_error *err);
/* Keys of sessions with an attachment not clean, in key order; fn's
 * nonzero return stops. */
int sbxh_store_memory_unclean(struct sbx_store *s,
                              int (*fn)(void *ud, const char *key), void *ud,
                              sbx_error *err);

#endif /* SBX_HOST_STORE_H */
