/*
 * package_managers.h - the command lines that install a spec's packages.
 *
 * Internal to libsbx. Each manager (apt, cargo, gem, go, npm, pip) has four
 * argument vectors: a check that succeeds when the manager is installed, an
 * optional refresh run once before installing, the install prefix the
 * package names are appended to, and extra environment. The built-in values
 * suit Debian-based images; `package_managers.<manager>` in the
 * configuration replaces any of the four (e.g. `install: [apk, add]` for an
 * Alpine image, or a `sudo` prefix for a sandbox whose user is not root).
 */
#ifndef SBX_HOST_PACKAGE_MANAGERS_H
#define SBX_HOST_PACKAGE_MANAGERS_H

#include "config/config.h"

/* The command lines of one manager. Every vector is NULL-terminated; refresh
 * and env may be empty (first element NULL), check and install never are.
 * The strings are borrowed from the configuration or static defaults. */
struct sbx_package_cmds {
    const char **check;
    const char **refresh;
    const char **install;
    const char **env;
};

/*
 * Check every `package_managers.<name>` section of cfg: the name is one of
 * the managers, the keys are check, refresh, install and env, each a list
 * of non-empty strings, check and install not empty, env entries NAME=VALUE.
 * Errors: SBX_E_CONFIG "file:line: package_managers.<name>.<key>: problem".
 */
int sbxh_package_managers_check(const struct sbx_config *cfg, sbx_error *err);

/*
 * Fill *out with the command lines of `manager` (SBX_PKG_*): the configured
 * vectors where the configuration sets them, the defaults elsewhere. cfg
 * must have passed sbxh_package_managers_check. On success the caller frees
 * the vectors (not the strings) with sbxh_package_cmds_free.
 * Errors: SBX_E_INVALID for an unknown manager; SBX_E_NOMEM.
 */
int sbxh_package_cmds_get(const struct sbx_config *cfg, int manager,
                          struct sbx_package_cmds *out, sbx_error *err);

/* Free the vectors of *c (NULL members are ignored). */
void sbxh_package_cmds_free(struct sbx_package_cmds *c);

#endif
