/*
 * store.c - opening a store by driver name, argument checks and dispatch to
 * the driver (the values it returns and the drivers' helpers: values.c).
 */
#include "store/store.h"

#include "base/pq_lazy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Opening and closing                                                        */
/* ------------------------------------------------------------------------ */

int sbxh_store_open(const char *driver, const char *target, struct sbx_store **out,
                    sbx_error *err)
{
    return sbxh_store_open_with(driver, target, NULL, out, err);
}

int sbxh_store_open_with(const char *driver, const char *target,
                         const struct sbx_store_options *opts, struct sbx_store **out,
                         sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "store: no output pointer given");
    *out = NULL;
    if (!driver || !*driver)
        return sbx_error_set(err, SBX_E_INVALID,
                             "store: no driver given (expected sqlite or postgres)");
    int timeout = SBX_STORE_LOCK_TIMEOUT_MS;
    if (opts) {
        if (opts->size < sizeof(uint32_t))
            return sbx_error_set(err, SBX_E_INVALID,
                                 "store: options.size is not set");
        if (opts->size >= offsetof(struct sbx_store_options, lock_timeout_ms) +
                              sizeof opts->lock_timeout_ms) {
            if (opts->lock_timeout_ms < 0)
                return sbx_error_set(err, SBX_E_INVALID,
                                     "store: lock timeout %d ms is negative",
                                     opts->lock_timeout_ms);
            if (opts->lock_timeout_ms > 0)
                timeout = opts->lock_timeout_ms;
        }
    }

    struct sbx_store *s = NULL;
    int rc;
    if (strcmp(driver, "sqlite") == 0) {
        if (!target || !*target)
            return sbx_error_set(err, SBX_E_INVALID,
                                 "sqlite store: no database path given (store.path)");
        rc = sbxh_store_sqlite_open(target, timeout, &s, err);
    } else if (strcmp(driver, "postgres") == 0) {
        if (!target || !*target)
            return sbx_error_set(err, SBX_E_INVALID,
                                 "postgres store: no connection string given "
                                 "(store.dsn or SBX_STORE_DSN)");
        if ((rc = sbxh_pq_load(err)) != SBX_OK)
            return rc;
        rc = sbxh_store_pg_open(target, timeout, &s, err);
    } else {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "store: unknown driver '%s' (expected sqlite or postgres)",
                             driver);
    }
    if (rc != SBX_OK)
        return rc;
    if (pthread_mutex_init(&s->lock, NULL) != 0) {
        s->ops->close(s);
        return sbx_error_set(err, SBX_E_NOMEM, "store: cannot create its mutex");
    }
    *out = s;
    return SBX_OK;
}

void sbxh_store_close(struct sbx_store *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->lock);
    s->ops->close(s); /* frees s, including label */
}

const char *sbxh_store_driver(const struct sbx_store *s)
{
    return s->ops->name;
}

/* ------------------------------------------------------------------------ */
/* Argument checks                                                            */
/* ------------------------------------------------------------------------ */

/* A required string argument: present, non-empty, at most max bytes. */
static int check_str(const struct sbx_store *s, const char *what, const char *v,
                     size_t max, sbx_error *err)
{
    if (!v || !*v)
        return sbx_error_set(err, SBX_E_INVALID, "%s: %s is empty", s->label, what);
    if (strnlen(v, max + 1) > max)
        return sbx_error_set(err, SBX_E_INVALID, "%s: %s is longer than %zu bytes",
                             s->label, what, max);
    return SBX_OK;
}

/* An optional string argument: NULL, or as check_str. */
static int check_opt(const struct sbx_store *s, const char *what, const char *v,
                     size_t max, sbx_error *err)
{
    return v ? check_str(s, what, v, max, err) : SBX_OK;
}

static int check_page(const struct sbx_store *s, const char *after, size_t limit,
                      sbx_error *err)
{
    if (limit < 1 || limit > SBX_STORE_PAGE_MAX)
        return sbx_error_set(err, SBX_E_INVALID,
                             "%s: page size %zu is outside 1..%d", s->label, limit,
                             SBX_STORE_PAGE_MAX);
    return check_opt(s, "page cursor", after, SBX_STORE_KEY_MAX, err);
}

#define CHECK(expr)                                                              \
    do {                                                                         \
        int check_rc_ = (expr);                                                  \
        if (check_rc_ != SBX_OK)                                                 \
            return check_rc_;                                                    \
    } while (0)

#define CHECK_KEY(s, key) CHECK(check_str(s, "session key", key, SBX_STORE_KEY_MAX, err))
#define CHECK_OWNER(s, o) CHECK(check_str(s, "owner", o, SBX_STORE_NAME_MAX, err))

/* Serialize calls on one store: a driver connection serves one call at a
 * time. */
#define LOCKED(s, call)                                                          \
    do {                                                                         \
        pthread_mutex_lock(&(s)->lock);                                          \
        int locked_rc_ = (call);                                                 \
        pthread_mutex_unlock(&(s)->lock);                                        \
        return locked_rc_;                                                       \
    } while (0)

/* ------------------------------------------------------------------------ */
/* Dispatch                                                                   */
/* ------------------------------------------------------------------------ */

