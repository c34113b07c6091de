/*
 * api.c - Daytona control plane calls (openapi.yaml: /sandbox...). Reads
 * are retried on transient failures; create is not (a lost answer is
 * recovered by looking the deterministic name up). See daytona.h.
 */
#include "daytona.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "/sandbox/<escaped id><suffix>" into buf. */
#define sandbox_path(buf, cap, id, suffix, err) \
    sbxp_api_path((buf), (cap), "/sandbox/", (id), (suffix), (err))

int daytona_api_get(struct daytona_state *st, sbx_call *call, const char *id_or_name,
                    json_object **out, sbxp_http_error *err)
{
    *out = NULL;
    char path[256];
    int rc = sandbox_path(path, sizeof path, id_or_name, "", err);
    if (rc != SBX_OK)
        return rc;
    json_object *doc = NULL;
    rc = sbxp_api_json(&st->ctl, call, "GET", path, NULL, &doc, 1, err);
    if (rc == SBX_OK && (!doc || !json_object_is_type(doc, json_type_object) ||
                         !sbxp_json_str(doc, "id"))) {
        json_object_put(doc);
        return sbxp_http_fail(err, SBX_E_PROTOCOL, "GET /sandbox/%s: not a Sandbox", id_or_name);
    }
    *out = doc;
    return rc;
}

int daytona_api_create(struct daytona_state *st, sbx_call *call, const char *name,
                       const char *key_hash, const char *spec_hash, const char *ports,
                       json_object **out, sbxp_http_error *err)
{
    json_object *body = json_object_new_object();
    json_object *labels = sbxp_api_owner_labels(DT_LABEL_MANAGED, DT_LABEL_OWNER, DT_LABEL_SPEC,
                                                key_hash, spec_hash, 0);
    if (!body || !labels) {
        json_object_put(body);
        json_object_put(labels);
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    }
    if (ports && *ports)
        json_object_object_add(labels, DT_LABEL_PORTS, json_object_new_string(ports));
    json_object_object_add(body, "name", json_object_new_string(name));
    json_object_object_add(body, "labels", labels);
    if (st->cfg.snapshot)
        json_object_object_add(body, "snapshot", json_object_new_string(st->cfg.snapshot));
    if (st->cfg.image) {
        /* An image is built from a one-line Dockerfile, as the SDK's
         * Image.base() does. */
        char df[1024];
        snprintf(df, sizeof df, "FROM %s\n", st->cfg.image);
        json_object *bi = json_object_new_object();
        json_object_object_add(bi, "dockerfileContent", json_object_new_string(df));
        json_object_object_add(body, "buildInfo", bi);
    }
    if (st->cfg.target)
        json_object_object_add(body, "target", json_object_new_string(st->cfg.target));
    if (st->cfg.user)
        json_object_object_add(body, "user", json_object_new_string(st->cfg.user));
    json_object_object_add(body, "autoStopInterval",
                           json_object_new_int64(st->cfg.auto_stop_min));
    json_object_object_add(body, "networkBlockAll", json_object_new_boolean(!st->cfg.network));
    json_object_object_add(body, "public", json_object_new_boolean(0));
    int rc = sbxp_api_json(&st->ctl, call, "POST", "/sandbox", body, out, 0, err);
    json_object_put(body);
    return rc;
}

int daytona_api_start(struct daytona_state *st, sbx_call *call, const char *id,
                      sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "POST", "/sandbox/", id, "/start", NULL, NULL, err);
}

int daytona_api_delete(struct daytona_state *st, sbx_call *call, const char *id,
                       sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "DELETE", "/sandbox/", id, "", NULL, NULL, err);
}

/* Sleep ms, or less when the call is cancelled: SBX_E_CANCELLED then. */
static int nap(struct daytona_state *st, sbx_call *call, int64_t ms)
{
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    if (c.c.check(c.c.ctx))
        return SBX_E_CANCELLED;
    struct pollfd p = {c.c.fd, POLLIN, 0};
    if (poll(&p, p.fd >= 0 ? 1 : 0, (int)ms) > 0)
        return SBX_E_CANCELLED;
    return c.c.check(c.c.ctx) ? SBX_E_CANCELLED : SBX_OK;
}

