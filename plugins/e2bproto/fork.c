/*
 * fork.c - SBX_CAP_FORK of the e2b provider through E2B's snapshots
 * (openapi.yml: POST /sandboxes/{id}/snapshots gives a SnapshotInfo whose
 * snapshotID is a template; POST /sandboxes starts a sandbox of it;
 * DELETE /templates/{templateID} deletes it).
 *
 *   1. the new key has no sandbox yet (SBX_E_EXISTS otherwise: a fork
 *      never adopts, it would not be a copy);
 *   2. the source is snapshotted under the name sbx-fork-<first 16 hex of
 *      the new key's hash>: deterministic, so destroy of the new key finds
 *      what a fork killed midway left (e2b_fork_leftovers). A paused
 *      source is resumed for the snapshot and paused again right after
 *      (memory kept), so it is paused for all but the snapshot;
 *   3. the new sandbox is made from the snapshot's template exactly as
 *      create makes one (e2b_create_from: the new key's metadata, ports,
 *      lifetime, network), after removing what the snapshot carried over
 *      that was bound into the source from the host (e2b_fork_scrub);
 *   4. the snapshot is deleted, whether or not the sandbox was made; when
 *      it was not, the sandbox this call made is deleted too.
 *
 * POST /sandboxes/{id}/fork is not used: its request has no metadata, so
 * the fork would carry the source's owner.
 */
#include "e2b_core.h"

#include <stdio.h>
#include <string.h>

/* The snapshot name of a fork into key_hash. */
static void snapshot_name(const char *key_hash, char *out, size_t cap)
{
    snprintf(out, cap, "sbx-fork-%.16s", key_hash);
}

/* Whether a SnapshotInfo is the template named name: its snapshotID
 * without the tag and the team namespace ("team/sbx-fork-x:default"). */
static int named(json_object *info, const char *name)
{
    const char *sid = sbxp_json_str(info, "snapshotID");
    if (!sid)
        return 0;
    const char *slash = strrchr(sid, '/');
    const char *alias = slash ? slash + 1 : sid;
    size_t n = strcspn(alias, ":");
    return n == strlen(name) && !strncmp(alias, name, n);
}

int e2b_fork_leftovers(struct e2b_state *st, sbx_call *call, const char *key_hash)
{
    if (!st->cfg.snapshots || !key_hash)
        return SBX_OK;
    char name[64];
    snapshot_name(key_hash, name, sizeof name);
    json_object *list = NULL;
    sbxp_http_error err;
    int rc = e2b_api_snapshots_named(st, call, name, &list, &err);
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "looking for the leftover snapshot %s", name);
    size_t n = json_object_array_length(list);
    for (size_t i = 0; i < n && rc == SBX_OK; i++) {
        json_object *info = json_object_array_get_idx(list, i);
        if (!named(info, name))
            continue; /* the filter may match more than the exact name */
        const char *sid = sbxp_json_str(info, "snapshotID");
        rc = e2b_api_template_delete(st, call, sid, &err);
        if (rc != SBX_OK)
            rc = e2b_report(st, call, &err, "deleting the leftover snapshot %s", sid);
    }
    json_object_put(list);
    return rc;
}

int e2b_fork_scrub(sbx_sandbox *sb, sbx_call *call)
{
    /* The snapshot is the source's whole file system: its outputs,
     * uploads and staging (/mnt/session), memory trees, skills and process
     * records are the source's, not the new key's. Create's steps make
     * the new key's again. */
    char skills[1024];
    snprintf(skills, sizeof skills, "%s/skills", sb->st->cfg.workspace);
    const char *argv[] = {"sh", "-c", "rm -rf /mnt/session \"$1\" \"$2\" \"$3\"", "sh",
                          SBXP_RMEM_ROOT, E2B_PROC_BASE, skills, NULL};
    return e2b_root_script(sb, call, "fork: removing the source's outputs, uploads, skills "
                                     "and memory trees",
                           argv);
}

/* Pause src again after its snapshot (it was paused at the call). */
static int pause_again(sbx_sandbox *src, sbx_call *call)
{
    struct e2b_state *st = src->st;
    sbxp_http_error err;
    int rc = e2b_api_pause(st, call, src->id, &err);
    if (rc != SBX_OK && err.http_status == 409)
        rc = SBX_OK; /* paused meanwhile: what was wanted */
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "fork: pausing the source %s again after its "
                                          "snapshot",
                          src->id);
    pthread_mutex_lock(&src->lock);
    src->paused = 1;
    pthread_mutex_unlock(&src->lock);
    return SBX_OK;
}

/* Snapshot src (resumed for it and paused again when paused) into
 * sid[cap]. */
