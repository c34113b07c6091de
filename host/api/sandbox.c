/*
 * sandbox.c - sandbox handles: the consumer API over provider ops.
 *
 * Every wrapper makes sure the provider is initialized, refuses work on an
 * already-fired cancellation token, runs the op with a per-call context and
 * guarantees that a failure carries a message.
 */
#include "registry/call.h"
#include "api/handle.h"
#include "api/handle_user.h"
#include "api/cap_call.h"
#include "api/handle_hooks.h"
#include "registry/key_lock.h"
#include "registry/provider.h"
#include "api/stream_guard.h"
#include "base/struct_size.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Ops on a handle whose context sbx_close already closed are refused. */
static int live(const sbx_handle *h, sbx_error *err)
{
    if (!h)
        return sbx_error_set(err, SBX_E_INVALID, "no sandbox handle given");
    if (!h->provider)
        return sbx_error_set(err, SBX_E_INVALID,
                             "the context of this sandbox handle was closed; only "
                             "sbx_release may still be called on it");
    return SBX_OK;
}

static void track(sbx_handle *h)
{
    sbx_ctx *ctx = h->provider->ctx;
    pthread_mutex_lock(&ctx->handles_lock);
    h->next = ctx->handles;
    if (h->next)
        h->next->prev = h;
    ctx->handles = h;
    pthread_mutex_unlock(&ctx->handles_lock);
}

static void untrack(sbx_handle *h)
{
    sbx_ctx *ctx = h->provider->ctx;
    pthread_mutex_lock(&ctx->handles_lock);
    if (h->prev)
        h->prev->next = h->next;
    else
        ctx->handles = h->next;
    if (h->next)
        h->next->prev = h->prev;
    pthread_mutex_unlock(&ctx->handles_lock);
}

void sbxh_handles_close_all(sbx_ctx *ctx)
{
    pthread_mutex_lock(&ctx->handles_lock);
    for (sbx_handle *h = ctx->handles, *next; h; h = next) {
        next = h->next;
        h->provider->plugin.desc->ops->release(h->sb);
        h->sb = NULL;
        h->provider = NULL;
        h->prev = h->next = NULL;
    }
    ctx->handles = NULL;
    pthread_mutex_unlock(&ctx->handles_lock);
}

/* Common prologue: init, cancellation. */
static int prepare(sbx_provider *p, sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    if (sbx_cancel_fired(cancel))
        return sbx_error_set(err, SBX_E_CANCELLED, "cancelled before it started");
    return sbx_provider_ready(p, cancel, err);
}

static int new_handle(sbx_provider *p, sbx_sandbox *sb, const char *ref,
                      sbx_handle **out, sbx_error *err)
{
    sbx_handle *h = calloc(1, sizeof *h);
    if (!h) {
        p->plugin.desc->ops->release(sb);
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    }
    h->provider = p;
    h->sb = sb;
    memcpy(h->ref, ref, SBX_REF_MAX);
    h->root = p->plugin.desc->ops->root(sb);
    track(h);
    *out = h;
    return SBX_OK;
}

static int check_key(const char *key, sbx_error *err)
{
    if (!key || !*key)
        return sbx_error_set(err, SBX_E_INVALID, "session key is empty");
    return SBX_OK;
}

/* Sinks and sources come from the caller: refuse one whose size does not
 * cover the 1.0 members, before a provider reads garbage through it. */
static int check_sink(const struct sbx_sink *s, const char *what, sbx_error *err)
{
    if (s && (s->size < SBX_SINK_SIZE_1_0 || !s->write))
        return sbx_error_set(err, SBX_E_INVALID,
                             "%s: struct sbx_sink has size %u and %s write "
                             "function: expected size >= %zu (use SBX_SINK_INIT)",
                             what, s->size, s->write ? "a" : "no",
                             (size_t)SBX_SINK_SIZE_1_0);
    return SBX_OK;
}

static int check_source(const struct sbx_source *s, const char *what, sbx_error *err)
{
    if (s && (s->size < SBX_SOURCE_SIZE_1_0 || !s->read))
        return sbx_error_set(err, SBX_E_INVALID,
                             "%s: struct sbx_source has size %u and %s read "
                             "function: expected size >= %zu (use SBX_SOURCE_INIT)",
                             what, s->size, s->read ? "a" : "no",
                             (size_t)SBX_SOURCE_SIZE_1_0);
    return SBX_OK;
}

