/*
 * activity.c - a session's last use and paused mark (docs/SESSIONS.md,
 * "Pause, resume and idle eviction"), and session-level pause and resume.
 *
 * Every handle the manager hands out gets steps around its commands
 * (wrapping the memory stores' steps when there are any): a command holds
 * the session's use lock shared while it runs, so the idle evictor
 * (sessions/evict.c), which tries it exclusive, never touches a session
 * whose command is running; and it records the session's last use, at
 * most once a second per handle (one statement, no extra transaction for
 * a burst of commands). Attaching is a use too: every CLI command attaches.
 * A use clears the paused mark: the provider resumed the sandbox for the
 * op (SBX_CAP_PAUSE: every op on a paused sandbox resumes it first).
 */
#include "api/handle.h"
#include "clock.h"
#include "registry/provider.h"
#include "sessions/activity.h"
#include "sessions/internal.h"
#include "store/store.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A use is recorded at most this often per handle. */
#define TOUCH_EVERY_MS 1000

struct activity_ctx {
    sbx_sessions *m;
    char *key;
    struct sbx_exec_hooks inner; /* the memory stores' steps, or zero */
    pthread_mutex_t lock;
    int running;                 /* commands of this handle in progress */
    struct sbx_store_use_lock *use;
    int64_t touched_ms;          /* monotonic; 0: never */
};

static void touch(struct activity_ctx *ac)
{
    int64_t now = sbxs_now_ms();
    pthread_mutex_lock(&ac->lock);
    bool due = ac->touched_ms == 0 || now - ac->touched_ms >= TOUCH_EVERY_MS;
    if (due)
        ac->touched_ms = now;
    pthread_mutex_unlock(&ac->lock);
    sbx_error ignored;
    /* best effort: a store hiccup must not fail the command */
    if (due)
        sbxh_store_activity_touch(ac->m->store, ac->key, &ignored);
}

static int before_exec(void *ctx, sbx_handle *h, int *token, sbx_cancel *cancel,
                       sbx_error *err)
{
    struct activity_ctx *ac = ctx;
    pthread_mutex_lock(&ac->lock);
    if (ac->running++ == 0) {
        /* The evictor holds it exclusive only while it pauses or destroys:
         * wait that out, briefly. */
        int64_t deadline = sbxs_now_ms() + SBXH_SESSION_USE_WAIT_MS;
        sbx_error why;
        int rc;
        while ((rc = sbxh_store_use_lock(ac->m->store, ac->key, false, &ac->use, &why)) ==
                   SBX_E_EXISTS &&
               sbxs_now_ms() < deadline) {
            pthread_mutex_unlock(&ac->lock);
            if (sbxh_session_sleep(20, cancel, err) != SBX_OK) {
                pthread_mutex_lock(&ac->lock);
                ac->running--;
                pthread_mutex_unlock(&ac->lock);
                return SBX_E_CANCELLED;
            }
            pthread_mutex_lock(&ac->lock);
        }
        /* a lock that cannot be had is not worth refusing the command:
         * the evictor then sees the session's last use */
        if (rc != SBX_OK)
            ac->use = NULL;
    }
    pthread_mutex_unlock(&ac->lock);
    touch(ac);
    *token = -1;
    if (ac->inner.before) {
        int rc = ac->inner.before(ac->inner.ctx, h, token, cancel, err);
        if (rc != SBX_OK) {
            pthread_mutex_lock(&ac->lock);
            if (--ac->running == 0) {
                sbxh_store_use_unlock(ac->m->store, ac->use);
                ac->use = NULL;
            }
            pthread_mutex_unlock(&ac->lock);
            return rc;
        }
    }
    return SBX_OK;
}

static int after_exec(void *ctx, sbx_handle *h, int token, sbx_cancel *cancel,
                      sbx_error *err)
{
    struct activity_ctx *ac = ctx;
    sbx_error_clear(err);
    int rc = SBX_OK;
    if (ac->inner.after)
        rc = ac->inner.after(ac->inner.ctx, h, token, cancel, err);
    /* the end of a long command is a use too */
    touch(ac);
    pthread_mutex_lock(&ac->lock);
    if (--ac->running == 0) {
        sbxh_store_use_unlock(ac->m->store, ac->use);
        ac->use = NULL;
    }
    pthread_mutex_unlock(&ac->lock);
    return rc;
}

static void free_ctx(void *ctx)
{
    struct activity_ctx *ac = ctx;
    if (!ac)
        return;
    if (ac->inner.free)
        ac->inner.free(ac->inner.ctx);
    if (ac->use)
        sbxh_store_use_unlock(ac->m->store, ac->use);
    pthread_mutex_destroy(&ac->lock);
    free(ac->key);
    free(ac);
}

