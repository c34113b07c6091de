/*
 * http_json.h - JSON requests and responses on top of http_client.h.
 *
 * Bodies are parsed incrementally with json-c as they arrive; a document is
 * bounded by SBXP_HTTP_JSON_MAX bytes so a misbehaving service cannot make a
 * provider allocate without limit.
 */
#ifndef SBXP_HTTP_JSON_H
#define SBXP_HTTP_JSON_H

#include "http_client.h"

#include <json-c/json.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Largest JSON response accepted, in bytes. */
#define SBXP_HTTP_JSON_MAX (8u * 1024u * 1024u)

/*
 * Run a request (set req->body/content_type yourself, or use
 * sbxp_http_json_body) and parse the response as one JSON document. *out
 * receives the document, owned by the caller (json_object_put), or NULL when
 * the body was empty. A body that is not JSON, or larger than the bound, is
 * SBX_E_PROTOCOL. *http_status (may be NULL) receives the status.
 */
int sbxp_http_json(sbxp_http *h, const struct sbxp_http_request *req,
                   json_object **out, long *http_status, sbxp_http_error *err);

/*
 * Serialize `body` (borrowed; NULL sends no body) as the request's JSON body
 * and run sbxp_http_json. The request struct is copied, not modified.
 */
int sbxp_http_json_body(sbxp_http *h, const struct sbxp_http_request *req,
                        json_object *body, json_object **out, long *http_status,
                        sbxp_http_error *err);

/*
 * Run a request whose response is a stream of JSON values (newline
 * delimited or simply concatenated, as Docker's progress streams) and call
 * fn for each value as it completes. The value is borrowed for the call.
 * fn returns 0 to continue or an sbx_status to stop with (its caller then
 * owns the message). Each value is bounded by SBXP_HTTP_JSON_MAX.
 */
int sbxp_http_json_each(sbxp_http *h, const struct sbxp_http_request *req,
                        int (*fn)(void *ctx, json_object *value), void *ctx,
                        sbxp_http_error *err);

/* Convenience getters: NULL/0/def when the member is absent or of another
 * type. Strings are borrowed from obj. */
const char *sbxp_json_str(json_object *obj, const char *key);
json_object *sbxp_json_obj(json_object *obj, const char *key);
int64_t sbxp_json_int(json_object *obj, const char *key, int64_t def);
int sbxp_json_bool(json_object *obj, const char *key, int def);

#ifdef __cplusplus
}
#endif

#endif /* SBXP_HTTP_JSON_H */
