/*
 * manager.c - opening a session manager (choosing and opening its store),
 * closing it, and listing bindings.
 */
#include "mkdirs.h"
#include "base/process_id.h"
#include "sessions/activity.h"
#include "sessions/internal.h"
#include "sessions/pools.h"
#include "base/struct_size.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* mkdir -p with mode 0700 for the components that are missing. */
static int make_dirs(const char *dir, sbx_error *err)
{
    char failed[4096];
    if (sbxs_mkdirs(dir, 0700, failed, sizeof failed) == 0)
        return SBX_OK;
    if (errno == ENAMETOOLONG || errno == EINVAL)
        return sbx_error_set(err, SBX_E_INVALID,
                             "state directory '%.200s' is not an absolute path "
                             "of at most 4095 bytes", dir);
    return sbx_error_set(err, SBX_E_IO, "cannot create directory '%s': %s", failed,
                         strerror(errno));
}

/* The default SQLite file: $XDG_STATE_HOME/sbx/sbx.db, else
 * ~/.local/state/sbx/sbx.db; its directory is created. */
static int default_sqlite_path(bool ignore_env, char *out, size_t len,
                               sbx_error *err)
{
    const char *state = ignore_env ? NULL : getenv("XDG_STATE_HOME");
    char dir[4096];
    if (state && state[0] == '/') {
        snprintf(dir, sizeof dir, "%s/sbx", state);
    } else {
        const char *home = ignore_env ? NULL : getenv("HOME");
        if (!home || home[0] != '/')
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "no store configured and neither XDG_STATE_HOME "
                                 "nor HOME is an absolute path: set store.path "
                                 "in the configuration");
        snprintf(dir, sizeof dir, "%s/.local/state/sbx", home);
    }
    int rc = make_dirs(dir, err);
    if (rc != SBX_OK)
        return rc;
    if (snprintf(out, len, "%s/sbx.db", dir) >= (int)len)
        return sbx_error_set(err, SBX_E_INVALID, "state directory path is too long");
    return SBX_OK;
}

SBX_API int sbx_sessions_open(sbx_ctx *ctx, const struct sbx_sessions_options *opts,
                              sbx_sessions **out, sbx_error *err)
{
    sbx_error_clear(err);
    if (!ctx || !out)
        return sbx_error_set(err, SBX_E_INVALID, "sessions: no context or output given");
    *out = NULL;
    /* read the caller's options only up to their size: older and newer
     * callers alike */
    struct sbx_sessions_options o;
    memset(&o, 0, sizeof o);
    if (opts && !sbx_struct_in(&o, sizeof o, opts, sizeof o.size))
        return sbx_error_set(err, SBX_E_INVALID, "sessions: options.size is not set");
    if (o.lease_ms < 0 || o.wait_ms < 0)
        return sbx_error_set(err, SBX_E_INVALID,
                             "sessions: lease and wait times must not be negative");

    const char *driver = o.store_driver;
    const char *target = o.store_target;
    char path[4096];
    if (!driver) {
        const char *dsn = o.ignore_environment ? NULL : getenv("SBX_STORE_DSN");
        if (!dsn || !*dsn)
            dsn = sbx_config_store_dsn(ctx);
        driver = sbx_config_store_driver(ctx);
        if (!driver)
            driver = dsn && *dsn ? "postgres" : "sqlite";
        if (!strcmp(driver, "postgres")) {
            target = dsn;
        } else {
            target = sbx_config_store_path(ctx);
            if (!target && !strcmp(driver, "sqlite")) {
                int rc = default_sqlite_path(o.ignore_environment, path,
                                             sizeof path, err);
                if (rc != SBX_OK)
                    return rc;
                target = path;
            }
        }
    }

    sbx_sessions *m = calloc(1, sizeof *m);
    if (!m)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    int rc = sbxh_store_open(driver, target, &m->store, err);
    if (rc != SBX_OK) {
        free(m);
        return rc;
    }
    m->ctx = ctx;
    pthread_mutex_init(&m->busy_lock, NULL);
    pthread_cond_init(&m->busy_done, NULL);
    sbxh_store_owner_token(m->owner, sizeof m->owner);
    sbxh_process_realm(m->realm, sizeof m->realm);
    m->lease_ms = o.lease_ms ? o.lease_ms : SBX_SESSION_LEASE_MS;
    m->wait_ms = o.wait_ms ? o.wait_ms : m->lease_ms;
#ifdef SBX_TEST_HOOKS
    const char *crash = o.ignore_environment ? NULL : getenv("SBX_TEST_CRASH_AT");
    if (crash)
        snprintf(m->crash_at, sizeof m->crash_at, "%s", crash);
    const char *stop = o.ignore_environment ? NULL : getenv("SBX_TEST_STOP_AT");
    if (stop)
        snprintf(m->stop_at, sizeof m->stop_at, "%s", stop);
    const char *nolock = o.ignore_environment ? NULL : getenv("SBX_TEST_NO_KEY_LOCK");
    m->no_key_lock = nolock && !strcmp(nolock, "1");
#endif
    if ((rc = sbxh_pools_open(m, err)) != SBX_OK) {
        sbx_sessions_close(m);
        return rc;
    }
    *out = m;
    return SBX_OK;
}

