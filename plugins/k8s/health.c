/*
 * health.c - the `k8s` provider's health op (ABI 1.2): the API server
 * reachable and accepting the credentials, agent-sandbox's CRDs installed
 * (the discovery documents of both groups list the resources this provider
 * uses), and an authenticated list of what it creates in its namespace (the
 * Role's list verb). Each request is sent once; the detail and the errors
 * name the API server's host and port, never a credential.
 */
#include "k8s.h"

#include <curl/curl.h>

#include <stdio.h>
#include <string.h>

#define SANDBOX_GV "agents.x-k8s.io/v1beta1"
#define CLAIM_GV "extensions.agents.x-k8s.io/v1beta1"

/* host:port of the API server, without scheme, user info or path. */
static void server_name(const char *url, char *buf, size_t cap)
{
    snprintf(buf, cap, "%s", "(unparsable api_url)");
    CURLU *u = curl_url();
    if (!u)
        return;
    char *h = NULL, *p = NULL;
    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &p, CURLU_DEFAULT_PORT) == CURLUE_OK)
        snprintf(buf, cap, "%.120s:%.8s", h, p);
    curl_free(h);
    curl_free(p);
    curl_url_cleanup(u);
}

/* A failed GET as the health op's error: unreachable, credentials refused,
 * forbidden, failing, or the CRD's group not served (404). */
static int fail(struct k8s_state *st, sbx_call *call, const char *server, const char *path,
                const char *gv, int rc, const sbxp_http_error *err)
{
    const char *creds = st->cfg.token_source ? st->cfg.token_source : "the credentials";
    long hs = err->http_status;
    if (rc == SBX_E_CANCELLED)
        return k8s_error(st, call, rc, "k8s: health check of the API server at %s cancelled",
                         server);
    if (hs == 401)
        return k8s_error(st, call, SBX_E_DENIED,
                         "k8s: the API server at %s refused %s (HTTP 401: expired, revoked or "
                         "for another cluster?)",
                         server, creds);
    if (hs == 403)
        return k8s_error(st, call, SBX_E_DENIED,
                         "k8s: the API server at %s: GET %s is forbidden for %s (HTTP 403; "
                         "see the Role in docs/providers/k8s.md)",
                         server, path, creds);
    if (hs == 404 && gv)
        return k8s_error(st, call, SBX_E_UNAVAILABLE,
                         "k8s: the API server at %s does not serve %s: agent-sandbox's CRDs "
                         "are not installed (GET /apis/%s answered 404)",
                         server, gv, gv);
    if (hs >= 500)
        return k8s_error(st, call, SBX_E_UNAVAILABLE,
                         "k8s: the API server at %s is failing (HTTP %ld): %s", server, hs,
                         err->message);
    if (hs == 0 && !err->from_callback && rc != SBX_E_PROTOCOL)
        return k8s_error(st, call, rc == SBX_E_TIMEOUT ? rc : SBX_E_UNAVAILABLE,
                         "k8s: cannot reach the API server at %s: %s", server, err->message);
    return k8s_error(st, call, rc, "k8s: the API server at %s: GET %s: %s", server, path,
                     err->message);
}

/* GET /apis/<gv>: its APIResourceList names every plural in want. */
static int check_group(struct k8s_state *st, sbx_call *call, const char *server,
                       const char *gv, const char *const *want)
{
    char path[128];
    snprintf(path, sizeof path, "/apis/%s", gv);
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = k8s_get_once(st, call, path, &doc, &err);
    if (rc != SBX_OK)
        return fail(st, call, server, path, gv, rc, &err);
    json_object *res = NULL;
    if (!json_object_object_get_ex(doc, "resources", &res) ||
        !json_object_is_type(res, json_type_array)) {
        json_object_put(doc);
        return k8s_error(st, call, SBX_E_PROTOCOL,
                         "k8s: the API server at %s answered GET %s without a resource list",
                         server, path);
    }
    for (size_t w = 0; want[w]; w++) {
        int found = 0;
        for (size_t i = 0; i < json_object_array_length(res) && !found; i++) {
            const char *name = sbxp_json_str(json_object_array_get_idx(res, i), "name");
            found = name && strcmp(name, want[w]) == 0;
        }
        if (!found) {
            json_object_put(doc);
            return k8s_error(st, call, SBX_E_UNAVAILABLE,
                             "k8s: the API server at %s serves %s but not %s: the CRD "
                             "%s.%.*s is not installed",
                             server, gv, want[w], want[w], (int)strcspn(gv, "/"), gv);
        }
    }
    json_object_put(doc);
    return SBX_OK;
}

int k8s_health(void *state, sbx_call *call, char detail[SBX_HEALTH_DETAIL_MAX])
{
    struct k8s_state *st = state;
    char server[160];
    server_name(st->cfg.api_url, server, sizeof server);
    static const char *const sandbox_res[] = {"sandboxes", NULL};
    static const char *const claim_res[] = {"sandboxclaims", NULL};
    static const char *const template_res[] = {"sandboxtemplates", NULL};
    int claim = st->cfg.kind == K8S_CLAIM;
    int rc = check_group(st, call, server, SANDBOX_GV, sandbox_res);
    if (rc == SBX_OK)
        rc = check_group(st, call, server, CLAIM_GV, claim ? claim_res : template_res);
    if (rc != SBX_OK)
        return rc;
    /* What this provider creates, in its namespace: the Role's list verb. */
    char path[512];
    k8s_path(st, st->cfg.kind, NULL, "limit=1", path, sizeof path);
    json_object *o = NULL;
    sbxp_http_error err;
    rc = k8s_get_once(st, call, path, &o, &err);
    if (rc != SBX_OK)
        return fail(st, call, server, path, NULL, rc, &err);
    json_object_put(o);
    snprintf(detail, SBX_HEALTH_DETAIL_MAX,
             "API server %.60s: %s sandboxes and %s %s served; %s listable in namespace "
             "%.40s",
             server, SANDBOX_GV, CLAIM_GV, claim ? "sandboxclaims" : "sandboxtemplates",
             claim ? "claims" : "sandboxes", st->cfg.ns);
    return SBX_OK;
}
