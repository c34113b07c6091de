/*
 * acquire.c - acquire (ensure) and attach (acquire-existing).
 *
 * Provisioning order, so that a crash at any point leaves something the
 * reconciler can clean: claim the intent (written before any provider
 * call), create, record the reference on the intent, apply the manifest,
 * install packages, restore a snapshot, publish the binding (which drops
 * the intent in the same transaction).
 */
#include "api/handle.h"
#include "clock.h"
#include "registry/provider.h"

#include <sbx/manifest.h>
#include "config/config.h"
#include "sessions/activity.h"
#include "config/manifest_internal.h"
#include "sessions/internal.h"
#include "sessions/memory_hooks.h"
#include "sessions/pools.h"
#include "store/pools.h"
#include "base/struct_size.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Polling of a worker that holds the intent: start fast (a local create
 * takes about a millisecond), back off to this. */
#define POLL_FIRST_MS 5
#define POLL_MAX_MS 200

static void fill_info(struct sbx_acquire_info *info, const char *provider,
                      const char *recorded, const char *wanted, bool check)
{
    if (!info)
        return;
    snprintf(info->provider, sizeof info->provider, "%s", provider);
    snprintf(info->recorded_spec_hash, sizeof info->recorded_spec_hash, "%s",
             recorded ? recorded : "");
    info->spec_changed = check && (!recorded || strcmp(recorded, wanted) != 0);
}

/* Attach to a published binding. A resource that is gone is reported as
 * lost, never replaced. */
static int attach_binding(sbx_sessions *m, const struct sbx_binding *b,
                          sbx_cancel *cancel, sbx_handle **out, sbx_error *err)
{
    char label[13];
    sbxh_session_label(b->session_key, label);
    if (b->deleting)
        return sbx_error_set(err, SBX_E_DENIED,
                             "session %s is being deleted", label);
    sbx_provider *p;
    int rc = sbxh_session_provider(m, b->session_key, b->provider, &p, err);
    if (rc != SBX_OK)
        return rc;
    /* The run_as of the session's manifest, recorded when it was
     * provisioned: every handle of the session acts as it. */
    char digest[65], run_as[SBX_USER_NAME_MAX + 1];
    bool found;
    rc = sbxh_store_get_manifest(m->store, b->session_key, digest, run_as, &found, err);
    if (rc != SBX_OK)
        return rc;
    char skey_buf[SBX_STORE_KEY_MAX + 1];
    const char *skey;
    if ((rc = sbxh_session_sandbox_key(m, b->session_key, skey_buf, &skey, err)) != SBX_OK)
        return rc;
    sbx_error why;
    rc = sbx_attach(p, skey, b->external_id, cancel, out, &why);
    if (rc == SBX_OK && run_as[0] && sbx_handle_set_user(*out, run_as, &why) != SBX_OK) {
        sbx_release(*out);
        *out = NULL;
        return sbx_error_set(err, why.status, "session %s: run_as %s: %s", label, run_as,
                             why.message);
    }
    if (rc == SBX_E_NOT_FOUND)
        return sbx_error_set(err, SBX_E_NOT_FOUND,
                             "session %s: its sandbox (provider \"%s\", reference "
                             "%s) is lost and will not be recreated; delete the "
                             "session to start afresh (%s)",
                             label, b->provider, b->external_id, why.message);
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "session %s: %s", label, why.message);
    if ((rc = sbxh_session_memory_hook(m, b->session_key, *out, err)) != SBX_OK ||
        (rc = sbxh_session_activity_hook(m, b->session_key, *out, err)) != SBX_OK) {
        sbx_release(*out);
        *out = NULL;
    }
    return rc;
}

