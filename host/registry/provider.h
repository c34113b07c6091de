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
 *   provider_info   (loader, provider.h)
 */
#ifndef SBX_HOST_REGISTRY_PROVIDER_H
#define SBX_HOST_REGISTRY_PROVIDER_H

#include "config/config.h"
#include "registry/loader.h"

#include <pthread.h>

/* What the sbx_provider_info_* accessors of sbx.h read: a loaded plugin's
 * descriptor, or only its name and why it could not be loaded
 * (provider_info.c). The strings belong to whoever made the record. */
struct sbx_provider_info {
    const char *name;
    const char *path;                     /* NULL: not loaded */
    const struct sbx_provider_desc *desc; /* NULL: not loaded */
    int status;                           /* SBX_OK or why it failed */
    const char *error;                    /* message when status != SBX_OK */
    bool enabled;                         /* enabled by the configuration */
};

struct sbx_provider {
    struct sbx_ctx *ctx;
    struct sbx_plugin plugin;
    struct sbx_provider_info info; /* over plugin; sbxh_provider_info_init */
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

/* Fill p->info from p->plugin once the record is enabled (provider_info.c). */
void sbxh_provider_info_init(struct sbx_provider *p);

/* The op at `member` of a provider's table, or NULL when the plugin's
 * ops_size says the table ends before it. */
#define SBX_PROVIDER_OP(p, member)                                          \
    ((p)->plugin.desc->ops_size >=                                          \
             offsetof(struct sbx_provider_ops, member) +                    \
                 sizeof((p)->plugin.desc->ops->member)                      \
         ? (p)->plugin.desc->ops->member                                    \
         : NULL)

#endif
