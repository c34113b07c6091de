/*
 * sbx/session.h - durable sessions: one logical sandbox per session key.
 *
 * The session manager sits between a consumer (an agent runtime, the `sbx`
 * CLI) and the providers. It keeps, in a store (SQLite or PostgreSQL), which
 * session key owns which provider resource, so that any worker process, on
 * any machine sharing the store, finds the same sandbox for the same key.
 *
 * Life cycle of a key (see docs/SESSIONS.md for the long form):
 *  - acquire: the key's binding, if any, is attached. Otherwise the caller
 *    claims a provisioning intent (written before any provider call), calls
 *    the provider's create, records the resource's reference on the intent,
 *    installs the spec's packages, and only then publishes the binding. Of N
 *    workers racing on one key exactly one creates; the others wait for the
 *    binding and attach to it.
 *  - attach (acquire-existing): only attaches. A key without a binding, or a
 *    binding whose resource is gone, is SBX_E_NOT_FOUND; a lost resource is
 *    never replaced by an empty sandbox.
 *  - delete: fence the session (no new admissions), destroy the resource
 *    with retries, remove the binding and the session.
 *  - reconcile: clean up what crashed workers left behind (see
 *    sbx_sessions_reconcile).
 *
 * Handles returned by acquire and attach are ordinary sbx_handle objects:
 * use sbx_exec, sbx_read, sbx_write on them and sbx_release when done (the
 * sandbox stays).
 *
 * A manager may be used from several threads at once (the store serializes
 * its calls); it must not be used in a child after fork: open another.
 *
 * Conventions are those of sbx/sbx.h: int results are sbx_status values,
 * errors are filled into a caller's sbx_error, strings passed in are
 * borrowed for the call. Messages name a session by the first 12 hex digits
 * of its key hash, never by the raw key.
 */
#ifndef SBX_SESSION_H
#define SBX_SESSION_H

#include <sbx/sbx.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A session manager: a host context plus an open store. */
typedef struct sbx_sessions sbx_sessions;

/* Package managers a spec may name (stable numbers). */
enum sbx_package_manager {
    SBX_PKG_APT = 1,
    SBX_PKG_CARGO = 2,
    SBX_PKG_GEM = 3,
    SBX_PKG_GO = 4,
    SBX_PKG_NPM = 5,
    SBX_PKG_PIP = 6
};

/* One environment package: a manager and the name it installs ("curl",
 * "requests==2.31.0", "golang.org/x/tools/cmd/goimports@v0.1.0"). */
struct sbx_package {
    int manager;      /* enum sbx_package_manager */
    const char *name; /* must not be empty or start with '-' */
};

/*
 * What a session's sandbox must provide. Zero-initialize and set size.
 * The spec is hashed (sbx_session_spec_hash) and the hash is recorded on the
 * binding; the provider is not part of the hash.
 */
