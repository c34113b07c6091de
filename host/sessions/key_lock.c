/*
 * key_lock.c - the session manager's provider create and destroy of one
 * key, serialized across workers.
 *
 * libsbx's own key lock (registry/key_lock.c) keeps create, attach and
 * destroy of one key from overlapping among the threads of one process.
 * With the PostgreSQL store the workers may be processes on many machines:
 * here each create and destroy the manager makes also holds the key's KEY
 * lock (store.h), a session-level advisory lock on a connection of its own,
 * exclusive, for the length of the provider call. The server drops it when
 * its holder dies (kill -9 at once; a vanished machine once keepalives give
 * up), so a waiter goes on by itself. With SQLite (one machine) the
 * in-process lock and the intent stay the only serialization.
 *
 * Lock order (one order everywhere, so no two workers wait for each other
 * in a cycle): the manager's per-key turn among its threads, then the use
 * lock, then the memory lock, then this KEY lock, then libsbx's in-process
 * key lock inside sbx_create / sbx_destroy. The KEY lock is innermost among
 * the store's locks: while it is held nothing else is waited for but the
 * provider call itself.
 */
#include "sessions/internal.h"
#include <poll.h>
#include <errno.h>
#include "clock.h"
#include "base/cancel.h"

#include <stdio.h>
#include <string.h>

/* (Here rather than in intent.c, which calls this file: the session label
 * of a key and a sleep that honours cancel, used by the whole manager.) */
void sbxh_session_label(const char *key, char out[13])
{
    sbxh_store_key_label(key, out);
}

int sbxh_session_sleep(int64_t ms, sbx_cancel *cancel, sbx_error *err)
{
    int64_t end = sbxs_now_ms() + ms;
    for (;;) {
        if (sbx_cancel_fired(cancel))
            return sbx_error_set(err, SBX_E_CANCELLED, "cancelled");
        int64_t left = end - sbxs_now_ms();
        if (left <= 0)
            return SBX_OK;
        struct pollfd pfd = {cancel ? cancel->fd : -1, POLLIN, 0};
        if (poll(&pfd, 1, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR)
            return sbx_error_set(err, SBX_E_IO, "poll: %s", strerror(errno));
    }
}


/* The longest sleep between two tries of a held key: a waiter notices a
 * released (or dead) holder within this much. */
#define KEY_LOCK_POLL_MAX_MS 50

static int key_lock(sbx_sessions *m, const char *key, sbx_cancel *cancel,
                    struct sbx_store_lock **out, sbx_error *err)
{
    *out = NULL;
    if (!sbxh_store_locks_on_server(m->store))
        return SBX_OK;
#ifdef SBX_TEST_HOOKS
    /* test hook: a build that shows what the tests catch without it */
    if (m->no_key_lock)
        return SBX_OK;
#endif
    struct sbx_store_lock *l;
    char label[13];
    sbxh_session_label(key, label);
    sbx_error why;
    int rc = sbxh_store_lock_open(m->store, key, SBX_STORE_LOCK_KEY, &l, &why);
    if (rc != SBX_OK)
        return sbx_error_set(err, rc, "session %s: cannot take its key lock: %s", label,
                             why.message);
    for (int64_t ms = 2;; ms = ms < KEY_LOCK_POLL_MAX_MS ? ms * 2 : KEY_LOCK_POLL_MAX_MS) {
        bool got = false;
        rc = sbxh_store_lock_try(l, SBX_STORE_EXCLUSIVE, &got, &why);
        if (rc != SBX_OK) {
            sbxh_store_lock_close(l);
            return sbx_error_set(err, rc, "session %s: cannot take its key lock: %s",
                                 label, why.message);
        }
        if (got)
            break;
        if ((rc = sbxh_session_sleep(ms, cancel, err)) != SBX_OK) {
            sbxh_store_lock_close(l);
            return rc;
        }
    }
    *out = l;
    return SBX_OK;
}

/* Drop the lock after the provider call. SBX_E_UNAVAILABLE (err set) when
 * its connection was lost meanwhile: another worker may have called the
 * provider for the key at the same time. */
static int key_unlock(const char *key, struct sbx_store_lock *l,
                      const char *op, sbx_error *err)
{
    if (!l)
        return SBX_OK;
    bool got = false;
    sbx_error why;
    int rc = sbxh_store_lock_try(l, SBX_STORE_UNLOCKED, &got, &why);
    sbxh_store_lock_close(l);
    if (rc == SBX_OK)
        return SBX_OK;
    char label[13];
    sbxh_session_label(key, label);
    return sbx_error_set(err, SBX_E_UNAVAILABLE,
                         "session %s: the key lock was lost during %s (%s): another "
                         "worker may have called the provider for this key meanwhile",
                         label, op, why.message);
}

int sbxh_session_create(sbx_sessions *m, sbx_provider *p, sbx_handle *fork_src,
                        const char *key, const struct sbx_create_options *opts,
                        sbx_cancel *cancel, sbx_handle **out, sbx_error *err)
{
    *out = NULL;
    struct sbx_store_lock *l;
    int rc = key_lock(m, key, cancel, &l, err);
    if (rc != SBX_OK)
        return rc;
    sbx_handle *h = NULL;
    rc = fork_src ? sbx_fork(fork_src, key, opts, cancel, &h, err)
                  : sbx_create(p, key, opts, cancel, &h, err);
    sbx_error lost;
    int urc = key_unlock(key, l, "create", &lost);
    if (rc != SBX_OK)
        return rc;
    if (urc != SBX_OK) {
        /* made, but maybe while another worker destroyed it: the caller
         * keeps its intent (no reference), which a reconcile cleans up */
        sbx_release(h);
        *err = lost;
        return urc;
    }
    *out = h;
    return SBX_OK;
}

int sbxh_session_destroy(sbx_sessions *m, sbx_provider *p, const char *key,
                         const char *ref, sbx_cancel *cancel, sbx_error *err)
{
    struct sbx_store_lock *l;
    int rc = key_lock(m, key, cancel, &l, err);
    if (rc != SBX_OK)
        return rc;
    rc = sbx_destroy(p, key, ref, cancel, err);
    sbx_error lost;
    int urc = key_unlock(key, l, "destroy", &lost);
    if (rc == SBX_OK && urc != SBX_OK) {
        *err = lost;
        rc = urc;
    }
    return rc;
}
