/* api.c - lifecycle server calls (sandbox-lifecycle.yml). See osb.h. */
#include "osb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "/sandboxes/<escaped id><suffix>" into buf. */
#define sandbox_path(buf, cap, id, suffix, err) \
    sbxp_api_path((buf), (cap), "/sandboxes/", (id), (suffix), (err))

const char *osb_state_of(json_object *sandbox)
{
    const char *s = sbxp_json_str(sbxp_json_obj(sandbox, "status"), "state");
    return s ? s : "";
}

int osb_api_create(struct osb_state *st, sbx_call *call, const char *key_hash,
                   const char *spec_hash, const struct sbx_egress_policy *egress,
                   const uint16_t *ports, json_object **out, sbxp_http_error *err)
{
    const struct osb_conf *c = &st->cfg;
    json_object *body = json_object_new_object();
    json_object *meta = sbxp_api_owner_labels(OSB_META_MANAGED, OSB_META_OWNER, OSB_META_SPEC,
                                              key_hash, spec_hash, OSB_HASH_LABEL);
    json_object *img = json_object_new_object();
    json_object *ep = json_object_new_array();
    json_object *rl = json_object_new_object();
    if (!body || !meta || !img || !ep || !rl) {
        json_object_put(body);
        json_object_put(meta);
        json_object_put(img);
        json_object_put(ep);
        json_object_put(rl);
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    }
    json_object_object_add(img, "uri", json_object_new_string(c->image));
    json_object_object_add(body, "image", img);
    for (size_t i = 0; c->entrypoint[i]; i++)
        json_object_array_add(ep, json_object_new_string(c->entrypoint[i]));
    json_object_object_add(body, "entrypoint", ep);
    json_object_object_add(rl, "cpu", json_object_new_string(c->cpu));
    json_object_object_add(rl, "memory", json_object_new_string(c->memory));
    json_object_object_add(body, "resourceLimits", rl);
    json_object_object_add(body, "timeout", json_object_new_int64(c->lifetime_s));
    /* Deny by default unless the configuration opens the network; a
     * limited-network spec brings its own allowlist. */
    static const struct sbx_egress_policy closed = {sizeof closed, SBX_EGRESS_DENY, NULL};
    const struct sbx_egress_policy *pol = egress ? egress : c->internet ? NULL : &closed;
    if (pol) {
        json_object_object_add(body, "networkPolicy", osb_egress_policy_json(pol));
        osb_egress_meta(meta, pol);
    }
    osb_ports_meta(meta, ports);
    json_object_object_add(body, "metadata", meta);
    /* Not idempotent: a lost answer is found again by the owner lookup
     * that create runs, never by posting twice. */
    int rc = sbxp_api_json(&st->ctl, call, "POST", "/sandboxes", body, out, 0, err);
    json_object_put(body);
    return rc;
}

int osb_api_find(struct osb_state *st, sbx_call *call, const char *key_hash, json_object **out,
                 sbxp_http_error *err)
{
    char kv[128], path[512];
    snprintf(kv, sizeof kv, "%s=%.*s&%s=true", OSB_META_OWNER, OSB_HASH_LABEL, key_hash,
             OSB_META_MANAGED);
    char *e = sbxp_http_escape(kv);
    if (!e)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object *all = json_object_new_array();
    int rc = all ? SBX_OK : sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    for (int page = 1; rc == SBX_OK && page <= 50; page++) {
        snprintf(path, sizeof path, "/sandboxes?metadata=%s&page=%d&pageSize=50", e, page);
        json_object *doc = NULL;
        rc = sbxp_api_json(&st->ctl, call, "GET", path, NULL, &doc, 1, err);
        if (rc != SBX_OK)
            break;
        json_object *items = NULL;
        if (!doc || !json_object_object_get_ex(doc, "items", &items) ||
            !json_object_is_type(items, json_type_array)) {
            json_object_put(doc);
            rc = sbxp_http_fail(err, SBX_E_PROTOCOL, "GET /sandboxes: no items array");
            break;
        }
        for (size_t i = 0; i < json_object_array_length(items); i++)
            json_object_array_add(all, json_object_get(json_object_array_get_idx(items, i)));
        int more = sbxp_json_bool(sbxp_json_obj(doc, "pagination"), "hasNextPage", 0);
        json_object_put(doc);
        if (!more)
            break;
    }
    free(e);
    if (rc != SBX_OK) {
        json_object_put(all);
        return rc;
    }
    *out = all;
    return SBX_OK;
}

int osb_api_get(struct osb_state *st, sbx_call *call, const char *id, json_object **out,
                sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "GET", "/sandboxes/", id, "", NULL, out, err);
}

int osb_api_delete(struct osb_state *st, sbx_call *call, const char *id, sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "DELETE", "/sandboxes/", id, "", NULL, NULL, err);
}

int osb_api_action(struct osb_state *st, sbx_call *call, const char *id, const char *action,
                   sbxp_http_error *err)
{
    char suffix[32];
    snprintf(suffix, sizeof suffix, "/%s", action);
    return sbxp_api_sandbox(&st->ctl, call, "POST", "/sandboxes/", id, suffix, NULL, NULL, err);
}

int osb_api_renew(struct osb_state *st, sbx_call *call, const char *id, sbxp_http_error *err)
{
    time_t at = time(NULL) + (time_t)st->cfg.lifetime_s;
    struct tm tm;
    gmtime_r(&at, &tm);
    char iso[40];
    strftime(iso, sizeof iso, "%Y-%m-%dT%H:%M:%SZ", &tm);
    json_object *body = json_object_new_object();
    if (!body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "expiresAt", json_object_new_string(iso));
    int rc = sbxp_api_sandbox(&st->ctl, call, "POST", "/sandboxes/", id, "/renew-expiration",
                              body, NULL, err);
    json_object_put(body);
    return rc;
}

int osb_api_metadata(struct osb_state *st, sbx_call *call, const char *id, json_object *patch,
                     sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "PATCH", "/sandboxes/", id, "/metadata", patch, NULL,
                            err);
}

int osb_api_endpoint(struct osb_state *st, sbx_call *call, const char *id, int port,
                     json_object **out, sbxp_http_error *err)
{
    char path[256], suffix[64];
    snprintf(suffix, sizeof suffix, "/endpoints/%d%s", port,
             st->cfg.use_server_proxy ? "?use_server_proxy=true" : "");
    int rc = sandbox_path(path, sizeof path, id, suffix, err);
    if (rc != SBX_OK)
        return rc;
    json_object *doc = NULL;
    rc = sbxp_api_json(&st->ctl, call, "GET", path, NULL, &doc, 1, err);
    if (rc == SBX_OK && !sbxp_json_str(doc, "endpoint")) {
        json_object_put(doc);
        return sbxp_http_fail(err, SBX_E_PROTOCOL, "GET %s: no endpoint in the answer", path);
    }
    *out = doc;
    return rc;
}