struct sbx_session_spec {
    uint32_t size;
    const char *provider;      /* for a new binding; NULL: the default */
    uint64_t caps;             /* capabilities the session will use */
    const struct sbx_package *packages; /* installed after create, in order */
    size_t npackages;          /* a non-empty set needs SBX_CAP_PACKAGES */
    /* A limited network (needs SBX_CAP_EGRESS: refused at admission, before
     * anything is provisioned, by a provider without it). The sandbox is
     * created denying all egress but allow and setup_allow; packages are
     * installed; then only allow stays, before the binding is published;
     * every attach repairs drift from it. Targets are host names or
     * "*.domain" patterns. Part of the spec hash. */
    bool limited_network;
    const char *const *allow;  /* nallow targets allowed for good */
    size_t nallow;
    const char *const *setup_allow; /* extra targets allowed while packages
                                       install (package registries) */
    size_t nsetup_allow;
    /* A workspace manifest (sbx/manifest.h), applied right after create,
     * before packages; its digest is part of the spec hash. One with users,
     * groups or run_as needs SBX_CAP_USERS (refused at admission, naming
     * the provider and the capability, by a provider without it); its
     * run_as is recorded with the digest, and every handle acquire, attach
     * and resume hand out for the session acts as that user
     * (sbx_handle_set_user), in this process or a later one. Borrowed for
     * the call. */
    const struct sbx_manifest *manifest;
    /* Memory stores shown at /mnt/memory/<slug> (needs SBX_CAP_MEMORY;
     * every store must exist). Before each command the mount holds the
     * store's heads; after it, a read-write attachment's changes are
     * committed with a per-path precondition (docs/MEMORY.md). Part of
     * the spec hash. */
    const struct sbx_memory_attachment *memory;
    size_t nmemory;
    /* A snapshot file (sbx_snapshot_restore) restored into a new sandbox's
     * workspace after packages and egress, before the binding is
     * published: a restore that fails destroys the sandbox (or leaves the
     * intent for the reconciler when even that fails), so no session is
     * ever published with a workspace that is not the snapshot. Used only
     * when this call creates the sandbox (an existing binding is attached
     * as it is: see sbx_acquire_info.created). Not part of the spec hash.
     * Borrowed for the call. */
    const char *snapshot;
    /* TCP ports the sandbox will listen on, to be reachable from outside
     * through sbx_port_resolve (needs SBX_CAP_PORTS: refused at admission,
     * naming the provider and the capability, by a provider without it).
     * 1 to 65535, each at most once, at most SBX_SESSION_PORTS_MAX. When
     * nports is 0 the configuration's session.ports apply (docs/CONFIG.md).
     * Part of the spec hash, as a set. */
    const uint16_t *ports;
    size_t nports;
};

/* The most ports a session spec may declare. */
#define SBX_SESSION_PORTS_MAX 64

/* Options of sbx_sessions_open. Zero-initialize and set size; zero/NULL
 * members take the defaults described. */
struct sbx_sessions_options {
    uint32_t size;
    const char *store_driver; /* "sqlite"/"postgres"; else from the context's
                                 configuration (see sbx_sessions_open) */
    const char *store_target; /* a file for sqlite, a DSN for postgres */
    int64_t lease_ms;         /* an intent not updated for this long is
                                 taken over by others; 0: 300 000 (5 min) */
    int64_t wait_ms;          /* how long acquire waits for another worker's
                                 provisioning; 0: the lease */
    bool ignore_environment;  /* do not read SBX_STORE_DSN, XDG_STATE_HOME,
                                 HOME (tests) */
};

/*
 * Open a session manager over ctx (which must outlive it).
 *
 * The store is, in order of precedence: opts->store_driver/store_target;
 * else the configuration's `store` section (sbx_config_store_driver/path/
 * dsn) with $SBX_STORE_DSN replacing the configured dsn; the driver defaults
 * to "postgres" when a dsn is known and to "sqlite" otherwise; the SQLite
 * file defaults to $XDG_STATE_HOME/sbx/sbx.db (else ~/.local/state/sbx/
 * sbx.db), whose directory is created (mode 0700) when missing.
 *
 * Migrations are applied. Errors: those of the store (SBX_E_CONFIG for an
 * unknown driver or a malformed DSN, SBX_E_UNAVAILABLE for an unreachable
 * server, SBX_E_IO for an unusable file), SBX_E_NOMEM. Messages never
 * contain a password.
 */
SBX_API int sbx_sessions_open(sbx_ctx *ctx, const struct sbx_sessions_options *opts,
                              sbx_sessions **out, sbx_error *err);

/* Close a manager (handles obtained from it stay valid: they belong to the
 * context). NULL is ignored. */
SBX_API void sbx_sessions_close(sbx_sessions *m);

/* "sqlite" or "postgres": the store driver in use. */
SBX_API const char *sbx_sessions_store_driver(const sbx_sessions *m);

/*
 * The hash of a spec: lowercase hex SHA-256 of a canonical text of its
 * capabilities and packages (in order), into out[SBX_KEY_HASH_LEN + 1].
 * spec NULL hashes like an empty spec. SBX_E_INVALID for a package with an
 * unknown manager or a bad name (the message names it).
 */
SBX_API int sbx_session_spec_hash(const struct sbx_session_spec *spec,
                                  char out[SBX_KEY_HASH_LEN + 1], sbx_error *err);

