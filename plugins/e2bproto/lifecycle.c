/*
 * lifecycle.c - create, attach, destroy. Ownership lives in the sandbox's
 * metadata (sbx.owner = the session key's hash, never the key). Create is
 * idempotent across processes: it adopts the sandbox that carries the
 * owner, and when two processes raced to create, each keeps the oldest and
 * deletes its own younger one. A fork's sandbox is made by the same steps
 * from its snapshot's template (fork.c). See e2b_core.h.
 */
#include "clock.h"
#include "e2b_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "<provider>:<sandbox id>" -> id. SBX_E_INVALID for anything else. */
static int parse_ref(struct e2b_state *st, sbx_call *call, const char *ref, char *id,
                     size_t cap)
{
    size_t pl = strlen(st->cfg.provider);
    if (!ref || strncmp(ref, st->cfg.provider, pl) != 0 || ref[pl] != ':')
        return e2b_error(st, call, SBX_E_INVALID, "%s: not a reference of this provider",
                         st->cfg.provider);
    const char *p = ref + pl + 1;
    size_t n = strlen(p);
    if (n == 0 || n >= cap)
        return e2b_error(st, call, SBX_E_INVALID, "%s: malformed reference",
                         st->cfg.provider);
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return e2b_error(st, call, SBX_E_INVALID, "%s: malformed reference",
                             st->cfg.provider);
    }
    memcpy(id, p, n + 1);
    return SBX_OK;
}

/* Whether a sandbox's metadata names this owner (and this provider made it). */
static int owned_by(json_object *sandbox, const char *key_hash)
{
    json_object *meta = sbxp_json_obj(sandbox, "metadata");
    const char *owner = sbxp_json_str(meta, E2B_META_OWNER);
    const char *managed = sbxp_json_str(meta, E2B_META_MANAGED);
    return owner && managed && !strcmp(owner, key_hash) && !strcmp(managed, "true");
}

/* The oldest sandbox of the list owned by key_hash (startedAt, then id, so
 * that every racing process picks the same one), or NULL. Borrowed. */
static json_object *oldest_owned(json_object *list, const char *key_hash)
{
    json_object *best = NULL;
    size_t n = json_object_array_length(list);
    for (size_t i = 0; i < n; i++) {
        json_object *s = json_object_array_get_idx(list, i);
        const char *id = sbxp_json_str(s, "sandboxID");
        if (!id || !owned_by(s, key_hash))
            continue;
        if (!best) {
            best = s;
            continue;
        }
        const char *a = sbxp_json_str(s, "startedAt"), *b = sbxp_json_str(best, "startedAt");
        int c = strcmp(a ? a : "", b ? b : "");
        if (c < 0 || (c == 0 && strcmp(id, sbxp_json_str(best, "sandboxID")) < 0))
            best = s;
    }
    return best;
}

/* Connect to a sandbox (resuming it if paused) and make a handle. */
static int open_handle(struct e2b_state *st, sbx_call *call, const char *id,
                       const char *key_hash, sbx_sandbox **out)
{
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = e2b_api_connect(st, call, id, &doc, &err);
    /* Cube documents no connect route, only /resume: a paused sandbox
     * whose connect is refused (409) is resumed there, then connected. */
    if (rc != SBX_OK && st->cfg.resume_endpoint && err.http_status == 409 &&
        (rc = e2b_api_resume(st, call, id, NULL, &err)) == SBX_OK)
        rc = e2b_api_connect(st, call, id, &doc, &err);
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "connecting to sandbox %s", id);
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb) {
        json_object_put(doc);
        return e2b_error(st, call, SBX_E_NOMEM, "out of memory");
    }
    sb->st = st;
    snprintf(sb->id, sizeof sb->id, "%s", id);
    snprintf(sb->key_hash, sizeof sb->key_hash, "%s", key_hash);
    pthread_mutex_init(&sb->lock, NULL);
    sb->extended_ms = sbxs_now_ms();
    rc = e2b_envd_setup(sb, call, doc);
    json_object_put(doc);
    if (rc != SBX_OK) {
        e2b_release(sb);
        return rc;
    }
    *out = sb;
    return SBX_OK;
}

int e2b_create(void *state, sbx_call *call, const struct sbx_create_args *args, char *ref,
               sbx_sandbox **out)
{
    char made[128];
    return e2b_create_from(state, call, args, NULL, ref, out, made, sizeof made);
}

