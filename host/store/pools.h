/*
 * pools.h - warm pool members in the store (table pool_members) and the
 * key a session's sandbox was created under when it came from a pool
 * (table session_sandboxes). Internal to libsbx; the session manager's
 * pool code (sessions/pools.c) is the only user.
 *
 * A member's life: inserted as `creating` (owner: the refilling worker's
 * token) before any provider call; its reference recorded once create
 * returned; `ready` when usable. A health check moves it `ready` ->
 * `checking` -> `ready` (or deletes it); a claim moves it `ready` ->
 * `claimed` and, in the same transaction, makes it the claimant's: the
 * session's provisioning intent gets the member's reference and the
 * session's sandbox key becomes the member key. A `creating` or
 * `checking` row whose owner is gone is the reconciler's to destroy.
 *
 * Conventions as in store/store.h (sbx_status returns, err filled, strings
 * borrowed, out-structs owned by the caller and released with
 * sbxh_pool_member_clear).
 */
#ifndef SBX_HOST_STORE_POOLS_H
#define SBX_HOST_STORE_POOLS_H

#include "store/store.h"

/* Most member rows one listing returns. */
#define SBX_STORE_POOL_LIST_MAX 10000

struct sbx_pool_member {
    char *member_key;
    char *pool;
    char *provider;
    char *spec_hash;
    char *external_id; /* NULL until create returned */
    char *state;       /* "creating" | "ready" | "checking" | "claimed" */
    char *owner;       /* the worker creating or checking it */
    char *claimed_by;  /* the claiming session's key, or NULL */
    int64_t created_at, updated_at; /* ms */
    int64_t age_ms;    /* store clock minus updated_at when read */
};

void sbxh_pool_member_clear(struct sbx_pool_member *pm);
void sbxh_pool_members_free(struct sbx_pool_member *v, size_t n);

/* Insert a member in state creating. SBX_E_EXISTS when the key is taken. */
int sbxh_store_pool_insert(struct sbx_store *s, const char *member_key, const char *pool,
                           const char *provider, const char *spec_hash, const char *owner,
                           sbx_error *err);

/* Record the reference of a member the caller owns (creating or checking),
 * and when ready is set make it ready. SBX_E_DENIED when the row is not
 * the caller's in such a state, SBX_E_NOT_FOUND when it is gone. */
int sbxh_store_pool_set(struct sbx_store *s, const char *member_key, const char *owner,
                        const char *external_id, bool ready, sbx_error *err);

/* Take a member for the caller when it is in state `from` and (when
 * seen_owner is not NULL) still owned by seen_owner: state becomes `to`,
 * owner becomes owner. *taken tells whether it happened (a conditional
 * update: exactly one of racing callers takes it). */
int sbxh_store_pool_take(struct sbx_store *s, const char *member_key, const char *from,
                         const char *seen_owner, const char *to, const char *owner,
                         bool *taken, sbx_error *err);

/* Delete a member row (any state). Not there is fine. */
int sbxh_store_pool_delete(struct sbx_store *s, const char *member_key, sbx_error *err);

/* Every member (of every pool, configured or not), by pool then age.
 * *out malloc'd, free with sbxh_pool_members_free. */
int sbxh_store_pool_list(struct sbx_store *s, struct sbx_pool_member **out, size_t *n,
                         sbx_error *err);

/*
 * Claim the oldest ready member of `pool` for session_key, whose
 * provisioning intent `owner` holds, in one transaction: the member becomes
 * claimed (claimed_by = session_key), the intent gets the member's
 * reference (step "pool"), and the session's sandbox key becomes the member
 * key. Exactly one of N racing claimants gets a given member (PostgreSQL:
 * SELECT ... FOR UPDATE SKIP LOCKED, then a conditional UPDATE; SQLite: the
 * database write lock of BEGIN IMMEDIATE). *found false (SBX_OK) when the
 * pool has no ready member. SBX_E_DENIED when the intent is not the
 * caller's. out receives the claimed member.
 */
int sbxh_store_pool_claim(struct sbx_store *s, const char *pool, const char *session_key,
                          const char *owner, struct sbx_pool_member *out, bool *found,
                          sbx_error *err);

/*
 * Undo a claim whose member turned out broken, in one transaction: the
 * member goes back to state checking, owned by the caller (who destroys it
 * and deletes the row next; a crash leaves it to reconcile), the intent's
 * reference is cleared (step back to "claimed") and so is the session's
 * sandbox key. SBX_E_DENIED
 * when the intent is not the caller's.
 */
int sbxh_store_pool_unclaim(struct sbx_store *s, const char *session_key,
                            const char *owner, const char *member_key, sbx_error *err);

/* The key the session's sandbox was created under: *found false when it
 * was created under the session's own key. out holds SBX_STORE_KEY_MAX+1. */
int sbxh_store_sandbox_key(struct sbx_store *s, const char *session_key, char *out,
                           bool *found, sbx_error *err);

/* Forget the session's sandbox key (none is fine). */
int sbxh_store_drop_sandbox_key(struct sbx_store *s, const char *session_key,
                                sbx_error *err);

#endif
