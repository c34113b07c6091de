/*
 * sbx/provider.h - the sbx provider ABI, version 1.2 (1.0 and 1.1 are
 * frozen; 1.2 is in development and only appends to them: see
 * docs/ABI.md, "Versioning").
 *
 * This is the only header a backend author includes; it includes
 * sbx/types.h, the part of the ABI the consumer API (sbx/sbx.h) shares
 * (status codes, capability bits, sinks and sources, exec arguments, ...).
 * The consumer API does not include this header. A provider is a shared
 * object exporting one symbol, sbx_provider_describe(), which returns static
 * data: a descriptor naming the provider, its capabilities, the table of
 * operations and the configuration keys it accepts. The host validates the
 * descriptor before running any other provider code, then calls ops->init
 * lazily, on first use.
 *
 * Rules (see docs/ABI.md for the long form):
 *  - The first four descriptor members are frozen forever, so any host can
 *    read them and report a version mismatch precisely.
 *  - Structs are only ever appended to. The host treats ops beyond the
 *    plugin's ops_size as absent; size-prefixed argument structs tell the
 *    plugin how much the host filled in.
 *  - Memory: everything the host passes is borrowed for the duration of the
 *    call. Whatever the provider produces goes into host-supplied sinks or
 *    buffers. Neither side frees the other's memory. Sandbox handles are
 *    created and released by the provider.
 *  - Threads (the long form is "Threads" below and in docs/ABI.md): init
 *    runs once per instance, before anything else; ops on different
 *    sandboxes, and exec, read_file and write_file on one sandbox, may run
 *    concurrently; create, attach and destroy of one session key never
 *    overlap within one host process (libsbx enforces it); across processes
 *    nothing is serialized, so create must be idempotent against a racing
 *    create of another process. One sink or source is never called from two
 *    threads at once. Providers touch no process-global state (signal
 *    handlers, signal mask of other threads, cwd, umask, environment, exit)
 *    and open every fd O_CLOEXEC.
 *  - Status codes are stable numbers, never reused (see enum sbx_status).
 *
 * The headers are C99 and compile alone with -std=c99 -pedantic.
 */
#ifndef SBX_PROVIDER_H
#define SBX_PROVIDER_H

#include <sbx/types.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version of this header. Major must equal the host's; the minor a
 * provider targets must be <= the host's minor. */
#define SBX_ABI_MAJOR 1
#define SBX_ABI_MINOR 2

/*
 * SBX_ABI_TARGET_MINOR - the oldest host minor a provider wants to load into
 * (like GLib's GLIB_VERSION_MIN_REQUIRED). Define it before including this
 * header, e.g. -DSBX_ABI_TARGET_MINOR=0, to build against a newer header a
 * provider that uses nothing newer than that minor: its descriptor then
 * claims that minor and an older host accepts it. Members a later minor
 * appended may still be used after checking the size of the struct that
 * carries them (the host fills in only what it knows). Defaults to
 * SBX_ABI_MINOR.
 */
#ifndef SBX_ABI_TARGET_MINOR
#define SBX_ABI_TARGET_MINOR SBX_ABI_MINOR
#endif
#if SBX_ABI_TARGET_MINOR > SBX_ABI_MINOR || SBX_ABI_TARGET_MINOR < 0
#error "SBX_ABI_TARGET_MINOR must be between 0 and SBX_ABI_MINOR"
#endif

/* Size of the detail line of the health op (ABI 1.2), NUL included. */
#define SBX_HEALTH_DETAIL_MAX 256

/* Name of the one exported entry point. */
#define SBX_PROVIDER_ENTRY "sbx_provider_describe"

#if defined(__GNUC__) || defined(__clang__)
#define SBX_PROVIDER_EXPORT __attribute__((visibility("default")))
#else
#define SBX_PROVIDER_EXPORT
#endif

/* ------------------------------------------------------------------------ */
/* Opaque types                                                               */
/* ------------------------------------------------------------------------ */

/* A provider's sandbox handle: created by create/attach, freed by release. */
typedef struct sbx_sandbox sbx_sandbox;

/* Per-call host context: carries the error slot and the cancellation token.
 * Owned by the host; valid only during the op it was passed to. */
typedef struct sbx_call sbx_call;

/* ------------------------------------------------------------------------ */
/* Configuration schema (static data in the descriptor)                      */
/* ------------------------------------------------------------------------ */

/* One key a provider accepts in its `providers.<name>` section. The array in
 * the descriptor ends with an entry whose key is NULL. Every entry's size is
 * sizeof(struct sbx_config_key) as the provider built it, and the host steps
 * through the array by the first entry's size, so write the entries with
 * SBX_CONFIG_KEY and end the array with SBX_CONFIG_KEYS_END. */
struct sbx_config_key {
    uint32_t size;
    const char *key;
    int type;                /* enum sbx_config_type */
    const char *description; /* one line, shown by `sbx providers --keys` */
    /* ABI 1.2 (read by the host when size reaches SBX_CONFIG_KEY_SIZE_ENV_1_2):
     * the backend service's own environment variable the provider reads
     * when the key is not in the configuration (configuration first, then
     * a non-empty variable, then the default), or NULL. `sbx check` reports
     * which of the three each key's value came from. */
    const char *env;
    /* SBX_CFG_F_* bits, zero for none. */
    uint32_t flags;
};