static int take_snapshot(sbx_sandbox *src, sbx_call *call, const char *name, char *sid,
                         size_t cap)
{
    struct e2b_state *st = src->st;
    json_object *doc = NULL;
    sbxp_http_error err;
    int rc = e2b_api_get(st, call, src->id, &doc, &err);
    const char *state = rc == SBX_OK ? sbxp_json_str(doc, "state") : NULL;
    int paused = state && !strcmp(state, "paused");
    json_object_put(doc);
    if (rc == SBX_E_NOT_FOUND)
        return e2b_error(st, call, SBX_E_NOT_FOUND,
                         "%s: fork: sandbox %s no longer exists (deleted, or expired)",
                         st->cfg.provider, src->id);
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "fork: looking up sandbox %s", src->id);
    /* The snapshot route documents a running sandbox only (the fork
     * route's words: "checkpoint the running sandbox in place"). */
    if (paused && (rc = e2b_resume_quiet(src, call, &err)) != SBX_OK)
        return e2b_report(st, call, &err, "fork: resuming the paused source %s for its "
                                          "snapshot",
                          src->id);
    doc = NULL;
    rc = e2b_api_snapshot(st, call, src->id, name, &doc, &err);
    const char *s = rc == SBX_OK ? sbxp_json_str(doc, "snapshotID") : NULL;
    if (rc == SBX_OK && (!s || !*s || strlen(s) >= cap)) {
        rc = e2b_error(st, call, SBX_E_PROTOCOL,
                       "%s: fork: POST /sandboxes/%s/snapshots answered without a "
                       "usable snapshotID",
                       st->cfg.provider, src->id);
    } else if (rc == SBX_E_NOT_FOUND) {
        rc = e2b_error(st, call, SBX_E_NOT_FOUND,
                       "%s: fork: sandbox %s no longer exists (deleted, or expired)",
                       st->cfg.provider, src->id);
    } else if (rc != SBX_OK) {
        rc = e2b_report(st, call, &err, "fork: snapshotting sandbox %s", src->id);
    }
    snprintf(sid, cap, "%s", rc == SBX_OK ? s : "");
    json_object_put(doc);
    /* Paused again whatever the snapshot did; a failure to pause fails
     * the fork (the source must not run on), its snapshot deleted. */
    int prc = paused ? pause_again(src, rc == SBX_OK ? call : NULL) : SBX_OK;
    if (rc == SBX_OK && prc != SBX_OK) {
        if (e2b_api_template_delete(st, NULL, sid, &err) != SBX_OK)
            st->host->log(st->host, SBX_LOG_WARN, "%s: fork: deleting snapshot %s: %s",
                          st->cfg.provider, sid, err.message);
        sid[0] = '\0';
        return prc;
    }
    return rc;
}

int e2b_fork(sbx_sandbox *src, sbx_call *call, const struct sbx_create_args *args,
             char *ref, sbx_sandbox **out)
{
    struct e2b_state *st = src->st;
    *out = NULL;
    if (!args || !args->key_hash || strlen(args->key_hash) != SBX_KEY_HASH_LEN)
        return e2b_error(st, call, SBX_E_INVALID, "%s: fork needs a %d-character key hash",
                         st->cfg.provider, SBX_KEY_HASH_LEN);
    json_object *list = NULL;
    sbxp_http_error err;
    int rc = e2b_api_find(st, call, args->key_hash, &list, &err);
    if (rc != SBX_OK)
        return e2b_report(st, call, &err, "fork: looking for a sandbox of the new key");
    size_t have = json_object_array_length(list);
    json_object_put(list);
    if (have)
        return e2b_error(st, call, SBX_E_EXISTS,
                         "%s: fork: the new session key already has a sandbox; a fork "
                         "needs a key without one",
                         st->cfg.provider);
    char name[64], sid[512], made[128];
    snapshot_name(args->key_hash, name, sizeof name);
    rc = take_snapshot(src, call, name, sid, sizeof sid);
    if (rc != SBX_OK)
        return rc;
    rc = e2b_create_from(st, call, args, sid, ref, out, made, sizeof made);
    /* The snapshot goes either way; when it cannot, destroy of the new
     * key finds it by its name (e2b_fork_leftovers). */
    if (e2b_api_template_delete(st, NULL, sid, &err) != SBX_OK)
        st->host->log(st->host, SBX_LOG_WARN,
                      "%s: fork: deleting snapshot %s: %s (destroy of the new key retries)",
                      st->cfg.provider, sid, err.message);
    if (rc != SBX_OK && made[0]) {
        if (e2b_api_delete(st, NULL, made, &err) != SBX_OK)
            st->host->log(st->host, SBX_LOG_WARN, "%s: fork: deleting sandbox %s: %s",
                          st->cfg.provider, made, err.message);
        e2b_memory_forget(st, made);
    }
    if (rc != SBX_OK)
        ref[0] = '\0';
    return rc;
}
