/*
 * egress.c - SBX_CAP_EGRESS through the egress sidecar (egress-api.yaml):
 * GET /policy reads what it enforces, PATCH /policy merges allow rules in,
 * DELETE /policy removes rules by target. The default action can only be
 * chosen at create (networkPolicy): it is always deny here.
 *
 * The intended policy is recorded in the sandbox's metadata on the
 * lifecycle server (see osb.h), which the sandbox cannot change, while the
 * sidecar can be reached from inside. Every attach compares the two:
 * stale rules are removed, missing ones added, and a sidecar whose default
 * is no longer deny is refused. See osb.h.
 */
#include "osb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "pypi.org" or "*.pythonhosted.org": DNS names, lowercase. */
static int target_valid(const char *t)
{
    if (!strncmp(t, "*.", 2))
        t += 2;
    size_t n = strlen(t);
    if (n == 0 || n > 63 || t[0] == '.' || t[0] == '-' || t[n - 1] == '.' || t[n - 1] == '-' ||
        strstr(t, ".."))
        return 0;
    for (const char *p = t; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'))
            return 0;
    return 1;
}

int osb_egress_check(struct osb_state *st, sbx_call *call, const struct sbx_egress_policy *p)
{
    if (p->size < offsetof(struct sbx_egress_policy, allow) + sizeof p->allow)
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: egress policy: size is not set");
    if (p->default_action != SBX_EGRESS_DENY)
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: egress policy: the default action must be deny");
    size_t n = 0;
    for (size_t i = 0; p->allow && p->allow[i]; i++, n++)
        if (!target_valid(p->allow[i]))
            return osb_error(st, call, SBX_E_INVALID,
                             "opensandbox: egress target '%s' is not a host name or *.domain "
                             "(lowercase, at most 63 characters)",
                             p->allow[i]);
    if (n > OSB_ALLOW_MAX)
        return osb_error(st, call, SBX_E_INVALID,
                         "opensandbox: egress policy: %zu targets, at most %d", n, OSB_ALLOW_MAX);
    return SBX_OK;
}

json_object *osb_egress_policy_json(const struct sbx_egress_policy *p)
{
    json_object *np = json_object_new_object();
    json_object *rules = json_object_new_array();
    json_object_object_add(np, "defaultAction", json_object_new_string("deny"));
    for (size_t i = 0; p->allow && p->allow[i]; i++) {
        json_object *r = json_object_new_object();
        json_object_object_add(r, "action", json_object_new_string("allow"));
        json_object_object_add(r, "target", json_object_new_string(p->allow[i]));
        json_object_array_add(rules, r);
    }
    json_object_object_add(np, "egress", rules);
    return np;
}

void osb_egress_meta(json_object *meta, const struct sbx_egress_policy *p)
{
    json_object_object_add(meta, OSB_META_EGRESS, json_object_new_string("deny"));
    for (size_t i = 0; p->allow && p->allow[i]; i++) {
        char key[64];
        const char *t = p->allow[i];
        int any = !strncmp(t, "*.", 2);
        snprintf(key, sizeof key, "%s%zu", any ? OSB_META_ALLOW_ANY : OSB_META_ALLOW, i);
        json_object_object_add(meta, key, json_object_new_string(any ? t + 2 : t));
    }
}

/* The targets the metadata records (malloc'd strings, n of them); 0 when
 * the sandbox has no recorded policy. */
static int intended(json_object *sandbox, char **out, size_t *n)
{
    json_object *meta = sbxp_json_obj(sandbox, "metadata");
    const char *e = sbxp_json_str(meta, OSB_META_EGRESS);
    *n = 0;
    if (!e || strcmp(e, "deny"))
        return 0;
    json_object_object_foreach(meta, k, v)
    {
        const char *val = json_object_get_string(v);
        if (*n >= OSB_ALLOW_MAX || !val)
            continue;
        if (!strncmp(k, OSB_META_ALLOW_ANY, strlen(OSB_META_ALLOW_ANY))) {
            size_t l = strlen(val) + 3;
            out[*n] = malloc(l);
            if (out[*n])
                snprintf(out[(*n)++], l, "*.%s", val);
        } else if (!strncmp(k, OSB_META_ALLOW, strlen(OSB_META_ALLOW))) {
            out[*n] = strdup(val);
            if (out[*n])
                (*n)++;
        }
    }
    return 1;
}

/* The sidecar of the handle, resolved on first use. */
static int sidecar(sbx_sandbox *sb, sbx_call *call)
{
    pthread_mutex_lock(&sb->lock);
    int have = sb->egress.http != NULL;
    pthread_mutex_unlock(&sb->lock);
    if (have)
        return SBX_OK;
    struct osb_service svc;
    int rc = osb_service_open(sb, call, OSB_EGRESS_PORT, &svc);
    if (rc != SBX_OK)
        return rc;
    pthread_mutex_lock(&sb->lock);
    if (!sb->egress.http) {
        sb->egress = svc;
        memset(&svc, 0, sizeof svc);
    }
    pthread_mutex_unlock(&sb->lock);
    osb_service_close(&svc);
    return SBX_OK;
}

/* GET /policy: *deny, and the rules (borrowed from *doc). */
static int read_policy(sbx_sandbox *sb, sbx_call *call, json_object **doc, int *deny,
                       json_object **rules)
{
    int rc = sidecar(sb, call);
    if (rc != SBX_OK)
        return rc;
    sbxp_http_error err;
    rc = osb_service_json(sb, call, &sb->egress, "GET", "/policy", NULL, doc, 1, &err);
    if (rc != SBX_OK)
        return osb_service_report(sb, call, &err, "reading the egress policy of %s", sb->id);
    json_object *pol = sbxp_json_obj(*doc, "policy");
    const char *def = sbxp_json_str(pol, "defaultAction");
    /* The sidecar's own default for an absent defaultAction is deny. */
    *deny = !def || !strcmp(def, "deny");
    *rules = NULL;
    if (pol && json_object_object_get_ex(pol, "egress", rules) &&
        !json_object_is_type(*rules, json_type_array))
        *rules = NULL;
    return SBX_OK;
}

static int listed(char *const *v, size_t n, const char *t)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], t))
            return 1;
    return 0;
}