/* The key is a credential (ABI 1.2): it comes only from env, never from
 * the configuration (the host refuses it there), and no host output shows
 * its value, only whether it is set. */
#define SBX_CFG_F_SECRET 0x1u

#define SBX_CONFIG_KEY(key_, type_, description_)                       \
    {(uint32_t)sizeof(struct sbx_config_key), (key_), (type_), (description_), NULL, 0}
/* A key with the service's environment variable as its fallback. */
#define SBX_CONFIG_KEY_ENV(key_, type_, description_, env_)             \
    {(uint32_t)sizeof(struct sbx_config_key), (key_), (type_), (description_), (env_), 0}
/* A credential read only from env_ (SBX_CFG_F_SECRET). */
#define SBX_CONFIG_SECRET(key_, description_, env_)                      \
    {(uint32_t)sizeof(struct sbx_config_key), (key_), SBX_CFG_STRING, (description_), \
     (env_), SBX_CFG_F_SECRET}
#define SBX_CONFIG_KEYS_END \
    {(uint32_t)sizeof(struct sbx_config_key), NULL, 0, NULL, NULL, 0}

/* ------------------------------------------------------------------------ */
/* Host table                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * Services the host offers a provider. Passed to init; valid until fini.
 * Members are only appended; a provider must check `size` before using a
 * member added after 1.0.
 *
 * Configuration values come from the provider's own YAML section, already
 * checked against the descriptor's config_keys. Keys of maps and lists are
 * addressed with a dot and a name or index: "labels.team", "args.0".
 * Credentials never travel through the config: providers read them from the
 * environment or from a file the config names, and never put them in errors
 * or logs.
 */
struct sbx_host {
    uint32_t size;      /* sizeof(struct sbx_host) as the host built it */
    uint32_t abi_minor; /* the host's SBX_ABI_MINOR */
    void *ctx;          /* host-private; pass back unchanged */

    /* Log a message attributed to the provider. */
    void (*log)(const struct sbx_host *host, int level, const char *fmt, ...)
        SBX_PRINTF_LIKE(3, 4);

    /* Record the error of this call and return `status` (so a provider can
     * write `return host->set_error(host, call, SBX_E_IO, "...")`). The
     * message is formatted into host-owned storage; the last call wins. */
    int (*set_error)(const struct sbx_host *host, sbx_call *call, int status,
                     const char *fmt, ...) SBX_PRINTF_LIKE(4, 5);

    /* The string value of a key of the provider's section, or NULL when the
     * key is absent. Typed keys are returned in their canonical text form
     * (SIZE in bytes, BOOL as "true"/"false"). Borrowed until fini. */
    const char *(*config_get)(const struct sbx_host *host, const char *key);

    /* Iterate over the entries of a MAP or LIST key: returns 1 and sets *name
     * and *value for entry `index`, or 0 past the end. For lists *name is the
     * decimal index. Borrowed until fini. */
    int (*config_entry)(const struct sbx_host *host, const char *key,
                        size_t index, const char **name, const char **value);

    /* Nonzero once the caller has cancelled this call. Cheap; poll it. */
    int (*cancelled)(const struct sbx_host *host, const sbx_call *call);

    /* A file descriptor that becomes readable when this call is cancelled,
     * for use in poll(); -1 when the call cannot be cancelled. Never read
     * from or close it. */
    int (*cancel_fd)(const struct sbx_host *host, const sbx_call *call);

    /* ABI 1.1 (check size; SBX_HOST_SIZE_USERS_1_1): the user this call
     * acts as - a name given to user_add before, or "root" (the sandbox's
     * superuser, uid 0: user_add itself is never asked to make root) - or
     * NULL for the sandbox's default user. A provider declaring
     * SBX_CAP_USERS applies it to exec (the command runs with that user's
     * uid, primary gid and supplementary groups, and HOME set to its home
     * unless env sets HOME),
     * read_file and write_file (access checked with that user's
     * permissions, SBX_E_DENIED when refused; a written file is owned by
     * it). Borrowed for the call. */
    const char *(*call_user)(const struct sbx_host *host, const sbx_call *call);

    /* ABI 1.2 (check size; SBX_HOST_SIZE_PROGRESS_1_2): report the progress
     * of a long step of this call (an image pull, say): `what` names the
     * step in a few words ("pulling debian:bookworm-slim"; never a
     * credential), done and total count its bytes (total 0 while unknown),
     * detail is one line of what the step says (a layer's state) or NULL.
     * Cheap, optional, from the thread running the call; the host shows it
     * to its caller throttled. Strings are borrowed for the call. */
    void (*progress)(const struct sbx_host *host, const sbx_call *call, const char *what,
                     uint64_t done, uint64_t total, const char *detail);
};

