/*
 * pools.c - warm pools: sandboxes made ahead of their sessions under
 * pool-owned member keys, claimed by a new session whose spec matches.
 *
 * Matching: a pool's spec is hashed with sbx_session_spec_hash exactly as a
 * session spec is; a session matches when its spec without manifest,
 * packages and snapshot (what is applied after create) has that hash and
 * it goes to the pool's provider. The session's binding records its full
 * spec hash, as a cold create would.
 *
 * Claim (sbxh_pool_claim): one store transaction hands a ready member
 * to the session's intent and records the member key as the session's
 * sandbox key; the member is attached with that key and checked with a
 * trivial command before anything else: a broken one is given back
 * (unclaimed into `checking`, so a crash leaves it to reconcile),
 * destroyed, and the next one tried; none left means a cold create. Then
 * the same steps as after a cold create (acquire.c runs them).
 *
 * Reconcile (sbx_pools_reconcile) and listing (sbx_pools_list) are here
 * too, apart from the sessions' reconcile pass.
 */
#include "sessions/pools.h"

#include "config/config.h"
#include "registry/provider.h"
#include "sessions/activity.h"
#include "sessions/memory_hooks.h"
#include "store/pools.h"

#include <openssl/rand.h>
#include <sbx/manifest.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Health check deadline (SBX_POOL_CHECK_TIMEOUT_MS overrides, for tests). */
#define CHECK_TIMEOUT_MS 10000

/* ------------------------------------------------------------------------ */
/* Pools at open                                                              */
/* ------------------------------------------------------------------------ */

static int cap_bit(const char *name, uint64_t *bit)
{
    for (int i = 0; i < 64; i++) {
        const char *n = sbx_cap_name(UINT64_C(1) << i);
        if (n && !strcmp(n, name)) {
            *bit = UINT64_C(1) << i;
            return 1;
        }
    }
    return 0;
}

/* The session spec a pool's members are created for. Targets point into
 * the config; *targets (malloc'd) holds the pointer arrays. */
static int pool_spec(const sbx_sessions *m, const struct sbx_config_pool *pl, uint64_t caps,
                     struct sbx_session_spec *spec, const char ***targets, sbx_error *err)
{
    memset(spec, 0, sizeof *spec);
    spec->size = sizeof *spec;
    spec->provider = pl->provider;
    spec->caps = caps;
    spec->limited_network = pl->limited_network;
    const char **v = calloc(pl->nallow + pl->nsetup_allow + 1, sizeof *v);
    if (!v)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < pl->nallow; i++)
        v[i] = pl->allow[i];
    for (size_t i = 0; i < pl->nsetup_allow; i++)
        v[pl->nallow + i] = pl->setup_allow[i];
    spec->allow = pl->nallow ? v : NULL;
    spec->nallow = pl->nallow;
    spec->setup_allow = pl->nsetup_allow ? v + pl->nallow : NULL;
    spec->nsetup_allow = pl->nsetup_allow;
    spec->ports = pl->ports;
    spec->nports = pl->nports;
    /* as acquire does for a session that declares no ports */
    const struct sbx_config *cfg = m->ctx->config;
    if (!spec->nports && cfg && cfg->nsession_ports) {
        spec->ports = cfg->session_ports;
        spec->nports = cfg->nsession_ports;
    }
    *targets = v;
    return SBX_OK;
}

