/*
 * sbx/types.h - what the sbx provider ABI and the libsbx consumer API
 * share: status codes, capability bits, isolation levels, log levels,
 * configuration value types, sinks and sources, and the argument and
 * result structs a consumer hands through libsbx to a provider unchanged
 * (exec, blobs, egress policies, memory attachments, users and groups).
 *
 * Part of the ABI (version in sbx/provider.h): everything here follows the
 * rules of sbx/provider.h - 1.0 and 1.1 are frozen, later minors only
 * append. Included by sbx/provider.h (backends) and sbx/sbx.h (consumers);
 * neither side needs to include it itself. C99; compiles alone with
 * -std=c99 -pedantic.
 */
#ifndef SBX_TYPES_H
#define SBX_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest persisted sandbox reference, including the terminating NUL. */
#define SBX_REF_MAX 512

/* Length of a key hash: lowercase hex SHA-256, without NUL. */
#define SBX_KEY_HASH_LEN 64

#if defined(__GNUC__) || defined(__clang__)
#define SBX_PRINTF_LIKE(fmt_idx, arg_idx) \
    __attribute__((format(printf, fmt_idx, arg_idx)))
#else
#define SBX_PRINTF_LIKE(fmt_idx, arg_idx)
#endif

/* ------------------------------------------------------------------------ */
/* Status codes                                                               */
/* ------------------------------------------------------------------------ */

/*
 * Every op returns one of these. Numbers are assigned once and never reused;
 * new codes are appended. SBX_E_NOT_FOUND for a persisted reference means the
 * resource is gone: callers must never replace it with an empty sandbox.
 */
typedef enum sbx_status {
    SBX_OK = 0,
    SBX_E_NOT_FOUND = 1,   /* the referenced resource does not exist */
    SBX_E_DENIED = 2,      /* ownership mismatch or permission denied */
    SBX_E_UNSUPPORTED = 3, /* the provider cannot do this */
    SBX_E_INVALID = 4,     /* bad argument: path escapes, bad name, ... */
    SBX_E_TIMEOUT = 5,     /* a deadline passed */
    SBX_E_CANCELLED = 6,   /* the caller cancelled */
    SBX_E_UNAVAILABLE = 7, /* transient: daemon/service down, 5xx; retry */
    SBX_E_PROTOCOL = 8,    /* the backend answered something unexpected */
    SBX_E_IO = 9,          /* local I/O error */
    SBX_E_NOMEM = 10,      /* out of memory */
    SBX_E_EXISTS = 11,     /* exists and belongs to someone else */
    SBX_E_CONFIG = 12,     /* configuration is wrong */
    SBX_E_ABI = 13,        /* plugin ABI mismatch or malformed plugin */
    SBX_E_NOT_EXEC = 14,   /* command exists but cannot be executed */
    SBX_E_NO_COMMAND = 15, /* command not found */
    SBX_E_INTERNAL = 16    /* a bug */
} sbx_status;

/* Number of status codes defined by this header (one past the highest). */
#define SBX_STATUS_COUNT 17

/*
 * sbx_strerror - a static English description of a status code.
 * Never returns NULL; unknown codes give "unknown status". Defined inline so
 * that providers link nothing from the host. The switch has no default so
 * that the compiler flags a code without a message.
 */
static inline const char *sbx_strerror(sbx_status s)
{
    switch (s) {
    case SBX_OK: return "success";
    case SBX_E_NOT_FOUND: return "not found";
    case SBX_E_DENIED: return "ownership or permission denied";
    case SBX_E_UNSUPPORTED: return "not supported by this provider";
    case SBX_E_INVALID: return "invalid argument";
    case SBX_E_TIMEOUT: return "timed out";
    case SBX_E_CANCELLED: return "cancelled";
    case SBX_E_UNAVAILABLE: return "temporarily unavailable";
    case SBX_E_PROTOCOL: return "protocol error";
    case SBX_E_IO: return "I/O error";
    case SBX_E_NOMEM: return "out of memory";
    case SBX_E_EXISTS: return "already exists";
    case SBX_E_CONFIG: return "configuration error";
    case SBX_E_ABI: return "plugin ABI error";
    case SBX_E_NOT_EXEC: return "command cannot be executed";
    case SBX_E_NO_COMMAND: return "command not found";
    case SBX_E_INTERNAL: return "internal error";
    }
    return "unknown status";
}