/* ------------------------------------------------------------------------ */
/* Argument and result structs (size-prefixed)                                */
/* ------------------------------------------------------------------------ */

/* What the host asks create for. */
struct sbx_create_args {
    uint32_t size;           /* sizeof as the host built it */
    const char *session_key; /* the caller's key; never put it in labels */
    const char *key_hash;    /* SBX_KEY_HASH_LEN hex chars: use for names, labels */
    const char *spec_hash;   /* hex digest of the sandbox spec, may be "" */
    uint64_t caps_required;  /* capabilities the session will use */
    /* ABI 1.1 (present when size covers it): a limited network to create
     * the sandbox with, deny by default (SBX_CAP_EGRESS), or NULL for the
     * provider's configured network. */
    const struct sbx_egress_policy *egress;
    /* ABI 1.1 (SBX_CAP_MEMORY): the memory stores to show at
     * /mnt/memory/<slug>, NULL-terminated, or NULL for none. A container
     * cannot gain a mount later: a provider prepares every one here
     * (empty until memory_load). */
    const struct sbx_memory_attachment *const *memory;
    /* ABI 1.2 (SBX_CAP_PORTS): TCP ports the sandbox will listen on, to be
     * reachable from outside through port_resolve; 0-terminated, or NULL
     * for none. A container cannot publish a port later: a provider
     * prepares every one here. */
    const uint16_t *ports;
};

/* What the host asks attach for: reopen `ref`, owned by `session_key`. */
struct sbx_attach_args {
    uint32_t size;
    const char *session_key; /* the caller's key; never put it in labels */
    const char *key_hash;    /* SBX_KEY_HASH_LEN hex chars, as create got it */
    const char *ref;         /* the persisted reference create wrote */
};

/* What the host asks destroy for: remove `ref`, owned by `session_key`. */
struct sbx_destroy_args {
    uint32_t size;
    const char *session_key;
    const char *key_hash;    /* SBX_KEY_HASH_LEN hex chars, as create got it */
    const char *ref;
};

/* ------------------------------------------------------------------------ */
/* Operations                                                                 */
/* ------------------------------------------------------------------------ */

/*
 * The ops table. Core ops (init .. destroy) are mandatory. Capability ops
 * must be non-NULL when the descriptor declares their capability and are
 * ignored otherwise. Every op returning int returns an sbx_status; on failure
 * it reports a message through host->set_error(call).
 */
struct sbx_provider_ops {
    /* Create the provider instance: read config and credentials, maybe
     * contact the backend. *state is passed back to every other op. Several
     * instances may exist in one process. */
    int (*init)(const struct sbx_host *host, sbx_call *call, void **state);

    /* Free the instance. Sandboxes still held were released before. */
    void (*fini)(void *state);

    /* Create the sandbox of a session key, or find the one that exists
     * (idempotent: a second call, even from another instance, returns the
     * same reference). Writes a NUL-terminated persisted reference of at
     * most SBX_REF_MAX bytes into ref and a new handle into *out. */
    int (*create)(void *state, sbx_call *call,
                  const struct sbx_create_args *args, char *ref,
                  sbx_sandbox **out);

    /* Reopen a persisted reference, verifying that it belongs to the key
     * (compare the owner record kept at create with args->key_hash; else
     * SBX_E_DENIED). A reference that no longer resolves is
     * SBX_E_NOT_FOUND; one this provider never writes (malformed: empty,
     * with control characters, a path, too long; or of another provider)
     * is SBX_E_INVALID, never SBX_E_NOT_FOUND (which tells the caller the
     * workspace is gone, so it would drop its record). */
    int (*attach)(void *state, sbx_call *call,
                  const struct sbx_attach_args *args, sbx_sandbox **out);

    /* Run a command; stream output to the sinks as it arrives; honour
     * timeout and cancellation by killing the command's whole process tree.
     * A command that ran and failed is SBX_OK with its exit code in *res; one
     * killed by a signal is SBX_OK with exit_code -1 and term_signal set
     * (never a plain exit status). The command starts with every signal at
     * its default disposition and an empty signal mask, whatever the host
     * process has (the host may ignore SIGPIPE, or not; posix_spawn cannot
     * reset signals 32 and 33: fork and reset with the raw rt_sigaction).
     * env NULL means the sandbox's base environment (none for local, the
     * image's for docker). A non-NULL env is the command's whole
     * environment: nothing of the host's or the image's is added, except
     * that a backend which always sets some of PATH, HOME, PWD, SHLVL,
     * HOSTNAME, TERM, USER, LOGNAME, SHELL, LANG, LC_*, TZ and TMPDIR may
     * set those the caller left out (never overriding the caller's value);
     * argv[0] without a '/' is looked up in the PATH of the command's
     * environment, else "/usr/local/bin:/usr/bin:/bin". cwd must be an
     * existing directory inside the workspace: missing, not a directory or
     * escaping is SBX_E_INVALID (nothing runs). When the main command
     * exits, processes it left behind are killed before exec returns (after
     * a short drain of the output they still hold): exec cannot leave
     * daemons running. That includes background jobs and processes that
     * left the command's process group or session (setsid, a double
     * fork); a provider whose service cannot kill them must do it by its
     * own means (a subreaper, a marker in the environment). The command
     * starts with only descriptors 0, 1 and 2 open: no descriptor of the
     * provider or its host (a workspace directory, a socket, another
     * session's file) reaches it. Unknown program: SBX_E_NO_COMMAND; not
     * executable: SBX_E_NOT_EXEC. A backend that can only start commands
     * through a shell and learns of a missing program from the shell's
     * status 127 may report SBX_OK with exit_code 127 instead; callers
     * treat both as "not found" (conformance exec_missing_command accepts
     * either). */
    int (*exec)(sbx_sandbox *sb, sbx_call *call,
                const struct sbx_exec_args *args, struct sbx_exec_result *res);