SBX_API int sbx_session_attach(sbx_sessions *m, const char *session_key,
                               sbx_cancel *cancel, sbx_handle **out,
                               sbx_error *err)
{
    sbx_error_clear(err);
    if (!session_key || !*session_key)
        return sbx_error_set(err, SBX_E_INVALID, "session key is empty");
    struct sbx_binding b = {0};
    int rc = sbxh_store_get_binding(m->store, session_key, &b, err);
    if (rc == SBX_E_NOT_FOUND) {
        char label[13];
        sbxh_session_label(session_key, label);
        return sbx_error_set(err, SBX_E_NOT_FOUND, "session %s has no sandbox", label);
    }
    if (rc == SBX_OK)
        rc = attach_binding(m, &b, cancel, out, err);
    sbxh_binding_clear(&b);
    return rc;
}

SBX_API int sbx_session_state(sbx_sessions *m, const char *session_key,
                              struct sbx_session_state *out, sbx_error *err)
{
    sbx_error_clear(err);
    if (!m || !session_key || !*session_key || !out)
        return sbx_error_set(err, SBX_E_INVALID, "session state: no manager, key or output");
    struct sbx_session_state given;
    if (!sbx_struct_in(&given, sizeof given, out, sizeof given.size))
        return sbx_error_set(err, SBX_E_INVALID, "struct sbx_session_state: size is not set");
    struct sbx_session_state st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    struct sbx_binding b = {0};
    int rc = sbxh_store_get_binding(m->store, session_key, &b, err);
    if (rc == SBX_E_NOT_FOUND) {
        char label[13];
        sbxh_session_label(session_key, label);
        return sbx_error_set(err, SBX_E_NOT_FOUND, "session %s has no sandbox", label);
    }
    if (rc != SBX_OK)
        return rc;
    snprintf(st.provider, sizeof st.provider, "%s", b.provider);
    snprintf(st.reference, sizeof st.reference, "%s", b.external_id);
    snprintf(st.spec_hash, sizeof st.spec_hash, "%s", b.spec_hash ? b.spec_hash : "");
    st.created_at = b.created_at;
    st.deleting = b.deleting;
    sbxh_session_activity_of(m, session_key, b.created_at, &st.paused, &st.last_used_at);
    sbxh_binding_clear(&b);
    bool found = false;
    rc = sbxh_store_get_manifest(m->store, session_key, st.manifest_digest, st.run_as,
                                 &found, err);
    if (rc != SBX_OK)
        return rc;
    sbx_struct_out(out, &st, sizeof st);
    return SBX_OK;
}

SBX_API int sbx_session_resume(sbx_sessions *m, const char *session_key,
                               const sbx_manifest *manifest, sbx_cancel *cancel,
                               sbx_handle **out, sbx_error *err)
{
    struct sbx_session_state st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    int rc = sbx_session_state(m, session_key, &st, err);
    if (rc != SBX_OK)
        return rc;
    char label[13];
    sbxh_session_label(session_key, label);
    const char *given = manifest ? sbx_manifest_digest(manifest) : "";
    if (strcmp(given, st.manifest_digest) != 0 &&
        !(manifest && strcmp(manifest->text_digest, st.manifest_digest) == 0)) {
        if (!st.manifest_digest[0])
            return sbx_error_set(err, SBX_E_DENIED,
                                 "session %s was provisioned without a manifest: resume "
                                 "it without one",
                                 label);
        return sbx_error_set(err, SBX_E_DENIED,
                             "session %s was provisioned with manifest %.12s; %s: resume "
                             "refused (pass the session's trusted manifest)",
                             label, st.manifest_digest,
                             manifest ? "this manifest differs" : "none was given");
    }
    /* A paused sandbox is resumed here, explicitly, on the handle the
     * caller gets (one attach: the provider's attach already resumes a
     * paused sandbox, its resume is then a no-op; this makes `sbx resume`
     * the way to wake one whatever the provider's attach does). */
    bool paused;
    int64_t last_used;
    sbxh_session_activity_of(m, session_key, st.created_at, &paused, &last_used);
    if ((rc = sbx_session_attach(m, session_key, cancel, out, err)) != SBX_OK || !paused)
        return rc;
    if (sbx_provider_info_caps(sbx_provider_get_info((*out)->provider)) & SBX_CAP_PAUSE) {
        sbx_error why;
        if ((rc = sbx_resume(*out, cancel, &why)) != SBX_OK) {
            sbx_release(*out);
            *out = NULL;
            return sbx_error_set(err, rc, "session %s: resume: %s", label, why.message);
        }
    }
    /* the sandbox runs: a mark left by a store failure here is cleared by
     * the next use */
    sbxh_store_activity_set_paused(m->store, session_key, false, NULL);
    return SBX_OK;
}