/* Transient failures may succeed when retried unchanged. */
static inline int sbx_status_is_transient(sbx_status s)
{
    return s == SBX_E_UNAVAILABLE || s == SBX_E_TIMEOUT;
}

/* ------------------------------------------------------------------------ */
/* Capabilities: bits assigned once, never reused                             */
/* ------------------------------------------------------------------------ */

#define SBX_CAP_FILE_MOUNTS   (UINT64_C(1) << 0) /* mount_put, mount_remove */
#define SBX_CAP_OUTPUT_EXPORT (UINT64_C(1) << 1) /* export_outputs */
#define SBX_CAP_SKILLS        (UINT64_C(1) << 2) /* skill_install */
/* Bits 3 and 4 are assigned to the memory stores and the egress allowlist.
 * Their ops arrive in ABI 1.1 with size-prefixed argument structs; a 1.0
 * host refuses a provider that declares them. */
#define SBX_CAP_MEMORY        (UINT64_C(1) << 3) /* ops in ABI 1.1 */
#define SBX_CAP_EGRESS        (UINT64_C(1) << 4) /* ops in ABI 1.1 */
#define SBX_CAP_PACKAGES      (UINT64_C(1) << 5) /* packages run via exec */
/* ABI 1.1: users and groups made in the sandbox, and ops run as one of
 * them (group_add, user_add, sbx_host.call_user). */
#define SBX_CAP_USERS         (UINT64_C(1) << 6)

/* Every bit a 1.0 host accepts. */
#define SBX_CAP_ALL_1_0                                                   \
    (SBX_CAP_FILE_MOUNTS | SBX_CAP_OUTPUT_EXPORT | SBX_CAP_SKILLS |       \
     SBX_CAP_PACKAGES)
/* Every bit a 1.1 host accepts from a provider whose descriptor claims
 * minor >= 1 and whose ops table covers the bit's ops (see the
 * SBX_OPS_SIZE_* macros at the end). */
#define SBX_CAP_ALL_1_1 \
    (SBX_CAP_ALL_1_0 | SBX_CAP_MEMORY | SBX_CAP_EGRESS | SBX_CAP_USERS)
/* ABI 1.2: processes that outlive the call, with a bounded replay buffer
 * per stream read by byte cursor (proc_start, proc_write, proc_read,
 * proc_signal, proc_list); a pseudo-terminal for them (proc_resize; needs
 * SBX_CAP_PROCESSES); directory listing, stat, mkdir, remove and rename
 * (file_list .. file_rename); ports declared at create and resolved to an
 * endpoint outside the sandbox (port_resolve). */
#define SBX_CAP_PROCESSES     (UINT64_C(1) << 7)
#define SBX_CAP_PTY           (UINT64_C(1) << 8)
#define SBX_CAP_FILE_OPS      (UINT64_C(1) << 9)
#define SBX_CAP_PORTS         (UINT64_C(1) << 10)
/* ABI 1.2, lifecycle: a sandbox paused and resumed in place (pause,
 * resume; any other op on a paused sandbox resumes it first), and a
 * sandbox made ahead of its session for a warm pool, then handed over to
 * one (no op: see "SBX_CAP_POOL" in sbx/provider.h). */
#define SBX_CAP_PAUSE         (UINT64_C(1) << 11)
#define SBX_CAP_POOL          (UINT64_C(1) << 12)
/* ABI 1.2: a new sandbox whose workspace starts as a copy of another's,
 * through the backend's own snapshot (fork). */
#define SBX_CAP_FORK          (UINT64_C(1) << 13)
/* Every bit a 1.2 host accepts from a descriptor claiming minor >= 2. */
#define SBX_CAP_ALL_1_2                                                   \
    (SBX_CAP_ALL_1_1 | SBX_CAP_PROCESSES | SBX_CAP_PTY | SBX_CAP_FILE_OPS | \
     SBX_CAP_PORTS | SBX_CAP_PAUSE | SBX_CAP_POOL | SBX_CAP_FORK)

/* ------------------------------------------------------------------------ */
/* Isolation: what stands between a command and the host                     */
/* ------------------------------------------------------------------------ */

