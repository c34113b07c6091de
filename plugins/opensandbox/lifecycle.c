/*
 * lifecycle.c - create, attach, destroy. Ownership lives in the sandbox's
 * metadata (sbx.owner = the session key's hash, never the key). Create is
 * idempotent across processes: it adopts the sandbox that carries the
 * owner; when two processes raced, each keeps the oldest and deletes its
 * own younger one. A new sandbox is Pending until the server has started
 * it: create waits for Running, bounded by ready_timeout_ms. See osb.h.
 */
#include "clock.h"
#include "osb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>

#define POLL_MS 100

static int parse_ref(struct osb_state *st, sbx_call *call, const char *ref, char *id, size_t cap)
{
    static const char pre[] = OSB_PROVIDER ":";
    if (!ref || strncmp(ref, pre, sizeof pre - 1) != 0)
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: not a reference of this provider");
    const char *p = ref + sizeof pre - 1;
    size_t n = strlen(p);
    if (n == 0 || n >= cap)
        return osb_error(st, call, SBX_E_INVALID, "opensandbox: malformed reference");
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return osb_error(st, call, SBX_E_INVALID, "opensandbox: malformed reference");
    }
    memcpy(id, p, n + 1);
    return SBX_OK;
}

static int owned_by(json_object *sandbox, const char *key_hash)
{
    json_object *meta = sbxp_json_obj(sandbox, "metadata");
    const char *owner = sbxp_json_str(meta, OSB_META_OWNER);
    const char *managed = sbxp_json_str(meta, OSB_META_MANAGED);
    return owner && managed && strlen(owner) == OSB_HASH_LABEL &&
           !strncmp(owner, key_hash, OSB_HASH_LABEL) && !strcmp(managed, "true");
}

/* Usable (not on its way out) and owned by key_hash. */
static int candidate(json_object *s, const char *key_hash)
{
    const char *state = osb_state_of(s);
    return sbxp_json_str(s, "id") && owned_by(s, key_hash) && strcmp(state, "Stopping") &&
           strcmp(state, "Terminated") && strcmp(state, "Failed");
}

/* The oldest owned sandbox (createdAt, then id: every racing process picks
 * the same one), or NULL. Borrowed. */
static json_object *oldest_owned(json_object *list, const char *key_hash)
{
    json_object *best = NULL;
    for (size_t i = 0; i < json_object_array_length(list); i++) {
        json_object *s = json_object_array_get_idx(list, i);
        if (!candidate(s, key_hash))
            continue;
        if (!best) {
            best = s;
            continue;
        }
        const char *a = sbxp_json_str(s, "createdAt"), *b = sbxp_json_str(best, "createdAt");
        int c = strcmp(a ? a : "", b ? b : "");
        if (c < 0 || (c == 0 && strcmp(sbxp_json_str(s, "id"), sbxp_json_str(best, "id")) < 0))
            best = s;
    }
    return best;
}

int osb_sleep_ms(struct osb_state *st, sbx_call *call, int ms)
{
    struct sbxp_call_cancel c;
    sbxp_call_cancel_init(&c, st->host, call);
    struct pollfd p = {c.c.fd, POLLIN, 0};
    if (poll(&p, p.fd >= 0 ? 1 : 0, ms) > 0 || c.c.check(c.c.ctx))
        return osb_error(st, call, SBX_E_CANCELLED, "opensandbox: cancelled");
    return SBX_OK;
}

/*
 * Bring the sandbox to Running: resume a paused one, wait through Pending,
 * Resuming and Pausing. *doc (may be NULL) receives the final Sandbox.
 */
static int wait_running(struct osb_state *st, sbx_call *call, const char *id, json_object **doc)
{
    int64_t deadline = sbxs_now_ms() + st->cfg.ready_timeout_ms;
    char last[32] = "";
    int resumed = 0;
    for (;;) {
        json_object *s = NULL;
        sbxp_http_error err;
        int rc = osb_api_get(st, call, id, &s, &err);
        if (rc == SBX_E_NOT_FOUND)
            return osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: sandbox %s no longer exists",
                             id);
        if (rc != SBX_OK)
            return osb_report(st, call, &err, "looking up sandbox %s", id);
        const char *state = osb_state_of(s);
        snprintf(last, sizeof last, "%s", state);
        if (!strcmp(state, "Running")) {
            if (resumed)
                osb_marker_clear(st, id); /* pause.c: this machine's note */
            if (doc)
                *doc = s;
            else
                json_object_put(s);
            return SBX_OK;
        }
        const char *reason = sbxp_json_str(sbxp_json_obj(s, "status"), "message");
        char why[200];
        snprintf(why, sizeof why, "%s", reason ? reason : "");
        json_object_put(s);
        if (!strcmp(last, "Failed") || !strcmp(last, "Terminated") || !strcmp(last, "Stopping"))
            return osb_error(st, call, !strcmp(last, "Failed") ? SBX_E_UNAVAILABLE : SBX_E_NOT_FOUND,
                             "opensandbox: sandbox %s is %s%s%s", id, last, why[0] ? ": " : "",
                             why);
        if (!strcmp(last, "Paused") && !resumed) {
            rc = osb_api_action(st, call, id, "resume", &err);
            if (rc != SBX_OK && rc != SBX_E_EXISTS)
                return osb_report(st, call, &err, "resuming sandbox %s", id);
            resumed = 1;
        }
        if (sbxs_now_ms() >= deadline)
            return osb_error(st, call, SBX_E_TIMEOUT,
                             "opensandbox: sandbox %s did not reach Running within %lld ms "
                             "(last state %s)",
                             id, (long long)st->cfg.ready_timeout_ms, last[0] ? last : "unknown");
        if ((rc = osb_sleep_ms(st, call, POLL_MS)) != SBX_OK)
            return rc;
    }
}

