/*
 * lifecycle.c - create, attach, destroy. A session's sandbox is named
 * "sbx-<first 32 hex of the key hash>": Daytona names are unique in an
 * organization, so create is idempotent by looking the name up first, and
 * two processes racing to create end with one sandbox (the loser's POST
 * is refused and it adopts the winner's). Ownership lives in the labels
 * (sbx.owner = the whole key hash, never the key) and is checked on every
 * adoption, attach and destroy. See daytona.h.
 */
#include "daytona.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int parse_ref(struct daytona_state *st, sbx_call *call, const char *ref, char *id,
                     size_t cap)
{
    static const char pre[] = DT ":";
    if (!ref || strncmp(ref, pre, sizeof pre - 1) != 0)
        return daytona_error(st, call, SBX_E_INVALID, DT ": not a reference of this provider");
    const char *p = ref + sizeof pre - 1;
    size_t n = strlen(p);
    if (n == 0 || n >= cap)
        return daytona_error(st, call, SBX_E_INVALID, DT ": malformed reference");
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return daytona_error(st, call, SBX_E_INVALID, DT ": malformed reference");
    }
    memcpy(id, p, n + 1);
    return SBX_OK;
}

static int owned_by(json_object *sandbox, const char *key_hash)
{
    json_object *labels = sbxp_json_obj(sandbox, "labels");
    const char *owner = sbxp_json_str(labels, DT_LABEL_OWNER);
    const char *managed = sbxp_json_str(labels, DT_LABEL_MANAGED);
    return owner && managed && !strcmp(owner, key_hash) && !strcmp(managed, "true");
}

/* Wait for started, then make a handle bound to the toolbox. */
static int open_handle(struct daytona_state *st, sbx_call *call, const char *id,
                       const char *key_hash, sbx_sandbox **out)
{
    json_object *doc = NULL;
    int rc = daytona_api_wait_started(st, call, id, &doc);
    if (rc != SBX_OK)
        return rc;
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    sb->st = st;
    snprintf(sb->id, sizeof sb->id, "%s", id);
    snprintf(sb->key_hash, sizeof sb->key_hash, "%s", key_hash);
    rc = daytona_tb_setup(sb, call, doc);
    daytona_ports_load(sb, doc);
    json_object_put(doc);
    if (rc != SBX_OK) {
        daytona_release(sb);
        return rc;
    }
    *out = sb;
    return SBX_OK;
}

/* The sandbox named name: its id when it exists and is ours (SBX_OK), ""
 * when there is none, SBX_E_DENIED when another key owns the name. */
static int find_named(struct daytona_state *st, sbx_call *call, const char *name,
                      const char *key_hash, char *id, size_t cap)
{
    id[0] = '\0';
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = daytona_api_get(st, call, name, &doc, &err);
    if (rc == SBX_E_NOT_FOUND)
        return SBX_OK;
    if (rc != SBX_OK)
        return daytona_report(st, call, &err, "looking up sandbox %s", name);
    const char *s = sbxp_json_str(doc, "state");
    if (s && (!strcmp(s, "destroyed") || !strcmp(s, "destroying"))) {
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_UNAVAILABLE,
                             DT ": the session's previous sandbox %s is still being destroyed",
                             name);
    }
    if (!owned_by(doc, key_hash)) {
        json_object_put(doc);
        return daytona_error(st, call, SBX_E_DENIED,
                             DT ": a sandbox named %s exists but does not carry this session's "
                           "ownership labels",
                        name);
    }
    snprintf(id, cap, "%s", sbxp_json_str(doc, "id"));
    json_object_put(doc);
    return SBX_OK;
}

int daytona_create(void *state, sbx_call *call, const struct sbx_create_args *args, char *ref,
                   sbx_sandbox **out)
{
    struct daytona_state *st = state;
    *out = NULL;
    if (!args->key_hash || strlen(args->key_hash) < DT_NAME_HASH)
        return daytona_error(st, call, SBX_E_INVALID, DT ": create: bad key hash");
    char name[64], id[128];
    snprintf(name, sizeof name, "sbx-%.*s", DT_NAME_HASH, args->key_hash);
    char ports[DT_PORTS_MAX * 6 + 1];
    int rc = daytona_ports_label(st, call, args, ports, sizeof ports);
    if (rc != SBX_OK)
        return rc;
    rc = find_named(st, call, name, args->key_hash, id, sizeof id);
    if (rc != SBX_OK)
        return rc;
    if (!id[0]) {
        json_object *made = NULL;
        sbxp_http_error err;
        rc = daytona_api_create(st, call, name, args->key_hash, args->spec_hash, ports, &made,
                                &err);
        if (rc == SBX_OK) {
            const char *mid = sbxp_json_str(made, "id");
            if (!mid || !*mid || strlen(mid) >= sizeof id) {
                json_object_put(made);
                return daytona_error(st, call, SBX_E_PROTOCOL,
                                     DT ": POST /sandbox answered without an id");
            }
            snprintf(id, sizeof id, "%s", mid);
            json_object_put(made);
        } else {
            /* Refused because the name is taken (a racing process won), or
             * the answer was lost after the sandbox was made: the name
             * tells. */
            sbxp_http_error keep = err;
            int rc2 = find_named(st, call, name, args->key_hash, id, sizeof id);
            if (rc2 != SBX_OK)
                return rc2;
            if (!id[0]) {
                const char *what = st->cfg.snapshot ? st->cfg.snapshot
                                   : st->cfg.image  ? st->cfg.image
                                                    : "the default snapshot";
                return daytona_report(st, call, &keep, "creating sandbox %s from %s", name, what);
            }
        }
    }
    if (snprintf(ref, SBX_REF_MAX, DT ":%s", id) >= SBX_REF_MAX)
        return daytona_error(st, call, SBX_E_PROTOCOL, DT ": sandbox id too long");
    sbx_sandbox *sb = NULL;
    rc = open_handle(st, call, id, args->key_hash, &sb);
    if (rc != SBX_OK)
        return rc;
    sbxp_http_error err;
    rc = daytona_tb_mkdir(sb, call, st->cfg.workspace, 0755, &err);
    if (rc != SBX_OK) {
        rc = daytona_tb_report(sb, call, &err, "creating the workspace %s", st->cfg.workspace);
        daytona_release(sb);
        return rc;
    }
    rc = daytona_outputs_prepare(sb, call);
    if (rc == SBX_OK)
        rc = daytona_memory_setup(sb, call, args);
    if (rc != SBX_OK) {
        daytona_release(sb);
        return rc;
    }
    *out = sb;
    return SBX_OK;
}

