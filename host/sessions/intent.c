/*
 * intent.c - what acquire, delete and reconcile share: deciding
 * whether an intent's owner is gone, taking an intent over safely, cleaning
 * up the resource an intent names, destroying with retries, the test crash
 * points and cancellable sleeps.
 */
#include "base/cancel.h"
#include "clock.h"
#include "base/process_id.h"
#include "sessions/internal.h"
#include "store/pools.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Test builds only (SBX_TEST_HOOKS): a shipped library never kills its
 * process. */
void sbxh_session_crash_point(const sbx_sessions *m, const char *step)
{
#ifdef SBX_TEST_HOOKS
    if (m->crash_at[0] && !strcmp(m->crash_at, step))
        raise(SIGKILL);
    /* a race set up by the test: it acts while this worker is stopped */
    if (m->stop_at[0] && !strcmp(m->stop_at, step))
        raise(SIGSTOP);
#else
    (void)m;
    (void)step;
#endif
}

static bool key_busy(const sbx_sessions *m, const char *key)
{
    for (size_t i = 0; i < m->nbusy; i++)
        if (!strcmp(m->busy[i], key))
            return true;
    return false;
}

/* Take the key's turn; when wait is false and another thread has it,
 * SBX_E_EXISTS at once. */
static int key_take(sbx_sessions *m, const char *key, bool wait, sbx_cancel *cancel,
                    sbx_error *err)
{
    char *copy = strdup(key);
    if (!copy)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    pthread_mutex_lock(&m->busy_lock);
    while (key_busy(m, key)) {
        if (!wait) {
            pthread_mutex_unlock(&m->busy_lock);
            free(copy);
            return SBX_E_EXISTS;
        }
        if (sbx_cancel_fired(cancel)) {
            pthread_mutex_unlock(&m->busy_lock);
            free(copy);
            return sbx_error_set(err, SBX_E_CANCELLED, "cancelled");
        }
        /* Wake now and then to notice a cancellation. */
        struct timespec until = sbxs_deadline_in(CLOCK_REALTIME, 100);
        pthread_cond_timedwait(&m->busy_done, &m->busy_lock, &until);
    }
    if (m->nbusy == m->busy_cap) {
        size_t cap = m->busy_cap ? m->busy_cap * 2 : 8;
        char **grown = realloc(m->busy, cap * sizeof *grown);
        if (!grown) {
            pthread_mutex_unlock(&m->busy_lock);
            free(copy);
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        }
        m->busy = grown;
        m->busy_cap = cap;
    }
    m->busy[m->nbusy++] = copy;
    pthread_mutex_unlock(&m->busy_lock);
    return SBX_OK;
}

int sbxh_session_key_take(sbx_sessions *m, const char *key, sbx_cancel *cancel,
                          sbx_error *err)
{
    return key_take(m, key, true, cancel, err);
}

int sbxh_session_key_try_take(sbx_sessions *m, const char *key, sbx_error *err)
{
    return key_take(m, key, false, NULL, err);
}

void sbxh_session_key_give(sbx_sessions *m, const char *key)
{
    pthread_mutex_lock(&m->busy_lock);
    for (size_t i = 0; i < m->nbusy; i++) {
        if (!strcmp(m->busy[i], key)) {
            free(m->busy[i]);
            m->busy[i] = m->busy[--m->nbusy];
            break;
        }
    }
    pthread_cond_broadcast(&m->busy_done);
    pthread_mutex_unlock(&m->busy_lock);
}

/* Whether `owner` ("realm:pid:start:random", see sbxh_store_owner_token)
 * names a process of this realm (this boot, this pid namespace) that no
 * longer exists. Processes of other machines or namespaces cannot be
 * checked: only their lease tells. */
static bool owner_dead(const sbx_sessions *m, const char *owner)
{
    size_t rlen = strlen(m->realm);
    if (strncmp(owner, m->realm, rlen) != 0 || owner[rlen] != ':' ||
        !strcmp(m->realm, "unknown"))
        return false;
    char *end;
    errno = 0;
    long pid = strtol(owner + rlen + 1, &end, 10);
    if (*end != ':' || errno || pid <= 0)
        return false;
    unsigned long long start = strtoull(end + 1, &end, 10);
    if (*end != ':')
        return false;
    if (pid == (long)getpid())
        return false; /* another manager of this very process: alive */
    return sbxh_process_gone((pid_t)pid, start);
}

bool sbxh_session_intent_stale(const sbx_sessions *m, const struct sbx_intent *in,
                               int64_t lease_ms)
{
    if (!strcmp(in->owner, m->owner))
        return false;
    return in->age_ms >= lease_ms || owner_dead(m, in->owner);
}

int sbxh_session_takeover(sbx_sessions *m, const struct sbx_intent *seen,
                          int64_t lease_ms, struct sbx_intent *taken,
                          sbx_error *err)
{
    /* The store takes over when the intent is at least `lease` old. Asking
     * for the age we saw (at least 1 ms) refuses an intent that somebody
     * else took over or refreshed since we read it: its age restarted. */
    int64_t lease = seen->age_ms >= lease_ms ? lease_ms : seen->age_ms;
    if (lease < 1) {
        /* Seen in the millisecond it was written (a dead owner's intent
         * found at once): let one pass, or the age test below refuses an
         * intent nobody touched since. */
        struct timespec two_ms = {0, 2000000};
        nanosleep(&two_ms, NULL);
        lease = 1;
    }
    return sbxh_store_takeover_intent(m->store, seen->session_key, m->owner, lease,
                                      taken, err);
}

