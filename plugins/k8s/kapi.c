/*
 * kapi.c - calls to the Kubernetes API server: object paths, one JSON call
 * retried while it fails transiently within a deadline, the bearer token
 * re-read after a 401, failures as a call's error, the Ready condition and
 * which of its reasons are final.
 */
#include "k8s.h"

#include "clock.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLAIM_GROUP "extensions.agents.x-k8s.io/v1beta1"
#define SANDBOX_GROUP "agents.x-k8s.io/v1beta1"

void k8s_path(struct k8s_state *st, int kind, const char *name, const char *query, char *buf,
              size_t cap)
{
    snprintf(buf, cap, "/apis/%s/namespaces/%s/%s%s%s%s%s",
             kind == K8S_CLAIM ? CLAIM_GROUP : SANDBOX_GROUP, st->cfg.ns,
             kind == K8S_CLAIM ? "sandboxclaims" : "sandboxes", name ? "/" : "",
             name ? name : "", query ? "?" : "", query ? query : "");
}

static int call_api(struct k8s_state *st, sbx_call *call, const char *method, const char *path,
                    json_object *body, json_object **out, int64_t deadline_ms, int retry,
                    sbxp_http_error *err)
{
    if (out)
        *out = NULL;
    if (deadline_ms <= 0)
        deadline_ms = sbxs_now_ms() + st->cfg.request_timeout_ms;
    struct sbxp_call_cancel cc;
    sbxp_call_cancel_init(&cc, st->host, call);
    int reloaded = 0;
    for (int attempt = 0;; attempt++) {
        int64_t left = deadline_ms - sbxs_now_ms();
        if (left <= 0)
            return sbxp_http_fail(err, SBX_E_TIMEOUT, "%s %s: no answer in time", method,
                                  path);
        char *auth = k8s_auth_header(st);
        const char *hdrs[3] = {"Accept: application/json", auth, NULL};
        struct sbxp_http_request req = {0};
        req.method = method;
        req.path = path;
        req.headers = hdrs;
        req.timeout_ms = left < st->cfg.request_timeout_ms ? left : st->cfg.request_timeout_ms;
        req.connect_timeout_ms = st->cfg.connect_timeout_ms;
        req.cancel = &cc.c;
        if (body)
            req.content_type = "application/json";
        json_object *o = NULL;
        long code = 0;
        int rc = sbxp_http_json_body(st->api, &req, body, &o, &code, err);
        if (auth) {
            memset(auth, 0, strlen(auth));
            free(auth);
        }
        if (rc == SBX_OK) {
            if (out)
                *out = o;
            else
                json_object_put(o);
            return SBX_OK;
        }
        json_object_put(o);
        /* An expired token: a rotated file has a new one. */
        if (err->http_status == 401 && !reloaded) {
            reloaded = 1;
            if (k8s_auth_reload(st))
                continue;
        }
        if (!retry ||
            (!sbxp_http_transient(err) && !(err->http_status >= 500 && err->http_status < 600)))
            return rc;
        /* 429 and 5xx (and a refused or reset connection): back off and
         * try again while the deadline allows. Repeating a create is safe:
         * its name is fixed, a second one answers 409. */
        struct sbxp_http_retry r = st->cfg.retry;
        r.attempts = attempt + 2;
        if (sbxp_http_backoff(&r, attempt + 1, &cc.c) != SBX_OK)
            return sbxp_http_fail(err, SBX_E_CANCELLED, "%s %s: cancelled", method, path);
    }
}

int k8s_call(struct k8s_state *st, sbx_call *call, const char *method, const char *path,
             json_object *body, json_object **out, int64_t deadline_ms, sbxp_http_error *err)
{
    return call_api(st, call, method, path, body, out, deadline_ms, 1, err);
}

int k8s_get_once(struct k8s_state *st, sbx_call *call, const char *path, json_object **out,
                 sbxp_http_error *err)
{
    return call_api(st, call, "GET", path, NULL, out, 0, 0, err);
}

int k8s_report(struct k8s_state *st, sbx_call *call, const sbxp_http_error *err,
               const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (err->http_status == 401)
        return k8s_error(st, call, SBX_E_CONFIG,
                         "k8s: %s: the API server refused %s (expired or revoked?): %s", what,
                         st->cfg.token_source ? st->cfg.token_source : "the credentials",
                         err->message);
    if (err->http_status == 403)
        return k8s_error(st, call, SBX_E_DENIED,
                         "k8s: %s: forbidden for %s in namespace %s (see the Role in "
                         "docs/providers/k8s.md): %s",
                         what, st->cfg.token_source ? st->cfg.token_source : "these credentials",
                         st->cfg.ns, err->message);
    return k8s_error(st, call, err->status, "k8s: %s: %s", what, err->message);
}

int k8s_ready(json_object *obj, const char **reason, const char **message)
{
    if (reason)
        *reason = NULL;
    if (message)
        *message = NULL;
    json_object *conds = NULL;
    json_object *status = sbxp_json_obj(obj, "status");
    if (!status || !json_object_object_get_ex(status, "conditions", &conds) ||
        !json_object_is_type(conds, json_type_array))
        return 0;
    for (size_t i = 0; i < json_object_array_length(conds); i++) {
        json_object *c = json_object_array_get_idx(conds, i);
        const char *type = sbxp_json_str(c, "type");
        if (!type || strcmp(type, "Ready") != 0)
            continue;
        if (reason)
            *reason = sbxp_json_str(c, "reason");
        if (message)
            *message = sbxp_json_str(c, "message");
        const char *s = sbxp_json_str(c, "status");
        return s && strcmp(s, "True") == 0;
    }
    return 0;
}

int k8s_terminal_reason(const char *reason)
{
    /* The claim controller's Ready=False reasons it does not retry (the
     * upstream Python client's TERMINAL_CLAIM_READY_REASONS) and the
     * references that do not exist. Transient ones (AdoptionPending,
     * SandboxMissing, SandboxNotReady, ReconcilerError) are waited out. */
    static const char *const final[] = {"InvalidMetadata", "EnvVarsInjectionRejected",
                                        "VolumeClaimTemplatesError", "ClaimExpired",
                                        "SandboxExpired", "TemplateNotFound",
                                        "WarmPoolNotFound", NULL};
    if (!reason)
        return 0;
    for (size_t i = 0; final[i]; i++)
        if (strcmp(reason, final[i]) == 0)
            return 1;
    return 0;
}
