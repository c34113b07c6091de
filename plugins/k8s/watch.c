/*
 * watch.c - waiting for a claim (or Sandbox) to become Ready.
 *
 * One watch on the object (fieldSelector=metadata.name) from the
 * resourceVersion last seen, so nothing between the create's answer and
 * the watch is missed and nothing older is replayed. A watch the server
 * ends (its timeoutSeconds) or that drops (a reset connection, a proxy's
 * idle cut) is started again from the last version seen; one whose version
 * is too old (410 Gone, as an HTTP status or as an ERROR event) re-lists:
 * a GET of the object gives its current state and a fresh version. The
 * wait ends at Ready=True, at a Ready=False reason the controller never
 * recovers from, when the object is deleted, at the deadline or at the
 * caller's cancellation.
 */
#include "k8s.h"

#include "clock.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Pause before a dropped watch is started again (the deadline bounds it). */
#define REWATCH_MS 200

enum outcome { GOING = 0, READY, DELETED, FAILED, GONE };

struct wctx {
    struct k8s_state *st;
    int kind;
    const char *name;
    char rv[128];
    json_object *last;   /* the latest state seen (owned) */
    int outcome;
    char msg[1024];
    int fail_status;
};

/* Judge one state of the object. */
static int judge(struct wctx *w, json_object *obj)
{
    const char *rv = sbxp_json_str(sbxp_json_obj(obj, "metadata"), "resourceVersion");
    if (rv)
        snprintf(w->rv, sizeof w->rv, "%s", rv);
    json_object_put(w->last);
    w->last = json_object_get(obj);
    const char *reason, *message;
    if (k8s_ready(obj, &reason, &message)) {
        /* claim mode routes to the Sandbox the claim is bound to */
        if (w->kind == K8S_CLAIM &&
            !sbxp_json_str(sbxp_json_obj(sbxp_json_obj(obj, "status"), "sandbox"), "name"))
            return GOING;
        return READY;
    }
    if (k8s_terminal_reason(reason)) {
        int notfound = strcmp(reason, "TemplateNotFound") == 0 ||
                       strcmp(reason, "WarmPoolNotFound") == 0;
        int config = notfound || strcmp(reason, "InvalidMetadata") == 0 ||
                     strcmp(reason, "EnvVarsInjectionRejected") == 0 ||
                     strcmp(reason, "VolumeClaimTemplatesError") == 0;
        w->fail_status = config ? SBX_E_CONFIG : SBX_E_UNAVAILABLE;
        snprintf(w->msg, sizeof w->msg, "%s %s failed: %s%s%.600s%s",
                 w->kind == K8S_CLAIM ? "SandboxClaim" : "Sandbox", w->name, reason,
                 message && *message ? ": " : "", message ? message : "",
                 notfound ? (w->kind == K8S_CLAIM ? " (check providers.k8s.warm_pool)"
                                                  : " (check providers.k8s.template)")
                          : "");
        return FAILED;
    }
    return GOING;
}

static int on_event(void *ctx, json_object *ev)
{
    struct wctx *w = ctx;
    const char *type = sbxp_json_str(ev, "type");
    json_object *obj = sbxp_json_obj(ev, "object");
    if (!type || !obj)
        return SBX_OK; /* not an event: ignore */
    if (strcmp(type, "ERROR") == 0) {
        /* a Status: 410 means our version expired */
        if (sbxp_json_int(obj, "code", 0) == 410) {
            w->outcome = GONE;
            return SBX_E_NOT_FOUND;
        }
        w->fail_status = SBX_E_PROTOCOL;
        snprintf(w->msg, sizeof w->msg, "watch of %s failed: %.600s", w->name,
                 sbxp_json_str(obj, "message") ? sbxp_json_str(obj, "message") : "?");
        w->outcome = FAILED;
        return SBX_E_PROTOCOL;
    }
    if (strcmp(type, "BOOKMARK") == 0) {
        const char *rv = sbxp_json_str(sbxp_json_obj(obj, "metadata"), "resourceVersion");
        if (rv)
            snprintf(w->rv, sizeof w->rv, "%s", rv);
        return SBX_OK;
    }
    const char *name = sbxp_json_str(sbxp_json_obj(obj, "metadata"), "name");
    if (!name || strcmp(name, w->name) != 0)
        return SBX_OK; /* not ours (a server ignoring the field selector) */
    if (strcmp(type, "DELETED") == 0) {
        w->outcome = DELETED;
        return SBX_E_NOT_FOUND;
    }
    int o = judge(w, obj);
    if (o == GOING)
        return SBX_OK;
    w->outcome = o;
    return SBX_E_CANCELLED; /* stop the stream; outcome says why */
}

