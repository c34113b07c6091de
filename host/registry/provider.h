/*
 * provider.h - the registry's records (internal; provider.c works on
 * them): one per enabled provider - the validated plugin, its config
 * section, the host table handed to init, the provider state once init has
 * run - and the context that holds them, opened and closed by api/ctx.c.
 * Nothing here knows about sessions or stores.
 *
 * The files of host/registry include each other in one direction only
 * (lowest first; each names what it includes):
 *   capabilities, plugin_elf, call, key_lock, provider_missing
 *   loader          (capabilities, plugin_elf)
 *   provider_config (loader)
 *   provider.h      (loader)
 *   host_table      (call, provider.h)
 *   provider.c      (call, capabilities, provider.h)
 */
#ifndef SBX_HOST_REGISTRY_PROVIDER_H
#define SBX_HOST_REGISTRY_PROVIDER_H

#include "config/config.h"
#include "registry/loader.h"

#include <pthread.h>

struct sbx_provider {
    struct sbx_ctx *ctx;
    struct sbx_plugin plugin;
    struct sbx_config_section *section; /* NULL: enabled without a section */
    struct sbx_host host;               /* handed to init; ctx points here */
    pthread_mutex_t init_lock;
    pthread_cond_t init_done; /* signalled when a running init ends */
    bool init_running;        /* a thread is in init (without the lock) */
    bool initialized;
    void *state; /* the provider's, valid once initialized */
};

/* An enabled provider that could not be loaded (keep_broken_providers). */
struct sbx_broken_provider {
    char *name;
    int status;
    char *message;
};

struct sbx_ctx {
    pthread_mutex_t handles_lock;
    struct sbx_handle *handles; /* live handles, released by sbx_close */
    struct sbx_config *config;
    struct sbx_broken_provider *broken;
    size_t nbroken;
    char *search_path;
    char *default_provider;
    struct sbx_provider **providers;
    size_t nproviders;
    int log_level; /* messages at or below this level are printed */
    void (*log)(void *log_ctx, int level, const char *provider, const char *line);
    void *log_ctx; /* the embedder's log callback, or NULL for stderr */
};

/* The op at `member` of a provider's table, or NULL when the plugin's
 * ops_size says the table ends before it. */
#define SBX_PROVIDER_OP(p, member)                                          \
    ((p)->plugin.desc->ops_size >=                                          \
             offsetof(struct sbx_provider_ops, member) +                    \
                 sizeof((p)->plugin.desc->ops->member)                      \
         ? (p)->plugin.desc->ops->member                                    \
         : NULL)

#endif
