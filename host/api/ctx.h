/*
 * ctx.h - what opening a context does before it loads providers, for the
 * tests that check the configuration alone.
 *
 * Internal to libsbx. config/config.c reads sbx.yaml and checks the keys
 * it owns (top-level settings, store, provider section syntax); the
 * sections of the features built above it, `package_managers` and
 * `manifest`, are checked here, where the context is opened, so that the
 * loader calls nothing above it.
 */
#ifndef SBX_HOST_API_CTX_H
#define SBX_HOST_API_CTX_H

#include "config/config.h"

/*
 * sbxh_config_load_dir(path, sysconfdir, ...), then the package_managers and
 * manifest checks (config/package_managers.h, below).
 * On success *out is a new configuration the caller frees with
 * sbxh_config_free; on failure *out is NULL and err says what was wrong, as
 * sbxh_config_load_dir and those checks word it.
 */
int sbxh_config_open(const char *path, const char *sysconfdir,
                     struct sbx_config **out, sbx_error *err);

/* Check the `manifest` section of the configuration (grants: a list of
 * absolute directories; max_bytes, git_timeout), in api/manifest_load.c
 * with the rest of what the configuration means to a manifest.
 * SBX_E_CONFIG "file:line: manifest.key: ...". */
int sbxh_manifest_config_check(const struct sbx_config *cfg, sbx_error *err);

#endif
