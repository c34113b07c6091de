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

#ifdef __cplusplus
}
#endif

#endif /* SBX_TYPES_H */
