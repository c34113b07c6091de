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
    char *resolved;   /* local_*: the absolute, checked host path */
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
    char digest[65];
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
};

/* Parse text into m (zeroed by the caller; m->name set). SBX_E_INVALID
 * "NAME:LINE: problem" for anything malformed. */
int sbx_manifest_parse_text(struct sbx_manifest *m, const char *text, size_t len,
                            sbx_error *err);

/* Check entry paths (relative, no "..", no duplicates or overlaps), users,
 * groups and run_as; resolve local sources under base_dir or one of the
 * grants (absolute directories, NULL-terminated, may be NULL). */
int sbx_manifest_check(struct sbx_manifest *m, const char *base_dir,
                       const char *const *grants, sbx_error *err);

/* Check the `manifest` section of the configuration (grants: a list of
 * absolute directories). SBX_E_CONFIG "file:line: manifest.key: ...". */
struct sbx_config;
int sbx_manifest_config_check(const struct sbx_config *cfg, sbx_error *err);

/* Free what m holds (not m). */
void sbx_manifest_clear(struct sbx_manifest *m);

#endif