/* Hold the key for one lifecycle call (see key_lock.h). */
static int hold_key(const sbx_provider *p, const char *hash, sbx_error *err)
{
    if (sbxh_key_lock(p->plugin.name, hash) != SBX_OK)
        return sbx_error_set(err, SBX_E_NOMEM, "out of memory");
    return SBX_OK;
}

/* create, or (src non-NULL, SBX_CAP_FORK) fork of src: the same arguments,
 * checks and handle either way. */
static int create_or_fork(sbx_provider *p, sbx_handle *src, const char *session_key,
                          const struct sbx_create_options *opts, sbx_cancel *cancel,
                          sbx_handle **out, sbx_error *err)
{
    int rc = check_key(session_key, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_create_options o;
    if (opts && !sbx_struct_in(&o, sizeof o, opts, sizeof o.size))
        return sbx_error_set(err, SBX_E_INVALID, "create: struct sbx_create_options: "
                                                 "size is not set");
    if (!opts)
        memset(&o, 0, sizeof o);
    opts = &o;
    uint64_t caps = opts->caps_required;
    if (opts->egress)
        caps |= SBX_CAP_EGRESS;
    if (opts->memory && opts->memory[0])
        caps |= SBX_CAP_MEMORY;
    if (opts->ports && opts->ports[0])
        caps |= SBX_CAP_PORTS;
    /* Admission first: decided from the descriptor, before init. */
    if ((rc = sbx_provider_admit(p, caps, err)) != SBX_OK)
        return rc;
    if ((rc = prepare(p, cancel, err)) != SBX_OK)
        return rc;
    char hash[SBX_KEY_HASH_LEN + 1];
    if (sbx_key_hash(session_key, hash) != SBX_OK)
        return sbx_error_set(err, SBX_E_INTERNAL, "cannot hash the session key "
                                                  "(libcrypto failed)");
    struct sbx_create_args args = {
        .size = sizeof args,
        .session_key = session_key,
        .key_hash = hash,
        .spec_hash = opts->spec_hash ? opts->spec_hash : "",
        .caps_required = caps,
        .egress = opts->egress,
        .memory = opts->memory,
        .ports = opts->ports,
    };
    char ref[SBX_REF_MAX];
    memset(ref, 0, sizeof ref);
    sbx_sandbox *sb = NULL;
    if ((rc = hold_key(p, hash, err)) != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = src ? SBX_PROVIDER_OP(p, fork)(src->sb, &call, &args, ref, &sb)
             : p->plugin.desc->ops->create(p->state, &call, &args, ref, &sb);
    rc = sbxh_call_end(&call, rc, p->plugin.name, src ? "fork" : "create");
    sbxh_key_unlock(p->plugin.name, hash);
    if (rc != SBX_OK)
        return rc;
    if (!sb || ref[0] == '\0' || ref[SBX_REF_MAX - 1] != '\0') {
        if (sb)
            p->plugin.desc->ops->release(sb);
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": %s returned no handle or a "
                             "malformed reference", p->plugin.name, src ? "fork" : "create");
    }
    return new_handle(p, sb, ref, out, err);
}

SBX_API int sbx_create(sbx_provider *p, const char *session_key,
                       const struct sbx_create_options *opts, sbx_cancel *cancel,
                       sbx_handle **out, sbx_error *err)
{
    return create_or_fork(p, NULL, session_key, opts, cancel, out, err);
}

SBX_API int sbx_fork(sbx_handle *src, const char *session_key,
                     const struct sbx_create_options *opts, sbx_cancel *cancel,
                     sbx_handle **out, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(src, SBX_CAP_FORK, cancel, err);
    if (rc != SBX_OK)
        return rc;
    return create_or_fork(src->provider, src, session_key, opts, cancel, out, err);
}

/* The key hash a sandbox is attached or destroyed by: the session key's
 * own, or (SBX_CAP_POOL) the hash of the key it was made for. */
static int owner_hash(sbx_provider *p, const char *session_key, const char *pool_hash,
                      char hash[SBX_KEY_HASH_LEN + 1], sbx_error *err)
{
    if (!pool_hash) {
        if (sbx_key_hash(session_key, hash) != SBX_OK)
            return sbx_error_set(err, SBX_E_INTERNAL, "cannot hash the session key "
                                                      "(libcrypto failed)");
        return SBX_OK;
    }
    int rc = sbx_provider_admit(p, SBX_CAP_POOL, err);
    if (rc != SBX_OK)
        return rc;
    size_t n = strlen(pool_hash);
    for (size_t i = 0; i < n; i++)
        if (!((pool_hash[i] >= '0' && pool_hash[i] <= '9') ||
              (pool_hash[i] >= 'a' && pool_hash[i] <= 'f')))
            n = 0;
    if (n != SBX_KEY_HASH_LEN)
        return sbx_error_set(err, SBX_E_INVALID, "the pooled sandbox's key hash must be %d "
                             "lowercase hex digits", SBX_KEY_HASH_LEN);
    memcpy(hash, pool_hash, SBX_KEY_HASH_LEN + 1);
    return SBX_OK;
}

static int attach_as(sbx_provider *p, const char *session_key, const char *pool_hash,
                     const char *ref, sbx_cancel *cancel, sbx_handle **out, sbx_error *err)
{
    int rc = check_key(session_key, err);
    if (rc != SBX_OK)
        return rc;
    if (!ref || !*ref || strlen(ref) >= SBX_REF_MAX)
        return sbx_error_set(err, SBX_E_INVALID, "sandbox reference is empty or "
                             "longer than %d bytes", SBX_REF_MAX - 1);
    if ((rc = prepare(p, cancel, err)) != SBX_OK)
        return rc;
    char hash[SBX_KEY_HASH_LEN + 1];
    if ((rc = owner_hash(p, session_key, pool_hash, hash, err)) != SBX_OK)
        return rc;
    struct sbx_attach_args args = {
        .size = sizeof args, .session_key = session_key, .key_hash = hash, .ref = ref,
    };
    sbx_sandbox *sb = NULL;
    if ((rc = hold_key(p, hash, err)) != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = p->plugin.desc->ops->attach(p->state, &call, &args, &sb);
    rc = sbxh_call_end(&call, rc, p->plugin.name, "attach");
    sbxh_key_unlock(p->plugin.name, hash);
    if (rc != SBX_OK)
        return rc;
    if (!sb)
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "provider \"%s\": attach returned no handle",
                             p->plugin.name);
    char copy[SBX_REF_MAX];
    memset(copy, 0, sizeof copy);
    memcpy(copy, ref, strlen(ref));
    return new_handle(p, sb, copy, out, err);
}

SBX_API int sbx_attach(sbx_provider *p, const char *session_key, const char *ref,
                       sbx_cancel *cancel, sbx_handle **out, sbx_error *err)
{
    return attach_as(p, session_key, NULL, ref, cancel, out, err);
}

SBX_API int sbx_attach_pooled(sbx_provider *p, const char *session_key,
                              const char *pool_key_hash, const char *ref, sbx_cancel *cancel,
                              sbx_handle **out, sbx_error *err)
{
    if (!pool_key_hash)
        return sbx_error_set(err, SBX_E_INVALID, "the pooled sandbox's key hash is missing");
    return attach_as(p, session_key, pool_key_hash, ref, cancel, out, err);
}

SBX_API const char *sbx_handle_ref(const sbx_handle *h)
{
    return h->ref;
}

SBX_API const char *sbx_handle_root(const sbx_handle *h)
{
    return h->root;
}

SBX_API sbx_provider *sbx_handle_provider(const sbx_handle *h)
{
    return h->provider; /* NULL once the context was closed */
}

/* The user an op acts as: the handle's, unless libsbx asks for the
 * sandbox's default user itself (handle_user.h). */
const char *sbxh_acting_user(const sbx_handle *h, int as)
{
    return as == SBX_AS_HANDLE && h->user[0] ? h->user : NULL;
}

SBX_API int sbx_exec(sbx_handle *h, const struct sbx_exec_args *args,
                     struct sbx_exec_result *res, sbx_cancel *cancel,
                     sbx_error *err)
{
    return sbxh_exec_as(h, SBX_AS_HANDLE, args, res, cancel, err);
}

int sbxh_exec_as(sbx_handle *h, int as, const struct sbx_exec_args *args,
                 struct sbx_exec_result *res, sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    if (live(h, err) != SBX_OK)
        return SBX_E_INVALID;
    /* The caller's structs may be older and shorter than ours: read and
     * write them only up to their size (members they lack are zero). */
    struct sbx_exec_args a;
    if (!args || !res ||
        sbx_struct_size(res) < offsetof(struct sbx_exec_result, exit_code) +
                                   sizeof res->exit_code ||
        !sbx_struct_in(&a, sizeof a, args,
                       offsetof(struct sbx_exec_args, argv) + sizeof a.argv))
        return sbx_error_set(err, SBX_E_INVALID,
                             "exec: struct sbx_exec_args or sbx_exec_result missing, "
                             "or its size is not set");
    if (!a.argv || !a.argv[0] || !a.argv[0][0])
        return sbx_error_set(err, SBX_E_INVALID, "exec: no command given");
    int rc;
    if ((rc = check_source(a.in, "exec stdin", err)) != SBX_OK ||
        (rc = check_sink(a.out, "exec stdout", err)) != SBX_OK ||
        (rc = check_sink(a.err, "exec stderr", err)) != SBX_OK)
        return rc;
    if (sbx_cancel_fired(cancel))
        return sbx_error_set(err, SBX_E_CANCELLED, "cancelled before it started");
    struct sbx_exec_result r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    /* the caller's streams, wrapped so that their own failure is told */
    struct sbx_stream_failure f = {0};
    struct sbx_guarded_source gin;
    struct sbx_guarded_sink gout, gerr;
    a.in = sbxh_guard_source(&gin, a.in, &f, "exec stdin");
    a.out = sbxh_guard_sink(&gout, a.out, &f, "exec stdout");
    a.err = sbxh_guard_sink(&gerr, a.err, &f, "exec stderr");
    int token = -1;
    if (h->hooks.before && (rc = h->hooks.before(h->hooks.ctx, h, &token, cancel, err)) != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, as);
    rc = h->provider->plugin.desc->ops->exec(h->sb, &call, &a, &r);
    sbx_struct_out(res, &r, sizeof r);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "exec");
    sbxh_guard_finish(&f, rc, call.err);
    if (h->hooks.after) {
        /* the step after runs whatever the command did; its error is told
         * unless the command's own came first */
        sbx_error after_err;
        int arc = h->hooks.after(h->hooks.ctx, h, token, cancel, &after_err);
        if (rc == SBX_OK && arc != SBX_OK) {
            rc = arc;
            if (err)
                *err = after_err;
        }
    }
    return rc;
}

