/* api.c - E2B control plane calls (openapi.yml). See e2b_core.h. */
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GET path (retried: a read), whose answer must be a JSON array; *out
 * the caller's. what names the route in the error. */
static int get_array(struct e2b_state *st, sbx_call *call, const char *path, const char *what,
                     json_object **out, sbxp_http_error *err)
{
    json_object *doc = NULL;
    int rc = sbxp_api_json(&st->ctl, call, "GET", path, NULL, &doc, 1, err);
    if (rc != SBX_OK)
        return rc;
    if (!doc || !json_object_is_type(doc, json_type_array)) {
        json_object_put(doc);
        return sbxp_http_fail(err, SBX_E_PROTOCOL, "GET %s: the answer is not an array", what);
    }
    *out = doc;
    return SBX_OK;
}

int e2b_api_create(struct e2b_state *st, sbx_call *call, const char *template_id,
                   const char *key_hash, const char *spec_hash, const char *ports,
                   json_object **out, sbxp_http_error *err)
{
    json_object *body = json_object_new_object();
    json_object *meta = sbxp_api_owner_labels(E2B_META_MANAGED, E2B_META_OWNER, E2B_META_SPEC,
                                              key_hash, spec_hash, 0);
    if (!body || !meta) {
        json_object_put(body);
        json_object_put(meta);
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    }
    json_object_object_add(body, "templateID", json_object_new_string(template_id ? template_id : st->cfg.template_id));
    json_object_object_add(body, "timeout", json_object_new_int64(st->cfg.lifetime_s));
    json_object_object_add(body, "autoPause", json_object_new_boolean(st->cfg.auto_pause));
    json_object_object_add(body, "allow_internet_access",
                           json_object_new_boolean(st->cfg.internet));
    json_object_object_add(body, "secure", json_object_new_boolean(1));
    if (ports && *ports)
        json_object_object_add(meta, E2B_META_PORTS, json_object_new_string(ports));
    json_object_object_add(body, "metadata", meta);
    /* Not idempotent: a lost answer is recovered by the find that create
     * runs afterwards, never by posting again. */
    int rc = sbxp_api_json(&st->ctl, call, "POST", "/sandboxes", body, out, 0, err);
    json_object_put(body);
    return rc;
}

int e2b_api_find(struct e2b_state *st, sbx_call *call, const char *key_hash,
                 json_object **out, sbxp_http_error *err)
{
    char kv[128], path[512];
    snprintf(kv, sizeof kv, "%s=%s", E2B_META_OWNER, key_hash);
    char *e = sbxp_http_escape(kv);
    if (!e)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    snprintf(path, sizeof path, "/v2/sandboxes?metadata=%s&state=running,paused", e);
    free(e);
    return get_array(st, call, path, "/v2/sandboxes", out, err);
}

int e2b_api_get(struct e2b_state *st, sbx_call *call, const char *id, json_object **out,
                sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "GET", "/sandboxes/", id, "", NULL, out, err);
}

/* POST {"timeout": lifetime} to /sandboxes/<id><suffix>. */
static int post_lifetime(struct e2b_state *st, sbx_call *call, const char *id,
                         const char *suffix, json_object **out, sbxp_http_error *err)
{
    json_object *body = json_object_new_object();
    if (!body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "timeout", json_object_new_int64(st->cfg.lifetime_s));
    int rc = sbxp_api_sandbox(&st->ctl, call, "POST", "/sandboxes/", id, suffix, body, out, err);
    json_object_put(body);
    return rc;
}

int e2b_api_connect(struct e2b_state *st, sbx_call *call, const char *id,
                    json_object **out, sbxp_http_error *err)
{
    return post_lifetime(st, call, id, "/connect", out, err);
}

int e2b_api_set_timeout(struct e2b_state *st, sbx_call *call, const char *id,
                        sbxp_http_error *err)
{
    return post_lifetime(st, call, id, "/timeout", NULL, err);
}

int e2b_api_pause(struct e2b_state *st, sbx_call *call, const char *id,
                  sbxp_http_error *err)
{
    struct sbxp_api api = st->ctl;
    api.timeout_ms = st->cfg.pause_timeout_ms;
    /* SandboxPauseRequest's memory defaults to true: the memory snapshot
     * that keeps processes; said explicitly so no default can change it.
     * Cube's route takes no body. */
    json_object *body = NULL;
    if (!st->cfg.resume_endpoint) {
        body = json_object_new_object();
        if (!body)
            return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
        json_object_object_add(body, "memory", json_object_new_boolean(1));
    }
    int rc = sbxp_api_sandbox(&api, call, "POST", "/sandboxes/", id, "/pause", body, NULL, err);
    json_object_put(body);
    return rc;
}

int e2b_api_resume(struct e2b_state *st, sbx_call *call, const char *id,
                   json_object **out, sbxp_http_error *err)
{
    struct sbxp_api api = st->ctl;
    api.timeout_ms = st->cfg.pause_timeout_ms;
    if (out)
        *out = NULL;
    json_object *body = json_object_new_object();
    if (!body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "timeout", json_object_new_int64(st->cfg.lifetime_s));
    json_object *doc = NULL;
    int rc = sbxp_api_sandbox(&api, call, "POST", "/sandboxes/", id,
                              st->cfg.resume_endpoint ? "/resume" : "/connect", body, &doc,
                              err);
    json_object_put(body);
    /* Cube: 409 "Sandbox is already running" (cubesandbox openapi.yml
     * /resume); set the TTL as connect would. */
    if (rc != SBX_OK && st->cfg.resume_endpoint && err->http_status == 409)
        rc = e2b_api_set_timeout(st, call, id, err);
    if (rc == SBX_OK && out)
        *out = doc;
    else
        json_object_put(doc);
    return rc;
}

int e2b_api_delete(struct e2b_state *st, sbx_call *call, const char *id,
                   sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "DELETE", "/sandboxes/", id, "", NULL, NULL, err);
}

int e2b_api_snapshot(struct e2b_state *st, sbx_call *call, const char *id, const char *name,
                     json_object **out, sbxp_http_error *err)
{
    json_object *body = json_object_new_object();
    if (!body)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    json_object_object_add(body, "name", json_object_new_string(name));
    /* Within the pause timeout: the service pauses the sandbox for the
     * snapshot. Repeating it is safe: the same name gives the same
     * template a new build (SandboxSnapshotRequest.name). */
    struct sbxp_api api = st->ctl;
    api.timeout_ms = st->cfg.pause_timeout_ms;
    int rc = sbxp_api_sandbox(&api, call, "POST", "/sandboxes/", id, "/snapshots", body, out,
                              err);
    json_object_put(body);
    return rc;
}

int e2b_api_snapshots_named(struct e2b_state *st, sbx_call *call, const char *name,
                            json_object **out, sbxp_http_error *err)
{
    char *e = sbxp_http_escape(name);
    if (!e)
        return sbxp_http_fail(err, SBX_E_NOMEM, "out of memory");
    char path[512];
    snprintf(path, sizeof path, "/snapshots?name=%s", e);
    free(e);
    return get_array(st, call, path, "/snapshots", out, err);
}

int e2b_api_template_delete(struct e2b_state *st, sbx_call *call, const char *template_id,
                            sbxp_http_error *err)
{
    return sbxp_api_sandbox(&st->ctl, call, "DELETE", "/templates/", template_id, "", NULL,
                            NULL, err);
}