/* GET the sandbox of ref and check its owner. */
static int check_owner(struct daytona_state *st, sbx_call *call, const char *ref,
                       const char *key_hash, char *id, size_t cap)
{
    int rc = parse_ref(st, call, ref, id, cap);
    if (rc != SBX_OK)
        return rc;
    json_object *doc = NULL;
    sbxp_http_error err;
    rc = daytona_api_get(st, call, id, &doc, &err);
    if (rc == SBX_E_NOT_FOUND)
        return daytona_error(st, call, SBX_E_NOT_FOUND, DT ": sandbox %s no longer exists", id);
    if (rc != SBX_OK)
        return daytona_report(st, call, &err, "looking up sandbox %s", id);
    const char *s = sbxp_json_str(doc, "state");
    int gone = s && !strcmp(s, "destroyed");
    int mine = owned_by(doc, key_hash);
    json_object_put(doc);
    if (gone)
        return daytona_error(st, call, SBX_E_NOT_FOUND, DT ": sandbox %s no longer exists", id);
    if (!mine)
        return daytona_error(st, call, SBX_E_DENIED,
                             DT ": sandbox %s belongs to another session key", id);
    return SBX_OK;
}

int daytona_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
                   sbx_sandbox **out)
{
    struct daytona_state *st = state;
    *out = NULL;
    char id[128];
    int rc = check_owner(st, call, args->ref, args->key_hash, id, sizeof id);
    if (rc != SBX_OK)
        return rc;
    rc = open_handle(st, call, id, args->key_hash, out);
    if (rc == SBX_OK && (rc = daytona_memory_setup(*out, call, NULL)) != SBX_OK) {
        daytona_release(*out);
        *out = NULL;
    }
    return rc;
}

int daytona_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct daytona_state *st = state;
    char id[128];
    int rc = check_owner(st, call, args->ref, args->key_hash, id, sizeof id);
    if (rc == SBX_E_NOT_FOUND) {
        sbxp_rmem_forget(st->host, DT, st->cfg.state_dir, id);
        return SBX_OK;
    }
    if (rc != SBX_OK)
        return rc;
    sbxp_http_error err;
    rc = daytona_api_delete(st, call, id, &err);
    if (rc == SBX_E_INVALID || rc == SBX_E_EXISTS) {
        /* Refused because it is already being destroyed (an earlier
         * destroy that did not wait): what counts is that it goes. */
        sbxp_http_error keep = err;
        json_object *doc = NULL;
        int g = daytona_api_get(st, call, id, &doc, &err);
        const char *s = g == SBX_OK ? sbxp_json_str(doc, "state") : NULL;
        int going = g == SBX_E_NOT_FOUND || (s && (!strcmp(s, "destroying") ||
                                                   !strcmp(s, "destroyed")));
        json_object_put(doc);
        if (going) { /* it goes: its memory state goes with it */
            sbxp_rmem_forget(st->host, DT, st->cfg.state_dir, id);
            return daytona_api_wait_gone(st, call, id);
        }
        return daytona_report(st, call, &keep, "deleting sandbox %s", id);
    }
    if (rc != SBX_OK)
        return daytona_report(st, call, &err, "deleting sandbox %s", id);
    /* Deletion is asynchronous: wait, so that the name is free again and
     * nothing of the session runs on after destroy returned. */
    rc = daytona_api_wait_gone(st, call, id);
    if (rc == SBX_OK)
        sbxp_rmem_forget(st->host, DT, st->cfg.state_dir, id);
    return rc;
}

const char *daytona_root(sbx_sandbox *sb)
{
    return sb->st->cfg.workspace;
}

void daytona_release(sbx_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->owns_tb)
        sbxp_http_free(sb->tb);
    sbxp_rmem_free(&sb->mem);
    free(sb);
}
