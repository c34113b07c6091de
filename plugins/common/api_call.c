/* api_call.c - JSON calls to a control plane (see api_call.h). */
#include "api_call.h"

#include "call_cancel.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sbxp_api_json(const struct sbxp_api *api, sbx_call *call, const char *method,
                  const char *path, json_object *body, json_object **out, int idempotent,
                  sbxp_http_error *err)
{
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, api->host, call);
    const char *headers[2] = {api->header, NULL};
    struct sbxp_http_request req = {.method = method,
                                   .path = path,
                                   .headers = headers,
                                   .timeout_ms = api->timeout_ms,
                                   .connect_timeout_ms = api->connect_timeout_ms,
                                   .cancel = &c.c};
    return sbxp_http_json_retry(api->http, &req, body, out, NULL, err,
                                idempotent ? api->retry : NULL);
}

int sbxp_api_sandbox(const struct sbxp_api *api, sbx_call *call, const char *method,
                     const char *prefix, const char *id, const char *suffix, json_object *body,
                     json_object **out, sbxp_http_error *err)
{
    if (out)
        *out = NULL;
    char path[256];
    int rc = sbxp_api_path(path, sizeof path, prefix, id, suffix, err);
    if (rc != SBX_OK)
        return rc;
    json_object *doc = NULL;
    rc = sbxp_api_json(api, call, method, path, body, out ? &doc : NULL, 1, err);
    if (!strcmp(method, "DELETE") && rc == SBX_E_NOT_FOUND)
        return SBX_OK;
    if (rc == SBX_OK && out && (!doc || !json_object_is_type(doc, json_type_object))) {
        json_object_put(doc);
        return sbxp_http_fail(err, SBX_E_PROTOCOL, "%s %s%s%s: not an object", method, prefix,
                              id, suffix);
    }
    if (out)
        *out = doc;
    return rc;
}

json_object *sbxp_api_owner_labels(const char *managed_key, const char *owner_key,
                                   const char *spec_key, const char *key_hash,
                                   const char *spec_hash, size_t len)
{
    json_object *l = json_object_new_object();
    if (!l)
        return NULL;
    json_object_object_add(l, managed_key, json_object_new_string("true"));
    json_object_object_add(l, owner_key,
                           len ? json_object_new_string_len(key_hash, (int)len)
                               : json_object_new_string(key_hash));
    if (spec_hash && (len ? strlen(spec_hash) >= len : *spec_hash != '\0'))
        json_object_object_add(l, spec_key,
                               len ? json_object_new_string_len(spec_hash, (int)len)
                                   : json_object_new_string(spec_hash));
    return l;
}

int sbxp_api_path(char *buf, size_t cap, const char *prefix, const char *id,
                  const char *suffix, sbxp_http_error *err)
{
    char *e = sbxp_http_escape(id);
    if (!e)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    int n = snprintf(buf, cap, "%s%s%s", prefix, e, suffix);
    free(e);
    if (n < 0 || (size_t)n >= cap)
        return sbxp_http_fail(err, SBX_E_INVALID, "sandbox id too long");
    return SBX_OK;
}