/* States a sandbox passes through on its own towards started. */
static int transitional(const char *s)
{
    static const char *const t[] = {"creating", "restoring", "starting", "pending_build",
                                    "building_snapshot", "pulling_snapshot", "unknown",
                                    "resizing", "snapshotting", "forking", "resuming",
                                    "stopping", "pausing", "archiving", NULL};
    for (size_t i = 0; t[i]; i++)
        if (!strcmp(s, t[i]))
            return 1;
    return 0;
}

/* A failure of the wait: either a request's (err, prefixed with what) or
 * a plain one (err's message alone, what empty). */
static int wait_fail_http(struct daytona_wait *w, const sbxp_http_error *err, const char *doing,
                          const char *id, const char *state)
{
    w->err = *err;
    if (state)
        snprintf(w->what, sizeof w->what, "%s sandbox %s (it was %s)", doing, id, state);
    else
        snprintf(w->what, sizeof w->what, "%s sandbox %s", doing, id);
    return err->status;
}

int daytona_api_wait_started_quiet(struct daytona_state *st, sbx_call *call, const char *id,
                                   json_object **out, struct daytona_wait *w)
{
    if (out)
        *out = NULL;
    w->what[0] = '\0';
    int64_t end = sbxs_now_ms() + st->cfg.start_timeout_ms;
    int64_t wait = 50;
    int started_once = 0;
    char last[64] = "?";
    for (;;) {
        json_object *doc = NULL;
        sbxp_http_error err;
        int rc = daytona_api_get(st, call, id, &doc, &err);
        if (rc == SBX_E_NOT_FOUND)
            return sbxp_http_fail(&w->err, SBX_E_NOT_FOUND, "sandbox %s no longer exists", id);
        if (rc != SBX_OK)
            return wait_fail_http(w, &err, "looking up", id, NULL);
        const char *s = sbxp_json_str(doc, "state");
        snprintf(last, sizeof last, "%s", s ? s : "?");
        if (s && !strcmp(s, "started")) {
            if (out)
                *out = doc;
            else
                json_object_put(doc);
            return SBX_OK;
        }
        if (s && (!strcmp(s, "stopped") || !strcmp(s, "paused") || !strcmp(s, "archived")) &&
            !started_once) {
            started_once = 1;
            rc = daytona_api_start(st, call, id, &err);
            if (rc != SBX_OK && rc != SBX_E_EXISTS) {
                json_object_put(doc);
                if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
                    return sbxp_http_fail(&w->err, SBX_E_NOT_FOUND,
                                          "sandbox %s no longer exists", id);
                return wait_fail_http(w, &err, "starting", id, last);
            }
        } else if (!s || (!transitional(s) && !started_once)) {
            const char *why = sbxp_json_str(doc, "errorReason");
            rc = sbxp_http_fail(&w->err, SBX_E_UNAVAILABLE, "sandbox %s is %s%s%s", id, last,
                                why ? ": " : "", why ? why : "");
            json_object_put(doc);
            return rc;
        }
        json_object_put(doc);
        int64_t left = end - sbxs_now_ms();
        if (left <= 0)
            return sbxp_http_fail(&w->err, SBX_E_TIMEOUT,
                                  "sandbox %s is still %s after %lld ms (start_timeout_ms)", id,
                                  last, (long long)st->cfg.start_timeout_ms);
        if (nap(st, call, wait < left ? wait : left) != SBX_OK)
            return sbxp_http_fail(&w->err, SBX_E_CANCELLED, "cancelled while sandbox %s was %s",
                                  id, last);
        if (wait < 1000)
            wait *= 2;
    }
}

int daytona_wait_report(struct daytona_state *st, sbx_call *call, struct daytona_wait *w)
{
    if (w->what[0])
        return daytona_report(st, call, &w->err, "%s", w->what);
    return daytona_error(st, call, w->err.status, DT ": %s", w->err.message);
}

int daytona_api_wait_started(struct daytona_state *st, sbx_call *call, const char *id,
                             json_object **out)
{
    struct daytona_wait w;
    int rc = daytona_api_wait_started_quiet(st, call, id, out, &w);
    return rc == SBX_OK ? SBX_OK : daytona_wait_report(st, call, &w);
}

