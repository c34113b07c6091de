/*
 * memory_trees.h - memory stores: durable, versioned trees of small files
 * that several sessions share (docs/MEMORY.md).
 *
 * Internal to libsbx; kept in the session store (both drivers, same
 * schema: memory_stores, memory_commits, memory_versions, memory_heads).
 *
 * Model: a store (slug) has a version, the number of its last commit
 * (0 for a new store). A commit writes one immutable version per changed
 * path (content with its SHA-256 and size, or a deletion) stamped with the
 * commit's version, its author (a session label or "external") and time.
 * The head of a path is its latest version; the store at version V is
 * every path whose latest version <= V is not a deletion.
 *
 * Commits are atomic and checked: each change names the head version it is
 * based on (0: the path was absent, deletions included), and if any
 * path's head moved since, nothing is written and the commit fails with
 * SBX_E_EXISTS naming the paths ("conflict"). Limits (per-file size, file
 * count, total size) are the store's own, fixed at creation, and a commit
 * that would pass one fails naming the path.
 *
 * Errors are sbx_status codes with the message filled, like store.h;
 * SBX_E_NOT_FOUND for a store, path or version that does not exist.
 */
#ifndef SBX_HOST_MEMORY_STORE_H
#define SBX_HOST_MEMORY_STORE_H

#include "store/store.h"

#define SBX_MSTORE_SLUG_MAX 63
#define SBX_MSTORE_PATH_MAX 1024
/* Defaults of the limits of a new store. */
#define SBX_MSTORE_DEFAULT_FILE_BYTES (1024 * 1024)
#define SBX_MSTORE_DEFAULT_FILES 100000
#define SBX_MSTORE_DEFAULT_TOTAL_BYTES (INT64_C(1) << 30)
/* A change without a precondition (an external `put --force`). */
#define SBX_MSTORE_ANY_BASE (-1)

struct sbx_mstore_limits {
    int64_t max_file_bytes;  /* 0: default */
    int64_t max_files;       /* 0: default */
    int64_t max_total_bytes; /* 0: default */
};

struct sbx_mstore_info {
    char slug[SBX_MSTORE_SLUG_MAX + 1];
    int64_t version;    /* last commit, 0 when none */
    int64_t files;      /* live files at the head */
    int64_t bytes;      /* their total size */
    int64_t created_at; /* ms */
    struct sbx_mstore_limits limits;
};

/* One file version, as listings and logs give it. Strings are borrowed
 * for the callback. */
struct sbx_mstore_file {
    const char *path;
    int64_t version;
    bool deleted;
    const char *sha256; /* 64 hex, NULL for a deletion */
    int64_t size;
    const char *author; /* logs only, else NULL */
    int64_t created_at; /* logs only, else 0 */
};

/* A callback that stops the listing with its non-SBX_OK status. */
typedef int (*sbx_mstore_each)(void *ud, const struct sbx_mstore_file *f,
                               sbx_error *err);

/* Slug: 1 to 63 of [a-z0-9-]. SBX_E_INVALID naming the problem. */
int sbxh_mstore_check_slug(const char *slug, sbx_error *err);

/* Path: relative, '/'-separated, valid UTF-8 without control characters,
 * no empty, "." or ".." component, at most SBX_MSTORE_PATH_MAX bytes.
 * SBX_E_INVALID naming the path (escaped) and the problem. */
int sbxh_mstore_check_path(const char *path, sbx_error *err);

/* Create an empty store; SBX_E_EXISTS when the slug is taken. Limits NULL
 * or 0 members: the defaults; negative: SBX_E_INVALID. */
int sbxh_mstore_create(struct sbx_store *s, const char *slug,
                       const struct sbx_mstore_limits *limits, sbx_error *err);

/* Delete a store with its whole history. */
int sbxh_mstore_delete(struct sbx_store *s, const char *slug, sbx_error *err);

int sbxh_mstore_info(struct sbx_store *s, const char *slug,
                     struct sbx_mstore_info *out, sbx_error *err);

/* Every store, in byte order of slug. */
int sbxh_mstore_list(struct sbx_store *s,
                     int (*each)(void *ud, const struct sbx_mstore_info *m,
                                 sbx_error *err),
                     void *ud, sbx_error *err);

/* The live files of the store at version `at` (0: the current version;
 * past the store's version: SBX_E_NOT_FOUND), in byte order of path. */
int sbxh_mstore_heads(struct sbx_store *s, const char *slug, int64_t at,
                      sbx_mstore_each each, void *ud, sbx_error *err);

/* Every version of every path (path NULL) or of one path, newest first,
 * with author and time. */
int sbxh_mstore_log(struct sbx_store *s, const char *slug, const char *path,
                    sbx_mstore_each each, void *ud, sbx_error *err);

/* The content of path at version `at` (0: current) into sink, with its
 * version in *version (may be NULL). SBX_E_NOT_FOUND when the path does
 * not exist there (never written, or deleted). */
int sbxh_mstore_read(struct sbx_store *s, const char *slug, const char *path,
                     int64_t at, const struct sbx_sink *sink, int64_t *version,
                     sbx_error *err);

/* The latest version of path at store version `at` (0: now): *version 0
 * when it never existed there, *live false for a deletion, sha256 its
 * digest ("" for a deletion). */
int sbxh_mstore_head(struct sbx_store *s, const char *slug, const char *path, int64_t at,
                     int64_t *version, bool *live, char sha256[65], sbx_error *err);

/* One change of a commit. */
struct sbx_mstore_change {
    const char *path;
    int64_t base; /* head version it is based on; 0 absent; SBX_MSTORE_ANY_BASE */
    bool remove;  /* a deletion; else the content comes from load */
};

/*
 * A commit: changes in any order (a path at most once). For each
 * non-removal, load(ud, index, ...) gives its content while the commit
 * runs (one at a time: at most one file is held in memory; unload is called
 * after it was written, may be NULL). load fails the commit with its
 * status; its err is passed on.
 */
struct sbx_mstore_commit {
    const char *slug;
    const char *author; /* at most SBX_STORE_NAME_MAX bytes */
    const struct sbx_mstore_change *changes;
    size_t nchanges;
    int (*load)(void *ud, size_t index, const void **data, size_t *len,
                sbx_error *err);
    void (*unload)(void *ud, size_t index);
    void *ud;
};

/*
 * Commit atomically. On success *version (may be NULL) is the new store
 * version (the old one when nchanges is 0: nothing is written). On a
 * conflict: SBX_E_EXISTS, nothing written, and when conflicts is not NULL
 * *conflicts is a malloc'd array of *nconflicts indices into changes.
 */
int sbxh_mstore_commit(struct sbx_store *s, const struct sbx_mstore_commit *c,
                       int64_t *version, size_t **conflicts, size_t *nconflicts,
                       sbx_error *err);

#endif