/* Values of sbx_provider_desc.isolation. Shown by `sbx providers` and
 * `sbx check`; 0 (none) is the safe default for a provider that forgets. */
enum sbx_isolation {
    SBX_ISOLATION_NONE = 0,      /* host processes: not a security boundary */
    SBX_ISOLATION_CONTAINER = 1, /* namespaces and cgroups on a shared kernel */
    SBX_ISOLATION_VM = 2         /* a virtual machine (microVM) of its own */
};

/* ------------------------------------------------------------------------ */
/* Streams                                                                    */
/* ------------------------------------------------------------------------ */

/*
 * A sink receives bytes produced by the provider (command output, file
 * contents, archives). write returns 0 to continue or a nonzero sbx_status
 * to make the provider stop and return that status (the sink has set the
 * call's error). Chunks are borrowed for the call of write.
 *
 * size is sizeof(struct sbx_sink) as its creator built it: members appended
 * in later minors are present only when size covers them. Threads: one sink
 * is never called from two threads at once (a provider that reads stdout
 * and stderr on two threads calls each sink from its own thread, or
 * serializes); the stdout and stderr sinks of one exec may be called
 * concurrently, each from one thread.
 */
struct sbx_sink {
    uint32_t size;
    void *ctx;
    int (*write)(void *ctx, const void *buf, size_t len);
};

/* Initializer: struct sbx_sink s = SBX_SINK_INIT(ctx, write_fn); */
#define SBX_SINK_INIT(ctx_, write_) \
    {(uint32_t)sizeof(struct sbx_sink), (ctx_), (write_)}

/*
 * A source supplies bytes to the provider (stdin, file contents, bundles).
 * read returns the number of bytes stored in buf (1..cap), 0 at end of
 * stream, or -1 on error (the host has already set the call's error). The
 * same thread rule as for sinks holds: never two calls at once.
 *
 * The two optional members let a provider do better than calling read in a
 * loop; NULL means "not known":
 *  - poll_fd: a descriptor that polls readable once read will not block
 *    (data or end of stream). A provider feeding a command's stdin waits on
 *    it (next to its own stop signal) instead of blocking in read, so it can
 *    return as soon as the command has exited even though the source has
 *    nothing more to say. Without it, a provider must wait for a read in
 *    progress before returning: the source is borrowed only for the call.
 *  - length: the exact number of bytes the source will still deliver, or -1
 *    when that is not known. Lets a provider write size-prefixed formats
 *    (a tar header) without spooling.
 */
struct sbx_source {
    uint32_t size; /* sizeof(struct sbx_source) as its creator built it */
    void *ctx;
    long (*read)(void *ctx, void *buf, size_t cap);
    int (*poll_fd)(void *ctx);
    int64_t (*length)(void *ctx);
};

/* Initializer with both optional members NULL:
 * struct sbx_source s = SBX_SOURCE_INIT(ctx, read_fn); */
#define SBX_SOURCE_INIT(ctx_, read_) \
    {(uint32_t)sizeof(struct sbx_source), (ctx_), (read_), NULL, NULL}

/* ------------------------------------------------------------------------ */
/* Configuration value types (of struct sbx_config_key, sbx/provider.h)      */
/* ------------------------------------------------------------------------ */

enum sbx_config_type {
    SBX_CFG_STRING = 1,
    SBX_CFG_INT = 2,    /* decimal integer */
    SBX_CFG_BOOL = 3,   /* true/false/yes/no/on/off */
    SBX_CFG_SIZE = 4,   /* integer with optional k/m/g suffix (powers of 1024) */
    SBX_CFG_MAP = 5,    /* mapping of string to string */
    SBX_CFG_LIST = 6,   /* sequence of strings */
    SBX_CFG_NUMBER = 7  /* decimal number, may have a fraction */
};

/* ------------------------------------------------------------------------ */
/* Log levels (sbx_host.log, sbx_options.log)                                 */
/* ------------------------------------------------------------------------ */

enum sbx_log_level {
    SBX_LOG_ERROR = 0,
    SBX_LOG_WARN = 1,
    SBX_LOG_INFO = 2,
    SBX_LOG_DEBUG = 3
};

