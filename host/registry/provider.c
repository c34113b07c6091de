/*
 * provider.c - looking up enabled providers, lazy init, admission.
 */
#include "registry/call.h"
#include "registry/capabilities.h"
#include "clock.h"
#include "registry/provider.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

SBX_API int sbx_provider_lookup(sbx_ctx *ctx, const char *name, sbx_provider **out,
                                sbx_error *err)
{
    if (!name)
        name = ctx->default_provider;
    for (size_t i = 0; i < ctx->nproviders; i++) {
        if (!strcmp(ctx->providers[i]->plugin.name, name)) {
            *out = ctx->providers[i];
            return SBX_OK;
        }
    }
    for (size_t i = 0; i < ctx->nbroken; i++)
        if (!strcmp(ctx->broken[i].name, name))
            return sbx_error_set(err, ctx->broken[i].status, "%s",
                                 ctx->broken[i].message);
    char list[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < ctx->nproviders && used < sizeof list; i++)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                 i ? ", " : "", ctx->providers[i]->plugin.name);
    return sbx_error_set(err, SBX_E_NOT_FOUND,
                         "provider \"%s\" is not enabled (enabled: %s)", name, list);
}

SBX_API const char *sbx_provider_path(const sbx_provider *p)
{
    return p->plugin.path;
}

/* Wait while another thread runs init: woken when it ends, and every
 * 50 ms to look at this caller's cancellation. Called with init_lock held. */
static int wait_for_init(sbx_provider *p, sbx_cancel *cancel, sbx_error *err)
{
    while (p->init_running) {
        if (sbx_cancel_fired(cancel))
            return sbx_error_set(err, SBX_E_CANCELLED,
                                 "provider \"%s\": cancelled while waiting for its "
                                 "init",
                                 p->plugin.name);
        struct timespec until = sbxs_deadline_in(CLOCK_REALTIME, 50);
        pthread_cond_timedwait(&p->init_done, &p->init_lock, &until);
    }
    return SBX_OK;
}

SBX_API int sbx_provider_ready(sbx_provider *p, sbx_cancel *cancel, sbx_error *err)
{
    pthread_mutex_lock(&p->init_lock);
    int rc = wait_for_init(p, cancel, err);
    if (rc != SBX_OK || p->initialized) {
        pthread_mutex_unlock(&p->init_lock);
        return rc;
    }
    /* This thread runs init, without the lock: a slow or hanging init keeps
     * no other thread from giving up (cancel) and a failed one lets the
     * next caller try again. The caller's token reaches init. */
    p->init_running = true;
    pthread_mutex_unlock(&p->init_lock);
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    void *state = NULL;
    rc = p->plugin.desc->ops->init(&p->host, &call, &state);
    if (rc != SBX_OK) {
        /* Say which provider failed; keep its own words. */
        char why[SBX_ERROR_MAX];
        snprintf(why, sizeof why, "%s", call.err->message[0]
                                            ? call.err->message
                                            : sbx_strerror((sbx_status)rc));
        sbx_error_set(call.err, rc, "provider \"%s\" (%s): init failed: %s",
                      p->plugin.name, p->plugin.path, why);
    }
    pthread_mutex_lock(&p->init_lock);
    if (rc == SBX_OK) {
        p->state = state;
        p->initialized = true;
    }
    p->init_running = false;
    pthread_cond_broadcast(&p->init_done);
    pthread_mutex_unlock(&p->init_lock);
    return rc;
}

SBX_API int sbx_provider_admit(const sbx_provider *p, uint64_t caps, sbx_error *err)
{
    uint64_t missing = caps & ~p->plugin.desc->caps;
    if (!missing)
        return SBX_OK;
    char list[256] = "";
    size_t used = 0;
    for (int b = 0; b < 64 && used < sizeof list; b++) {
        uint64_t bit = UINT64_C(1) << b;
        if (!(missing & bit))
            continue;
        const struct sbxh_cap *cap = sbxh_cap_find(bit);
        if (cap)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s%s",
                                     used ? ", " : "", cap->name);
        else
            used += (size_t)snprintf(list + used, sizeof list - used,
                                     "%sbit %d", used ? ", " : "", b);
    }
    return sbx_error_set(err, SBX_E_UNSUPPORTED,
                         "provider \"%s\" lacks capability %s needed by this "
                         "session", p->plugin.name, list);
}

static bool is_enabled(const sbx_ctx *ctx, const char *name)
{
    for (size_t i = 0; i < ctx->nproviders; i++)
        if (!strcmp(ctx->providers[i]->plugin.name, name))
            return true;
    for (size_t i = 0; i < ctx->nbroken; i++)
        if (!strcmp(ctx->broken[i].name, name))
            return true;
    return false;
}

static bool is_listed(char **names, const char *name)
{
    for (size_t i = 0; names[i]; i++)
        if (!strcmp(names[i], name))
            return true;
    return false;
}

SBX_API int sbx_list_installed(sbx_ctx *ctx, sbx_provider_info_fn fn, void *ud,
                               sbx_error *err)
{
    char **names = sbxh_plugin_names(ctx->search_path);
    if (!names)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    for (size_t i = 0; names[i]; i++) {
        struct sbx_plugin plugin = {0};
        sbx_error why;
        sbx_error_clear(&why);
        struct sbx_provider_info info = {0};
        info.name = names[i];
        info.enabled = is_enabled(ctx, names[i]);
        info.status = sbxh_plugin_load(ctx->search_path, names[i], &plugin, &why);
        if (info.status == SBX_OK) {
            info.path = plugin.path;
            info.desc = plugin.desc;
        } else {
            info.error = why.message;
        }
        /* Loads, but the context could not enable it (its section). */
        for (size_t b = 0; info.status == SBX_OK && b < ctx->nbroken; b++)
            if (!strcmp(ctx->broken[b].name, names[i])) {
                info.status = ctx->broken[b].status;
                info.error = ctx->broken[b].message;
            }
        fn(ud, &info);
        sbxh_plugin_clear(&plugin);
    }
    /* Enabled by the configuration but not installed at all. */
    for (size_t i = 0; i < ctx->nbroken; i++) {
        if (is_listed(names, ctx->broken[i].name))
            continue;
        struct sbx_provider_info info = {0};
        info.name = ctx->broken[i].name;
        info.enabled = true;
        info.status = ctx->broken[i].status;
        info.error = ctx->broken[i].message;
        fn(ud, &info);
    }
    sbxh_plugin_names_free(names);
    return SBX_OK;
}
