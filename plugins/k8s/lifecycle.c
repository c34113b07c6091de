/*
 * lifecycle.c - create, attach, destroy.
 *
 * A session's sandbox is one object named "sbx-" + the first 40 hex digits
 * of its key hash, labelled sbx.dev/managed=true and sbx.dev/owner=<the
 * first 63 hex digits of the key hash>: a SandboxClaim on the configured
 * warm pool (claim mode) or a Sandbox carrying the configured
 * SandboxTemplate's pod template (template mode), with
 * shutdownTime = now + shutdown_after and shutdownPolicy Delete so that a
 * forgotten sandbox does not run forever. The fixed name makes create
 * idempotent across processes and machines: a second create answers 409
 * and attaches when the owner label is ours. The reference is
 * "claim:<name>" or "sandbox:<name>".
 */
#include "k8s.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often a create polls an object that is being deleted. */
#define GONE_POLL_MS 200

static int hex64(const char *s)
{
    if (!s || strlen(s) != SBX_KEY_HASH_LEN)
        return 0;
    for (size_t i = 0; i < SBX_KEY_HASH_LEN; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

static const char *kind_word(int kind)
{
    return kind == K8S_CLAIM ? "SandboxClaim" : "Sandbox";
}

/* Whether obj's owner label is key_hash's. */
static int owned(json_object *obj, const char *key_hash)
{
    json_object *labels = sbxp_json_obj(sbxp_json_obj(obj, "metadata"), "labels");
    const char *owner = sbxp_json_str(labels, K8S_LABEL_OWNER);
    const char *managed = sbxp_json_str(labels, K8S_LABEL_MANAGED);
    return owner && managed && strcmp(managed, "true") == 0 &&
           strlen(owner) == K8S_OWNER_LEN && strncmp(owner, key_hash, K8S_OWNER_LEN) == 0;
}

static int deleting(json_object *obj)
{
    return sbxp_json_str(sbxp_json_obj(obj, "metadata"), "deletionTimestamp") != NULL;
}

/* Parse "claim:<name>" / "sandbox:<name>". */
static int parse_ref(struct k8s_state *st, sbx_call *call, const char *ref, int *kind,
                     char name[K8S_NAME_MAX])
{
    const char *n = NULL;
    if (ref && strncmp(ref, "claim:", 6) == 0)
        *kind = K8S_CLAIM, n = ref + 6;
    else if (ref && strncmp(ref, "sandbox:", 8) == 0)
        *kind = K8S_SANDBOX, n = ref + 8;
    if (!n || strlen(n) != strlen(K8S_NAME_PREFIX) + K8S_NAME_HASH ||
        strncmp(n, K8S_NAME_PREFIX, strlen(K8S_NAME_PREFIX)) != 0)
        return k8s_error(st, call, SBX_E_INVALID,
                         "k8s: malformed reference (want claim:sbx-<hex> or sandbox:sbx-<hex>)");
    for (const char *p = n + strlen(K8S_NAME_PREFIX); *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return k8s_error(st, call, SBX_E_INVALID, "k8s: malformed reference");
    snprintf(name, K8S_NAME_MAX, "%s", n);
    return SBX_OK;
}

static void name_of(const char *key_hash, char name[K8S_NAME_MAX])
{
    snprintf(name, K8S_NAME_MAX, K8S_NAME_PREFIX "%.*s", K8S_NAME_HASH, key_hash);
}

/* The handle of a Ready object. */
static int make_handle(struct k8s_state *st, sbx_call *call, int kind, const char *name,
                       const char *key_hash, json_object *obj, sbx_sandbox **out)
{
    const char *pod = kind == K8S_CLAIM
                          ? sbxp_json_str(sbxp_json_obj(sbxp_json_obj(obj, "status"), "sandbox"),
                                          "name")
                          : name;
    if (!pod || !*pod || strlen(pod) > 63)
        return k8s_error(st, call, SBX_E_PROTOCOL,
                         "k8s: %s %s is Ready but names no valid sandbox (status.sandbox.name)",
                         kind_word(kind), name);
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return k8s_error(st, call, SBX_E_NOMEM, "out of memory");
    sb->st = st;
    sb->kind = kind;
    snprintf(sb->name, sizeof sb->name, "%s", name);
    snprintf(sb->pod, sizeof sb->pod, "%s", pod);
    snprintf(sb->key_hash, sizeof sb->key_hash, "%s", key_hash);
    pthread_mutex_init(&sb->lock, NULL);
    *out = sb;
    return SBX_OK;
}

static void rfc3339(int64_t unix_s, char *buf, size_t cap)
{
    time_t t = (time_t)unix_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The object create posts. Template mode copies the template's pod
 * template (GET sandboxtemplates/<name>). */
static int build_body(struct k8s_state *st, sbx_call *call, const char *name,
                      const char *key_hash, int64_t deadline, json_object **out)
{
    *out = NULL;
    json_object *pod_template = NULL;
    if (st->cfg.kind == K8S_SANDBOX) {
        char path[512];
        snprintf(path, sizeof path,
                 "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/%s/sandboxtemplates/%s",
                 st->cfg.ns, st->cfg.template_name);
        json_object *tpl = NULL;
        sbxp_http_error err;
        int rc = k8s_call(st, call, "GET", path, NULL, &tpl, deadline, &err);
        if (rc == SBX_E_NOT_FOUND)
            return k8s_error(st, call, SBX_E_CONFIG,
                             "k8s: SandboxTemplate %s not found in namespace %s "
                             "(providers.k8s.template)",
                             st->cfg.template_name, st->cfg.ns);
        if (rc != SBX_OK)
            return k8s_report(st, call, &err, "reading SandboxTemplate %s",
                              st->cfg.template_name);
        json_object *pt = sbxp_json_obj(sbxp_json_obj(tpl, "spec"), "podTemplate");
        if (!pt) {
            json_object_put(tpl);
            return k8s_error(st, call, SBX_E_CONFIG,
                             "k8s: SandboxTemplate %s has no spec.podTemplate",
                             st->cfg.template_name);
        }
        pod_template = json_object_get(pt);
        json_object_put(tpl);
    }
    json_object *o = json_object_new_object();
    json_object *meta = json_object_new_object();
    json_object *labels = json_object_new_object();
    json_object *spec = json_object_new_object();
    char owner[K8S_OWNER_LEN + 1];
    snprintf(owner, sizeof owner, "%.*s", K8S_OWNER_LEN, key_hash);
    json_object_object_add(labels, K8S_LABEL_MANAGED, json_object_new_string("true"));
    json_object_object_add(labels, K8S_LABEL_OWNER, json_object_new_string(owner));
    json_object_object_add(meta, "name", json_object_new_string(name));
    json_object_object_add(meta, "labels", labels);
    char when[64] = "";
    if (st->cfg.shutdown_after_s > 0)
        rfc3339((int64_t)time(NULL) + st->cfg.shutdown_after_s, when, sizeof when);
    if (st->cfg.kind == K8S_CLAIM) {
        json_object_object_add(o, "apiVersion",
                               json_object_new_string("extensions.agents.x-k8s.io/v1beta1"));
        json_object_object_add(o, "kind", json_object_new_string("SandboxClaim"));
        json_object *ref = json_object_new_object();
        json_object_object_add(ref, "name", json_object_new_string(st->cfg.pool));
        json_object_object_add(spec, "warmPoolRef", ref);
        if (when[0]) {
            json_object *lc = json_object_new_object();
            json_object_object_add(lc, "shutdownTime", json_object_new_string(when));
            json_object_object_add(lc, "shutdownPolicy", json_object_new_string("Delete"));
            json_object_object_add(spec, "lifecycle", lc);
        }
    } else {
        json_object_object_add(o, "apiVersion", json_object_new_string("agents.x-k8s.io/v1beta1"));
        json_object_object_add(o, "kind", json_object_new_string("Sandbox"));
        json_object_object_add(spec, "podTemplate", pod_template);
        pod_template = NULL;
        if (when[0]) {
            json_object_object_add(spec, "shutdownTime", json_object_new_string(when));
            json_object_object_add(spec, "shutdownPolicy", json_object_new_string("Delete"));
        }
    }
    json_object_object_add(o, "metadata", meta);
    json_object_object_add(o, "spec", spec);
    json_object_put(pod_template);
    *out = o;
    return SBX_OK;
}

/* Wait until an object that is being deleted is gone (a create right after
 * a destroy of the same key). */
static int wait_gone(struct k8s_state *st, sbx_call *call, const char *path, const char *name,
                     int64_t deadline)
{
    for (;;) {
        sbxp_http_error err;
        int rc = k8s_call(st, call, "GET", path, NULL, NULL, deadline, &err);
        if (rc == SBX_E_NOT_FOUND)
            return SBX_OK;
        if (rc != SBX_OK)
            return k8s_report(st, call, &err, "waiting for %s to be deleted", name);
        if (sbxs_now_ms() + GONE_POLL_MS > deadline)
            return k8s_error(st, call, SBX_E_TIMEOUT,
                             "k8s: %s of an earlier session is still being deleted", name);
        struct sbxp_call_cancel cc;
        sbxp_call_cancel_init(&cc, st->host, call);
        struct sbxp_http_retry r = {2, GONE_POLL_MS, GONE_POLL_MS};
        if (sbxp_http_backoff(&r, 1, &cc.c) != SBX_OK)
            return k8s_error(st, call, SBX_E_CANCELLED, "k8s: create cancelled");
    }
}

static void delete_quietly(struct k8s_state *st, int kind, const char *name)
{
    char path[512];
    k8s_path(st, kind, name, "propagationPolicy=Background", path, sizeof path);
    sbxp_http_error err;
    if (k8s_call(st, NULL, "DELETE", path, NULL, NULL, 0, &err) != SBX_OK &&
        err.status != SBX_E_NOT_FOUND)
        st->host->log(st->host, SBX_LOG_WARN, "k8s: cannot delete %s: %s", name, err.message);
}

int k8s_create(void *state, sbx_call *call, const struct sbx_create_args *args, char *ref,
               sbx_sandbox **out)
{
    struct k8s_state *st = state;
    *out = NULL;
    if (!hex64(args->key_hash))
        return k8s_error(st, call, SBX_E_INVALID, "k8s: malformed key hash");
    int kind = st->cfg.kind;
    char name[K8S_NAME_MAX], path[512], coll[512];
    name_of(args->key_hash, name);
    k8s_path(st, kind, name, NULL, path, sizeof path);
    k8s_path(st, kind, NULL, NULL, coll, sizeof coll);
    int64_t deadline = sbxs_now_ms() + st->cfg.ready_timeout_ms;
    json_object *body = NULL, *obj = NULL;
    int rc = build_body(st, call, name, args->key_hash, deadline, &body);
    if (rc != SBX_OK)
        return rc;
    sbxp_http_error err;
    for (;;) {
        rc = k8s_call(st, call, "POST", coll, body, &obj, deadline, &err);
        if (rc == SBX_OK)
            break;
        if (rc != SBX_E_EXISTS) {
            rc = k8s_report(st, call, &err, "creating %s %s", kind_word(kind), name);
            goto out;
        }
        /* 409: made before (a retried create, another process) */
        rc = k8s_call(st, call, "GET", path, NULL, &obj, deadline, &err);
        if (rc == SBX_E_NOT_FOUND)
            continue; /* deleted in between: post again */
        if (rc != SBX_OK) {
            rc = k8s_report(st, call, &err, "reading %s %s", kind_word(kind), name);
            goto out;
        }
        if (!owned(obj, args->key_hash)) {
            rc = k8s_error(st, call, SBX_E_EXISTS,
                           "k8s: %s %s exists and is not this session's (owner label)",
                           kind_word(kind), name);
            goto out;
        }
        if (!deleting(obj))
            break;
        json_object_put(obj);
        obj = NULL;
        if ((rc = wait_gone(st, call, path, name, deadline)) != SBX_OK)
            goto out;
    }
    json_object *ready = NULL;
    rc = k8s_wait_ready(st, call, kind, name, obj, deadline, &ready);
    if (rc == SBX_OK) {
        rc = make_handle(st, call, kind, name, args->key_hash, ready, out);
        json_object_put(ready);
    } else if (rc == SBX_E_TIMEOUT || rc == SBX_E_CONFIG || rc == SBX_E_UNAVAILABLE) {
        /* never Ready, or failed for good: a failed create leaves nothing */
        delete_quietly(st, kind, name);
    }
    if (rc == SBX_OK)
        snprintf(ref, SBX_REF_MAX, "%s:%s", kind == K8S_CLAIM ? "claim" : "sandbox", name);
out:
    json_object_put(obj);
    json_object_put(body);
    return rc;
}

int k8s_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
               sbx_sandbox **out)
{
    struct k8s_state *st = state;
    *out = NULL;
    int kind;
    char name[K8S_NAME_MAX], path[512];
    int rc = parse_ref(st, call, args->ref, &kind, name);
    if (rc != SBX_OK)
        return rc;
    if (!hex64(args->key_hash))
        return k8s_error(st, call, SBX_E_INVALID, "k8s: malformed key hash");
    k8s_path(st, kind, name, NULL, path, sizeof path);
    json_object *obj = NULL;
    sbxp_http_error err;
    rc = k8s_call(st, call, "GET", path, NULL, &obj, 0, &err);
    if (rc == SBX_E_NOT_FOUND)
        return k8s_error(st, call, SBX_E_NOT_FOUND, "k8s: %s %s no longer exists",
                         kind_word(kind), name);
    if (rc != SBX_OK)
        return k8s_report(st, call, &err, "reading %s %s", kind_word(kind), name);
    if (!owned(obj, args->key_hash)) {
        json_object_put(obj);
        return k8s_error(st, call, SBX_E_DENIED,
                         "k8s: %s %s belongs to another session (owner label)", kind_word(kind),
                         name);
    }
    const char *reason = NULL;
    int ready = k8s_ready(obj, &reason, NULL);
    if (deleting(obj) || (!ready && k8s_terminal_reason(reason))) {
        json_object_put(obj);
        return k8s_error(st, call, SBX_E_NOT_FOUND, "k8s: %s %s is %s", kind_word(kind), name,
                         reason ? reason : "being deleted");
    }
    json_object *r = NULL;
    rc = k8s_wait_ready(st, call, kind, name, obj, sbxs_now_ms() + st->cfg.ready_timeout_ms,
                        &r);
    json_object_put(obj);
    if (rc != SBX_OK)
        return rc;
    rc = make_handle(st, call, kind, name, args->key_hash, r, out);
    json_object_put(r);
    return rc;
}

int k8s_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct k8s_state *st = state;
    int kind;
    char name[K8S_NAME_MAX], path[512];
    int rc = parse_ref(st, call, args->ref, &kind, name);
    if (rc != SBX_OK)
        return rc;
    if (!hex64(args->key_hash))
        return k8s_error(st, call, SBX_E_INVALID, "k8s: malformed key hash");
    k8s_path(st, kind, name, NULL, path, sizeof path);
    json_object *obj = NULL;
    sbxp_http_error err;
    rc = k8s_call(st, call, "GET", path, NULL, &obj, 0, &err);
    if (rc == SBX_E_NOT_FOUND)
        return SBX_OK;
    if (rc != SBX_OK)
        return k8s_report(st, call, &err, "reading %s %s", kind_word(kind), name);
    int mine = owned(obj, args->key_hash);
    const char *uid = sbxp_json_str(sbxp_json_obj(obj, "metadata"), "uid");
    /* Delete exactly the object whose owner we checked (a precondition on
     * its uid), not one created again under the name meanwhile. */
    json_object *opts = NULL;
    if (mine) {
        opts = json_object_new_object();
        json_object_object_add(opts, "apiVersion", json_object_new_string("v1"));
        json_object_object_add(opts, "kind", json_object_new_string("DeleteOptions"));
        json_object_object_add(opts, "propagationPolicy", json_object_new_string("Background"));
        if (uid) {
            json_object *pre = json_object_new_object();
            json_object_object_add(pre, "uid", json_object_new_string(uid));
            json_object_object_add(opts, "preconditions", pre);
        }
    }
    json_object_put(obj);
    if (!mine)
        return k8s_error(st, call, SBX_E_DENIED,
                         "k8s: %s %s belongs to another session (owner label)", kind_word(kind),
                         name);
    rc = k8s_call(st, call, "DELETE", path, opts, NULL, 0, &err);
    json_object_put(opts);
    if (rc == SBX_OK || rc == SBX_E_NOT_FOUND)
        return SBX_OK;
    if (rc == SBX_E_EXISTS) /* 409: the uid precondition failed: ours is gone */
        return SBX_OK;
    return k8s_report(st, call, &err, "deleting %s %s", kind_word(kind), name);
}

const char *k8s_root(sbx_sandbox *sb)
{
    if (sb->st->cfg.workspace)
        return sb->st->cfg.workspace;
    /* Learnt once per handle: the directory sandboxd runs a command in
     * when it names no cwd (its --root-dir); /workspace when it cannot
     * say. Only reported, never used to open anything. */
    pthread_mutex_lock(&sb->lock);
    if (!sb->root[0]) {
        k8s_exec_root(sb, sb->root, sizeof sb->root);
        if (!sb->root[0])
            snprintf(sb->root, sizeof sb->root, "/workspace");
    }
    pthread_mutex_unlock(&sb->lock);
    return sb->root;
}

void k8s_release(sbx_sandbox *sb)
{
    pthread_mutex_destroy(&sb->lock);
    free(sb);
}