int daytona_api_stop(struct daytona_state *st, sbx_call *call, const char *id,
                     sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "POST", "/sandbox/", id, "/stop", NULL, NULL, err);
}

int daytona_api_wait_stopped(struct daytona_state *st, sbx_call *call, const char *id,
                             struct daytona_wait *w)
{
    w->what[0] = '\0';
    int64_t end = sbxs_now_ms() + st->cfg.start_timeout_ms;
    int64_t wait = 50;
    int stopped_once = 0;
    char last[64] = "?";
    for (;;) {
        json_object *doc = NULL;
        sbxp_http_error err;
        int rc = daytona_api_get(st, call, id, &doc, &err);
        if (rc == SBX_E_NOT_FOUND)
            return sbxp_http_fail(&w->err, SBX_E_NOT_FOUND, "sandbox %s no longer exists", id);
        if (rc != SBX_OK)
            return wait_fail_http(w, &err, "looking up", id, NULL);
        const char *s = sbxp_json_str(doc, "state");
        snprintf(last, sizeof last, "%s", s ? s : "?");
        json_object_put(doc);
        /* Paused or archived keep the filesystem and run nothing, as
         * stopped does: what pause asks for. */
        if (!strcmp(last, "stopped") || !strcmp(last, "paused") || !strcmp(last, "archived"))
            return SBX_OK;
        if (!strcmp(last, "destroyed") || !strcmp(last, "destroying"))
            return sbxp_http_fail(&w->err, SBX_E_NOT_FOUND, "sandbox %s no longer exists", id);
        if (!strcmp(last, "started") && !stopped_once) {
            stopped_once = 1;
            rc = daytona_api_stop(st, call, id, &err);
            if (rc == SBX_E_NOT_FOUND && err.http_status == 404)
                return sbxp_http_fail(&w->err, SBX_E_NOT_FOUND, "sandbox %s no longer exists",
                                      id);
            if (rc != SBX_OK)
                return wait_fail_http(w, &err, "stopping", id, last);
        } else if (!transitional(last) && strcmp(last, "started") != 0) {
            return sbxp_http_fail(&w->err, SBX_E_UNAVAILABLE, "sandbox %s is %s: cannot stop it",
                                  id, last);
        }
        int64_t left = end - sbxs_now_ms();
        if (left <= 0)
            return sbxp_http_fail(&w->err, SBX_E_TIMEOUT,
                                  "sandbox %s is still %s after %lld ms (start_timeout_ms)", id,
                                  last, (long long)st->cfg.start_timeout_ms);
        if (nap(st, call, wait < left ? wait : left) != SBX_OK)
            return sbxp_http_fail(&w->err, SBX_E_CANCELLED, "cancelled while sandbox %s was %s",
                                  id, last);
        if (wait < 1000)
            wait *= 2;
    }
}

int daytona_api_wait_gone(struct daytona_state *st, sbx_call *call, const char *id)
{
    int64_t end = sbxs_now_ms() + st->cfg.start_timeout_ms;
    int64_t wait = 50;
    for (;;) {
        json_object *doc = NULL;
        sbxp_http_error err;
        int rc = daytona_api_get(st, call, id, &doc, &err);
        if (rc == SBX_E_NOT_FOUND)
            return SBX_OK;
        if (rc != SBX_OK)
            return daytona_report(st, call, &err, "waiting for sandbox %s to go", id);
        const char *s = sbxp_json_str(doc, "state");
        int gone = s && !strcmp(s, "destroyed");
        char last[64];
        snprintf(last, sizeof last, "%s", s ? s : "?");
        json_object_put(doc);
        if (gone)
            return SBX_OK;
        int64_t left = end - sbxs_now_ms();
        if (left <= 0)
            return daytona_error(st, call, SBX_E_TIMEOUT,
                                 DT ": sandbox %s is still %s %lld ms after its deletion", id, last,
                                 (long long)st->cfg.start_timeout_ms);
        if (nap(st, call, wait < left ? wait : left) != SBX_OK)
            return daytona_error(st, call, SBX_E_CANCELLED, DT ": cancelled while deleting %s", id);
        if (wait < 1000)
            wait *= 2;
    }
}