static int open_handle(struct osb_state *st, sbx_call *call, const char *id, const char *key_hash,
                       sbx_sandbox **out)
{
    sbx_sandbox *sb = calloc(1, sizeof *sb);
    if (!sb)
        return osb_error(st, call, SBX_E_NOMEM, "out of memory");
    sb->st = st;
    snprintf(sb->id, sizeof sb->id, "%s", id);
    snprintf(sb->key_hash, sizeof sb->key_hash, "%s", key_hash);
    pthread_mutex_init(&sb->lock, NULL);
    sb->renewed_ms = sbxs_now_ms();
    int rc = osb_service_open(sb, call, OSB_EXECD_PORT, &sb->execd);
    if (rc != SBX_OK) {
        osb_release(sb);
        return rc;
    }
    *out = sb;
    return SBX_OK;
}

int osb_create(void *state, sbx_call *call, const struct sbx_create_args *args, char *ref,
               sbx_sandbox **out)
{
    struct osb_state *st = state;
    *out = NULL;
    const struct sbx_egress_policy *egress =
        args->size >= SBX_CREATE_ARGS_SIZE_EGRESS_1_1 ? args->egress : NULL;
    const uint16_t *ports = args->size >= SBX_CREATE_ARGS_SIZE_PORTS_1_2 ? args->ports : NULL;
    int rc;
    if (egress && (rc = osb_egress_check(st, call, egress)) != SBX_OK)
        return rc;
    if ((rc = osb_ports_check(st, call, ports)) != SBX_OK)
        return rc;
    json_object *list = NULL;
    sbxp_http_error err;
    rc = osb_api_find(st, call, args->key_hash, &list, &err);
    if (rc != SBX_OK)
        return osb_report(st, call, &err, "looking for the session's sandbox");
    char id[128] = "";
    json_object *found = oldest_owned(list, args->key_hash);
    if (found)
        snprintf(id, sizeof id, "%s", sbxp_json_str(found, "id"));
    json_object_put(list);
    list = NULL;
    int made = 0;
    if (!id[0]) {
        json_object *doc = NULL;
        rc = osb_api_create(st, call, args->key_hash, args->spec_hash, egress, ports, &doc,
                            &err);
        if (rc != SBX_OK)
            return osb_report(st, call, &err, "creating a sandbox of image %s", st->cfg.image);
        const char *mid = sbxp_json_str(doc, "id");
        if (!mid || strlen(mid) >= sizeof id) {
            json_object_put(doc);
            return osb_error(st, call, SBX_E_PROTOCOL,
                             "opensandbox: POST /sandboxes answered without an id");
        }
        snprintf(id, sizeof id, "%s", mid);
        json_object_put(doc);
        made = 1;
        /* Another process may have created one for the same key meanwhile:
         * the oldest wins everywhere, the younger is deleted by its maker. */
        if (osb_api_find(st, call, args->key_hash, &list, &err) == SBX_OK) {
            json_object *first = oldest_owned(list, args->key_hash);
            const char *fid = first ? sbxp_json_str(first, "id") : NULL;
            if (fid && strcmp(fid, id) != 0) {
                char mine[128];
                snprintf(mine, sizeof mine, "%s", id);
                snprintf(id, sizeof id, "%s", fid);
                made = 0;
                if (osb_api_delete(st, NULL, mine, &err) != SBX_OK)
                    st->host->log(st->host, SBX_LOG_WARN,
                                  "opensandbox: deleting duplicate sandbox %s: %s", mine,
                                  err.message);
            }
            json_object_put(list);
        }
    }
    if (snprintf(ref, SBX_REF_MAX, OSB_PROVIDER ":%s", id) >= SBX_REF_MAX)
        return osb_error(st, call, SBX_E_PROTOCOL, "opensandbox: sandbox id too long");
    json_object *doc = NULL;
    rc = wait_running(st, call, id, &doc);
    if (rc != SBX_OK)
        return rc;
    sbx_sandbox *sb = NULL;
    rc = open_handle(st, call, id, args->key_hash, &sb);
    /* An adopted sandbox may have drifted like any attached one. */
    if (rc == SBX_OK && !made)
        rc = osb_egress_reconcile(sb, call, doc);
    if (rc == SBX_OK)
        osb_ports_load(sb, doc);
    json_object_put(doc);
    if (rc != SBX_OK) {
        osb_release(sb);
        return rc;
    }
    rc = osb_mkdirs(sb, call, st->cfg.workspace, &err);
    if (rc != SBX_OK)
        rc = osb_service_report(sb, call, &err, "creating the workspace %s", st->cfg.workspace);
    if (rc == SBX_OK)
        rc = osb_outputs_prepare(sb, call);
    if (rc == SBX_OK)
        rc = osb_memory_create(sb, call, args);
    if (rc != SBX_OK) {
        osb_release(sb);
        return rc;
    }
    *out = sb;
    return SBX_OK;
}