int sbxh_pools_open(sbx_sessions *m, sbx_error *err)
{
    const struct sbx_config *cfg = m->ctx->config;
    if (!cfg || !cfg->npools)
        return SBX_OK;
    m->pools = calloc(cfg->npools, sizeof *m->pools);
    if (!m->pools)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < cfg->npools; i++) {
        const struct sbx_config_pool *pl = &cfg->pools[i];
        struct sbxh_pool *rt = &m->pools[m->npools++];
        rt->cfg = pl;
        sbx_provider *p;
        sbx_error why;
        if (sbx_provider_lookup(m->ctx, pl->provider, &p, &why) != SBX_OK)
            return sbx_error_set(err, SBX_E_CONFIG, "%s:%d: pools.%s: provider \"%s\": %s",
                                 pl->file, pl->line, pl->name, pl->provider, why.message);
        if (!(sbx_provider_info_caps(sbx_provider_get_info(p)) & SBX_CAP_POOL))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: pools.%s: provider \"%s\" does not declare the "
                                 "pool capability (its sandboxes cannot be made ahead "
                                 "of their session)",
                                 pl->file, pl->line, pl->name, pl->provider);
        for (size_t c = 0; c < pl->ncaps; c++) {
            uint64_t bit;
            if (!cap_bit(pl->caps[c], &bit))
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%d: pools.%s.caps: unknown capability "
                                     "\"%.64s\"",
                                     pl->file, pl->line, pl->name, pl->caps[c]);
            rt->caps |= bit;
        }
        struct sbx_session_spec spec;
        const char **targets;
        int rc = pool_spec(m, pl, rt->caps, &spec, &targets, err);
        if (rc == SBX_OK) {
            rc = sbx_session_spec_hash(&spec, rt->spec_hash, &why);
            free(targets);
            if (rc != SBX_OK)
                return sbx_error_set(err, SBX_E_CONFIG, "%s:%d: pools.%s: %s",
                                     pl->file, pl->line, pl->name, why.message);
        }
        if (rc != SBX_OK)
            return rc;
        uint64_t need = rt->caps | (spec.limited_network ? SBX_CAP_EGRESS : 0) |
                        (spec.nports ? SBX_CAP_PORTS : 0);
        if (sbx_provider_admit(p, need, &why) != SBX_OK)
            return sbx_error_set(err, SBX_E_CONFIG, "%s:%d: pools.%s: %s", pl->file,
                                 pl->line, pl->name, why.message);
    }
    return SBX_OK;
}

void sbxh_pools_close(sbx_sessions *m)
{
    free(m->pools);
    m->pools = NULL;
    m->npools = 0;
}

static const struct sbxh_pool *pool_named(const sbx_sessions *m, const char *name)
{
    for (size_t i = 0; i < m->npools; i++)
        if (!strcmp(m->pools[i].cfg->name, name))
            return &m->pools[i];
    return NULL;
}

const struct sbxh_pool *sbxh_pool_match(sbx_sessions *m, sbx_provider *p,
                                        const struct sbx_session_spec *spec)
{
    if (!m->npools)
        return NULL;
    const char *pname = sbx_provider_info_name(sbx_provider_get_info(p));
    struct sbx_session_spec shape;
    memset(&shape, 0, sizeof shape);
    if (spec)
        shape = *spec;
    shape.size = sizeof shape;
    shape.provider = NULL;
    shape.manifest = NULL;
    shape.packages = NULL;
    shape.npackages = 0;
    shape.snapshot = NULL;
    char hash[SBX_KEY_HASH_LEN + 1];
    sbx_error ignored;
    if (sbx_session_spec_hash(&shape, hash, &ignored) != SBX_OK)
        return NULL;
    for (size_t i = 0; i < m->npools; i++)
        if (m->pools[i].cfg->size && !strcmp(m->pools[i].cfg->provider, pname) &&
            !strcmp(m->pools[i].spec_hash, hash))
            return &m->pools[i];
    return NULL;
}


/* ------------------------------------------------------------------------ */
/* Health check                                                               */
/* ------------------------------------------------------------------------ */

static int64_t check_timeout_ms(void)
{
    const char *v = getenv("SBX_POOL_CHECK_TIMEOUT_MS");
    long long ms = v && *v ? strtoll(v, NULL, 10) : 0;
    return ms > 0 ? ms : CHECK_TIMEOUT_MS;
}