int sbxh_session_provider(sbx_sessions *m, const char *key, const char *name,
                          sbx_provider **out, sbx_error *err)
{
    sbx_error why;
    int rc = sbx_provider_lookup(m->ctx, name, out, &why);
    if (rc == SBX_OK)
        return SBX_OK;
    char label[13];
    sbxh_session_label(key, label);
    return sbx_error_set(err, rc,
                         "session %s belongs to provider \"%s\", which is not "
                         "enabled in this configuration: %s",
                         label, name, why.message);
}

int sbxh_session_destroy_resource(sbx_sessions *m, sbx_provider *p, const char *key,
                                  const char *ref, sbx_cancel *cancel, sbx_error *err)
{
    int64_t backoff = 100;
    for (int attempt = 1;; attempt++) {
        int rc = sbxh_session_destroy(m, p, key, ref, cancel, err);
        if (rc == SBX_OK || !sbx_status_is_transient((sbx_status)rc) ||
            attempt >= SBX_SESSION_DESTROY_ATTEMPTS)
            return rc;
        sbx_error slept;
        if (sbxh_session_sleep(backoff, cancel, &slept) != SBX_OK)
            return rc;
        backoff *= 2;
    }
}

int sbxh_session_clean_intent(sbx_sessions *m, const struct sbx_intent *in,
                              sbx_cancel *cancel, sbx_error *err)
{
    sbx_provider *p;
    int rc = sbxh_session_provider(m, in->session_key, in->provider, &p, err);
    if (rc != SBX_OK)
        return rc;
    char ref[SBX_REF_MAX];
    char skey_buf[SBX_STORE_KEY_MAX + 1];
    const char *skey = in->session_key;
    if (in->external_id &&
        (rc = sbxh_session_sandbox_key(m, in->session_key, skey_buf, &skey, err)) != SBX_OK)
        return rc;
    if (in->external_id) {
        snprintf(ref, sizeof ref, "%s", in->external_id);
    } else {
        /* The crash came before the reference was recorded (maybe before
         * create ran at all). create is idempotent: calling it again
         * returns the resource of this key, which is then destroyed. */
        struct sbx_create_options copts;
        memset(&copts, 0, sizeof copts);
        copts.size = sizeof copts;
        copts.spec_hash = in->spec_hash;
        sbx_handle *h;
        rc = sbxh_session_create(m, p, NULL, in->session_key, &copts, cancel, &h, err);
        if (rc != SBX_OK)
            return rc;
        snprintf(ref, sizeof ref, "%s", sbx_handle_ref(h));
        sbx_release(h);
        /* Record it, so that a crash from here on leaves a reference. */
        rc = sbxh_store_update_intent(m->store, in->session_key, m->owner, "cleaning",
                                      ref, err);
        if (rc != SBX_OK)
            return rc;
    }
    rc = sbxh_session_destroy_resource(m, p, skey, ref, cancel, err);
    if (rc != SBX_OK)
        return rc;
    /* a claimed pool member's key goes with its sandbox */
    if (skey != in->session_key &&
        (rc = sbxh_store_drop_sandbox_key(m->store, in->session_key, err)) != SBX_OK)
        return rc;
    return sbxh_store_release_intent(m->store, in->session_key, m->owner, err);
}

int sbxh_session_reclaim(sbx_sessions *m, const struct sbx_intent *in,
                         int64_t lease_ms, sbx_cancel *cancel, sbx_error *err)
{
    if (!strcmp(in->owner, m->owner)) {
        /* Our own: left by an earlier call of this manager that failed,
         * unless a thread of ours is on it right now. */
        int rc = sbxh_session_key_try_take(m, in->session_key, err);
        if (rc != SBX_OK)
            return rc;
        struct sbx_intent now = {0};
        rc = sbxh_store_get_intent(m->store, in->session_key, &now, err);
        if ((rc == SBX_OK && strcmp(now.owner, m->owner) != 0) ||
            rc == SBX_E_NOT_FOUND)
            rc = SBX_E_EXISTS; /* taken over or finished meanwhile */
        if (rc == SBX_OK)
            rc = sbxh_session_clean_intent(m, &now, cancel, err);
        sbxh_intent_clear(&now);
        sbxh_session_key_give(m, in->session_key);
        return rc;
    }
    if (!sbxh_session_intent_stale(m, in, lease_ms))
        return SBX_E_EXISTS;
    struct sbx_intent taken = {0};
    int rc = sbxh_session_takeover(m, in, lease_ms, &taken, err);
    if (rc == SBX_OK)
        rc = sbxh_session_clean_intent(m, &taken, cancel, err);
    else if (rc == SBX_E_NOT_FOUND)
        rc = SBX_E_EXISTS; /* finished meanwhile */
    sbxh_intent_clear(&taken);
    return rc;
}

int sbxh_session_sandbox_key(sbx_sessions *m, const char *key, char *buf,
                             const char **use, sbx_error *err)
{
    bool found = false;
    *use = key;
    int rc = sbxh_store_sandbox_key(m->store, key, buf, &found, err);
    if (rc == SBX_OK && found)
        *use = buf;
    return rc;
}
