/*
 * reconcile.c - one reconcile pass: clean up the intents of dead
 * or expired workers, finish interrupted deletions.
 */
#include "sessions/internal.h"
#include "sessions/memory_hooks.h"
#include "store/store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECONCILE_PAGE 100

/* Remember the first failure's message and status; count every one. */
static void note_failure(struct sbx_reconcile_report *rep, int rc,
                         const sbx_error *why, int *first_rc, sbx_error *err)
{
    rep->failures++;
    if (*first_rc == SBX_OK) {
        *first_rc = rc;
        sbx_error_set(err, rc, "%s", why->message[0] ? why->message
                                                      : sbx_strerror((sbx_status)rc));
    }
}

static int reconcile_intents(sbx_sessions *m, int64_t lease_ms, sbx_cancel *cancel,
                             struct sbx_reconcile_report *rep, int *first_rc,
                             sbx_error *err)
{
    char *after = NULL;
    for (;;) {
        struct sbx_intent_page page = {0};
        sbx_error why;
        int rc = sbxh_store_list_intents(m->store, after, RECONCILE_PAGE, &page, &why);
        if (rc != SBX_OK) {
            free(after);
            return sbx_error_set(err, rc, "%s", why.message);
        }
        for (size_t i = 0; i < page.count; i++) {
            const struct sbx_intent *in = &page.items[i];
            rep->intents_seen++;
            rc = sbxh_session_reclaim(m, in, lease_ms, cancel, &why);
            if (rc == SBX_OK)
                rep->intents_cleaned++;
            else if (rc == SBX_E_EXISTS)
                rep->intents_skipped++; /* live work, or done by another */
            else
                note_failure(rep, rc, &why, first_rc, err);
        }
        free(after);
        after = NULL;
        if (page.more && page.count) {
            after = strdup(page.items[page.count - 1].session_key);
            if (!after) {
                sbxh_intent_page_free(&page);
                return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
            }
        }
        sbxh_intent_page_free(&page);
        if (!after)
            return SBX_OK;
        if (sbx_cancel_fired(cancel)) {
            free(after);
            return sbx_error_set(err, SBX_E_CANCELLED, "cancelled");
        }
    }
}

static int reconcile_deletions(sbx_sessions *m, sbx_cancel *cancel,
                               struct sbx_reconcile_report *rep, int *first_rc,
                               sbx_error *err)
{
    char *after = NULL;
    for (;;) {
        struct sbx_key_page page = {0};
        sbx_error why;
        int rc = sbxh_store_list_deleting(m->store, after, RECONCILE_PAGE, &page, &why);
        if (rc != SBX_OK) {
            free(after);
            return sbx_error_set(err, rc, "%s", why.message);
        }
        for (size_t i = 0; i < page.count; i++) {
            rc = sbxh_session_finish_delete(m, page.keys[i], false, cancel, &why);
            if (rc == SBX_OK)
                rep->deletions_done++;
            else
                note_failure(rep, rc, &why, first_rc, err);
        }
        free(after);
        after = NULL;
        if (page.more && page.count) {
            after = strdup(page.keys[page.count - 1]);
            if (!after) {
                sbxh_key_page_free(&page);
                return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
            }
        }
        sbxh_key_page_free(&page);
        if (!after)
            return SBX_OK;
        if (sbx_cancel_fired(cancel)) {
            free(after);
            return sbx_error_set(err, SBX_E_CANCELLED, "cancelled");
        }
    }
}

struct memory_pass {
    sbx_sessions *m;
    sbx_cancel *cancel;
    struct sbx_reconcile_report *rep;
    int *first_rc;
    sbx_error *err;
};

/* One session whose memory a crash left unclean: write it back. */
static int reconcile_memory_one(void *ud, const char *key)
{
    struct memory_pass *mp = ud;
    sbx_handle *h;
    sbx_error why;
    int rc = sbx_session_attach(mp->m, key, mp->cancel, &h, &why);
    if (rc == SBX_OK) {
        rc = sbxh_session_memory_flush(mp->m, key, h, mp->cancel, &why);
        sbx_release(h);
    }
    if (rc == SBX_E_NOT_FOUND) {
        /* the sandbox is lost, and what its mounts held with it: said once,
         * then the attachments start afresh if it ever comes back */
        struct sbx_store_memory_row *rows = NULL;
        size_t n = 0;
        sbx_error ue;
        if (sbxh_store_memory_get(mp->m->store, key, &rows, &n, &ue) == SBX_OK)
            for (size_t i = 0; i < n; i++)
                sbxh_store_memory_update(mp->m->store, key, rows[i].slug, -1,
                                         SBX_STORE_MEMORY_CLEAN, &ue);
        free(rows);
    }
    if (rc == SBX_OK)
        mp->rep->memory_written_back++;
    else if (rc != SBX_E_DENIED) /* being deleted: the deletion flushes */
        note_failure(mp->rep, rc, &why, mp->first_rc, mp->err);
    return SBX_OK;
}

SBX_API int sbx_sessions_reconcile(sbx_sessions *m, int64_t lease_ms,
                                   sbx_cancel *cancel,
                                   struct sbx_reconcile_report *report,
                                   sbx_error *err)
{
    sbx_error_clear(err);
    struct sbx_reconcile_report local;
    struct sbx_reconcile_report *rep = report ? report : &local;
    memset(rep, 0, sizeof *rep);
    if (lease_ms < 0)
        return sbx_error_set(err, SBX_E_INVALID, "reconcile: negative lease");
    if (lease_ms == 0)
        lease_ms = m->lease_ms;
    int first_rc = SBX_OK;
    int rc = reconcile_intents(m, lease_ms, cancel, rep, &first_rc, err);
    if (rc != SBX_OK)
        return rc;
    struct memory_pass mp = {m, cancel, rep, &first_rc, err};
    sbx_error why;
    rc = sbxh_store_memory_unclean(m->store, reconcile_memory_one, &mp, &why);
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "%s", why.message);
    rc = reconcile_deletions(m, cancel, rep, &first_rc, err);
    if (rc != SBX_OK)
        return rc;
    return first_rc;
}