int sbxh_session_activity_hook(sbx_sessions *m, const char *key, sbx_handle *h,
                               sbx_error *err)
{
    struct activity_ctx *ac = calloc(1, sizeof *ac);
    if (!ac || !(ac->key = strdup(key))) {
        free(ac);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    ac->m = m;
    pthread_mutex_init(&ac->lock, NULL);
    /* take the memory steps over (set_hooks would free them) */
    ac->inner = h->hooks;
    memset(&h->hooks, 0, sizeof h->hooks);
    struct sbx_exec_hooks hooks = {before_exec, after_exec, free_ctx, ac};
    sbxh_handle_set_hooks(h, &hooks);
    /* attaching is a use */
    touch(ac);
    return SBX_OK;
}

/* ---- pause and resume ------------------------------------------------- */

/* The session's binding and provider; SBX_E_UNSUPPORTED naming the
 * provider when it cannot pause. */
static int pausable(sbx_sessions *m, const char *key, struct sbx_binding *b,
                    sbx_error *err)
{
    char label[13];
    sbxh_session_label(key, label);
    int rc = sbxh_store_get_binding(m->store, key, b, err);
    if (rc == SBX_E_NOT_FOUND)
        return sbx_error_set(err, SBX_E_NOT_FOUND, "session %s has no sandbox", label);
    if (rc != SBX_OK)
        return rc;
    if (b->deleting)
        return sbx_error_set(err, SBX_E_DENIED, "session %s is being deleted", label);
    sbx_provider *p;
    if ((rc = sbxh_session_provider(m, key, b->provider, &p, err)) != SBX_OK)
        return rc;
    if (!(sbx_provider_info_caps(sbx_provider_get_info(p)) & SBX_CAP_PAUSE))
        return sbx_error_set(err, SBX_E_UNSUPPORTED,
                             "session %s: provider \"%s\" cannot pause a sandbox (it "
                             "does not declare the pause capability)",
                             label, b->provider);
    return SBX_OK;
}

/* Attach to the bound sandbox directly (no hooks: this is not a use). */
static int attach_raw(sbx_sessions *m, const struct sbx_binding *b, sbx_cancel *cancel,
                      sbx_handle **h, sbx_error *err)
{
    sbx_provider *p;
    int rc = sbxh_session_provider(m, b->session_key, b->provider, &p, err);
    if (rc != SBX_OK)
        return rc;
    char label[13];
    sbxh_session_label(b->session_key, label);
    sbx_error why;
    rc = sbx_attach(p, b->session_key, b->external_id, cancel, h, &why);
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "session %s: %s", label, why.message);
    return SBX_OK;
}

int sbxh_session_pause_bound(sbx_sessions *m, const struct sbx_binding *b,
                             sbx_cancel *cancel, sbx_error *err)
{
    sbx_handle *h;
    int rc = attach_raw(m, b, cancel, &h, err);
    if (rc != SBX_OK)
        return rc;
    char label[13];
    sbxh_session_label(b->session_key, label);
    sbx_error why;
    rc = sbx_pause(h, cancel, &why);
    sbx_release(h);
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "session %s: pause: %s", label, why.message);
    return sbxh_store_activity_set_paused(m->store, b->session_key, true, err);
}

SBX_API int sbx_session_pause(sbx_sessions *m, const char *session_key,
                              sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    if (!m || !session_key || !*session_key)
        return sbx_error_set(err, SBX_E_INVALID, "pause: no manager or session key");
    struct sbx_binding b = {0};
    int rc = pausable(m, session_key, &b, err);
    if (rc == SBX_OK)
        rc = sbxh_session_pause_bound(m, &b, cancel, err);
    sbxh_binding_clear(&b);
    return rc;
}

SBX_API int sbx_session_unpause(sbx_sessions *m, const char *session_key,
                                sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    if (!m || !session_key || !*session_key)
        return sbx_error_set(err, SBX_E_INVALID, "resume: no manager or session key");
    struct sbx_binding b = {0};
    int rc = sbxh_store_get_binding(m->store, session_key, &b, err);
    char label[13];
    sbxh_session_label(session_key, label);
    if (rc == SBX_E_NOT_FOUND)
        rc = sbx_error_set(err, SBX_E_NOT_FOUND, "session %s has no sandbox", label);
    if (rc == SBX_OK && b.deleting)
        rc = sbx_error_set(err, SBX_E_DENIED, "session %s is being deleted", label);
    sbx_handle *h = NULL;
    if (rc == SBX_OK)
        rc = attach_raw(m, &b, cancel, &h, err);
    /* a provider without the capability never paused it: attached is
     * running */
    if (rc == SBX_OK &&
        (sbx_provider_info_caps(sbx_provider_get_info(h->provider)) & SBX_CAP_PAUSE)) {
        sbx_error why;
        if ((rc = sbx_resume(h, cancel, &why)) != SBX_OK)
            sbx_error_set(err, rc, "session %s: resume: %s", label, why.message);
    }
    sbx_release(h);
    if (rc == SBX_OK)
        rc = sbxh_store_activity_set_paused(m->store, session_key, false, err);
    sbxh_binding_clear(&b);
    return rc;
}

/* ---- what listings show ----------------------------------------------- */

void sbxh_session_activity_of(sbx_sessions *m, const char *key, int64_t created_at,
                              bool *paused, int64_t *last_used_at)
{
    struct sbx_store_activity a;
    bool found = false;
    sbx_error ignored;
    if (sbxh_store_activity_get(m->store, key, &a, &found, &ignored) != SBX_OK)
        found = false;
    *paused = found && a.paused;
    /* a session bound before the store kept last use: its creation */
    *last_used_at = found ? a.last_used_at : created_at;
}