void sbxh_handle_set_hooks(sbx_handle *h, const struct sbx_exec_hooks *hooks)
{
    if (h->hooks.free)
        h->hooks.free(h->hooks.ctx);
    h->hooks = *hooks;
}

SBX_API int sbx_read(sbx_handle *h, const char *path, const struct sbx_sink *sink,
                     sbx_cancel *cancel, sbx_error *err)
{
    return sbxh_read_as(h, SBX_AS_HANDLE, path, sink, cancel, err);
}

int sbxh_read_as(sbx_handle *h, int as, const char *path, const struct sbx_sink *sink,
                 sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    if (live(h, err) != SBX_OK)
        return SBX_E_INVALID;
    if (!path || !*path)
        return sbx_error_set(err, SBX_E_INVALID, "read: empty path");
    if (!sink)
        return sbx_error_set(err, SBX_E_INVALID, "read: no sink");
    int rc = check_sink(sink, "read", err);
    if (rc != SBX_OK)
        return rc;
    if (sbx_cancel_fired(cancel))
        return sbx_error_set(err, SBX_E_CANCELLED, "cancelled before it started");
    struct sbx_stream_failure f = {0};
    struct sbx_guarded_sink g;
    sink = sbxh_guard_sink(&g, sink, &f, "read sink");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, as);
    rc = h->provider->plugin.desc->ops->read_file(h->sb, &call, path, sink);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "read");
    sbxh_guard_finish(&f, rc, call.err);
    return rc;
}

