/*
 * tools_sandbox.c - create_sandbox, connect_sandbox, destroy_sandbox,
 * list_sandboxes (docs/MCP.md). A sandbox is an sbx session: its key is
 * what every other tool names. The provider and the spec are the
 * operator's (--provider, sbx.yaml's session section); a call chooses only
 * the key (and, with --tools sdk, an inline manifest: tools_sdk.c).
 */
#include "internal.h"
#include "utf8.h"

#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#define KEY_SCHEMA "{\"type\":\"string\",\"minLength\":1,\"maxLength\":1024,"

/* "mcp-" and 16 random hex digits. */
static int new_key(char out[32], sbx_error *err)
{
    unsigned char r[8];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
        return sbx_error_set(err, SBX_E_IO, "cannot make a sandbox name: getrandom failed");
    snprintf(out, 32, "mcp-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
             r[5], r[6], r[7]);
    return SBX_OK;
}

int sbxm_create_sandbox(struct sbxm_call *c, json_object *manifest_arg, json_object **result,
                        sbx_error *err)
{
    struct sbxm_server *srv = c->srv;
    char generated[32];
    const char *key = sbxm_arg_str(c, "sandbox");
    int rc;
    if (!key) {
        if ((rc = new_key(generated, err)) != SBX_OK)
            return rc;
        key = generated;
    }
    sbx_manifest *mf = NULL;
    if (manifest_arg && (rc = sbxm_manifest_from_arg(manifest_arg, &mf, err)) != SBX_OK)
        return rc;
    struct sbx_session_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.size = sizeof spec;
    spec.provider = srv->opts.provider;
    spec.manifest = mf;
    struct sbx_acquire_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    sbx_handle *h = NULL;
    sbxm_progress(c, 0, 1, "provisioning the sandbox");
    rc = sbx_session_acquire(srv->m, key, &spec, c->cancel, &h, &info, err);
    char digest[SBX_KEY_HASH_LEN + 1] = "";
    if (mf)
        snprintf(digest, sizeof digest, "%s", sbx_manifest_digest(mf));
    sbx_manifest_free(mf);
    if (rc != SBX_OK)
        return rc;
    if (info.spec_changed && manifest_arg) {
        sbx_release(h);
        return sbx_error_set(err, SBX_E_EXISTS,
                             "sandbox \"%.200s\" exists with another spec (recorded "
                             "%.12s): the manifest is not applied; destroy it first",
                             key, info.recorded_spec_hash[0] ? info.recorded_spec_hash
                                                             : "none");
    }
    struct sbxm_handle_ref *ref;
    sbxm_handles_adopt(srv->handles, key, h, &ref);
    sbxm_call_keep(c, ref);
    json_object *r = json_object_new_object();
    json_object_object_add(r, "sandbox", json_object_new_string(key));
    json_object_object_add(r, "provider", json_object_new_string(info.provider));
    json_object_object_add(r, "created", json_object_new_boolean(info.created));
    json_object_object_add(r, "manifest_digest",
                           digest[0] ? json_object_new_string(digest) : NULL);
    *result = r;
    return SBX_OK;
}

static int create_sandbox(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    return sbxm_create_sandbox(c, NULL, result, err);
}