/* Parse "manager:name" ("pip:requests==2.31.0") into *out; out->name points
 * into text. SBX_E_INVALID naming the problem otherwise. */
SBX_API int sbx_package_parse(const char *text, struct sbx_package *out,
                              sbx_error *err);

/* Name of a package manager ("apt", ...), or NULL when unknown. */
SBX_API const char *sbx_package_manager_name(int manager);

/* What acquire did (all false when it failed). */
/* Filled by sbx_session_acquire; set size = sizeof before the call (only
 * that much is written). */
struct sbx_acquire_info {
    uint32_t size;
    bool created;      /* this call provisioned the sandbox */
    bool spec_changed; /* the binding was made from another spec: the given
                          spec was NOT applied (recorded_spec_hash says
                          which one is in force) */
    char recorded_spec_hash[SBX_KEY_HASH_LEN + 1]; /* "" when none recorded */
    char provider[64]; /* the provider of the binding */
    bool pooled;       /* created is true and the sandbox was claimed from a
                          warm pool (sbx_pools_list) rather than created */
};

/*
 * Ensure the sandbox of a key and return a handle to it.
 *
 * When the key is bound, attaches (a lost resource is SBX_E_NOT_FOUND, as
 * for sbx_session_attach). When spec is not NULL its hash is compared with
 * the recorded one; a difference is reported in info->spec_changed and is
 * not applied. spec NULL means "as recorded" for a bound key and an empty
 * spec for a new one.
 *
 * When the key is not bound: admission first, from the descriptor alone (no
 * provider init, no credentials): spec->caps plus SBX_CAP_PACKAGES for a
 * non-empty package set must be declared by the provider, else
 * SBX_E_UNSUPPORTED naming both and nothing is written or provisioned.
 * Then the intent is claimed, the resource created, its reference recorded
 * on the intent, packages installed (each manager checked first), and the
 * binding published. A failure after the intent was written leaves the
 * intent (and the resource it names) for a retry or for the reconciler; the
 * sandbox is never handed out half-provisioned.
 *
 * When another worker holds the intent, waits (polling) until it publishes,
 * up to the manager's wait time (SBX_E_TIMEOUT), and attaches. An intent
 * whose owner is dead (a process of this machine that no longer exists) or
 * whose lease expired is taken over: its resource is destroyed and the key
 * provisioned afresh.
 *
 * Other errors: SBX_E_DENIED while the session is being deleted,
 * SBX_E_NOT_FOUND for a binding naming a provider that is not enabled (the
 * message names it), SBX_E_CANCELLED, provider and store errors. info may
 * be NULL. The caller releases *out with sbx_release.
 */
SBX_API int sbx_session_acquire(sbx_sessions *m, const char *session_key,
                                const struct sbx_session_spec *spec,
                                sbx_cancel *cancel, sbx_handle **out,
                                struct sbx_acquire_info *info, sbx_error *err);

/*
 * Attach to the existing sandbox of a key; never creates anything.
 * SBX_E_NOT_FOUND when the key has no binding, or when its resource is gone
 * (the message says the sandbox is lost and will not be recreated);
 * SBX_E_DENIED while the session is being deleted; SBX_E_NOT_FOUND naming
 * the provider when the binding's provider is not enabled.
 */
SBX_API int sbx_session_attach(sbx_sessions *m, const char *session_key,
                               sbx_cancel *cancel, sbx_handle **out,
                               sbx_error *err);

/*
 * Delete a session: fence it (acquire and attach are refused from then on),
 * destroy its resource (transient provider errors are retried with backoff),
 * then remove the binding and the session row. An intent left by a dead or
 * expired owner is cleaned up on the way; one held by a live worker is
 * waited for (that worker's publish is refused and it destroys what it
 * made). SBX_E_NOT_FOUND when the key has no session. On failure the
 * session stays fenced and sbx_sessions_reconcile finishes the deletion.
 */
SBX_API int sbx_session_delete(sbx_sessions *m, const char *session_key,
                               sbx_cancel *cancel, sbx_error *err);

/* What a later process needs to reconnect to a session: no credential,
 * no host path. Zero-initialize and set size. */