SBX_API int sbx_write(sbx_handle *h, const char *path, const struct sbx_source *src,
                      unsigned mode, sbx_cancel *cancel, sbx_error *err)
{
    return sbxh_write_as(h, SBX_AS_HANDLE, path, src, mode, cancel, err);
}

int sbxh_write_as(sbx_handle *h, int as, const char *path, const struct sbx_source *src,
                  unsigned mode, sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    if (live(h, err) != SBX_OK)
        return SBX_E_INVALID;
    if (!path || !*path)
        return sbx_error_set(err, SBX_E_INVALID, "write: empty path");
    if (!src)
        return sbx_error_set(err, SBX_E_INVALID, "write: no source");
    int rc = check_source(src, "write", err);
    if (rc != SBX_OK)
        return rc;
    if (sbx_cancel_fired(cancel))
        return sbx_error_set(err, SBX_E_CANCELLED, "cancelled before it started");
    struct sbx_stream_failure f = {0};
    struct sbx_guarded_source g;
    src = sbxh_guard_source(&g, src, &f, "write source");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    call.user = sbxh_acting_user(h, as);
    rc = h->provider->plugin.desc->ops->write_file(h->sb, &call, path, src, mode);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "write");
    sbxh_guard_finish(&f, rc, call.err);
    return rc;
}