    /* Stream a workspace-relative file to a sink. Paths that escape the
     * workspace (.., absolute, symlinks leading out) are SBX_E_INVALID; a
     * missing file SBX_E_NOT_FOUND; a directory, FIFO, socket or device
     * SBX_E_INVALID (never block on a FIFO: open without waiting for a
     * writer, O_NONBLOCK, and check the type on the descriptor, returning
     * at once without a byte). File ops honour cancellation
     * between chunks (SBX_E_CANCELLED). */
    int (*read_file)(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_sink *sink);

    /* Write a workspace-relative file from a source, creating parent
     * directories (0755). The file appears complete or not at all: write a
     * temporary file next to it and rename it over the target only after
     * the source reached its end without error; a concurrent reader sees
     * the old content or the new, never a part, and an interrupted write
     * leaves the old file and no temporary behind. mode is the permission
     * bits (0 means 0644; bits outside 0777, such as set-user-id, sticky or
     * file type bits, are SBX_E_INVALID from the op itself, whoever calls
     * it, and nothing is written), set exactly
     * (umask does not apply). Writing over a directory is SBX_E_INVALID.
     * Same confinement and cancellation as read_file. */
    int (*write_file)(sbx_sandbox *sb, sbx_call *call, const char *path,
                      const struct sbx_source *src, unsigned mode);

    /* The workspace root path inside the sandbox; owned by the handle. */
    const char *(*root)(sbx_sandbox *sb);

    /* Drop the handle; the resource stays. */
    void (*release)(sbx_sandbox *sb);

    /* Destroy the resource of (args->session_key, args->ref). Commands still
     * running in it (exec calls of other threads on other handles, of this
     * process at least) are killed, their whole process trees as at a
     * timeout; those calls return promptly, with an error or their result
     * (a killed command's). Idempotent:
     * destroying a resource that is gone is SBX_OK. Ownership is verified
     * first (SBX_E_DENIED); a malformed reference is SBX_E_INVALID. */
    int (*destroy)(void *state, sbx_call *call,
                   const struct sbx_destroy_args *args);

    /* --- SBX_CAP_FILE_MOUNTS ------------------------------------------- */
    /* Publish a verified blob read-only at /mnt/session/uploads/<path>. */
    int (*mount_put)(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_blob *blob);
    /* Remove an upload; removing one that is absent is SBX_OK. */
    int (*mount_remove)(sbx_sandbox *sb, sbx_call *call, const char *path);

    /* --- SBX_CAP_OUTPUT_EXPORT ----------------------------------------- */
    /* Stream /mnt/session/outputs as a tar archive into the sink. */
    int (*export_outputs)(sbx_sandbox *sb, sbx_call *call,
                          const struct sbx_sink *tar_sink);

    /* --- SBX_CAP_SKILLS ------------------------------------------------ */
    /* Verify and publish a pinned bundle read-only at
     * /workspace/skills/<name>/. */
    int (*skill_install)(sbx_sandbox *sb, sbx_call *call, const char *name,
                         const struct sbx_blob *bundle);

    /* Two slots kept for good (they once held 1.0 drafts of the memory
     * and egress ops, whose signatures could not grow). Must be NULL; the
     * ops of SBX_CAP_MEMORY and SBX_CAP_EGRESS are appended in 1.1. */
    void (*reserved[2])(void);

    /* ---- ABI 1.1 appends (present when the descriptor's ops_size covers
     * them) -------------------------------------------------------------- */

    /* --- SBX_CAP_EGRESS -------------------------------------------------- */
    /* Make the sandbox enforce exactly this policy: deny by default (a
     * policy whose default is not deny is SBX_E_INVALID), the listed
     * targets allowed, every other allow rule removed. The provider also
     * records it as the sandbox's intended policy, out of the sandbox's
     * reach: from then on every attach reads the enforced policy back and
     * repairs drift (stale rules removed, missing ones added), and refuses
     * with SBX_E_DENIED a sandbox whose default is no longer deny. */
    int (*egress_set)(sbx_sandbox *sb, sbx_call *call,
                      const struct sbx_egress_policy *policy);
    /* Read the policy the sandbox enforces now into *out. */
    int (*egress_get)(sbx_sandbox *sb, sbx_call *call,
                      struct sbx_egress_report *out);