static int connect_sandbox(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    const char *key = sbxm_arg_str(c, "sandbox");
    const char *want = sbxm_arg_str(c, "manifest_digest");
    struct sbx_session_state st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    int rc = sbx_session_state(c->srv->m, key, &st, err);
    if (rc == SBX_E_NOT_FOUND) {
        char cause[SBX_ERROR_MAX]; /* libsbx names the key's hash, not the key */
        snprintf(cause, sizeof cause, "%s", err->message);
        return sbx_error_set(err, rc, "sandbox \"%.200s\": %s", key, cause);
    }
    if (rc != SBX_OK)
        return rc;
    if (st.deleting)
        return sbx_error_set(err, SBX_E_DENIED, "sandbox \"%.200s\" is being destroyed",
                             key);
    json_object *manifest_arg = NULL;
    json_object_object_get_ex(c->args, "manifest", &manifest_arg);
    if (manifest_arg && want)
        return sbx_error_set(err, SBX_E_INVALID, "give manifest or manifest_digest, not both");
    sbx_handle *h;
    if (manifest_arg) {
        /* resume with the trusted manifest itself: libsbx compares its
         * digest with the recorded one */
        sbx_manifest *mf = NULL;
        if ((rc = sbxm_manifest_from_arg(manifest_arg, &mf, err)) != SBX_OK)
            return rc;
        rc = sbx_session_resume(c->srv->m, key, mf, c->cancel, &h, err);
        sbx_manifest_free(mf);
        if (rc != SBX_OK)
            return rc;
        struct sbxm_handle_ref *ref;
        sbxm_handles_adopt(c->srv->handles, key, h, &ref);
        sbxm_call_keep(c, ref);
    }
    /* resume: only with the digest of the manifest it was made with */
    else if (want && strcmp(want, st.manifest_digest))
        return sbx_error_set(err, SBX_E_DENIED,
                             "sandbox \"%.200s\" was provisioned %s%.12s%s: "
                             "manifest_digest %.12s does not match, refused",
                             key, st.manifest_digest[0] ? "with manifest " : "without a manifest",
                             st.manifest_digest, st.manifest_digest[0] ? "..." : "", want);
    else if ((rc = sbxm_handle(c, key, &h, err)) != SBX_OK)
        return rc;
    json_object *r = json_object_new_object();
    json_object_object_add(r, "sandbox", json_object_new_string(key));
    json_object_object_add(r, "provider", json_object_new_string(st.provider));
    json_object_object_add(r, "manifest_digest", st.manifest_digest[0]
                                                     ? json_object_new_string(st.manifest_digest)
                                                     : NULL);
    json_object_object_add(r, "run_as",
                           st.run_as[0] ? json_object_new_string(st.run_as) : NULL);
    *result = r;
    return SBX_OK;
}

static int destroy_sandbox(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    const char *key = sbxm_arg_str(c, "sandbox");
    /* the handles go first: nothing of ours keeps using a dying sandbox */
    sbxm_handles_drop(c->srv->handles, key);
    int rc = sbx_session_delete(c->srv->m, key, c->cancel, err);
    if (rc != SBX_OK)
        return rc;
    sbxm_proc_forget(c->srv, key, NULL);
    json_object *r = json_object_new_object();
    json_object_object_add(r, "sandbox", json_object_new_string(key));
    json_object_object_add(r, "destroyed", json_object_new_boolean(true));
    *result = r;
    return SBX_OK;
}

struct list_state {
    json_object *arr;
    size_t skipped;
};

static int list_one(void *ud, const struct sbx_session_info *info)
{
    struct list_state *ls = ud;
    /* a key that is not UTF-8 (made outside MCP) cannot be named in JSON */
    if (!sbxs_utf8_valid(info->session_key, strlen(info->session_key))) {
        ls->skipped++;
        return 0;
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "sandbox", json_object_new_string(info->session_key));
    json_object_object_add(o, "provider", json_object_new_string(info->provider));
    json_object_object_add(o, "created_at", json_object_new_int64(info->created_at));
    json_object_object_add(o, "deleting", json_object_new_boolean(info->deleting));
    json_object_array_add(ls->arr, o);
    return 0;
}

static int list_sandboxes(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    int64_t limit = sbxm_arg_int(c, "limit", 100);
    struct list_state ls = {json_object_new_array(), 0};
    bool more = false;
    int rc = sbx_session_list(c->srv->m, NULL, (size_t)limit, list_one, &ls, &more, err);
    if (rc != SBX_OK) {
        json_object_put(ls.arr);
        return rc;
    }
    json_object *r = json_object_new_object();
    json_object_object_add(r, "sandboxes", ls.arr);
    json_object_object_add(r, "truncated", json_object_new_boolean(more));
    if (ls.skipped)
        json_object_object_add(r, "skipped_non_utf8", json_object_new_int64((int64_t)ls.skipped));
    *result = r;
    return SBX_OK;
}

