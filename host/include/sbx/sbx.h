/*
 * sbx/sbx.h - the libsbx consumer API.
 *
 * An agent runtime, the `sbx` CLI and the conformance suite use this API to
 * open a host context (configuration plus the enabled providers), get a
 * provider, and create, attach, use and destroy sandboxes. Providers are
 * written against sbx/provider.h instead and never link libsbx; what both
 * sides share (status codes, capability bits, sinks and sources, exec
 * arguments, ...) is sbx/types.h, included here. This header does not
 * include sbx/provider.h: a consumer sees a provider through
 * sbx_provider_info, never its descriptor or ops.
 *
 * Conventions:
 *  - Functions returning int return an sbx_status (SBX_OK is 0). On failure
 *    they fill the caller's sbx_error (when not NULL) with the status and a
 *    message that names what was wrong. Messages never contain credentials.
 *  - Objects returned through an out-pointer are owned by the caller and
 *    freed with the matching *_free/_close/_release function.
 *  - Strings passed in are borrowed for the duration of the call.
 *  - An sbx_ctx may be used from several threads at once; an sbx_handle may
 *    be used for concurrent exec/read/write.
 */
#ifndef SBX_SBX_H
#define SBX_SBX_H

#include <sbx/types.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SBX_VERSION "0.1.0"

/* Marks the functions libsbx exports (it is built with hidden visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define SBX_API __attribute__((visibility("default")))
#else
#define SBX_API
#endif

/* Longest error message kept, including the NUL. */
#define SBX_ERROR_MAX 1024

/* The outcome of a failed call: a stable status code and a message. */
typedef struct sbx_error {
    int status;                  /* an sbx_status */
    char message[SBX_ERROR_MAX]; /* "" when status is SBX_OK */
} sbx_error;

/* Reset an error to SBX_OK. */
SBX_API void sbx_error_clear(sbx_error *err);

/* Set an error (when err is not NULL) and return status. printf-style. */
SBX_API int sbx_error_set(sbx_error *err, int status, const char *fmt, ...)
    SBX_PRINTF_LIKE(3, 4);

/* ------------------------------------------------------------------------ */
/* Cancellation                                                               */
/* ------------------------------------------------------------------------ */

/* A cancellation token. Firing it makes every call that was given it return
 * SBX_E_CANCELLED promptly (a running command is killed). */
typedef struct sbx_cancel sbx_cancel;

/* Allocate a token. Returns SBX_OK, SBX_E_NOMEM or SBX_E_IO. */
SBX_API int sbx_cancel_new(sbx_cancel **out);

/* Fire the token. Async-signal-safe: may be called from a signal handler.
 * Firing twice is harmless. */
SBX_API void sbx_cancel_fire(sbx_cancel *c);

/* Whether the token has fired. */
SBX_API bool sbx_cancel_fired(const sbx_cancel *c);

/* Free a token; no call may still be using it. NULL is ignored. */
SBX_API void sbx_cancel_free(sbx_cancel *c);

/* ------------------------------------------------------------------------ */
/* Progress of long calls                                                     */
/* ------------------------------------------------------------------------ */

/* One report of a long step: an image pull, package installation, a
 * snapshot or restore, a memory load or write-back over 1 MiB. */
struct sbx_progress {
    uint32_t size;      /* sizeof as libsbx built it */
    const char *what;   /* the step, a few words: "pulling debian:bookworm-slim",
                           "installing apt packages", "snapshot" */
    uint64_t done;      /* bytes (or, for packages, steps) done so far */
    uint64_t total;     /* of that many; 0 while unknown */
    const char *unit;   /* "bytes" or "steps" */
    const char *detail; /* one line of what the step says (a package manager's
                           output, a layer's state), or NULL */
    bool finished;      /* the step's last report */
};

/* Called with each report; the struct and its strings are borrowed for the
 * call. Reports come from the thread running the call or from one of its
 * helper threads (a restore reads its archive in one), one at a time per
 * call; make fn thread-safe when one token serves calls on several
 * threads. Keep it short; throttle what you show. */
typedef void (*sbx_progress_fn)(void *ud, const struct sbx_progress *p);

/* Ask every call given this token to report progress to fn (NULL: stop).
 * Calls without a token, and tokens without a callback, cost nothing. Set
 * it before the calls start, not while one runs. */
SBX_API void sbx_cancel_set_progress(sbx_cancel *c, sbx_progress_fn fn, void *ud);

/* ------------------------------------------------------------------------ */
/* Bounded capture sink                                                       */
/* ------------------------------------------------------------------------ */

/*
 * Keeps the first head_max and the last tail_max bytes written to it and
 * counts the rest, so memory stays bounded however much a command prints.
 * truncated is set once anything was dropped.
 */
typedef struct sbx_capture {
    char *head;
    size_t head_len, head_max;
    char *tail; /* ring buffer */
    size_t tail_len, tail_pos, tail_max;
    uint64_t total;
    bool truncated;
    bool failed; /* allocation failed: the sink reported SBX_E_NOMEM */
} sbx_capture;

