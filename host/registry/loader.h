/*
 * loader.h - finding, opening and validating provider plugins.
 *
 * Internal to libsbx. A provider named N is the file N.so in one of the
 * search directories. Loading runs sbx_provider_describe() and nothing else
 * of the plugin; validation checks the descriptor against this host's ABI.
 * Plugins that passed validation are never dlclosed.
 */
#ifndef SBX_HOST_LOADER_H
#define SBX_HOST_LOADER_H

#include <sbx/provider.h>
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
 * descriptor. Empty components of the search path are skipped (never the
 * current directory); the first directory holding an entry of that name
 * wins, even when the entry is unusable. On failure *out is untouched and
 * err names the provider, the file and, for mismatches, the expected and
 * actual values:
 *  - SBX_E_INVALID: name is not a valid provider name (nothing is searched),
 *  - SBX_E_NOT_FOUND: unknown name (the message lists installed names), or
 *    a symbolic link to a missing file,
 *  - SBX_E_NOMEM: out of memory,
 *  - SBX_E_ABI: not a regular file, dlopen failure (with dlerror), missing
 *    entry symbol, NULL descriptor, major mismatch, newer minor, sizes below
 *    the 1.0 minimum, invalid or mismatched name, NULL/empty/unprintable
 *    version or description, unknown isolation, a non-zero reserved member
 *    or reserved op slot, a malformed config key array, NULL ops table,
 *    missing core op, unknown capability bit, capability without its ops or
 *    without a capability it needs (pty without processes),
 *    a provider that links libsbx, or a file that cannot be accessed.
 * A plugin refused after dlopen is dlclosed again (none of its ops ran).
 * The caller frees out with sbxh_plugin_clear (which does not dlclose).
 */
int sbxh_plugin_load(const char *search_path, const char *name,
                     struct sbx_plugin *out, sbx_error *err);

/* Validate a descriptor as loaded from `path` under `name` (exposed so that
 * tests can check descriptors without building files). Returns SBX_OK,
 * SBX_E_ABI with a message as above, or SBX_E_INVALID when name itself is
 * not a valid provider name. Reads nothing past the plugin's desc_size and
 * ops_size. */
int sbxh_plugin_validate(const struct sbx_provider_desc *desc, const char *name,
                         const char *path, sbx_error *err);

/* List the provider names installed in a search path: regular files (or
 * links to them) named <valid name>.so, sorted, without duplicates; missing
 * directories are skipped. Returns a NULL-terminated array the caller frees with
 * sbxh_plugin_names_free, or NULL when out of memory. */
char **sbxh_plugin_names(const char *search_path);
void sbxh_plugin_names_free(char **names);

/* Entry i of a validated config key array, stepping by the entries' own
 * size; NULL at the terminator (or when keys is NULL). */
const struct sbx_config_key *sbxh_config_key_at(const struct sbx_config_key *keys,
                                                size_t i);

/* Free the strings of a plugin record (the library stays mapped). */
void sbxh_plugin_clear(struct sbx_plugin *p);

/* Whether a provider name is well formed: [a-z0-9_-]{1,64}. */
bool sbxh_plugin_name_valid(const char *name);

#endif
