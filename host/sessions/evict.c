/*
 * evict.c - idle eviction (providers.<name>.idle_pause, idle_destroy) and
 * the provider limit max_sandboxes read at admission.
 *
 * One pass visits every binding whose provider sets an idle duration. A
 * session idle (now minus its last use) for idle_destroy or longer is
 * deleted through the normal delete path; one idle for idle_pause or
 * longer, not paused yet, is paused when its provider declares
 * SBX_CAP_PAUSE. Before acting, the pass takes the session's use lock
 * exclusive without waiting (commands hold it shared while they run,
 * sessions/activity.c) and skips the session when it cannot, then reads
 * the last use again under the lock: a session used meanwhile has its
 * idle clock reset and is left alone.
 */
#include "config/provider_lifecycle.h"
#include "registry/provider.h"
#include "sessions/activity.h"
#include "sessions/internal.h"
#include "store/store.h"
#include "base/struct_size.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EVICT_PAGE 100

int64_t sbxh_session_max_sandboxes(sbx_sessions *m, sbx_provider *p)
{
    struct sbx_provider_lifecycle lc;
    sbxh_config_provider_lifecycle(m->ctx->config,
                                   sbx_provider_info_name(sbx_provider_get_info(p)), &lc);
    return lc.max_sandboxes;
}

static int64_t wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

enum verdict { KEEP, PAUSE, DESTROY };

static enum verdict judge(const struct sbx_provider_lifecycle *lc, bool can_pause,
                          bool paused, int64_t idle_ms)
{
    if (lc->idle_destroy_ms && idle_ms >= lc->idle_destroy_ms)
        return DESTROY;
    if (lc->idle_pause_ms && can_pause && !paused && idle_ms >= lc->idle_pause_ms)
        return PAUSE;
    return KEEP;
}

static void note_failure(struct sbx_evict_report *rep, int rc, const sbx_error *why,
                         int *first_rc, sbx_error *err)
{
    rep->failures++;
    if (*first_rc == SBX_OK) {
        *first_rc = rc;
        sbx_error_set(err, rc, "%s", why->message[0] ? why->message
                                                      : sbx_strerror((sbx_status)rc));
    }
}

/* One binding: decide, lock, decide again, act. */
static void evict_one(sbx_sessions *m, const struct sbx_binding *b, sbx_cancel *cancel,
                      struct sbx_evict_report *rep, int *first_rc, sbx_error *err)
{
    if (b->deleting)
        return;
    struct sbx_provider_lifecycle lc;
    sbxh_config_provider_lifecycle(m->ctx->config, b->provider, &lc);
    if (!lc.idle_pause_ms && !lc.idle_destroy_ms)
        return;
    rep->seen++;
    sbx_provider *p;
    sbx_error why;
    if (sbxh_session_provider(m, b->session_key, b->provider, &p, &why) != SBX_OK)
        return; /* not enabled here: not this host's to judge */
    bool can_pause = sbx_provider_info_caps(sbx_provider_get_info(p)) & SBX_CAP_PAUSE;
    bool paused;
    int64_t last;
    sbxh_session_activity_of(m, b->session_key, b->created_at, &paused, &last);
    if (judge(&lc, can_pause, paused, wall_ms() - last) == KEEP)
        return;

    /* a thread of this manager provisioning the key, or a command anywhere
     * holding its use lock: in use */
    if (sbxh_session_key_try_take(m, b->session_key, &why) != SBX_OK) {
        rep->in_use++;
        return;
    }
    struct sbx_store_use_lock *lock = NULL;
    int rc = sbxh_store_use_lock(m->store, b->session_key, true, &lock, &why);
    if (rc == SBX_E_EXISTS) {
        rep->in_use++;
    } else if (rc != SBX_OK) {
        note_failure(rep, rc, &why, first_rc, err);
    } else {
        sbxh_session_activity_of(m, b->session_key, b->created_at, &paused, &last);
        enum verdict v = judge(&lc, can_pause, paused, wall_ms() - last);
        if (v == DESTROY) {
            sbxh_session_crash_point(m, "during-evict");
            rc = sbx_session_delete(m, b->session_key, cancel, &why);
            if (rc == SBX_OK || rc == SBX_E_NOT_FOUND)
                rep->destroyed++;
            else
                note_failure(rep, rc, &why, first_rc, err);
        } else if (v == PAUSE) {
            rc = sbxh_session_pause_bound(m, b, cancel, &why);
            if (rc == SBX_OK)
                rep->paused++;
            else
                note_failure(rep, rc, &why, first_rc, err);
        }
        sbxh_store_use_unlock(m->store, lock);
    }
    sbxh_session_key_give(m, b->session_key);
}

SBX_API int sbx_sessions_evict(sbx_sessions *m, sbx_cancel *cancel,
                               struct sbx_evict_report *report, sbx_error *err)
{
    sbx_error_clear(err);
    struct sbx_evict_report rep;
    memset(&rep, 0, sizeof rep);
    rep.size = sizeof rep;
    if (report && sbx_struct_size(report) < sizeof(uint32_t))
        return sbx_error_set(err, SBX_E_INVALID, "evict report: size is not set");
    if (!m)
        return sbx_error_set(err, SBX_E_INVALID, "evict: no session manager");
    int first_rc = SBX_OK;
    char *after = NULL;
    int rc = SBX_OK;
    for (;;) {
        struct sbx_binding_page page = {0};
        sbx_error why;
        rc = sbxh_store_list_bindings(m->store, after, EVICT_PAGE, &page, &why);
        free(after);
        after = NULL;
        if (rc != SBX_OK) {
            sbx_error_set(err, rc, "%s", why.message);
            break;
        }
        for (size_t i = 0; i < page.count && !sbx_cancel_fired(cancel); i++)
            evict_one(m, &page.items[i], cancel, &rep, &first_rc, err);
        if (page.more && page.count && !(after = strdup(page.items[page.count - 1].session_key)))
            rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        sbxh_binding_page_free(&page);
        if (rc != SBX_OK || !after)
            break;
        if (sbx_cancel_fired(cancel)) {
            free(after);
            rc = sbx_error_set(err, SBX_E_CANCELLED, "cancelled");
            break;
        }
    }
    if (report)
        sbx_struct_out(report, &rep, sizeof rep);
    return rc != SBX_OK ? rc : first_rc;
}