/* Prepare an empty capture; buffers are allocated on first write. */
SBX_API void sbx_capture_init(sbx_capture *c, size_t head_max, size_t tail_max);

/* A sink writing into c (c must outlive the sink's use). */
SBX_API struct sbx_sink sbx_capture_sink(sbx_capture *c);

/* Copy what was kept into a new NUL-terminated string: the head, then (when
 * truncated) the marker "\n[... N bytes truncated ...]\n", then the tail.
 * The caller frees it. NULL when out of memory. */
SBX_API char *sbx_capture_text(const sbx_capture *c);

/* Free the buffers; the capture may be initialized again. */
SBX_API void sbx_capture_free(sbx_capture *c);

/* A source reading from a file descriptor (not closed by the source). It
 * offers the fd for polling, and its remaining length when it is a regular
 * file. */
SBX_API struct sbx_source sbx_fd_source(int *fd);

/* A source reading a memory buffer; pos holds the read position and must
 * start at 0. Its length is known. */
struct sbx_memory_source {
    const void *data;
    size_t len, pos;
};
SBX_API struct sbx_source sbx_memory_source(struct sbx_memory_source *m);

/* A sink writing to a file descriptor, retrying short writes. */
SBX_API struct sbx_sink sbx_fd_sink(int *fd);

/* ------------------------------------------------------------------------ */
/* Hashing                                                                    */
/* ------------------------------------------------------------------------ */

/* Lowercase hex SHA-256 of a session key; out receives
 * SBX_KEY_HASH_LEN + 1 bytes. This is the only form of a key that may
 * appear in names, labels and logs. Returns SBX_OK; SBX_E_INVALID for a
 * NULL key or out; SBX_E_INTERNAL when libcrypto cannot hash (out is then
 * "" so that a failure can never alias two keys). */
SBX_API int sbx_key_hash(const char *key, char out[SBX_KEY_HASH_LEN + 1]);

/*
 * sbx_stream_error - say why a sink or source of yours fails. Call it from
 * the write or read callback, on the thread it runs on, just before it
 * returns its failure: the message (printf-style) then leads the error of
 * the call that used the stream, e.g. "exec stdout: disk full (provider's
 * words)", instead of a bare "I/O error". Thread-safe; the message is kept
 * per thread until the callback returns.
 */
SBX_API void sbx_stream_error(const char *fmt, ...) SBX_PRINTF_LIKE(1, 2);

/* ------------------------------------------------------------------------ */
/* Host context                                                               */
/* ------------------------------------------------------------------------ */

typedef struct sbx_ctx sbx_ctx;

/* How to open a context. Zero-initialize, set size = sizeof, fill what you
 * need; NULL members mean "use the environment, then the defaults". */
struct sbx_options {
    uint32_t size;
    const char *config_path; /* else $SBX_CONFIG, else <sysconfdir>/sbx/sbx.yaml
                                plus conf.d/ (absent: built-in defaults) */
    const char *provider;    /* else $SBX_PROVIDER: selects it as default and
                                enables it even without a config section */
    const char *plugin_path; /* colon list; else $SBX_PLUGIN_PATH, else
                                plugin_dir from config, else the installed
                                provider directory */
    bool ignore_environment; /* do not read SBX_* variables (tests) */
    /* Open even when an enabled provider cannot be loaded (not installed,
     * refused by the handshake, or its configuration section is wrong):
     * the context then holds the working providers, and each broken one is
     * reported by sbx_broken_provider_at and by sbx_provider_lookup (with
     * its load error). For listings and checks that must show everything;
     * a service should open strictly. Configuration errors outside provider
     * sections still fail. */
    bool keep_broken_providers;
    /* Where log lines go (providers' host->log and libsbx's own warnings):
     * called with the level (SBX_LOG_*), the provider's name (NULL for
     * libsbx itself) and the formatted line, without a newline; strings are
     * borrowed for the call. May be called from any thread, concurrently.
     * NULL: one line per message on stderr, "sbx: NAME: LEVEL: text".
     * Lines above $SBX_LOG_LEVEL (default warn) are not passed. */
    void (*log)(void *log_ctx, int level, const char *provider, const char *line);
    void *log_ctx;
};

/*
 * Open a host context: read configuration, resolve and validate every
 * enabled provider's descriptor (no provider code beyond describe runs, no
 * credentials are read). Fails with SBX_E_CONFIG for bad configuration
 * (message "file:line: key: problem") and SBX_E_ABI/SBX_E_NOT_FOUND for a
 * provider that cannot be loaded (message names provider, file, expected
 * and actual values).
 */
SBX_API int sbx_open(const struct sbx_options *opts, sbx_ctx **out, sbx_error *err);

/* Close a context: finalizes initialized providers. Handles still held
 * are closed first (the provider's handle is released, the sandbox stays):
 * every op on them then fails with SBX_E_INVALID and sbx_handle_provider
 * returns NULL, but each must still be freed with sbx_release. Must not run
 * while another thread is in a call on this context or its handles. NULL
 * is ignored. Plugins stay mapped (never dlclosed). */
