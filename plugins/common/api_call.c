/* api_call.c - JSON calls to a control plane (see api_call.h). */
#include "api_call.h"

#include "call_cancel.h"

#include <stdio.h>
#include <stdlib.h>

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