/* Make the sidecar's rules exactly "allow want[]". *changes counts fixes. */
static int enforce(sbx_sandbox *sb, sbx_call *call, char *const *want, size_t nwant,
                   json_object *rules, int *changes)
{
    json_object *stale = json_object_new_array();
    json_object *missing = json_object_new_array();
    size_t nr = rules ? json_object_array_length(rules) : 0;
    for (size_t i = 0; i < nr; i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        const char *t = sbxp_json_str(r, "target"), *a = sbxp_json_str(r, "action");
        if (t && (!a || strcmp(a, "allow") || !listed(want, nwant, t)))
            json_object_array_add(stale, json_object_new_string(t));
    }
    for (size_t i = 0; i < nwant; i++) {
        int have = 0;
        for (size_t j = 0; j < nr && !have; j++) {
            json_object *r = json_object_array_get_idx(rules, j);
            const char *t = sbxp_json_str(r, "target"), *a = sbxp_json_str(r, "action");
            have = t && a && !strcmp(t, want[i]) && !strcmp(a, "allow");
        }
        if (!have) {
            json_object *r = json_object_new_object();
            json_object_object_add(r, "action", json_object_new_string("allow"));
            json_object_object_add(r, "target", json_object_new_string(want[i]));
            json_object_array_add(missing, r);
        }
    }
    int rc = SBX_OK;
    sbxp_http_error err;
    *changes = (int)(json_object_array_length(stale) + json_object_array_length(missing));
    if (json_object_array_length(stale) &&
        (rc = osb_service_json(sb, call, &sb->egress, "DELETE", "/policy", stale, NULL, 1, &err)))
        rc = osb_service_report(sb, call, &err, "removing stale egress rules of %s", sb->id);
    if (rc == SBX_OK && json_object_array_length(missing) &&
        (rc = osb_service_json(sb, call, &sb->egress, "PATCH", "/policy", missing, NULL, 1, &err)))
        rc = osb_service_report(sb, call, &err, "adding egress rules to %s", sb->id);
    json_object_put(stale);
    json_object_put(missing);
    return rc;
}

/* Read back and compare: the sidecar must now enforce exactly want[]. */
static int verify(sbx_sandbox *sb, sbx_call *call, char *const *want, size_t nwant)
{
    json_object *doc = NULL, *rules = NULL;
    int deny;
    int rc = read_policy(sb, call, &doc, &deny, &rules);
    if (rc != SBX_OK)
        return rc;
    size_t nr = rules ? json_object_array_length(rules) : 0;
    int ok = deny && nr == nwant;
    for (size_t i = 0; ok && i < nr; i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        const char *t = sbxp_json_str(r, "target"), *a = sbxp_json_str(r, "action");
        ok = t && a && !strcmp(a, "allow") && listed(want, nwant, t);
    }
    json_object_put(doc);
    if (!ok)
        return osb_error(sb->st, call, SBX_E_PROTOCOL,
                         "opensandbox: sandbox %s: the egress sidecar does not enforce the "
                         "policy it was given",
                         sb->id);
    return SBX_OK;
}