SBX_API void sbx_close(sbx_ctx *ctx);

/* Name of the default provider for new sandboxes (never NULL). */
SBX_API const char *sbx_default_provider(const sbx_ctx *ctx);

/* Number of enabled providers that loaded and the name of the i-th one. */
SBX_API size_t sbx_provider_count(const sbx_ctx *ctx);
SBX_API const char *sbx_provider_name_at(const sbx_ctx *ctx, size_t i);

/* The i-th enabled provider that could not be loaded (only with
 * keep_broken_providers): returns its name and sets *status and *message
 * (borrowed from ctx), or returns NULL past the end. */
SBX_API const char *sbx_broken_provider_at(const sbx_ctx *ctx, size_t i, int *status,
                                           const char **message);

/* Store settings from the configuration (for the session manager).
 * Values are borrowed from ctx; NULL when unset. */
SBX_API const char *sbx_config_store_driver(const sbx_ctx *ctx);
SBX_API const char *sbx_config_store_path(const sbx_ctx *ctx);
SBX_API const char *sbx_config_store_dsn(const sbx_ctx *ctx);

/* The plugin search directories in effect, colon-separated (borrowed). */
SBX_API const char *sbx_plugin_path(const sbx_ctx *ctx);

/* ------------------------------------------------------------------------ */
/* Providers                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct sbx_provider sbx_provider;

/*
 * Find an enabled provider by name (NULL: the default). Runs nothing but
 * lookup; the descriptor is available at once. SBX_E_NOT_FOUND when the
 * name is not enabled (the message lists the enabled ones).
 */
SBX_API int sbx_provider_lookup(sbx_ctx *ctx, const char *name, sbx_provider **out,
                        sbx_error *err);

/* The resolved plugin file of an enabled provider (borrowed from ctx). */
SBX_API const char *sbx_provider_path(const sbx_provider *p);

/*
 * What a provider is, read through the sbx_provider_info_* accessors
 * below: its name and file, what its descriptor declares (version,
 * description, isolation, capabilities, ABI version, configuration keys)
 * and, in a listing, whether it loaded and is enabled. The descriptor
 * itself (with its ops table) stays inside libsbx.
 *
 * Two kinds exist, both owned by libsbx: the info of an enabled provider
 * (sbx_provider_get_info), valid until sbx_close of its context, and the
 * info sbx_list_installed hands its callback, valid during that call only.
 * Strings an accessor returns are borrowed from the info and share its
 * lifetime. Every accessor takes a non-NULL info.
 */
typedef struct sbx_provider_info sbx_provider_info;

/* The info of an enabled provider: status SBX_OK, enabled, a descriptor
 * that passed the handshake. Never NULL. */
SBX_API const sbx_provider_info *sbx_provider_get_info(const sbx_provider *p);

/* The provider's name (never NULL). */
SBX_API const char *sbx_provider_info_name(const sbx_provider_info *info);

/* The resolved plugin file, or NULL when the plugin could not be loaded
 * (the status says why). */
SBX_API const char *sbx_provider_info_path(const sbx_provider_info *info);

/* SBX_OK when the plugin loaded and passed the handshake (and, when
 * enabled, its configuration section was accepted); else the status of
 * the failure, with its message in *message (when message is not NULL;
 * NULL for SBX_OK). */
SBX_API int sbx_provider_info_status(const sbx_provider_info *info,
                                     const char **message);

/* Whether the configuration enables the provider. */
SBX_API bool sbx_provider_info_enabled(const sbx_provider_info *info);

/* The descriptor's provider version ("1.2.0") and one-line description,
 * or NULL when the descriptor could not be loaded. */
SBX_API const char *sbx_provider_info_version(const sbx_provider_info *info);
SBX_API const char *sbx_provider_info_description(const sbx_provider_info *info);

/* The declared isolation (an enum sbx_isolation: SBX_ISOLATION_NONE is no
 * security boundary), or -1 when the descriptor could not be loaded. */
SBX_API int sbx_provider_info_isolation(const sbx_provider_info *info);

/* The declared capabilities (SBX_CAP_* bits; sbx_cap_name names them), 0
 * when the descriptor could not be loaded. */
SBX_API uint64_t sbx_provider_info_caps(const sbx_provider_info *info);

/* The ABI version the plugin was built for, into *major and *minor (each
 * may be NULL). Returns false, leaving them untouched, when the
 * descriptor could not be loaded. */
SBX_API bool sbx_provider_info_abi(const sbx_provider_info *info, unsigned *major,
                                   unsigned *minor);

/* Configuration key i the provider declares (for its section of
 * sbx.yaml): its name, type (an enum sbx_config_type) and description,
 * each out-pointer may be NULL. Returns false past the last key, and for
 * a descriptor that could not be loaded. */
SBX_API bool sbx_provider_info_config_key(const sbx_provider_info *info, size_t i,
                                          const char **key, int *type,
                                          const char **description);

