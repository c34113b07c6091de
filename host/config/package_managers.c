/*
 * package_managers.c - the names and command lines of each package manager:
 * built-in defaults (Debian-based images), replaced per manager and per
 * vector by `package_managers.<manager>` in the configuration.
 */
#include "config/package_managers.h"

#include <sbx/session.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The managers' names (sbx/session.h), here with their command lines: the
 * configuration check below reads them, and config calls nothing above it. */
static const char *const manager_names[] = {
    [SBX_PKG_APT] = "apt", [SBX_PKG_CARGO] = "cargo", [SBX_PKG_GEM] = "gem",
    [SBX_PKG_GO] = "go",   [SBX_PKG_NPM] = "npm",     [SBX_PKG_PIP] = "pip",
};
#define NMANAGERS (sizeof manager_names / sizeof manager_names[0])

SBX_API const char *sbx_package_manager_name(int manager)
{
    if (manager <= 0 || (size_t)manager >= NMANAGERS)
        return NULL;
    return manager_names[manager];
}

/* Built-in configuration defaults, one row per manager. */
struct manager_defaults {
    const char *const *check, *const *refresh, *const *install, *const *env;
};

static const char *const none[] = {NULL};
static const char *const apt_check[] = {"apt-get", "--version", NULL};
static const char *const apt_refresh[] = {"apt-get", "update", NULL};
static const char *const apt_install[] = {"apt-get", "install", "-y",
                                          "--no-install-recommends", NULL};
static const char *const apt_env[] = {"DEBIAN_FRONTEND=noninteractive", NULL};
static const char *const cargo_check[] = {"cargo", "--version", NULL};
static const char *const cargo_install[] = {"cargo", "install", NULL};
static const char *const gem_check[] = {"gem", "--version", NULL};
static const char *const gem_install[] = {"gem", "install", "--no-document", NULL};
static const char *const go_check[] = {"go", "version", NULL};
static const char *const go_install[] = {"go", "install", NULL};
static const char *const npm_check[] = {"npm", "--version", NULL};
static const char *const npm_install[] = {"npm", "install", "--global", NULL};
static const char *const pip_check[] = {"pip", "--version", NULL};
static const char *const pip_install[] = {"pip", "install", "--no-input", NULL};

static const struct manager_defaults defaults[] = {
    [SBX_PKG_APT] = {apt_check, apt_refresh, apt_install, apt_env},
    [SBX_PKG_CARGO] = {cargo_check, none, cargo_install, none},
    [SBX_PKG_GEM] = {gem_check, none, gem_install, none},
    [SBX_PKG_GO] = {go_check, none, go_install, none},
    [SBX_PKG_NPM] = {npm_check, none, npm_install, none},
    [SBX_PKG_PIP] = {pip_check, none, pip_install, none},
};
#define NDEFAULTS (sizeof defaults / sizeof defaults[0])

static const char *const vector_names[] = {"check", "refresh", "install", "env"};
#define NVECTORS (sizeof vector_names / sizeof vector_names[0])

static int manager_by_name(const char *name)
{
    for (size_t m = 1; m < NDEFAULTS; m++)
        if (strcmp(sbx_package_manager_name((int)m), name) == 0)
            return (int)m;
    return 0;
}

/* Index of a vector name, or -1. */
static int vector_index(const char *key, size_t len)
{
    for (size_t v = 0; v < NVECTORS; v++)
        if (strlen(vector_names[v]) == len && !memcmp(vector_names[v], key, len))
            return (int)v;
    return -1;
}

static int check_entry(const struct sbx_config_section *sec,
                       const struct sbx_config_entry *e, sbx_error *err)
{
    const char *dot = strchr(e->key, '.');
    size_t len = dot ? (size_t)(dot - e->key) : strlen(e->key);
    int v = vector_index(e->key, len);
    if (v < 0)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%d: package_managers.%s.%.*s: unknown key "
                             "(expected check, refresh, install or env)",
                             e->file, e->line, sec->name, (int)(len > 80 ? 80 : len),
                             e->key);
    if (!dot) {
        if (e->node != SBX_NODE_SEQ)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: package_managers.%s.%s: expected a list "
                                 "of strings",
                                 e->file, e->line, sec->name, e->key);
        return SBX_OK;
    }
    /* An element: "install.3". Lists hold scalars only (the loader saw to
     * that); a map element would have a non-numeric suffix. */
    const char *idx = dot + 1;
    if (!*idx || strspn(idx, "0123456789") != strlen(idx))
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%d: package_managers.%s.%s: expected a list "
                             "of strings",
                             e->file, e->line, sec->name, vector_names[v]);
    if (!e->value || !e->value[0])
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%d: package_managers.%s.%s: an empty argument",
                             e->file, e->line, sec->name, e->key);
    if (v == 3 && (e->value[0] == '=' || !strchr(e->value, '=')))
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%d: package_managers.%s.%s: expected NAME=VALUE",
                             e->file, e->line, sec->name, e->key);
    return SBX_OK;
}

