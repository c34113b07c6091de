/*
 * pools.c - the `pools:` section: warm pools, each a provider, a size and
 * the spec its sandboxes are created with.
 *
 *   pools:
 *     py:
 *       provider: docker
 *       size: 4
 *       caps: [processes, file_ops]
 *       network: limited            # or none (default: the provider's)
 *       allow: [pypi.org]
 *       setup_allow: []
 *       ports: [8080]
 *
 * caps .. ports are the pool's spec: the part of a session spec that a create is given (the
 * session manager hashes it the way it hashes session specs, so a session
 * matches a pool exactly when its spec without manifest and packages has
 * the pool's hash). Image and limits are the provider section's, as for
 * every sandbox of that provider. Whether the provider declares
 * SBX_CAP_POOL is checked when a session manager opens (the registry is
 * not known here).
 */
#include "config/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POOL_KEYS "provider, size, caps, network, allow, setup_allow, ports"

static int bad(sbx_error *err, const struct sbx_config_entry *e, const char *pool,
               const char *problem)
{
    return sbx_error_set(err, SBX_E_CONFIG, "%s:%d: pools.%s.%.80s: %s", e->file, e->line,
                         pool, e->key, problem);
}

/* Append a copy of v to a string list. */
static int push(char ***v, size_t *n, const char *s)
{
    char **nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv)
        return SBX_E_NOMEM;
    *v = nv;
    if (!(nv[*n] = strdup(s)))
        return SBX_E_NOMEM;
    (*n)++;
    return SBX_OK;
}

/* A list element "<list>.<i>" of the spec. */
static bool element_of(const char *key, const char *list)
{
    size_t n = strlen(list);
    return strncmp(key, list, n) == 0 && key[n] == '.' &&
           strspn(key + n + 1, "0123456789") == strlen(key + n + 1) && key[n + 1];
}

static int read_port(struct sbx_config_pool *pl, const struct sbx_config_entry *e,
                     sbx_error *err)
{
    const char *v = e->value ? e->value : "";
    unsigned long port =
        *v && strspn(v, "0123456789") == strlen(v) && strlen(v) < 6 ? strtoul(v, NULL, 10) : 0;
    if (port < 1 || port > 65535)
        return bad(err, e, pl->name, "not a TCP port (1 to 65535)");
    for (size_t k = 0; k < pl->nports; k++)
        if (pl->ports[k] == port)
            return bad(err, e, pl->name, "port listed twice");
    if (pl->nports >= SBX_CONFIG_PORTS_MAX)
        return bad(err, e, pl->name, "too many ports");
    if (!pl->ports && !(pl->ports = calloc(SBX_CONFIG_PORTS_MAX, sizeof *pl->ports)))
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    pl->ports[pl->nports++] = (uint16_t)port;
    return SBX_OK;
}

static int read_entry(struct sbx_config_pool *pl, const struct sbx_config_entry *e,
                      sbx_error *err)
{
    const char *k = e->key;
    if (!strcmp(k, "provider")) {
        if (e->node != SBX_NODE_SCALAR || !e->value || !*e->value)
            return bad(err, e, pl->name, "expected a provider name");
        free(pl->provider);
        return (pl->provider = strdup(e->value)) ? SBX_OK
                                                 : sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    if (!strcmp(k, "size")) {
        const char *v = e->value ? e->value : "";
        if (e->node != SBX_NODE_SCALAR || !*v || strspn(v, "0123456789") != strlen(v) ||
            strlen(v) > 5 || strtoul(v, NULL, 10) > SBX_CONFIG_POOL_SIZE_MAX)
            return bad(err, e, pl->name, "expected a number of sandboxes (0 to 1024)");
        pl->size = strtoul(v, NULL, 10);
        return SBX_OK;
    }
    const char *sk = k;
    int rc = SBX_OK;
    if (!strcmp(sk, "caps") || !strcmp(sk, "allow") || !strcmp(sk, "setup_allow") ||
        !strcmp(sk, "ports")) {
        if (e->node != SBX_NODE_SEQ)
            return bad(err, e, pl->name, "expected a list");
        return SBX_OK;
    }
    if (!strcmp(sk, "network")) {
        if (e->node != SBX_NODE_SCALAR || !e->value ||
            (strcmp(e->value, "limited") && strcmp(e->value, "none")))
            return bad(err, e, pl->name,
                       "expected limited (deny by default, allow what is listed) or none");
        pl->limited_network = !strcmp(e->value, "limited");
        return SBX_OK;
    }
    if (e->node != SBX_NODE_SCALAR || !e->value || !*e->value)
        return bad(err, e, pl->name, "unknown key (expected one of " POOL_KEYS ")");
    if (element_of(sk, "caps"))
        rc = push(&pl->caps, &pl->ncaps, e->value);
    else if (element_of(sk, "allow"))
        rc = pl->nallow >= SBX_CONFIG_POOL_TARGETS_MAX
                 ? bad(err, e, pl->name, "too many targets")
                 : push(&pl->allow, &pl->nallow, e->value);
    else if (element_of(sk, "setup_allow"))
        rc = pl->nsetup_allow >= SBX_CONFIG_POOL_TARGETS_MAX
                 ? bad(err, e, pl->name, "too many targets")
                 : push(&pl->setup_allow, &pl->nsetup_allow, e->value);
    else if (element_of(sk, "ports"))
        return read_port(pl, e, err);
    else
        return bad(err, e, pl->name, "unknown key (expected one of " POOL_KEYS ")");
    return rc == SBX_E_NOMEM ? sbx_error_set(err, SBX_E_NOMEM, "out of memory") : rc;
}

static void pool_free(struct sbx_config_pool *pl)
{
    free(pl->name);
    free(pl->provider);
    for (size_t i = 0; i < pl->ncaps; i++)
        free(pl->caps[i]);
    free(pl->caps);
    for (size_t i = 0; i < pl->nallow; i++)
        free(pl->allow[i]);
    free(pl->allow);
    for (size_t i = 0; i < pl->nsetup_allow; i++)
        free(pl->setup_allow[i]);
    free(pl->setup_allow);
    free(pl->ports);
}

int sbxh_config_pools_read(struct sbx_config *cfg, sbx_error *err)
{
    if (!cfg->npool_sections)
        return SBX_OK;
    cfg->pools = calloc(cfg->npool_sections, sizeof *cfg->pools);
    if (!cfg->pools)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < cfg->npool_sections; i++) {
        const struct sbx_config_section *sec = &cfg->pool_sections[i];
        struct sbx_config_pool *pl = &cfg->pools[cfg->npools++];
        pl->file = sec->file;
        pl->line = sec->line;
        if (!(pl->name = strdup(sec->name)))
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        for (size_t j = 0; j < sec->count; j++) {
            int rc = read_entry(pl, &sec->entries[j], err);
            if (rc != SBX_OK)
                return rc;
        }
        if (!pl->provider)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: pools.%s: no provider (a provider declaring "
                                 "the pool capability, e.g. docker)",
                                 sec->file, sec->line, pl->name);
        if ((pl->nallow || pl->nsetup_allow) && !pl->limited_network)
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: pools.%s: allow and setup_allow need "
                                 "network: limited",
                                 sec->file, sec->line, pl->name);
    }
    return SBX_OK;
}

void sbxh_config_pools_free(struct sbx_config *cfg)
{
    for (size_t i = 0; i < cfg->npools; i++)
        pool_free(&cfg->pools[i]);
    free(cfg->pools);
    cfg->pools = NULL;
    cfg->npools = 0;
}