/* The environment variable configuration key i of a plugin falls back to
 * (*env, NULL when it declares none or predates ABI 1.2; borrowed) and
 * whether the key is a credential read only from it (*secret). Each
 * out-pointer may be NULL. Returns false past the last key. */
SBX_API bool sbx_provider_info_config_env(const sbx_provider_info *info, size_t i,
                                          const char **env, bool *secret);

/* Where the value of a provider's configuration key comes from. */
enum sbx_config_origin {
    SBX_ORIGIN_DEFAULT = 0, /* neither set: the provider's default */
    SBX_ORIGIN_CONFIG = 1,  /* its section of sbx.yaml */
    SBX_ORIGIN_ENV = 2      /* the service's environment variable the key
                               declares (ABI 1.2), set and not empty */
};

/*
 * Configuration key i of an enabled provider and where its value comes
 * from, by the rule the providers follow: the configuration, else the
 * key's environment variable when it is set and not empty, else the
 * default. Each out-pointer may be NULL: *key its name, *env its
 * variable (NULL when it declares none), *origin an enum
 * sbx_config_origin, *value the value (borrowed; NULL for the default, for
 * a map or list, and always for a credential), *secret whether the key is
 * a credential (SBX_CFG_F_SECRET), whose value no caller is shown. The
 * environment is read at the call. Returns false past the last key.
 */
SBX_API bool sbx_provider_config_origin(const sbx_provider *p, size_t i, const char **key,
                                        const char **env, int *origin, const char **value,
                                        bool *secret);

/* The provider ABI this libsbx loads: plugins built for this major and a
 * minor up to this one (into *major and *minor, each may be NULL). The
 * library's own, so a program linked against a newer libsbx reports what
 * that library accepts. */
SBX_API void sbx_provider_abi_version(unsigned *major, unsigned *minor);

/* Called once per installed plugin, in name order; the info is borrowed for
 * the call. */
typedef void (*sbx_provider_info_fn)(void *ud, const sbx_provider_info *info);

/* Visit every plugin installed in the search path, loading descriptors only
 * (no init), then every enabled provider that is not installed. Plugins that
 * fail validation, and enabled ones the context could not enable (see
 * keep_broken_providers), are reported with their status, not fatal. */
SBX_API int sbx_list_installed(sbx_ctx *ctx, sbx_provider_info_fn fn, void *ud,
                               sbx_error *err);

/* Run the provider's init if it has not run yet (thread-safe, once). A
 * failed init is reported with the provider's name and is retried on the
 * next call. cancel (may be NULL) reaches init, which may give up with
 * SBX_E_CANCELLED; a thread waiting for another thread's init gives up
 * the same way, and is never held by an init that fails (it then tries
 * itself). All sandbox functions call this themselves. */
SBX_API int sbx_provider_ready(sbx_provider *p, sbx_cancel *cancel, sbx_error *err);

/* A provider's health: its init (run now when it has not run yet) and its
 * live check of the backend (the optional health op). */
struct sbx_health {
    uint32_t size;        /* set by the caller: sizeof(struct sbx_health) */
    bool checked;         /* the provider has a live check and it ran */
    uint64_t init_us;     /* how long init took here (0 when it ran before) */
    uint64_t check_us;    /* how long the live check took */
    char detail[256];     /* what answered ("Docker Engine 20.10.24, API 1.41"),
                             or why there is no check */
};

/* Initialize p (as sbx_provider_ready) and run its live check. SBX_OK when
 * both passed (out filled); else the provider's status and message (init
 * failures as for sbx_provider_ready; a failed check names the provider). */
SBX_API int sbx_provider_health(sbx_provider *p, sbx_cancel *cancel, struct sbx_health *out,
                                sbx_error *err);

/* Admission from the descriptor alone: SBX_OK when the provider declares
 * every capability in `caps`, else SBX_E_UNSUPPORTED naming the provider and
 * the missing capabilities. Never runs init. */
SBX_API int sbx_provider_admit(const sbx_provider *p, uint64_t caps, sbx_error *err);

/* Name of one capability bit ("file_mounts", ...), or NULL if unknown. */
SBX_API const char *sbx_cap_name(uint64_t bit);

/* ------------------------------------------------------------------------ */
/* Sandboxes                                                                  */
/* ------------------------------------------------------------------------ */

/* A host-side sandbox handle: the provider, its handle, key and reference. */
typedef struct sbx_handle sbx_handle;

/* Options of sbx_create; zero-initialize and set size. */
struct sbx_create_options {
    uint32_t size;
    const char *spec_hash;  /* may be NULL */
    uint64_t caps_required; /* checked by admission first */
    /* A limited network, deny by default (needs SBX_CAP_EGRESS, added to
     * caps_required), or NULL for the provider's configured network. */
    const struct sbx_egress_policy *egress;
    /* Memory stores to attach at /mnt/memory/<slug> (needs SBX_CAP_MEMORY,
     * added to caps_required when not empty), NULL-terminated, or NULL. */
    const struct sbx_memory_attachment *const *memory;
    /* TCP ports to make reachable from outside through sbx_port_resolve
     * (needs SBX_CAP_PORTS, added to caps_required when not empty),
     * 0-terminated, or NULL. */
    const uint16_t *ports;
};

