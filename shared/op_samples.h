/*
 * op_samples.h - per-operation latency samples, passed from every process
 * that runs provider ops (each `sbx exec`, `sbx mcp`, programs linking
 * libsbx) to the metrics server of `sbx reconcile --watch --metrics`.
 *
 * The spool is one directory (sbxs_op_spool_dir). The metrics server holds
 * an exclusive flock on its file ".server"; a writing process records only
 * while it sees that lock held, so nothing is written when no server runs.
 * A writer appends fixed-size records (struct sbxs_op_sample), each with a
 * single write(2) on an O_APPEND descriptor, to a file of its own named
 * "<pid>-<seq>.ops", on which it holds a shared flock while it writes. It
 * starts a new file after SBXS_OP_SPOOL_FILE_MAX bytes. The server reads
 * whole records past the offset it reached, skips invalid ones, and
 * removes a file once it can take the exclusive lock (its writer closed it
 * or exited) and has read it to the end.
 *
 * A record holds the provider's name, the op's name, the sbx status code
 * and the duration: no session key, path, argument or credential. Every
 * file is opened beneath the directory's descriptor without following
 * symlinks; the spool is refused when other users may write it.
 */
#ifndef SBXS_OP_SAMPLES_H
#define SBXS_OP_SAMPLES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SBXS_OP_SAMPLE_MAGIC 0x314f4253u /* "SBO1" little-endian */
#define SBXS_OP_SAMPLE_VERSION 1u
#define SBXS_OP_SAMPLE_PROVIDER_MAX 24 /* bytes with the NUL */
#define SBXS_OP_SAMPLE_OP_MAX 16

/* One sample: 64 bytes, written whole by one write(2). */
struct sbxs_op_sample {
    uint32_t magic;
    uint16_t version;
    uint16_t size;        /* sizeof (struct sbxs_op_sample) */
    int32_t status;       /* the op's sbx_status */
    uint32_t reserved;    /* zero */
    uint64_t duration_ns;
    char provider[SBXS_OP_SAMPLE_PROVIDER_MAX]; /* NUL-padded */
    char op[SBXS_OP_SAMPLE_OP_MAX];             /* NUL-padded */
};

/* A writer's file grows to at most this many bytes, then it starts another. */
#define SBXS_OP_SPOOL_FILE_MAX (4u << 20)
/* The file the metrics server holds locked. */
#define SBXS_OP_SPOOL_SERVER ".server"

/*
 * The spool directory: $SBX_METRICS_DIR when set (an absolute path;
 * "off" disables recording), else $XDG_STATE_HOME/sbx/metrics, else
 * $HOME/.local/state/sbx/metrics. Returns false when recording is off or
 * no absolute directory results (out is then "").
 */
bool sbxs_op_spool_dir(char *out, size_t len);

/*
 * Record one op (thread-safe, never fails the caller: any problem only
 * drops the sample). Names longer than the record's fields, or with bytes
 * other than [a-z0-9_-], are not recorded. Costs one clock read and one
 * write(2) while a server runs (and a look at the server's lock every 5 s:
 * a writer stops within 5 s of the server); without one, a clock read and
 * a check of the server's lock at most every 5 s.
 */
void sbxs_op_sample_record(const char *provider, const char *op, int status,
                           uint64_t duration_ns);

/* Monotonic nanoseconds, for the durations. */
uint64_t sbxs_op_now_ns(void);

/* Whether a record read from the spool is well formed: magic, version,
 * size, reserved zero, names NUL-terminated and NUL-padded within their
 * fields, non-empty, of [a-z0-9_-] only; status 0..255; a duration below
 * one day. */
bool sbxs_op_sample_valid(const struct sbxs_op_sample *s);

/* Whether a name fits a record field of `cap` bytes and uses only
 * [a-z0-9_-]. */
bool sbxs_op_sample_name_ok(const char *name, size_t cap);

/* Open the spool directory `path` for the server or a writer: a directory
 * (not a symlink) that other users cannot write (no o+w). Returns the
 * descriptor (O_DIRECTORY|O_CLOEXEC) or -1 with errno set (ENOTDIR,
 * EPERM for a spool others may write). */
int sbxs_op_spool_open(const char *path);

/* openat2 beneath dirfd with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS and
 * O_NOFOLLOW|O_CLOEXEC|O_NONBLOCK added to flags; -1 with errno. */
int sbxs_op_spool_openat(int dirfd, const char *name, int flags, unsigned mode);

/* Forget the writer's state in this process (tests, and a forked child
 * before it records: the child starts its own file). */
void sbxs_op_sample_reset(void);

#endif
