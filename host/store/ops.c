/*
 * ops.c - the store operations that decide something, written once
 * over the primitives of a driver (store/driver.h): who wins a claim, whether
 * an intent may be updated, taken over or released, whether a publish or a
 * removal may go ahead, and the messages that explain a refusal.
 *
 * Each operation runs in one transaction of the driver (begin ... finish);
 * the primitives lock what the decision reads, so the decision holds until
 * the commit.
 */
#include "store/driver.h"

#include <stdlib.h>
#include <string.h>

static const struct sbx_store_prims *prims_of(struct sbx_store *s)
{
    return ((struct sbx_store_impl *)s)->prims;
}

/* ------------------------------------------------------------------------ */
/* Messages                                                                   */
/* ------------------------------------------------------------------------ */

int sbxh_store_no_intent(struct sbx_store *s, const char *key, sbx_error *err)
{
    char lbl[13];
    sbxh_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_NOT_FOUND,
                         "%s: session %s has no provisioning intent", s->label, lbl);
}

int sbxh_store_vanished(struct sbx_store *s, const char *what, sbx_error *err)
{
    return sbx_error_set(err, SBX_E_INTERNAL, "%s: the new %s vanished", s->label, what);
}

int sbxh_store_newer_schema(struct sbx_store *s, int version, sbx_error *err)
{
    return sbx_error_set(err, SBX_E_CONFIG,
                         "%s: schema version %d is newer than this sbx supports (%d); "
                         "use a newer sbx",
                         s->label, version, SBX_STORE_SCHEMA_VERSION);
}

static int not_owner(struct sbx_store *s, const char *key, const char *holder,
                     sbx_error *err)
{
    char lbl[13];
    sbxh_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_DENIED,
                         "%s: the provisioning intent of session %s is held by "
                         "owner %s, not by the caller",
                         s->label, lbl, holder);
}

static int fenced(struct sbx_store *s, const char *key, sbx_error *err)
{
    char lbl[13];
    sbxh_store_key_label(key, lbl);
    return sbx_error_set(err, SBX_E_DENIED,
                         "%s: session %s is being deleted; no new admissions", s->label,
                         lbl);
}

/* ------------------------------------------------------------------------ */
/* Reads                                                                      */
/* ------------------------------------------------------------------------ */

static int ready(struct sbx_store *s, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    return p->ready ? p->ready(s, err) : SBX_OK;
}

int sbxh_store_shared_get_binding(struct sbx_store *s, const char *key,
                                  struct sbx_binding *out, sbx_error *err)
{
    bool found = false;
    int rc = ready(s, err);
    if (rc == SBX_OK)
        rc = prims_of(s)->fetch_binding(s, key, out, &found, err);
    if (rc == SBX_OK && !found) {
        char lbl[13];
        sbxh_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: session %s has no binding",
                             s->label, lbl);
    }
    return rc;
}