struct sbx_session_state {
    uint32_t size;
    char provider[65];
    char reference[1025];       /* the provider's opaque reference */
    char spec_hash[65];         /* "" when none was recorded */
    char manifest_digest[65];   /* "" when provisioned without a manifest */
    int64_t created_at;         /* ms since the epoch */
    bool deleting;
    /* The manifest's run_as: every handle of the session acts as this
     * user (sbx_handle_set_user); "" for the sandbox's default user. */
    char run_as[SBX_USER_NAME_MAX + 1];
    /* Paused by sbx_session_pause or the idle evictor, and not used
     * since; and the last use (ms since the epoch: an attach, a command;
     * created_at for a session not used since it was made). */
    bool paused;
    int64_t last_used_at;
};

/* The state of a session with a sandbox. SBX_E_NOT_FOUND when it has none. */
SBX_API int sbx_session_state(sbx_sessions *m, const char *session_key,
                              struct sbx_session_state *out, sbx_error *err);

/*
 * Attach to a session's sandbox only when the caller holds the manifest it
 * was provisioned with (the same digest; NULL for a session made without
 * one): otherwise SBX_E_DENIED naming the recorded digest's start. A
 * paused session is resumed first (sbx_session_unpause). Then as
 * sbx_session_attach.
 */
SBX_API int sbx_session_resume(sbx_sessions *m, const char *session_key,
                               const struct sbx_manifest *manifest, sbx_cancel *cancel,
                               sbx_handle **out, sbx_error *err);

/*
 * Pause a session's sandbox (its provider must declare SBX_CAP_PAUSE, else
 * SBX_E_UNSUPPORTED naming it) and mark the session paused in the store.
 * What survives a pause is the provider's (docs/providers/). Idempotent.
 * Any later use of the session, from any worker, resumes it transparently
 * (the provider resumes a paused sandbox before any op) and clears the
 * mark. SBX_E_NOT_FOUND without a sandbox, SBX_E_DENIED while deleted.
 */
SBX_API int sbx_session_pause(sbx_sessions *m, const char *session_key,
                              sbx_cancel *cancel, sbx_error *err);

/*
 * Resume a session's sandbox now (rather than at its next use) and clear
 * its paused mark. A session that is not paused is SBX_OK; so is one whose
 * provider cannot pause. Errors as for sbx_session_pause.
 */
SBX_API int sbx_session_unpause(sbx_sessions *m, const char *session_key,
                                sbx_cancel *cancel, sbx_error *err);

/*
 * Fork: a new session `to` whose workspace starts as a copy of the
 * workspace of `from`: through the provider's own snapshot where it has
 * one (SBX_CAP_FORK; see sbx_session_fork_info), else a streamed snapshot
 * of it, restored into the new sandbox before its binding is published
 * and checked like any restore.
 * The fork has its own key, sandbox and identity; nothing of the source's
 * spec is carried over: spec (NULL: an empty one) says what the fork gets
 * (its provider defaults to the source's; manifest, packages, memory
 * attachments, ports only when given; spec->snapshot must be NULL). So a
 * fork never writes back into the source's memory stores unless its spec
 * attaches them itself.
 * SBX_E_EXISTS when `to` already has a session (or gets one from another
 * worker meanwhile: it is left alone); SBX_E_INVALID when to equals from;
 * else the errors of sbx_session_attach (on from), sbx_snapshot_save and
 * sbx_session_acquire (on to). A fork interrupted after the new session's
 * intent was written leaves it for sbx_sessions_reconcile. out may be
 * NULL; else the caller releases *out.
 */
SBX_API int sbx_session_fork(sbx_sessions *m, const char *from, const char *to,
                             const struct sbx_session_spec *spec, sbx_cancel *cancel,
                             sbx_handle **out, sbx_error *err);

/* How a fork copied the workspace; zero-initialize and set size. */
struct sbx_fork_info {
    uint32_t size;
    /* true: the provider's own snapshot (SBX_CAP_FORK, sbx_fork); false:
     * a streamed snapshot through the host (sbx_snapshot_save, restore) */
    bool native;
    /* when not native: why, one line ("provider local does not declare
     * fork", the provider's reason for declining this source, ...) */
    char streamed_why[256];
};

