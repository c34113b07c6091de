/*
 * http_json.c - incremental JSON parsing of HTTP response bodies.
 */
#include "http_json.h"

#include <ctype.h>
#include <string.h>

struct json_acc {
    json_tokener *tok;
    json_object *doc;   /* completed document (single mode) */
    size_t bytes;       /* bytes of the current value so far */
    int pending;        /* non-space bytes fed since the last value */
    int bad;            /* SBX_E_PROTOCOL reason: 1 syntax, 2 too large, 3 trailing */
    int (*fn)(void *ctx, json_object *value); /* stream mode when set */
    void *ctx;
    int fn_status;
};

static int only_space(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)p[i]))
            return 0;
    return 1;
}

static int feed(void *ud, const void *buf, size_t len)
{
    struct json_acc *a = ud;
    const char *p = buf;
    while (len > 0) {
        if (!a->pending && only_space(p, len))
            return 0;
        if (!a->fn && a->doc) {
            a->bad = 3; /* something after the one document */
            return SBX_E_PROTOCOL;
        }
        size_t chunk = len > (1u << 20) ? (1u << 20) : len;
        if (a->bytes + chunk > SBXP_HTTP_JSON_MAX) {
            a->bad = 2;
            return SBX_E_PROTOCOL;
        }
        a->pending = 1;
        json_object *v = json_tokener_parse_ex(a->tok, p, (int)chunk);
        enum json_tokener_error e = json_tokener_get_error(a->tok);
        size_t used = json_tokener_get_parse_end(a->tok);
        if (e == json_tokener_continue) {
            a->bytes += chunk;
            p += chunk;
            len -= chunk;
            continue;
        }
        if (e != json_tokener_success) {
            a->bad = 1;
            return SBX_E_PROTOCOL;
        }
        if (used > chunk)
            used = chunk;
        a->bytes = 0;
        a->pending = 0;
        json_tokener_reset(a->tok);
        if (a->fn) {
            int rc = a->fn(a->ctx, v);
            json_object_put(v);
            if (rc != 0) {
                a->fn_status = rc;
                return rc;
            }
        } else {
            a->doc = v;
        }
        p += used;
        len -= used;
    }
    return 0;
}

/* At the end of the body: a value still open means the body was cut. Some
 * scalars (numbers) only complete at end of input. */
static int finish(struct json_acc *a)
{
    if (!a->pending)
        return 0;
    json_object *v = json_tokener_parse_ex(a->tok, "", 1);
    if (json_tokener_get_error(a->tok) != json_tokener_success) {
        a->bad = 1;
        return SBX_E_PROTOCOL;
    }
    a->pending = 0;
    if (a->fn) {
        int rc = a->fn(a->ctx, v);
        json_object_put(v);
        return rc;
    }
    if (a->doc) {
        json_object_put(v);
        a->bad = 3;
        return SBX_E_PROTOCOL;
    }
    a->doc = v;
    return 0;
}

static int protocol_error(const struct sbxp_http_request *req, int bad,
                          sbxp_http_error *err)
{
    size_t plen = strcspn(req->path, "?");
    const char *why = bad == 2   ? "larger than the accepted bound"
                      : bad == 3 ? "followed by unexpected data"
                                 : "not valid JSON";
    if (err)
        err->from_callback = 0;
    return sbxp_http_fail(err, SBX_E_PROTOCOL, "%s %.*s: response body is %s",
                          req->method, (int)plen, req->path, why);
}

static int run(sbxp_http *h, const struct sbxp_http_request *req,
               struct json_acc *a, long *http_status, sbxp_http_error *err)
{
    a->tok = json_tokener_new_ex(JSON_TOKENER_DEFAULT_DEPTH);
    if (!a->tok)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    struct sbx_sink sink = SBX_SINK_INIT(a, feed);
    int rc = sbxp_http_request(h, req, &sink, http_status, err);
    if (rc == SBX_OK)
        rc = finish(a);
    json_tokener_free(a->tok);
    a->tok = NULL;
    if (a->bad)
        return protocol_error(req, a->bad, err);
    if (rc != SBX_OK && a->fn_status && rc == a->fn_status && err)
        err->from_callback = 1;
    return rc;
}

int sbxp_http_json(sbxp_http *h, const struct sbxp_http_request *req,
                   json_object **out, long *http_status, sbxp_http_error *err)
{
    struct json_acc a = {0};
    *out = NULL;
    int rc = run(h, req, &a, http_status, err);
    if (rc != SBX_OK) {
        json_object_put(a.doc);
        return rc;
    }
    *out = a.doc;
    return SBX_OK;
}

int sbxp_http_json_body(sbxp_http *h, const struct sbxp_http_request *req,
                        json_object *body, json_object **out, long *http_status,
                        sbxp_http_error *err)
{
    struct sbxp_http_request r = *req;
    if (body) {
        size_t len = 0;
        const char *text =
            json_object_to_json_string_length(body, JSON_C_TO_STRING_PLAIN, &len);
        if (!text)
            return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
        r.body = text;
        r.body_len = len;
        r.content_type = "application/json";
    }
    return sbxp_http_json(h, &r, out, http_status, err);
}

int sbxp_http_json_each(sbxp_http *h, const struct sbxp_http_request *req,
                        int (*fn)(void *ctx, json_object *value), void *ctx,
                        sbxp_http_error *err)
{
    struct json_acc a = {0};
    a.fn = fn;
    a.ctx = ctx;
    return run(h, req, &a, NULL, err);
}

const char *sbxp_json_str(json_object *obj, const char *key)
{
    json_object *v;
    if (!obj || !json_object_object_get_ex(obj, key, &v) ||
        !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

json_object *sbxp_json_obj(json_object *obj, const char *key)
{
    json_object *v;
    if (!obj || !json_object_object_get_ex(obj, key, &v) ||
        !json_object_is_type(v, json_type_object))
        return NULL;
    return v;
}

int64_t sbxp_json_int(json_object *obj, const char *key, int64_t def)
{
    json_object *v;
    if (!obj || !json_object_object_get_ex(obj, key, &v) ||
        !json_object_is_type(v, json_type_int))
        return def;
    return json_object_get_int64(v);
}

int sbxp_json_bool(json_object *obj, const char *key, int def)
{
    json_object *v;
    if (!obj || !json_object_object_get_ex(obj, key, &v) ||
        !json_object_is_type(v, json_type_boolean))
        return def;
    return json_object_get_boolean(v);
}