/* GET the sandbox of ref and check its owner; *doc (may be NULL) keeps it. */
static int check_owner(struct osb_state *st, sbx_call *call, const char *ref, const char *key_hash,
                       char *id, size_t cap, json_object **doc)
{
    int rc = parse_ref(st, call, ref, id, cap);
    if (rc != SBX_OK)
        return rc;
    json_object *s = NULL;
    sbxp_http_error err;
    rc = osb_api_get(st, call, id, &s, &err);
    if (rc == SBX_E_NOT_FOUND)
        return osb_error(st, call, SBX_E_NOT_FOUND, "opensandbox: sandbox %s no longer exists", id);
    if (rc != SBX_OK)
        return osb_report(st, call, &err, "looking up sandbox %s", id);
    if (!owned_by(s, key_hash)) {
        json_object_put(s);
        return osb_error(st, call, SBX_E_DENIED,
                         "opensandbox: sandbox %s belongs to another session key", id);
    }
    if (doc)
        *doc = s;
    else
        json_object_put(s);
    return SBX_OK;
}

int osb_attach(void *state, sbx_call *call, const struct sbx_attach_args *args, sbx_sandbox **out)
{
    struct osb_state *st = state;
    *out = NULL;
    char id[128];
    int rc = check_owner(st, call, args->ref, args->key_hash, id, sizeof id, NULL);
    if (rc != SBX_OK)
        return rc;
    json_object *doc = NULL;
    if ((rc = wait_running(st, call, id, &doc)) != SBX_OK)
        return rc;
    sbx_sandbox *sb = NULL;
    rc = open_handle(st, call, id, args->key_hash, &sb);
    if (rc == SBX_OK)
        rc = osb_egress_reconcile(sb, call, doc);
    if (rc == SBX_OK)
        osb_ports_load(sb, doc);
    json_object_put(doc);
    if (rc == SBX_OK)
        rc = osb_memory_open(sb, call);
    if (rc != SBX_OK) {
        osb_release(sb);
        return rc;
    }
    /* Attaching is using: push the expiration out. */
    sbxp_http_error err;
    if (osb_api_renew(st, call, id, &err) != SBX_OK)
        st->host->log(st->host, SBX_LOG_WARN, "opensandbox: renewing sandbox %s: %s", id,
                      err.message);
    *out = sb;
    return SBX_OK;
}

int osb_destroy(void *state, sbx_call *call, const struct sbx_destroy_args *args)
{
    struct osb_state *st = state;
    char id[128];
    int rc = check_owner(st, call, args->ref, args->key_hash, id, sizeof id, NULL);
    if (rc != SBX_OK && rc != SBX_E_NOT_FOUND)
        return rc;
    sbxp_http_error err;
    if (rc == SBX_OK && (rc = osb_api_delete(st, call, id, &err)) != SBX_OK)
        return osb_report(st, call, &err, "deleting sandbox %s", id);
    /* gone either way: its memory state goes with it */
    sbxp_rmem_forget(st->host, OSB_PROVIDER, st->cfg.state_dir, id);
    return SBX_OK;
}

const char *osb_root(sbx_sandbox *sb)
{
    return sb->st->cfg.workspace;
}

void osb_release(sbx_sandbox *sb)
{
    if (!sb)
        return;
    osb_service_close(&sb->execd);
    osb_service_close(&sb->egress);
    sbxp_rmem_free(&sb->mem);
    pthread_mutex_destroy(&sb->lock);
    free(sb);
}

void osb_keep_alive(sbx_sandbox *sb, sbx_call *call)
{
    struct osb_state *st = sb->st;
    int64_t now = sbxs_now_ms();
    pthread_mutex_lock(&sb->lock);
    int due = now - sb->renewed_ms > st->cfg.lifetime_s * 1000 / 2;
    if (due)
        sb->renewed_ms = now; /* one thread renews; the others go on */
    pthread_mutex_unlock(&sb->lock);
    if (!due)
        return;
    sbxp_http_error err;
    if (osb_api_renew(st, call, sb->id, &err) != SBX_OK)
        st->host->log(st->host, SBX_LOG_WARN, "opensandbox: renewing sandbox %s: %s", sb->id,
                      err.message);
}