/* POST /sandboxes for the key of args from template_id, then the lookup
 * that settles a race: id becomes the oldest sandbox of the key (*meta_doc
 * that one's listing when it is another process's: this call's is deleted
 * again), made the id of this call's own when it is kept. */
static int post_sandbox(struct e2b_state *st, sbx_call *call,
                        const struct sbx_create_args *args, const char *template_id,
                        const char *ports, char *id, size_t cap, json_object **meta_doc,
                        char *made, size_t made_cap)
{
    json_object *made_doc = NULL, *list = NULL;
    sbxp_http_error err;
    int rc = e2b_api_create(st, call, template_id, args->key_hash, args->spec_hash, ports,
                            &made_doc, &err);
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "creating a sandbox of template %s",
                          template_id ? template_id : st->cfg.template_id);
    const char *mid = sbxp_json_str(made_doc, "sandboxID");
    if (!mid || strlen(mid) >= cap || strlen(mid) >= made_cap) {
        json_object_put(made_doc);
        return e2b_error(st, call, SBX_E_PROTOCOL,
                         "%s: POST /sandboxes answered without a sandboxID", st->cfg.provider);
    }
    snprintf(id, cap, "%s", mid);
    snprintf(made, made_cap, "%s", mid);
    json_object_put(made_doc);
    /* Another process may have created one for the same key meanwhile:
     * the oldest wins everywhere, the younger is deleted by its maker. */
    if (e2b_api_find(st, call, args->key_hash, &list, &err) == SBX_OK) {
        json_object *first = oldest_owned(list, args->key_hash);
        const char *fid = first ? sbxp_json_str(first, "sandboxID") : NULL;
        if (fid && strcmp(fid, id) != 0) {
            *meta_doc = json_object_get(first);
            char mine[128];
            snprintf(mine, sizeof mine, "%s", id);
            snprintf(id, cap, "%s", fid);
            made[0] = '\0';
            if (e2b_api_delete(st, NULL, mine, &err) != SBX_OK)
                st->host->log(st->host, SBX_LOG_WARN, "%s: deleting duplicate sandbox %s: %s",
                              st->cfg.provider, mine, err.message);
        }
        json_object_put(list);
    }
    return SBX_OK;
}

int e2b_create_from(struct e2b_state *st, sbx_call *call, const struct sbx_create_args *args,
                    const char *template_id, char *ref, sbx_sandbox **out, char *made,
                    size_t made_cap)
{
    *out = NULL;
    made[0] = '\0';
    sbxp_http_error err;
    int rc;
    char id[128] = "";
    const uint16_t *want_ports =
        args->size >= SBX_CREATE_ARGS_SIZE_PORTS_1_2 ? args->ports : NULL;
    char ports[256];
    if (e2b_ports_record(want_ports, ports, sizeof ports) != SBX_OK)
        return e2b_error(st, call, SBX_E_INVALID, "%s: at most %d ports can be declared",
                         st->cfg.provider, E2B_PORTS_MAX);
    /* The ports the sandbox was made with (an adopted one keeps its own). */
    json_object *meta_doc = NULL;
    if (!template_id) {
        json_object *list = NULL;
        rc = e2b_api_find(st, call, args->key_hash, &list, &err);
        if (rc != SBX_OK)
            return e2b_report(st, call, &err, "looking for the session's sandbox");
        json_object *found = oldest_owned(list, args->key_hash);
        if (found) {
            snprintf(id, sizeof id, "%s", sbxp_json_str(found, "sandboxID"));
            meta_doc = json_object_get(found);
        }
        json_object_put(list);
    }
    if (!id[0] && (rc = post_sandbox(st, call, args, template_id, ports, id, sizeof id,
                                     &meta_doc, made, made_cap)) != SBX_OK)
        return rc;
    if (snprintf(ref, SBX_REF_MAX, "%s:%s", st->cfg.provider, id) >= SBX_REF_MAX) {
        json_object_put(meta_doc);
        return e2b_error(st, call, SBX_E_PROTOCOL, "%s: sandbox id too long",
                         st->cfg.provider);
    }
    sbx_sandbox *sb = NULL;
    rc = open_handle(st, call, id, args->key_hash, &sb);
    if (rc != SBX_OK) {
        json_object_put(meta_doc);
        return rc;
    }
    if (meta_doc) {
        e2b_ports_load(sb, meta_doc);
        json_object_put(meta_doc);
    } else {
        json_object *doc = json_object_new_object(), *m = json_object_new_object();
        json_object_object_add(m, E2B_META_PORTS, json_object_new_string(ports));
        json_object_object_add(doc, "metadata", m);
        e2b_ports_load(sb, doc);
        json_object_put(doc);
    }
    /* a fork's sandbox: the source's outputs, uploads, skills and memory
     * trees go before the new key's are made */
    if (template_id && made[0] && (rc = e2b_fork_scrub(sb, call)) != SBX_OK) {
        e2b_release(sb);
        return rc;
    }
    rc = e2b_mkdir(sb, call, st->cfg.workspace, &err);
    if (rc != SBX_OK) {
        rc = e2b_envd_report(sb, call, &err, "creating the workspace %s",
                             st->cfg.workspace);
        e2b_release(sb);
        return rc;
    }
    rc = e2b_outputs_prepare(sb, call);
    if (rc == SBX_OK)
        rc = e2b_memory_create(sb, call, args);
    if (rc != SBX_OK) {
        e2b_release(sb);
        return rc;
    }
    *out = sb;
    return SBX_OK;
}

