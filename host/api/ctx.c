/*
 * ctx.c - opening and closing a host context.
 *
 * Opening decides which providers are enabled and which one is the default,
 * then loads and validates each enabled provider's descriptor and checks its
 * configuration section against the keys it declares. No provider code other
 * than sbx_provider_describe runs here: init is deferred to first use.
 */
#include "api/ctx.h"
#include "api/handle.h"
#include "base/install_dirs.h"
#include "config/package_managers.h"
#include "registry/provider_missing.h"
#include "registry/host_table.h"
#include "registry/provider.h"
#include "base/struct_size.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The provider used when nothing is configured at all. */
#define SBX_FALLBACK_PROVIDER "local"

static const char *option_or_env(const struct sbx_options *o, const char *value,
                                 const char *env)
{
    if (value && *value)
        return value;
    if (o && o->ignore_environment)
        return NULL;
    const char *e = getenv(env);
    return e && *e ? e : NULL;
}

static int parse_log_level(const char *s)
{
    if (!s)
        return SBX_LOG_WARN;
    if (!strcasecmp(s, "error"))
        return SBX_LOG_ERROR;
    if (!strcasecmp(s, "info"))
        return SBX_LOG_INFO;
    if (!strcasecmp(s, "debug"))
        return SBX_LOG_DEBUG;
    return SBX_LOG_WARN;
}

static bool name_listed(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return true;
    return false;
}

/* Enabled = every configured section, plus the selected provider, plus the
 * fallback when the configuration enables nothing. */
static int collect_enabled(const struct sbx_config *cfg, const char *selected,
                           char ***out, size_t *count, sbx_error *err)
{
    char **names = calloc(cfg->nsections + 2, sizeof *names);
    size_t n = 0;
    if (!names)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; i < cfg->nsections; i++)
        names[n++] = cfg->sections[i].name;
    if (selected && !name_listed(names, n, selected))
        names[n++] = (char *)selected;
    if (n == 0)
        names[n++] = (char *)SBX_FALLBACK_PROVIDER;
    *out = names;
    *count = n;
    return SBX_OK;
}

static int pick_default(sbx_ctx *ctx, const char *selected, char **names,
                        size_t n, sbx_error *err)
{
    const struct sbx_config *cfg = ctx->config;
    const char *d = selected;
    if (!d && cfg->default_provider) {
        d = cfg->default_provider;
        if (!name_listed(names, n, d))
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%d: default_provider: \"%s\" is not enabled "
                                 "(add a providers.%s section)",
                                 cfg->default_provider_file,
                                 cfg->default_provider_line, d, d);
    }
    if (!d && n == 1)
        d = names[0];
    if (!d && name_listed(names, n, SBX_FALLBACK_PROVIDER))
        d = SBX_FALLBACK_PROVIDER;
    if (!d)
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%zu providers are enabled but default_provider "
                             "is not set (set it, or SBX_PROVIDER)", n);
    ctx->default_provider = strdup(d);
    return ctx->default_provider ? SBX_OK
                                 : sbx_error_set(err, SBX_E_NOMEM, "out of memory");
}

static int enable_provider(sbx_ctx *ctx, const char *name, sbx_error *err)
{
    struct sbx_provider *p = calloc(1, sizeof *p);
    if (!p)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    int rc = sbxh_plugin_load(ctx->search_path, name, &p->plugin, err);
    if (rc != SBX_OK) {
        free(p);
        /* Say where it is enabled and which package ships it. */
        return rc == SBX_E_NOT_FOUND
                   ? sbxh_provider_missing(sbxh_config_section(ctx->config, name), name, err)
                   : rc;
    }
    p->ctx = ctx;
    /* The section is owned by the config; checking canonicalizes values. */
    p->section = (struct sbx_config_section *)sbxh_config_section(ctx->config, name);
    if (p->section) {
        rc = sbxh_config_check_section(p->section, p->plugin.desc->config_keys, err);
        if (rc != SBX_OK) {
            sbxh_plugin_clear(&p->plugin);
            free(p);
            return rc;
        }
    }
    pthread_mutex_init(&p->init_lock, NULL);
    pthread_cond_init(&p->init_done, NULL);
    sbxh_host_table_init(p);
    sbxh_provider_info_init(p);
    ctx->providers[ctx->nproviders++] = p;
    return SBX_OK;
}

