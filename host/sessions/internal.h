/*
 * internal.h - what the session manager's source files share
 * (internal to libsbx): the manager struct, the test crash points, intent
 * ownership checks, resource clean-up and package installation.
 */
#ifndef SBX_HOST_SESSION_INTERNAL_H
#define SBX_HOST_SESSION_INTERNAL_H

#include <sbx/session.h>

#include "store/store.h"

#include <pthread.h>

struct sbx_sessions {
    sbx_ctx *ctx;             /* borrowed */
    struct sbx_store *store;  /* owned */
    /* Keys being provisioned by a thread of this manager. All threads share
     * one owner token, so the store cannot tell them apart: they take
     * turns per key here instead. */
    pthread_mutex_t busy_lock;
    pthread_cond_t busy_done;
    char **busy;
    size_t nbusy, busy_cap;
    char owner[256];          /* this manager's intent owner token */
    char realm[128];          /* as it appears in owner tokens */
    int64_t lease_ms;
    int64_t wait_ms;
    char crash_at[64];        /* test hook (SBX_TEST_HOOKS builds): "" when unset */
    char stop_at[64];         /* test hook: SIGSTOP there, "" when unset */
    bool no_key_lock;         /* test hook: $SBX_TEST_NO_KEY_LOCK=1 skips the
                               * store's key lock (sessions/key_lock.c) */
    struct sbxh_pool *pools;  /* warm pools (sessions/pools.c) */
    size_t npools;
};

/* Default intent lease (5 minutes). */
#define SBX_SESSION_LEASE_MS 300000

/* Attempts for a provider destroy that fails transiently. */
#define SBX_SESSION_DESTROY_ATTEMPTS 5

/*
 * Test hook: when $SBX_TEST_CRASH_AT (read at open) names `step`, the
 * process kills itself with SIGKILL right there, as a crash would. Steps:
 * before-intent, after-admission, after-intent, after-create,
 * during-packages, before-publish, during-destroy, after-destroy. When
 * $SBX_TEST_STOP_AT names it, the process stops itself (SIGSTOP) there
 * instead, for a test that acts in between and then sends SIGCONT.
 */
void sbxh_session_crash_point(const sbx_sessions *m, const char *step);

/* The first 12 hex digits of a key's hash, for messages. */
void sbxh_session_label(const char *key, char out[13]);

/* Take / give back a key's turn among this manager's threads (see
 * struct sbx_sessions). Taking waits, honouring cancel: SBX_OK,
 * SBX_E_CANCELLED or SBX_E_NOMEM (err set). */
int sbxh_session_key_take(sbx_sessions *m, const char *key, sbx_cancel *cancel,
                          sbx_error *err);
void sbxh_session_key_give(sbx_sessions *m, const char *key);
/* Take the turn only if no thread has it: SBX_OK or SBX_E_EXISTS. */
int sbxh_session_key_try_take(sbx_sessions *m, const char *key, sbx_error *err);

/* Sleep ms milliseconds, waking early when cancel fires. Returns SBX_OK or
 * SBX_E_CANCELLED (err set). */
int sbxh_session_sleep(int64_t ms, sbx_cancel *cancel, sbx_error *err);

/* Read a caller's session spec only up to its size: when *spec is not
 * NULL, copy it into *copy and point *spec there. SBX_E_INVALID when its
 * size is not set (sessions/spec.c). */
/* A spec's declared ports: 1..65535, each once, at most
 * SBX_SESSION_PORTS_MAX; SBX_E_INVALID naming the bad one (spec.c). */
int sbxh_session_ports_check(const uint16_t *ports, size_t n, sbx_error *err);
int sbxh_session_spec_in(struct sbx_session_spec *copy, const struct sbx_session_spec **spec,
                         sbx_error *err);

/*
 * Whether an intent may be taken over: its owner is a process of this
 * machine that no longer exists, or its lease (lease_ms) expired. Never
 * true for the manager's own intents.
 */
bool sbxh_session_intent_stale(const sbx_sessions *m, const struct sbx_intent *in,
                               int64_t lease_ms);

/*
 * Take over a stale intent (checked with sbxh_session_intent_stale) without
 * stealing it from a worker that took it over in the meantime. SBX_OK when
 * the caller now owns it; SBX_E_EXISTS when someone else does;
 * SBX_E_NOT_FOUND when it is gone. *taken receives the intent.
 */
int sbxh_session_takeover(sbx_sessions *m, const struct sbx_intent *seen,
                          int64_t lease_ms, struct sbx_intent *taken,
                          sbx_error *err);

/*
 * Clean up an intent the manager owns: destroy the resource it names (when
 * it names none, call the provider's idempotent create to learn it, then
 * destroy it) and drop the intent. On failure the intent stays.
 */
int sbxh_session_clean_intent(sbx_sessions *m, const struct sbx_intent *in,
                              sbx_cancel *cancel, sbx_error *err);

/*
 * Clean up an intent that nobody is working on: another owner's stale
 * intent (taken over first), or this manager's own leftover from a failed
 * call (when no thread of the manager has the key's turn). SBX_OK when
 * cleaned; SBX_E_EXISTS when it is someone's live work, or another worker
 * took it or finished it first; else the clean-up's error (the intent is
 * kept).
 */