SBX_API void sbx_release(sbx_handle *h)
{
    if (!h)
        return;
    if (h->provider) { /* else sbx_close released the provider's handle */
        untrack(h);
        h->provider->plugin.desc->ops->release(h->sb);
    }
    if (h->hooks.free)
        h->hooks.free(h->hooks.ctx);
    free(h);
}

static int destroy_as(sbx_provider *p, const char *session_key, const char *pool_hash,
                      const char *ref, sbx_cancel *cancel, sbx_error *err)
{
    int rc = check_key(session_key, err);
    if (rc != SBX_OK)
        return rc;
    if (!ref || !*ref)
        return sbx_error_set(err, SBX_E_INVALID, "sandbox reference is empty");
    if ((rc = prepare(p, cancel, err)) != SBX_OK)
        return rc;
    char hash[SBX_KEY_HASH_LEN + 1];
    if ((rc = owner_hash(p, session_key, pool_hash, hash, err)) != SBX_OK)
        return rc;
    struct sbx_destroy_args args = {
        .size = sizeof args, .session_key = session_key, .key_hash = hash, .ref = ref,
    };
    if ((rc = hold_key(p, hash, err)) != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = p->plugin.desc->ops->destroy(p->state, &call, &args);
    rc = sbxh_call_end(&call, rc, p->plugin.name, "destroy");
    sbxh_key_unlock(p->plugin.name, hash);
    return rc;
}

SBX_API int sbx_destroy(sbx_provider *p, const char *session_key, const char *ref,
                        sbx_cancel *cancel, sbx_error *err)
{
    return destroy_as(p, session_key, NULL, ref, cancel, err);
}

SBX_API int sbx_destroy_pooled(sbx_provider *p, const char *session_key,
                               const char *pool_key_hash, const char *ref, sbx_cancel *cancel,
                               sbx_error *err)
{
    if (!pool_key_hash)
        return sbx_error_set(err, SBX_E_INVALID, "the pooled sandbox's key hash is missing");
    return destroy_as(p, session_key, pool_key_hash, ref, cancel, err);
}

/* Capability ops: refuse unless the descriptor declares the cap (the loader
 * has checked that a declared cap has its ops). */
int sbxh_cap_call_begin(sbx_handle *h, uint64_t cap, sbx_cancel *cancel, sbx_error *err)
{
    sbx_error_clear(err);
    if (live(h, err) != SBX_OK)
        return SBX_E_INVALID;
    int rc = sbx_provider_admit(h->provider, cap, err);
    if (rc != SBX_OK)
        return rc;
    if (sbx_cancel_fired(cancel))
        return sbx_error_set(err, SBX_E_CANCELLED, "cancelled before it started");
    return SBX_OK;
}

SBX_API int sbx_mount_put(sbx_handle *h, const char *path,
                          const struct sbx_blob *blob, sbx_cancel *cancel,
                          sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_FILE_MOUNTS, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_blob b;
    if (!blob || !sbx_struct_in(&b, sizeof b, blob, offsetof(struct sbx_blob, sha256) +
                                                        sizeof b.sha256))
        return sbx_error_set(err, SBX_E_INVALID,
                             "mount_put: no struct sbx_blob, or its size is not set");
    if ((rc = check_source(b.src, "mount_put", err)) != SBX_OK)
        return rc;
    struct sbx_stream_failure f = {0};
    struct sbx_guarded_source g;
    b.src = sbxh_guard_source(&g, b.src, &f, "mount source");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, mount_put)(h->sb, &call, path, &b);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "mount_put");
    sbxh_guard_finish(&f, rc, call.err);
    return rc;
}

