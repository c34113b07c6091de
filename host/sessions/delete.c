/*
 * delete.c - deleting a session: fence, destroy with retries,
 * remove the binding and the session row.
 */
#include "clock.h"
#include "sessions/internal.h"
#include "store/pools.h"
#include "sessions/memory_hooks.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A live worker's provisioning, seen from a deletion: its publish will be
 * refused and it will destroy what it made; poll for that. */
#define DELETE_POLL_MS 50

/* What a crash left in read-write memory attachments is committed before
 * the sandbox goes (a conflict keeps the session, fenced). */
static int flush_memory(sbx_sessions *m, sbx_provider *p, const struct sbx_binding *b,
                        sbx_cancel *cancel, sbx_error *err)
{
    if (!(sbx_provider_info_caps(sbx_provider_get_info(p)) & SBX_CAP_MEMORY))
        return SBX_OK;
    /* Only a session with changes to write back is attached here: one
     * whose sandbox attach refuses stays deletable. */
    struct sbx_store_memory_row *rows = NULL;
    size_t n = 0;
    sbx_error why;
    int rc = sbxh_store_memory_get(m->store, b->session_key, &rows, &n, &why);
    bool unclean = false;
    for (size_t i = 0; rc == SBX_OK && i < n; i++)
        unclean |= rows[i].access == SBX_MEMORY_READ_WRITE &&
                   rows[i].state != SBX_STORE_MEMORY_CLEAN;
    free(rows);
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "%s", why.message);
    if (!unclean)
        return SBX_OK;
    sbx_handle *h;
    char skey_buf[SBX_STORE_KEY_MAX + 1];
    const char *skey;
    if ((rc = sbxh_session_sandbox_key(m, b->session_key, skey_buf, &skey, err)) != SBX_OK)
        return rc;
    rc = sbx_attach(p, skey, b->external_id, cancel, &h, &why);
    /* gone, or no longer trusted (SBX_E_DENIED: tampered with): what its
     * mounts hold cannot be written back, and must not block deletion */
    if (rc == SBX_E_NOT_FOUND || rc == SBX_E_DENIED)
        return SBX_OK;
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "%s", why.message);
    rc = sbxh_session_memory_flush(m, b->session_key, h, cancel, &why);
    sbx_release(h);
    if (rc != SBX_OK) {
        char label[13];
        sbxh_session_label(b->session_key, label);
        return sbx_error_set(err, rc,
                             "session %s: its memory changes could not be written back "
                             "(%s); resolve with 'sbx memory resolve', then delete again",
                             label, why.message);
    }
    return SBX_OK;
}

int sbxh_session_finish_delete(sbx_sessions *m, const char *key, bool wait,
                               sbx_cancel *cancel, sbx_error *err)
{
    char label[13];
    sbxh_session_label(key, label);
    struct sbx_binding b = {0};
    int rc = sbxh_store_get_binding(m->store, key, &b, err);
    if (rc == SBX_OK) {
        sbx_provider *p;
        rc = sbxh_session_provider(m, key, b.provider, &p, err);
        if (rc == SBX_OK)
            rc = flush_memory(m, p, &b, cancel, err);
        if (rc == SBX_OK) {
            sbxh_session_crash_point(m, "during-destroy");
            sbx_error why;
            char skey_buf[SBX_STORE_KEY_MAX + 1];
            const char *skey = key;
            rc = sbxh_session_sandbox_key(m, key, skey_buf, &skey, &why);
            if (rc == SBX_OK)
                rc = sbxh_session_destroy_resource(m, p, skey, b.external_id, cancel, &why);
            if (rc != SBX_OK)
                sbx_error_set(err, rc,
                              "session %s: cannot destroy its sandbox (provider "
                              "\"%s\", reference %s): %s; the session stays fenced "
                              "for 'sbx reconcile'",
                              label, b.provider, b.external_id, why.message);
        }
        sbxh_binding_clear(&b);
        if (rc != SBX_OK)
            return rc;
        sbxh_session_crash_point(m, "after-destroy");
    } else if (rc != SBX_E_NOT_FOUND) {
        return rc;
    }

    int64_t deadline = sbxs_now_ms() + m->wait_ms;
    for (;;) {
        sbx_error why;
        rc = sbxh_store_remove_session(m->store, key, &why);
        if (rc == SBX_OK || rc == SBX_E_NOT_FOUND) {
            /* the digest is information only: a leftover is replaced by the
             * key's next provisioning */
            sbxh_store_drop_manifest(m->store, key, NULL);
            sbxh_store_memory_drop(m->store, key, NULL);
            sbxh_store_activity_drop(m->store, key, NULL);
            sbxh_store_drop_sandbox_key(m->store, key, NULL);
            return SBX_OK;
        }
        if (rc != SBX_E_UNAVAILABLE)
            return sbx_error_set(err, rc, "%s", why.message);
        /* An intent is held: clean it when nobody is working on it. */
        struct sbx_intent in = {0};
        int irc = sbxh_store_get_intent(m->store, key, &in, err);
        if (irc == SBX_OK) {
            irc = sbxh_session_reclaim(m, &in, m->lease_ms, cancel, err);
            sbxh_intent_clear(&in);
            if (irc == SBX_OK)
                continue;
            if (irc != SBX_E_EXISTS)
                return irc;
        } else if (irc != SBX_E_NOT_FOUND) {
            return irc;
        }
        if (!wait || sbxs_now_ms() >= deadline)
            return sbx_error_set(err, SBX_E_UNAVAILABLE,
                                 "session %s: deletion waits for a worker that is "
                                 "still provisioning it (%s); the session stays "
                                 "fenced for 'sbx reconcile'", label, why.message);
        if ((rc = sbxh_session_sleep(DELETE_POLL_MS, cancel, err)) != SBX_OK)
            return rc;
    }
}

SBX_API int sbx_session_delete(sbx_sessions *m, const char *session_key,
                               sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    if (!session_key || !*session_key)
        return sbx_error_set(err, SBX_E_INVALID, "session key is empty");
    sbx_error why;
    /* Memory changes go in while the session can still be resolved. */
    struct sbx_binding b = {0};
    int rc = sbxh_store_get_binding(m->store, session_key, &b, &why);
    if (rc == SBX_OK && !b.deleting) {
        sbx_provider *p;
        if (sbxh_session_provider(m, session_key, b.provider, &p, &why) == SBX_OK)
            rc = flush_memory(m, p, &b, cancel, err);
        sbxh_binding_clear(&b);
        if (rc != SBX_OK)
            return rc;
    } else {
        sbxh_binding_clear(&b);
    }
    rc = sbxh_store_fence(m->store, session_key, &why);
    if (rc == SBX_E_NOT_FOUND) {
        char label[13];
        sbxh_session_label(session_key, label);
        return sbx_error_set(err, SBX_E_NOT_FOUND, "session %s does not exist", label);
    }
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "%s", why.message);
    return sbxh_session_finish_delete(m, session_key, true, cancel, err);
}
