/*
 * test_mcp_sandbox.c - the sandbox tools and the trust model of manifests
 * through `sbx mcp --tools sdk` on the local provider: create, connect
 * (with and without the right manifest_digest), list, destroy; a manifest
 * naming host sources (local_dir, local_file, git_repo, a `source` key),
 * absolute paths or ".." is refused with a tool error naming it, and
 * nothing is provisioned.
 */
#include "mcp_harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#define T 30000

static json_object *call_ok(struct mcp_client *c, int id, const char *tool, const char *args)
{
    json_object *r = mcp_call(c, id, tool, args, T, NULL);
    cr_assert(r && !mcp_is_error(r), "%s %s: %s", tool, args, mcp_text(r));
    return r;
}

Test(sandbox, create_list_connect_destroy)
{
    struct mcp_client c;
    mcp_start(&c, NULL);
    json_object *r = call_ok(&c, 1, "create_sandbox", "{}");
    char name[64];
    snprintf(name, sizeof name, "%s", mcp_sc_str(r, "sandbox"));
    cr_assert_eq(strncmp(name, "mcp-", 4), 0, "a generated name: %s", name);
    cr_assert_str_eq(mcp_sc_str(r, "provider"), "local");
    cr_assert(json_object_get_boolean(mcp_sc(r, "created")));
    json_object_put(r);
    r = call_ok(&c, 2, "create_sandbox", "{\"sandbox\":\"b\"}");
    json_object_put(r);
    r = call_ok(&c, 3, "create_sandbox", "{\"sandbox\":\"b\"}");
    cr_assert(!json_object_get_boolean(mcp_sc(r, "created")), "found, not created");
    json_object_put(r);
    r = call_ok(&c, 4, "list_sandboxes", "{\"limit\":1}");
    cr_assert_eq(json_object_array_length(mcp_sc(r, "sandboxes")), 1);
    cr_assert(json_object_get_boolean(mcp_sc(r, "truncated")));
    json_object_put(r);
    r = call_ok(&c, 5, "list_sandboxes", "{}");
    cr_assert_eq(json_object_array_length(mcp_sc(r, "sandboxes")), 2);
    cr_assert(!json_object_get_boolean(mcp_sc(r, "truncated")));
    json_object_put(r);
    r = call_ok(&c, 6, "connect_sandbox", "{\"sandbox\":\"b\"}");
    cr_assert_str_eq(mcp_sc_str(r, "provider"), "local");
    json_object_put(r);
    r = mcp_call(&c, 7, "connect_sandbox", "{\"sandbox\":\"nope\"}", T, NULL);
    cr_assert(mcp_is_error(r), "connect never creates");
    json_object_put(r);
    r = call_ok(&c, 8, "destroy_sandbox", "{\"sandbox\":\"b\"}");
    cr_assert(json_object_get_boolean(mcp_sc(r, "destroyed")));
    json_object_put(r);
    r = mcp_call(&c, 9, "destroy_sandbox", "{\"sandbox\":\"b\"}", T, NULL);
    cr_assert(mcp_is_error(r));
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

Test(sandbox, manifest_and_resume_digest)
{
    struct mcp_client c;
    mcp_start(&c, (const char *const[]){"--tools", "sdk", NULL});
    json_object *r = call_ok(&c, 1, "create_sandbox",
                             "{\"sandbox\":\"m\",\"manifest\":{\"version\":1,\"entries\":["
                             "{\"path\":\"README.md\",\"type\":\"file\",\"content\":\"hi\\n\"},"
                             "{\"path\":\"out\",\"type\":\"dir\",\"mode\":493}]}}");
    const char *d = mcp_sc_str(r, "manifest_digest");
    cr_assert(d && strlen(d) == 64, "%s", mcp_text(r));
    char digest[65];
    snprintf(digest, sizeof digest, "%s", d);
    json_object_put(r);
    r = call_ok(&c, 2, "exec_command", "{\"sandbox\":\"m\",\"cmd\":\"cat README.md; test -d out\"}");
    cr_assert_str_eq(mcp_sc_str(r, "output"), "hi\n");
    cr_assert_eq(json_object_get_int(mcp_sc(r, "exit_code")), 0);
    json_object_put(r);
    char args[256];
    snprintf(args, sizeof args, "{\"sandbox\":\"m\",\"manifest_digest\":\"%s\"}", digest);
    r = call_ok(&c, 3, "connect_sandbox", args);
    cr_assert_str_eq(mcp_sc_str(r, "manifest_digest"), digest);
    json_object_put(r);
    r = mcp_call(&c, 4, "connect_sandbox",
                 "{\"sandbox\":\"m\",\"manifest_digest\":\"00000000000000000000000000000000000"
                 "00000000000000000000000000000\"}",
                 T, NULL);
    cr_assert(mcp_is_error(r), "a resume with another manifest is refused");
    cr_assert(strstr(mcp_text(r), "does not match"), "%s", mcp_text(r));
    json_object_put(r);
    /* resume with the manifest itself, here in the SDK's shape: the digest
     * is of what it declares, so it matches */
    r = call_ok(&c, 41, "connect_sandbox",
                "{\"sandbox\":\"m\",\"manifest\":{\"version\":1,\"entries\":{\"out\":{"
                "\"type\":\"dir\",\"permissions\":493},\"README.md\":{\"type\":\"file\","
                "\"content\":\"hi\\n\"}}}}");
    cr_assert_str_eq(mcp_sc_str(r, "manifest_digest"), digest);
    json_object_put(r);
    r = mcp_call(&c, 42, "connect_sandbox",
                 "{\"sandbox\":\"m\",\"manifest\":{\"version\":1,\"entries\":{\"README.md\":{"
                 "\"type\":\"file\",\"content\":\"changed\\n\"}}}}",
                 T, NULL);
    cr_assert(mcp_is_error(r) && strstr(mcp_text(r), "resume refused"), "%s", mcp_text(r));
    json_object_put(r);
    snprintf(args, sizeof args,
             "{\"sandbox\":\"m\",\"manifest_digest\":\"%s\",\"manifest\":{\"version\":1}}",
             digest);
    r = mcp_call(&c, 43, "connect_sandbox", args, T, NULL);
    cr_assert(mcp_is_error(r) && strstr(mcp_text(r), "not both"), "%s", mcp_text(r));
    json_object_put(r);
    /* a host source hidden in a dir's children is refused like a top one */
    r = mcp_call(&c, 44, "create_sandbox",
                 "{\"sandbox\":\"m2\",\"manifest\":{\"version\":1,\"entries\":{\"a\":{"
                 "\"type\":\"dir\",\"children\":{\"x\":{\"type\":\"local_dir\",\"src\":"
                 "\"/etc\"}}}}}}",
                 T, NULL);
    cr_assert(mcp_is_error(r) && strstr(mcp_text(r), "host sources"), "%s", mcp_text(r));
    json_object_put(r);
    r = mcp_call(&c, 45, "create_sandbox",
                 "{\"sandbox\":\"m2\",\"manifest\":{\"version\":1,\"entries\":{\"a\":{"
                 "\"type\":\"file\",\"content\":\"x\",\"src\":\"/etc/passwd\"}}}}",
                 T, NULL);
    cr_assert(mcp_is_error(r) && strstr(mcp_text(r), "not allowed"), "%s", mcp_text(r));
    json_object_put(r);
    r = call_ok(&c, 5, "apply_manifest",
                "{\"sandbox\":\"m\",\"manifest\":{\"version\":1,\"entries\":[{\"path\":"
                "\"later.txt\",\"type\":\"file\",\"content\":\"x\"}]}}");
    cr_assert_eq(json_object_get_int(mcp_sc(r, "entries")), 1);
    json_object_put(r);
    r = call_ok(&c, 6, "exec_command", "{\"sandbox\":\"m\",\"cmd\":\"cat later.txt\"}");
    cr_assert_str_eq(mcp_sc_str(r, "output"), "x");
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}

/* A manifest that must be refused: a tool error containing `want`, and
 * no sandbox named `key` afterwards. */
static void refused(struct mcp_client *c, int id, const char *manifest, const char *want)
{
    char args[2048];
    snprintf(args, sizeof args, "{\"sandbox\":\"h%d\",\"manifest\":%s}", id, manifest);
    json_object *r = mcp_call(c, id, "create_sandbox", args, T, NULL);
    cr_assert(r, "a JSON-RPC error instead of a tool error for %s", manifest);
    cr_assert(mcp_is_error(r), "accepted: %s", manifest);
    cr_assert(strstr(mcp_text(r), want), "%s: %s", manifest, mcp_text(r));
    json_object_put(r);
    r = mcp_call(c, id + 1000, "list_sandboxes", "{}", T, NULL);
    cr_assert_eq(json_object_array_length(mcp_sc(r, "sandboxes")), 0,
                 "a sandbox was provisioned for %s", manifest);
    json_object_put(r);
}

Test(sandbox, hostile_manifests_are_refused)
{
    struct mcp_client c;
    mcp_start(&c, (const char *const[]){"--tools", "sdk", NULL});
    int before = cli_dir_entries(c.env.ws_root);
    refused(&c, 1, "{\"version\":1,\"entries\":[{\"path\":\"x\",\"type\":\"local_dir\","
                   "\"source\":\"/etc\"}]}",
            "local_dir");
    refused(&c, 2, "{\"version\":1,\"entries\":[{\"path\":\"x\",\"type\":\"local_file\","
                   "\"source\":\"/etc/passwd\"}]}",
            "local_file");
    refused(&c, 3, "{\"version\":1,\"entries\":[{\"path\":\"x\",\"type\":\"git_repo\","
                   "\"url\":\"file:///etc\"}]}",
            "git_repo");
    refused(&c, 4, "{\"version\":1,\"entries\":[{\"path\":\"x\",\"type\":\"file\","
                   "\"source\":\"/etc/passwd\"}]}",
            "\"source\" is not allowed");
    refused(&c, 5, "{\"version\":1,\"entries\":[{\"path\":\"/etc/x\",\"type\":\"file\","
                   "\"content\":\"\"}]}",
            "/etc/x");
    refused(&c, 6, "{\"version\":1,\"entries\":[{\"path\":\"../x\",\"type\":\"file\","
                   "\"content\":\"\"}]}",
            "..");
    refused(&c, 7, "{\"version\":1,\"base_dir\":\"/\",\"entries\":[]}", "base_dir");
    refused(&c, 8, "{\"version\":1,\"entries\":[{\"path\":\"x\"}]}", "type");
    refused(&c, 9, "{\"version\":1,\"entries\":[7]}", "entries[0]");
    cr_assert_eq(cli_dir_entries(c.env.ws_root), before, "nothing was written");
    cr_assert_eq(mcp_stop(&c, T), 0);
}

/* docker (users): run_as holds for every call; another user is refused. */
Test(docker, run_as_cannot_be_stepped_around)
{
    struct mcp_client c;
    mcp_start_docker(&c, (const char *const[]){"--tools", "sdk", NULL});
    json_object *r = call_ok(&c, 1, "create_sandbox",
                             "{\"sandbox\":\"mcp-sandbox-docker\",\"manifest\":{\"version\":1,\"users\":[{\"name\":"
                             "\"agent\"}],\"run_as\":\"agent\",\"entries\":[{\"path\":\"ro\","
                             "\"type\":\"dir\",\"mode\":365},{\"path\":\"ro/f\",\"type\":\"file\","
                             "\"content\":\"x\",\"mode\":292}]}}");
    json_object_put(r);
    r = call_ok(&c, 2, "exec_command", "{\"sandbox\":\"mcp-sandbox-docker\",\"cmd\":\"id -un\"}");
    cr_assert_str_eq(mcp_sc_str(r, "output"), "agent\n");
    json_object_put(r);
    r = call_ok(&c, 3, "exec_command", "{\"sandbox\":\"mcp-sandbox-docker\",\"cmd\":\"id -un\",\"user\":\"agent\"}");
    cr_assert_str_eq(mcp_sc_str(r, "output"), "agent\n");
    json_object_put(r);
    r = mcp_call(&c, 4, "exec_command", "{\"sandbox\":\"mcp-sandbox-docker\",\"cmd\":\"echo y > ro/f\",\"user\":"
                                        "\"root\"}",
                 T, NULL);
    cr_assert(mcp_is_error(r), "root was allowed");
    cr_assert(strstr(mcp_text(r), "runs as agent"), "%s", mcp_text(r));
    json_object_put(r);
    r = call_ok(&c, 5, "exec_command", "{\"sandbox\":\"mcp-sandbox-docker\",\"cmd\":\"cat ro/f\"}");
    cr_assert_str_eq(mcp_sc_str(r, "output"), "x", "the fixture is unchanged");
    json_object_put(r);
    r = call_ok(&c, 6, "destroy_sandbox", "{\"sandbox\":\"mcp-sandbox-docker\"}");
    json_object_put(r);
    cr_assert_eq(mcp_stop(&c, T), 0);
}