int sbxh_store_schema_version(struct sbx_store *s, int *out, sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "%s: no output pointer", s->label);
    *out = 0;
    LOCKED(s, s->ops->schema_version(s, out, err));
}

int sbxh_store_get_binding(struct sbx_store *s, const char *session_key,
                           struct sbx_binding *out, sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "%s: no output binding", s->label);
    memset(out, 0, sizeof *out);
    CHECK_KEY(s, session_key);
    LOCKED(s, s->ops->get_binding(s, session_key, out, err));
}

int sbxh_store_get_intent(struct sbx_store *s, const char *session_key,
                          struct sbx_intent *out, sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "%s: no output intent", s->label);
    memset(out, 0, sizeof *out);
    CHECK_KEY(s, session_key);
    LOCKED(s, s->ops->get_intent(s, session_key, out, err));
}

int sbxh_store_claim(struct sbx_store *s, const struct sbx_claim_request *req,
                     struct sbx_claim *out, sbx_error *err)
{
    if (!out || !req)
        return sbx_error_set(err, SBX_E_INVALID, "%s: no claim request or result",
                             s->label);
    memset(out, 0, sizeof *out);
    CHECK_KEY(s, req->session_key);
    CHECK(check_str(s, "provider", req->provider, SBX_STORE_NAME_MAX, err));
    CHECK_OWNER(s, req->owner);
    CHECK(check_opt(s, "spec hash", req->spec_hash, SBX_STORE_NAME_MAX, err));
    CHECK(check_opt(s, "step", req->step, SBX_STORE_STEP_MAX, err));
    struct sbx_claim_request r = *req;
    if (!r.step)
        r.step = "claimed";
    LOCKED(s, s->ops->claim(s, &r, out, err));
}

int sbxh_store_update_intent(struct sbx_store *s, const char *session_key,
                             const char *owner, const char *step,
                             const char *external_id, sbx_error *err)
{
    CHECK_KEY(s, session_key);
    CHECK_OWNER(s, owner);
    CHECK(check_str(s, "step", step, SBX_STORE_STEP_MAX, err));
    CHECK(check_opt(s, "external id", external_id, SBX_STORE_KEY_MAX, err));
    LOCKED(s, s->ops->update_intent(s, session_key, owner, step, external_id, err));
}

int sbxh_store_takeover_intent(struct sbx_store *s, const char *session_key,
                               const char *owner, int64_t lease_ms,
                               struct sbx_intent *out, sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "%s: no output intent", s->label);
    memset(out, 0, sizeof *out);
    CHECK_KEY(s, session_key);
    CHECK_OWNER(s, owner);
    if (lease_ms < 0)
        return sbx_error_set(err, SBX_E_INVALID, "%s: lease %lld ms is negative",
                             s->label, (long long)lease_ms);
    LOCKED(s, s->ops->takeover_intent(s, session_key, owner, lease_ms, out, err));
}

int sbxh_store_release_intent(struct sbx_store *s, const char *session_key,
                              const char *owner, sbx_error *err)
{
    CHECK_KEY(s, session_key);
    CHECK_OWNER(s, owner);
    LOCKED(s, s->ops->release_intent(s, session_key, owner, err));
}

int sbxh_store_publish(struct sbx_store *s, const char *session_key,
                       const char *owner, struct sbx_binding *out, sbx_error *err)
{
    struct sbx_binding scratch;
    if (!out)
        out = &scratch;
    memset(out, 0, sizeof *out);
    CHECK_KEY(s, session_key);
    CHECK_OWNER(s, owner);
    pthread_mutex_lock(&s->lock);
    int rc = s->ops->publish(s, session_key, owner, out, err);
    pthread_mutex_unlock(&s->lock);
    if (out == &scratch)
        sbxh_binding_clear(&scratch);
    return rc;
}

int sbxh_store_fence(struct sbx_store *s, const char *session_key, sbx_error *err)
{
    CHECK_KEY(s, session_key);
    LOCKED(s, s->ops->fence(s, session_key, err));
}

int sbxh_store_remove_session(struct sbx_store *s, const char *session_key,
                              sbx_error *err)
{
    CHECK_KEY(s, session_key);
    LOCKED(s, s->ops->remove_session(s, session_key, err));
}

int sbxh_store_list_bindings(struct sbx_store *s, const char *after, size_t limit,
                             struct sbx_binding_page *out, sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "%s: no output page", s->label);
    memset(out, 0, sizeof *out);
    CHECK(check_page(s, after, limit, err));
    LOCKED(s, s->ops->list_bindings(s, after, limit, out, err));
}

int sbxh_store_list_intents(struct sbx_store *s, const char *after, size_t limit,
                            struct sbx_intent_page *out, sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "%s: no output page", s->label);
    memset(out, 0, sizeof *out);
    CHECK(check_page(s, after, limit, err));
    LOCKED(s, s->ops->list_intents(s, after, limit, out, err));
}

int sbxh_store_list_deleting(struct sbx_store *s, const char *after, size_t limit,
                             struct sbx_key_page *out, sbx_error *err)
{
    if (!out)
        return sbx_error_set(err, SBX_E_INVALID, "%s: no output page", s->label);
    memset(out, 0, sizeof *out);
    CHECK(check_page(s, after, limit, err));
    LOCKED(s, s->ops->list_deleting(s, after, limit, out, err));
}
