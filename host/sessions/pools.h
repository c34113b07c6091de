/*
 * pools.h - warm pools in the session manager (sessions/pools.c): the
 * configured pools resolved at open, matching a session's spec to a pool,
 * and provisioning a session from a claimed member. Reconcile and listing
 * are the public sbx_pools_* calls (sbx/session.h).
 */
#ifndef SBX_HOST_SESSION_POOLS_H
#define SBX_HOST_SESSION_POOLS_H

#include "sessions/internal.h"

struct sbx_config_pool;

/* A configured pool as the manager uses it. */
struct sbxh_pool {
    const struct sbx_config_pool *cfg; /* borrowed from the context's config */
    char spec_hash[SBX_KEY_HASH_LEN + 1];
    uint64_t caps;
};

/* Resolve and check the configured pools (provider enabled and declaring
 * SBX_CAP_POOL, capability names known): SBX_E_CONFIG naming the pool, its
 * file:line and the provider. Fills m->pools. */
int sbxh_pools_open(sbx_sessions *m, sbx_error *err);
void sbxh_pools_close(sbx_sessions *m);

/* The pool a new session of provider p with this (defaulted) spec
 * matches, or NULL: same provider, and the spec without manifest, packages
 * and snapshot hashes to the pool's spec hash. */
const struct sbxh_pool *sbxh_pool_match(sbx_sessions *m, sbx_provider *p,
                                        const struct sbx_session_spec *spec);

/*
 * Claim a healthy ready member of pool for session key (whose intent the
 * manager holds): claim, health-check (attach + a trivial command; a
 * broken member is destroyed and the next one tried). On *claimed, *out is
 * the member's handle, *eg the session's egress policies (setup already in
 * force when packages follow), member_key (SBX_STORE_KEY_MAX + 1 bytes)
 * its key: the caller runs sbxh_session_provision_rest. *claimed false
 * (SBX_OK) when the pool had no healthy ready member: create cold. Never
 * waits for a refill.
 */
int sbxh_pool_claim(sbx_sessions *m, sbx_provider *p, const struct sbxh_pool *pool,
                    const char *key, const struct sbx_session_spec *spec, sbx_cancel *cancel,
                    sbx_handle **out, struct sbx_session_egress *eg, char *member_key,
                    bool *claimed, sbx_error *err);

#endif