/*
 * sbx_session_fork, reporting in info (may be NULL) which copy was made.
 * The provider's native snapshot is used when the fork stays on the
 * source's provider and that provider declares SBX_CAP_FORK; a provider
 * that declines this source (SBX_E_UNSUPPORTED from its fork op, nothing
 * made) and every other case take the streamed path.
 */
SBX_API int sbx_session_fork_info(sbx_sessions *m, const char *from, const char *to,
                                  const struct sbx_session_spec *spec, sbx_cancel *cancel,
                                  sbx_handle **out, struct sbx_fork_info *info,
                                  sbx_error *err);

/* One binding as listed (borrowed for the callback). */
struct sbx_session_info {
    const char *session_key;
    const char *provider;
    const char *external_id;
    const char *spec_hash; /* NULL when none recorded */
    int64_t created_at;    /* ms since the epoch */
    bool deleting;         /* fenced for deletion */
    bool paused;           /* paused and not used since */
    int64_t last_used_at;  /* ms since the epoch (created_at when unused) */
};

typedef int (*sbx_session_info_fn)(void *ud, const struct sbx_session_info *info);

/*
 * List bindings in strcmp order of key, starting after `after` (NULL: from
 * the start), at most `limit` (1..1000) of them. fn is called per binding;
 * a nonzero return stops the listing and is returned. *more (may be NULL)
 * says whether bindings follow the last one visited: pass its key as
 * `after` to continue.
 */
SBX_API int sbx_session_list(sbx_sessions *m, const char *after, size_t limit,
                             sbx_session_info_fn fn, void *ud, bool *more,
                             sbx_error *err);

/* A provisioning intent as listed (borrowed for the callback): a session
 * whose sandbox is being made (or was left half made by a killed worker). */
struct sbx_intent_info {
    const char *session_key;
    const char *provider;
    const char *step;        /* the step reached (docs/SESSIONS.md) */
    bool has_reference;      /* the provider's create returned */
    int64_t created_at;      /* ms since the epoch */
    int64_t age_ms;          /* since its worker last updated it */
};

typedef int (*sbx_intent_info_fn)(void *ud, const struct sbx_intent_info *info);

/*
 * Call fn for every provisioning intent in the store, in strcmp order of
 * key (all pages). A nonzero return of fn stops and is returned.
 */
SBX_API int sbx_intent_list(sbx_sessions *m, sbx_intent_info_fn fn, void *ud,
                            sbx_error *err);

/* What one reconcile pass did. */
struct sbx_reconcile_report {
    size_t intents_seen;      /* intents found */
    size_t intents_cleaned;   /* taken over, resource destroyed, dropped */
    size_t intents_skipped;   /* owner alive and lease running */
    size_t deletions_done;    /* fenced sessions finished */
    size_t failures;          /* items that failed (retried next pass) */
    size_t memory_written_back; /* sessions whose memory changes a crash
                                   left were committed */
};

/*
 * One reconcile pass.
 *
 * Intents: each intent whose owner is dead (a process of this machine that
 * no longer exists) or whose lease expired (lease_ms; 0: the manager's) is
 * taken over. Policy: the resource is destroyed and the intent dropped,
 * never completed: a sandbox whose provisioning was interrupted is not
 * trusted (packages may be half installed), and the next acquire of the
 * key provisions it afresh. The resource is the intent's recorded
 * reference; when none was recorded (the crash came between create and
 * recording), create is called again, which the ABI makes idempotent, to
 * learn the reference, and that resource is destroyed.
 *
 * Deletions: every fenced session is finished as sbx_session_delete does.
 *
 * Items that fail are counted and left for the next pass; the first
 * failure's message is kept in err and the call returns its status after
 * visiting everything. report may be NULL.
 */
SBX_API int sbx_sessions_reconcile(sbx_sessions *m, int64_t lease_ms,
                                   sbx_cancel *cancel,
                                   struct sbx_reconcile_report *report,
                                   sbx_error *err);