    /* --- SBX_CAP_MEMORY -------------------------------------------------- */
    /* Make the tree at /mnt/memory/<slug> (attached at create) exactly the
     * archive's entries (regular files and directories, relative names
     * checked like an export; anything else is SBX_E_INVALID and nothing
     * changes), then record it as the baseline memory_diff compares with.
     * The host calls it only while no command of the sandbox runs. The
     * baseline is kept outside the sandbox's reach and survives release
     * and attach. A slug not attached at create is SBX_E_NOT_FOUND. */
    int (*memory_load)(sbx_sandbox *sb, sbx_call *call, const char *slug,
                       const struct sbx_source *tar);
    /* Report the tree's changes since the baseline (flags:
     * SBX_MEMORY_DIFF_*) into out; the baseline stays as it was. A
     * read-only attachment is reported the same way (the host refuses to
     * commit what changed there). */
    int (*memory_diff)(sbx_sandbox *sb, sbx_call *call, const char *slug,
                       uint32_t flags, const struct sbx_memory_changes *out);
    /* Make the tree as it is now the baseline (the host committed it). */
    int (*memory_accept)(sbx_sandbox *sb, sbx_call *call, const char *slug);

    /* --- SBX_CAP_USERS --------------------------------------------------- */
    /* Make a group, or accept one that exists with the same gid (gid 0:
     * any); another gid is SBX_E_EXISTS. */
    int (*group_add)(sbx_sandbox *sb, sbx_call *call,
                     const struct sbx_group_spec *group);
    /* Make a user (see struct sbx_user_spec), or accept one that exists
     * with the same uid (uid 0: any); another uid is SBX_E_EXISTS, an
     * unknown group SBX_E_NOT_FOUND. */
    int (*user_add)(sbx_sandbox *sb, sbx_call *call,
                    const struct sbx_user_spec *user);

    /* --- SBX_CAP_MEMORY, optional (may be NULL) ---------------------------
     * A hint the host gives right before a command, when the tree equals
     * its baseline and no other command of the sandbox runs: start
     * watching the tree, so that the next memory_diff may learn cheaply
     * that nothing changed (an inotify watch, say) instead of comparing
     * every file. Only an optimization: a diff must stay exact whatever a
     * command does, and a provider that cannot watch does nothing. */
    int (*memory_watch)(sbx_sandbox *sb, sbx_call *call, const char *slug);

    /* ---- ABI 1.2 appends (present when the descriptor's ops_size covers
     * them) -------------------------------------------------------------- */

    /* --- SBX_CAP_PROCESSES ----------------------------------------------
     * Processes that outlive the call. They live where the sandbox lives
     * (inside it for a container or a remote service; in a supervisor
     * outside the host process for local), so a host process that attaches
     * the sandbox later, after the first one died, continues with the same
     * ids and cursors. Each keeps a replay buffer of the last buffer_bytes
     * of each stream; a writer faster than its readers never blocks on
     * them and never grows memory past that bound: old bytes are dropped
     * and counted (sbx_proc_read_result.*_lost). destroy kills every one.
     * An id that this sandbox never made (another session's, malformed,
     * or forgotten) is SBX_E_NOT_FOUND; the provider keeps an ended
     * process readable for at least 10 minutes after it ended. */

    /* Start spec's command (see struct sbx_proc_spec; program and cwd
     * errors as for exec) and write its id, NUL-terminated, into id. */
    int (*proc_start)(sbx_sandbox *sb, sbx_call *call,
                      const struct sbx_proc_spec *spec,
                      char id[SBX_PROC_ID_MAX]);
    /* Write len bytes to the process's stdin (all of them, or an error),
     * then close it with SBX_PROC_WRITE_CLOSE. Writing to a process that
     * ended, or after the close, is SBX_E_INVALID. A provider may pipeline
     * writes to a process it knows to run (return before the bytes are
     * delivered, in order): a write that could not be delivered is then
     * reported, as SBX_E_INVALID, by the next write to that process and by
     * every later one; a close is never pipelined. */
    int (*proc_write)(sbx_sandbox *sb, sbx_call *call, const char *id,
                      const void *data, size_t len, uint32_t flags);
    /* Read output after the cursors (see sbx_proc_read_args and _result).
     * Returns at the first bytes, at the end, after wait_ms, or at
     * cancellation (SBX_E_CANCELLED), whichever comes first. */
    int (*proc_read)(sbx_sandbox *sb, sbx_call *call, const char *id,
                     const struct sbx_proc_read_args *args,
                     struct sbx_proc_read_result *res);
    /* Send a signal (Linux numbering: SIGINT 2, SIGKILL 9, SIGTERM 15, ...)
     * to the process's process group - with a PTY, the terminal's
     * foreground process group. An ended process is SBX_OK (nothing is
     * sent); an unknown signal number SBX_E_INVALID. */
    int (*proc_signal)(sbx_sandbox *sb, sbx_call *call, const char *id,
                       int signo);
    /* Call sink->entry once per process this sandbox keeps (running and
     * ended), in start order. */
    int (*proc_list)(sbx_sandbox *sb, sbx_call *call,
                     const struct sbx_proc_list_sink *sink);

