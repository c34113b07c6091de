/*
 * provider_missing.h - the error for an enabled provider that is not
 * installed, naming where it is enabled and which package ships it.
 */
#ifndef SBX_HOST_PROVIDER_MISSING_H
#define SBX_HOST_PROVIDER_MISSING_H

#include "config/config.h"

/*
 * The package that ships provider `name` in this build's packages
 * (SBX_PROVIDER_PACKAGES, set by the build from its provider list, e.g.
 * "sbx-provider-docker"), or NULL for a provider this build does not ship.
 * The returned string is static.
 */
const char *sbxh_provider_package(const char *name);

/*
 * Rewrite err (the loader's SBX_E_NOT_FOUND "provider "N" (N.so): not
 * installed: ..." message) for provider `name`, enabled by section `sec`
 * (NULL when it was only selected, e.g. by SBX_PROVIDER): where it is
 * enabled, the package that ships it, and what to do, including that a
 * drop-in a removed package shipped stays until the package is purged.
 * Returns SBX_E_NOT_FOUND.
 */
int sbxh_provider_missing(const struct sbx_config_section *sec, const char *name,
                          sbx_error *err);

#endif