int sbxh_package_managers_check(const struct sbx_config *cfg, sbx_error *err)
{
    for (size_t i = 0; cfg && i < cfg->nmanagers; i++) {
        const struct sbx_config_section *sec = &cfg->managers[i];
        if (!manager_by_name(sec->name))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: package_managers.%s: unknown package "
                                 "manager (expected apt, cargo, gem, go, npm or "
                                 "pip)",
                                 sec->file, sec->line, sec->name);
        bool nonempty[NVECTORS] = {false};
        const struct sbx_config_entry *head[NVECTORS] = {NULL};
        for (size_t j = 0; j < sec->count; j++) {
            const struct sbx_config_entry *e = &sec->entries[j];
            int rc = check_entry(sec, e, err);
            if (rc != SBX_OK)
                return rc;
            const char *dot = strchr(e->key, '.');
            int v = vector_index(e->key, dot ? (size_t)(dot - e->key) : strlen(e->key));
            if (dot)
                nonempty[v] = true;
            else
                head[v] = e;
        }
        /* check and install cannot be emptied: an empty check would pass
         * on any sandbox, an empty install would run the package names. */
        for (size_t v = 0; v < NVECTORS; v += 2)
            if (head[v] && !nonempty[v])
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%d: package_managers.%s.%s: cannot be "
                                     "empty",
                                     head[v]->file, head[v]->line, sec->name,
                                     vector_names[v]);
    }
    return SBX_OK;
}

static const char **copy_default(const char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    const char **out = calloc(n + 1, sizeof *out);
    if (out)
        memcpy(out, v, n * sizeof *out);
    return out;
}

/* The configured list `key` of sec into *out, or *out NULL when sec does not
 * set it (the default applies). SBX_E_NOMEM only. */
static int configured(const struct sbx_config_section *sec, const char *key,
                      const char ***out)
{
    *out = NULL;
    if (sbxh_config_section_node(sec, key) != SBX_NODE_SEQ)
        return SBX_OK;
    size_t n = 0;
    while (sbxh_config_section_entry(sec, key, n, NULL, NULL))
        n++;
    const char **v = calloc(n + 1, sizeof *v);
    if (!v)
        return SBX_E_NOMEM;
    for (size_t i = 0; i < n; i++)
        sbxh_config_section_entry(sec, key, i, NULL, &v[i]);
    *out = v;
    return SBX_OK;
}

int sbxh_package_cmds_get(const struct sbx_config *cfg, int manager,
                          struct sbx_package_cmds *out, sbx_error *err)
{
    memset(out, 0, sizeof *out);
    if (manager <= 0 || (size_t)manager >= NDEFAULTS)
        return sbx_error_set(err, SBX_E_INVALID, "package manager %d is unknown",
                             manager);
    const struct sbx_config_section *sec =
        sbxh_config_manager(cfg, sbx_package_manager_name(manager));
    const struct manager_defaults *d = &defaults[manager];
    const char *const *def[NVECTORS] = {d->check, d->refresh, d->install, d->env};
    const char ***slot[NVECTORS] = {&out->check, &out->refresh, &out->install,
                                    &out->env};
    for (size_t v = 0; v < NVECTORS; v++) {
        if (configured(sec, vector_names[v], slot[v]) != SBX_OK ||
            (!*slot[v] && !(*slot[v] = copy_default(def[v])))) {
            sbxh_package_cmds_free(out);
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        }
    }
    return SBX_OK;
}

void sbxh_package_cmds_free(struct sbx_package_cmds *c)
{
    free(c->check);
    free(c->refresh);
    free(c->install);
    free(c->env);
    memset(c, 0, sizeof *c);
}