/* ------------------------------------------------------------------------ */
/* Argument and result structs a consumer passes through to a provider       */
/* (size-prefixed)                                                            */
/* ------------------------------------------------------------------------ */

struct sbx_exec_args {
    uint32_t size;
    const char *const *argv;     /* argv[0] is the program; NULL-terminated */
    const char *const *env;      /* "NAME=value" strings, NULL-terminated, or NULL
                                    (see exec for what a provider may add) */
    const char *cwd;             /* workspace-relative; NULL or "" is the root */
    const struct sbx_source *in; /* stdin, or NULL for an empty stdin */
    int64_t timeout_ms;          /* 0: no timeout */
    const struct sbx_sink *out;  /* stdout chunks, may be NULL to discard */
    const struct sbx_sink *err;  /* stderr chunks, may be NULL to discard */
};

struct sbx_exec_result {
    uint32_t size;
    int exit_code;      /* exit status, or -1 when killed by a signal */
    int term_signal;    /* terminating signal, or 0 */
    int timed_out;      /* nonzero when the timeout killed it */
    uint64_t out_bytes; /* bytes produced on stdout */
    uint64_t err_bytes; /* bytes produced on stderr */
};

/* A pinned object: expected size and SHA-256, checked before publishing. */
struct sbx_blob {
    uint32_t size;
    const struct sbx_source *src;
    uint64_t length;     /* exact expected byte count */
    const char *sha256;  /* expected lowercase hex digest */
    const char *format;  /* for bundles: "tar", "tar.gz", "zip"; else NULL */
};

/* --- ABI 1.1: egress allowlist (SBX_CAP_EGRESS) ------------------------- */

/* What a sandbox does with outbound traffic no rule allows. */
enum sbx_egress_action {
    SBX_EGRESS_DENY = 0,
    SBX_EGRESS_ALLOW = 1
};

/*
 * A limited network: deny by default, allow these targets. A target is a
 * host name ("pypi.org") or a pattern for the names below a domain
 * ("*.pythonhosted.org"); lowercase letters, digits, '-' and '.' only.
 */
struct sbx_egress_policy {
    uint32_t size;               /* sizeof as its creator built it */
    uint32_t default_action;     /* enum sbx_egress_action; the host sends DENY */
    const char *const *allow;    /* NULL-terminated targets, or NULL for none */
};

/* The policy a sandbox enforces, as read back by egress_get: the provider
 * sets default_action and calls allow once per allowed target (borrowed for
 * the call; nonzero stops with that status). */
struct sbx_egress_report {
    uint32_t size;
    uint32_t default_action;     /* set by the provider */
    void *ctx;
    int (*allow)(void *ctx, const char *target);
};

/* --- ABI 1.1: memory stores (SBX_CAP_MEMORY) ---------------------------- */

/* How a sandbox sees an attached memory store. */
enum sbx_memory_access {
    /* Not writable, not even by the sandbox's root, where the provider
     * can enforce it (a read-only bind); where it cannot (a remote
     * sandbox's root can write anything), memory_diff reports what
     * changed there and the host refuses it and reloads the tree. */
    SBX_MEMORY_READ_ONLY = 0,
    SBX_MEMORY_READ_WRITE = 1
};

/* One memory store a sandbox is created with. */
struct sbx_memory_attachment {
    uint32_t size;     /* sizeof as its creator built it */
    uint32_t access;   /* enum sbx_memory_access */
    const char *slug;  /* 1 to 63 of [a-z0-9-]: /mnt/memory/<slug> */
};

/* memory_diff flag: report every entry of the tree, not only changes. */
#define SBX_MEMORY_DIFF_ALL 1u

/*
 * What memory_diff reports. tar receives a tar archive of the entries that
 * are new or changed since the baseline (all of them with
 * SBX_MEMORY_DIFF_ALL), every type as it is (a symlink as a symlink, a
 * FIFO as a FIFO, without data) and names as they are (bytes, not
 * necessarily UTF-8), so that the host can refuse them by name; removed is
 * called once per regular file of the baseline that is gone (borrowed;
 * nonzero stops with that status).
 */
struct sbx_memory_changes {
    uint32_t size;     /* sizeof as its creator built it */
    const struct sbx_sink *tar;
    void *ctx;
    int (*removed)(void *ctx, const char *path);
};