SBX_API void sbx_sessions_close(sbx_sessions *m)
{
    if (!m)
        return;
    sbxh_pools_close(m);
    sbxh_store_close(m->store);
    pthread_mutex_destroy(&m->busy_lock);
    pthread_cond_destroy(&m->busy_done);
    free(m->busy);
    free(m);
}

SBX_API const char *sbx_sessions_store_driver(const sbx_sessions *m)
{
    return sbxh_store_driver(m->store);
}

SBX_API int sbx_session_list(sbx_sessions *m, const char *after, size_t limit,
                             sbx_session_info_fn fn, void *ud, bool *more,
                             sbx_error *err)
{
    sbx_error_clear(err);
    if (more)
        *more = false;
    if (!fn)
        return sbx_error_set(err, SBX_E_INVALID, "sessions: no callback given");
    struct sbx_binding_page page = {0};
    int rc = sbxh_store_list_bindings(m->store, after, limit, &page, err);
    if (rc != SBX_OK)
        return rc;
    for (size_t i = 0; i < page.count; i++) {
        const struct sbx_binding *b = &page.items[i];
        struct sbx_session_info info = {
            .session_key = b->session_key,
            .provider = b->provider,
            .external_id = b->external_id,
            .spec_hash = b->spec_hash,
            .created_at = b->created_at,
            .deleting = b->deleting,
        };
        sbxh_session_activity_of(m, b->session_key, b->created_at, &info.paused,
                                 &info.last_used_at);
        int stop = fn(ud, &info);
        if (stop) {
            if (more)
                *more = i + 1 < page.count || page.more;
            sbxh_binding_page_free(&page);
            return stop;
        }
    }
    if (more)
        *more = page.more;
    sbxh_binding_page_free(&page);
    return SBX_OK;
}

SBX_API int sbx_intent_list(sbx_sessions *m, sbx_intent_info_fn fn, void *ud,
                            sbx_error *err)
{
    sbx_error_clear(err);
    if (!m || !fn)
        return sbx_error_set(err, SBX_E_INVALID, "intents: no manager or callback given");
    char *after = NULL;
    for (;;) {
        struct sbx_intent_page page = {0};
        int rc = sbxh_store_list_intents(m->store, after, SBX_STORE_PAGE_MAX, &page, err);
        free(after);
        after = NULL;
        if (rc != SBX_OK)
            return rc;
        for (size_t i = 0; i < page.count; i++) {
            const struct sbx_intent *it = &page.items[i];
            struct sbx_intent_info info = {
                .session_key = it->session_key,
                .provider = it->provider,
                .step = it->step,
                .has_reference = it->external_id != NULL,
                .created_at = it->created_at,
                .age_ms = it->age_ms,
            };
            int stop = fn(ud, &info);
            if (stop) {
                sbxh_intent_page_free(&page);
                return stop;
            }
        }
        if (page.more && page.count > 0 &&
            !(after = strdup(page.items[page.count - 1].session_key))) {
            sbxh_intent_page_free(&page);
            return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
        }
        bool more = page.more && page.count > 0;
        sbxh_intent_page_free(&page);
        if (!more)
            return SBX_OK;
    }
}