    /* --- SBX_CAP_PTY ----------------------------------------------------
     * proc_start honours SBX_PROC_PTY: the command's stdin, stdout and
     * stderr are a pseudo-terminal of rows x cols (isatty is true, TERM is
     * set), it is the session leader with the terminal as its controlling
     * terminal, and the terminal's line discipline applies (echo, ^C sends
     * SIGINT to the foreground group, ^D is EOF in canonical mode). */
    /* Set the terminal's window size; the foreground group gets SIGWINCH.
     * A process without a PTY is SBX_E_INVALID. */
    int (*proc_resize)(sbx_sandbox *sb, sbx_call *call, const char *id,
                       uint16_t rows, uint16_t cols);

    /* --- SBX_CAP_FILE_OPS -----------------------------------------------
     * Workspace-relative paths, confined as for read_file: "", "." and
     * NULL are the root; "..", absolute paths and symlinks leading out are
     * SBX_E_INVALID. The last component is never followed (a symlink is
     * listed, stat'ed, removed or renamed as itself). Access is the
     * call's user's (SBX_CAP_USERS), SBX_E_DENIED when refused. */
    /* Stream a directory's entries to the sink as it reads them (memory
     * bounded whatever the directory's size). Not a directory:
     * SBX_E_INVALID; missing: SBX_E_NOT_FOUND. */
    int (*file_list)(sbx_sandbox *sb, sbx_call *call, const char *path,
                     const struct sbx_file_list_sink *sink);
    /* Describe one path (its name member is NULL). Missing:
     * SBX_E_NOT_FOUND. */
    int (*file_stat)(sbx_sandbox *sb, sbx_call *call, const char *path,
                     struct sbx_file_info *out);
    /* Make a directory with mode (0 means 0755; bits outside 0777 are
     * SBX_E_INVALID), and its missing parents (0755) with
     * SBX_MKDIR_PARENTS. An existing path is SBX_E_EXISTS, except a
     * directory with SBX_MKDIR_PARENTS. */
    int (*file_mkdir)(sbx_sandbox *sb, sbx_call *call, const char *path,
                      unsigned mode, uint32_t flags);
    /* Remove a file, a symlink or an empty directory; a directory with
     * entries needs SBX_REMOVE_RECURSIVE (else SBX_E_EXISTS), which
     * removes the tree without following a symlink in it. The root is
     * SBX_E_INVALID; missing is SBX_E_NOT_FOUND. */
    int (*file_remove)(sbx_sandbox *sb, sbx_call *call, const char *path,
                       uint32_t flags);
    /* Rename from to to (both confined), replacing a file at to unless
     * SBX_RENAME_NOREPLACE (then SBX_E_EXISTS). Atomic where the backend's
     * rename is. Missing from: SBX_E_NOT_FOUND. */
    int (*file_rename)(sbx_sandbox *sb, sbx_call *call, const char *from,
                       const char *to, uint32_t flags);

    /* --- SBX_CAP_PORTS ---------------------------------------------------
     * Resolve a port declared at create (sbx_create_args.ports) to where a
     * client outside the sandbox reaches it. A port not declared is
     * SBX_E_NOT_FOUND. A provider on this machine publishes on loopback
     * only unless its configuration says otherwise. */
    int (*port_resolve)(sbx_sandbox *sb, sbx_call *call, uint16_t port,
                        struct sbx_port_endpoint *out);

    /* --- SBX_CAP_PAUSE ---------------------------------------------------
     * Pause a sandbox in place and resume it later, keeping its workspace
     * (and, as far as the backend allows, its memory attachments and its
     * processes: a backend that freezes keeps them running after resume; a
     * backend that can only stop and start says so in its documentation,
     * and its processes end as at destroy). While paused, nothing of the
     * sandbox runs: no process makes progress. Both ops are idempotent and
     * act on the sandbox, not the handle, so any host process may resume
     * what another paused. Every other op on a paused sandbox (exec, file
     * and process ops, attach) resumes it first, transparently, and then
     * does its work: a caller never sees a "paused" error. */
    /* Pause the sandbox. flags is zero (reserved). */
    int (*pause)(sbx_sandbox *sb, sbx_call *call, uint32_t flags);
    /* Resume a paused sandbox; a running one is SBX_OK. */
    int (*resume)(sbx_sandbox *sb, sbx_call *call);