/* How recent a member's last passed health check must be for a claim to
 * skip its own (SBX_POOL_CHECK_FRESH_MS; 0 or unset, the default: every
 * claim checks). With it set, refills check before `ready` too, so a ready
 * member's updated_at is always the time of its last passed check. */
static int64_t check_fresh_ms(void)
{
    const char *v = getenv("SBX_POOL_CHECK_FRESH_MS");
    long long ms = v && *v ? strtoll(v, NULL, 10) : 0;
    return ms > 0 ? ms : 0;
}

/* A trivial command must run and exit 0 within the deadline. */
static int health_check(sbx_handle *h, sbx_cancel *cancel, sbx_error *err)
{
    static const char *const argv[] = {"true", NULL};
    struct sbx_exec_args a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.argv = argv;
    a.timeout_ms = check_timeout_ms();
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    int rc = sbx_exec(h, &a, &r, cancel, err);
    if (rc == SBX_OK && (r.exit_code != 0 || r.timed_out))
        rc = sbx_error_set(err, SBX_E_UNAVAILABLE,
                           "health check: `true` %s (exit %d, signal %d)",
                           r.timed_out ? "timed out" : "failed", r.exit_code,
                           r.term_signal);
    return rc;
}

/* Attach to a member under its own key and check it (unless check is
 * false: the attach alone, which on docker still proves the container is
 * ours and running and that its agent answers). */