SBX_API int sbx_mount_remove(sbx_handle *h, const char *path, sbx_cancel *cancel,
                             sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_FILE_MOUNTS, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, mount_remove)(h->sb, &call, path);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "mount_remove");
}

SBX_API int sbx_export_outputs(sbx_handle *h, const struct sbx_sink *tar_sink,
                               sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_OUTPUT_EXPORT, cancel, err);
    if (rc != SBX_OK)
        return rc;
    if ((rc = check_sink(tar_sink, "export_outputs", err)) != SBX_OK)
        return rc;
    struct sbx_stream_failure f = {0};
    struct sbx_guarded_sink g;
    tar_sink = sbxh_guard_sink(&g, tar_sink, &f, "export sink");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, export_outputs)(h->sb, &call, tar_sink);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "export_outputs");
    sbxh_guard_finish(&f, rc, call.err);
    return rc;
}

SBX_API int sbx_skill_install(sbx_handle *h, const char *name,
                              const struct sbx_blob *bundle, sbx_cancel *cancel,
                              sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_SKILLS, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_blob b;
    if (!bundle || !sbx_struct_in(&b, sizeof b, bundle,
                                  offsetof(struct sbx_blob, sha256) + sizeof b.sha256))
        return sbx_error_set(err, SBX_E_INVALID,
                             "skill_install: no struct sbx_blob, or its size is not "
                             "set");
    if ((rc = check_source(b.src, "skill_install", err)) != SBX_OK)
        return rc;
    struct sbx_stream_failure f = {0};
    struct sbx_guarded_source g;
    b.src = sbxh_guard_source(&g, b.src, &f, "skill bundle source");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, skill_install)(h->sb, &call, name, &b);
    rc = sbxh_call_end(&call, rc, h->provider->plugin.name, "skill_install");
    sbxh_guard_finish(&f, rc, call.err);
    return rc;
}

SBX_API int sbx_egress_set(sbx_handle *h, const struct sbx_egress_policy *policy,
                           sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_EGRESS, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_egress_policy p;
    if (!policy || !sbx_struct_in(&p, sizeof p, policy,
                                  offsetof(struct sbx_egress_policy, allow) + sizeof p.allow))
        return sbx_error_set(err, SBX_E_INVALID,
                             "egress_set: no struct sbx_egress_policy, or its size is not set");
    if (p.default_action != SBX_EGRESS_DENY)
        return sbx_error_set(err, SBX_E_INVALID,
                             "egress_set: a limited network denies by default");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, egress_set)(h->sb, &call, &p);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "egress_set");
}

SBX_API int sbx_egress_get(sbx_handle *h, struct sbx_egress_report *out, sbx_cancel *cancel,
                           sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_EGRESS, cancel, err);
    if (rc != SBX_OK)
        return rc;
    if (!out || out->size < offsetof(struct sbx_egress_report, allow) + sizeof out->allow)
        return sbx_error_set(err, SBX_E_INVALID,
                             "egress_get: no struct sbx_egress_report, or its size is not set");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, egress_get)(h->sb, &call, out);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "egress_get");
}

/* ---- users (SBX_CAP_USERS) ---------------------------------------------- */