    /* --- optional, any provider (may be NULL) -----------------------------
     * A cheap live check of the backend, for `sbx health` and monitoring,
     * after init: reach the service as every op would (docker: _ping and
     * version; a remote service: an authenticated read of its API), honour
     * cancellation and the configured request timeout, create nothing. SBX_OK
     * when it answers as it should, with one line about what answered (its
     * version) in detail, NUL-terminated; else a status and message as for
     * any op (SBX_E_UNAVAILABLE unreachable, SBX_E_DENIED credentials
     * refused, SBX_E_PROTOCOL a malformed answer). */
    int (*health)(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX]);

    /* --- SBX_CAP_FORK ----------------------------------------------------
     * Create the sandbox of a new session key (args, exactly as create
     * gets them: the new key's hash, spec hash, network, memory
     * attachments, ports) whose workspace starts as a copy of src's,
     * through the backend's own snapshot: the file modes, symlinks (as
     * links, never followed) and contents of src's workspace as they were
     * at the call. Everything else is the new key's, as if create had made
     * it: its labels and owner record carry args->key_hash only (attach
     * with the new key finds it, the old key's is SBX_E_DENIED), and
     * nothing is shared afterwards (a write in either workspace never
     * shows in the other; destroying either leaves the other whole).
     * Nothing bound into src from the host (its outputs, uploads, skills,
     * memory attachments) is carried over. A backend whose snapshot takes
     * more than the workspace (the whole file system, the memory)
     * documents it. src keeps running, or stays paused: the call never
     * changes its state for longer than the snapshot. Writes ref and *out
     * as create does; whatever the call made is removed again when it
     * fails (a snapshot it took is deleted once the new sandbox exists or
     * the call failed). SBX_E_UNSUPPORTED, with the reason, when this
     * source or configuration cannot be forked natively (the host then
     * copies the workspace through a streamed snapshot instead); then
     * nothing was made. */
    int (*fork)(sbx_sandbox *src, sbx_call *call, const struct sbx_create_args *args,
                char *ref, sbx_sandbox **out);

    /* --- SBX_CAP_POOL (no op) --------------------------------------------
     * The sandbox may be made before the session that will use it: the
     * host creates it for a key of its own (a pool member's) and, when a
     * session claims it, keeps attaching and destroying it with that key's
     * key_hash under the session's key. A provider declaring the bit
     * verifies ownership by key_hash alone (never by comparing session_key
     * with what create got), keeps nothing of the creating key where the
     * sandbox's commands see it (environment, hostname, files), and keeps
     * an idle sandbox usable until it is destroyed: one its service expired
     * anyway is SBX_E_NOT_FOUND at attach. */
};

/* ------------------------------------------------------------------------ */
/* Descriptor                                                                 */
/* ------------------------------------------------------------------------ */

struct sbx_provider_desc {
    /* Frozen prefix: never moves, in any ABI version. */
    uint32_t abi_major;
    uint32_t abi_minor;
    uint32_t desc_size; /* sizeof(struct sbx_provider_desc) of the plugin */
    uint32_t ops_size;  /* sizeof(struct sbx_provider_ops) of the plugin */

    const char *name;        /* must equal the file name without ".so" */
    const char *version;     /* the provider's own version, e.g. "1.2.0" */
    const char *description; /* one line, e.g. "Docker Engine containers" */
    uint32_t isolation;      /* enum sbx_isolation */
    uint32_t reserved0;      /* zero */
    uint64_t caps;           /* SBX_CAP_* bits */
    const struct sbx_provider_ops *ops;
    const struct sbx_config_key *config_keys; /* SBX_CONFIG_KEYS_END-terminated,
                                                 or NULL */
    void *reserved[4];                        /* zero */
};

/* Smallest sizes a 1.0 host accepts: the whole 1.0 descriptor, the ops
 * table up to destroy; the smallest config key entry. */
#define SBX_DESC_SIZE_1_0 \
    (offsetof(struct sbx_provider_desc, reserved) + 4 * sizeof(void *))
#define SBX_OPS_SIZE_1_0 \
    (offsetof(struct sbx_provider_ops, destroy) + sizeof(void (*)(void)))
#define SBX_CONFIG_KEY_SIZE_1_0 \
    (offsetof(struct sbx_config_key, description) + sizeof(const char *))
/* ABI 1.2: a config key entry this large carries env and flags. */
#define SBX_CONFIG_KEY_SIZE_ENV_1_2 \
    (offsetof(struct sbx_config_key, flags) + sizeof(uint32_t))
/* The smallest sink and source a 1.0 provider may be given. */
#define SBX_SINK_SIZE_1_0 \
    (offsetof(struct sbx_sink, write) + sizeof(void (*)(void)))
#define SBX_SOURCE_SIZE_1_0 \
    (offsetof(struct sbx_source, length) + sizeof(void (*)(void)))
/* ABI 1.1: the ops table must reach this far for SBX_CAP_EGRESS; a create
 * args struct this large carries the egress member. */
#define SBX_OPS_SIZE_EGRESS_1_1 \
    (offsetof(struct sbx_provider_ops, egress_get) + sizeof(void (*)(void)))
#define SBX_CREATE_ARGS_SIZE_EGRESS_1_1 \
    (offsetof(struct sbx_create_args, egress) + sizeof(void *))
/* ABI 1.1: the same for SBX_CAP_MEMORY (memory_load .. memory_accept; the
 * create args' memory member) and SBX_CAP_USERS (group_add, user_add; the
 * host table's call_user). */
#define SBX_OPS_SIZE_MEMORY_1_1 \
    (offsetof(struct sbx_provider_ops, memory_accept) + sizeof(void (*)(void)))
