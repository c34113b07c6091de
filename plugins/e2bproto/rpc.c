/* rpc.c - unary Connect calls and request header lists. See e2bproto.h. */
#include "e2bproto.h"

#include <stdio.h>
#include <string.h>

void e2b_headers_add(struct e2b_headers *hs, const char *line)
{
    if (line && hs->n < E2B_HDR_MAX) {
        hs->v[hs->n++] = line;
        hs->v[hs->n] = NULL;
    }
}

void e2b_headers_add_all(struct e2b_headers *hs, const char *const *lines)
{
    for (size_t i = 0; lines && lines[i]; i++)
        e2b_headers_add(hs, lines[i]);
}

int e2b_unary(sbxp_http *h, const char *const *extra, const char *rpc,
              json_object *body, json_object **out, int64_t timeout_ms,
              int64_t connect_timeout_ms, const struct sbxp_http_cancel *cancel,
              const struct sbxp_http_retry *retry, sbxp_http_error *err)
{
    char path[160], deadline[64];
    if (snprintf(path, sizeof path, "/%s", rpc) >= (int)sizeof path)
        return sbxp_http_fail(err, SBX_E_INTERNAL, "RPC name too long");
    struct e2b_headers hs = {{NULL}, 0};
    e2b_headers_add(&hs, "Connect-Protocol-Version: 1");
    if (timeout_ms > 0) {
        snprintf(deadline, sizeof deadline, "Connect-Timeout-Ms: %lld",
                 (long long)timeout_ms);
        e2b_headers_add(&hs, deadline);
    }
    e2b_headers_add_all(&hs, extra);
    struct sbxp_http_request req;
    memset(&req, 0, sizeof req);
    req.method = "POST";
    req.path = path;
    req.headers = hs.v;
    req.timeout_ms = timeout_ms;
    req.connect_timeout_ms = connect_timeout_ms;
    req.cancel = cancel;
    json_object *empty = NULL;
    if (!body)
        body = empty = json_object_new_object();
    int rc = sbxp_http_json_retry(h, &req, body, out, NULL, err, retry);
    json_object_put(empty);
    return rc;
}
