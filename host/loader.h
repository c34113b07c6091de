/*
 * loader.h - finding, opening and validating provider plugins.
 *
 * Internal to libsbx. A provider named N is the file N.so in one of the
 * search directories. Loading runs sbx_provider_describe() and nothing else
 * of the plugin; validation checks the descriptor against this host's ABI.
 * Plugins are never dlclosed.
 */
#ifndef SBX_HOST_LOADER_H
#define SBX_HOST_LOADER_H

#include <sbx/sbx.h>

/* A loaded, validated plugin. */
struct sbx_plugin {
    char *name;
    char *path; /* the resolved file */
    const struct sbx_provider_desc *desc;
    void *dl; /* dlopen handle, never closed */
};

/*
 * Resolve <dir>/<name>.so in the colon-separated search path, dlopen it
 * (RTLD_NOW | RTLD_LOCAL), call the entry point and validate the
 * descriptor. On failure *out is untouched and err names the provider, the
 * file and, for mismatches, the expected and actual values:
 *  - SBX_E_NOT_FOUND: unknown name (the message lists installed names),
 *  - SBX_E_ABI: not a regular file, dlopen failure (with dlerror), missing
 *    entry symbol, NULL descriptor, major mismatch, newer minor, sizes below
 *    the 1.0 minimum, name mismatch, unknown capability bit, capability
 *    without its ops, missing core op.
 * The caller frees out with sbx_plugin_clear (which does not dlclose).
 */
int sbx_plugin_load(const char *search_path, const char *name,
                    struct sbx_plugin *out, sbx_error *err);

/* Validate a descriptor as loaded from `path` under `name` (exposed so that
 * tests can check descriptors without building files). */
int sbx_plugin_validate(const struct sbx_provider_desc *desc, const char *name,
                        const char *path, sbx_error *err);

/* List the provider names installed in a search path (files *.so, sorted,
 * without duplicates). Returns a NULL-terminated array the caller frees with
 * sbx_plugin_names_free, or NULL when out of memory. */
char **sbx_plugin_names(const char *search_path);
void sbx_plugin_names_free(char **names);

/* Free the strings of a plugin record (the library stays mapped). */
void sbx_plugin_clear(struct sbx_plugin *p);

/* Whether a provider name is well formed: [a-z0-9_-]{1,64}. */
bool sbx_plugin_name_valid(const char *name);

#endif