/* Create (or find) the sandbox of a session key. Idempotent. cancel may be
 * NULL. */
SBX_API int sbx_create(sbx_provider *p, const char *session_key,
               const struct sbx_create_options *opts, sbx_cancel *cancel,
               sbx_handle **out, sbx_error *err);

/* SBX_CAP_FORK: create the sandbox of a new session key, with opts as for
 * sbx_create, whose workspace starts as a copy of src's through the
 * backend's own snapshot (file modes and symlinks kept; nothing shared
 * afterwards; owned by session_key alone). src's state is left as it was
 * (a paused one stays paused). Errors: SBX_E_UNSUPPORTED without the
 * capability, or when the provider cannot fork this source or
 * configuration natively (the message says why; nothing was made: copy
 * the workspace with sbx_snapshot_save and sbx_snapshot_restore instead);
 * the provider's. */
SBX_API int sbx_fork(sbx_handle *src, const char *session_key,
                     const struct sbx_create_options *opts, sbx_cancel *cancel,
                     sbx_handle **out, sbx_error *err);

/* Attach to a persisted reference; SBX_E_DENIED when it belongs to another
 * key, SBX_E_NOT_FOUND when it is gone. */
SBX_API int sbx_attach(sbx_provider *p, const char *session_key, const char *ref,
               sbx_cancel *cancel, sbx_handle **out, sbx_error *err);

/* SBX_CAP_EGRESS: make the sandbox enforce exactly policy (deny by
 * default, these targets allowed), recorded so that every attach repairs
 * drift; and read back what it enforces. */
SBX_API int sbx_egress_set(sbx_handle *h, const struct sbx_egress_policy *policy,
                           sbx_cancel *cancel, sbx_error *err);
SBX_API int sbx_egress_get(sbx_handle *h, struct sbx_egress_report *out,
                           sbx_cancel *cancel, sbx_error *err);

/* The persisted reference of a handle (borrowed from the handle). */
SBX_API const char *sbx_handle_ref(const sbx_handle *h);

/* The workspace root inside the sandbox (borrowed from the handle). */
SBX_API const char *sbx_handle_root(const sbx_handle *h);

/* The provider a handle belongs to. */
SBX_API sbx_provider *sbx_handle_provider(const sbx_handle *h);

/* Run a command. args->size must be set. The result is filled when SBX_OK
 * is returned (a nonzero exit code is still SBX_OK). */
SBX_API int sbx_exec(sbx_handle *h, const struct sbx_exec_args *args,
             struct sbx_exec_result *res, sbx_cancel *cancel, sbx_error *err);

/* Stream a workspace-relative file into a sink. */
SBX_API int sbx_read(sbx_handle *h, const char *path, const struct sbx_sink *sink,
             sbx_cancel *cancel, sbx_error *err);

/* Write a workspace-relative file from a source (mode 0 means 0644). */
SBX_API int sbx_write(sbx_handle *h, const char *path, const struct sbx_source *src,
              unsigned mode, sbx_cancel *cancel, sbx_error *err);

/*
 * Write the workspace of h as a tar archive into `file` (compression NULL
 * or "none", "gzip", "zstd"): every entry of the workspace root but
 * `skills` (mounts are not below the root), checked like an export
 * (regular files and directories only). Streamed: the workspace is never
 * held in memory. The file appears complete or not at all: a temporary
 * file in its directory (unnamed where the filesystem has O_TMPFILE, so
 * even a SIGKILL leaves nothing) takes its name once written and synced.
 * Names are kept as bytes (UTF-8 or not). A restore of h that was killed
 * half-way is rolled back first (sbx_snapshot_restore). Needs `sh` and
 * `tar` in the sandbox.
 * Errors: SBX_E_INVALID for a refused entry (named), the exec's errors.
 */
SBX_API int sbx_snapshot_save(sbx_handle *h, const char *file, const char *compression,
                              sbx_cancel *cancel, sbx_error *err);

/*
 * Replace the workspace of h (all but `skills`) with the snapshot in file
 * (tar, tar.gz or tar.zst), all or nothing: file is read once, each entry
 * checked as it is read and extracted into a staging directory
 * (`.sbx-restore.*` in the workspace root), which is swapped in only after
 * the last entry was checked. Any failure (a refused entry, a truncated
 * archive, a cancel) leaves the workspace as it was; a restore whose
 * process was killed is rolled back by the next restore or snapshot.
 * Names may be any bytes. Needs `sh`, `tar` and `mv` in the sandbox.
 * Errors: SBX_E_INVALID for a refused entry (named), SBX_E_EXISTS while
 * another restore is swapping its tree in, the exec's errors.
 */
SBX_API int sbx_snapshot_restore(sbx_handle *h, const char *file, sbx_cancel *cancel,
                                 sbx_error *err);