const struct sbxm_tool sbxm_tools_sandbox[] = {
    {
        .name = "create_sandbox",
        .title = "Create a sandbox",
        .description = "Create (or find) the sandbox named `sandbox` on the operator's "
                       "provider; a name is generated when none is given. Returns the "
                       "name every other tool takes.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA
                        "\"description\":\"the sandbox's name (an sbx session key)\"}},"
                        "\"additionalProperties\":false}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":{\"type\":"
                         "\"string\"},\"provider\":{\"type\":\"string\"},\"created\":"
                         "{\"type\":\"boolean\"},\"manifest_digest\":{\"type\":[\"string\","
                         "\"null\"]}},\"required\":[\"sandbox\",\"provider\",\"created\"]}",
        .group = SBXM_TOOLS_AGENT,
        .read_only = false,
        .run = create_sandbox,
    },
    {
        .name = "connect_sandbox",
        .title = "Connect to a sandbox",
        .description = "Connect to the existing sandbox `sandbox` (never creates one). "
                       "With manifest (the trusted manifest object) or manifest_digest, "
                       "refused unless the sandbox was provisioned with that manifest "
                       "(resume).",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA
                        "\"description\":\"the sandbox's name\"},\"manifest_digest\":"
                        "{\"type\":\"string\",\"maxLength\":64,\"description\":\"the "
                        "manifest_digest create_sandbox returned\"},\"manifest\":{\"type\":"
                        "\"object\",\"description\":\"the manifest the sandbox was "
                        "created with (inline entries only): its digest must be the "
                        "recorded one\"}},\"required\":[\"sandbox\"],"
                        "\"additionalProperties\":false}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":{\"type\":"
                         "\"string\"},\"provider\":{\"type\":\"string\"},\"manifest_digest\":"
                         "{\"type\":[\"string\",\"null\"]},\"run_as\":{\"type\":[\"string\","
                         "\"null\"]}},\"required\":[\"sandbox\",\"provider\"]}",
        .group = SBXM_TOOLS_AGENT,
        .read_only = true,
        .run = connect_sandbox,
    },
    {
        .name = "destroy_sandbox",
        .title = "Destroy a sandbox",
        .description = "Destroy the sandbox `sandbox` and forget it.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA
                        "\"description\":\"the sandbox's name\"}},\"required\":"
                        "[\"sandbox\"],\"additionalProperties\":false}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":{\"type\":"
                         "\"string\"},\"destroyed\":{\"type\":\"boolean\"}},\"required\":"
                         "[\"sandbox\",\"destroyed\"]}",
        .group = SBXM_TOOLS_AGENT,
        .read_only = false,
        .run = destroy_sandbox,
    },
    {
        .name = "list_sandboxes",
        .title = "List sandboxes",
        .description = "List the sandboxes of the store, in name order, at most `limit`.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"limit\":{\"type\":"
                        "\"integer\",\"minimum\":1,\"maximum\":1000,\"description\":"
                        "\"at most this many (default 100)\"}},\"additionalProperties\":"
                        "false}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"sandboxes\":{\"type\":"
                         "\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
                         "\"sandbox\":{\"type\":\"string\"},\"provider\":{\"type\":"
                         "\"string\"},\"created_at\":{\"type\":\"integer\"},\"deleting\":"
                         "{\"type\":\"boolean\"}}}},\"truncated\":{\"type\":\"boolean\"}},"
                         "\"required\":[\"sandboxes\",\"truncated\"]}",
        .group = SBXM_TOOLS_AGENT,
        .read_only = true,
        .run = list_sandboxes,
    },
    {0},
};
