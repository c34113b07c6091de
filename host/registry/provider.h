/*
 * provider.h - the host context and its enabled providers (internal).
 *
 * The context owns the configuration and one record per enabled provider:
 * the validated plugin, its config section, the host table handed to init,
 * and the provider state once init has run. Nothing here knows about
 * sessions or stores.
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

/* Release the provider side of every live handle of ctx and mark them
 * closed: later ops on them are refused, sbx_release frees them
 * (sandbox.c). */
void sbx_handles_close_all(sbx_ctx *ctx);

/* Fill the host table of a provider record (registry_host.c). */
void sbx_host_table_init(struct sbx_provider *p);

#endif