/* ------------------------------------------------------------------------ */
/* Users (SBX_CAP_USERS)                                                      */
/* ------------------------------------------------------------------------ */

/* Longest user or group name (1 to 32 of [a-z0-9_-], starting with a
 * letter or '_'). */
#define SBX_USER_NAME_MAX 32

/*
 * Make h act as `user` - a user made with sbx_user_add, or "root" - for
 * all its later sbx_exec, sbx_read and sbx_write: commands run with that
 * user's uid, primary gid, supplementary groups and HOME; reads and writes
 * are checked against its permissions (SBX_E_DENIED) and written files
 * are owned by it. NULL or "" goes back to the sandbox's default user. Set
 * it before the handle is shared between threads. What libsbx does itself
 * (a manifest's entries, snapshots) still runs as the default user.
 * Errors: SBX_E_UNSUPPORTED when the provider lacks SBX_CAP_USERS (naming
 * both), SBX_E_INVALID for a malformed name. Whether the user exists is
 * seen by the first op (the provider's error).
 */
SBX_API int sbx_handle_set_user(sbx_handle *h, const char *user, sbx_error *err);

/* The user h acts as, or NULL for the sandbox's default (borrowed). */
SBX_API const char *sbx_handle_user(const sbx_handle *h);

/*
 * SBX_CAP_USERS: make a group in the sandbox (gid 0: the provider picks),
 * or accept one of that name with the same gid (any gid when 0); another
 * gid is SBX_E_EXISTS. Runs as the sandbox's default user, whatever h
 * acts as.
 */
SBX_API int sbx_group_add(sbx_handle *h, const struct sbx_group_spec *group,
                          sbx_cancel *cancel, sbx_error *err);

/*
 * SBX_CAP_USERS: make a user (see struct sbx_user_spec in sbx/types.h:
 * home /home/<name>, primary group `group` or one of the user's name,
 * supplementary groups made before with sbx_group_add), or accept one of
 * that name with the same uid (any uid when 0); another uid is
 * SBX_E_EXISTS, an unknown group SBX_E_NOT_FOUND.
 */
SBX_API int sbx_user_add(sbx_handle *h, const struct sbx_user_spec *user,
                         sbx_cancel *cancel, sbx_error *err);

/* Release the handle; the sandbox stays. NULL is ignored. */
SBX_API void sbx_release(sbx_handle *h);

/* Destroy the sandbox of (session_key, ref). Idempotent. */
SBX_API int sbx_destroy(sbx_provider *p, const char *session_key, const char *ref,
                sbx_cancel *cancel, sbx_error *err);

/* SBX_CAP_POOL: attach and destroy a sandbox made ahead of its session
 * for another key (a pool member's), on behalf of session_key: the
 * provider checks ownership by pool_key_hash (sbx_key_hash of the key it
 * was created for, SBX_KEY_HASH_LEN lowercase hex digits) alone.
 * SBX_E_UNSUPPORTED when the provider does not declare SBX_CAP_POOL. */
SBX_API int sbx_attach_pooled(sbx_provider *p, const char *session_key,
                              const char *pool_key_hash, const char *ref, sbx_cancel *cancel,
                              sbx_handle **out, sbx_error *err);
SBX_API int sbx_destroy_pooled(sbx_provider *p, const char *session_key,
                               const char *pool_key_hash, const char *ref, sbx_cancel *cancel,
                               sbx_error *err);

/* Capability calls: SBX_E_UNSUPPORTED when the provider lacks the cap. */
SBX_API int sbx_mount_put(sbx_handle *h, const char *path, const struct sbx_blob *blob,
                  sbx_cancel *cancel, sbx_error *err);
SBX_API int sbx_mount_remove(sbx_handle *h, const char *path, sbx_cancel *cancel,
                     sbx_error *err);
SBX_API int sbx_export_outputs(sbx_handle *h, const struct sbx_sink *tar_sink,
                       sbx_cancel *cancel, sbx_error *err);
SBX_API int sbx_skill_install(sbx_handle *h, const char *name,
                      const struct sbx_blob *bundle, sbx_cancel *cancel,
                      sbx_error *err);

/* ------------------------------------------------------------------------ */
/* Processes (SBX_CAP_PROCESSES, SBX_CAP_PTY)                                 */
/* ------------------------------------------------------------------------ */

/*
 * Processes that outlive the call (struct sbx_proc_spec and the read
 * structs are in sbx/types.h; docs/ABI.md, "Processes"). They run as the
 * user h acts as. A process id is the provider's (1 to 127 bytes of
 * [A-Za-z0-9._:-]); any handle of the same sandbox, in any process, may
 * use it, and an id the sandbox did not make is SBX_E_NOT_FOUND. Every
 * call fails with SBX_E_UNSUPPORTED when the provider lacks the
 * capability (SBX_CAP_PTY for SBX_PROC_PTY and sbx_proc_resize), and
 * with SBX_E_INVALID for a malformed id or argument, before the provider
 * sees it.
 */