bool sbxh_account_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;
    return n > 0 && n <= SBX_USER_NAME_MAX &&
           ((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_') &&
           strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

SBX_API int sbx_handle_set_user(sbx_handle *h, const char *user, sbx_error *err)
{
    sbx_error_clear(err);
    if (live(h, err) != SBX_OK)
        return SBX_E_INVALID;
    if (!user || !*user) {
        h->user[0] = '\0';
        return SBX_OK;
    }
    int rc = sbx_provider_admit(h->provider, SBX_CAP_USERS, err);
    if (rc != SBX_OK)
        return rc;
    if (!sbxh_account_name_ok(user))
        return sbx_error_set(err, SBX_E_INVALID,
                             "user \"%.40s\": a name is 1 to 32 of a-z, 0-9, '_', '-', "
                             "starting with a letter or '_'",
                             user);
    snprintf(h->user, sizeof h->user, "%s", user);
    return SBX_OK;
}

SBX_API const char *sbx_handle_user(const sbx_handle *h)
{
    return h && h->user[0] ? h->user : NULL;
}

SBX_API int sbx_group_add(sbx_handle *h, const struct sbx_group_spec *group,
                          sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_USERS, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_group_spec g;
    if (!group || !sbx_struct_in(&g, sizeof g, group,
                                 offsetof(struct sbx_group_spec, name) + sizeof g.name))
        return sbx_error_set(err, SBX_E_INVALID,
                             "group_add: no struct sbx_group_spec, or its size is not set");
    if (!sbxh_account_name_ok(g.name))
        return sbx_error_set(err, SBX_E_INVALID,
                             "group_add: group \"%.40s\": a name is 1 to 32 of a-z, 0-9, "
                             "'_', '-', starting with a letter or '_'",
                             g.name ? g.name : "");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, group_add)(h->sb, &call, &g);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "group_add");
}

SBX_API int sbx_user_add(sbx_handle *h, const struct sbx_user_spec *user,
                         sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_USERS, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_user_spec u;
    if (!user || !sbx_struct_in(&u, sizeof u, user,
                                offsetof(struct sbx_user_spec, groups) + sizeof u.groups))
        return sbx_error_set(err, SBX_E_INVALID,
                             "user_add: no struct sbx_user_spec, or its size is not set");
    const char *bad = !sbxh_account_name_ok(u.name)                  ? u.name
                      : u.group && !sbxh_account_name_ok(u.group) ? u.group
                                                                   : NULL;
    for (size_t i = 0; !bad && u.groups && u.groups[i]; i++)
        if (!sbxh_account_name_ok(u.groups[i]))
            bad = u.groups[i];
    if (bad || !u.name || !strcmp(u.name, "root"))
        return sbx_error_set(err, SBX_E_INVALID,
                             "user_add: \"%.40s\": a user or group name is 1 to 32 of "
                             "a-z, 0-9, '_', '-', starting with a letter or '_' (and a "
                             "user is not root)",
                             bad ? bad : u.name ? u.name : "");
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, user_add)(h->sb, &call, &u);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "user_add");
}

/* ---- memory ops (handle_hooks.h) ------------------------------------- */

int sbxh_handle_memory_load(sbx_handle *h, const char *slug, const struct sbx_source *tar,
                            sbx_cancel *cancel, sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_MEMORY, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, memory_load)(h->sb, &call, slug, tar);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "memory_load");
}

int sbxh_handle_memory_diff(sbx_handle *h, const char *slug, uint32_t flags,
                            const struct sbx_memory_changes *out, sbx_cancel *cancel,
                            sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_MEMORY, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, memory_diff)(h->sb, &call, slug, flags, out);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "memory_diff");
}

int sbxh_handle_memory_accept(sbx_handle *h, const char *slug, sbx_cancel *cancel,
                              sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_MEMORY, cancel, err);
    if (rc != SBX_OK)
        return rc;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = SBX_PROVIDER_OP(h->provider, memory_accept)(h->sb, &call, slug);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "memory_accept");
}

int sbxh_handle_memory_watch(sbx_handle *h, const char *slug, sbx_cancel *cancel,
                             sbx_error *err)
{
    int rc = sbxh_cap_call_begin(h, SBX_CAP_MEMORY, cancel, err);
    if (rc != SBX_OK)
        return rc;
    int (*watch)(sbx_sandbox *, sbx_call *, const char *) =
        SBX_PROVIDER_OP(h->provider, memory_watch);
    if (!watch)
        return SBX_OK;
    struct sbx_call call;
    sbxh_call_begin(&call, err, cancel);
    rc = watch(h->sb, &call, slug);
    return sbxh_call_end(&call, rc, h->provider->plugin.name, "memory_watch");
}