/* Progress callback of package installation: refresh the intent (the
 * lease) and offer a crash point. */
struct progress_ctx {
    sbx_sessions *m;
    const char *key;
};

static int on_package_progress(void *ud, const char *manager, sbx_error *err)
{
    struct progress_ctx *pc = ud;
    char step[64];
    snprintf(step, sizeof step, "packages:%s", manager);
    int rc = sbxh_store_update_intent(pc->m->store, pc->key, pc->m->owner, step, NULL,
                                      err);
    if (rc == SBX_OK)
        sbxh_session_crash_point(pc->m, "during-packages");
    return rc;
}

/* The new sandbox's workspace from a snapshot. A failed restore leaves
 * the workspace as it was created, which is not what was asked for: the
 * sandbox is destroyed and the intent dropped (the reconciler's job when
 * the destroy fails too), so nothing is published. Releases h on failure. */
static int restore_snapshot(sbx_sessions *m, sbx_provider *p, const char *key,
                            sbx_handle *h, const char *file, sbx_cancel *cancel,
                            sbx_error *err)
{
    int rc = sbx_snapshot_restore(h, file, cancel, err);
    if (rc == SBX_OK)
        return SBX_OK;
    char ref[SBX_REF_MAX];
    snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
    sbx_release(h);
    sbx_error ignored;
    char skey_buf[SBX_STORE_KEY_MAX + 1];
    const char *skey;
    if (sbxh_session_sandbox_key(m, key, skey_buf, &skey, &ignored) == SBX_OK &&
        sbxh_session_destroy_resource(m, p, skey, ref, NULL, &ignored) == SBX_OK)
        sbxh_store_release_intent(m->store, key, m->owner, NULL);
    return rc;
}

/*
 * We hold the intent: create, record, install, publish. On failure the
 * intent stays (with the reference when one was recorded), except when the
 * session was fenced meanwhile: then we destroy what we made and drop it.
 * *retry is set when the key turned out to be bound: attach instead.
 */
