/*
 * sbx/memory.h - memory stores: durable, versioned trees of small files
 * that sessions share (docs/MEMORY.md).
 *
 * A memory store has a slug (1 to 63 of a-z, 0-9, '-') and a version, the
 * number of its last commit (0 when new). Every change of a file is kept as
 * an immutable version (content with its SHA-256 and size, or a deletion,
 * with the commit's author and time); the head of a path is its latest
 * version. A change names the head version it is based on, and a commit
 * whose paths moved since is refused as a conflict (SBX_E_EXISTS naming
 * the paths) without writing anything. Limits (per-file size, file count,
 * total size) belong to the store, fixed when it is created; a change over
 * one is SBX_E_INVALID naming the path.
 *
 * The stores live in the session store of an sbx_sessions manager (SQLite
 * or PostgreSQL), so every worker sharing that store sees the same ones.
 * Conventions are those of sbx/sbx.h; strings given to callbacks are
 * borrowed for the call. SBX_E_NOT_FOUND for a store, path or version that
 * does not exist; SBX_E_INVALID for a bad slug or path (the message names
 * it); the store's own errors (SBX_E_UNAVAILABLE: retry).
 */
#ifndef SBX_MEMORY_H
#define SBX_MEMORY_H

#include <sbx/session.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The base of a change made without looking at the current head (it
 * replaces whatever is there: never used for a session's writeback). */
#define SBX_MEMORY_ANY_VERSION (-1)

/* Limits of a new store. Zero-initialize and set size; 0 means the
 * default: 1 MiB per file, 100 000 files, 1 GiB in all. */
struct sbx_memory_limits {
    uint32_t size;
    int64_t max_file_bytes;
    int64_t max_files;
    int64_t max_total_bytes;
};

/* A store as listings give it (borrowed for the callback). */
struct sbx_memory_info {
    uint32_t size;
    const char *slug;
    int64_t version;    /* last commit, 0 when none */
    int64_t files;      /* files at the head */
    int64_t bytes;      /* their total size */
    int64_t created_at; /* ms since the epoch */
    int64_t max_file_bytes, max_files, max_total_bytes;
};

/* One version of a file (borrowed for the callback). */
struct sbx_memory_file {
    uint32_t size;
    const char *path;
    int64_t version;
    bool deleted;       /* a deletion (logs only) */
    const char *sha256; /* 64 lowercase hex; NULL for a deletion */
    int64_t file_size;
    const char *author; /* logs only: the session label or "external" */
    int64_t created_at; /* logs only: ms since the epoch */
};

/* Callbacks return 0 to go on; anything else stops the listing, which
 * then returns SBX_E_CANCELLED. */
typedef int (*sbx_memory_store_fn)(void *ud, const struct sbx_memory_info *info);
typedef int (*sbx_memory_file_fn)(void *ud, const struct sbx_memory_file *file);

/* Create an empty store (limits may be NULL). SBX_E_EXISTS when taken. */
SBX_API int sbx_memory_create(sbx_sessions *m, const char *slug,
                              const struct sbx_memory_limits *limits, sbx_error *err);

/* Delete a store and its whole history. */
SBX_API int sbx_memory_delete(sbx_sessions *m, const char *slug, sbx_error *err);

/* Every store, in byte order of slug. */
SBX_API int sbx_memory_list(sbx_sessions *m, sbx_memory_store_fn each, void *ud,
                            sbx_error *err);

/* The files of a store at version `at` (0: the latest), in byte order of
 * path. */
SBX_API int sbx_memory_ls(sbx_sessions *m, const char *slug, int64_t at,
                          sbx_memory_file_fn each, void *ud, sbx_error *err);

/* Every version of every file (path NULL) or of one file, newest first. */
SBX_API int sbx_memory_log(sbx_sessions *m, const char *slug, const char *path,
                           sbx_memory_file_fn each, void *ud, sbx_error *err);

/* Stream the content of path at version `at` (0: latest) into sink. */
SBX_API int sbx_memory_cat(sbx_sessions *m, const char *slug, const char *path,
                           int64_t at, const struct sbx_sink *sink, sbx_error *err);

/*
 * Write path from src as a new version, based on head version `base` (0:
 * the path must not exist; SBX_MEMORY_ANY_VERSION: no check). The source is
 * read up to the store's file limit (one byte more fails naming the path).
 * *version (may be NULL) receives the new store version. Author "external".
 */
SBX_API int sbx_memory_put(sbx_sessions *m, const char *slug, const char *path,
                           const struct sbx_source *src, int64_t base,
                           int64_t *version, sbx_error *err);

/* Delete path as a new version, based on `base` like sbx_memory_put. */
SBX_API int sbx_memory_rm(sbx_sessions *m, const char *slug, const char *path,
                          int64_t base, int64_t *version, sbx_error *err);

/*
 * End a conflict of session_key's read-write attachment of slug (a
 * writeback refused because another session changed a path first; the
 * session's changes stayed in its mount). keep: the session's version is
 * committed over the current heads; else it is dropped and the mount is
 * reloaded with the heads before the next command. Waits for the
 * session's running commands. SBX_E_INVALID when there is no conflict,
 * SBX_E_NOT_FOUND when the store is not attached to the session.
 */
SBX_API int sbx_memory_resolve(sbx_sessions *m, const char *session_key, const char *slug,
                               bool keep, sbx_error *err);

#ifdef __cplusplus
}
#endif

#endif
