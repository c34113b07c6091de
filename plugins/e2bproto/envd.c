/* envd.c - reaching envd: routing, credentials, unary RPCs, and telling a
 * vanished sandbox from a failing one. See e2b_core.h. */
#include "clock.h"
#include "e2b_core.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int e2b_envd_setup(sbx_sandbox *sb, sbx_call *call, json_object *sandbox)
{
    struct e2b_state *st = sb->st;
    const char *domain = sbxp_json_str(sandbox, "domain");
    if (!domain || !*domain)
        domain = st->cfg.domain;
    snprintf(sb->domain, sizeof sb->domain, "%s", domain);
    const char *token = sbxp_json_str(sandbox, "envdAccessToken");
    if (token && *token &&
        snprintf(sb->token, sizeof sb->token, "X-Access-Token: %s", token) >=
            (int)sizeof sb->token)
        return e2b_error(st, call, SBX_E_PROTOCOL, "%s: envd access token too long",
                         st->cfg.provider);
    /* envd's guest user travels as HTTP basic auth with an empty password. */
    char userpass[128];
    if (snprintf(userpass, sizeof userpass, "%s:", st->cfg.user) >= (int)sizeof userpass)
        return e2b_error(st, call, SBX_E_CONFIG, "%s: user name too long", st->cfg.provider);
    char b64[176];
    if (sbxp_b64_len(strlen(userpass)) > sizeof b64)
        return e2b_error(st, call, SBX_E_CONFIG, "%s: user name too long", st->cfg.provider);
    sbxp_b64_encode(userpass, strlen(userpass), b64);
    snprintf(sb->auth, sizeof sb->auth, "Authorization: Basic %s", b64);

    switch (st->cfg.route) {
    case E2B_ROUTE_HEADERS:
        sb->envd = st->envd;
        snprintf(sb->route1, sizeof sb->route1, "E2b-Sandbox-Id: %s", sb->id);
        snprintf(sb->route2, sizeof sb->route2, "E2b-Sandbox-Port: %d", E2B_ENVD_PORT);
        return SBX_OK;
    case E2B_ROUTE_PROXY:
        /* CubeProxy routes by Host only: connect to the proxy, name the
         * sandbox in Host. */
        sb->envd = st->envd;
        if (snprintf(sb->route1, sizeof sb->route1, "Host: %d-%s.%s", E2B_ENVD_PORT, sb->id,
                     domain) >= (int)sizeof sb->route1)
            return e2b_error(st, call, SBX_E_CONFIG, "%s: sandbox domain too long",
                             st->cfg.provider);
        return SBX_OK;
    default: {
        char url[512];
        if (snprintf(url, sizeof url, "%s://%d-%s.%s", st->cfg.envd_https ? "https" : "http",
                     E2B_ENVD_PORT, sb->id, domain) >= (int)sizeof url)
            return e2b_error(st, call, SBX_E_CONFIG, "%s: sandbox domain too long",
                             st->cfg.provider);
        sbxp_http_error err;
        int rc = sbxp_http_new(url, &sb->envd, &err);
        if (rc != SBX_OK)
            return e2b_error(st, call, rc, "%s: envd address: %s", st->cfg.provider,
                             err.message);
        sb->owns_envd = 1;
        return SBX_OK;
    }
    }
}

void e2b_envd_headers(sbx_sandbox *sb, struct e2b_headers *hs)
{
    if (sb->route1[0])
        e2b_headers_add(hs, sb->route1);
    if (sb->route2[0])
        e2b_headers_add(hs, sb->route2);
    if (sb->token[0])
        e2b_headers_add(hs, sb->token);
    e2b_headers_add(hs, sb->auth);
}