static int attach_checked(sbx_provider *p, const struct sbx_pool_member *pm, bool check,
                          sbx_cancel *cancel, sbx_handle **out, sbx_error *err)
{
    int rc = sbx_attach(p, pm->member_key, pm->external_id, cancel, out, err);
    if (rc != SBX_OK || !check)
        return rc;
    if ((rc = health_check(*out, cancel, err)) != SBX_OK) {
        sbx_release(*out);
        *out = NULL;
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Claim                                                                      */
/* ------------------------------------------------------------------------ */

int sbxh_pool_claim(sbx_sessions *m, sbx_provider *p, const struct sbxh_pool *pool,
                    const char *key, const struct sbx_session_spec *spec, sbx_cancel *cancel,
                    sbx_handle **out, struct sbx_session_egress *egp, char *member_key,
                    bool *claimed, sbx_error *err)
{
    *claimed = false;
    int rc = spec && spec->manifest
                 ? sbxh_store_set_manifest(m->store, key, sbx_manifest_digest(spec->manifest),
                                           sbx_manifest_run_as(spec->manifest), err)
                 : sbxh_store_drop_manifest(m->store, key, err);
    if (rc == SBX_OK)
        rc = sbxh_session_memory_record(m, key, spec, err);
    if (rc != SBX_OK)
        return rc;
    for (;;) {
        struct sbx_pool_member pm;
        bool found = false;
        if ((rc = sbxh_store_pool_claim(m->store, pool->cfg->name, key, m->owner, &pm,
                                        &found, err)) != SBX_OK || !found)
            return rc;
        sbxh_session_crash_point(m, "pool-after-claim");
        sbx_handle *h = NULL;
        sbx_error why;
        /* A member checked within the freshness window (reconcile's check
         * or its refill's) is attached only: one exec less before the
         * session's first command. */
        int64_t fresh = check_fresh_ms();
        rc = attach_checked(p, &pm, fresh == 0 || pm.age_ms >= fresh, cancel, &h, &why);
        if (rc != SBX_OK) {
            /* Broken: never handed out. Given back as `checking` first, so
             * that a crash from here leaves it to reconcile. */
            if ((rc = sbxh_store_pool_unclaim(m->store, key, m->owner, pm.member_key,
                                              err)) != SBX_OK) {
                sbxh_pool_member_clear(&pm);
                return rc;
            }
            sbx_error ignored;
            if (sbxh_session_destroy_resource(m, p, pm.member_key, pm.external_id, cancel,
                                              &ignored) == SBX_OK)
                sbxh_store_pool_delete(m->store, pm.member_key, NULL);
            sbxh_pool_member_clear(&pm);
            if (sbx_cancel_fired(cancel))
                return sbx_error_set(err, SBX_E_CANCELLED, "cancelled");
            continue;
        }
        struct sbx_session_egress eg;
        if ((rc = sbxh_session_egress_init(&eg, spec, err)) != SBX_OK) {
            sbx_release(h);
            sbxh_pool_member_clear(&pm);
            return rc;
        }
        /* The member enforces the pool's allowlists; packages may need
         * their registries while they install. */
        if (eg.limited && spec->npackages &&
            (rc = sbx_egress_set(h, &eg.setup, cancel, err)) != SBX_OK) {
            sbxh_session_egress_free(&eg);
            sbx_release(h);
            sbxh_pool_member_clear(&pm);
            return rc;
        }
        *claimed = true;
        *out = h;
        *egp = eg;
        snprintf(member_key, SBX_STORE_KEY_MAX + 1, "%s", pm.member_key);
        sbxh_pool_member_clear(&pm);
        return SBX_OK;
    }
}

/* ------------------------------------------------------------------------ */
/* Reconcile                                                                  */
/* ------------------------------------------------------------------------ */

struct pass {
    sbx_sessions *m;
    sbx_cancel *cancel;
    struct sbx_pool_report *rep;
    int first_rc;
    sbx_error *err;
};

static void failed(struct pass *ps, int rc, const sbx_error *why)
{
    ps->rep->failures++;
    if (ps->first_rc == SBX_OK) {
        ps->first_rc = rc;
        sbx_error_set(ps->err, rc, "%s",
                      why->message[0] ? why->message : sbx_strerror((sbx_status)rc));
    }
}

/* Destroy a member the caller owns (taken) and drop its row. A member
 * whose reference was never recorded is found by its idempotent create. */
static int destroy_member(struct pass *ps, const struct sbx_pool_member *pm,
                          sbx_error *err)
{
    sbx_provider *p;
    int rc = sbxh_session_provider(ps->m, pm->member_key, pm->provider, &p, err);
    if (rc != SBX_OK)
        return rc;
    char ref[SBX_REF_MAX];
    if (pm->external_id) {
        snprintf(ref, sizeof ref, "%s", pm->external_id);
    } else {
        struct sbx_create_options copts;
        memset(&copts, 0, sizeof copts);
        copts.size = sizeof copts;
        copts.spec_hash = pm->spec_hash;
        sbx_handle *h;
        if ((rc = sbxh_session_create(ps->m, p, NULL, pm->member_key, &copts, ps->cancel, &h,
                                      err)) != SBX_OK)
            return rc;
        snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
        sbx_release(h);
        if ((rc = sbxh_store_pool_set(ps->m->store, pm->member_key, ps->m->owner, ref, false,
                                      err)) != SBX_OK)
            return rc;
    }
    sbxh_session_crash_point(ps->m, "pool-during-destroy");
    rc = sbxh_session_destroy_resource(ps->m, p, pm->member_key, ref, ps->cancel, err);
    if (rc == SBX_OK)
        rc = sbxh_store_pool_delete(ps->m->store, pm->member_key, err);
    return rc;
}

/* Take a member out of `from` for this worker, then destroy it; counts it. */
static void take_and_destroy(struct pass *ps, const struct sbx_pool_member *pm,
                             size_t *counter)
{
    bool taken = false;
    sbx_error why;
    int rc = sbxh_store_pool_take(ps->m->store, pm->member_key, pm->state, pm->owner,
                                  "checking", ps->m->owner, &taken, &why);
    if (rc == SBX_OK && !taken)
        return; /* claimed, checked or cleaned by another worker meanwhile */
    if (rc == SBX_OK)
        rc = destroy_member(ps, pm, &why);
    if (rc == SBX_OK)
        (*counter)++;
    else
        failed(ps, rc, &why);
}

/* A ready member: check it (taken into `checking` so no claim gets it
 * meanwhile), back to ready or destroyed. Returns true when it is ready. */
static bool check_member(struct pass *ps, const struct sbx_pool_member *pm)
{
    bool taken = false;
    sbx_error why;
    int rc = sbxh_store_pool_take(ps->m->store, pm->member_key, "ready", NULL, "checking",
                                  ps->m->owner, &taken, &why);
    if (rc != SBX_OK) {
        failed(ps, rc, &why);
        return false;
    }
    if (!taken)
        return false; /* claimed meanwhile */
    sbxh_session_crash_point(ps->m, "pool-during-check");
    sbx_provider *p;
    sbx_handle *h = NULL;
    rc = sbxh_session_provider(ps->m, pm->member_key, pm->provider, &p, &why);
    if (rc == SBX_OK)
        rc = attach_checked(p, pm, true, ps->cancel, &h, &why);
    if (rc == SBX_OK) {
        sbx_release(h);
        rc = sbxh_store_pool_set(ps->m->store, pm->member_key, ps->m->owner, NULL, true,
                                 &why);
        if (rc == SBX_OK) {
            ps->rep->checked++;
            return true;
        }
        failed(ps, rc, &why);
        return false;
    }
    if ((rc = destroy_member(ps, pm, &why)) == SBX_OK)
        ps->rep->replaced++;
    else
        failed(ps, rc, &why);
    return false;
}

/* True when the pool's provider has max_sandboxes sandboxes already (or
 * they cannot be counted: the failure is recorded): no member is made. */
static bool at_quota(struct pass *ps, const struct sbxh_pool *pool)
{
    sbx_provider *p;
    sbx_error why;
    int rc = sbx_provider_lookup(ps->m->ctx, pool->cfg->provider, &p, &why);
    int64_t max = rc == SBX_OK ? sbxh_session_max_sandboxes(ps->m, p) : 0;
    int64_t n = 0;
    if (rc == SBX_OK && max > 0)
        rc = sbxh_store_quota_count(ps->m->store, pool->cfg->provider, &n, &why);
    if (rc != SBX_OK) {
        failed(ps, rc, &why);
        return true;
    }
    return max > 0 && n >= max;
}

/* Make one member of pool: row first, then create, then ready. */
static int refill_one(struct pass *ps, const struct sbxh_pool *pool, sbx_error *err)
{
    sbx_sessions *m = ps->m;
    const struct sbx_config_pool *pl = pool->cfg;
    sbx_provider *p;
    int rc = sbx_provider_lookup(m->ctx, pl->provider, &p, err);
    if (rc != SBX_OK)
        return rc;
    unsigned char rnd[16];
    if (RAND_bytes(rnd, sizeof rnd) != 1)
        return sbx_error_set(err, SBX_E_INTERNAL, "no random bytes for a member key");
    char key[128];
    int n = snprintf(key, sizeof key, "pool:%s:", pl->name);
    for (size_t i = 0; i < sizeof rnd; i++)
        n += snprintf(key + n, sizeof key - (size_t)n, "%02x", rnd[i]);
    if ((rc = sbxh_store_pool_insert(m->store, key, pl->name, pl->provider, pool->spec_hash,
                                     m->owner, err)) != SBX_OK)
        return rc;
    sbxh_session_crash_point(m, "pool-after-insert");
    struct sbx_session_spec spec;
    const char **targets;
    if ((rc = pool_spec(m, pl, pool->caps, &spec, &targets, err)) != SBX_OK)
        return rc;
    struct sbx_session_egress eg;
    if ((rc = sbxh_session_egress_init(&eg, &spec, err)) != SBX_OK) {
        free(targets);
        return rc;
    }
    struct sbx_create_options copts;
    memset(&copts, 0, sizeof copts);
    copts.size = sizeof copts;
    copts.spec_hash = pool->spec_hash;
    copts.caps_required = pool->caps;
    copts.egress = eg.limited ? &eg.setup : NULL;
    uint16_t ports[SBX_SESSION_PORTS_MAX + 1];
    for (size_t i = 0; i < spec.nports && i < SBX_SESSION_PORTS_MAX; i++)
        ports[i] = spec.ports[i];
    ports[spec.nports < SBX_SESSION_PORTS_MAX ? spec.nports : SBX_SESSION_PORTS_MAX] = 0;
    copts.ports = spec.nports ? ports : NULL;
    sbx_handle *h = NULL;
    rc = sbxh_session_create(m, p, NULL, key, &copts, ps->cancel, &h, err);
    sbxh_session_egress_free(&eg);
    free(targets);
    sbx_error ignored;
    if (rc != SBX_OK) {
        /* nothing recorded: the idempotent create finds what exists */
        char hash[SBX_KEY_HASH_LEN + 1];
        memcpy(hash, pool->spec_hash, sizeof hash);
        struct sbx_pool_member pm = {.member_key = key,
                                     .provider = pl->provider,
                                     .spec_hash = hash};
        if (destroy_member(ps, &pm, &ignored) != SBX_OK)
            ps->rep->failures++;
        return rc;
    }
    sbxh_session_crash_point(m, "pool-after-create");
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    /* With a freshness window a claim may trust `ready`: check first. */
    rc = check_fresh_ms() > 0 ? health_check(h, ps->cancel, err) : SBX_OK;
    sbx_release(h);
    if (rc != SBX_OK) {
        sbxh_session_destroy_resource(m, p, key, ref, ps->cancel, &ignored);
        sbxh_store_pool_delete(m->store, key, NULL);
        return rc;
    }
    rc = sbxh_store_pool_set(m->store, key, m->owner, ref, true, err);
    if (rc != SBX_OK) {
        sbxh_session_destroy_resource(m, p, key, ref, ps->cancel, &ignored);
        sbxh_store_pool_delete(m->store, key, NULL);
        return rc;
    }
    sbxh_session_crash_point(m, "pool-after-ready");
    ps->rep->created++;
    return SBX_OK;
}

/* Whether a row belongs to a configured pool with the same provider and
 * spec (else: its pool was removed or respecified). */
static const struct sbxh_pool *current_pool(const sbx_sessions *m,
                                            const struct sbx_pool_member *pm)
{
    const struct sbxh_pool *pool = pool_named(m, pm->pool);
    if (!pool || strcmp(pool->cfg->provider, pm->provider) ||
        strcmp(pool->spec_hash, pm->spec_hash))
        return NULL;
    return pool;
}

static bool stale(const sbx_sessions *m, const struct sbx_pool_member *pm)
{
    /* this worker's own rows too once their lease ran out (a long-lived
     * reconcile --watch whose earlier refill failed half-way) */
    struct sbx_intent in = {.owner = pm->owner, .age_ms = pm->age_ms};
    return sbxh_session_intent_stale(m, &in, m->lease_ms) || pm->age_ms >= m->lease_ms;
}

SBX_API int sbx_pools_reconcile(sbx_sessions *m, sbx_cancel *cancel,
                                struct sbx_pool_report *report, sbx_error *err)
{
    sbx_error_clear(err);
    struct sbx_pool_report rep;
    memset(&rep, 0, sizeof rep);
    rep.size = sizeof rep;
    struct pass ps = {m, cancel, &rep, SBX_OK, err};
    struct sbx_pool_member *v = NULL;
    size_t n = 0;
    sbx_error why;
    int rc = sbxh_store_pool_list(m->store, &v, &n, &why);
    if (rc != SBX_OK) {
        sbx_error_set(err, rc, "%s", why.message);
        goto out;
    }
    size_t *live = calloc(m->npools + 1, sizeof *live);
    if (!live) {
        sbxh_pool_members_free(v, n);
        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        goto out;
    }
    /* newest last (listed by age): members past a pool's size are the
     * newest ready ones */
    for (size_t i = 0; i < n && !sbx_cancel_fired(cancel); i++) {
        const struct sbx_pool_member *pm = &v[i];
        const struct sbxh_pool *pool = current_pool(m, pm);
        size_t idx = pool ? (size_t)(pool - m->pools) : m->npools;
        if (!strcmp(pm->state, "claimed")) {
            /* bookkeeping left after the claimant published or its intent
             * was cleaned (its sandbox went with it) */
            struct sbx_intent in = {0};
            int irc = pm->claimed_by
                          ? sbxh_store_get_intent(m->store, pm->claimed_by, &in, &why)
                          : SBX_E_NOT_FOUND;
            sbxh_intent_clear(&in);
            if (irc == SBX_E_NOT_FOUND)
                sbxh_store_pool_delete(m->store, pm->member_key, NULL);
            continue;
        }
        if (strcmp(pm->state, "ready") != 0) { /* creating, checking */
            if (stale(m, pm))
                take_and_destroy(&ps, pm, &rep.cleaned);
            else if (pool)
                live[idx]++; /* someone's refill or check in progress */
            continue;
        }
        if (!pool || live[idx] >= pool->cfg->size) {
            take_and_destroy(&ps, pm, &rep.removed);
            continue;
        }
        if (check_member(&ps, pm))
            live[idx]++;
    }
    for (size_t k = 0; k < m->npools && !sbx_cancel_fired(cancel); k++)
        while (live[k] < m->pools[k].cfg->size && !sbx_cancel_fired(cancel)) {
            if (at_quota(&ps, &m->pools[k])) {
                rep.held++;
                break; /* members count against max_sandboxes */
            }
            if ((rc = refill_one(&ps, &m->pools[k], &why)) != SBX_OK) {
                failed(&ps, rc, &why);
                break; /* this pool's backend is failing: try the next pass */
            }
            live[k]++;
        }
    free(live);
    sbxh_pool_members_free(v, n);
    rc = sbx_cancel_fired(cancel) ? sbx_error_set(err, SBX_E_CANCELLED, "cancelled")
                                  : ps.first_rc;
out:
    if (report) {
        uint32_t size = report->size;
        if (size >= sizeof(uint32_t)) {
            rep.size = size;
            memcpy(report, &rep, size < sizeof rep ? size : sizeof rep);
        }
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Listing                                                                    */
/* ------------------------------------------------------------------------ */

SBX_API size_t sbx_config_pool_count(const sbx_ctx *ctx)
{
    return ctx && ctx->config ? ctx->config->npools : 0;
}

SBX_API int sbx_pools_list(sbx_sessions *m, sbx_pool_info_fn pool_fn,
                           sbx_pool_member_fn member_fn, void *ud, sbx_error *err)
{
    sbx_error_clear(err);
    for (size_t i = 0; pool_fn && i < m->npools; i++) {
        struct sbx_pool_info info = {m->pools[i].cfg->name, m->pools[i].cfg->provider,
                                     m->pools[i].spec_hash, m->pools[i].cfg->size};
        int stop = pool_fn(ud, &info);
        if (stop)
            return stop;
    }
    if (!member_fn)
        return SBX_OK;
    struct sbx_pool_member *v = NULL;
    size_t n = 0;
    int rc = sbxh_store_pool_list(m->store, &v, &n, err);
    if (rc != SBX_OK)
        return rc;
    for (size_t i = 0; i < n; i++) {
        struct sbx_pool_member_info info = {
            .pool = v[i].pool,
            .provider = v[i].provider,
            .member_key = v[i].member_key,
            .external_id = v[i].external_id,
            .state = v[i].state,
            .claimed_by = v[i].claimed_by,
            .created_at = v[i].created_at,
            .configured = current_pool(m, &v[i]) != NULL,
        };
        int stop = member_fn(ud, &info);
        if (stop) {
            rc = stop;
            break;
        }
    }
    sbxh_pool_members_free(v, n);
    return rc;
}
