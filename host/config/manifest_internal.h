/*
 * manifest_internal.h - what the manifest files share (parse, check,
 * apply); the public side is sbx/manifest.h.
 */
#ifndef SBX_HOST_MANIFEST_INTERNAL_H
#define SBX_HOST_MANIFEST_INTERNAL_H

#include <sbx/manifest.h>

#include <stdbool.h>
#include <stddef.h>

/* Bounds on what one manifest may make sbx do. */
#define SBX_MANIFEST_FILE_MAX (16 * 1024 * 1024) /* bytes of manifest text */
#define SBX_MANIFEST_ENTRIES_MAX 4096
#define SBX_MANIFEST_PATH_MAX 1024
#define SBX_MANIFEST_DEPTH_MAX 32      /* levels of YAML nesting */
#define SBX_MANIFEST_NODES_MAX 100000  /* YAML nodes (scalars, lists, maps) */
/* Defaults of manifest.max_bytes and manifest.git_timeout (sbx.yaml). */
#define SBX_MANIFEST_MAX_BYTES_DEFAULT (256LL * 1024 * 1024)
#define SBX_MANIFEST_GIT_TIMEOUT_MS_DEFAULT (300LL * 1000)

enum manifest_type {
    MF_FILE = 1,
    MF_DIR,
    MF_LOCAL_FILE,
    MF_LOCAL_DIR,
    MF_GIT_REPO
};

struct manifest_entry {
    int type;         /* enum manifest_type */
    int line;         /* of the entry in the manifest */
    char *path;       /* workspace-relative, checked */
    unsigned char *content; /* file: the bytes (decoded) */
    size_t content_len;
    char *source;     /* local_file/local_dir: as written; resolved below */
    char *resolved;   /* local_*, a host git_repo: the absolute, checked host path */
    int root;         /* local_*: index in sbx_manifest.roots of the directory ... */
    char *rel;        /* ... below which the source is `rel` (no symlinks in it) */
    char *url, *ref;  /* git_repo */
    int mode;         /* permission bits, or -1 for the default */
    char *group;      /* or NULL */
};

struct manifest_user {
    char *name;
    long uid; /* -1: any */
    char **groups;
    size_t ngroups;
    int line;
};

struct manifest_group {
    char *name;
    long gid; /* -1: any */
    int line;
};

struct sbx_manifest {
    char *name; /* file name (or "manifest") for messages */
    char digest[65];      /* of the meaning (manifest_digest.c) */
    char text_digest[65]; /* SHA-256 of the text: what sbx recorded before
                           * digests covered the meaning; a session recorded
                           * with it still resumes with that text */
    struct manifest_entry *entries;
    size_t nentries;
    char **env; /* "NAME=value", NULL-terminated (may be empty) */
    size_t nenv;
    struct manifest_user *users;
    size_t nusers;
    struct manifest_group *groups;
    size_t ngroups;
    char *run_as;
    int run_as_line;
    /* Descriptors (O_PATH) of the base directory and the grants that local
     * sources were found under, opened at check time: the apply opens each
     * source beneath one of them, never by its path again. */
    int *roots;
    char **root_paths; /* their resolved paths */
    size_t nroots;
    long long max_bytes;     /* per local_dir / git_repo entry (and clone) */
    long long git_timeout_ms; /* per git command */
};

/* Parse text into m (zeroed by the caller; m->name set). SBX_E_INVALID
 * "NAME:LINE: problem" for anything malformed. */
int sbxh_manifest_parse_text(struct sbx_manifest *m, const char *text, size_t len,
                             sbx_cancel *cancel, sbx_error *err);

/* Set m->digest from what m declares (manifest_digest.c): equivalent
 * manifests, whatever their shape or text, have one digest. */
int sbxh_manifest_digest_compute(struct sbx_manifest *m, sbx_error *err);

/* Check entry paths (relative, no "..", no duplicates or overlaps), users,
 * groups and run_as; resolve local sources under base_dir or one of the
 * grants (absolute directories, NULL-terminated, may be NULL). */
int sbxh_manifest_check(struct sbx_manifest *m, const char *base_dir,
                        const char *const *grants, sbx_error *err);

/* Open `rel` (no symlink in it, nothing above root) beneath m->roots[root]
 * with O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC and `flags`; fstat it into *st.
 * Returns the descriptor or -errno. */
struct stat;
int sbxh_manifest_open_source(const struct sbx_manifest *m, int root, const char *rel,
                              int flags, struct stat *st);

/* Open rel beneath the directory fd dir (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS, O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | flags).
 * Returns the descriptor or -1 with errno. */
int sbxh_manifest_openat(int dir, const char *rel, int flags);

/* Read up to size bytes of fd into a new NUL-terminated buffer (the
 * caller frees it); *got says how many came (fewer at a short file). NULL
 * when out of memory. */
char *sbxh_manifest_read_fd(int fd, size_t size, size_t *got);

/* Refuse a host git repository (e->root, e->rel) that would make git read
 * outside it: a .git that is a file (gitdir:) or a symlink; commondir,
 * objects/info/alternates, objects/info/http-alternates, info/grafts; a
 * symlink or special file anywhere in its git directory; a config that
 * includes other files or names alternates or promisor remotes.
 * SBX_E_INVALID naming the file. */
int sbxh_manifest_check_repo(const struct sbx_manifest *m, const struct manifest_entry *e,
                             sbx_error *err);

/* Copy the git directory of that repository (its regular files and
 * directories, opened beneath the confined directory with no symlink
 * resolution; at most max_bytes) into the empty directory dest, then check
 * the copy as above. SBX_E_INVALID naming the file, SBX_E_IO. */
int sbxh_manifest_copy_repo(const struct sbx_manifest *m, const struct manifest_entry *e,
                            int dest, long long max_bytes, sbx_error *err);

/* Free what m holds (not m). */
void sbxh_manifest_clear(struct sbx_manifest *m);

#endif