#define SBX_CREATE_ARGS_SIZE_MEMORY_1_1 \
    (offsetof(struct sbx_create_args, memory) + sizeof(void *))
#define SBX_OPS_SIZE_USERS_1_1 \
    (offsetof(struct sbx_provider_ops, user_add) + sizeof(void (*)(void)))
/* The optional memory_watch op is present when ops_size reaches this. */
#define SBX_OPS_SIZE_MEMORY_WATCH_1_1 \
    (offsetof(struct sbx_provider_ops, memory_watch) + sizeof(void (*)(void)))
#define SBX_HOST_SIZE_USERS_1_1 \
    (offsetof(struct sbx_host, call_user) + sizeof(void (*)(void)))
/* ABI 1.2: a host table this large has progress. */
#define SBX_HOST_SIZE_PROGRESS_1_2 \
    (offsetof(struct sbx_host, progress) + sizeof(void (*)(void)))
/* ABI 1.2: the ops table must reach this far for SBX_CAP_PROCESSES
 * (proc_start .. proc_list), SBX_CAP_PTY (proc_resize), SBX_CAP_FILE_OPS
 * (file_list .. file_rename) and SBX_CAP_PORTS (port_resolve); a create
 * args struct this large carries the ports member. */
#define SBX_OPS_SIZE_PROCESSES_1_2 \
    (offsetof(struct sbx_provider_ops, proc_list) + sizeof(void (*)(void)))
#define SBX_OPS_SIZE_PTY_1_2 \
    (offsetof(struct sbx_provider_ops, proc_resize) + sizeof(void (*)(void)))
#define SBX_OPS_SIZE_FILE_OPS_1_2 \
    (offsetof(struct sbx_provider_ops, file_rename) + sizeof(void (*)(void)))
#define SBX_OPS_SIZE_PORTS_1_2 \
    (offsetof(struct sbx_provider_ops, port_resolve) + sizeof(void (*)(void)))
#define SBX_CREATE_ARGS_SIZE_PORTS_1_2 \
    (offsetof(struct sbx_create_args, ports) + sizeof(void *))
/* ABI 1.2: the optional health op is present when ops_size reaches this. */
#define SBX_OPS_SIZE_HEALTH_1_2 \
    (offsetof(struct sbx_provider_ops, health) + sizeof(void (*)(void)))
/* ABI 1.2: the ops table must reach this far for SBX_CAP_PAUSE (pause,
 * resume). */
#define SBX_OPS_SIZE_PAUSE_1_2 \
    (offsetof(struct sbx_provider_ops, resume) + sizeof(void (*)(void)))
/* ABI 1.2: the ops table must reach this far for SBX_CAP_FORK (fork). */
#define SBX_OPS_SIZE_FORK_1_2 \
    (offsetof(struct sbx_provider_ops, fork) + sizeof(void (*)(void)))

/* The entry point every provider exports. Side-effect free: it returns
 * static data and may be called any number of times. */
typedef const struct sbx_provider_desc *(*sbx_provider_describe_fn)(void);

/* The entry point is a C symbol even when a C++ file defines it. */
#ifdef __cplusplus
#define SBX_PROVIDER_LINKAGE extern "C"
#else
#define SBX_PROVIDER_LINKAGE
#endif

/*
 * SBX_PROVIDER_DEFINE - define the descriptor and the entry point.
 *
 *   static const struct sbx_provider_ops my_ops = { .init = ..., ... };
 *   SBX_PROVIDER_DEFINE("mybackend", "0.1.0", "what it runs on, one line",
 *                       SBX_ISOLATION_CONTAINER, SBX_CAP_OUTPUT_EXPORT,
 *                       &my_ops, my_keys)
 *
 * Fills the version and size fields at compile time (abi_minor is
 * SBX_ABI_TARGET_MINOR). Use it once, at file scope, in C or C++; build the
 * provider with -fvisibility=hidden: only the entry point is exported.
 */
#define SBX_PROVIDER_DEFINE(name_, version_, description_, isolation_, caps_,  \
                            ops_, config_keys_)                                \
    static const struct sbx_provider_desc sbx_provider_desc_ = {               \
        SBX_ABI_MAJOR, SBX_ABI_TARGET_MINOR,                                   \
        (uint32_t)sizeof(struct sbx_provider_desc),                            \
        (uint32_t)sizeof(struct sbx_provider_ops),                             \
        (name_), (version_), (description_), (uint32_t)(isolation_), 0,        \
        (caps_), (ops_), (config_keys_),                                       \
        {NULL, NULL, NULL, NULL}};                                             \
    SBX_PROVIDER_LINKAGE SBX_PROVIDER_EXPORT const struct sbx_provider_desc *  \
    sbx_provider_describe(void);                                               \
    SBX_PROVIDER_LINKAGE SBX_PROVIDER_EXPORT const struct sbx_provider_desc *  \
    sbx_provider_describe(void)                                                \
    {                                                                          \
        return &sbx_provider_desc_;                                            \
    }

#ifdef __cplusplus
}
#endif

#endif /* SBX_PROVIDER_H */