/* GET the sandbox of ref and check its owner. */
static int check_owner(struct e2b_state *st, sbx_call *call, const char *ref,
                       const char *key_hash, char *id, size_t cap, json_object **detail)
{
    int rc = parse_ref(st, call, ref, id, cap);
    if (rc != SBX_OK)
        return rc;
    json_object *doc = NULL;
    sbxp_http_error err;
    rc = e2b_api_get(st, call, id, &doc, &err);
    if (rc == SBX_E_NOT_FOUND)
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: sandbox %s no longer exists",
                         st->cfg.provider, id);
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "looking up sandbox %s", id);
    int mine = owned_by(doc, key_hash);
    if (mine && detail)
        *detail = json_object_get(doc);
    json_object_put(doc);
    if (!mine)
        return e2b_error(st, call, SBX_E_DENIED,
                         "%s: sandbox %s belongs to another session key", st->cfg.provider,
                         id);
    return SBX_OK;
}

int e2b_attach(void *state, sbx_call *call, const struct sbx_attach_args *args,
               sbx_sandbox **out)
{
    struct e2b_state *st = state;
    *out = NULL;
    char id[128];
    json_object *detail = NULL;
    int rc = check_owner(st, call, args->ref, args->key_hash, id, sizeof id, &detail);
    if (rc != SBX_OK)
        return rc;
    rc = open_handle(st, call, id, args->key_hash, out);
    if (rc == SBX_OK)
        e2b_ports_load(*out, detail);
    json_object_put(detail);
    if (rc == SBX_OK && (rc = e2b_memory_open(*out, call)) != SBX_OK) {
        e2b_release(*out);
        *out = NULL;
    }
    if (rc == SBX_E_NOT_FOUND)
        return e2b_error(st, call, SBX_E_NOT_FOUND, "%s: sandbox %s no longer exists",
                         st->cfg.provider, id);
    return rc;
}

int e2b_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct e2b_state *st = state;
    char id[128];
    int rc = check_owner(st, call, args->ref, args->key_hash, id, sizeof id, NULL);
    if (rc == SBX_E_NOT_FOUND) {
        e2b_memory_forget(st, id);
        return e2b_fork_leftovers(st, call, args->key_hash);
    }
    if (rc != SBX_OK)
        return rc;
    sbxp_http_error err;
    rc = e2b_api_delete(st, call, id, &err);
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "deleting sandbox %s", id);
    e2b_memory_forget(st, id);
    /* after the sandbox: a failure here is retried by the next destroy,
     * which finds the sandbox gone and looks again */
    return e2b_fork_leftovers(st, call, args->key_hash);
}

const char *e2b_root(sbx_sandbox *sb)
{
    return sb->st->cfg.workspace;
}

void e2b_release(sbx_sandbox *sb)
{
    if (!sb)
        return;
    if (sb->owns_envd)
        sbxp_http_free(sb->envd);
    e2b_memory_free(sb);
    pthread_mutex_destroy(&sb->lock);
    volatile char *p = sb->token;
    while (*p)
        *p++ = 0;
    free(sb);
}
