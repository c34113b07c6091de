/*
 * tools_sdk.c - the tools --tools sdk adds for the OpenAI Agents SDK
 * client (clients/openai-agents/): create_sandbox with an inline manifest,
 * apply_manifest, add_user (docs/MCP.md). Manifests given here pass
 * sbxm_manifest_check first: inline entries, users, groups and run_as
 * only.
 */
#include "internal.h"

#include <string.h>

#define KEY_SCHEMA "{\"type\":\"string\",\"minLength\":1,\"maxLength\":1024}"
#define NAME_SCHEMA "{\"type\":\"string\",\"minLength\":1,\"maxLength\":32}"

static json_object *arg(struct sbxm_call *c, const char *key)
{
    json_object *v = NULL;
    json_object_object_get_ex(c->args, key, &v);
    return v;
}

static int create_sandbox(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    return sbxm_create_sandbox(c, arg(c, "manifest"), result, err);
}

static int apply_manifest(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    sbx_manifest *mf;
    json_object *mj = arg(c, "manifest");
    int rc = sbxm_manifest_from_arg(mj, &mf, err);
    if (rc != SBX_OK)
        return rc;
    sbx_handle *h;
    rc = sbxm_handle(c, sbxm_arg_str(c, "sandbox"), &h, err);
    if (rc == SBX_OK)
        rc = sbx_manifest_apply(h, mf, c->cancel, err);
    sbx_manifest_free(mf);
    if (rc != SBX_OK)
        return rc;
    json_object *entries = NULL;
    json_object_object_get_ex(mj, "entries", &entries);
    json_object *r = json_object_new_object();
    json_object_object_add(r, "entries",
                           json_object_new_int64(entries ? (int64_t)json_object_array_length(
                                                               entries)
                                                         : 0));
    *result = r;
    return SBX_OK;
}

#define ADD_USER_GROUPS_MAX 16

static int add_user(struct sbxm_call *c, json_object **result, sbx_error *err)
{
    sbx_handle *h;
    int rc = sbxm_handle(c, sbxm_arg_str(c, "sandbox"), &h, err);
    if (rc != SBX_OK)
        return rc;
    const char *groups[ADD_USER_GROUPS_MAX + 1] = {NULL};
    json_object *ga = arg(c, "groups");
    size_t ng = ga ? json_object_array_length(ga) : 0;
    for (size_t i = 0; i < ng && i < ADD_USER_GROUPS_MAX; i++) {
        groups[i] = json_object_get_string(json_object_array_get_idx(ga, i));
        struct sbx_group_spec g = {sizeof g, 0, groups[i]};
        if ((rc = sbx_group_add(h, &g, c->cancel, err)) != SBX_OK)
            return rc;
    }
    struct sbx_user_spec u;
    memset(&u, 0, sizeof u);
    u.size = sizeof u;
    u.uid = (uint32_t)sbxm_arg_int(c, "uid", 0);
    u.name = sbxm_arg_str(c, "name");
    u.groups = ng ? groups : NULL;
    if ((rc = sbx_user_add(h, &u, c->cancel, err)) != SBX_OK)
        return rc;
    json_object *r = json_object_new_object();
    json_object_object_add(r, "name", json_object_new_string(u.name));
    *result = r;
    return SBX_OK;
}

const struct sbxm_tool sbxm_tools_sdk[] = {
    {
        .name = "create_sandbox",
        .title = "Create a sandbox",
        .description = "Create (or find) the sandbox named `sandbox` on the operator's "
                       "provider, with an optional sbx manifest (inline file and dir "
                       "entries, environment, users, groups, run_as; no host sources) "
                       "applied when it is created. Returns the name every other tool "
                       "takes and the manifest's digest for connect_sandbox.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA
                        ",\"manifest\":{\"type\":\"object\",\"description\":\"an sbx "
                        "manifest (docs/MANIFEST.md): version 1, entries of type file or "
                        "dir, environment, users, groups, run_as\"}},"
                        "\"additionalProperties\":false}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":{\"type\":"
                         "\"string\"},\"provider\":{\"type\":\"string\"},\"created\":"
                         "{\"type\":\"boolean\"},\"manifest_digest\":{\"type\":[\"string\","
                         "\"null\"]}},\"required\":[\"sandbox\",\"provider\",\"created\"]}",
        .group = SBXM_TOOLS_SDK,
        .read_only = false,
        .run = create_sandbox,
    },
    {
        .name = "apply_manifest",
        .title = "Apply a manifest",
        .description = "Materialize an sbx manifest (inline file and dir entries, users, "
                       "groups) in the sandbox, as the sandbox's default user.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA
                        ",\"manifest\":{\"type\":\"object\"}},\"required\":[\"sandbox\","
                        "\"manifest\"],\"additionalProperties\":false}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"entries\":{\"type\":"
                         "\"integer\"}},\"required\":[\"entries\"]}",
        .group = SBXM_TOOLS_SDK,
        .read_only = false,
        .run = apply_manifest,
    },
    {
        .name = "add_user",
        .title = "Add a user",
        .description = "Make a user in the sandbox (with its groups, made when missing); "
                       "needs a provider with users.",
        .input_schema = "{\"type\":\"object\",\"properties\":{\"sandbox\":" KEY_SCHEMA
                        ",\"name\":" NAME_SCHEMA ",\"uid\":{\"type\":\"integer\","
                        "\"minimum\":0,\"maximum\":2147483647},\"groups\":{\"type\":"
                        "\"array\",\"maxItems\":16,\"items\":" NAME_SCHEMA "}},"
                        "\"required\":[\"sandbox\",\"name\"],\"additionalProperties\":"
                        "false}",
        .output_schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":"
                         "\"string\"}},\"required\":[\"name\"]}",
        .group = SBXM_TOOLS_SDK,
        .read_only = false,
        .run = add_user,
    },
    {0},
};