int e2b_envd_resume(sbx_sandbox *sb, sbx_call *call, const sbxp_http_error *err)
{
    struct e2b_state *st = sb->st;
    if (err->from_callback || err->http_status != st->cfg.missing_http)
        return SBX_E_UNAVAILABLE;
    json_object *doc = NULL;
    sbxp_http_error e2;
    int rc = e2b_api_get(st, call, sb->id, &doc, &e2);
    const char *state = rc == SBX_OK ? sbxp_json_str(doc, "state") : NULL;
    int paused = state && !strcmp(state, "paused");
    json_object_put(doc);
    if (!paused)
        return SBX_E_UNAVAILABLE;
    /* connect resumes it (openapi.yml: "If the sandbox is paused, it will
     * be resumed"; Cube: /resume) and sets the TTL. envd's access token is
     * the sandbox's own and outlives a pause, so the handle keeps its
     * headers. */
    rc = e2b_resume_quiet(sb, call, &e2);
    if (rc != SBX_OK) {
        st->host->log(st->host, SBX_LOG_WARN, "%s: resuming paused sandbox %s: %s",
                      st->cfg.provider, sb->id, e2.message);
        return rc;
    }
    st->host->log(st->host, SBX_LOG_INFO, "%s: sandbox %s was paused: resumed",
                  st->cfg.provider, sb->id);
    return SBX_OK;
}

int e2b_envd_unary(sbx_sandbox *sb, sbx_call *call, const char *rpc, json_object *body,
                   json_object **out, int idempotent, sbxp_http_error *err)
{
    struct e2b_state *st = sb->st;
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    int rc = e2b_wake(sb, call, err);
    if (rc != SBX_OK)
        return rc;
    struct e2b_headers hs = {{NULL}, 0};
    e2b_envd_headers(sb, &hs);
    rc = e2b_unary(sb->envd, hs.v, rpc, body, out, st->cfg.request_timeout_ms,
                       st->cfg.connect_timeout_ms, &c.c,
                       idempotent ? &st->cfg.retry : NULL, err);
    /* The proxy's answer: the call never reached envd, so it is repeated
     * once the sandbox runs again, idempotent or not. */
    if (rc != SBX_OK && e2b_envd_resume(sb, call, err) == SBX_OK)
        rc = e2b_unary(sb->envd, hs.v, rpc, body, out, st->cfg.request_timeout_ms,
                       st->cfg.connect_timeout_ms, &c.c,
                       idempotent ? &st->cfg.retry : NULL, err);
    return rc;
}

int e2b_envd_gone(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err)
{
    struct e2b_state *st = sb->st;
    /* E2B's proxy answers 502 for a sandbox it does not know, CubeProxy
     * 500; a connection that cannot be made at all may also mean it is
     * gone. Only the control plane can tell, so ask it. */
    if (err->from_callback || err->status == SBX_E_CANCELLED ||
        (err->http_status != st->cfg.missing_http && err->http_status != 404 &&
         !(err->http_status == 0 && err->status == SBX_E_UNAVAILABLE)))
        return err->status;
    json_object *doc = NULL;
    sbxp_http_error e2;
    int rc = e2b_api_get(st, call, sb->id, &doc, &e2);
    json_object_put(doc);
    if (rc == SBX_E_NOT_FOUND) {
        char keep[SBXP_HTTP_MSG_MAX];
        snprintf(keep, sizeof keep, "%s", err->message);
        sbxp_http_fail(err, SBX_E_NOT_FOUND, "sandbox %s no longer exists (%s)", sb->id,
                       keep);
    }
    return err->status;
}

int e2b_envd_report(sbx_sandbox *sb, sbx_call *call, sbxp_http_error *err,
                    const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    e2b_envd_gone(sb, call, err);
    return e2b_report(sb->st, call, err, "%s", what);
}

void e2b_keep_alive(sbx_sandbox *sb, sbx_call *call)
{
    struct e2b_state *st = sb->st;
    int64_t now = sbxs_now_ms();
    pthread_mutex_lock(&sb->lock);
    /* A paused sandbox gets its TTL from the resume that comes first. */
    int due = !sb->paused && now - sb->extended_ms > st->cfg.lifetime_s * 1000 / 2;
    if (due)
        sb->extended_ms = now; /* one thread extends; the others go on */
    pthread_mutex_unlock(&sb->lock);
    if (!due)
        return;
    sbxp_http_error err;
    if (e2b_api_set_timeout(st, call, sb->id, &err) != SBX_OK)
        st->host->log(st->host, SBX_LOG_WARN, "%s: extending the lifetime of %s: %s",
                      st->cfg.provider, sb->id, err.message);
}