/* Start spec's command; its id is written to id. */
SBX_API int sbx_proc_start(sbx_handle *h, const struct sbx_proc_spec *spec,
                           char id[SBX_PROC_ID_MAX], sbx_cancel *cancel, sbx_error *err);

/* Write len bytes to the process's stdin; SBX_PROC_WRITE_CLOSE closes it
 * after them. */
SBX_API int sbx_proc_write(sbx_handle *h, const char *id, const void *data, size_t len,
                           uint32_t flags, sbx_cancel *cancel, sbx_error *err);

/* Read the output after the cursors (see struct sbx_proc_read_args): the
 * bytes go to the sinks, the new cursors, lost counts and state to res.
 * libsbx checks what the provider reports: a new cursor that is not the
 * old one + lost + the bytes delivered, or more than max_bytes, is
 * SBX_E_PROTOCOL. */
SBX_API int sbx_proc_read(sbx_handle *h, const char *id,
                          const struct sbx_proc_read_args *args,
                          struct sbx_proc_read_result *res, sbx_cancel *cancel,
                          sbx_error *err);

/* Send signal signo (1..64, Linux numbers) to the process's group (with
 * a PTY, the terminal's foreground group). */
SBX_API int sbx_proc_signal(sbx_handle *h, const char *id, int signo, sbx_cancel *cancel,
                            sbx_error *err);

/* Set a PTY's window size (1..65535 each). */
SBX_API int sbx_proc_resize(sbx_handle *h, const char *id, unsigned rows, unsigned cols,
                            sbx_cancel *cancel, sbx_error *err);

/* Call sink->entry for each process the sandbox keeps, in start order. */
SBX_API int sbx_proc_list(sbx_handle *h, const struct sbx_proc_list_sink *sink,
                          sbx_cancel *cancel, sbx_error *err);

/*
 * Agent-style calls (an agent's exec with a yield time, and its
 * write-stdin): run for at most yield_ms collecting output, then return
 * what came - the exit status when the process ended within the yield,
 * else its id and cursors so that a later call (sbx_proc_send_yield,
 * sbx_proc_read) continues where this one stopped. Built on
 * sbx_proc_start, _write and _read alone, so every provider with
 * SBX_CAP_PROCESSES has them.
 *
 * Output is delivered to the sinks from the cursors on, at most max_bytes
 * per stream in all; once a stream reached that cap the call returns at
 * once, with `truncated` set and the rest left in the replay buffer for
 * a later read from the returned cursor. The call also returns as soon as
 * the process ended and all its output was delivered (eof), or at
 * yield_ms, whichever comes first.
 */
struct sbx_proc_yield_args {
    uint32_t size;              /* sizeof as the caller built it */
    uint32_t yield_ms;          /* longest wait; 0: what is there now */
    uint64_t max_bytes;         /* per stream, this call; 0: 64 KiB */
    uint64_t out_cursor;        /* where reading starts (send_yield; */
    uint64_t err_cursor;        /*  exec_yield starts at 0) */
    const struct sbx_sink *out; /* may be NULL: the bytes are discarded */
    const struct sbx_sink *err;
};

struct sbx_proc_yield_result {
    uint32_t size;                   /* sizeof as the caller built it */
    uint32_t state;                  /* enum sbx_proc_state at the last read */
    char id[SBX_PROC_ID_MAX];        /* the process (exec_yield: the new one) */
    uint64_t out_cursor, err_cursor; /* where the next read continues */
    uint64_t out_bytes, err_bytes;   /* delivered to the sinks by this call */
    uint64_t out_lost, err_lost;     /* skipped by this call (replay buffer
                                        overrun since the given cursor) */
    int exit_code, term_signal, timed_out; /* when state is SBX_PROC_EXITED */
    int eof;                         /* ended and everything was delivered */
    int truncated;                   /* a stream reached max_bytes */
};

/* Start spec's command and collect its output as described above. On
 * SBX_OK res->id names the process whatever its state. A failure after
 * the start (a read that failed) still sets res->id, so that the caller
 * can find the process again (res->id is "" when nothing started). */
SBX_API int sbx_proc_exec_yield(sbx_handle *h, const struct sbx_proc_spec *spec,
                                const struct sbx_proc_yield_args *args,
                                struct sbx_proc_yield_result *res, sbx_cancel *cancel,
                                sbx_error *err);

/* Write len bytes (may be 0) to the stdin of process id (write_flags as
 * for sbx_proc_write: SBX_PROC_WRITE_CLOSE closes it after them), then
 * collect output from args' cursors as described above. */
SBX_API int sbx_proc_send_yield(sbx_handle *h, const char *id, const void *data,
                                size_t len, uint32_t write_flags,
                                const struct sbx_proc_yield_args *args,
                                struct sbx_proc_yield_result *res, sbx_cancel *cancel,
                                sbx_error *err);

/* ------------------------------------------------------------------------ */
/* File operations (SBX_CAP_FILE_OPS)                                         */
/* ------------------------------------------------------------------------ */