/* ------------------------------------------------------------------------ */
/* Users (ABI 1.1, SBX_CAP_USERS)                                             */
/* ------------------------------------------------------------------------ */

/* A group to make: name of 1 to 32 of [a-z0-9_-], starting with a letter
 * or '_'; gid 0 lets the provider pick a free one (>= 1000). */
struct sbx_group_spec {
    uint32_t size;
    uint32_t gid;
    const char *name;
};

/* A user to make (same name rule). uid 0 lets the provider pick; group
 * NULL makes (or reuses) a group of the user's name as its primary group;
 * groups are supplementary groups, made before with group_add. The home
 * directory is /home/<name>, created and owned by the user. */
struct sbx_user_spec {
    uint32_t size;
    uint32_t uid;
    const char *name;
    const char *group;         /* primary group name, or NULL */
    const char *const *groups; /* NULL-terminated, or NULL */
};

/* ------------------------------------------------------------------------ */
/* Processes (ABI 1.2, SBX_CAP_PROCESSES and SBX_CAP_PTY)                     */
/* ------------------------------------------------------------------------ */

/* Longest process id, NUL included. A process id is 1 to 127 bytes of
 * [A-Za-z0-9._:-], made by the provider; it names one process of one
 * sandbox and stays valid for any host process that attaches the sandbox
 * (it does not depend on the host process that started it). */
#define SBX_PROC_ID_MAX 128

/* Default size of a process's replay buffer, per stream. */
#define SBX_PROC_BUFFER_DEFAULT (UINT64_C(1) << 20)

/* proc_start flags. */
#define SBX_PROC_PTY 1u /* run on a pseudo-terminal (SBX_CAP_PTY): stdin,
                           stdout and stderr are the terminal, and all
                           output is one stream (read as stdout) */

/*
 * What proc_start runs. argv, env and cwd are as for exec; the call's user
 * (sbx_host.call_user) applies as for exec. The process runs until it ends,
 * is signalled, reaches timeout_ms or the sandbox is destroyed; the host
 * call returns once it has started.
 */
struct sbx_proc_spec {
    uint32_t size;               /* sizeof as its creator built it */
    uint32_t flags;              /* SBX_PROC_* */
    const char *const *argv;     /* argv[0] is the program; NULL-terminated */
    const char *const *env;      /* as sbx_exec_args.env; with SBX_PROC_PTY a
                                    provider sets TERM=xterm-256color when
                                    env leaves it out */
    const char *cwd;             /* workspace-relative; NULL or "" is the root */
    int64_t timeout_ms;          /* 0: none; at the deadline the whole
                                    process tree is killed (SIGKILL) */
    uint16_t rows, cols;         /* terminal size with SBX_PROC_PTY; 0: 24x80 */
    uint32_t reserved;           /* zero */
    uint64_t buffer_bytes;       /* replay buffer per stream; 0: the
                                    provider's configured size (default
                                    SBX_PROC_BUFFER_DEFAULT) */
};

/* proc_write flags. */
#define SBX_PROC_WRITE_CLOSE 1u /* after the bytes, close stdin (EOF; with a
                                   PTY, the terminal's EOF character) */

/*
 * What proc_read asks for. Each stream is a sequence of bytes numbered from
 * 0 (the first byte the process wrote); a cursor is the number of the next
 * byte wanted. The provider keeps the last buffer_bytes of each stream.
 * proc_read writes the bytes from each cursor on (at most max_bytes per
 * stream, in order, never one twice) to the sinks, waiting up to wait_ms
 * for a first byte or the end when there is nothing yet.
 */
struct sbx_proc_read_args {
    uint32_t size;               /* sizeof as its creator built it */
    uint32_t wait_ms;            /* 0: return at once */
    uint64_t out_cursor;         /* stdout (or the terminal) */
    uint64_t err_cursor;         /* stderr (none with a PTY) */
    uint64_t max_bytes;          /* per stream; 0: 64 KiB */
    const struct sbx_sink *out;  /* may be NULL: the bytes are skipped */
    const struct sbx_sink *err;
};

/* Process states. */
enum sbx_proc_state {
    SBX_PROC_RUNNING = 0,
    SBX_PROC_EXITED = 1 /* ended: exit_code or term_signal is set */
};