/* What one eviction pass did. Zero-initialize and set size. */
struct sbx_evict_report {
    uint32_t size;
    size_t seen;      /* sessions whose provider sets an idle duration */
    size_t paused;    /* paused (idle_pause) */
    size_t destroyed; /* deleted (idle_destroy) */
    size_t in_use;    /* skipped: a command was running (its use lock) */
    size_t failures;  /* items that failed (retried next pass) */
};

/*
 * One idle eviction pass (`sbx reconcile` runs one after each reconcile
 * pass). For each session whose provider's configuration sets idle_pause
 * or idle_destroy (providers.<name>, docs/CONFIG.md): idle (now minus its
 * last use) for idle_destroy or longer: deleted as sbx_session_delete
 * does; else idle for idle_pause or longer and not paused: paused, when
 * the provider declares SBX_CAP_PAUSE. A session in use is never evicted:
 * its use lock (held by every running command, in any process) is tried
 * without waiting and the session skipped when it is held; its last use
 * is read again under the lock. Failures are counted and the first one's
 * status returned after visiting everything. report may be NULL.
 */
SBX_API int sbx_sessions_evict(sbx_sessions *m, sbx_cancel *cancel,
                               struct sbx_evict_report *report, sbx_error *err);

/* ------------------------------------------------------------------------ */
/* Warm pools (docs/SESSIONS.md, "Warm pools"; configuration: `pools:`)       */
/* ------------------------------------------------------------------------ */

/* A configured pool. Strings borrowed for the callback. */
struct sbx_pool_info {
    const char *name;
    const char *provider;
    const char *spec_hash; /* what a session's spec, without its manifest
                              and packages, must hash to */
    size_t size;           /* members reconcile keeps */
};

/* A pool member: a sandbox made ahead of its session. */
struct sbx_pool_member_info {
    const char *pool;
    const char *provider;
    const char *member_key;  /* the key it was created under */
    const char *external_id; /* NULL until create returned */
    const char *state;       /* creating, ready, checking or claimed */
    const char *claimed_by;  /* the claiming session's key, or NULL */
    int64_t created_at;      /* ms since the epoch */
    bool configured;         /* its pool is configured with this spec */
};

typedef int (*sbx_pool_info_fn)(void *ud, const struct sbx_pool_info *pool);
typedef int (*sbx_pool_member_fn)(void *ud, const struct sbx_pool_member_info *member);

/* How many warm pools the context's configuration declares (no store is
 * opened: `sbx run` asks before choosing how to make its sandbox). */
SBX_API size_t sbx_config_pool_count(const sbx_ctx *ctx);

/* Call pool_fn for every configured pool, then member_fn for every member
 * in the store (of configured pools or not). Either may be NULL; a nonzero
 * return stops and is returned. */
SBX_API int sbx_pools_list(sbx_sessions *m, sbx_pool_info_fn pool_fn,
                           sbx_pool_member_fn member_fn, void *ud, sbx_error *err);

/* What sbx_pools_reconcile did; zero-initialize and set size. */
struct sbx_pool_report {
    uint32_t size;
    size_t created;   /* members made ready */
    size_t checked;   /* ready members that passed their health check */
    size_t replaced;  /* ready members that failed it: destroyed */
    size_t removed;   /* members of a pool removed, shrunk or respecified */
    size_t cleaned;   /* members a killed refill or check left: destroyed */
    size_t failures;  /* items that failed (retried next pass) */
    size_t held;      /* pools left short: their provider is at max_sandboxes */
};

/*
 * One pass over the warm pools: destroy what a killed refill or health
 * check left (a creating or checking member whose worker is gone or whose
 * lease expired), health-check each ready member (attach and a trivial
 * command; one that fails is destroyed), destroy the members of pools
 * removed from the configuration, shrunk or given another spec, drop the
 * rows of claimed members whose session finished provisioning, and create
 * members until each pool has its size. SBX_OK when everything succeeded;
 * else the first failure (every other item was still tried).
 */
SBX_API int sbx_pools_reconcile(sbx_sessions *m, sbx_cancel *cancel,
                                struct sbx_pool_report *report, sbx_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SBX_SESSION_H */