/* GET the object: its current state (a re-list after 410). */
static int relist(struct wctx *w, sbx_call *call, int64_t deadline, sbxp_http_error *err)
{
    char path[512];
    k8s_path(w->st, w->kind, w->name, NULL, path, sizeof path);
    json_object *obj = NULL;
    int rc = k8s_call(w->st, call, "GET", path, NULL, &obj, deadline, err);
    if (rc == SBX_E_NOT_FOUND) {
        w->outcome = DELETED;
        return SBX_OK;
    }
    if (rc != SBX_OK)
        return rc;
    w->outcome = judge(w, obj);
    json_object_put(obj);
    return SBX_OK;
}

int k8s_wait_ready(struct k8s_state *st, sbx_call *call, int kind, const char *name,
                   json_object *obj, int64_t deadline_ms, json_object **ready)
{
    *ready = NULL;
    struct wctx w = {0};
    w.st = st;
    w.kind = kind;
    w.name = name;
    w.outcome = judge(&w, obj);
    struct sbxp_call_cancel cc;
    sbxp_call_cancel_init(&cc, st->host, call);
    sbxp_http_error err;
    memset(&err, 0, sizeof err);
    int rc = SBX_OK;
    while (w.outcome == GOING || w.outcome == GONE) {
        if (st->host->cancelled(st->host, call)) {
            rc = k8s_error(st, call, SBX_E_CANCELLED, "k8s: waiting for %s: cancelled", name);
            goto out;
        }
        int64_t left = deadline_ms - sbxs_now_ms();
        if (left <= 0)
            break;
        if (w.outcome == GONE || !w.rv[0]) {
            w.outcome = GOING;
            rc = relist(&w, call, deadline_ms, &err);
            if (rc != SBX_OK) {
                rc = k8s_report(st, call, &err, "reading %s", name);
                goto out;
            }
            continue;
        }
        char *esc = sbxp_http_escape(w.rv);
        char q[512], path[1024];
        snprintf(q, sizeof q,
                 "watch=1&fieldSelector=metadata.name%%3D%s&resourceVersion=%s"
                 "&allowWatchBookmarks=true&timeoutSeconds=%lld",
                 name, esc ? esc : "", (long long)(left / 1000 + 1));
        free(esc);
        k8s_path(st, kind, NULL, q, path, sizeof path);
        char *auth = k8s_auth_header(st);
        const char *hdrs[3] = {"Accept: application/json", auth, NULL};
        struct sbxp_http_request req = {0};
        req.method = "GET";
        req.path = path;
        req.headers = hdrs;
        req.timeout_ms = left;
        req.connect_timeout_ms = st->cfg.connect_timeout_ms;
        req.cancel = &cc.c;
        int wrc = sbxp_http_json_each(st->api, &req, on_event, &w, &err);
        if (auth) {
            memset(auth, 0, strlen(auth));
            free(auth);
        }
        if (w.outcome != GOING)
            continue; /* decided (or GONE: re-list) */
        if (wrc == SBX_OK)
            continue; /* the server ended the watch: start it again */
        if (err.http_status == 410) {
            w.outcome = GONE;
            continue;
        }
        if (wrc == SBX_E_CANCELLED) {
            rc = k8s_error(st, call, SBX_E_CANCELLED, "k8s: waiting for %s: cancelled", name);
            goto out;
        }
        if (wrc == SBX_E_TIMEOUT)
            break;
        if (err.http_status == 401 && k8s_auth_reload(st))
            continue;
        /* a 4xx is final; a watch cut short (after its 200) is not */
        if (err.http_status >= 400 && err.http_status < 500 && !sbxp_http_transient(&err)) {
            rc = k8s_report(st, call, &err, "watching %s", name);
            goto out;
        }
        /* dropped or a transient answer: wait a moment, watch again */
        struct sbxp_http_retry r = {2, REWATCH_MS, REWATCH_MS};
        if (sbxp_http_backoff(&r, 1, &cc.c) != SBX_OK) {
            rc = k8s_error(st, call, SBX_E_CANCELLED, "k8s: waiting for %s: cancelled", name);
            goto out;
        }
    }
    switch (w.outcome) {
    case READY:
        *ready = w.last;
        w.last = NULL;
        rc = SBX_OK;
        break;
    case DELETED:
        rc = k8s_error(st, call, SBX_E_NOT_FOUND, "k8s: %s was deleted while waiting for it",
                       name);
        break;
    case FAILED:
        rc = k8s_error(st, call, w.fail_status, "k8s: %s", w.msg);
        break;
    default: {
        const char *reason = NULL, *message = NULL;
        k8s_ready(w.last, &reason, &message);
        rc = k8s_error(st, call, SBX_E_TIMEOUT,
                       "k8s: %s was not Ready within %lld ms (providers.k8s.ready_timeout_ms)%s%s%s%.300s",
                       name, (long long)st->cfg.ready_timeout_ms, reason ? "; last reason " : "",
                       reason ? reason : "", message && *message ? ": " : "",
                       message ? message : "");
        break;
    }
    }
out:
    json_object_put(w.last);
    return rc;
}