/*
 * Workspace-relative paths, confined like sbx_read and sbx_write; the last
 * component is never followed. They act as the user h acts as. libsbx
 * checks what the provider reports: an entry name that is empty, ".",
 * ".." or holds '/' is SBX_E_PROTOCOL.
 */

/* Stream the entries of directory path (NULL or "" is the root) to sink,
 * in any order. */
SBX_API int sbx_file_list(sbx_handle *h, const char *path,
                          const struct sbx_file_list_sink *sink, sbx_cancel *cancel,
                          sbx_error *err);

/* Describe path into *out (out->size must be set; out->name is NULL). */
SBX_API int sbx_file_stat(sbx_handle *h, const char *path, struct sbx_file_info *out,
                          sbx_cancel *cancel, sbx_error *err);

/* Make directory path (mode 0 means 0755); SBX_MKDIR_PARENTS makes its
 * parents and accepts an existing directory. */
SBX_API int sbx_file_mkdir(sbx_handle *h, const char *path, unsigned mode, uint32_t flags,
                           sbx_cancel *cancel, sbx_error *err);

/* Remove path; a directory with entries needs SBX_REMOVE_RECURSIVE. */
SBX_API int sbx_file_remove(sbx_handle *h, const char *path, uint32_t flags,
                            sbx_cancel *cancel, sbx_error *err);

/* Rename from to to; SBX_RENAME_NOREPLACE refuses an existing target. */
SBX_API int sbx_file_rename(sbx_handle *h, const char *from, const char *to,
                            uint32_t flags, sbx_cancel *cancel, sbx_error *err);

/* ------------------------------------------------------------------------ */
/* Exposed ports (SBX_CAP_PORTS)                                              */
/* ------------------------------------------------------------------------ */

/* Where a client outside the sandbox reaches port (declared at create:
 * sbx_create_options.ports; else SBX_E_NOT_FOUND). out->size must be set.
 * out->header may hold a credential: never log it. */
SBX_API int sbx_port_resolve(sbx_handle *h, unsigned port, struct sbx_port_endpoint *out,
                             sbx_cancel *cancel, sbx_error *err);

/* ------------------------------------------------------------------------ */
/* Pause and resume (SBX_CAP_PAUSE)                                           */
/* ------------------------------------------------------------------------ */

/* Pause h's sandbox in place: nothing of it runs until it is resumed, by
 * sbx_resume or by the next op on any handle of it (every op resumes a
 * paused sandbox first). What survives a pause (the workspace always;
 * memory attachments and processes as far as the backend allows) is
 * documented per provider. Idempotent. Errors: SBX_E_UNSUPPORTED without
 * the capability; the provider's. */
SBX_API int sbx_pause(sbx_handle *h, sbx_cancel *cancel, sbx_error *err);

/* Resume h's sandbox; one that is not paused is SBX_OK. */
SBX_API int sbx_resume(sbx_handle *h, sbx_cancel *cancel, sbx_error *err);

/* ------------------------------------------------------------------------ */
/* Exporting outputs to a host directory                                      */
/* ------------------------------------------------------------------------ */

/* Limits of sbx_export_to_dir; zero members take the defaults (1 GiB per
 * file, 4 GiB in all, 100 000 entries). */
struct sbx_export_limits {
    uint32_t size;            /* sizeof as the caller built it */
    uint64_t max_file_bytes;  /* one regular file */
    uint64_t max_total_bytes; /* all regular files together */
    uint64_t max_entries;     /* files and directories */
};

/*
 * Export the sandbox's /mnt/session/outputs (SBX_CAP_OUTPUT_EXPORT) into
 * the host directory target_dir. The archive is streamed from the provider
 * and every entry is validated: regular files and directories only (no
 * symlinks, hard links, devices, FIFOs, sockets), relative UTF-8 names
 * without "..", no duplicates, per-file and total size limits (a declared
 * size over a limit is refused before its data is read). The files are
 * extracted into a new directory beside target_dir and published by a
 * rename, so target_dir holds the previous export or the complete new one;
 * exporting again replaces it. An existing target_dir must be empty or the
 * product of an earlier export (recorded in ".<name>.sbx-export" beside
 * it, which is also the lock that serializes exports into one target).
 * The parent of target_dir must exist. limits may be NULL; cancel may be
 * NULL.
 *
 * Errors: SBX_E_UNSUPPORTED when the provider lacks the capability or the
 * sandbox was created without its outputs directory; SBX_E_INVALID naming
 * the first refused entry and the rule it broke (nothing is published and
 * nothing stays behind beside the target); SBX_E_EXISTS for a target that
 * an export did not create; SBX_E_NOT_FOUND for a missing parent; the
 * provider's status when the transfer fails; SBX_E_CANCELLED.
 */
SBX_API int sbx_export_to_dir(sbx_handle *h, const char *target_dir,
                              const struct sbx_export_limits *limits,
                              sbx_cancel *cancel, sbx_error *err);

#ifdef __cplusplus
}
#endif

#endif /* SBX_SBX_H */