int sbxh_store_shared_get_intent(struct sbx_store *s, const char *key,
                                 struct sbx_intent *out, sbx_error *err)
{
    bool found = false;
    int rc = ready(s, err);
    if (rc == SBX_OK)
        rc = prims_of(s)->fetch_intent(s, key, false, out, &found, err);
    if (rc == SBX_OK && !found)
        return sbxh_store_no_intent(s, key, err);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Intents                                                                    */
/* ------------------------------------------------------------------------ */

/* In a transaction: lock and return the caller's intent, or NOT_FOUND /
 * DENIED. */
static int owned_intent(struct sbx_store *s, const char *key, const char *owner,
                        struct sbx_intent *in, sbx_error *err)
{
    bool found;
    int rc = prims_of(s)->fetch_intent(s, key, true, in, &found, err);
    if (rc != SBX_OK)
        return rc;
    if (!found)
        return sbxh_store_no_intent(s, key, err);
    if (strcmp(in->owner, owner) != 0) {
        rc = not_owner(s, key, in->owner, err);
        sbxh_intent_clear(in);
        return rc;
    }
    return SBX_OK;
}

static int claim_tx(struct sbx_store *s, const struct sbx_claim_request *req,
                    struct sbx_claim *out, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    const char *key = req->session_key;
    int state;
    int rc = p->open_session(s, key, &state, err);
    if (rc != SBX_OK)
        return rc;
    if (state == SBX_SESSION_DELETING)
        return fenced(s, key, err);

    bool found;
    if ((rc = p->fetch_binding(s, key, &out->binding, &found, err)) != SBX_OK)
        return rc;
    if (found) {
        out->outcome = SBX_CLAIM_BOUND;
        return SBX_OK;
    }
    if ((rc = p->fetch_intent(s, key, true, &out->intent, &found, err)) != SBX_OK)
        return rc;
    if (found && strcmp(out->intent.owner, req->owner) != 0) {
        out->outcome = SBX_CLAIM_HELD;
        return SBX_OK;
    }
    if (found) {
        /* Already ours: refresh the lease. */
        if ((rc = p->touch_intent(s, key, &out->intent, err)) != SBX_OK)
            return rc;
    } else {
        if (req->max_sandboxes > 0 &&
            (rc = sbxh_store_quota_check_tx(s, req->provider, req->pool, req->max_sandboxes, err)) !=
                SBX_OK)
            return rc;
        if ((rc = p->insert_intent(s, req, err)) != SBX_OK)
            return rc;
        /* Read it back so the caller gets exactly what is stored. */
        if ((rc = p->fetch_intent(s, key, false, &out->intent, &found, err)) != SBX_OK)
            return rc;
        if (!found)
            return sbxh_store_vanished(s, "intent", err);
    }
    out->outcome = SBX_CLAIM_WON;
    return SBX_OK;
}

int sbxh_store_shared_claim(struct sbx_store *s, const struct sbx_claim_request *req,
                            struct sbx_claim *out, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    int rc = p->begin(s, err);
    if (rc != SBX_OK)
        return rc;
    rc = p->finish(s, claim_tx(s, req, out, err), err);
    if (rc != SBX_OK)
        sbxh_claim_clear(out);
    return rc;
}

/* Start a transaction in which owner holds the intent of key (locked). On
 * failure the transaction is already over. */
static int begin_owned(struct sbx_store *s, const char *key, const char *owner,
                       sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    int rc = p->begin(s, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_intent in = {0};
    rc = owned_intent(s, key, owner, &in, err);
    sbxh_intent_clear(&in);
    return rc == SBX_OK ? SBX_OK : p->finish(s, rc, err);
}

int sbxh_store_shared_update_intent(struct sbx_store *s, const char *key,
                                    const char *owner, const char *step,
                                    const char *external_id, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    int rc = begin_owned(s, key, owner, err);
    if (rc != SBX_OK)
        return rc;
    return p->finish(s, p->update_intent(s, key, step, external_id, err), err);
}

static int takeover_tx(struct sbx_store *s, const char *key, const char *owner,
                       int64_t lease_ms, struct sbx_intent *out, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    bool found;
    int rc = p->fetch_intent(s, key, true, out, &found, err);
    if (rc != SBX_OK)
        return rc;
    if (!found)
        return sbxh_store_no_intent(s, key, err);
    if (strcmp(out->owner, owner) != 0 && out->age_ms < lease_ms) {
        char lbl[13];
        sbxh_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_EXISTS,
                             "%s: the provisioning intent of session %s is held by "
                             "owner %s, updated %lld ms ago (lease %lld ms)",
                             s->label, lbl, out->owner, (long long)out->age_ms,
                             (long long)lease_ms);
    }
    return p->set_owner(s, key, owner, out, err);
}

int sbxh_store_shared_takeover_intent(struct sbx_store *s, const char *key,
                                      const char *owner, int64_t lease_ms,
                                      struct sbx_intent *out, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    int rc = p->begin(s, err);
    if (rc != SBX_OK)
        return rc;
    rc = p->finish(s, takeover_tx(s, key, owner, lease_ms, out, err), err);
    if (rc != SBX_OK)
        sbxh_intent_clear(out);
    return rc;
}

int sbxh_store_shared_release_intent(struct sbx_store *s, const char *key,
                                     const char *owner, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    int rc = begin_owned(s, key, owner, err);
    if (rc != SBX_OK)
        return rc;
    return p->finish(s, p->delete_intent(s, key, err), err);
}

/* ------------------------------------------------------------------------ */
/* Bindings and sessions                                                      */
/* ------------------------------------------------------------------------ */

/* The checks of a publish, after the session row and the intent `in` were
 * locked. */
static int publish_allowed(struct sbx_store *s, const char *key, int state,
                           const struct sbx_intent *in, struct sbx_binding *scratch,
                           sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    char lbl[13];
    sbxh_store_key_label(key, lbl);
    if (state == SBX_SESSION_DELETING)
        return fenced(s, key, err);
    if (!in->external_id)
        return sbx_error_set(err, SBX_E_INVALID,
                             "%s: the intent of session %s has no external id yet; "
                             "record it before publishing",
                             s->label, lbl);
    bool found;
    int rc = p->fetch_binding(s, key, scratch, &found, err);
    sbxh_binding_clear(scratch);
    if (rc != SBX_OK)
        return rc;
    if (found)
        return sbx_error_set(err, SBX_E_EXISTS, "%s: session %s already has a binding",
                             s->label, lbl);
    char other[13];
    if ((rc = p->bound_key(s, in->provider, in->external_id, other, &found, err)) !=
        SBX_OK)
        return rc;
    if (found)
        return sbx_error_set(err, SBX_E_EXISTS,
                             "%s: %s resource %s is already bound to session %s",
                             s->label, in->provider, in->external_id, other);
    return SBX_OK;
}

static int publish_tx(struct sbx_store *s, const char *key, const char *owner,
                      struct sbx_binding *out, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    /* Session row first, then the intent row: the lock order of every
     * operation, so none deadlock. */
    int state;
    int rc = p->lock_session(s, key, &state, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_intent in = {0};
    if ((rc = owned_intent(s, key, owner, &in, err)) != SBX_OK)
        return rc;
    int64_t created_at = 0;
    rc = publish_allowed(s, key, state, &in, out, err);
    /* Another key may publish the same external id concurrently: the
     * unique constraint decides then (SBX_E_EXISTS). */
    if (rc == SBX_OK)
        rc = p->insert_binding(s, key, &in, &created_at, err);
    if (rc == SBX_OK)
        rc = p->delete_intent(s, key, err);
    if (rc == SBX_OK) {
        /* Hand the binding over: the strings move from the intent. */
        out->session_key = in.session_key;
        out->provider = in.provider;
        out->external_id = in.external_id;
        out->spec_hash = in.spec_hash;
        out->created_at = created_at;
        out->deleting = false;
        in.session_key = in.provider = in.external_id = in.spec_hash = NULL;
    }
    sbxh_intent_clear(&in);
    return rc;
}

int sbxh_store_shared_publish(struct sbx_store *s, const char *key, const char *owner,
                              struct sbx_binding *out, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    int rc = p->begin(s, err);
    if (rc != SBX_OK)
        return rc;
    rc = p->finish(s, publish_tx(s, key, owner, out, err), err);
    if (rc != SBX_OK)
        sbxh_binding_clear(out);
    return rc;
}

int sbxh_store_shared_fence(struct sbx_store *s, const char *key, sbx_error *err)
{
    bool found = false;
    int rc = prims_of(s)->fence(s, key, &found, err);
    if (rc == SBX_OK && !found) {
        char lbl[13];
        sbxh_store_key_label(key, lbl);
        return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: no session %s to delete",
                             s->label, lbl);
    }
    return rc;
}

static int remove_tx(struct sbx_store *s, const char *key, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    char lbl[13];
    sbxh_store_key_label(key, lbl);
    int state;
    int rc = p->lock_session(s, key, &state, err);
    if (rc != SBX_OK)
        return rc;
    if (state == SBX_SESSION_NONE)
        return sbx_error_set(err, SBX_E_NOT_FOUND, "%s: no session %s", s->label, lbl);
    if (state != SBX_SESSION_DELETING)
        return sbx_error_set(err, SBX_E_DENIED,
                             "%s: session %s is not fenced; fence it before removing it",
                             s->label, lbl);
    struct sbx_intent in = {0};
    bool found;
    if ((rc = p->fetch_intent(s, key, false, &in, &found, err)) != SBX_OK)
        return rc;
    if (found) {
        rc = sbx_error_set(err, SBX_E_UNAVAILABLE,
                           "%s: session %s still has a provisioning intent held by "
                           "owner %s (updated %lld ms ago); it must be released or "
                           "taken over and cleaned first",
                           s->label, lbl, in.owner, (long long)in.age_ms);
        sbxh_intent_clear(&in);
        return rc;
    }
    return p->delete_session(s, key, err);
}

int sbxh_store_shared_remove_session(struct sbx_store *s, const char *key,
                                     sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    int rc = p->begin(s, err);
    if (rc != SBX_OK)
        return rc;
    return p->finish(s, remove_tx(s, key, err), err);
}

/* ------------------------------------------------------------------------ */
/* Lists                                                                      */
/* ------------------------------------------------------------------------ */

static int list(struct sbx_store *s, enum sbx_store_list which, const char *after,
                size_t limit, union sbx_store_page_out out, sbx_error *err)
{
    const struct sbx_store_prims *p = prims_of(s);
    struct sbx_store_cursor *cur = NULL;
    int rc = p->list(s, which, after, limit, &cur, err);
    if (rc != SBX_OK)
        return rc;
    rc = sbxh_store_fill_page(s, cur, which, limit, out, err);
    p->list_end(s, cur);
    return rc;
}

int sbxh_store_shared_list_bindings(struct sbx_store *s, const char *after, size_t limit,
                                    struct sbx_binding_page *out, sbx_error *err)
{
    return list(s, SBX_STORE_LIST_BINDINGS, after, limit,
                (union sbx_store_page_out){.bindings = out}, err);
}

int sbxh_store_shared_list_intents(struct sbx_store *s, const char *after, size_t limit,
                                   struct sbx_intent_page *out, sbx_error *err)
{
    return list(s, SBX_STORE_LIST_INTENTS, after, limit,
                (union sbx_store_page_out){.intents = out}, err);
}

int sbxh_store_shared_list_deleting(struct sbx_store *s, const char *after, size_t limit,
                                    struct sbx_key_page *out, sbx_error *err)
{
    return list(s, SBX_STORE_LIST_DELETING, after, limit,
                (union sbx_store_page_out){.keys = out}, err);
}