int sbxh_session_reclaim(sbx_sessions *m, const struct sbx_intent *in,
                         int64_t lease_ms, sbx_cancel *cancel, sbx_error *err);

/* Look up the provider of an existing binding or intent; SBX_E_NOT_FOUND
 * with a message naming the provider and the session when it is not
 * enabled. */
int sbxh_session_provider(sbx_sessions *m, const char *key, const char *name,
                          sbx_provider **out, sbx_error *err);

/* Destroy (key, ref) on p, retrying transient failures with backoff. */
int sbxh_session_destroy_resource(sbx_sessions *m, sbx_provider *p, const char *key,
                                  const char *ref, sbx_cancel *cancel, sbx_error *err);

/*
 * sbx_create (sbx_fork of fork_src when it is not NULL) / sbx_destroy of
 * `key` (the key the provider sees: a pool member's own for a claimed
 * member) holding the key's lock in the store
 * when its locks are a server's (sessions/key_lock.c; the lock order is
 * there), waiting for another worker's create or destroy of the key,
 * honouring cancel. A lock connection lost before or during the call
 * fails it with SBX_E_UNAVAILABLE naming the lost lock (a create's handle
 * is then released).
 */
int sbxh_session_create(sbx_sessions *m, sbx_provider *p, sbx_handle *fork_src,
                        const char *key, const struct sbx_create_options *opts,
                        sbx_cancel *cancel, sbx_handle **out, sbx_error *err);
int sbxh_session_destroy(sbx_sessions *m, sbx_provider *p, const char *key,
                         const char *ref, sbx_cancel *cancel, sbx_error *err);

/*
 * Finish the deletion of a fenced session: destroy its bound resource,
 * clean up a stale intent, remove the session. When a live worker holds
 * an intent, waits for it up to the manager's wait time if `wait` is set,
 * else returns SBX_E_UNAVAILABLE. SBX_OK also when the session is gone.
 */
int sbxh_session_finish_delete(sbx_sessions *m, const char *key, bool wait,
                               sbx_cancel *cancel, sbx_error *err);

/*
 * Install the spec's packages in a freshly created sandbox, as argument
 * vectors run through exec: for each manager in order of first appearance,
 * check the manager is there (its version command), then install its
 * packages in one command. Calls `progress(ud, manager)` before each
 * manager (the caller refreshes its intent there). The command lines come
 * from cfg's package_managers (host/config/package_managers.h), defaults
 * elsewhere. SBX_E_NO_COMMAND when
 * a manager is missing, SBX_E_IO when an install failed (the message
 * quotes the end of its output), or the exec's error.
 */
/* The egress policies of a limited-network spec (sessions/egress.c):
 * setup (allow, setup_allow and the package registries) and final
 * (allow). limited is false for any other spec. Targets are borrowed
 * from the spec. */
struct sbx_session_egress {
    bool limited;
    struct sbx_egress_policy setup, final;
    const char **setup_v, **final_v;
};
int sbxh_session_egress_init(struct sbx_session_egress *eg, const struct sbx_session_spec *spec,
                             sbx_error *err);
void sbxh_session_egress_free(struct sbx_session_egress *eg);

struct sbx_config;
int sbxh_session_install_packages(sbx_handle *h, const struct sbx_config *cfg,
                                  const struct sbx_session_spec *spec,
                                  int (*progress)(void *ud, const char *manager,
                                                  sbx_error *err),
                                  void *ud, sbx_cancel *cancel, sbx_error *err);

/*
 * The key the session's sandbox was created under: the pool member's key
 * when it was claimed from a warm pool (attach and destroy pass that key,
 * hence its key_hash, as SBX_CAP_POOL says), else the session key itself.
 * *use points at buf or at key (sessions/pools.c).
 */
int sbxh_session_sandbox_key(sbx_sessions *m, const char *key, char *buf,
                             const char **use, sbx_error *err);

/*
 * What provisioning does after the sandbox exists (acquire.c): manifest,
 * packages, the final egress policy, a snapshot, publish, memory hook and
 * run_as. Takes over h and *eg (freed). member_key: the pool member the
 * sandbox came from (its row is dropped once published), or NULL.
 */
int sbxh_session_provision_rest(sbx_sessions *m, sbx_provider *p, const char *key,
                                const struct sbx_session_spec *spec,
                                struct sbx_session_egress *eg, sbx_handle *h,
                                const char *member_key, sbx_cancel *cancel,
                                sbx_handle **out, bool *retry, sbx_error *err);

/*
 * sbx_session_acquire of a new session whose sandbox the provider makes
 * from src's (sbx_fork, SBX_CAP_FORK) instead of creating it; never from
 * a warm pool (acquire.c). SBX_E_UNSUPPORTED when the provider declined
 * this source: nothing was made and the intent was dropped.
 */
int sbxh_session_acquire_fork(sbx_sessions *m, const char *session_key,
                              const struct sbx_session_spec *spec, sbx_handle *src,
                              sbx_cancel *cancel, sbx_handle **out,
                              struct sbx_acquire_info *info, sbx_error *err);

#endif
