/* api_health.c - a remote provider's health check (see api_health.h). */
#include "api_health.h"

#include "call_error.h"

#include <stdio.h>
#include <string.h>

/* scheme://host[:port] of the endpoint, without user info or path. */
static void endpoint_origin(const char *url, char *buf, size_t cap)
{
    const char *s = strstr(url, "://");
    const char *h = s ? s + 3 : url;
    size_t hl = strcspn(h, "/?#");
    const char *at = memchr(h, '@', hl);
    if (at) {
        hl -= (size_t)(at + 1 - h);
        h = at + 1;
    }
    int sl = s ? (int)(s - url) : 0;
    snprintf(buf, cap, "%.*s%s%.*s", sl, url, s ? "://" : "", (int)hl, h);
}

int sbxp_api_health(const struct sbxp_api *api, sbx_call *call,
                    const struct sbxp_health_probe *probe, char detail[SBX_HEALTH_DETAIL_MAX])
{
    char origin[160];
    endpoint_origin(sbxp_http_endpoint(api->http), origin, sizeof origin);
    struct sbxp_api once = *api;
    once.retry = NULL;
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = sbxp_api_json(&once, call, "GET", probe->path, NULL, &doc, 0, &err);
    const struct sbx_host *host = api->host;
    if (rc != SBX_OK) {
        long hs = err.http_status;
        if (hs == 401 || hs == 403) {
            if (!api->header)
                return sbxp_call_error(host, call, SBX_E_DENIED,
                                       "%s: the %s at %s refused the request (HTTP %ld): no "
                                       "API key is set: set %s",
                                       probe->who, probe->service, origin, hs, probe->key_var);
            return sbxp_call_error(host, call, SBX_E_DENIED,
                                   "%s: the %s at %s: the API key was refused (HTTP %ld): set "
                                   "%s to a valid key",
                                   probe->who, probe->service, origin, hs, probe->key_var);
        }
        if (hs >= 500)
            return sbxp_call_error(host, call, SBX_E_UNAVAILABLE,
                                   "%s: the %s at %s is failing (HTTP %ld): %s", probe->who,
                                   probe->service, origin, hs, err.message);
        if (hs == 0 && !err.from_callback && rc != SBX_E_CANCELLED && rc != SBX_E_PROTOCOL)
            return sbxp_call_error(host, call, rc == SBX_E_TIMEOUT ? rc : SBX_E_UNAVAILABLE,
                                   "%s: cannot reach the %s at %s: %s", probe->who,
                                   probe->service, origin, err.message);
        return sbxp_call_error(host, call, rc, "%s: the %s at %s: %s", probe->who,
                               probe->service, origin, err.message);
    }
    json_object *items = doc;
    if (!probe->want_array && doc && json_object_is_type(doc, json_type_object))
        json_object_object_get_ex(doc, "items", &items);
    if (!doc || (probe->want_array ? !json_object_is_type(doc, json_type_array)
                                   : !json_object_is_type(doc, json_type_object))) {
        json_object_put(doc);
        return sbxp_call_error(host, call, SBX_E_PROTOCOL,
                               "%s: the %s at %s answered GET %s with %s", probe->who,
                               probe->service, origin, probe->path,
                               probe->want_array ? "something other than a JSON array"
                                                 : "something other than a JSON object");
    }
    if (items && json_object_is_type(items, json_type_array))
        snprintf(detail, SBX_HEALTH_DETAIL_MAX, "%s at %.150s: GET %.40s answered (%zu listed)",
                 probe->service, origin, probe->path, json_object_array_length(items));
    else
        snprintf(detail, SBX_HEALTH_DETAIL_MAX, "%s at %.150s: GET %.40s answered",
                 probe->service, origin, probe->path);
    json_object_put(doc);
    return SBX_OK;
}