/*
 * What proc_read reports. A cursor older than the oldest byte still kept
 * resumes at that byte, and *_lost counts the bytes skipped (exactly: the
 * new cursor always equals the old one + lost + bytes written to the sink).
 * eof is set once the process has ended and both new cursors are at the
 * ends of their streams: nothing more will ever come.
 */
struct sbx_proc_read_result {
    uint32_t size;               /* sizeof as its creator built it */
    uint32_t state;              /* enum sbx_proc_state */
    uint64_t out_cursor, err_cursor; /* where the next read continues */
    uint64_t out_lost, err_lost;     /* bytes skipped by this read */
    int exit_code;               /* when exited: status, or -1 after a signal */
    int term_signal;             /* when exited by a signal: its number */
    int timed_out;               /* nonzero when timeout_ms killed it */
    int eof;
};

/* One process of proc_list (borrowed for the callback). */
struct sbx_proc_info {
    uint32_t size;               /* sizeof as the provider built it */
    uint32_t flags;              /* SBX_PROC_* it was started with */
    const char *id;
    const char *command;         /* argv joined by spaces, possibly cut */
    uint32_t state;              /* enum sbx_proc_state */
    int exit_code, term_signal;  /* as in sbx_proc_read_result */
    int64_t started_ms;          /* Unix time in ms, or 0 when unknown */
};

/* Receives proc_list's processes; nonzero stops with that status. */
struct sbx_proc_list_sink {
    uint32_t size;
    void *ctx;
    int (*entry)(void *ctx, const struct sbx_proc_info *info);
};

/* ------------------------------------------------------------------------ */
/* File operations (ABI 1.2, SBX_CAP_FILE_OPS)                                */
/* ------------------------------------------------------------------------ */

enum sbx_file_type {
    SBX_FILE_REGULAR = 1,
    SBX_FILE_DIR = 2,
    SBX_FILE_SYMLINK = 3, /* never followed: reported as itself */
    SBX_FILE_OTHER = 4    /* FIFO, socket, device */
};

/* One entry of file_list, or file_stat's answer (name is NULL there). */
struct sbx_file_info {
    uint32_t size;               /* sizeof as its creator built it */
    uint32_t type;               /* enum sbx_file_type */
    const char *name;            /* entry name, no '/' (borrowed) */
    uint64_t bytes;              /* size in bytes */
    uint32_t mode;               /* permission bits (07777) */
    uint32_t reserved;           /* zero */
    int64_t mtime_ns;            /* modification time, ns since the epoch */
};

/* Receives file_list's entries, one call each, in any order, without "."
 * and ".."; nonzero stops with that status. */
struct sbx_file_list_sink {
    uint32_t size;
    void *ctx;
    int (*entry)(void *ctx, const struct sbx_file_info *info);
};

#define SBX_MKDIR_PARENTS 1u     /* make missing parents; an existing
                                    directory is then SBX_OK */
#define SBX_REMOVE_RECURSIVE 1u  /* remove a directory and all it holds */
#define SBX_RENAME_NOREPLACE 1u  /* an existing target is SBX_E_EXISTS */

/* ------------------------------------------------------------------------ */
/* Exposed ports (ABI 1.2, SBX_CAP_PORTS)                                     */
/* ------------------------------------------------------------------------ */

#define SBX_ENDPOINT_HOST_MAX 256
#define SBX_ENDPOINT_URL_MAX 1024
#define SBX_ENDPOINT_HEADER_MAX 1024

/* Where a client outside the sandbox reaches a port declared at create.
 * header is a request header the service requires ("Name: value", e.g. a
 * preview token) or "": a credential, never logged. */
struct sbx_port_endpoint {
    uint32_t size;                       /* sizeof as its creator built it */
    uint16_t port;                       /* the port to connect to */
    uint16_t tls;                        /* nonzero: speak TLS */
    char host[SBX_ENDPOINT_HOST_MAX];    /* a name or address */
    char url[SBX_ENDPOINT_URL_MAX];      /* "http://127.0.0.1:49153", ... */
    char header[SBX_ENDPOINT_HEADER_MAX];
};

#ifdef __cplusplus
}
#endif

#endif /* SBX_TYPES_H */