/* Remember why an enabled provider could not be loaded. */
static int keep_broken(sbx_ctx *ctx, const char *name, int status, const char *why,
                       sbx_error *err)
{
    struct sbx_broken_provider *b = &ctx->broken[ctx->nbroken];
    b->name = strdup(name);
    b->message = strdup(why);
    b->status = status;
    if (!b->name || !b->message) {
        free(b->name);
        free(b->message);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    ctx->nbroken++;
    return SBX_OK;
}

int sbxh_config_open(const char *path, const char *sysconfdir,
                     struct sbx_config **out, sbx_error *err)
{
    int rc = sbxh_config_load_dir(path, sysconfdir, out, err);
    if (rc == SBX_OK)
        rc = sbxh_package_managers_check(*out, err);
    if (rc == SBX_OK)
        rc = sbxh_manifest_config_check(*out, err);
    if (rc != SBX_OK && *out) {
        sbxh_config_free(*out);
        *out = NULL;
    }
    return rc;
}

SBX_API int sbx_open(const struct sbx_options *opts_in, sbx_ctx **out, sbx_error *err)
{
    sbx_error_clear(err);
    /* Honour a caller's older, shorter struct: read only up to its size. */
    struct sbx_options copy;
    if (opts_in && !sbx_struct_in(&copy, sizeof copy, opts_in, sizeof copy.size))
        return sbx_error_set(err, SBX_E_INVALID, "struct sbx_options: size is not set");
    const struct sbx_options *opts = opts_in ? &copy : NULL;
    sbx_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    pthread_mutex_init(&ctx->handles_lock, NULL);
    const char *config_path = option_or_env(opts, opts ? opts->config_path : NULL,
                                            "SBX_CONFIG");
    const char *selected = option_or_env(opts, opts ? opts->provider : NULL,
                                         "SBX_PROVIDER");
    const char *plugin_path = option_or_env(opts, opts ? opts->plugin_path : NULL,
                                            "SBX_PLUGIN_PATH");
    ctx->log_level = parse_log_level(option_or_env(opts, NULL, "SBX_LOG_LEVEL"));
    if (opts) {
        ctx->log = opts->log;
        ctx->log_ctx = opts->log_ctx;
    }

    char **names = NULL;
    size_t n = 0;
    int rc = sbxh_config_open(config_path, NULL, &ctx->config, err);
    if (rc != SBX_OK)
        goto fail;
    if (selected && !sbxh_plugin_name_valid(selected)) {
        rc = sbx_error_set(err, SBX_E_CONFIG,
                           "provider name \"%s\" is invalid (expected "
                           "[a-z0-9_-], at most 64 characters)", selected);
        goto fail;
    }
    if (!plugin_path)
        plugin_path = ctx->config->plugin_dir ? ctx->config->plugin_dir
                                              : sbxh_install_provider_dir();
    ctx->search_path = strdup(plugin_path);
    if (!ctx->search_path) {
        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        goto fail;
    }
    rc = collect_enabled(ctx->config, selected, &names, &n, err);
    if (rc != SBX_OK)
        goto fail;
    rc = pick_default(ctx, selected, names, n, err);
    if (rc != SBX_OK)
        goto fail;
    ctx->providers = calloc(n, sizeof *ctx->providers);
    ctx->broken = calloc(n, sizeof *ctx->broken);
    if (!ctx->providers || !ctx->broken) {
        rc = sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < n; i++) {
        rc = enable_provider(ctx, names[i], err);
        if (rc != SBX_OK && rc != SBX_E_NOMEM && opts && opts->keep_broken_providers)
            rc = keep_broken(ctx, names[i], rc, err->message, err);
        if (rc != SBX_OK)
            goto fail;
    }
    sbx_error_clear(err);
    free(names);
    *out = ctx;
    return SBX_OK;
fail:
    free(names);
    sbx_close(ctx);
    return rc;
}

SBX_API void sbx_close(sbx_ctx *ctx)
{
    if (!ctx)
        return;
    /* Handles still held: their provider side goes before fini. */
    sbxh_handles_close_all(ctx);
    for (size_t i = 0; i < ctx->nproviders; i++) {
        struct sbx_provider *p = ctx->providers[i];
        if (p->initialized)
            p->plugin.desc->ops->fini(p->state);
        pthread_mutex_destroy(&p->init_lock);
        pthread_cond_destroy(&p->init_done);
        sbxh_plugin_clear(&p->plugin);
        free(p);
    }
    free(ctx->providers);
    for (size_t i = 0; i < ctx->nbroken; i++) {
        free(ctx->broken[i].name);
        free(ctx->broken[i].message);
    }
    free(ctx->broken);
    sbxh_config_free(ctx->config);
    free(ctx->search_path);
    free(ctx->default_provider);
    pthread_mutex_destroy(&ctx->handles_lock);
    free(ctx);
}

SBX_API const char *sbx_default_provider(const sbx_ctx *ctx)
{
    return ctx->default_provider;
}

SBX_API size_t sbx_provider_count(const sbx_ctx *ctx)
{
    return ctx->nproviders;
}

SBX_API const char *sbx_provider_name_at(const sbx_ctx *ctx, size_t i)
{
    return i < ctx->nproviders ? ctx->providers[i]->plugin.name : NULL;
}

SBX_API const char *sbx_broken_provider_at(const sbx_ctx *ctx, size_t i, int *status,
                                           const char **message)
{
    if (i >= ctx->nbroken)
        return NULL;
    if (status)
        *status = ctx->broken[i].status;
    if (message)
        *message = ctx->broken[i].message;
    return ctx->broken[i].name;
}

SBX_API const char *sbx_config_store_driver(const sbx_ctx *ctx)
{
    return ctx->config->store_driver;
}

SBX_API const char *sbx_config_store_path(const sbx_ctx *ctx)
{
    return ctx->config->store_path;
}

SBX_API const char *sbx_config_store_dsn(const sbx_ctx *ctx)
{
    return ctx->config->store_dsn;
}

SBX_API const char *sbx_plugin_path(const sbx_ctx *ctx)
{
    return ctx->search_path;
}
