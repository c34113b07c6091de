/*
 * sbx/manifest.h - workspace manifests: what a fresh workspace holds before
 * its first command (docs/MANIFEST.md).
 *
 * A manifest (YAML or JSON, `version: 1`) lists entries - `file` (inline
 * text or base64), `dir`, `local_file` and `local_dir` (copied from the
 * host), `git_repo` (cloned on the host, its work tree copied in) - each at
 * a workspace-relative path with optional permission bits and group, plus
 * an environment for every command, users and groups, and `run_as`.
 *
 * Loading validates everything before anything runs: paths relative, no
 * "..", no absolute paths, no duplicates, no entry inside another entry
 * that is not a `dir`; local sources resolved under the base directory
 * (the caller's working directory by default) or under a directory the
 * trusted configuration grants (`manifest.grants` in sbx.yaml), never
 * under one the manifest names. Every error names the manifest, the line
 * and the entry.
 *
 * Applying uses only provider operations (write, exec), so it works on
 * every provider. Conventions are those of sbx/sbx.h.
 */
#ifndef SBX_MANIFEST_H
#define SBX_MANIFEST_H

#include <sbx/sbx.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbx_manifest sbx_manifest;

/*
 * Read and validate the manifest in file `path`. base_dir (NULL: the
 * current directory) is where relative local sources are resolved; the
 * grants come from ctx's configuration (ctx may be NULL: no grants). On
 * success *out is a manifest the caller frees with sbx_manifest_free.
 * Errors: SBX_E_INVALID "FILE:LINE: entry PATH: problem"; SBX_E_NOT_FOUND /
 * SBX_E_IO for the file; SBX_E_NOMEM.
 */
SBX_API int sbx_manifest_load(sbx_ctx *ctx, const char *path, const char *base_dir,
                              sbx_manifest **out, sbx_error *err);

/* The same, stopping with SBX_E_CANCELLED soon after cancel fires (may be
 * NULL). Parsing is bounded anyway (16 MiB of text, 32 levels of nesting,
 * 100000 YAML nodes), so it is never long; this lets a signal stop it. */
SBX_API int sbx_manifest_load_cancel(sbx_ctx *ctx, const char *path, const char *base_dir,
                                     sbx_cancel *cancel, sbx_manifest **out,
                                     sbx_error *err);

/* The same from text in memory; name is used in messages. */
SBX_API int sbx_manifest_parse(sbx_ctx *ctx, const char *text, size_t len,
                               const char *name, const char *base_dir,
                               sbx_manifest **out, sbx_error *err);

/* Lowercase hex SHA-256 of the manifest's text: part of a session's spec
 * hash. Owned by the manifest. */
SBX_API const char *sbx_manifest_digest(const sbx_manifest *m);

/* Whether the manifest declares users, groups or run_as (which need a
 * provider with SBX_CAP_USERS). */
SBX_API bool sbx_manifest_has_users(const sbx_manifest *m);

/* The user every command and file operation of the session runs as, or
 * NULL when the manifest has no run_as. Owned by the manifest. */
SBX_API const char *sbx_manifest_run_as(const sbx_manifest *m);

/*
 * Materialize the manifest in the sandbox of h: its groups, then its users
 * (sbx_group_add, sbx_user_add), then directories and files (inline,
 * local, cloned) in path order with their modes and groups (`chgrp`), then
 * the workspace root directory is given to run_as (when it is not root).
 * All of it runs as the sandbox's default user; the entries stay owned by
 * it. The handle itself is not switched to run_as: the caller does that
 * (sbx_handle_set_user; the session manager does it for every handle of
 * the session). Each file is written atomically by the provider; a failure
 * stops at the entry, naming it (what was written before stays: a fresh
 * sandbox that failed its manifest is not used). SBX_E_UNSUPPORTED,
 * before anything is written, when the manifest has users, groups or
 * run_as and the provider lacks SBX_CAP_USERS.
 */
SBX_API int sbx_manifest_apply(sbx_handle *h, const sbx_manifest *m,
                               sbx_cancel *cancel, sbx_error *err);

/* The manifest's environment ("NAME=value", NULL-terminated; never NULL).
 * Owned by the manifest. */
SBX_API const char *const *sbx_manifest_environment(const sbx_manifest *m);

/* Free a manifest; NULL is ignored. */
SBX_API void sbx_manifest_free(sbx_manifest *m);

#ifdef __cplusplus
}
#endif

#endif