static int provision(sbx_sessions *m, sbx_provider *p, const char *key,
                     const struct sbx_session_spec *spec, const char *spec_hash,
                     uint64_t caps, sbx_handle *fork_src, sbx_cancel *cancel,
                     sbx_handle **out, bool *retry, sbx_error *err)
{
    sbxh_session_crash_point(m, "after-intent");
    struct sbx_create_options copts;
    memset(&copts, 0, sizeof copts);
    copts.size = sizeof copts;
    copts.spec_hash = spec_hash;
    copts.caps_required = caps;
    /* Recorded before anything exists, so that a binding never goes without
     * the digest its spec hash was made from. */
    int rc = spec && spec->manifest
                 ? sbxh_store_set_manifest(m->store, key, sbx_manifest_digest(spec->manifest),
                                           sbx_manifest_run_as(spec->manifest), err)
                 : sbxh_store_drop_manifest(m->store, key, err);
    /* created under the session's own key: a sandbox key left by an
     * earlier, pooled incarnation of the key must not apply */
    if (rc == SBX_OK)
        rc = sbxh_store_drop_sandbox_key(m->store, key, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_session_egress eg;
    rc = sbxh_session_egress_init(&eg, spec, err);
    if (rc != SBX_OK)
        return rc;
    copts.egress = eg.limited ? &eg.setup : NULL;
    const struct sbx_memory_attachment *attach[65];
    size_t nmem = spec ? spec->nmemory : 0;
    for (size_t i = 0; i < nmem && i < 64; i++)
        attach[i] = &spec->memory[i];
    attach[nmem < 64 ? nmem : 64] = NULL;
    copts.memory = nmem ? attach : NULL;
    /* checked with the spec hash: at most SBX_SESSION_PORTS_MAX */
    uint16_t ports[SBX_SESSION_PORTS_MAX + 1];
    size_t nports = spec ? spec->nports : 0;
    for (size_t i = 0; i < nports && i < SBX_SESSION_PORTS_MAX; i++)
        ports[i] = spec->ports[i];
    ports[nports < SBX_SESSION_PORTS_MAX ? nports : SBX_SESSION_PORTS_MAX] = 0;
    copts.ports = nports ? ports : NULL;
    if ((rc = sbxh_session_memory_record(m, key, spec, err)) != SBX_OK) {
        sbxh_session_egress_free(&eg);
        return rc;
    }
    sbx_handle *h;
    /* a native fork makes the sandbox from fork_src's snapshot; one the
     * provider declines made nothing: the intent goes, and the caller
     * copies the workspace through the host instead */
    rc = sbxh_session_create(m, p, fork_src, key, &copts, cancel, &h, err);
    if (rc != SBX_OK) {
        sbxh_session_egress_free(&eg);
        if (fork_src && rc == SBX_E_UNSUPPORTED)
            sbxh_store_release_intent(m->store, key, m->owner, NULL);
        return rc;
    }
    rc = sbxh_store_update_intent(m->store, key, m->owner, "created", sbx_handle_ref(h),
                                  err);
    if (rc != SBX_OK) {
        sbxh_session_egress_free(&eg);
        sbx_release(h);
        return rc;
    }
    sbxh_session_crash_point(m, "after-create");
    return sbxh_session_provision_rest(m, p, key, spec, &eg, h, NULL, cancel, out, retry,
                                       err);
}

int sbxh_session_provision_rest(sbx_sessions *m, sbx_provider *p, const char *key,
                                const struct sbx_session_spec *spec,
                                struct sbx_session_egress *egp, sbx_handle *h,
                                const char *member_key, sbx_cancel *cancel,
                                sbx_handle **out, bool *retry, sbx_error *err)
{
    struct sbx_session_egress eg = *egp;
    int rc;
    if (spec && spec->manifest) {
        rc = sbxh_store_update_intent(m->store, key, m->owner, "manifest", NULL, err);
        if (rc == SBX_OK)
            rc = sbx_manifest_apply(h, spec->manifest, cancel, err);
        if (rc != SBX_OK) {
            sbxh_session_egress_free(&eg);
            sbx_release(h);
            return rc;
        }
        sbxh_session_crash_point(m, "after-manifest");
    }

    struct progress_ctx pc = {m, key};
    rc = sbxh_session_install_packages(h, m->ctx->config, spec, on_package_progress, &pc, cancel, err);
    /* The final allowlist is in force before anyone can attach. */
    if (rc == SBX_OK && eg.limited)
        rc = sbx_egress_set(h, &eg.final, cancel, err);
    sbxh_session_egress_free(&eg);
    if (rc != SBX_OK) {
        sbx_release(h);
        return rc;
    }
    if (spec && spec->snapshot) {
        rc = sbxh_store_update_intent(m->store, key, m->owner, "snapshot", NULL, err);
        if (rc != SBX_OK) {
            sbx_release(h);
            return rc;
        }
        if ((rc = restore_snapshot(m, p, key, h, spec->snapshot, cancel, err)) != SBX_OK)
            return rc; /* h released */
        sbxh_session_crash_point(m, "after-snapshot");
    }
    sbxh_session_crash_point(m, "before-publish");

    sbx_error why;
    rc = sbxh_store_publish(m->store, key, m->owner, NULL, &why);
    if (rc == SBX_OK && member_key) {
        /* the member is the session's now (its sandbox key was recorded at
         * claim); its row is bookkeeping only: a leftover is dropped by
         * reconcile */
        sbxh_session_crash_point(m, "pool-after-publish");
        sbxh_store_pool_delete(m->store, member_key, NULL);
    }
    if (rc == SBX_OK) {
        const char *run_as = spec && spec->manifest ? sbx_manifest_run_as(spec->manifest)
                                                    : NULL;
        /* as every later attach does (attach_binding); admission checked
         * SBX_CAP_USERS, so set_user cannot be refused */
        if ((rc = sbxh_session_memory_hook(m, key, h, err)) != SBX_OK ||
            (rc = sbxh_session_activity_hook(m, key, h, err)) != SBX_OK ||
            (run_as && (rc = sbx_handle_set_user(h, run_as, err)) != SBX_OK)) {
            sbx_release(h);
            return rc;
        }
        *out = h;
        return SBX_OK;
    }
    char label[13];
    sbxh_session_label(key, label);
    if (rc == SBX_E_EXISTS) {
        /* The key is bound after all; our create was idempotent on the same
         * key, so the resource may be the bound one: keep it, drop the
         * intent, attach to the binding. */
        sbx_release(h);
        sbxh_store_release_intent(m->store, key, m->owner, NULL);
        *retry = true;
        return SBX_OK;
    }
    if (rc == SBX_E_DENIED) {
        /* Still our intent: the session was fenced. Else it was taken over
         * and its new owner cleans up. */
        struct sbx_intent in = {0};
        bool fenced = sbxh_store_get_intent(m->store, key, &in, NULL) == SBX_OK &&
                      !strcmp(in.owner, m->owner);
        sbxh_intent_clear(&in);
        char ref[SBX_REF_MAX];
        snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
        sbx_release(h);
        /* Fenced for deletion: the resource we made must not outlive us. */
        sbx_error ignored;
        char skey_buf[SBX_STORE_KEY_MAX + 1];
        const char *skey = key;
        if (fenced && sbxh_session_sandbox_key(m, key, skey_buf, &skey, &ignored) == SBX_OK &&
            sbxh_session_destroy_resource(m, p, skey, ref, cancel, &ignored) == SBX_OK)
            sbxh_store_release_intent(m->store, key, m->owner, NULL);
        return sbx_error_set(err, SBX_E_DENIED,
                             "session %s: the sandbox was not published: %s", label,
                             why.message);
    }
    sbx_release(h);
    return sbx_error_set(err, rc, "session %s: %s", label, why.message);
}

static int acquire_turn(sbx_sessions *m, const char *session_key,
                        const struct sbx_session_spec *spec, sbx_handle *fork_src,
                        sbx_cancel *cancel, sbx_handle **out,
                        struct sbx_acquire_info *info, sbx_error *err);

static int acquire(sbx_sessions *m, const char *session_key,
                   const struct sbx_session_spec *spec, sbx_handle *fork_src,
                   sbx_cancel *cancel, sbx_handle **out, struct sbx_acquire_info *info,
                   sbx_error *err);

SBX_API int sbx_session_acquire(sbx_sessions *m, const char *session_key,
                                const struct sbx_session_spec *spec,
                                sbx_cancel *cancel, sbx_handle **out,
                                struct sbx_acquire_info *info, sbx_error *err)
{
    return acquire(m, session_key, spec, NULL, cancel, out, info, err);
}

int sbxh_session_acquire_fork(sbx_sessions *m, const char *session_key,
                              const struct sbx_session_spec *spec, sbx_handle *src,
                              sbx_cancel *cancel, sbx_handle **out,
                              struct sbx_acquire_info *info, sbx_error *err)
{
    return acquire(m, session_key, spec, src, cancel, out, info, err);
}

static int acquire(sbx_sessions *m, const char *session_key,
                   const struct sbx_session_spec *spec, sbx_handle *fork_src,
                   sbx_cancel *cancel, sbx_handle **out, struct sbx_acquire_info *info,
                   sbx_error *err)
{
    sbx_error_clear(err);
    if (info && sbx_struct_size(info) < sizeof(uint32_t) + sizeof(bool))
        return sbx_error_set(err, SBX_E_INVALID, "acquire info: size is not set");
    if (!session_key || !*session_key)
        return sbx_error_set(err, SBX_E_INVALID, "session key is empty");
    int rc = sbxh_session_key_take(m, session_key, cancel, err);
    if (rc != SBX_OK)
        return rc;
    /* filled in full here, copied back only up to the caller's size */
    struct sbx_acquire_info full;
    memset(&full, 0, sizeof full);
    full.size = sizeof full;
    rc = acquire_turn(m, session_key, spec, fork_src, cancel, out, info ? &full : NULL,
                      err);
    sbxh_session_key_give(m, session_key);
    if (info)
        sbx_struct_out(info, &full, sizeof full);
    return rc;
}

/* acquire, while this thread has the key's turn in this manager. */
static int acquire_turn(sbx_sessions *m, const char *session_key,
                        const struct sbx_session_spec *spec, sbx_handle *fork_src,
                        sbx_cancel *cancel, sbx_handle **out,
                        struct sbx_acquire_info *info, sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "sessions: no output given");
    struct sbx_session_spec copy;
    int rc0 = sbxh_session_spec_in(&copy, &spec, err);
    if (rc0 != SBX_OK)
        return rc0;
    /* A spec that declares no ports gets the configuration's session.ports
     * (part of its hash like ports it declared itself). */
    const bool check_spec = spec != NULL;
    const struct sbx_config *cfg = m->ctx->config;
    if (cfg && cfg->nsession_ports && (!spec || !spec->nports)) {
        if (!spec) {
            memset(&copy, 0, sizeof copy);
            copy.size = sizeof copy;
            spec = &copy;
        }
        copy.ports = cfg->session_ports;
        copy.nports = cfg->nsession_ports;
    }
    char spec_hash[SBX_KEY_HASH_LEN + 1];
    int rc = sbx_session_spec_hash(spec, spec_hash, err);
    if (rc != SBX_OK)
        return rc;
    char label[13];
    sbxh_session_label(session_key, label);

    sbx_provider *p = NULL;
    uint64_t caps = 0;
    int64_t deadline = sbxs_now_ms() + m->wait_ms;
    int64_t poll_ms = POLL_FIRST_MS;
    for (;;) {
        /* Bound already: the fast path, one read. */
        struct sbx_binding b = {0};
        rc = sbxh_store_get_binding(m->store, session_key, &b, err);
        if (rc == SBX_OK) {
            rc = attach_binding(m, &b, cancel, out, err);
            if (rc == SBX_OK)
                fill_info(info, b.provider, b.spec_hash, spec_hash, check_spec);
            sbxh_binding_clear(&b);
            return rc;
        }
        if (rc != SBX_E_NOT_FOUND)
            return rc;

        if (!p) {
            /* Admission, from the descriptor alone, before anything is
             * written or provisioned. */
            rc = sbx_provider_lookup(m->ctx, spec ? spec->provider : NULL, &p, err);
            if (rc != SBX_OK)
                return rc;
            caps = spec ? spec->caps : 0;
            if (spec && spec->npackages)
                caps |= SBX_CAP_PACKAGES;
            if (spec && spec->limited_network)
                caps |= SBX_CAP_EGRESS;
            if (spec && spec->nmemory)
                caps |= SBX_CAP_MEMORY;
            if (spec && spec->nports)
                caps |= SBX_CAP_PORTS;
            /* users, groups, run_as: made in the sandbox, every op as
             * run_as */
            if (spec && spec->manifest && sbx_manifest_has_users(spec->manifest))
                caps |= SBX_CAP_USERS;
            if ((rc = sbx_provider_admit(p, caps, err)) != SBX_OK ||
                (rc = sbxh_session_memory_admit(m, spec, err)) != SBX_OK)
                return rc;
        }

        sbxh_session_crash_point(m, "before-intent");
        /* A warm pool's ready member when one matches; an empty pool
         * (or only broken members) falls through to a cold create. */
        const struct sbxh_pool *pool = fork_src ? NULL : sbxh_pool_match(m, p, spec);
        struct sbx_claim_request req = {
            .session_key = session_key,
            .provider = sbx_provider_info_name(sbx_provider_get_info(p)),
            .owner = m->owner,
            .spec_hash = spec_hash,
            .step = "claimed",
            .max_sandboxes = sbxh_session_max_sandboxes(m, p),
            .pool = pool ? pool->cfg->name : NULL,
        };
        struct sbx_claim claim = {0};
        rc = sbxh_store_claim(m->store, &req, &claim, err);
        if (rc == SBX_E_DENIED) {
            sbxh_claim_clear(&claim);
            return sbx_error_set(err, SBX_E_DENIED, "session %s is being deleted",
                                 label);
        }
        if (rc != SBX_OK) {
            sbxh_claim_clear(&claim);
            return rc;
        }
        if (claim.outcome == SBX_CLAIM_BOUND) {
            sbxh_claim_clear(&claim);
            continue; /* published meanwhile: attach on the next turn */
        }
        if (claim.outcome == SBX_CLAIM_WON) {
            if (claim.intent.external_id) {
                /* Our own earlier attempt failed after create: start from
                 * a clean resource. */
                rc = sbxh_session_clean_intent(m, &claim.intent, cancel, err);
                sbxh_claim_clear(&claim);
                if (rc != SBX_OK)
                    return rc;
                continue;
            }
            sbxh_claim_clear(&claim);
            sbxh_session_crash_point(m, "after-admission");
            bool retry = false, pooled = false;
            sbx_handle *ph = NULL;
            struct sbx_session_egress eg;
            char member_key[SBX_STORE_KEY_MAX + 1];
            rc = pool ? sbxh_pool_claim(m, p, pool, session_key, spec, cancel, &ph, &eg,
                                        member_key, &pooled, err)
                      : SBX_OK;
            if (rc == SBX_OK && pooled)
                rc = sbxh_session_provision_rest(m, p, session_key, spec, &eg, ph,
                                                 member_key, cancel, out, &retry, err);
            if (!pooled && rc == SBX_OK && pool && req.max_sandboxes > 0 &&
                (rc = sbxh_store_quota_recheck(m->store, req.provider, req.max_sandboxes,
                                               err)) != SBX_OK)
                /* admitted on a member another session took meanwhile */
                sbxh_store_release_intent(m->store, session_key, m->owner, NULL);
            if (!pooled && rc == SBX_OK)
                rc = provision(m, p, session_key, spec, spec_hash, caps, fork_src, cancel,
                               out, &retry, err);
            if (rc == SBX_OK && !retry && info)
                info->pooled = pooled;
            if (rc == SBX_OK && retry)
                continue;
            if (rc == SBX_OK && info) {
                info->created = true;
                fill_info(info, sbx_provider_info_name(sbx_provider_get_info(p)), spec_hash, spec_hash,
                          false);
            }
            return rc;
        }

        /* HELD by another worker: take over a dead one's intent, else wait
         * for its binding. */
        if (sbxh_session_intent_stale(m, &claim.intent, m->lease_ms)) {
            rc = sbxh_session_reclaim(m, &claim.intent, m->lease_ms, cancel, err);
            sbxh_claim_clear(&claim);
            if (rc == SBX_OK || rc == SBX_E_EXISTS)
                continue;
            return rc;
        }
        sbxh_claim_clear(&claim);
        if (sbxs_now_ms() >= deadline)
            return sbx_error_set(err, SBX_E_TIMEOUT,
                                 "session %s: another worker is still provisioning "
                                 "its sandbox after %lld ms", label,
                                 (long long)m->wait_ms);
        if ((rc = sbxh_session_sleep(poll_ms, cancel, err)) != SBX_OK)
            return rc;
        poll_ms = poll_ms * 2 > POLL_MAX_MS ? POLL_MAX_MS : poll_ms * 2;
    }
}