int osb_egress_set(sbx_sandbox *sb, sbx_call *call, const struct sbx_egress_policy *p)
{
    struct osb_state *st = sb->st;
    int rc = osb_egress_check(st, call, p);
    if (rc != SBX_OK)
        return rc;
    /* A sidecar that allows by default (a sandbox created with the network
     * open) cannot be limited: refuse before recording anything. */
    json_object *pdoc = NULL, *rules = NULL;
    int deny;
    if ((rc = read_policy(sb, call, &pdoc, &deny, &rules)) != SBX_OK)
        return rc;
    if (!deny) {
        json_object_put(pdoc);
        return osb_error(st, call, SBX_E_DENIED,
                         "opensandbox: sandbox %s: the egress sidecar's default action is not "
                         "deny; its network cannot be limited",
                         sb->id);
    }
    /* Record the intent first: a crash after it is repaired on attach. */
    json_object *doc = NULL;
    sbxp_http_error err;
    if ((rc = osb_api_get(st, call, sb->id, &doc, &err)) != SBX_OK) {
        json_object_put(pdoc);
        return osb_report(st, call, &err, "looking up sandbox %s", sb->id);
    }
    json_object *patch = json_object_new_object();
    json_object_object_foreach(sbxp_json_obj(doc, "metadata"), k, v)
    {
        (void)v;
        if (!strncmp(k, OSB_META_ALLOW, strlen(OSB_META_ALLOW)) ||
            !strncmp(k, OSB_META_ALLOW_ANY, strlen(OSB_META_ALLOW_ANY)))
            json_object_object_add(patch, k, NULL);
    }
    json_object_put(doc);
    osb_egress_meta(patch, p);
    rc = osb_api_metadata(st, call, sb->id, patch, &err);
    json_object_put(patch);
    if (rc != SBX_OK) {
        json_object_put(pdoc);
        return osb_report(st, call, &err, "recording the egress policy of %s", sb->id);
    }
    size_t n = 0;
    while (p->allow && p->allow[n])
        n++;
    int changes;
    rc = enforce(sb, call, (char *const *)p->allow, n, rules, &changes);
    json_object_put(pdoc);
    if (rc == SBX_OK)
        rc = verify(sb, call, (char *const *)p->allow, n);
    return rc;
}

int osb_egress_get(sbx_sandbox *sb, sbx_call *call, struct sbx_egress_report *out)
{
    json_object *doc = NULL, *rules = NULL;
    int deny;
    int rc = read_policy(sb, call, &doc, &deny, &rules);
    if (rc != SBX_OK)
        return rc;
    out->default_action = deny ? SBX_EGRESS_DENY : SBX_EGRESS_ALLOW;
    size_t nr = rules ? json_object_array_length(rules) : 0;
    for (size_t i = 0; rc == SBX_OK && i < nr; i++) {
        json_object *r = json_object_array_get_idx(rules, i);
        const char *t = sbxp_json_str(r, "target"), *a = sbxp_json_str(r, "action");
        if (t && a && !strcmp(a, "allow") && out->allow)
            rc = out->allow(out->ctx, t);
    }
    json_object_put(doc);
    return rc;
}

int osb_egress_reconcile(sbx_sandbox *sb, sbx_call *call, json_object *sandbox)
{
    struct osb_state *st = sb->st;
    char *want[OSB_ALLOW_MAX];
    size_t n = 0;
    if (!intended(sandbox, want, &n))
        return SBX_OK; /* created with the network open: nothing to keep */
    json_object *doc = NULL, *rules = NULL;
    int deny;
    int rc = read_policy(sb, call, &doc, &deny, &rules);
    if (rc == SBX_OK && !deny)
        rc = osb_error(st, call, SBX_E_DENIED,
                       "opensandbox: sandbox %s: its egress default is no longer deny (the "
                       "sidecar allows all traffic): refusing to attach; delete the session",
                       sb->id);
    int changes = 0;
    if (rc == SBX_OK)
        rc = enforce(sb, call, want, n, rules, &changes);
    json_object_put(doc);
    if (rc == SBX_OK && changes) {
        st->host->log(st->host, SBX_LOG_WARN,
                      "opensandbox: sandbox %s: the egress policy had drifted; %d rule(s) "
                      "repaired",
                      sb->id, changes);
        rc = verify(sb, call, want, n);
    }
    for (size_t i = 0; i < n; i++)
        free(want[i]);
    return rc;
}
